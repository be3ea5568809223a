"""A model's predictions over NumPy arrays, batch by batch, through one traced function.

Keras' `predict` builds a `tf.data` pipeline and starts its iterator on every
call, and a function mapped over a new pipeline is traced anew: most of a
`predict` of one text (docs/BENCHMARKS.md, "The task models' `predict` on raw
text"). Here the batches are sliced from the arrays in NumPy (each cut after
its longest row, where asked) and handed to one `tf.function` of the model,
traced once per model and input structure; per-token outputs come back at the
full width. Used by every model's `predict` of arrays
(`models.base.BertConfigModel.predict`), the task models and the tools'
predictions (`training.fine_tuning.predict_batches`).

Example:
>>> cut_length(np.array([[1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0]]), bucket_size=4)
4
"""

import sys
import time
import weakref

import numpy as np
import tensorflow as tf

from keras_bert_impl.inference.plan import keras_graph_forms
from keras_bert_impl.layers.onednn_forms import onednn_forms_set_to


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
        forms = keras_graph_forms()

        def call(batch):
            with onednn_forms_set_to(model_ref(), forms):  # while it is traced
                return model_ref()(batch, training=False)

        traced[key] = tf.function(call, input_signature=[element_spec])
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
        bucket_size: Round each cut width up to a multiple of this.
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
