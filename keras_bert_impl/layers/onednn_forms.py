"""The arrangements of LayerNorm and softmax that TensorFlow's oneDNN kernels run fastest, as a layer setting.

TensorFlow's oneDNN graph rewrites have one fused LayerNorm kernel for one
arrangement of ops only (`layers.layer_norm.fused_layer_norm`), and a
softmax that takes bfloat16 and computes in float32 inside (so the casts
around it can go). Whether a graph runs on those kernels depends on the
machine (the rewrites on, no GPU or TPU) and on how it is run (a traced
graph, not eager ops, and not XLA, which compiles kernels of its own). The
layers do not ask the machine: `LayerNorm` and `SelfAttention` carry an
`onednn_forms` setting (off unless set), which the inference plan decides
from the machine (`inference.plan`), and use those arrangements for
inference only when it is on and they are traced into a graph that XLA
does not compile (`traced_outside_xla`). Training keeps Keras'
computation: the fused kernel has no gradient.

Example:
>>> from keras_bert_impl.layers.attention import SelfAttention
>>> attention = SelfAttention(num_attention_heads=2, size_per_head=4)
>>> attention.onednn_forms, set_onednn_forms(attention, True), attention.onednn_forms
(False, 1, True)
>>> traced_outside_xla()  # eager here
False
"""

import contextlib

import tensorflow as tf
from tensorflow.python.framework import ops
from tensorflow.python.ops import control_flow_util


def traced_outside_xla():
    """Whether the graph being built now is a traced one that XLA does not compile.

    False for eager ops (grappler and the oneDNN rewrites work on graphs) and
    inside a function compiled with XLA.
    """
    if tf.executing_eagerly():
        return False
    return not control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph())


def _layers_with_forms(model):
    """Every layer of `model` (itself included) that has an `onednn_forms` setting."""
    layers = [model] + list(model._flatten_layers(include_self=False, recursive=True))
    return [layer for layer in layers if hasattr(layer, "onednn_forms")]


def set_onednn_forms(model, enabled):
    """Turns `onednn_forms` on or off in every `LayerNorm` and `SelfAttention` of `model`.

    Args:
        model: A Keras model or layer.
        enabled: On or off.

    Returns:
        The number of layers set.
    """
    layers = _layers_with_forms(model)
    for layer in layers:
        layer.onednn_forms = bool(enabled)
    return len(layers)


@contextlib.contextmanager
def onednn_forms_set_to(model, enabled):
    """Within the block (while a function is traced), every layer of `model` has `onednn_forms` = `enabled`.

    Each layer gets its own setting back afterwards.
    """
    layers = _layers_with_forms(model)
    before = [layer.onednn_forms for layer in layers]
    for layer in layers:
        layer.onednn_forms = bool(enabled)
    try:
        yield
    finally:
        for layer, setting in zip(layers, before):
            layer.onednn_forms = setting
