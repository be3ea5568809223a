"""Labelled text (pair) examples for classification, and their label lists.

google-research/bert's `run_classifier.py` gives each `InputExample` a guid,
its texts and a label from the processor's `get_labels()`; unlabelled test
examples get the first label. Here that is `ClassifierExample`, whatever
dataset it was read from (`classification_datasets.get_dataset`), and the
functions that check labels against a dataset's label list, infer the list
from training examples when none is given, and turn labels into class ids.

A dataset is any object with `name`, `labels` (a tuple, or None for
regression or a list still to be inferred) and `is_regression`.
"""

import dataclasses
import math

import numpy as np

from keras_bert_impl.data.text_pairs import TextPairExample
from keras_bert_impl.errors import InputFileError

SPLITS = ("train", "dev", "test")


@dataclasses.dataclass(frozen=True)
class ClassifierExample(TextPairExample):
    """A `TextPairExample` with its label, as the original's `InputExample`.

    Attributes:
        unique_id: Position in its split, from 0.
        text_a, text_b: The texts (`text_b` None for single-sentence datasets).
        guid: The original's id, e.g. `"train-1"` or `"dev_matched-12"`.
        label: A string from the dataset's label list, or a float for regression.
            Test examples carry the dataset's placeholder (its first label, 0.0).
        source: Where the example was read, `path:line`, for error messages.
    """

    guid: str
    label: object
    source: str = ""


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


def with_labels(dataset, train_examples):
    """`dataset` with its label list inferred from `train_examples` when it has none.

    A no-op for datasets with a fixed label list and for regression.

    Raises:
        InputFileError: fewer than two distinct training labels, or a label
            with a line break.
    """
    if dataset.is_regression or dataset.labels is not None:
        return dataset
    for example in train_examples:
        if isinstance(example.label, str) and ("\n" in example.label or "\r" in example.label):
            # label_list.txt and the export's labels.txt hold one label a line.
            raise InputFileError(f"{example.source}: label {example.label!r} holds a line break; a label is one line")
    labels = infer_labels(train_examples)
    if len(labels) < 2:
        where = train_examples[0].source.rsplit(":", 1)[0] if train_examples else "the training data"
        raise InputFileError(
            f"{where}: {len(labels)} distinct label(s) {', '.join(map(repr, labels))}; a classifier needs "
            "two or more (list them with --labels)"
        )
    return dataclasses.replace(dataset, labels=labels)


def placeholder_label(dataset):
    """The label the original gives unlabeled test examples: the first label (0.0 for regression)."""
    if dataset.is_regression:
        return 0.0
    if not dataset.labels:
        return None
    return dataset.labels[0]


def parse_label(dataset, label, source):
    """`label` checked against the dataset's label list (or parsed as a float for regression).

    Raises:
        InputFileError: naming `source` and the allowed labels.
    """
    # The messages say "task" for the dataset: its name is the `--task_name` given.
    if dataset.is_regression:
        try:
            value = float(label)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise InputFileError(f"{source}: label {label!r} is not a number (task {dataset.name} is a regression)")
        return value
    if label not in dataset.labels:
        allowed = ", ".join(map(repr, dataset.labels))
        raise InputFileError(f"{source}: label {label!r} is not one of {allowed} (task {dataset.name})")
    return label


def label_ids(dataset, examples):
    """Class ids (int32) of `examples`, or their float32 targets for regression."""
    if dataset.is_regression:
        return np.array([e.label for e in examples], np.float32)
    index = {label: i for i, label in enumerate(dataset.labels)}
    return np.array([index[e.label] for e in examples], np.int32)
