"""Dense kernels kept as variables but packed once by oneDNN, as constant kernels are: their speed, without the copies.

A Dense kernel read from a variable makes TensorFlow's oneDNN product repack
it on every call (`x64:gemm:jit`); a kernel that is a graph constant is
packed once into oneDNN's blocked layout and multiplied by `brgemm`, on AMX
tiles where the CPU has them (`inference.constant_kernels`). Constants cost
memory: the SavedModel's graph holds them, and the loaders keep more copies
(docs/BENCHMARKS.md, "Memory that holds").

What the oneDNN graph rewrite does for a constant kernel is one attribute of
the op it writes, `is_filter_const` of `_MklNativeFusedMatMul` (MatMul, its
bias add and an activation as one op). Here each Dense layer computes that
op itself, `is_filter_const=True`, on the kernel its variable holds: oneDNN
packs it on the first call and keeps the packed copy in the op, as for a
constant, while the SavedModel holds the kernel once, as a variable. Query,
key and value are one product, as float32's constant kernels make them
(`SelfAttention.fused_query_key_value`), on their kernels side by side held
as one variable of their own (`variables`), which the SavedModel holds in
place of the three.

The op is in stock x86 TensorFlow and TF Serving (oneDNN's kernel), with the
graph rewrites on or off (`TF_ENABLE_ONEDNN_OPTS`), as the int8 export's
`_QuantizedMatMul` is; not in a TensorFlow built without oneDNN.

The packed copy is taken on the op's first call: a graph that has run, then
sees its variables assigned, goes on multiplying by the first values. That is
a serving graph's case (nothing assigns its variables) and a frozen inference
function's (it runs a private copy of the model: `inference.function`), and
is why this is never for a model that trains; the query/key/value variables
are a snapshot taken when the `PackedKernels` is made.
`TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1` does the same for every product of a
process, wrongly where a product's second operand is not a weight; this does
it for the model's own Dense kernels only.

Example:
>>> import numpy as np
>>> x = tf.constant(np.arange(6, dtype="float32").reshape(2, 3))
>>> kernel = tf.Variable(np.ones((3, 4), "float32"))
>>> bias = tf.constant(np.arange(4, dtype="float32"))
>>> product = tf.function(lambda x: packed_product(x, kernel, bias, "Tanh"))
>>> bool(np.allclose(product(x), np.tanh(x.numpy() @ kernel.numpy() + bias.numpy()), atol=1e-6))
True
"""

import contextlib

import keras
import numpy as np
import tensorflow as tf

from keras_bert_impl.inference.encoder_layers import self_attention_layers
from keras_bert_impl.inference.onednn_ops import (
    POST_OP_OF,
    POST_OPS,
    dense_calls_set_to,
    methods_set_to,
    registered_op,
)

# The oneDNN rewrite's kernel label for its ops that keep TensorFlow's tensor layout.
_ONEDNN_LABEL = "MklNameChangeOp"


def packed_product(x, kernel, bias, activation=None):
    """`activation(x kernel + bias)` as one oneDNN product that packs `kernel` on its first call and keeps it.

    Args:
        x: [rows, in], float32 or bfloat16.
        kernel: [in, out] of `x`'s dtype: a variable's value (or any tensor
            that stays the same from call to call: the op keeps its first).
        bias: [out] of `x`'s dtype.
        activation: None or one of `onednn_ops.POST_OPS`, applied inside.

    Returns:
        [rows, out] of `x`'s dtype.
    """
    if activation not in (None,) + POST_OPS:
        raise ValueError(f"activation must be None or one of {POST_OPS}, not {activation!r}")
    if tf.executing_eagerly():  # the op is made in a graph (below): an eager call runs it in one
        return tf.function(lambda x: packed_product(x, kernel, bias, activation))(x)
    x = tf.convert_to_tensor(x)
    attrs = dict(T=x.dtype, num_args=1, is_filter_const=True, transpose_a=False, transpose_b=False,
                 fused_ops=["BiasAdd"] + ([activation] if activation else []), _kernel=_ONEDNN_LABEL)
    # `_MklNativeFusedMatMul`: the oneDNN rewrite's op for MatMul + BiasAdd (+ activation), without a Python wrapper.
    return registered_op("_MklNativeFusedMatMul", [x, kernel, bias], [x.dtype], attrs, name="PackedMatMul")[0]


def packed_dense_call(layer):
    """A `call` for Dense `layer` that computes `packed_product` on its kernel variable, within a traced graph.

    A layer without a bias computes as it does; an activation oneDNN has no
    post-op for is applied after the product.

    Args:
        layer: A `keras.layers.Dense` whose kernel is stored in its compute
            dtype (float32 or bfloat16).

    Returns:
        `call(inputs, training=None)`, for `onednn_ops.dense_calls_set_to`.
    """
    own_call = type(layer).call.__get__(layer)
    post_op = POST_OP_OF.get(layer.activation)
    after = None if post_op or layer.activation in (None, keras.activations.linear) else layer.activation

    def call(inputs, training=None):
        if layer.bias is None:
            return own_call(inputs)
        with tf.name_scope(layer.name):
            x = tf.cast(inputs, layer.compute_dtype)
            # [..., in] -> [rows, in]
            rows = tf.reshape(x, [-1, layer.kernel.shape[0]])
            # [rows, out]
            product = packed_product(rows, layer.kernel.value, layer.bias.value, post_op)
            # [rows, out] -> [..., out]
            outputs = tf.reshape(product, tf.concat([tf.shape(x)[:-1], [layer.kernel.shape[1]]], axis=0))
            return after(outputs) if after is not None else outputs

    return call


def _fusable_attentions(model):
    """The `SelfAttention` layers of `model` whose query, key and value become one product (float32, biases)."""
    return [layer for layer in self_attention_layers(model) if layer.compute_dtype == "float32"
            and all(dense.bias is not None for dense in (layer.query, layer.key, layer.value))]


class PackedKernels:
    """A model's Dense layers as products that pack their kernels once, for a traced function (`scope()`).

    Used as `ConstantKernels` is (`BertServingModule`, `call_skipping_padding`):
    within `scope()` every Dense layer with a bias computes `packed_product`
    on its kernel variable, and the float32 attentions compute query, key and
    value as one on `variables`. The SavedModel saves the model's variables
    except the three kernels and biases of each fused attention (`holds`),
    and saves `variables` in their place.

    Args:
        model: A Keras model (a `BertModel` or a task model) computing in
            float32 or bfloat16, its kernels stored in that dtype (built
            with `inference.precision.inference_dtype_policy`, as an export's
            model is).

    Raises:
        ValueError: a Dense kernel stored in another dtype than its layer
            computes in (it would be cast on every call before its product).
    """

    def __init__(self, model):
        self._layers = [layer for layer in model._flatten_layers(include_self=True, recursive=True)
                        if isinstance(layer, keras.layers.Dense)]
        for layer in self._layers:
            if layer.kernel.dtype != layer.compute_dtype:
                raise ValueError(f"{layer.path}: its kernel is {layer.kernel.dtype}, its products "
                                 f"{layer.compute_dtype}: build the model with the inference dtype policy")
        self._attentions = _fusable_attentions(model)
        self._fused = {}  # attention path -> ([H, 3H] kernel, [3H] bias) variables
        for attention in self._attentions:
            group = (attention.query, attention.key, attention.value)
            self._fused[attention.path] = (
                tf.Variable(np.concatenate([layer.kernel.numpy() for layer in group], axis=1), trainable=False,
                            name=f"{attention.path}/query_key_value/kernel"),
                tf.Variable(np.concatenate([layer.bias.numpy() for layer in group]), trainable=False,
                            name=f"{attention.path}/query_key_value/bias"))
        self._replaced = {id(variable) for attention in self._attentions
                          for layer in (attention.query, attention.key, attention.value)
                          for variable in (layer.kernel, layer.bias)}

    def __len__(self):
        return len(self._layers)

    # The graph holds no copy of a kernel.
    nbytes = 0

    @property
    def variables(self):
        """The query/key/value variables (each fused attention's kernel and bias), for the SavedModel to save."""
        return [variable for pair in self._fused.values() for variable in pair]

    def holds(self, variable):
        """Whether `variable` is a query, key or value kernel or bias that `variables` stands in for."""
        return id(variable) in self._replaced

    @contextlib.contextmanager
    def scope(self):
        """Within it, while a `tf.function` is traced, the Dense layers compute `packed_product`.

        A layer without a bias computes as it does. Enter it in the function
        whose graph holds the products, as `ConstantKernels.scope`.

        Raises:
            RuntimeError: entered eagerly.
        """
        if tf.executing_eagerly():
            raise RuntimeError("PackedKernels.scope() is for tracing a tf.function, not eager calls")

        def make_fused_query_key_value(attention):
            kernel, bias = self._fused[attention.path]

            def fused_query_key_value(matrix, training=None):
                if training:
                    return None
                with tf.name_scope(attention.name):
                    # [rows, H] x [H, 3H] -> [rows, 3H]
                    return packed_product(tf.cast(matrix, "float32"), kernel.value(), bias.value())

            return fused_query_key_value

        with dense_calls_set_to(self._layers, packed_dense_call), \
                methods_set_to(self._attentions, "fused_query_key_value", make_fused_query_key_value):
            yield
