"""Training, evaluation and prediction on the real tokens: each batch cut after its longest row.

Examples are padded to `max_seq_length` (128 by default, as the original),
while real sentences are mostly far shorter. Every position of a model here
reads only real positions (the attention mask gives a padded key
exp(-10000) = 0 weight), and the losses of classification (from [CLS]) and
tagging (weighted by the labelled pieces) read only real positions, so the
padding columns that no row of a batch reaches can go before the model
runs: the same batches in the same order, the same loss and gradients
within float rounding, at a fraction of the work.

The cut width is rounded up to a multiple of a bucket, so a compiler that
builds one program per shape (XLA on a GPU, a TPU) sees a bounded number
of shapes.

Example:
>>> import numpy as np
>>> batch = ({"input_ids": np.array([[2, 5, 7, 0, 0, 0], [2, 9, 0, 0, 0, 0]]),
...           "input_mask": np.array([[1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0]])},
...          np.array([[1, 2, 3, 0, 0, 0], [4, 5, 0, 0, 0, 0]]), np.array([0, 1]))
>>> x, tags, labels = cut_batch(batch, bucket_size=2)
>>> x["input_ids"].numpy().tolist(), tags.numpy().tolist(), labels.tolist()
([[2, 5, 7, 0], [2, 9, 0, 0]], [[1, 2, 3, 0], [4, 5, 0, 0]], [0, 1])
"""

import sys
import time
import weakref

import numpy as np
import tensorflow as tf

from keras_bert_impl.inference.padding_free import used_length
from keras_bert_impl.inference.plan import cut_bucket_size


def default_bucket_size(max_seq_length):
    """The rounding of cut widths on this machine (`inference.plan.cut_bucket_size`).

    Example:
    >>> default_bucket_size(128) in (8, 16)
    True
    """
    return cut_bucket_size(max_seq_length)


def cut_batch(batch, bucket_size=8):
    """Cuts every [batch, seq] tensor of a batch after its longest row (rounded up).

    The width is that of `input_mask` (the first dict holding one); every
    tensor of rank 2 or more whose second dimension has that width is cut
    (token inputs, and per-token labels and weights), everything else
    passes through.

    Args:
        batch: A structure (dicts, tuples) of tensors with `input_mask`
            [batch, seq] in it.
        bucket_size: Round the width up to a multiple of this.

    Returns:
        The same structure, cut.
    """
    input_mask = _find_input_mask(batch)
    if input_mask is None:
        raise ValueError("cut_batch needs an input_mask in the batch")
    width = input_mask.shape[1]
    length = used_length(input_mask, bucket_size)

    def cut(value):
        shape = getattr(value, "shape", None)
        if shape is not None and len(shape) >= 2 and shape[1] is not None and shape[1] == width:
            return tf.convert_to_tensor(value)[:, :length]
        return value

    return tf.nest.map_structure(cut, batch)


def _find_input_mask(batch):
    if isinstance(batch, dict):
        if "input_mask" in batch:
            return tf.convert_to_tensor(batch["input_mask"])
        batch = list(batch.values())
    if isinstance(batch, (tuple, list)):
        for part in batch:
            found = _find_input_mask(part)
            if found is not None:
                return found
    return None


def cut_padding(dataset, bucket_size=8):
    """`dataset.map(cut_batch)`: a dataset of batches, each cut after its longest row.

    Args:
        dataset: A batched `tf.data.Dataset` with `input_mask` in its elements
            (a static width, as after `batch` of fixed-length features).
        bucket_size: See `cut_batch`.

    Returns:
        The cut dataset, in the same order.
    """
    return dataset.map(lambda *batch: cut_batch(batch[0] if len(batch) == 1 else batch, bucket_size))


def _sequence_axes(model, outputs):
    """Per output, the axes that may be sequence axes, as a bit mask (bit k:
    axis k; a mask, not a tuple, so that `tf.nest` keeps it a leaf): those
    with no fixed size in the model's symbolic outputs (`[batch, seq, ...]`,
    attention probabilities' `[batch, heads, seq, seq]`). A model without
    symbolic outputs: axis 1 of every output of rank 2 or more."""
    try:
        symbolic = model.output  # functional models: the symbolic outputs
    except (AttributeError, ValueError):
        symbolic = None
    if symbolic is None:
        return tf.nest.map_structure(lambda value: 0b10 if np.ndim(value) >= 2 else 0, outputs)
    return tf.nest.map_structure(
        lambda t: sum(1 << axis for axis in range(1, len(t.shape)) if t.shape[axis] is None), symbolic
    )


def _padded_back(outputs, sequence_axes, length, width):
    """Outputs of a batch cut to `length` back to `width` along each of
    their sequence axes that has that length, with zeros (an axis of
    another size, such as masked positions, is not the sequence's)."""

    def pad(value, axes):
        value = np.asarray(value)
        padding = [(0, 0)] * value.ndim
        for axis in range(1, value.ndim):
            if axes >> axis & 1 and value.shape[axis] == length:
                padding[axis] = (0, width - length)
        return np.pad(value, padding) if any(after for _, after in padding) else value

    return tf.nest.map_structure(pad, outputs, sequence_axes)


# model -> {str(element_spec): traced function}; an entry goes with its model.
_TRACED = weakref.WeakKeyDictionary()


def _inference_function(model, element_spec):
    """`model(batch, training=False)` as a tf.function, traced once per model and input spec.

    One trace serves every width and batch size (the spec's dimensions are
    unknown), and later calls with the same model reuse it: an evaluation
    after every epoch, or a benchmark's rounds, do not trace again.
    """
    traced = _TRACED.setdefault(model, {})
    key = str(element_spec)
    if key not in traced:
        # A weak reference, so that the cache entry does not keep its key alive.
        model_ref = weakref.ref(model)
        traced[key] = tf.function(lambda batch: model_ref()(batch, training=False), input_signature=[element_spec])
    return traced[key]


def cut_length(input_mask, bucket_size=8):
    """`inference.padding_free.used_length` of a NumPy mask, in NumPy.

    One past the last real position of any row, rounded up to a multiple of
    `bucket_size`, never more than the width and at least 1.

    Example:
    >>> cut_length(np.array([[1, 1, 1, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0]]), bucket_size=2)
    4
    """
    width = input_mask.shape[1]
    used = np.flatnonzero(np.any(input_mask > 0, axis=0))  # columns some row reaches
    last = int(used[-1]) + 1 if used.size else 1
    return min(-(-last // bucket_size) * bucket_size, max(width, 1))


def _batch_spec(arrays, width, cut):
    """The `tf.TensorSpec` of every batch: batch size open, and the width too where batches are cut."""

    def spec(array):
        shape = [None, *array.shape[1:]]
        if cut and array.ndim >= 2 and array.shape[1] == width:
            shape[1] = None
        return tf.TensorSpec(shape, tf.as_dtype(array.dtype))

    return {key: spec(array) for key, array in arrays.items()}


def predict_on_real_tokens(model, inputs, batch_size, bucket_size=8, cut=True, log=None, description="examples",
                           verbose=True):
    """`model.predict(inputs)` with each batch cut after its longest row.

    Per-token outputs come back at the full width, zeros after each batch's
    cut (positions no caller reads: they are padding): every axis with no
    fixed size in the model's outputs that has the cut length (both
    sequence axes of attention probabilities; not the masked positions of a
    masked-LM head, unless their count equals the cut length). Progress: a Keras
    progress bar when stdout is a terminal, else a line every 30 s through
    `log` for runs that take that long.

    The batches are sliced from the arrays in NumPy and handed to one traced
    function of the model (`tf.data` would trace its cutting function and
    start an iterator on every call: about 50 of the 68 ms a one-text
    `TextClassifier.predict` of MiniLM took, docs/BENCHMARKS.md).

    Args:
        model: A Keras model taking the dict of `inputs`.
        inputs: Dict of arrays [num_examples, seq, ...], `input_mask` among
            them.
        batch_size: Examples per batch.
        bucket_size: See `cut_batch`.
        cut: False predicts at the full width (as the original).
        log: `log(message)` for progress lines, or None.
        description: What the examples are, in progress lines.
        verbose: False shows no progress bar (Keras' `verbose=0`).

    Returns:
        The model's outputs for all examples, as NumPy (the same structure
        as one call's).

    Example:
    >>> from keras_bert_impl.config import BertConfig
    >>> from keras_bert_impl.models.classifier import BertClassifier
    >>> model = BertClassifier(BertConfig(vocab_size=10, hidden_size=8, num_hidden_layers=1,
    ...                                   num_attention_heads=2, intermediate_size=16), num_labels=3)
    >>> inputs = {"input_ids": np.array([[2, 5, 3, 0, 0, 0]] * 5), "input_mask": np.array([[1, 1, 1, 0, 0, 0]] * 5),
    ...           "segment_ids": np.zeros((5, 6), np.int64)}
    >>> predict_on_real_tokens(model, inputs, batch_size=2).shape
    (5, 3)
    """
    import keras

    arrays = {key: np.asarray(value) for key, value in inputs.items()}
    num_examples, width = arrays["input_mask"].shape[:2]
    if not num_examples:
        raise ValueError("predict_on_real_tokens needs at least one example")
    forward = _inference_function(model, _batch_spec(arrays, width, cut))
    bar = (keras.utils.Progbar(num_examples, unit_name=description)
           if verbose and sys.stdout.isatty() else None)
    outputs, sequence_axes = [], None
    start = last_report = time.monotonic()
    for first in range(0, num_examples, batch_size):
        batch = {key: array[first : first + batch_size] for key, array in arrays.items()}
        length = cut_length(batch["input_mask"], bucket_size) if cut else width
        if length < width:
            batch = {key: array[:, :length] if array.ndim >= 2 and array.shape[1] == width else array
                     for key, array in batch.items()}
        result = tf.nest.map_structure(lambda t: t.numpy(), forward(batch))
        if length < width:
            sequence_axes = sequence_axes or _sequence_axes(model, result)
            result = _padded_back(result, sequence_axes, length, width)
        outputs.append(result)
        done = min(first + batch_size, num_examples)
        if bar is not None:
            bar.update(done)
        elif log is not None and time.monotonic() - last_report >= 30 and done < num_examples:
            last_report = time.monotonic()
            rate = done / (last_report - start)
            log(f"predicted {done} of {num_examples} {description} ({rate:.1f}/s)")
    return tf.nest.map_structure(lambda *parts: np.concatenate(parts, axis=0), *outputs)
