"""oneDNN's fused products as graph ops, and the Dense layers' calls swapped for them while a graph is traced.

Stock TensorFlow registers oneDNN's fused ops (`_QuantizedMatMul`,
`_MklNativeFusedMatMul`, ...) without Python wrappers: its graph rewrite
writes them into graphs. `registered_op` writes one directly, from its
registered definition, so that a traced graph (and a SavedModel of it,
which TF Serving loads with no Python of ours) holds it.

`methods_set_to` gives layers other methods for the time a graph is traced
(the inference paths of `inference.int8` and `inference.packed_kernels`
compute each Dense layer through such an op), leaving the model unchanged.

The model's activations that oneDNN applies inside its products are
`POST_OP_OF` (the ops' `fused_ops` entry after "BiasAdd").

Example:
>>> import keras
>>> layer = keras.layers.Dense(2)
>>> with dense_calls_set_to([layer], lambda layer: lambda inputs, training=None: inputs * 0):
...     swapped = "call" in vars(layer)
>>> swapped, "call" in vars(layer)
(True, False)
"""

import contextlib

import keras
import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2

from keras_bert_impl.layers import activations

POST_OP_OF = {activations.gelu: "GeluApproximate", activations.gelu_exact: "GeluExact",
              keras.activations.relu: "Relu", keras.activations.tanh: "Tanh"}
POST_OPS = ("GeluApproximate", "GeluExact", "Relu", "Tanh")


def attr_value(value):
    """`value` (bool, int, str, DType, list of DTypes or of str) as an `AttrValue` proto."""
    attr = attr_value_pb2.AttrValue()
    if isinstance(value, bool):
        attr.b = value
    elif isinstance(value, int):
        attr.i = value
    elif isinstance(value, str):
        attr.s = value.encode()
    elif isinstance(value, tf.DType):
        attr.type = value.as_datatype_enum
    elif all(isinstance(item, tf.DType) for item in value):
        attr.list.type.extend(item.as_datatype_enum for item in value)
    else:
        attr.list.s.extend(item.encode() for item in value)
    return attr


def registered_op(op_type, inputs, dtypes, attrs, name):
    """An op of a type TensorFlow registers without a Python wrapper, made in the graph being traced.

    Args:
        op_type: The registered op's name.
        inputs: Its input tensors, in order.
        dtypes: Its output dtypes.
        attrs: Dict of attribute name -> value (as `attr_value` takes).
        name: The node's name.

    Returns:
        The op's outputs, a list of tensors.
    """
    op = tf.compat.v1.get_default_graph()._create_op_internal(
        op_type, [tf.convert_to_tensor(value) for value in inputs], dtypes=dtypes, name=name,
        attrs={key: attr_value(value) for key, value in attrs.items()})
    return op.outputs


@contextlib.contextmanager
def methods_set_to(layers, name, make_method):
    """Within the block, each of `layers` has `make_method(layer)` as its method `name`.

    The layers' own methods come back afterwards. For tracing a graph (or an
    eager calibration pass) without changing the model.
    """
    for layer in layers:
        setattr(layer, name, make_method(layer))
    try:
        yield
    finally:
        for layer in layers:
            delattr(layer, name)


def dense_calls_set_to(layers, make_call):
    """Within the block, each of `layers` computes `make_call(layer)(inputs, training=None)` when called."""
    return methods_set_to(layers, "call", make_call)
