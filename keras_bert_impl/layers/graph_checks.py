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
            shown = " ".join(str(value.numpy()) if hasattr(value, "numpy") else str(value) for value in data)
            raise tf.errors.InvalidArgumentError(None, None, f"{message} {shown}".strip())
        return None
    return tf.debugging.Assert(condition, [message, *data])


def ids_in_range(ids, size, negative_message, too_large_message):
    """Two checks of integer `ids`: none negative, none `size` or more; each error shows the offending extreme.

    Args:
        ids: Integer tensor of any shape.
        size: Python int, the table's row count.
        negative_message, too_large_message: The two errors' first words.

    Returns:
        A list of the two check ops, for `tf.control_dependencies`.
    """
    ids = tf.convert_to_tensor(ids)
    # Shown as int32 (see `check`); an int64 id beyond int32 shows as int32's extreme.
    shown = ids if ids.dtype == tf.int32 else tf.cast(tf.clip_by_value(ids, -2**31, 2**31 - 1), tf.int32)
    return [
        check(ids >= 0, negative_message, "smallest id:", tf.reduce_min(shown)),
        check(ids < tf.constant(size, ids.dtype), too_large_message, "largest id:", tf.reduce_max(shown)),
    ]
