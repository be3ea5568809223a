"""Real tokens as rows of one matrix: where each goes, and where each position reads it back.

In a batch of unequal sentences padded to one length, every per-token
operation of a transformer layer (query/key/value, attention output, the
feed-forward pair, both LayerNorms) is wasted on the padded positions. The
encoder can instead gather the real tokens into one [rows, H] matrix, run
every per-token operation on it, and lay it out as [batch, seq] only for the
attention products. These are the index maps between the two layouts.
"""

import tensorflow as tf


def real_token_rows(input_mask, bucket_size=1):
    """Where each real token goes in the compact matrix, and where each position reads it back.

    Args:
        input_mask: [batch, seq] 1 for real tokens, 0 for padding (any
            pattern, not only trailing padding).
        bucket_size: Round the row count up to a multiple of this (at least
            one bucket, even for an all-padding batch; none for an empty
            one). The extra rows hold flat position 0; nothing reads them back.

    Returns:
        `(token_positions, row_of_position)`: int32 [rows] flat positions
        (`batch_index * seq + position`) of the real tokens in order, then
        the filler rows; and int32 [batch * seq] the row of each flat
        position (row 0 for padding, whose values are never used).

    Example:
    >>> positions, rows = real_token_rows([[1, 1, 0], [1, 0, 0]], bucket_size=2)
    >>> positions.numpy().tolist(), rows.numpy().tolist()
    ([0, 1, 3, 0], [0, 1, 0, 2, 0, 0])
    """
    # [batch * seq]
    is_real = tf.reshape(tf.convert_to_tensor(input_mask), [-1]) > 0
    # [num_real]
    positions = tf.cast(tf.where(is_real)[:, 0], tf.int32)
    num_real = tf.shape(positions)[0]
    rows = tf.maximum((num_real + bucket_size - 1) // bucket_size, 1) * bucket_size
    # An empty batch has no flat position 0 for filler rows to hold: no rows.
    rows = tf.where(tf.size(is_real) > 0, rows, 0)
    # [rows]
    positions = tf.concat([positions, tf.zeros([rows - num_real], tf.int32)], axis=0)
    # [batch * seq]: the i-th real token is row i.
    row_of_position = tf.where(is_real, tf.cumsum(tf.cast(is_real, tf.int32)) - 1, 0)
    return positions, row_of_position


def rows_to_padded(rows, row_of_position, input_mask):
    """[rows, H] back to [batch, seq, H], zeros at the padded positions.

    Args:
        rows: [rows, H] values of the real tokens (from `real_token_rows`).
        row_of_position: [batch * seq] from `real_token_rows`.
        input_mask: [batch, seq].

    Returns:
        [batch, seq, H].

    Example:
    >>> mask = [[1, 1, 0], [1, 0, 0]]
    >>> positions, row_of = real_token_rows(mask)
    >>> rows_to_padded(tf.constant([[1.0], [2.0], [3.0]]), row_of, mask)[..., 0].numpy().tolist()
    [[1.0, 2.0, 0.0], [3.0, 0.0, 0.0]]
    """
    input_mask = tf.convert_to_tensor(input_mask)
    batch_size, seq_length = tf.shape(input_mask)[0], tf.shape(input_mask)[1]
    # [batch * seq, H] -> [batch, seq, H]
    padded = tf.reshape(tf.gather(rows, row_of_position), [batch_size, seq_length, tf.shape(rows)[-1]])
    return tf.where((input_mask > 0)[:, :, None], padded, tf.zeros_like(padded))
