"""Labeled sentence (pair) data for `run_classifier`, and the metrics GLUE reports.

google-research/bert's `run_classifier.py` reads XNLI, MNLI, MRPC and CoLA from
their TSV files with one `DataProcessor` class each. Here a task is data: which
file holds each split, whether it has a header, which columns hold `text_a`,
`text_b`, the label and the id, and the label list. The four original tasks
keep the original's files, columns, header skipping, guids and test
placeholder labels; SST-2, QQP, QNLI, RTE, WNLI and STS-B (regression) follow
the same GLUE TSV layout. Three more kinds of task complete the set:

* `ColumnTask`: any `train`/`dev`/`test` `.csv`, `.tsv` or `.jsonl` files with
  named columns, the label list given or inferred from the training file.
* `TfdsGlueTask`: `glue/<name>` from TensorFlow Datasets, read only if already
  prepared in a given data directory (never downloaded).
* `TfdsTextTask`: any TFDS text classification dataset, its text and label
  features named, the labels its `ClassLabel`'s names.

Unlike the original, which would fail with an `IndexError` or `KeyError`
somewhere later (or, for TFDS and HF readers, silently skip a row), every
malformed row is an `InputFileError` naming `file:line`: a wrong number of
columns, a label outside the label list, an unparsable regression target.

The metrics are pure NumPy: accuracy, F1 (MRPC, QQP), Matthews correlation
(CoLA), Pearson and Spearman correlation (STS-B).
"""

import csv
import dataclasses
import json
import math

import numpy as np

from keras_bert_impl import filesystem
from keras_bert_impl.data.text_pairs import TextPairExample
from keras_bert_impl.data.tfds_inputs import (
    class_names,
    feature,
    is_text,
    open_prepared,
    read_split,
    split_source,
    text,
)
from keras_bert_impl.errors import BertError, InputFileError
from keras_bert_impl.io import read_utf8_lines

SPLITS = ("train", "dev", "test")


class UnknownTaskError(BertError, ValueError):
    """A `--task_name` no reader knows."""


@dataclasses.dataclass(frozen=True)
class ClassifierExample(TextPairExample):
    """A `TextPairExample` with its label, as the original's `InputExample`.

    Attributes:
        unique_id: Position in its split, from 0.
        text_a, text_b: The texts (`text_b` None for single-sentence tasks).
        guid: The original's id, e.g. `"train-1"` or `"dev_matched-12"`.
        label: A string from the task's label list, or a float for regression.
            Test examples carry the task's placeholder (its first label, 0.0).
        source: Where the example was read, `path:line`, for error messages.
    """

    guid: str
    label: object
    source: str = ""


# ----------------------------------------------------------------------------
# Task descriptions.
# ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TsvSplit:
    """One split of a GLUE-format task: a tab-separated file without quoting.

    Attributes:
        file: Path under the task's data directory.
        guid_prefix: The original's `set_type` (`"train"`, `"dev_matched"`, ...).
        text_a, text_b: Column indexes of the texts (`text_b` None: single text).
        label: Column index of the label; None for unlabeled test files.
        header: Whether the first line is a header (skipped). Rows must then
            have as many columns as the header.
        columns: Column count of files without a header.
        guid_column: Column whose value names the example in its guid; None
            uses the line's index in the file (the original's `i`).
        keep: `(column, value)`: only rows with that value are read (XNLI's
            language filter); other rows are skipped.
        label_aliases: `((old, new), ...)` label renames (XNLI's
            `contradictory` -> `contradiction`).
    """

    file: str
    guid_prefix: str
    text_a: int
    text_b: int | None = None
    label: int | None = None
    header: bool = True
    columns: int | None = None
    guid_column: int | None = None
    keep: tuple | None = None
    label_aliases: tuple = ()


@dataclasses.dataclass(frozen=True)
class GlueTsvTask:
    """A task read from GLUE-format TSV files in `--data_dir`.

    Attributes:
        name: The `--task_name`.
        labels: The label list (its order fixes the class ids); None for regression.
        splits: `{"train" | "dev" | "test": TsvSplit}`.
        metrics: Metrics reported next to accuracy and loss (see `METRICS`).
    """

    name: str
    labels: tuple | None
    splits: dict
    metrics: tuple = ()

    @property
    def is_regression(self):
        return self.labels is None

    def read_examples(self, data_dir, split):
        """The examples of `split` (`train`, `dev` or `test`); see `read_examples`."""
        layout = _split_layout(self, split)
        path = filesystem.join(data_dir, layout.file)
        examples = []
        for line_number, row_index, fields in _tsv_rows(path, layout):
            source = f"{path}:{line_number}"
            if layout.keep and fields[layout.keep[0]] != layout.keep[1]:
                continue
            key = fields[layout.guid_column] if layout.guid_column is not None else row_index
            text_b = fields[layout.text_b] if layout.text_b is not None else None
            if layout.label is None:
                label = placeholder_label(self)
            else:
                label = dict(layout.label_aliases).get(fields[layout.label], fields[layout.label])
                label = parse_label(self, label, source)
            examples.append(
                ClassifierExample(
                    len(examples), fields[layout.text_a], text_b,
                    guid=f"{layout.guid_prefix}-{key}", label=label, source=source,
                )
            )
        return examples


@dataclasses.dataclass(frozen=True)
class ColumnTask:
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
        """The examples of `split`; see `read_examples`.

        With `labels` None the labels are taken as they are (resolve the label
        list with `with_labels` on the training examples before reading dev).
        """
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        path = filesystem.join(data_dir, f"{split}.{self.name}")
        rows = _jsonl_rows(path) if self.name == "jsonl" else delimited_rows(path, self.name)
        examples = []
        for line_number, row in rows:
            source = f"{path}:{line_number}"
            needed = [self.text_a_column] + [self.text_b_column] * (self.text_b_column is not None)
            if split != "test":
                needed.append(self.label_column)
            for column in needed:
                if column not in row:
                    raise InputFileError(f"{source}: no column {column!r} (has {', '.join(map(repr, row))})")
            text_b = _text(row[self.text_b_column], source) if self.text_b_column else None
            if split == "test":
                label = placeholder_label(self)
            elif self.labels is None:
                label = _text(row[self.label_column], source)
            else:
                label = parse_label(self, _text(row[self.label_column], source), source)
            examples.append(
                ClassifierExample(
                    len(examples), _text(row[self.text_a_column], source), text_b,
                    guid=f"{split}-{len(examples)}", label=label, source=source,
                )
            )
        return examples


def _tfds_example(unique_id, row, text_a_key, text_b_key, guid, label, source):
    """A `ClassifierExample` of one TFDS record, its texts under `text_a_key`, `text_b_key` (or None)."""
    text_b = text(row[text_b_key], f"{source} {text_b_key}") if text_b_key else None
    return ClassifierExample(unique_id, text(row[text_a_key], f"{source} {text_a_key}"), text_b, guid=guid,
                             label=label, source=source)


@dataclasses.dataclass(frozen=True)
class TfdsGlueTask:
    """`glue/<name>` from TensorFlow Datasets, prepared beforehand in `--data_dir`.

    Examples are put back in file order (TFDS stores them shuffled; `idx` is
    the row in the GLUE file), so guids are `<split>-<idx>`.

    Attributes:
        name: The TFDS name, e.g. `glue/mrpc`.
        labels: Our label list, as the TSV task of the same name (so a model
            fine-tuned on either has the same class ids); None for regression.
        text_a_key, text_b_key: The TFDS feature names of the texts.
        labels_by_name: Map TFDS class ids through their names (MNLI, QNLI,
            RTE: TFDS orders MNLI's classes differently); otherwise class id
            `i` is the label `str(i)` (the GLUE files' `0`/`1`).
        split_names: `{"train" | "dev" | "test": TFDS split}`.
        metrics: Metrics reported next to accuracy and loss.
    """

    name: str
    labels: tuple | None
    text_a_key: str
    text_b_key: str | None = None
    labels_by_name: bool = False
    split_names: tuple = (("train", "train"), ("dev", "validation"), ("test", "test"))
    metrics: tuple = ()

    @property
    def is_regression(self):
        return self.labels is None

    def read_examples(self, data_dir, split):
        """The examples of `split`, from the prepared dataset only (see
        `tfds_inputs.open_prepared`: nothing is downloaded)."""
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        split_name = dict(self.split_names)[split]
        builder = open_prepared(self.name, data_dir)
        label_feature = builder.info.features["label"]
        rows = sorted(read_split(builder, self.name, split_name), key=lambda r: r["idx"])
        examples = []
        for row in rows:
            source = f"{split_source(self.name, split_name)} idx {int(row['idx'])}"
            if split == "test":  # GLUE's test labels are hidden (-1)
                label = placeholder_label(self)
            elif not self.is_regression and int(row["label"]) < 0:
                raise InputFileError(f"{source}: no label (class id {int(row['label'])})")
            elif self.is_regression:
                label = float(row["label"])
            elif self.labels_by_name:
                label = label_feature.int2str(int(row["label"]))
            else:
                label = str(int(row["label"]))
            if not self.is_regression:
                label = parse_label(self, label, source)
            examples.append(
                _tfds_example(len(examples), row, self.text_a_key, self.text_b_key, f"{split_name}-{int(row['idx'])}",
                              label, source)
            )
        return examples


@dataclasses.dataclass(frozen=True)
class TfdsTextTask:
    """Any TFDS text classification (or regression) dataset, prepared in `--data_dir`.

    The features holding the text(s) and the label are named; the label list
    is the label feature's class names when it is a `ClassLabel` (so class
    ids are the dataset's), else given, or inferred from the training split
    as for a `ColumnTask`; a float label makes the task a regression.
    `with_dataset_labels` resolves that from the dataset's metadata before
    reading. Examples come in the stored TFDS order (see `tfds_inputs`),
    guids `<split>-<position>`; test examples carry the placeholder label.

    Attributes:
        name: The TFDS name, with its config (`imdb_reviews/plain_text`).
        text_a_feature, text_b_feature: The features of the texts
            (`text_b_feature` None for single-text datasets).
        label_feature: The feature of the label.
        labels: The label list; None until `with_dataset_labels` (or
            `with_labels` on the training examples) sets it.
        split_names: `{"train" | "dev" | "test": TFDS split}` (an expression
            such as `train[:90%]` is allowed).
        is_regression: Whether the label is a float target.
        metrics: Metrics reported next to accuracy and loss.
    """

    name: str
    text_a_feature: str
    text_b_feature: str | None = None
    label_feature: str = "label"
    labels: tuple | None = None
    split_names: tuple = (("train", "train"), ("dev", "validation"), ("test", "test"))
    is_regression: bool = False
    metrics: tuple = ()

    def label_names(self, data_dir):
        """`(class_names, is_float)` of the label feature: the `ClassLabel`
        names (None for another feature) and whether it holds floats.

        Raises:
            InputFileError: the dataset is not prepared in `data_dir`, or has
                no such feature, or more than one label per example.
        """
        return self._label_kind(open_prepared(self.name, data_dir))

    def _label_kind(self, builder):
        label = feature(builder, self.name, self.label_feature)
        if label.shape != ():
            raise InputFileError(
                f"{builder.data_dir}: feature {self.label_feature!r} of TFDS dataset {self.name} holds "
                f"{label.shape} values per example, expected one label"
            )
        return class_names(label), np.dtype(label.np_dtype).kind == "f"

    def read_examples(self, data_dir, split):
        """The examples of `split` (`train`, `dev` or `test`), from the prepared dataset only.

        Raises:
            InputFileError: the dataset is not prepared, lacks a named feature
                or the split, a text feature is not text, a training or dev
                example has no label (class id -1) or one outside `labels`.
        """
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        split_name = dict(self.split_names)[split]
        builder = open_prepared(self.name, data_dir)
        for key in (self.text_a_feature, self.text_b_feature):
            if key is not None and not is_text(feature(builder, self.name, key)):
                raise InputFileError(
                    f"{builder.data_dir}: feature {key!r} of TFDS dataset {self.name} is not one text per example"
                )
        names, _ = self._label_kind(builder)
        examples = []
        for position, row in enumerate(read_split(builder, self.name, split_name)):
            source = f"{split_source(self.name, split_name)} example {position}"
            if split == "test":
                label = placeholder_label(self)
            else:
                value = row[self.label_feature]
                label = self._label(value.item() if hasattr(value, "item") else value, names, source)
            examples.append(
                _tfds_example(position, row, self.text_a_feature, self.text_b_feature, f"{split_name}-{position}",
                              label, source)
            )
        return examples

    def _label(self, value, names, source):
        """One example's label: a class name, a float target or the value as text."""
        if names is not None:
            if not 0 <= value < len(names):
                raise InputFileError(f"{source}: no label (class id {value} of {self.label_feature!r})")
            value = names[value]
        elif not self.is_regression:
            value = text(value, source)
        if self.is_regression or self.labels is not None:
            return parse_label(self, value, source)
        return value


def with_dataset_labels(task, data_dir):
    """`task` with what its dataset's metadata says about the labels.

    For a `TfdsTextTask` without a label list: the label feature's class
    names, or regression for a float label; other tasks are returned as
    they are.

    Raises:
        InputFileError: see `TfdsTextTask.label_names`.
    """
    if not isinstance(task, TfdsTextTask) or task.labels is not None:
        return task
    names, is_float = task.label_names(data_dir)
    if names is not None:
        return dataclasses.replace(task, labels=names)
    return dataclasses.replace(task, is_regression=is_float)


# ----------------------------------------------------------------------------
# The tasks by name.
# ----------------------------------------------------------------------------


def _glue_pair_task(name, directory, labels, metrics=()):
    """QNLI, RTE, WNLI: `index <tab> text_a <tab> text_b [<tab> label]`."""
    return GlueTsvTask(
        name,
        labels,
        {
            "train": TsvSplit(f"{directory}train.tsv", "train", 1, 2, label=3, guid_column=0),
            "dev": TsvSplit(f"{directory}dev.tsv", "dev", 1, 2, label=3, guid_column=0),
            "test": TsvSplit(f"{directory}test.tsv", "test", 1, 2, guid_column=0),
        },
        metrics,
    )


def _mnli(name, dev_file, test_file):
    # Columns: index, promptID, pairID, genre, 4 parses, sentence1, sentence2,
    # label1[..5] and gold_label last (the original's `line[-1]`).
    return GlueTsvTask(
        name,
        ("contradiction", "entailment", "neutral"),
        {
            "train": TsvSplit("train.tsv", "train", 8, 9, label=-1, guid_column=0),
            "dev": TsvSplit(dev_file, dev_file[:-4], 8, 9, label=-1, guid_column=0),
            "test": TsvSplit(test_file, "test", 8, 9, guid_column=0),
        },
    )


def xnli_task(language="zh"):
    """The original's XNLI task (it fixes `language = "zh"`).

    Train: `multinli/multinli.train.<language>.tsv` (`premise hypo label`).
    Dev/test: `xnli.dev.tsv`/`xnli.test.tsv`, rows of `language` only, text in
    columns 6 and 7, label in column 1.
    """
    return GlueTsvTask(
        "xnli",
        ("contradiction", "entailment", "neutral"),
        {
            "train": TsvSplit(
                f"multinli/multinli.train.{language}.tsv", "train", 0, 1, label=2,
                label_aliases=(("contradictory", "contradiction"),),
            ),
            "dev": TsvSplit("xnli.dev.tsv", "dev", 6, 7, label=1, keep=(0, language)),
            "test": TsvSplit("xnli.test.tsv", "test", 6, 7, label=1, keep=(0, language)),
        },
    )


TSV_TASKS = {
    "cola": GlueTsvTask(
        "cola",
        ("0", "1"),
        {
            # Only CoLA's test file has a header: `index sentence`.
            "train": TsvSplit("train.tsv", "train", 3, label=1, header=False, columns=4),
            "dev": TsvSplit("dev.tsv", "dev", 3, label=1, header=False, columns=4),
            "test": TsvSplit("test.tsv", "test", 1),
        },
        metrics=("mcc",),
    ),
    "mnli": _mnli("mnli", "dev_matched.tsv", "test_matched.tsv"),
    "mnli_mismatched": _mnli("mnli_mismatched", "dev_mismatched.tsv", "test_mismatched.tsv"),
    "mrpc": GlueTsvTask(
        "mrpc",
        ("0", "1"),
        {
            # `Quality #1 ID #2 ID #1 String #2 String` (test: `index` first).
            "train": TsvSplit("train.tsv", "train", 3, 4, label=0),
            "dev": TsvSplit("dev.tsv", "dev", 3, 4, label=0),
            "test": TsvSplit("test.tsv", "test", 3, 4),
        },
        metrics=("f1",),
    ),
    "xnli": xnli_task(),
    "sst-2": GlueTsvTask(
        "sst-2",
        ("0", "1"),
        {
            "train": TsvSplit("train.tsv", "train", 0, label=1),
            "dev": TsvSplit("dev.tsv", "dev", 0, label=1),
            "test": TsvSplit("test.tsv", "test", 1, guid_column=0),
        },
    ),
    "qqp": GlueTsvTask(
        "qqp",
        ("0", "1"),
        {
            # `id qid1 qid2 question1 question2 is_duplicate`; test: `id question1 question2`.
            "train": TsvSplit("train.tsv", "train", 3, 4, label=5, guid_column=0),
            "dev": TsvSplit("dev.tsv", "dev", 3, 4, label=5, guid_column=0),
            "test": TsvSplit("test.tsv", "test", 1, 2, guid_column=0),
        },
        metrics=("f1",),
    ),
    "qnli": _glue_pair_task("qnli", "", ("entailment", "not_entailment")),
    "rte": _glue_pair_task("rte", "", ("entailment", "not_entailment")),
    "wnli": _glue_pair_task("wnli", "", ("0", "1")),
    "sts-b": GlueTsvTask(
        "sts-b",
        None,
        {
            # `index genre filename year old_index source1 source2 sentence1 sentence2 score`.
            "train": TsvSplit("train.tsv", "train", 7, 8, label=9, guid_column=0),
            "dev": TsvSplit("dev.tsv", "dev", 7, 8, label=9, guid_column=0),
            "test": TsvSplit("test.tsv", "test", 7, 8, guid_column=0),
        },
        metrics=("pearson", "spearman"),
    ),
}

TFDS_TASKS = {
    task.name: task
    for task in (
        TfdsGlueTask("glue/cola", ("0", "1"), "sentence", metrics=("mcc",)),
        TfdsGlueTask("glue/sst2", ("0", "1"), "sentence"),
        TfdsGlueTask("glue/mrpc", ("0", "1"), "sentence1", "sentence2", metrics=("f1",)),
        TfdsGlueTask("glue/qqp", ("0", "1"), "question1", "question2", metrics=("f1",)),
        TfdsGlueTask(
            "glue/stsb", None, "sentence1", "sentence2", metrics=("pearson", "spearman")
        ),
        TfdsGlueTask(
            "glue/mnli", TSV_TASKS["mnli"].labels, "premise", "hypothesis", labels_by_name=True,
            split_names=(("train", "train"), ("dev", "validation_matched"), ("test", "test_matched")),
        ),
        TfdsGlueTask("glue/qnli", TSV_TASKS["qnli"].labels, "question", "sentence", labels_by_name=True),
        TfdsGlueTask("glue/rte", TSV_TASKS["rte"].labels, "sentence1", "sentence2", labels_by_name=True),
        TfdsGlueTask("glue/wnli", ("0", "1"), "sentence1", "sentence2"),
    )
}

# GLUE's own spellings of the task names.
_ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "sts_b": "sts-b", "sst_2": "sst-2"}

COLUMN_FORMATS = ("csv", "tsv", "jsonl")

TASK_NAMES = tuple(sorted(TSV_TASKS)) + tuple(sorted(TFDS_TASKS)) + COLUMN_FORMATS


def get_task(task_name, **options):
    """The task called `task_name` (any case), as `run_classifier` looks it up.

    Args:
        task_name: A GLUE/XNLI name (`mrpc`, `sst-2`, ...), a TFDS name
            (`glue/mrpc`, ..., or any other with `text_a_feature`), or
            `csv`/`tsv`/`jsonl` for a `ColumnTask`.
        **options: For the column formats, `ColumnTask` fields
            (`text_a_column`, `text_b_column`, `label_column`, `labels`,
            `metrics`). For TFDS, `TfdsTextTask` fields (`text_a_feature`
            makes `task_name` one, with `text_b_feature`, `label_feature`,
            `labels`), and `splits`: `{"train" | "dev" | "test": TFDS split}`
            replacing the task's defaults.

    Returns:
        A `GlueTsvTask`, `TfdsGlueTask`, `TfdsTextTask` or `ColumnTask`.

    Raises:
        UnknownTaskError: an unknown name.
        ValueError: options the task does not take.

    Example:
    >>> get_task("MRPC").labels
    ('0', '1')
    >>> get_task("csv", text_a_column="review").text_a_column
    'review'
    >>> task = get_task("imdb_reviews", text_a_feature="text", splits={"dev": "test"})
    >>> task.label_feature, dict(task.split_names)["dev"]
    ('label', 'test')
    """
    name = task_name.strip().lower()
    name = _ALIASES.get(name, name)
    if name in COLUMN_FORMATS:
        return ColumnTask(name, **options)
    splits = options.pop("splits", None)
    if "text_a_feature" in options:
        task = TfdsTextTask(task_name.strip(), **options)
    else:
        task = TSV_TASKS.get(name) or TFDS_TASKS.get(name)
        if task is None:
            raise UnknownTaskError(
                f"--task_name {task_name!r} is unknown; choose one of {', '.join(TASK_NAMES)}, "
                "or name a TFDS dataset's text feature"
            )
        if options:
            raise ValueError(f"task {task.name} takes no options ({', '.join(options)})")
    if splits:
        if not hasattr(task, "split_names"):
            raise ValueError(f"task {task.name} is read from files, not TFDS splits")
        unknown = set(splits) - set(SPLITS)
        if unknown:
            raise ValueError(f"splits are keyed by {SPLITS}, got {sorted(unknown)}")
        task = dataclasses.replace(task, split_names=tuple({**dict(task.split_names), **splits}.items()))
    return task


def read_examples(task, data_dir, split):
    """Reads one split of `task` from `data_dir`.

    Args:
        task: From `get_task`.
        data_dir: The task's directory (the `--data_dir`), or the TFDS data
            directory for TFDS tasks.
        split: `train`, `dev` or `test`.

    Returns:
        A list of `ClassifierExample`s, in file order.

    Raises:
        InputFileError: a missing file, invalid UTF-8, a row with the wrong
            number of columns, or a label outside the task's label list, with
            `file:line`; a TFDS dataset that is not prepared in `data_dir`.
    """
    return task.read_examples(data_dir, split)


def infer_labels(examples):
    """The sorted distinct labels of (training) examples: numbers by value.

    Example:
    >>> infer_labels([ClassifierExample(0, "a", None, "x-0", "10"),
    ...               ClassifierExample(1, "b", None, "x-1", "9")])
    ('9', '10')
    """

    def order(label):
        try:
            return (0, float(label), label)
        except ValueError:
            return (1, 0.0, label)

    return tuple(sorted({e.label for e in examples}, key=order))


def with_labels(task, train_examples):
    """`task` with its label list inferred from `train_examples` when it has none.

    A no-op for tasks with a fixed label list and for regression.

    Raises:
        InputFileError: fewer than two distinct training labels.
    """
    if task.is_regression or task.labels is not None:
        return task
    labels = infer_labels(train_examples)
    if len(labels) < 2:
        where = train_examples[0].source.rsplit(":", 1)[0] if train_examples else "the training data"
        raise InputFileError(
            f"{where}: {len(labels)} distinct label(s) {', '.join(map(repr, labels))}; a classifier needs "
            "two or more (list them with --labels)"
        )
    return dataclasses.replace(task, labels=labels)


def placeholder_label(task):
    """The label the original gives unlabeled test examples: the first label (0.0 for regression)."""
    if task.is_regression:
        return 0.0
    if not task.labels:
        return None
    return task.labels[0]


def parse_label(task, label, source):
    """`label` checked against the task's label list (or parsed as a float for regression).

    Raises:
        InputFileError: naming `source` and the allowed labels.
    """
    if task.is_regression:
        try:
            value = float(label)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise InputFileError(f"{source}: label {label!r} is not a number (task {task.name} is a regression)")
        return value
    if label not in task.labels:
        allowed = ", ".join(map(repr, task.labels))
        raise InputFileError(f"{source}: label {label!r} is not one of {allowed} (task {task.name})")
    return label


def label_ids(task, examples):
    """Class ids (int32) of `examples`, or their float32 targets for regression."""
    if task.is_regression:
        return np.array([e.label for e in examples], np.float32)
    index = {label: i for i, label in enumerate(task.labels)}
    return np.array([index[e.label] for e in examples], np.int32)


# ----------------------------------------------------------------------------
# File readers.
# ----------------------------------------------------------------------------


def _split_layout(task, split):
    if split not in task.splits:
        raise ValueError(f"split must be one of {tuple(task.splits)}, got {split!r}")
    return task.splits[split]


def _open_lines(path):
    """Yields `(line_number, text)` of a UTF-8 file, with errors naming the line."""
    return read_utf8_lines(path, kind="data file")


def _csv_rows(path, **dialect):
    """Yields `(line_number, fields)` of a delimited file, `line_number` where the row starts."""
    reader = csv.reader((text for _, text in _open_lines(path)), **dialect)
    start = 1
    try:
        for fields in reader:
            yield start, fields
            start = reader.line_num + 1
    except csv.Error as e:
        raise InputFileError(f"{path}:{reader.line_num}: {e}") from None


def _tsv_rows(path, layout):
    """Yields `(line_number, row_index, fields)` of a GLUE TSV file, header skipped.

    Read as the original's `_read_tsv` does (`csv.reader`, tab, no quote
    character): one line is one row and quotes are kept as text. `row_index`
    counts rows from 0 including the header (the original's `i`).
    """
    expected = layout.columns
    used = [layout.text_a, layout.text_b, layout.label, layout.guid_column, layout.keep and layout.keep[0]]
    needed = 1 + max(i for i in used if i is not None)
    for row_index, (line_number, fields) in enumerate(_csv_rows(path, delimiter="\t", quoting=csv.QUOTE_NONE)):
        if row_index == 0 and layout.header:
            expected = len(fields)
            if expected < needed:
                raise InputFileError(f"{path}:{line_number}: header has {expected} columns, expected at least {needed}")
            continue
        if expected is not None and len(fields) != expected:
            what = "the header" if layout.header else f"{filesystem.basename(path)} of this task"
            raise InputFileError(f"{path}:{line_number}: {len(fields)} columns, expected {expected} (as {what})")
        yield line_number, row_index, fields


def delimited_rows(path, file_format):
    """Yields `(line_number, {column: value})` of a CSV or TSV file with a header line.

    Raises:
        InputFileError: naming file and line: not UTF-8, a row with another
            number of columns than the header, malformed quoting, no header.
    """
    dialect = {} if file_format == "csv" else {"delimiter": "\t", "quoting": csv.QUOTE_NONE}
    header = None
    for line_number, fields in _csv_rows(path, **dialect):
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


def _jsonl_rows(path):
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


def _text(value, source):
    """A column value as text: strings as they are, JSON numbers and booleans as written."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    raise InputFileError(f"{source}: expected text, got {type(value).__name__} {value!r}")


# ----------------------------------------------------------------------------
# Metrics (GLUE's: accuracy, F1, Matthews correlation, Pearson, Spearman).
# ----------------------------------------------------------------------------


def accuracy(labels, predictions):
    """Fraction of `predictions` equal to `labels`.

    Example:
    >>> float(accuracy([0, 1, 1, 0], [0, 1, 0, 0]))
    0.75
    """
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    return float(np.mean(labels == predictions)) if labels.size else 0.0


def f1_score(labels, predictions, positive=1):
    """Binary F1 of class `positive`: `2 TP / (2 TP + FP + FN)` (0 when undefined).

    Example:
    >>> round(f1_score([1, 1, 0, 0], [1, 0, 1, 0]), 4)
    0.5
    """
    labels, predictions = np.asarray(labels) == positive, np.asarray(predictions) == positive
    true_positives = np.sum(labels & predictions)
    denominator = 2 * true_positives + np.sum(~labels & predictions) + np.sum(labels & ~predictions)
    return float(2 * true_positives / denominator) if denominator else 0.0


def matthews_correlation(labels, predictions):
    """Matthews correlation coefficient, for two or more classes (0 when undefined).

    The multiclass form (Gorodkin 2004) from the confusion matrix `C`:
    `(c s - t.p) / sqrt((s² - p.p)(s² - t.t))` with `c` the correct count, `s`
    the sample count, `t` true and `p` predicted counts per class.

    Example:
    >>> round(matthews_correlation([1, 1, 0, 0], [1, 0, 0, 0]), 4)
    0.5774
    """
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    classes, inverse = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
    confusion = np.zeros((len(classes), len(classes)), np.float64)
    np.add.at(confusion, (inverse[: labels.size], inverse[labels.size :]), 1.0)
    true_counts, predicted_counts = confusion.sum(axis=1), confusion.sum(axis=0)
    correct, samples = np.trace(confusion), confusion.sum()
    numerator = correct * samples - true_counts @ predicted_counts
    denominator = np.sqrt(
        (samples**2 - predicted_counts @ predicted_counts) * (samples**2 - true_counts @ true_counts)
    )
    return float(numerator / denominator) if denominator else 0.0


def pearson_correlation(x, y):
    """Pearson's r (nan when either input is constant).

    Example:
    >>> round(pearson_correlation([1, 2, 3, 4], [2, 4, 5, 9]), 4)
    0.9648
    """
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    dx, dy = x - x.mean(), y - y.mean()
    denominator = np.sqrt(np.sum(dx * dx) * np.sum(dy * dy))
    return float(np.sum(dx * dy) / denominator) if denominator else math.nan


def average_ranks(values):
    """Ranks from 1, tied values sharing the mean of their ranks.

    Example:
    >>> average_ranks([10, 20, 10, 30]).tolist()
    [1.5, 3.0, 1.5, 4.0]
    """
    values = np.asarray(values)
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    # Start of each run of equal values; every member gets the run's mean rank.
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    ends = np.r_[starts[1:], values.size]
    mean_rank = (starts + ends + 1) / 2.0  # mean of ranks starts+1 .. ends
    ranks = np.empty(values.size, np.float64)
    ranks[order] = np.repeat(mean_rank, ends - starts)
    return ranks


def spearman_correlation(x, y):
    """Spearman's rho: Pearson's r of the average ranks.

    Example:
    >>> round(spearman_correlation([1, 2, 3, 4], [1, 3, 2, 4]), 4)
    0.8
    """
    return pearson_correlation(average_ranks(x), average_ranks(y))


# Metric name (as written to eval_results.txt) -> f(labels, predictions).
METRICS = {
    "f1": f1_score,
    "mcc": matthews_correlation,
    "pearson": pearson_correlation,
    "spearman": spearman_correlation,
}


def task_metrics(task, labels, predictions):
    """`{name: value}` of the task's extra metrics (`task.metrics`).

    Args:
        task: The task (its `metrics` names keys of `METRICS`).
        labels: Class ids, or regression targets.
        predictions: Predicted class ids, or predicted values.
    """
    return {name: METRICS[name](labels, predictions) for name in task.metrics}
