"""Which layers of a model the inference forms replace: its transformer encoders' Dense layers and attentions.

`inference.packed_kernels` and the int8 modules (`inference.int8`) compute
the same layers in other ops; both find them here, by the layer types of
`layers/`, in any model that holds a `BertModel` (taken duck-typed: a task
model, a Keras functional model around one). `observe_dense_inputs` runs a
model and hands each of those layers' inputs to a callback (what int8's
calibration and smoothing read).

Example:
>>> from keras_bert_impl.config import BertConfig
>>> from keras_bert_impl.models.bert_model import BertModel
>>> model = BertModel(BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=2,
...                              num_attention_heads=2, intermediate_size=16))
>>> len(encoder_dense_layers(model)), len(self_attention_layers(model)), len(requantized_pairs(model))
(12, 2, 2)
"""

import keras
import numpy as np

from keras_bert_impl.inference.onednn_ops import dense_calls_set_to


def encoder_dense_layers(model):
    """Every Dense layer inside the transformer encoders of `model` (query, key, value and the three after).

    Args:
        model: A `BertModel` or a task model holding one.

    Returns:
        A list of `keras.layers.Dense`, in model order.
    """
    return [layer for encoder in transformer_encoders(model)
            for layer in encoder._flatten_layers(include_self=False, recursive=True)
            if isinstance(layer, keras.layers.Dense)]


def transformer_encoders(model):
    """The `TransformerEncoder` layers inside `model` (itself included), in model order."""
    from keras_bert_impl.layers.transformer import TransformerEncoder

    return [layer for layer in model._flatten_layers(include_self=True, recursive=True)
            if isinstance(layer, TransformerEncoder)]


def self_attention_layers(model):
    """The `SelfAttention` layers inside the transformer encoders of `model`, in model order."""
    from keras_bert_impl.layers.attention import SelfAttention

    return [layer for encoder in transformer_encoders(model)
            for layer in encoder._flatten_layers(include_self=False, recursive=True)
            if isinstance(layer, SelfAttention)]


def requantized_pairs(model):
    """{intermediate Dense path: output Dense path} of each transformer block of `model`.

    The intermediate layer's output is the output layer's only input, so
    with calibrated ranges the first product can hand the second its input
    already quantized (`int8_matmul(requantize_range=...)`).
    """
    from keras_bert_impl.layers.transformer import TransformerLayer

    return {layer.intermediate.path: layer.output_dense.path for encoder in transformer_encoders(model)
            for layer in encoder._flatten_layers(include_self=False, recursive=True)
            if isinstance(layer, TransformerLayer)}


def input_groups(model):
    """The encoder Dense layers of `model` that read one input, each group quantized once: lists of layer paths.

    Query, key and value read one input; every other layer reads its own.
    The output layers of `requantized_pairs` are left out: their input
    comes quantized from the intermediate product.
    """
    grouped = {layer.path: [layer.query.path, layer.key.path, layer.value.path]
               for layer in self_attention_layers(model)}
    members = {path for group in grouped.values() for path in group}
    requantized = set(requantized_pairs(model).values())
    groups = list(grouped.values())
    groups += [[layer.path] for layer in encoder_dense_layers(model)
               if layer.path not in members and layer.path not in requantized]
    return groups


def observe_dense_inputs(model, batches, observe):
    """Runs `batches` through `model` in float32, calling `observe(layer path, input array)` at each encoder Dense layer."""

    def make_call(layer):
        original = type(layer).call

        def call(inputs, training=None):
            observe(layer.path, np.asarray(inputs))
            return original(layer, inputs, training=training)

        return call

    with dense_calls_set_to(encoder_dense_layers(model), make_call):
        for inputs in batches:
            model(inputs, training=False)
