"""Prepared TensorFlow Datasets as classification examples.

Two kinds of dataset, read only where already prepared (`tfds_inputs`:
nothing is downloaded):

* `TfdsGlueDataset`: `glue/<name>`, its examples put back in the GLUE files'
  order and labelled as the TSV dataset of the same name, so a model
  fine-tuned on either has the same class ids.
* `TfdsTextDataset`: any TFDS text classification (or regression) dataset,
  its text and label features named, the labels its `ClassLabel`'s names
  (`with_dataset_labels`).

Where TFDS and HF readers would skip a record silently, a record without a
label or with text that is not UTF-8 is an `InputFileError` naming the split
and the record.
"""

import dataclasses

import numpy as np

from keras_bert_impl.data.classification_examples import SPLITS, ClassifierExample, parse_label, placeholder_label
from keras_bert_impl.data.tfds_inputs import (
    class_names,
    feature,
    is_text,
    open_prepared,
    read_split,
    split_source,
    text,
)
from keras_bert_impl.errors import InputFileError


def _tfds_example(unique_id, row, text_a_key, text_b_key, guid, label, source):
    """A `ClassifierExample` of one TFDS record, its texts under `text_a_key`, `text_b_key` (or None)."""
    text_b = text(row[text_b_key], f"{source} {text_b_key}") if text_b_key else None
    return ClassifierExample(unique_id, text(row[text_a_key], f"{source} {text_a_key}"), text_b, guid=guid,
                             label=label, source=source)


@dataclasses.dataclass(frozen=True)
class TfdsGlueDataset:
    """`glue/<name>` from TensorFlow Datasets, prepared beforehand in `--data_dir`.

    Examples are put back in file order (TFDS stores them shuffled; `idx` is
    the row in the GLUE file), so guids are `<split>-<idx>`.

    Attributes:
        name: The TFDS name, e.g. `glue/mrpc`.
        labels: Our label list, as the TSV dataset of the same name (so a model
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
class TfdsTextDataset:
    """Any TFDS text classification (or regression) dataset, prepared in `--data_dir`.

    The features holding the text(s) and the label are named; the label list
    is the label feature's class names when it is a `ClassLabel` (so class
    ids are the dataset's), else given, or inferred from the training split
    as for a `ColumnDataset`; a float label makes it a regression.
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


def with_dataset_labels(dataset, data_dir):
    """`dataset` with what its TFDS metadata says about the labels.

    For a `TfdsTextDataset` without a label list: the label feature's class
    names, or regression for a float label; other datasets are returned as
    they are.

    Raises:
        InputFileError: see `TfdsTextDataset.label_names`.
    """
    if not isinstance(dataset, TfdsTextDataset) or dataset.labels is not None:
        return dataset
    names, is_float = dataset.label_names(data_dir)
    if names is not None:
        return dataclasses.replace(dataset, labels=names)
    return dataclasses.replace(dataset, is_regression=is_float)
