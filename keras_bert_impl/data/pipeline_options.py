"""The `tf.data` options of the pipelines this package builds: no autotuning thread.

With its default options, every `tf.data` iterator starts a model thread
(`RootDataset::Iterator::EnsureModelThreadStarted`) that re-optimizes the
pipeline's parallelism and buffers after a period that doubles up to 60 s. When
the iterator is released, its cancellation wakes that thread before the
cancellation is marked done (TensorFlow 2.20's `CancellationManager` runs the
callbacks, then sets `is_cancelled_`): a thread that wakes in between sees no
cancellation and sleeps out the rest of its period, and the release waits for
it. The thread that drops the last reference (the caller of `predict`, Keras
between epochs, or Python's garbage collector in whatever code triggers it)
stands still meanwhile, for up to as long as the iterator has lived (60 s at
most). Measured: 1 release in 12 lost the race on two idle CPUs, 9-10 in 12 in a
process held to one CPU, about half beside the busy test suite
(docs/FINDINGS.md, `benchmarks/bench_iterator_release.py`).

Our pipelines are a few cheap maps in front of a model that takes far longer per
batch, so autotuning has little to tune: with it off, `num_parallel_calls=
tf.data.AUTOTUNE` runs at the value autotuning starts from (min(16, the CPU
count)) and `prefetch(tf.data.AUTOTUNE)` keeps its own buffer tuning, neither
of which uses the model thread.

Example:
>>> import tensorflow as tf
>>> dataset = without_autotune_thread(tf.data.Dataset.range(4).batch(2))
>>> dataset.options().autotune.enabled
False
>>> [batch.tolist() for batch in dataset.as_numpy_iterator()]
[[0, 1], [2, 3]]
"""


def without_autotune_thread(dataset):
    """`dataset` with `tf.data`'s autotuning (and so its model thread) off.

    A dataset whose options already say whether to autotune keeps them: a
    caller who asked for autotuning gets it.

    Args:
        dataset: A `tf.data.Dataset`.

    Returns:
        The same elements, as a `tf.data.Dataset` whose iterators start no
        autotuning thread.
    """
    import tensorflow as tf

    if dataset.options().autotune.enabled is not None:
        return dataset
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def array_batches(arrays, batch_size):
    """Arrays (a nest of them, sliced along their first axis) in batches, in order.

    What Keras' `predict(arrays, batch_size=...)` builds for itself, without
    the autotuning thread (see the module docstring).

    Args:
        arrays: A nest (dict, tuple) of arrays or tensors with one first axis.
        batch_size: Rows per batch; the last batch may be smaller.

    Returns:
        A `tf.data.Dataset` of batches.
    """
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices(_lists_to_tuples(arrays)).batch(batch_size)
    return without_autotune_thread(dataset.prefetch(tf.data.AUTOTUNE))


def _lists_to_tuples(nest):
    """A nest with its lists as tuples: tf.data reads a list as one tensor, Keras as a sequence of outputs."""
    if isinstance(nest, (list, tuple)):
        return tuple(_lists_to_tuples(part) for part in nest)
    if isinstance(nest, dict):
        return {key: _lists_to_tuples(part) for key, part in nest.items()}
    return nest


def array_epochs(arrays, batch_size, shuffle=True):
    """Arrays in batches for Keras' `fit`: every row once per pass, in a new order on each pass.

    What Keras' `fit(arrays, batch_size=..., shuffle=...)` builds for itself
    (each epoch iterates the dataset again, and so draws a new order; the
    last batch smaller where `batch_size` does not divide the rows; floats
    in Keras' `floatx`), without the autotuning thread (see the module
    docstring). The order is drawn over row indices, so the arrays are not
    copied into a shuffle buffer; each batch is gathered from them.

    Args:
        arrays: A nest (dict, tuple, list) of arrays or tensors with one
            first axis of at least one row.
        batch_size: Rows per batch.
        shuffle: False keeps the rows' order.

    Returns:
        A `tf.data.Dataset` of batches, one pass per iteration.

    Example:
    >>> import numpy as np
    >>> dataset = array_epochs({"ids": np.arange(5)}, 2, shuffle=False)
    >>> [batch["ids"].tolist() for batch in dataset.as_numpy_iterator()]
    [[0, 1], [2, 3], [4]]
    """
    import keras
    import tensorflow as tf

    def tensor(array):
        array = tf.convert_to_tensor(array)
        return tf.cast(array, keras.config.floatx()) if array.dtype.is_floating else array

    arrays = tf.nest.map_structure(tensor, _lists_to_tuples(arrays))
    rows = int(tf.nest.flatten(arrays)[0].shape[0])
    order = tf.data.Dataset.range(rows)
    if shuffle:
        order = order.shuffle(rows, reshuffle_each_iteration=True)  # a buffer of row numbers only
    whole = tf.data.Dataset.from_tensors(arrays).repeat()
    dataset = tf.data.Dataset.zip(order.batch(batch_size), whole).map(
        lambda rows_of_batch, data: tf.nest.map_structure(lambda array: tf.gather(array, rows_of_batch), data),
        num_parallel_calls=tf.data.AUTOTUNE)
    options = tf.data.Options()
    # Under a distribution strategy each worker takes its share of every batch, as Keras' arrays do.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return without_autotune_thread(dataset.with_options(options).prefetch(tf.data.AUTOTUNE))
