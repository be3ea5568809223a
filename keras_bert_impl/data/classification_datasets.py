"""The classification datasets by name: `run_classifier`'s `--task_name`.

google-research/bert's `run_classifier.py` reads XNLI, MNLI, MRPC and CoLA
from their TSV files with one `DataProcessor` class each. Here a dataset is
data: which file holds each split, whether it has a header, which columns
hold `text_a`, `text_b`, the label and the id, and the label list
(`GlueTsvDataset`, one `TsvSplit` per split). The four original datasets keep
the original's files, columns, header skipping, guids and test placeholder
labels; SST-2, QQP, QNLI, RTE, WNLI and STS-B (regression) follow the same
GLUE TSV layout. `get_dataset` also names the other kinds: files with named
columns (`column_files.ColumnDataset`: `csv`, `tsv`, `jsonl`) and prepared
TensorFlow Datasets (`tfds_text`: `glue/<name>`, or any text classification
dataset with its features named).

Unlike the original, which would fail with an `IndexError` or `KeyError`
somewhere later, a GLUE file row with a wrong number of columns, a label
outside the label list or an unparsable regression target is an
`InputFileError` naming `file:line`.
"""

import csv
import dataclasses

from keras_bert_impl import filesystem
from keras_bert_impl.data.classification_examples import SPLITS, ClassifierExample, parse_label, placeholder_label
from keras_bert_impl.data.column_files import ColumnDataset, csv_rows
from keras_bert_impl.data.tfds_text import TfdsGlueDataset, TfdsTextDataset
from keras_bert_impl.errors import BertError, InputFileError


class UnknownDatasetError(BertError, ValueError):
    """A `--task_name` no reader knows."""


@dataclasses.dataclass(frozen=True)
class TsvSplit:
    """One split of a GLUE-format dataset: a tab-separated file without quoting.

    Attributes:
        file: Path under the dataset's data directory.
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
class GlueTsvDataset:
    """A dataset read from GLUE-format TSV files in `--data_dir`.

    Attributes:
        name: The `--task_name`.
        labels: The label list (its order fixes the class ids); None for regression.
        splits: `{"train" | "dev" | "test": TsvSplit}`.
        metrics: Metrics reported next to accuracy and loss (names in
            `classification_metrics.METRICS`).
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
        if split not in self.splits:
            raise ValueError(f"split must be one of {tuple(self.splits)}, got {split!r}")
        layout = self.splits[split]
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


def _tsv_rows(path, layout):
    """Yields `(line_number, row_index, fields)` of a GLUE TSV file, header skipped.

    Read as the original's `_read_tsv` does (`csv.reader`, tab, no quote
    character): one line is one row and quotes are kept as text. `row_index`
    counts rows from 0 including the header (the original's `i`).
    """
    expected = layout.columns
    used = [layout.text_a, layout.text_b, layout.label, layout.guid_column, layout.keep and layout.keep[0]]
    needed = 1 + max(i for i in used if i is not None)
    for row_index, (line_number, fields) in enumerate(csv_rows(path, delimiter="\t", quoting=csv.QUOTE_NONE)):
        if row_index == 0 and layout.header:
            expected = len(fields)
            if expected < needed:
                raise InputFileError(f"{path}:{line_number}: header has {expected} columns, expected at least {needed}")
            continue
        if expected is not None and len(fields) != expected:
            what = "the header" if layout.header else f"{filesystem.basename(path)} of this task"
            raise InputFileError(f"{path}:{line_number}: {len(fields)} columns, expected {expected} (as {what})")
        yield line_number, row_index, fields


# ----------------------------------------------------------------------------
# The GLUE and XNLI files' layouts.
# ----------------------------------------------------------------------------


def _glue_pair_dataset(name, directory, labels, metrics=()):
    """QNLI, RTE, WNLI: `index <tab> text_a <tab> text_b [<tab> label]`."""
    return GlueTsvDataset(
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
    return GlueTsvDataset(
        name,
        ("contradiction", "entailment", "neutral"),
        {
            "train": TsvSplit("train.tsv", "train", 8, 9, label=-1, guid_column=0),
            "dev": TsvSplit(dev_file, dev_file[:-4], 8, 9, label=-1, guid_column=0),
            "test": TsvSplit(test_file, "test", 8, 9, guid_column=0),
        },
    )


def xnli_dataset(language="zh"):
    """The original's XNLI dataset (it fixes `language = "zh"`).

    Train: `multinli/multinli.train.<language>.tsv` (`premise hypo label`).
    Dev/test: `xnli.dev.tsv`/`xnli.test.tsv`, rows of `language` only, text in
    columns 6 and 7, label in column 1.
    """
    return GlueTsvDataset(
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


TSV_DATASETS = {
    "cola": GlueTsvDataset(
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
    "mrpc": GlueTsvDataset(
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
    "xnli": xnli_dataset(),
    "sst-2": GlueTsvDataset(
        "sst-2",
        ("0", "1"),
        {
            "train": TsvSplit("train.tsv", "train", 0, label=1),
            "dev": TsvSplit("dev.tsv", "dev", 0, label=1),
            "test": TsvSplit("test.tsv", "test", 1, guid_column=0),
        },
    ),
    "qqp": GlueTsvDataset(
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
    "qnli": _glue_pair_dataset("qnli", "", ("entailment", "not_entailment")),
    "rte": _glue_pair_dataset("rte", "", ("entailment", "not_entailment")),
    "wnli": _glue_pair_dataset("wnli", "", ("0", "1")),
    "sts-b": GlueTsvDataset(
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

TFDS_DATASETS = {
    dataset.name: dataset
    for dataset in (
        TfdsGlueDataset("glue/cola", ("0", "1"), "sentence", metrics=("mcc",)),
        TfdsGlueDataset("glue/sst2", ("0", "1"), "sentence"),
        TfdsGlueDataset("glue/mrpc", ("0", "1"), "sentence1", "sentence2", metrics=("f1",)),
        TfdsGlueDataset("glue/qqp", ("0", "1"), "question1", "question2", metrics=("f1",)),
        TfdsGlueDataset(
            "glue/stsb", None, "sentence1", "sentence2", metrics=("pearson", "spearman")
        ),
        TfdsGlueDataset(
            "glue/mnli", TSV_DATASETS["mnli"].labels, "premise", "hypothesis", labels_by_name=True,
            split_names=(("train", "train"), ("dev", "validation_matched"), ("test", "test_matched")),
        ),
        TfdsGlueDataset("glue/qnli", TSV_DATASETS["qnli"].labels, "question", "sentence", labels_by_name=True),
        TfdsGlueDataset("glue/rte", TSV_DATASETS["rte"].labels, "sentence1", "sentence2", labels_by_name=True),
        TfdsGlueDataset("glue/wnli", ("0", "1"), "sentence1", "sentence2"),
    )
}

# GLUE's own spellings of the dataset names.
_ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "sts_b": "sts-b", "sst_2": "sst-2"}

COLUMN_FORMATS = ("csv", "tsv", "jsonl")

DATASET_NAMES = tuple(sorted(TSV_DATASETS)) + tuple(sorted(TFDS_DATASETS)) + COLUMN_FORMATS


def get_dataset(name, **options):
    """The dataset called `name` (any case), as `run_classifier` looks up its `--task_name`.

    Args:
        name: A GLUE/XNLI name (`mrpc`, `sst-2`, ...), a TFDS name
            (`glue/mrpc`, ..., or any other with `text_a_feature`), or
            `csv`/`tsv`/`jsonl` for a `ColumnDataset`.
        **options: For the column formats, `ColumnDataset` fields
            (`text_a_column`, `text_b_column`, `label_column`, `labels`,
            `metrics`). For TFDS, `TfdsTextDataset` fields (`text_a_feature`
            makes `name` one, with `text_b_feature`, `label_feature`,
            `labels`), and `splits`: `{"train" | "dev" | "test": TFDS split}`
            replacing the dataset's defaults.

    Returns:
        A `GlueTsvDataset`, `TfdsGlueDataset`, `TfdsTextDataset` or `ColumnDataset`.

    Raises:
        UnknownDatasetError: an unknown name.
        ValueError: options the dataset does not take.

    Example:
    >>> get_dataset("MRPC").labels
    ('0', '1')
    >>> get_dataset("csv", text_a_column="review").text_a_column
    'review'
    >>> dataset = get_dataset("imdb_reviews", text_a_feature="text", splits={"dev": "test"})
    >>> dataset.label_feature, dict(dataset.split_names)["dev"]
    ('label', 'test')
    """
    # The messages name the dataset as the user does, with --task_name.
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key in COLUMN_FORMATS:
        return ColumnDataset(key, **options)
    splits = options.pop("splits", None)
    if "text_a_feature" in options:
        dataset = TfdsTextDataset(name.strip(), **options)
    else:
        dataset = TSV_DATASETS.get(key) or TFDS_DATASETS.get(key)
        if dataset is None:
            raise UnknownDatasetError(
                f"--task_name {name!r} is unknown; choose one of {', '.join(DATASET_NAMES)}, "
                "or name a TFDS dataset's text feature"
            )
        if options:
            raise ValueError(f"task {dataset.name} takes no options ({', '.join(options)})")
    if splits:
        if not hasattr(dataset, "split_names"):
            raise ValueError(f"task {dataset.name} is read from files, not TFDS splits")
        unknown = set(splits) - set(SPLITS)
        if unknown:
            raise ValueError(f"splits are keyed by {SPLITS}, got {sorted(unknown)}")
        dataset = dataclasses.replace(dataset, split_names=tuple({**dict(dataset.split_names), **splits}.items()))
    return dataset


def read_examples(dataset, data_dir, split):
    """Reads one split of `dataset` from `data_dir`.

    Args:
        dataset: From `get_dataset`.
        data_dir: The dataset's directory (the `--data_dir`), or the TFDS data
            directory for TFDS datasets.
        split: `train`, `dev` or `test`.

    Returns:
        A list of `ClassifierExample`s, in file order.

    Raises:
        InputFileError: a missing file, invalid UTF-8, a row with the wrong
            number of columns, or a label outside the dataset's label list, with
            `file:line`; a TFDS dataset that is not prepared in `data_dir`.
    """
    return dataset.read_examples(data_dir, split)
