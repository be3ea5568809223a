"""The metrics GLUE reports, in NumPy: accuracy, F1 (MRPC, QQP), Matthews
correlation (CoLA), Pearson and Spearman correlation (STS-B).

`run_classifier` writes accuracy and loss for every dataset, and next to them
the metrics its dataset names (`dataset_metrics`).
"""

import math

import numpy as np


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


def dataset_metrics(dataset, labels, predictions):
    """`{name: value}` of the dataset's extra metrics (`dataset.metrics`).

    Args:
        dataset: The dataset (its `metrics` names keys of `METRICS`).
        labels: Class ids, or regression targets.
        predictions: Predicted class ids, or predicted values.
    """
    return {name: METRICS[name](labels, predictions) for name in dataset.metrics}
