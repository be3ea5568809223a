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

import weakref

import numpy as np
import tensorflow as tf

from keras_bert_impl.data.pipeline_options import array_batches, without_autotune_thread
from keras_bert_impl.inference.array_prediction import predict_on_real_tokens
from keras_bert_impl.training.real_tokens import default_bucket_size


def text_tensor(texts):
    """What the task models take as texts, as a [n] string tensor (a pair as two).

    Args:
        texts: A list or array of strings (`str`, or UTF-8 `bytes`); an
            [n, 1] array (a one-column table) is read as [n]; one string is a
            batch of one; a tuple `(texts_a, texts_b)` is a batch of pairs
            (two strings: one pair), as keras-hub's preprocessors read a tuple.

    Raises:
        TypeError: naming the first value that is not a string (a `None` or a
            number would otherwise be read as the text "None" or "3"), or an
            array of another shape.
        ValueError: the two sides of a pair differ in length, or a text
            holds a lone surrogate (no UTF-8 for it), named.
    """
    if isinstance(texts, tf.Tensor) and texts.dtype == tf.string and texts.shape.rank == 1:
        return texts  # Already [n] strings (this function's own result, or a part of one).
    if isinstance(texts, tuple) and len(texts) == 2:
        first, second = (text_tensor(part) for part in texts)
        if first.shape[0] != second.shape[0]:
            raise ValueError(f"a text pair needs as many second texts as first ones: {first.shape[0]} and "
                             f"{second.shape[0]}")
        return first, second
    if isinstance(texts, (str, bytes)):
        texts = [texts]
    if isinstance(texts, (dict, set, frozenset)) or hasattr(texts, "__next__"):  # no order, or read once
        raise TypeError(f"texts must be a list of strings (or a tuple of two lists for pairs); got a "
                        f"{type(texts).__name__}")
    values = np.asarray(texts, dtype=object)
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.ndim != 1:
        raise TypeError(f"texts must be a list of strings (or a tuple of two lists for pairs); got an array "
                        f"of shape {values.shape}")
    for index, value in enumerate(values):
        if not isinstance(value, (str, bytes)):
            raise TypeError(f"text {index} is {value!r} ({type(value).__name__}), not a string")
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as error:  # a lone surrogate ("\ud800"): no UTF-8 for it
                raise ValueError(f"text {index} ({value[:40]!r}) cannot be written as UTF-8: {error.reason} at "
                                 f"character {error.start}") from None
    return tf.constant(values.tolist(), tf.string, shape=[len(values)])


def num_texts(texts):
    """How many examples `text_tensor`'s result holds."""
    return int(texts[0].shape[0]) if isinstance(texts, tuple) else int(texts.shape[0])


# How many calls of a preprocessor `tokenized` runs eagerly before it traces it: about as many as make
# the eager per-op cost (5-12 ms a call) add up to one trace (~0.7 s), so that a model asked a few times
# never pays the trace and one asked many times pays it once.
EAGER_CALLS = 50

# preprocessor -> its `_Tokenizing`; an entry goes with its preprocessor.
_TOKENIZING = weakref.WeakKeyDictionary()


class _Tokenizing:
    """A preprocessor's calls so far, and its traced functions (single texts, pairs)."""

    def __init__(self, preprocessor):
        self.calls = 0
        preprocessor_ref = weakref.ref(preprocessor)  # the entry must not keep its key alive
        texts = tf.TensorSpec([None], tf.string)
        self.traced = {
            pair: tf.function(lambda x: preprocessor_ref()(x), input_signature=[(texts, texts) if pair else texts],
                              autograph=False)
            for pair in (False, True)
        }


def tokenized(preprocessor, texts):
    """`preprocessor(texts)` as a dict of NumPy arrays [n, max_seq_length].

    A preprocessor's first `EAGER_CALLS` calls run its ops eagerly; later
    calls run one traced function of it (one for single texts, one for
    pairs). Eagerly, each of the tokenizer's ops costs tens of microseconds,
    5-12 ms a call however few the texts; traced, a call of one text takes
    about 0.5 ms, and the trace under a second once (docs/BENCHMARKS.md,
    "The task models' `predict` on raw text"). So a model asked a few times
    pays no trace, and a model asked again and again no per-op cost.

    Args:
        preprocessor: A `BertPreprocessor` or `TextPreprocessor`.
        texts: `text_tensor`'s result: [n] strings, or a tuple of two.

    Returns:
        Dict of NumPy arrays, the preprocessor's outputs.

    Example:
    >>> from keras_bert_impl.tokenization.preprocessor import BertPreprocessor
    >>> preprocessor = BertPreprocessor(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hi"], max_seq_length=5)
    >>> tokenized(preprocessor, text_tensor(["hi", "hi hi"]))["input_ids"].tolist()
    [[2, 4, 3, 0, 0], [2, 4, 4, 3, 0]]
    """
    tokenizing = _TOKENIZING.get(preprocessor)
    if tokenizing is None:
        tokenizing = _TOKENIZING[preprocessor] = _Tokenizing(preprocessor)
    tokenizing.calls += 1
    if tokenizing.calls <= EAGER_CALLS:
        outputs = preprocessor(texts)
    else:
        outputs = tokenizing.traced[isinstance(texts, tuple)](texts)
    return {name: value.numpy() for name, value in outputs.items()}


def predict_token_ids(model, inputs, batch_size=None, cut=True, description="texts", **kwargs):
    """A task model's `predict` of its texts' token ids (`tokenized`'s output).

    Given `callbacks`, Keras' `predict` at the full width; otherwise batch
    by batch through one traced function of the model, each batch cut after
    its longest row unless `cut` is False
    (`inference.array_prediction.predict_on_real_tokens`).

    Args:
        model: A task model with a `preprocessor`.
        inputs: Dict of arrays [n, max_seq_length].
        batch_size: Examples per batch (None: 32).
        cut: Cut each batch after its longest row.
        description: What the examples are, in the progress bar.
        **kwargs: Keras `predict`'s; `verbose=0` shows no progress bar.

    Returns:
        The model's outputs for all examples, as NumPy.
    """
    import keras

    batch_size = batch_size or 32
    if kwargs.get("callbacks"):
        return keras.Model.predict(model, array_batches(inputs, batch_size), **kwargs)
    return predict_on_real_tokens(model, inputs, batch_size, default_bucket_size(model.preprocessor.max_seq_length),
                                  cut=cut, description=description, verbose=kwargs.get("verbose", "auto") != 0)


def label_array(values, count, name="y"):
    """Labels (or sample weights) as a NumPy array of numbers, one per text.

    Raises:
        TypeError: a value is not a number (class names must be mapped to ids).
        ValueError: not one value per text.
    """
    array = np.asarray(values)
    if array.dtype.kind not in "biuf":
        for index, value in enumerate(array.reshape(-1)):
            if not isinstance(value, (int, float, np.number)) or isinstance(value, bool):
                raise TypeError(f"{name} {index} is {value!r} ({type(value).__name__}), not a number"
                                + (" (map class names to ids 0..num_classes-1)" if name == "y" else ""))
        array = array.astype(np.float64)
    if array.ndim == 0 or array.shape[0] != count:
        have = "a scalar" if array.ndim == 0 else f"{array.shape[0]} values"
        raise ValueError(f"{name} has {have} for {count} texts")
    bad = np.flatnonzero(~np.isfinite(array.reshape(count, -1)).all(axis=1))
    if bad.size:
        raise ValueError(f"{name} {bad[0]} is {array[bad[0]]}: NaN or infinite values would train NaN weights")
    return array


def check_class_ids(labels, num_classes, name="y"):
    """Refuses class-id labels (one per text) that are not whole numbers in [0, num_classes).

    One-hot rows ([n, num_classes], for a categorical loss) pass as they are.

    Raises:
        ValueError: naming the first such label.

    Example:
    >>> check_class_ids(np.array([0, 1, 0.5]), 2)
    Traceback (most recent call last):
    ...
    ValueError: y 2 is 0.5, not a class id in [0, 2)
    """
    if labels.ndim != 1:
        return
    bad = np.flatnonzero((labels != np.round(labels)) | (labels < 0) | (labels >= num_classes))
    if bad.size:
        raise ValueError(f"{name} {bad[0]} is {labels[bad[0]]}, not a class id in [0, {num_classes})")


def check_count(value, name, allow_none=True):
    """Refuses a count (batch size, epochs, top_k) that is not a whole number of at least 1.

    Example:
    >>> check_count(0, "batch_size")
    Traceback (most recent call last):
    ...
    ValueError: batch_size must be a whole number of at least 1, got 0
    """
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}")


def check_labelled(dataset, method):
    """Raises unless `dataset`'s elements can carry labels: an element of two
    strings is a text pair without labels.

    Raises:
        ValueError: naming `method` and how to give the labels.
    """
    spec = dataset.element_spec
    if isinstance(spec, tuple) and len(spec) == 2 and all(_is_text_spec(part) for part in spec):
        raise ValueError(f"{method} needs labels, but each element of the dataset is two strings, which is read "
                         "as a text pair: give ((texts_a, texts_b), labels), with labels as numbers")
    if not isinstance(spec, tuple) or _is_text_spec(spec):
        raise ValueError(f"{method} needs labels: give a dataset of (texts, labels)")


def _is_text_spec(spec):
    return isinstance(spec, tf.TensorSpec) and spec.dtype == tf.string


def text_dataset(x, y=None, sample_weight=None, batch_size=32, preprocess=None, shuffle=False, seed=None,
                 repeat=False, drop_remainder=False, tokenize=None):
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
        tokenize: For texts not in a dataset, in place of `preprocess`:
            `tokenize(texts) -> dict of arrays`, run once on all of them
            before they are batched (`tokenized`). A map of `preprocess`
            traces the tokenizer's graph again each time a dataset is made:
            ~1.5 s of CPU an `evaluate` call on a small BERT.

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
        texts = text_tensor(x)
        if sample_weight is not None and y is None:
            raise ValueError("sample_weight needs y")
        count = num_texts(texts)
        if tokenize is not None:
            texts, preprocess = tokenize(texts), None
        parts = [texts] + [label_array(v, count, name) for v, name in ((y, "y"), (sample_weight, "sample_weight"))
                           if v is not None]
        dataset = tf.data.Dataset.from_tensor_slices(tuple(parts) if len(parts) > 1 else texts)
        dataset = _shuffled(dataset, shuffle, seed, count, repeat)
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    if preprocess is not None:
        dataset = dataset.map(lambda *item: _preprocessed(preprocess, item), num_parallel_calls=tf.data.AUTOTUNE)
    return without_autotune_thread(dataset.prefetch(tf.data.AUTOTUNE))


def window_dataset(x, y=None, sample_weight=None, batch_size=32, preprocess=None, shuffle=False, seed=None,
                   repeat=False, drop_remainder=False):
    """`text_dataset` with each text made into rows of its own (a long text's windows), batched as rows.

    Args:
        x, y, sample_weight, shuffle, seed, repeat: As `text_dataset`'s (texts
            shuffled as texts).
        batch_size: Rows per batch (texts are read in batches of as many).
        preprocess: `preprocess(texts) -> (inputs, text_index)`: [n] single
            texts to model inputs [rows, ...] and each row's text [rows]
            (`tokenization.long_text.long_text_inputs`).
        drop_remainder: Only full batches of rows.

    Returns:
        A `tf.data.Dataset` of `inputs`, or of `(inputs, labels[, weights])`
        where each row has its text's label and weight.

    Raises:
        ValueError: the texts are pairs (`preprocess` reads single texts).

    Example:
    >>> def two_rows_each(texts):
    ...     return {"n": tf.repeat(texts, 2)}, tf.repeat(tf.range(tf.size(texts)), 2)
    >>> batches = window_dataset(["a", "b"], np.array([0, 1]), batch_size=3, preprocess=two_rows_each)
    >>> [y.numpy().tolist() for x, y in batches]
    [[0, 0, 1], [1]]
    """
    dataset = text_dataset(x, y, sample_weight, batch_size=batch_size, shuffle=shuffle, seed=seed, repeat=repeat)

    def rows(*item):
        if isinstance(item[0], tuple) or (len(item) == 2 and all(_is_text(part) for part in item)):
            raise ValueError("long texts are read as single texts; text pairs are cut")
        inputs, text_index = preprocess(item[0])
        others = tuple(tf.gather(part, text_index) for part in item[1:])  # each row its text's label, weight
        return (inputs,) + others if others else inputs

    dataset = dataset.map(rows).unbatch().batch(batch_size, drop_remainder=drop_remainder)
    return without_autotune_thread(dataset.prefetch(tf.data.AUTOTUNE))


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
