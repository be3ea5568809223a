"""Raw text in `fit`/`evaluate`/`predict`: what the Python task models share.

`text_dataset` turns what a Keras user passes (a list of strings, a pair of
lists, NumPy arrays, or a `tf.data.Dataset` of strings) into batches that a
`BertPreprocessor` maps to token ids inside the `tf.data` pipeline, as
keras-hub's tasks do.

Example:
>>> import numpy as np
>>> dataset = text_dataset(["a b", "c"], np.array([0, 1]), batch_size=2,
...                        preprocess=lambda x: {"n": x})
>>> [sorted(x) for x, y in dataset]
[['n']]
"""

import numpy as np
import tensorflow as tf


def _as_text_tensor(texts):
    """[n] strings (`str`, or UTF-8 `bytes`) as a string tensor; a pair as two.

    Raises:
        TypeError: naming the first value that is not a string (a `None` or a
            number would otherwise be trained on as the text "None" or "3").
    """
    if isinstance(texts, tuple) and len(texts) == 2:
        return tuple(_as_text_tensor(t) for t in texts)
    values = np.asarray(texts, dtype=object)
    for index, value in enumerate(values.flat):
        if not isinstance(value, (str, bytes)):
            raise TypeError(f"text {index} is {value!r} ({type(value).__name__}), not a string")
    return tf.constant(values.tolist(), tf.string)


def _num_examples(texts):
    return int(texts[0].shape[0]) if isinstance(texts, tuple) else int(texts.shape[0])


def text_dataset(x, y=None, sample_weight=None, batch_size=32, preprocess=None, shuffle=False, seed=None,
                 repeat=False, drop_remainder=False):
    """Batches of preprocessed text (and labels) for Keras.

    Args:
        x: Texts: a list/array of strings, a tuple `(texts, texts_b)`, or a
            `tf.data.Dataset` of strings, `(x, y)` or `(x, y, sample_weight)`
            (batched or not: an unbatched one is batched here).
        y: Labels, unless `x` is a dataset.
        sample_weight: Per-example weights, unless `x` is a dataset.
        batch_size: Examples per batch.
        preprocess: `preprocess(texts) -> model inputs`, mapped per batch.
        shuffle: Shuffle the examples (a whole-set buffer) on each pass.
        seed: The shuffle's seed.
        repeat: Repeat without end (fit with `steps_per_epoch`).
        drop_remainder: Only full batches.

    Returns:
        A `tf.data.Dataset`.
    """
    if isinstance(x, tf.data.Dataset):
        dataset = x
        if _is_unbatched(dataset):
            dataset = _shuffled(dataset, shuffle, seed, _cardinality(dataset), repeat)
            dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
        elif repeat:
            dataset = dataset.repeat()
    else:
        texts = _as_text_tensor(x)
        parts = [texts] + [np.asarray(v) for v in (y, sample_weight) if v is not None]
        if sample_weight is not None and y is None:
            raise ValueError("sample_weight needs y")
        dataset = tf.data.Dataset.from_tensor_slices(tuple(parts) if len(parts) > 1 else texts)
        dataset = _shuffled(dataset, shuffle, seed, _num_examples(texts), repeat)
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    if preprocess is not None:
        dataset = dataset.map(lambda *item: _preprocessed(preprocess, item), num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)


def _preprocessed(preprocess, item):
    if len(item) == 1:  # texts only
        return preprocess(item[0])
    if len(item) == 2 and all(_is_text(part) for part in item):  # a text pair, no labels
        return preprocess(item)
    return (preprocess(item[0]),) + tuple(item[1:])


def _is_text(value):
    return isinstance(value, tf.Tensor) and value.dtype == tf.string


def _shuffled(dataset, shuffle, seed, size, repeat):
    if shuffle:
        dataset = dataset.shuffle(max(size, 1), seed=seed, reshuffle_each_iteration=True)
    return dataset.repeat() if repeat else dataset


def _cardinality(dataset):
    size = int(dataset.cardinality())
    return size if size > 0 else 10_000


def _is_unbatched(dataset):
    spec = dataset.element_spec
    first = spec[0] if isinstance(spec, tuple) else spec
    if isinstance(first, tuple):
        first = first[0]
    return first.shape.rank == 0
