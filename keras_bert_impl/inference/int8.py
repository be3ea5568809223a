"""The encoder's Dense layers with int8 kernels, their products on the CPU's int8 units, through stock TensorFlow ops.

Each encoder Dense kernel W [in, out] is held as int8 with one scale per
output channel (symmetric: `W[:, j] ~ kernel_scales[j] * Wq[:, j]`,
`Wq` in [-127, 127]). Its input x [rows, in] is quantized per tensor to
uint8 over a range [lo, hi] that holds 0: `x ~ lo + step * u8`, `step =
(hi - lo) / 255`. The range is either found as each batch comes (the
tensor's min and max: "dynamic") or calibrated once on the task's own texts
(`calibrate_input_ranges`: "static", between the 99.999th percentile of the
values seen and its complement, values beyond clipped; fewer ops per
product). Then

    x W[:, j] + b[j] ~ kernel_scales[j] * step * (u8 Wq)[:, j] + (b[j] + lo * kernel_scales[j] * sum_i Wq[i, j])

and the int32 product `u8 Wq` is oneDNN's u8 x s8 inner product, on VNNI
(or AMX-int8) where the CPU has it.

The ops, all registered in stock TensorFlow 2.20 (so in a SavedModel that
TF Serving loads, with no Python of ours):

- Element-wise ops quantize each input (multiply, add, round, clip, cast,
  bitcast to quint8: `quantize_input`): u8 = round((x - lo) / step),
  clipped to [0, 255], in oneDNN's float32 arithmetic, rounded to nearest
  even (`int8_reference` emulates it). oneDNN's `QuantizeV2` kernel gives
  the same codes, but costs ~80 us of set-up a call at one request, and
  behind a `tf.cond` on the row count (where it paid, on batches) cost more
  at one request than it saved (docs/BENCHMARKS.md, "int8").
- `_QuantizedMatMul` (oneDNN's fused int8 product, the op Intel's
  quantization tools write; registered without a Python wrapper, so made
  here by `int8_matmul`) with `input_quant_mode="SCALED"`, `min_a=0`,
  `max_a=hi - lo`: its input scale is then `max_a / 255 = step`, its float32
  bias is taken as it is (the input's offset `lo` is carried in it), and
  `min_b`/`max_b` are vectors, `-/+ 127 kernel_scales`: the per-channel
  scales are applied inside. Its `fused_ops` also apply the layer's GELU
  (`GeluApproximate`/`GeluExact`) inside the product, and with calibrated
  ranges the intermediate product's output comes out already quantized
  (`Requantize`, over the output layer's range) for the output product.
  It reorders its int8 kernel into oneDNN's blocked layout once and keeps
  it (`is_weight_const`), from a graph constant or from an int8 variable
  (`Int8Kernels(kernels_as_variables=True)`, the export's default: no copy
  of the kernels in the graph). Measured at one request: docs/BENCHMARKS.md,
  "One product, op by op".
- `_QuantizedMatMul` is oneDNN's kernel whether TensorFlow's oneDNN graph
  rewrites are on or off (`TF_ENABLE_ONEDNN_OPTS=0`; tested both ways), so
  an int8 graph runs wherever a stock x86 TensorFlow does.

With calibrated ranges each input channel's spread is first shared with the
kernel's row (SmoothQuant, Xiao et al. 2023): `x W = (x / s)(diag(s) W)`,
`s[c] = max|x[:, c]|^alpha / max|W[c, :]|^(1 - alpha)` over the calibration
texts (`smoothing_factors`), so that a few channels with large activations
(as a LayerNorm's output has) no longer coarsen every other channel's
step. It costs no op: `1 / s` is folded into the quantization's multiplier
(a vector in place of a scalar) and `s` into the int8 kernel's rows. The
output product's input comes requantized from the intermediate product
(above) and is not smoothed. Measured: docs/BENCHMARKS.md, "Smoothed
activations".

Queries, keys and values read the same input: it is quantized once, and
their product is one, on the three kernels side by side (`concatenated`;
per output channel, so exactly the three products), that
`SelfAttention.fused_query_key_value` splits into heads as float32's fused
product (`Int8Kernels.scope`). Pooler and task heads stay float32 (a few
hundred multiply-adds per example).

Measured products, error and speed: docs/BENCHMARKS.md, "int8".

The work is split by job: the arithmetic (`int8_arithmetic`), the op
(`int8_ops`), the smoothing (`int8_smoothing`), the calibration and the
agreement with float32 (`int8_calibration`), the calibration file
(`int8_files`), and here `Int8Kernels`, which computes a model's encoder
Dense layers with them while a graph is traced; their public names are
importable from this module too.

Example:
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> kernel = quantize_kernel(rng.normal(size=(8, 4)).astype("float32"))
>>> kernel.values.dtype.name, kernel.values.shape, kernel.scales.shape, int(np.abs(kernel.values).max())
('int8', (8, 4), (4,), 127)
"""

import contextlib

import keras
import numpy as np
import tensorflow as tf

from keras_bert_impl.inference.constant_kernels import dense_kernels
from keras_bert_impl.inference.encoder_layers import (
    encoder_dense_layers,
    input_groups,
    requantized_pairs,
    self_attention_layers,
)
from keras_bert_impl.inference.int8_arithmetic import (
    MIN_RANGE,
    QuantizedKernel,
    calibrated_step,
    concatenated,
    dequantize,
    dynamic_input_range,
    int8_reference,
    quantize_input,
    quantize_kernel,
)
from keras_bert_impl.inference.int8_calibration import (
    DEFAULT_CALIBRATION_PERCENTILE,
    agreement,
    calibrate,
    calibrate_input_ranges,
    calibration_ends,
)
from keras_bert_impl.inference.int8_files import read_calibration_texts
from keras_bert_impl.inference.int8_ops import int8_matmul
from keras_bert_impl.inference.int8_smoothing import (
    DEFAULT_SMOOTHING_ALPHA,
    SMOOTHING_FLOOR,
    checked_smoothing,
    smoothed,
    smoothing_factors,
    smoothing_scales,
)
from keras_bert_impl.inference.onednn_ops import POST_OP_OF, dense_calls_set_to, methods_set_to
from keras_bert_impl.inference.packed_kernels import packed_dense_call


class Int8Kernels:
    """A model's encoder Dense layers as int8 products, for a traced function (`scope()`, as `ConstantKernels`).

    Within `scope()` each encoder Dense layer computes `int8_matmul`: its
    scales and bias are constants of the traced graph, its input quantized
    over `input_ranges[layer.path]` (static) or over the batch's own min and
    max (dynamic, where `input_ranges` is None), its activation (GELU)
    applied inside the product. Query, key and value are one product
    (`SelfAttention.fused_query_key_value`), and with static ranges the
    intermediate product's output comes out quantized for the output
    product; with `smoothing` an input is quantized divided by its factors
    and the kernels' rows multiplied by them.

    Where the int8 kernels are held: graph constants, or with
    `kernels_as_variables` int8 variables of their own (`variables`: one per
    product, query, key and value side by side), which the SavedModel saves
    in place of the float32 kernels (`holds`) and oneDNN's product reorders
    once, on its first call, as it does a constant (`int8_matmul`): a graph
    without a copy of the kernels, as `inference.packed_kernels` makes for
    float32 (a BERT-base export: docs/BENCHMARKS.md, "int8 kernels as
    variables"). Every other Dense kernel (pooler, task heads) is read as a
    float32 constant, or with `kernels_as_variables` stays the model's
    variable, packed once by `packed_kernels.packed_dense_call`.

    Args:
        model: A float32 Keras model (a `BertModel` or a task model); its
            kernels and biases are read now.
        input_ranges: Optional dict of layer path -> (lo, hi), from
            `calibrate_input_ranges` (with the same `smoothing`).
        smoothing: Optional dict of layer path -> float32 [in], from
            `smoothing_factors`: those layers' inputs are quantized divided
            by it and their kernels multiplied by it, row by row (calibrated
            ranges only).
        kernels_as_variables: Hold the int8 kernels as variables (above),
            for a graph that never sees them assigned.

    Raises:
        ValueError: `model` does not compute in float32, `input_ranges`
            leaves out an encoder Dense layer, or `smoothing` without
            `input_ranges`, for a layer whose input comes requantized, or
            differing between layers that read one input.
    """

    def __init__(self, model, input_ranges=None, smoothing=None, kernels_as_variables=False):
        self._layers = encoder_dense_layers(model)
        if any(layer.compute_dtype != "float32" for layer in self._layers):
            raise ValueError("int8 products are taken from a float32 model; build it with dtype='float32'")
        self.smoothing = checked_smoothing(model, smoothing, input_ranges)
        self._kernels = {layer.path: quantize_kernel(smoothed(layer.kernel.numpy(), self.smoothing.get(layer.path)))
                         for layer in self._layers}
        self._biases = {layer.path: None if layer.bias is None else layer.bias.numpy() for layer in self._layers}
        # Query, key and value read one input: one product on their concatenated kernels (one oneDNN call
        # in place of three, each mostly set-up at one request's rows).
        self._attentions = self_attention_layers(model)
        self._fused = {}  # attention path -> (its query's path, the concatenated kernel, the concatenated bias)
        for attention in self._attentions:
            group = [attention.query.path, attention.key.path, attention.value.path]
            bias = None if any(self._biases[path] is None for path in group) else \
                np.concatenate([self._biases[path] for path in group])
            self._fused[attention.path] = (group[0], concatenated([self._kernels[path] for path in group]), bias)
        if input_ranges is not None:
            missing = [layer.path for layer in self._layers if layer.path not in input_ranges]
            if missing:
                raise ValueError(f"no calibrated input range for {missing[0]}")
            input_ranges = {path: (float(lo), float(hi)) for path, (lo, hi) in input_ranges.items()}
        self.input_ranges = input_ranges
        self._requantized = requantized_pairs(model) if input_ranges is not None else {}
        quantized = {id(layer.kernel) for layer in self._layers}
        # The other Dense layers (pooler, heads): their kernels float32 constants, as `ConstantKernels` holds them,
        # or (with the int8 kernels as variables) their own variables, packed once.
        self._float_layers = [layer for layer in model._flatten_layers(include_self=True, recursive=True)
                              if isinstance(layer, keras.layers.Dense) and id(layer.kernel) not in quantized]
        self._float = [] if kernels_as_variables else [
            (variable, variable.numpy()) for variable in dense_kernels(model) if id(variable) not in quantized]
        # product key (a fused attention's path, or a Dense layer's outside one) -> int8 variable [in, out]
        self._values = {}
        if kernels_as_variables:
            fused_members = {path for attention in self._attentions
                             for path in (attention.query.path, attention.key.path, attention.value.path)}
            for attention in self._attentions:
                self._values[attention.path] = tf.Variable(
                    self._fused[attention.path][1].values, trainable=False,
                    name=f"{attention.path}/query_key_value/kernel_int8")
            for layer in self._layers:
                if layer.path not in fused_members:
                    self._values[layer.path] = tf.Variable(self._kernels[layer.path].values, trainable=False,
                                                           name=f"{layer.path}/kernel_int8")

    def __len__(self):
        return len(self._kernels) + len(self._float)

    @property
    def nbytes(self):
        """Bytes of the constants one traced graph holds (int8 kernels unless variables, their scales and sums,
        float kernels)."""
        held = sum(k.scales.nbytes + k.column_sums.nbytes + (0 if self._values else k.values.nbytes)
                   for k in self._kernels.values())
        return held + sum(value.nbytes for _, value in self._float)

    @property
    def variables(self):
        """The int8 kernel variables (with `kernels_as_variables`), for the SavedModel to save; else none."""
        return list(self._values.values())

    def holds(self, variable):
        """Whether `variable` is a float32 kernel this graph does not read: held as a constant (int8 or
        float32), or by an int8 variable."""
        return any(variable is kernel for kernel in [layer.kernel for layer in self._layers]
                   + [kernel for kernel, _ in self._float])

    @property
    def calibrated(self):
        """Whether the input ranges are fixed (static) rather than found per batch."""
        return self.input_ranges is not None

    @contextlib.contextmanager
    def scope(self):
        """Within it, while a `tf.function` is traced, the encoder Dense layers compute in int8.

        Enter it in the function whose graph holds the products, as
        `ConstantKernels.scope`.
        """
        if tf.executing_eagerly():
            raise RuntimeError("Int8Kernels.scope() is for tracing a tf.function, not eager calls")
        # Each input tensor quantized once (query, key and value read one), by the tensor: (tensor, u8, lo, step).
        quantized_inputs = {}

        def quantized(path, x, rows):
            if id(x) not in quantized_inputs:
                lo, hi = self.input_ranges[path] if self.input_ranges else dynamic_input_range(rows)
                u8, step = quantize_input(rows, lo, hi, self.smoothing.get(path))
                quantized_inputs[id(x)] = (x, u8, lo, step)
            return quantized_inputs[id(x)][1:]

        def make_call(layer):
            kernel, bias = self._kernels[layer.path], self._biases[layer.path]
            post_op = POST_OP_OF.get(layer.activation)
            activation = None if post_op or layer.activation is None else layer.activation
            consumer = self._requantized.get(layer.path) if post_op or layer.activation is None else None

            def call(inputs, training=None):
                with tf.name_scope(layer.name):
                    x = tf.convert_to_tensor(inputs)
                    shape = tf.shape(x)
                    # [..., in] -> [rows, in]
                    rows = tf.reshape(x, [-1, kernel.values.shape[0]])
                    u8, lo, step = quantized(layer.path, x, rows)
                    output_shape = tf.concat([shape[:-1], [kernel.values.shape[1]]], axis=0)
                    values = self._values[layer.path].value() if layer.path in self._values else None
                    if consumer is not None:
                        # [rows, out] quint8, over the next layer's calibrated range
                        out_lo, out_hi = self.input_ranges[consumer]
                        codes = int8_matmul(u8, lo, step, kernel, bias, post_op, requantize_range=(out_lo, out_hi),
                                            values=values)
                        # The float32 values those codes stand for (unused, and pruned, where the next layer
                        # finds the codes).
                        outputs = tf.reshape(dequantize(codes, out_lo, out_hi), output_shape)
                        quantized_inputs[id(outputs)] = (outputs, codes, out_lo, calibrated_step(out_lo, out_hi)[2])
                        return outputs
                    # [rows, out]
                    outputs = tf.reshape(int8_matmul(u8, lo, step, kernel, bias, post_op, values=values),
                                         output_shape)
                    return activation(outputs) if activation is not None else outputs

            return call

        def make_fused_query_key_value(attention):
            query_path, kernel, bias = self._fused[attention.path]

            def fused_query_key_value(matrix, training=None):
                if training:
                    return None
                with tf.name_scope(attention.name):
                    # [rows, H] x [H, 3H] -> [rows, 3H]
                    values = self._values[attention.path].value() if attention.path in self._values else None
                    return int8_matmul(*quantized(query_path, matrix, matrix), kernel, bias, values=values)

            return fused_query_key_value

        floats = keras.StatelessScope(
            state_mapping=[(variable, tf.constant(value, dtype=variable.dtype)) for variable, value in self._float])
        packed = self._float_layers if self._values else []
        with floats, dense_calls_set_to(self._layers, make_call), dense_calls_set_to(packed, packed_dense_call), \
                methods_set_to(self._attentions, "fused_query_key_value", make_fused_query_key_value):
            yield


__all__ = [
    "DEFAULT_CALIBRATION_PERCENTILE", "DEFAULT_SMOOTHING_ALPHA", "Int8Kernels", "MIN_RANGE", "QuantizedKernel",
    "SMOOTHING_FLOOR", "agreement", "calibrate", "calibrate_input_ranges", "calibrated_step", "calibration_ends",
    "concatenated", "dequantize", "dynamic_input_range", "encoder_dense_layers", "input_groups", "int8_matmul",
    "int8_reference", "quantize_input", "quantize_kernel", "read_calibration_texts", "requantized_pairs",
    "self_attention_layers", "smoothed", "smoothing_factors", "smoothing_scales",
]
