"""The calibration file of an int8 export: one request's text a line (`bert-export --calibration_file`)."""

from keras_bert_impl.errors import InputFileError
from keras_bert_impl.io import read_utf8_lines


def read_calibration_texts(path):
    """The texts of a calibration file: one request's text a line, blank lines skipped.

    Args:
        path: A UTF-8 text file.

    Returns:
        A tuple of strings (each line without its line break and outer spaces).

    Raises:
        InputFileError: a missing file, invalid UTF-8 (naming `path:line`),
            or no text at all.
    """
    texts = tuple(text.strip() for _, text in read_utf8_lines(path, kind="calibration file") if text.strip())
    if not texts:
        raise InputFileError(f"{path}: the calibration file holds no text (one text a line)")
    return texts
