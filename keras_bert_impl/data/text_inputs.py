"""Texts to predict, each with a key that names where it came from.

One pure reader per file format, each yielding `KeyedText(key, text, text_b)`:
`txt` (one text per line, blank lines skipped), `csv`/`tsv`/`jsonl` (named
columns, through `column_files`), `tfrecord` (serialized `tf.Example`s with a
bytes feature per text). The key is `file:line` (`file:record` for
TFRecords, counted from 1) unless a key column names one. Every bad input is
an `InputFileError` naming `file:line`: undecodable UTF-8, a missing column or
feature, a malformed row.

Example:
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "reviews.txt")
>>> _ = open(path, "w").write("a fine film\\n\\ndull\\n")
>>> [(os.path.basename(k), t) for k, t, _ in read_keyed_texts(path)]
[('reviews.txt:1', 'a fine film'), ('reviews.txt:3', 'dull')]
"""

import collections

from keras_bert_impl.data.column_files import delimited_rows, jsonl_rows, text_value
from keras_bert_impl.data.tfrecord_files import read_records
from keras_bert_impl.errors import InputFileError
from keras_bert_impl.io import read_utf8_lines

INPUT_FORMATS = ("txt", "csv", "tsv", "jsonl", "tfrecord")
_SUFFIXES = {".txt": "txt", ".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl",
             ".tfrecord": "tfrecord", ".tfrecords": "tfrecord", ".tfrecord.gz": "tfrecord"}

KeyedText = collections.namedtuple("KeyedText", ["key", "text", "text_b"])


def input_format_of(path, input_format=None):
    """`input_format` if given, else the format that `path`'s name ends with.

    Raises:
        InputFileError: neither says a format of `INPUT_FORMATS`.

    Example:
    >>> input_format_of("gs://bucket/reviews-00001.jsonl")
    'jsonl'
    """
    if input_format:
        if input_format not in INPUT_FORMATS:
            raise InputFileError(f"input format {input_format!r}: expected one of {', '.join(INPUT_FORMATS)}")
        return input_format
    name = path.rsplit("/", 1)[-1].lower()
    for suffix, found in _SUFFIXES.items():
        if name.endswith(suffix):
            return found
    raise InputFileError(f"{path}: cannot tell the format from the name; give --input_format ({', '.join(INPUT_FORMATS)})")


def _column(row, column, source):
    if column not in row:
        raise InputFileError(f"{source}: no column {column!r} (has {', '.join(map(repr, row))})")
    return text_value(row[column], f"{source}: column {column!r}")


def _feature_text(example, name, source):
    feature = example.features.feature.get(name)
    if feature is None or feature.WhichOneof("kind") != "bytes_list" or len(feature.bytes_list.value) != 1:
        raise InputFileError(f"{source}: no feature {name!r} holding one bytes value (has {', '.join(sorted(example.features.feature))})")
    try:
        return feature.bytes_list.value[0].decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputFileError(f"{source}: feature {name!r} is not valid UTF-8 (byte {e.start})") from None


def _example_rows(path, text_column, text_b_column, key_column):
    from tensorflow.core.example import example_pb2  # the tf.Example proto; TensorFlow is a requirement

    for number, record in enumerate(read_records(path), start=1):
        source = f"{path}:{number}"
        example = example_pb2.Example()
        try:
            example.ParseFromString(record)
        except Exception:  # noqa: BLE001: protobuf's DecodeError differs between its implementations
            raise InputFileError(f"{source}: record is not a serialized tf.Example") from None
        columns = [text_column] + [c for c in (text_b_column, key_column) if c]
        yield number, {name: _feature_text(example, name, source) for name in columns}


def read_keyed_texts(path, input_format=None, text_column="text", text_b_column=None, key_column=None):
    """Yields `KeyedText(key, text, text_b)` of every text in one file, in file order.

    Args:
        path: The file (any file system of `keras_bert_impl.filesystem`).
        input_format: One of `INPUT_FORMATS`; None: from the file's name.
        text_column: Column (JSON key, tf.Example feature) of the text;
            ignored for `txt`.
        text_b_column: Column of the second text of a pair, or None.
        key_column: Column of each text's key, or None for `file:line`.

    Raises:
        InputFileError: naming `file:line`: invalid UTF-8, a missing column
            or feature, a malformed row or record.
    """
    input_format = input_format_of(path, input_format)
    if input_format == "txt":
        if text_b_column or key_column:
            raise InputFileError(f"{path}: a txt file has one text per line, no columns for pairs or keys")
        for number, line in read_utf8_lines(path):
            text = line.rstrip("\r\n")
            if text.strip():
                yield KeyedText(f"{path}:{number}", text, None)
        return
    if input_format == "tfrecord":
        rows = _example_rows(path, text_column, text_b_column, key_column)
    elif input_format == "jsonl":
        rows = jsonl_rows(path)
    else:
        rows = delimited_rows(path, input_format)
    for number, row in rows:
        source = f"{path}:{number}"
        text_b = _column(row, text_b_column, source) if text_b_column else None
        key = _column(row, key_column, source) if key_column else source
        yield KeyedText(key, _column(row, text_column, source), text_b)
