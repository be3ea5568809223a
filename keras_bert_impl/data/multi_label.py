"""Multi-label text: texts with any number of labels (topics, tags, toxicity kinds), and their scores.

Labels are read from the same `train`/`dev`/`test` files `ColumnDataset`
reads (`.csv`, `.tsv`, `.jsonl`), given either as one column of delimited
label names (`"sports|politics"`, empty for none; a JSON list in JSON lines)
or as one 0/1 column per label (`toxic`, `insult`, ... as the Jigsaw
toxicity files). Every bad cell is an `InputFileError` naming `file:line`
and the column.

The scores are pure NumPy (micro and macro F1, per-label precision, recall,
F1 and support, exact-match accuracy), as scikit-learn defines them with
`zero_division=0` (tested against it); so is `tune_thresholds`, each label's
threshold chosen on a grid for that label's F1 on the dev set.

Example:
>>> scores = multi_label_scores(np.array([[1, 0], [1, 1]]), np.array([[1, 0], [0, 1]]), ("a", "b"))
>>> scores["micro_f1"], scores["a_recall"], scores["exact_match"]
(0.8, 0.5, 0.5)
>>> tune_thresholds(np.array([[0.9, 0.2], [0.3, 0.1]]), np.array([[1, 0], [1, 0]]))
(0.3, 0.5)
"""

import dataclasses

import numpy as np

from keras_bert_impl import filesystem
from keras_bert_impl.data.classification_examples import SPLITS
from keras_bert_impl.data.column_files import table_rows, text_value
from keras_bert_impl.errors import InputFileError


@dataclasses.dataclass(frozen=True)
class MultiLabelExample:
    """A text (pair) and its set of labels.

    Attributes:
        unique_id: Position in its split, from 0.
        text_a, text_b: The texts (`text_b` None for single texts).
        labels: The example's label names, a tuple (may be empty; empty for
            an unlabelled test example).
        source: `path:line`.
    """

    unique_id: int
    text_a: str
    text_b: str
    labels: tuple
    source: str = ""


@dataclasses.dataclass(frozen=True)
class MultiLabelDataset:
    """Multi-label text in `<split>.csv`, `.tsv` or `.jsonl` files with named columns.

    Attributes:
        name: `csv`, `tsv` or `jsonl` (the file format).
        text_a_column, text_b_column: Columns of the texts.
        label_column: One column of label names joined by `delimiter` (a
            JSON list in JSON lines), when `label_columns` is empty.
        label_columns: One 0/1 column per label, named as the labels.
        delimiter: Between label names in `label_column`.
        labels: The label list; None: `label_columns`, else the training
            file's labels, sorted (`with_labels`).
    """

    name: str
    text_a_column: str = "text"
    text_b_column: str = None
    label_column: str = "labels"
    label_columns: tuple = ()
    delimiter: str = ","
    labels: tuple = None

    def __post_init__(self):
        if self.labels is None and self.label_columns:
            object.__setattr__(self, "labels", tuple(self.label_columns))
        if self.labels is not None and not self.labels:
            raise InputFileError("the label list is empty: a multi-label task needs at least one label")

    def read_examples(self, data_dir, split):
        """The examples of `split` ("train", "dev", "test"; a test file needs no labels).

        Raises:
            InputFileError: naming `file:line` and the column: a missing
                column, a label not in `labels`, a 0/1 column holding
                another value, a repeated label.
        """
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        path = filesystem.join(data_dir, f"{split}.{self.name}")
        examples = []
        for line_number, row in table_rows(path, self.name):
            source = f"{path}:{line_number}"
            for column in (self.text_a_column, self.text_b_column):
                if column is not None and column not in row:
                    raise InputFileError(f"{source}: {column}: no such column (has {', '.join(map(repr, row))})")
            labels = () if split == "test" else self._labels(row, source)
            text_b = text_value(row[self.text_b_column], source) if self.text_b_column else None
            examples.append(MultiLabelExample(len(examples), text_value(row[self.text_a_column], source), text_b,
                                              labels, source))
        return examples

    def _labels(self, row, source):
        if self.label_columns:
            labels = []
            for column in self.label_columns:
                if column not in row:
                    raise InputFileError(f"{source}: {column}: no such column")
                value = text_value(row[column], f"{source}: {column}").strip()
                if value not in ("0", "1", "true", "false", "0.0", "1.0"):
                    raise InputFileError(f"{source}: {column}: {value!r} is not 0 or 1")
                if value in ("1", "true", "1.0"):
                    labels.append(column)
            return tuple(labels)
        if self.label_column not in row:
            raise InputFileError(f"{source}: {self.label_column}: no such column")
        value = row[self.label_column]
        if isinstance(value, list):
            names = [text_value(name, f"{source}: {self.label_column}").strip() for name in value]
        else:
            text = text_value(value, f"{source}: {self.label_column}")
            names = [name.strip() for name in text.split(self.delimiter)] if text.strip() else []
        if "" in names:
            raise InputFileError(f"{source}: {self.label_column}: an empty label name in {value!r}")
        if len(set(names)) != len(names):
            raise InputFileError(f"{source}: {self.label_column}: a label repeated in {value!r}")
        if self.labels is not None:
            for name in names:
                if name not in self.labels:
                    raise InputFileError(f"{source}: {self.label_column}: label {name!r} is not one of "
                                         f"{', '.join(self.labels)}")
        return tuple(names)


def with_labels(dataset, train_examples, source):
    """`dataset` with its label list: as given, else the training examples' labels, sorted.

    Raises:
        InputFileError: the training examples have no label at all.
    """
    if dataset.labels is not None:
        return dataset
    labels = tuple(sorted({label for example in train_examples for label in example.labels}))
    if not labels:
        raise InputFileError(f"{source}: no example has a label: a multi-label task needs at least one")
    return dataclasses.replace(dataset, labels=labels)


def multi_hot(examples, labels):
    """float32 [num_examples, num_labels]: 1 where the example has the label."""
    index = {label: i for i, label in enumerate(labels)}
    targets = np.zeros((len(examples), len(labels)), np.float32)
    for row, example in enumerate(examples):
        for label in example.labels:
            targets[row, index[label]] = 1.0
    return targets


def _f1(true_positives, predicted, actual):
    precision = true_positives / predicted if predicted else 0.0
    recall = true_positives / actual if actual else 0.0
    f1 = 2 * true_positives / (predicted + actual) if predicted + actual else 0.0
    return float(precision), float(recall), float(f1)


def multi_label_scores(targets, predictions, labels):
    """Micro/macro F1, per-label precision/recall/F1/support and exact match (pure NumPy).

    Args:
        targets: 0/1 [n, num_labels], the true label sets.
        predictions: 0/1 [n, num_labels], the labels over the threshold.
        labels: The label names (keys `<label>_f1`, ...).

    Returns:
        `{name: value}`: `micro_precision`, `micro_recall`, `micro_f1`,
        `macro_f1` (the unweighted mean of the labels' F1), `exact_match`
        (the share of examples whose whole set is right), and per label
        `<label>_precision`, `_recall`, `_f1`, `_support`. A score whose
        denominator is 0 is 0 (scikit-learn's `zero_division=0`).
    """
    targets = np.asarray(targets) > 0.5
    predictions = np.asarray(predictions) > 0.5
    true_positives = (targets & predictions).sum(axis=0)
    result = {}
    f1s = []
    for i, label in enumerate(labels):
        precision, recall, f1 = _f1(true_positives[i], predictions[:, i].sum(), targets[:, i].sum())
        result.update({f"{label}_precision": precision, f"{label}_recall": recall, f"{label}_f1": f1,
                       f"{label}_support": int(targets[:, i].sum())})
        f1s.append(f1)
    precision, recall, f1 = _f1(true_positives.sum(), predictions.sum(), targets.sum())
    result.update({"micro_precision": precision, "micro_recall": recall, "micro_f1": f1,
                   "macro_f1": float(np.mean(f1s)),
                   "exact_match": float((targets == predictions).all(axis=1).mean())})
    return result


# The thresholds `tune_thresholds` tries by default: 0.05, 0.10, ..., 0.95.
DEFAULT_THRESHOLD_GRID = tuple(round(0.05 * i, 2) for i in range(1, 20))


def per_label_thresholds(threshold, num_labels, source="threshold"):
    """`threshold` (one number, or one per label) as a tuple of one float per label, each in (0, 1).

    Raises:
        ValueError: naming `source`: not a number or a list of numbers, a
            list of another length than `num_labels`, a value outside (0, 1).

    Example:
    >>> per_label_thresholds(0.4, 3)
    (0.4, 0.4, 0.4)
    >>> per_label_thresholds([0.5, 0.3], 3, "multi_label.json: thresholds")
    Traceback (most recent call last):
    ...
    ValueError: multi_label.json: thresholds has 2 values for 3 labels: give one number, or one per label
    """
    values = [threshold] if np.ndim(threshold) == 0 else threshold
    if np.ndim(threshold) > 1 or not all(isinstance(v, (int, float, np.number)) and not isinstance(v, bool)
                                         for v in values):
        raise ValueError(f"{source} is {threshold!r}: give one number, or one per label")
    if len(values) not in (1, num_labels):
        raise ValueError(f"{source} has {len(values)} values for {num_labels} labels: give one number, or one per "
                         "label")
    outside = [v for v in values if not 0.0 < float(v) < 1.0]
    if outside:
        raise ValueError(f"{source}: {outside[0]} is not in (0, 1): a threshold is a probability strictly between")
    return tuple(float(v) for v in values) * (num_labels if len(values) == 1 else 1)


def tune_thresholds(probabilities, targets, grid=DEFAULT_THRESHOLD_GRID):
    """Each label's threshold that maximises that label's F1 on a (dev) set: one float per label.

    A label is predicted where its probability is at or over its threshold.
    Of thresholds with the same F1 the one nearest 0.5 wins (the lower of
    two as near); a label with no positive example keeps 0.5 (its F1 is 0
    at any threshold, so the set says nothing about it).

    Args:
        probabilities: [n, num_labels], each label's probability.
        targets: 0/1 [n, num_labels], the true label sets.
        grid: The thresholds tried, each in (0, 1).

    Returns:
        A tuple of `num_labels` floats, each from `grid` (or 0.5).

    Raises:
        ValueError: shapes that differ or are not [n, num_labels] with
            n >= 1, an empty grid or a grid value outside (0, 1).
    """
    probabilities = np.asarray(probabilities, np.float64)
    targets = np.asarray(targets) > 0.5
    if probabilities.ndim != 2 or probabilities.shape != targets.shape or not probabilities.shape[0]:
        raise ValueError(f"probabilities {probabilities.shape} and targets {targets.shape}: both must be "
                         "[num_examples, num_labels], with at least one example")
    grid = np.asarray(grid, np.float64).reshape(-1)
    if not grid.size or not ((grid > 0.0) & (grid < 1.0)).all():
        raise ValueError(f"grid {grid.tolist()}: the thresholds tried must be at least one, each in (0, 1)")
    # Nearest 0.5 first, the lower of two as near first: argmax keeps the first of equal F1s.
    grid = grid[np.lexsort((grid, np.abs(grid - 0.5)))]
    thresholds = []
    for label in range(targets.shape[1]):
        actual = int(targets[:, label].sum())
        if not actual:
            thresholds.append(0.5)
            continue
        predicted = probabilities[:, label][None, :] >= grid[:, None]  # [grid, n]
        true_positives = (predicted & targets[:, label][None, :]).sum(axis=1)
        f1 = 2.0 * true_positives / (predicted.sum(axis=1) + actual)  # actual > 0: never 0 / 0
        thresholds.append(float(grid[int(np.argmax(f1))]))
    return tuple(thresholds)


def per_example_binary_cross_entropy(logits, targets):
    """The mean over labels of each label's sigmoid cross-entropy, per example [n] (float64, stable)."""
    logits = np.asarray(logits, np.float64)
    targets = np.asarray(targets, np.float64)
    # max(x, 0) - x*t + log(1 + exp(-|x|)) = -(t log sigmoid(x) + (1-t) log(1 - sigmoid(x)))
    return (np.maximum(logits, 0) - logits * targets + np.log1p(np.exp(-np.abs(logits)))).mean(axis=-1)
