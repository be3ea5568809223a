"""Multiple-choice examples (SWAG): a context, its candidate endings, the right one's index.

SWAG's CSV files as its authors release them (`train.csv`, `val.csv`,
`test.csv`) hold `sent1` (the context), `sent2` (the start of the next
sentence) and `ending0`..`ending3`; each choice is `sent2 + " " + ending_i`,
as Hugging Face's `run_swag` builds it. Any CSV, TSV or JSON-lines file with
named columns works as well: a context column, one column per choice (or, in
JSON lines, one column holding the list of choices) and a label column of
choice indices. Every row of a file has the same number of choices (any
number: 2, 4, 5...). Bad rows are `InputFileError`s naming `file:line` and
the field.

Example:
>>> SWAG.choice_columns
('ending0', 'ending1', 'ending2', 'ending3')
"""

import dataclasses

from keras_bert_impl import filesystem
from keras_bert_impl.data.column_files import table_rows, text_value
from keras_bert_impl.errors import InputFileError


@dataclasses.dataclass(frozen=True)
class MultipleChoiceExample:
    """One question: a context and its choices.

    Attributes:
        context: The first text of every pair ([CLS] context [SEP] choice [SEP]).
        choices: The candidate continuations, a tuple.
        label: The index of the right choice (None where unlabelled: a test file).
        source: `file:line`, for messages.
    """

    context: str
    choices: tuple
    label: int = None
    source: str = None


@dataclasses.dataclass(frozen=True)
class ChoiceColumns:
    """Where a file keeps the context, the choices and the label.

    Attributes:
        context_column: The context's column.
        choice_columns: One column per choice, in choice order; empty when
            `choices_column` holds them.
        choices_column: A column holding the list of choices (JSON lines).
        choice_prefix_column: A column put before every choice with a space
            between (SWAG's `sent2`), or None.
        label_column: The right choice's index (0-based).
    """

    context_column: str = "sent1"
    choice_columns: tuple = ("ending0", "ending1", "ending2", "ending3")
    choices_column: str = None
    choice_prefix_column: str = "sent2"
    label_column: str = "label"


# SWAG as released: sent1, sent2 + " " + ending0..3, label.
SWAG = ChoiceColumns()


def file_format(path):
    """`csv`, `tsv` or `jsonl`, from the file name (`.csv` when it says nothing else)."""
    for name in ("tsv", "jsonl"):
        if path.endswith(f".{name}") or path.endswith(".json") and name == "jsonl":
            return name
    return "csv"


def read_multiple_choice_file(path, columns=SWAG, labelled=True):
    """The examples of one file.

    Args:
        path: A `.csv`, `.tsv` or `.jsonl` file with a header line (CSV/TSV).
        columns: `ChoiceColumns`: where the fields are.
        labelled: Whether every row must have a label (train, eval); a
            test file's labels are read where present, else None.

    Returns:
        A list of `MultipleChoiceExample`.

    Raises:
        InputFileError: naming `file:line` and the field: a missing column
            or an empty context or choice, rows with different numbers of
            choices, fewer than two choices, a label that is not an index of
            the choices, a file with no rows.

    Example:
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "val.csv")
    >>> _ = open(path, "w").write("sent1,sent2,ending0,ending1,ending2,ending3,label\\n"
    ...                           "She opened the door.,She,walked in.,ate it.,flew.,sang.,0\\n")
    >>> read_multiple_choice_file(path)[0].choices
    ('She walked in.', 'She ate it.', 'She flew.', 'She sang.')
    """
    examples = []
    for line_number, row in table_rows(path, file_format(path)):
        source = f"{path}:{line_number}"
        context = _field(row, columns.context_column, source)
        choices = _choices(row, columns, source)
        if examples and len(choices) != len(examples[0].choices):
            raise InputFileError(f"{source}: {len(choices)} choices, but {examples[0].source} has "
                                 f"{len(examples[0].choices)}: every row needs as many")
        label = None
        if labelled or _present(row.get(columns.label_column)):
            label = _label(row, columns.label_column, len(choices), source)
        examples.append(MultipleChoiceExample(context, choices, label, source))
    if not examples:
        raise InputFileError(f"{path}: no examples")
    return examples


def _present(value):
    return value is not None and (not isinstance(value, str) or value.strip() != "")


def _field(row, column, source):
    """A non-empty text field."""
    if column not in row:
        raise InputFileError(f"{source}: {column}: no such column (has {', '.join(map(repr, row))})")
    text = text_value(row[column], f"{source}: {column}")
    if not text.strip():
        raise InputFileError(f"{source}: {column}: empty")
    return text


def _choices(row, columns, source):
    if columns.choices_column is not None:
        if columns.choices_column not in row:
            raise InputFileError(f"{source}: {columns.choices_column}: no such column")
        values = row[columns.choices_column]
        if not isinstance(values, list):
            raise InputFileError(f"{source}: {columns.choices_column}: expected a list of choices, got "
                                 f"{type(values).__name__}")
        choices = []
        for index, value in enumerate(values):
            where = f"{source}: {columns.choices_column}[{index}]"
            if not isinstance(value, str) or not value.strip():
                raise InputFileError(f"{where}: expected a non-empty text, got {value!r}")
            choices.append(value)
    else:
        choices = [_field(row, column, source) for column in columns.choice_columns]
    if len(choices) < 2:
        raise InputFileError(f"{source}: {len(choices)} choice(s); a question needs at least 2")
    if columns.choice_prefix_column is not None:
        if columns.choice_prefix_column not in row:
            raise InputFileError(f"{source}: {columns.choice_prefix_column}: no such column")
        prefix = text_value(row[columns.choice_prefix_column], f"{source}: {columns.choice_prefix_column}")
        if prefix.strip():
            choices = [f"{prefix.strip()} {choice.strip()}" for choice in choices]
    return tuple(choices)


def _label(row, column, num_choices, source):
    """The right choice's index, checked against the choices."""
    if column not in row or not _present(row[column]):
        raise InputFileError(f"{source}: {column}: missing (the index of the right choice)")
    value = row[column]
    try:
        label = int(value.strip()) if isinstance(value, str) else value
    except ValueError:
        label = None
    if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < num_choices:
        raise InputFileError(f"{source}: {column}: {value!r} is not the index of one of the {num_choices} "
                             f"choices (0..{num_choices - 1})")
    return label


def split_file(data_dir, split):
    """The file of `split` ("train", "dev", "test") in `data_dir`: SWAG's `val.csv` is the dev split.

    Returns:
        The first of `<name>.csv`, `.tsv`, `.jsonl` that exists (names: train;
        val, dev; test).

    Raises:
        InputFileError: none exists.
    """
    names = {"train": ("train",), "dev": ("val", "dev"), "test": ("test",)}[split]
    tried = [filesystem.join(data_dir, f"{name}.{kind}") for name in names for kind in ("csv", "tsv", "jsonl")]
    for path in tried:
        if filesystem.exists(path):
            return path
    raise InputFileError(f"{data_dir}: no {split} file (looked for {', '.join(tried)})")
