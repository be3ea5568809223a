"""The original `run_pretraining.py` losses, written as pure tensor functions."""

from keras import ops

# The original adds this to the weight sum so a batch with no predictions
# gives a zero loss instead of 0/0.
MLM_WEIGHT_EPSILON = 1e-5


def per_example_cross_entropy(logits, labels):
    """-log softmax(logits)[label], computed in float32.

    One fused softmax-cross-entropy op (TensorFlow's
    `sparse_softmax_cross_entropy_with_logits`): over a 30k vocabulary its
    gradient is the softmax minus a one-hot, where a log-softmax followed by
    a gather would scatter into a [..., vocab] zero tensor.

    Args:
        logits: [..., num_classes].
        labels: [...] integer class ids.

    Returns:
        [...] float32 losses.
    """
    return ops.sparse_categorical_crossentropy(
        ops.cast(labels, "int32"), ops.cast(logits, "float32"), from_logits=True
    )


def masked_lm_loss(logits, masked_lm_ids, masked_lm_weights):
    """The original `get_masked_lm_output` loss: weighted mean over predictions.

    `sum(w * loss) / (sum(w) + 1e-5)` over every prediction slot of the batch,
    so padding slots (weight 0) contribute nothing.

    Args:
        logits: [batch_size, max_predictions_per_seq, vocab_size].
        masked_lm_ids: [batch_size, max_predictions_per_seq].
        masked_lm_weights: [batch_size, max_predictions_per_seq] 0/1 floats.

    Returns:
        `(loss, per_example_loss)`: a scalar and [batch, max_predictions].

    Example:
    >>> import numpy as np
    >>> logits = np.zeros((1, 2, 3), "float32")
    >>> logits[0, 1] = [0.0, 0.0, 100.0]
    >>> loss, per_example = masked_lm_loss(logits, np.array([[1, 0]]),
    ...                                    np.array([[1.0, 0.0]]))
    >>> np.round(np.asarray(per_example, "float64"), 4).tolist()
    [[1.0986, 100.0]]
    >>> round(float(loss), 4)
    1.0986
    """
    per_example = per_example_cross_entropy(logits, masked_lm_ids)
    weights = ops.cast(masked_lm_weights, "float32")
    numerator = ops.sum(weights * per_example)
    denominator = ops.sum(weights) + MLM_WEIGHT_EPSILON
    return numerator / denominator, per_example


def next_sentence_loss(logits, next_sentence_labels):
    """The original `get_next_sentence_output` loss: mean cross-entropy.

    Args:
        logits: [batch_size, 2].
        next_sentence_labels: [batch_size] or [batch_size, 1]; 0 = "B follows A".

    Returns:
        `(loss, per_example_loss)`: a scalar and [batch_size].

    Example:
    >>> import numpy as np
    >>> logits = np.array([[0.0, 0.0], [100.0, 0.0]], "float32")
    >>> loss, per_example = next_sentence_loss(logits, np.array([[1], [0]]))
    >>> np.round(np.asarray(per_example, "float64"), 4).tolist()
    [0.6931, 0.0]
    >>> round(float(loss), 4)
    0.3466
    """
    labels = ops.reshape(next_sentence_labels, (-1,))
    per_example = per_example_cross_entropy(logits, labels)
    return ops.mean(per_example), per_example
