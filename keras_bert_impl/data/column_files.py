"""Rows of CSV, TSV and JSON-lines files, and labelled text in them by column name.

The readers yield each row with the line it starts on, and every malformed
row is an `InputFileError` naming `file:line` (invalid UTF-8, another number
of columns than the header, broken quoting or JSON, a missing column).
`ColumnDataset` is `--task_name=csv`, `tsv` or `jsonl`: any `train`/`dev`/
`test` files whose columns are named, no code needed per dataset.
"""

import csv
import dataclasses
import json

from keras_bert_impl import filesystem
from keras_bert_impl.data.classification_examples import SPLITS, ClassifierExample, parse_label, placeholder_label
from keras_bert_impl.errors import InputFileError
from keras_bert_impl.io import read_utf8_lines


def _open_lines(path):
    """Yields `(line_number, text)` of a UTF-8 file, with errors naming the line."""
    return read_utf8_lines(path, kind="data file")


def csv_rows(path, **dialect):
    """Yields `(line_number, fields)` of a delimited file, `line_number` where the row starts."""
    reader = csv.reader((text for _, text in _open_lines(path)), **dialect)
    start = 1
    try:
        for fields in reader:
            yield start, fields
            start = reader.line_num + 1
    except csv.Error as e:
        raise InputFileError(f"{path}:{reader.line_num}: {e}") from None


def delimited_rows(path, file_format):
    """Yields `(line_number, {column: value})` of a CSV or TSV file with a header line.

    Raises:
        InputFileError: naming file and line: not UTF-8, a row with another
            number of columns than the header, malformed quoting, no header.
    """
    dialect = {} if file_format == "csv" else {"delimiter": "\t", "quoting": csv.QUOTE_NONE}
    header = None
    for line_number, fields in csv_rows(path, **dialect):
        if header is None:
            header = fields
            if len(set(header)) != len(header):
                raise InputFileError(f"{path}:{line_number}: repeated column names in the header")
            continue
        if len(fields) != len(header):
            raise InputFileError(f"{path}:{line_number}: {len(fields)} columns, expected {len(header)} (as the header)")
        yield line_number, dict(zip(header, fields))
    if header is None:
        raise InputFileError(f"{path}: empty file, expected a header line")


def jsonl_rows(path):
    """Yields `(line_number, object)` of a JSON-lines file (blank lines skipped)."""
    for line_number, text in _open_lines(path):
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputFileError(f"{path}:{line_number}: not valid JSON ({e.msg})") from None
        if not isinstance(row, dict):
            raise InputFileError(f"{path}:{line_number}: expected a JSON object, got {type(row).__name__}")
        yield line_number, row


def table_rows(path, file_format):
    """Yields `(line_number, {column: value})` of a `csv`, `tsv` (header line) or `jsonl` file."""
    return jsonl_rows(path) if file_format == "jsonl" else delimited_rows(path, file_format)


def text_value(value, source):
    """A column value as text: strings as they are, JSON numbers and booleans as written."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    raise InputFileError(f"{source}: expected text, got {type(value).__name__} {value!r}")


@dataclasses.dataclass(frozen=True)
class ColumnDataset:
    """Any labeled text in `train`/`dev`/`test` files with named columns.

    The files are `<split>.csv` (comma-separated, quoted as Python's `csv`
    writes), `<split>.tsv` (tab-separated, header line, no quoting) or
    `<split>.jsonl` (one JSON object per line). Test files need no label column.

    Attributes:
        name: `csv`, `tsv` or `jsonl` (the file format).
        text_a_column, text_b_column: Column (key) names of the texts.
        label_column: Column (key) name of the label.
        labels: The label list; None to infer it from the training file
            (`infer_labels`).
        metrics: Metrics reported next to accuracy and loss.
    """

    name: str
    text_a_column: str = "text"
    text_b_column: str | None = None
    label_column: str = "label"
    labels: tuple | None = None
    metrics: tuple = ()

    is_regression = False

    def read_examples(self, data_dir, split):
        """The examples of `split`; see `classification_datasets.read_examples`.

        With `labels` None the labels are taken as they are (resolve the label
        list with `with_labels` on the training examples before reading dev).
        """
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        path = filesystem.join(data_dir, f"{split}.{self.name}")
        examples = []
        for line_number, row in table_rows(path, self.name):
            source = f"{path}:{line_number}"
            needed = [self.text_a_column] + [self.text_b_column] * (self.text_b_column is not None)
            if split != "test":
                needed.append(self.label_column)
            for column in needed:
                if column not in row:
                    raise InputFileError(f"{source}: no column {column!r} (has {', '.join(map(repr, row))})")
            text_b = text_value(row[self.text_b_column], source) if self.text_b_column else None
            if split == "test":
                label = placeholder_label(self)
            elif self.labels is None:
                label = text_value(row[self.label_column], source)
            else:
                label = parse_label(self, text_value(row[self.label_column], source), source)
            examples.append(
                ClassifierExample(
                    len(examples), text_value(row[self.text_a_column], source), text_b,
                    guid=f"{split}-{len(examples)}", label=label, source=source,
                )
            )
        return examples
