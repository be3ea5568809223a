"""Softmax and log-softmax of logits in NumPy float64, for the tools' result
files (evaluation losses, `test_results.tsv`).

Example:
>>> import numpy as np
>>> softmax(np.array([[0.0, np.log(3.0)]])).round(6).tolist()
[[0.25, 0.75]]
>>> float(log_softmax(np.array([[0.0, 0.0]]))[0, 0].round(6))
-0.693147
"""

import numpy as np


def log_softmax(logits):
    """Log-probabilities over the last axis, computed stably in float64."""
    logits = np.asarray(logits, np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def softmax(logits):
    """Probabilities over the last axis, computed stably in float64."""
    logits = np.asarray(logits, np.float64)
    exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return exp / exp.sum(axis=-1, keepdims=True)


def per_example_cross_entropy(logits, label_ids):
    """`-log p(label)` for each example: logits [..., num_classes], int label_ids [...]."""
    log_probs = log_softmax(logits)
    return -np.take_along_axis(log_probs, np.asarray(label_ids)[..., None], axis=-1)[..., 0]
