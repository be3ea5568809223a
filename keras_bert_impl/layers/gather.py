"""The original `gather_indexes`: the hidden states at chosen positions."""

import tensorflow as tf
from keras import ops


def gather_indexes(sequence_output, positions):
    """Rows of `sequence_output` at `positions`, per batch row, as the original.

    Flattens to [batch_size * seq_length, H] and gathers at
    `positions + row * seq_length`, so the gradient is a sparse update of the
    gathered rows only.

    Args:
        sequence_output: [batch_size, seq_length, H].
        positions: [batch_size, num_positions] integer positions.

    Returns:
        [batch_size, num_positions, H].

    Example:
    >>> import numpy as np
    >>> x = np.arange(12, dtype="float32").reshape(2, 3, 2)
    >>> gather_indexes(x, np.array([[2], [0]])).numpy().tolist()
    [[[4.0, 5.0]], [[6.0, 7.0]]]
    """
    shape = ops.shape(sequence_output)
    batch_size, seq_length, width = shape[0], shape[1], sequence_output.shape[-1]
    positions = ops.cast(positions, "int32")
    # [batch_size, 1]
    offsets = ops.expand_dims(ops.arange(batch_size, dtype="int32") * seq_length, 1)
    # [batch_size * num_positions]
    flat_positions = ops.reshape(positions + offsets, (-1,))
    # [batch_size * seq_length, H] -> [batch_size * num_positions, H]; `tf.gather`, as the
    # original: `ops.take` wraps a negative index around to another example's rows.
    rows = tf.gather(ops.reshape(sequence_output, (-1, width)), flat_positions)
    return ops.reshape(rows, (batch_size, ops.shape(positions)[1], width))
