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
  "int8 at one request".
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

Example:
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> kernel = quantize_kernel(rng.normal(size=(8, 4)).astype("float32"))
>>> kernel.values.dtype.name, kernel.values.shape, kernel.scales.shape, int(np.abs(kernel.values).max())
('int8', (8, 4), (4,), 127)
"""

import contextlib
import dataclasses

import keras
import numpy as np
import tensorflow as tf

from keras_bert_impl.inference.constant_kernels import dense_kernels
from keras_bert_impl.inference.onednn_ops import POST_OP_OF, POST_OPS, dense_calls_set_to, methods_set_to, registered_op

# A range never narrower than this (an all-zero input): the step stays positive.
_MIN_RANGE = 1e-6
# Calibrated ranges end at this percentile of the values seen (docs/BENCHMARKS.md, "int8": measured on real text).
DEFAULT_CALIBRATION_PERCENTILE = 99.999
# How much of each input channel's spread moves into the kernel's row (0: none; docs/BENCHMARKS.md, "Smoothed
# activations": measured on real text).
DEFAULT_SMOOTHING_ALPHA = 0.7
# Channel maxima below this count as this (a channel that was always 0, a kernel row of zeros).
_MIN_CHANNEL_MAX = 1e-5
# An input channel's observed maximum counts as at least this fraction of the median channel's when smoothing: a
# channel (nearly) silent on every calibration text would otherwise get a tiny factor, and any value it takes when
# serving would be multiplied past the calibrated range and clipped. Below the quietest channel of the measured
# models (0.245 of its median; docs/BENCHMARKS.md, "Smoothed activations"): it leaves their factors as they were.
SMOOTHING_FLOOR = 0.2


@dataclasses.dataclass(frozen=True)
class QuantizedKernel:
    """A Dense kernel [in, out] as int8 with one float32 scale per output channel.

    Attributes:
        values: int8 [in, out], in [-127, 127].
        scales: float32 [out]: `kernel[:, j] ~ scales[j] * values[:, j]`.
        column_sums: float32 [out]: `values.sum(axis=0)`, exact (at most 127 * in).
    """

    values: np.ndarray
    scales: np.ndarray
    column_sums: np.ndarray


def quantize_kernel(kernel):
    """`kernel` [in, out] quantized per output channel, symmetric: the largest |weight| of each column to 127.

    Args:
        kernel: float array [in, out].

    Returns:
        A `QuantizedKernel`. A column of zeros gets scale 1 (its values are 0).
    """
    kernel = np.asarray(kernel, np.float32)
    scales = np.abs(kernel).max(axis=0) / np.float32(127)
    scales = np.where(scales > 0, scales, np.float32(1)).astype(np.float32)
    values = np.clip(np.rint(kernel / scales), -127, 127).astype(np.int8)
    return QuantizedKernel(values, scales, values.astype(np.int32).sum(axis=0).astype(np.float32))


def encoder_dense_layers(model):
    """Every Dense layer inside the transformer encoders of `model` (query, key, value and the three after).

    Args:
        model: A `BertModel` or a task model holding one.

    Returns:
        A list of `keras.layers.Dense`, in model order.
    """
    return [layer for encoder in _transformer_encoders(model)
            for layer in encoder._flatten_layers(include_self=False, recursive=True)
            if isinstance(layer, keras.layers.Dense)]


def _transformer_encoders(model):
    """The `TransformerEncoder` layers inside `model` (itself included), in model order."""
    from keras_bert_impl.layers.transformer import TransformerEncoder

    return [layer for layer in model._flatten_layers(include_self=True, recursive=True)
            if isinstance(layer, TransformerEncoder)]


def dynamic_input_range(x):
    """[lo, hi] of `x`: holding 0 (so that 0 has a code), never narrower than `_MIN_RANGE`.

    Args:
        x: float32 tensor.

    Returns:
        Two float32 scalars.
    """
    lo = tf.minimum(tf.reduce_min(x), 0.0)
    hi = tf.maximum(tf.reduce_max(x), 0.0) + _MIN_RANGE
    return lo, hi


def quantize_input(x, lo, hi, channel_scales=None):
    """x [rows, in] float32 -> (u8 [rows, in] quint8, step): `x ~ lo + step * u8` (or `x / channel_scales ~ ...`).

    By element-wise ops (multiply, add, round, clip, cast, bitcast to
    quint8), with oneDNN's arithmetic: `x * (1 / step) + (-lo / step)` in
    float32, rounded to nearest even, as its `QuantizeV2` kernel computes it
    (`int8_reference`). The op itself was measured slower at one request
    (~80 us of set-up a call) and, behind a `tf.cond` on the row count where
    the graph does not know it (an export's), cost more at one request than
    it saved on batches (docs/BENCHMARKS.md, "int8").

    Args:
        x: float32 [rows, in].
        lo, hi: float32 scalars (tensors, or numbers: a calibrated range,
            whose constants are then computed here), lo <= 0 < hi.
        channel_scales: Optional float32 [in] (`smoothing_factors`): the
            codes are then those of `x / channel_scales` over [lo, hi], with
            the division folded into the multiplier (`(1 / step) /
            channel_scales`, one vector): no op more.

    Example:
    >>> u8, step = quantize_input(tf.constant([[-1.0, 0.0, 1.5]]), -1.0, 1.55)
    >>> tf.bitcast(u8, tf.uint8).numpy().tolist(), round(float(step), 4)
    ([[0, 100, 250]], 0.01)
    """
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
        inverse_step, offset, step = calibrated_step(lo, hi)
    else:
        lo, hi = tf.cast(lo, tf.float32), tf.cast(hi, tf.float32)
        inverse_step = 255.0 / (hi - lo)
        offset, step = -lo * inverse_step, (hi - lo) / 255.0
    if channel_scales is not None:
        # x / s / step = x * ((1 / step) / s): one float32 vector where the multiplier was a scalar
        channel_scales = np.asarray(channel_scales, np.float32)
        inverse_step = (tf.constant(inverse_step / channel_scales) if isinstance(inverse_step, np.floating)
                        else inverse_step / tf.constant(channel_scales))
    codes = tf.clip_by_value(tf.round(x * inverse_step + offset), 0.0, 255.0)
    return tf.bitcast(tf.cast(codes, tf.uint8), tf.quint8), step


def calibrated_step(lo, hi):
    """`(1 / step, -lo / step, step)` of a calibrated range [lo, hi] (floats), in `quantize_input`'s float32 arithmetic.

    Example:
    >>> [round(float(v), 4) for v in calibrated_step(-1.0, 1.55)]
    [100.0, 100.0, 0.01]
    """
    lo32, hi32 = np.float32(lo), np.float32(hi)
    inverse_step = np.float32(255) / (hi32 - lo32)
    return inverse_step, -lo32 * inverse_step, float((hi32 - lo32) / np.float32(255))


def dequantize(codes, lo, hi):
    """The float32 values `lo + step * u8` that quint8 `codes` over a calibrated range [lo, hi] stand for."""
    return tf.cast(tf.bitcast(codes, tf.uint8), tf.float32) * calibrated_step(lo, hi)[2] + lo


def int8_matmul(quantized_input, lo, step, kernel, bias=None, activation=None, requantize_range=None,
                values=None):
    """`activation(x W + b)` from x quantized (`quantize_input`) and W (`quantize_kernel`): one oneDNN op.

    The op reorders the kernel into oneDNN's blocked layout on its first
    call and keeps that copy (`is_weight_const`), whether the kernel is a
    graph constant or read from a variable (`values`).

    Args:
        quantized_input: quint8 [rows, in].
        lo, step: The input's range start and step: Python floats (a
            calibrated range: the bias is then one constant) or float32
            scalar tensors.
        kernel: A `QuantizedKernel` [in, out]; its scales and column sums
            made graph constants here, and its values too unless `values`.
        bias: float32 [out] (an array, or a tensor) or None.
        activation: None or one of `POST_OPS`, applied inside the product.
        requantize_range: None for a float32 output; or `(lo, hi)` (floats)
            for the output quantized over it as `quantize_input` does (to
            feed the next product with no quantization of its own).
        values: None, or int8 [in, out]: `kernel.values` as a tensor that
            stays the same from call to call (a variable's value), read in
            place of a constant (the op keeps its first).

    Returns:
        float32 [rows, out], or quint8 [rows, out] with `requantize_range`.
    """
    if activation not in (None,) + POST_OPS:
        raise ValueError(f"activation must be None or one of {POST_OPS}, not {activation!r}")
    if tf.executing_eagerly():  # the op is made in a graph (below): an eager call runs it in one
        return tf.function(lambda u8: int8_matmul(u8, lo, step, kernel, bias, activation, requantize_range,
                                                  values))(quantized_input)
    constant_range = isinstance(lo, (int, float)) and not isinstance(bias, tf.Tensor)
    # x W[:, j] + b[j] = scales[j] * step * (u8 Wq)[:, j] + (b[j] + lo * scales[j] * colsum(Wq)[j])
    offsets = kernel.scales * kernel.column_sums
    if constant_range:
        shifted_bias = tf.constant(np.float32(lo) * offsets + (0 if bias is None else np.asarray(bias, np.float32)))
    else:
        shifted_bias = lo * tf.constant(offsets)
        if bias is not None:
            shifted_bias = shifted_bias + tf.cast(bias, tf.float32)
    weight_range = kernel.scales * np.float32(127)  # oneDNN's weight scale is max(|min_b|, |max_b|) / 127
    # int8 -> qint8: the same bytes, no copy
    weights = tf.constant(kernel.values, tf.qint8) if values is None else tf.bitcast(values, tf.qint8)
    inputs = [tf.convert_to_tensor(quantized_input), weights, shifted_bias,
              # "SCALED" with min_a = 0: the op's input scale is max_a / 255 = step, its bias taken as it is
              tf.constant(0.0), tf.cast(step, tf.float32) * 255.0,
              tf.constant(-weight_range), tf.constant(weight_range)]
    fused_ops = ["BiasAdd"] + ([activation] if activation else [])
    if requantize_range is None:
        fused_ops, outputs = fused_ops + ["Dequantize"], [tf.float32]
    else:
        out_lo, out_hi = requantize_range
        inputs += [tf.constant(float(out_lo)), tf.constant(float(out_hi))]
        fused_ops, outputs = fused_ops + ["Requantize"], [tf.quint8, tf.float32, tf.float32]
    attrs = dict(Tdevice_inputs=[t.dtype for t in inputs], Thost_inputs=[], Tdevice_outputs=outputs,
                 Thost_outputs=[], T1=tf.quint8, T2=tf.qint8, Tbias=tf.float32, U=tf.float32, Tout=outputs[0],
                 transpose_a=False, transpose_b=False, is_weight_const=True, is_bias_const=constant_range,
                 fused_ops=fused_ops, input_quant_mode="SCALED", output_quant_mode="MIN_FIRST")
    # `_QuantizedMatMul` is a registered op of stock TensorFlow (its oneDNN kernel) without a Python wrapper.
    return registered_op("_QuantizedMatMul", inputs, outputs, attrs, name="QuantizedMatMul")[0]


def int8_reference(x, lo, hi, kernel, bias=None, channel_scales=None):
    """NumPy emulation of `quantize_input` + `int8_matmul` (oneDNN's rounding), in float64 after quantizing.

    Args:
        x: float32 [rows, in]; lo, hi: its range; kernel: a `QuantizedKernel`; bias: [out] or None;
        channel_scales: as for `quantize_input` (the kernel then quantized from `diag(channel_scales) W`).

    Returns:
        float64 [rows, out].
    """
    x = np.asarray(x, np.float32)
    inverse_step = np.float32(255) / (np.float32(hi) - np.float32(lo))
    # oneDNN's reorder: x * (1/step) + (-lo/step), in float32, rounded to nearest even.
    multiplier = inverse_step if channel_scales is None else inverse_step / np.asarray(channel_scales, np.float32)
    u8 = np.clip(np.rint(x * multiplier + np.float32(-lo) * inverse_step), 0, 255)
    step = (np.float64(np.float32(hi) - np.float32(lo))) / 255.0
    products = (u8 @ kernel.values.astype(np.float64)) * step + float(lo) * kernel.column_sums
    products = products * kernel.scales
    return products if bias is None else products + np.asarray(bias, np.float64)


def concatenated(kernels):
    """`kernels` (each [in, out_i]) as one `QuantizedKernel` [in, sum out_i]: `quantize_kernel` of the concatenation.

    Per output channel, each column keeps its own scale and sum, so the
    product of the concatenation is the products side by side, exactly.
    """
    return QuantizedKernel(*(np.concatenate([getattr(kernel, field) for kernel in kernels], axis=-1)
                             for field in ("values", "scales", "column_sums")))


def self_attention_layers(model):
    """The `SelfAttention` layers inside the transformer encoders of `model`, in model order."""
    from keras_bert_impl.layers.attention import SelfAttention

    return [layer for encoder in _transformer_encoders(model)
            for layer in encoder._flatten_layers(include_self=False, recursive=True)
            if isinstance(layer, SelfAttention)]


def requantized_pairs(model):
    """{intermediate Dense path: output Dense path} of each transformer block of `model`.

    The intermediate layer's output is the output layer's only input, so
    with calibrated ranges the first product can hand the second its input
    already quantized (`int8_matmul(requantize_range=...)`).
    """
    from keras_bert_impl.layers.transformer import TransformerLayer

    return {layer.intermediate.path: layer.output_dense.path for encoder in _transformer_encoders(model)
            for layer in encoder._flatten_layers(include_self=False, recursive=True)
            if isinstance(layer, TransformerLayer)}


def _smoothed(kernel, channel_scales):
    """`diag(channel_scales) kernel` (each input row times its scale), or `kernel` without scales."""
    return kernel if channel_scales is None else kernel * np.asarray(channel_scales, np.float32)[:, None]


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


def smoothing_scales(channel_max, kernel, alpha=DEFAULT_SMOOTHING_ALPHA):
    """SmoothQuant's per-input-channel scales: `s[c] = channel_max[c]^alpha / max_j |kernel[c, j]|^(1 - alpha)`.

    Dividing the input by `s` and multiplying the kernel's rows by it leaves
    the product as it is and evens out the channels' ranges: alpha 1 moves
    all of each channel's spread into the kernel, 0 none of it (then `s`
    only evens out the kernel's rows).

    Args:
        channel_max: float [in]: the largest |value| each input channel took.
        kernel: float [in, out] (the kernels that read the input, side by side).
        alpha: In [0, 1].

    Returns:
        float32 [in], positive. A channel's maximum counts as at least
        `SMOOTHING_FLOOR` times the median channel's (one silent on every
        calibration text is scaled as a quiet one, not divided by ~0), and
        maxima below `_MIN_CHANNEL_MAX` count as it.

    Example (the third channel was silent: its maximum counts as a fifth
    of the median's, 5):
    >>> channel_max = np.array([16.0, 5.0, 0.0])
    >>> smoothing_scales(channel_max, np.array([[1.0, -0.5], [5.0, 0.0], [1.0, 1.0]]), alpha=0.5).tolist()
    [4.0, 1.0, 1.0]
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"the smoothing alpha must be in [0, 1], not {alpha}")
    activation = np.asarray(channel_max, np.float64)
    activation = np.maximum(activation, max(SMOOTHING_FLOOR * float(np.median(activation)), _MIN_CHANNEL_MAX))
    weight = np.maximum(np.abs(np.asarray(kernel, np.float64)).max(axis=1), _MIN_CHANNEL_MAX)
    return (activation ** alpha / weight ** (1.0 - alpha)).astype(np.float32)


def smoothing_factors(model, batches, alpha=DEFAULT_SMOOTHING_ALPHA):
    """`smoothing_scales` of each input `Int8Kernels` quantizes (`input_groups`), from `batches` run through `model`.

    Args:
        model: A float32 Keras model (as for `Int8Kernels`).
        batches: An iterable of its inputs (dicts of arrays), read once.
        alpha: As for `smoothing_scales`.

    Returns:
        Dict of layer path -> float32 [in]; the layers of a group share
        one array, from their kernels side by side.
    """
    layers = {layer.path: layer for layer in encoder_dense_layers(model)}
    groups = input_groups(model)
    channel_max = {group[0]: 0.0 for group in groups}
    first = {path: group[0] for group in groups for path in group}

    def observe(path, values):
        if first.get(path) == path:  # each input once
            channel_max[path] = np.maximum(channel_max[path], np.abs(values.reshape(-1, values.shape[-1])).max(0))

    _observe_inputs(model, batches, observe)
    factors = {}
    for group in groups:
        kernel = np.concatenate([layers[path].kernel.numpy() for path in group], axis=1)
        scales = smoothing_scales(np.broadcast_to(channel_max[group[0]], kernel.shape[:1]), kernel, alpha)
        factors.update({path: scales for path in group})
    return factors


def _checked_smoothing(model, smoothing, input_ranges):
    """`smoothing` as float32 arrays by path, checked as `Int8Kernels` takes it; {} for None."""
    if not smoothing:
        return {}
    if input_ranges is None:
        raise ValueError("smoothing is for calibrated ranges: give input_ranges (from the same smoothing) too")
    smoothing = {path: np.asarray(scales, np.float32) for path, scales in smoothing.items()}
    requantized = set(requantized_pairs(model).values()) & set(smoothing)
    if requantized:
        raise ValueError(f"{sorted(requantized)[0]}: its input comes quantized from the intermediate product "
                         "and cannot be smoothed")
    for group in input_groups(model):
        given = [smoothing.get(path) for path in group]
        if any(scales is None for scales in given) != all(scales is None for scales in given) or (
                given[0] is not None and any(not np.array_equal(given[0], scales) for scales in given[1:])):
            raise ValueError(f"{', '.join(group)} read one input: give them the same smoothing")
    return smoothing


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
        self.smoothing = _checked_smoothing(model, smoothing, input_ranges)
        self._kernels = {layer.path: quantize_kernel(_smoothed(layer.kernel.numpy(), self.smoothing.get(layer.path)))
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

        # Imported here: `packed_kernels` reads this module's layer lists.
        from keras_bert_impl.inference.packed_kernels import packed_dense_call

        floats = keras.StatelessScope(
            state_mapping=[(variable, tf.constant(value, dtype=variable.dtype)) for variable, value in self._float])
        packed = self._float_layers if self._values else []
        with floats, dense_calls_set_to(self._layers, make_call), dense_calls_set_to(packed, packed_dense_call), \
                methods_set_to(self._attentions, "fused_query_key_value", make_fused_query_key_value):
            yield


def calibrate_input_ranges(model, batches, percentile=DEFAULT_CALIBRATION_PERCENTILE, smoothing=None):
    """Each encoder Dense layer's input range over `batches`, run through `model` in float32.

    At `percentile=100` the range runs from the smallest to the largest value
    seen. Below it, each end is the value at that percentile of all the
    values the layer read: `lo` the (100 - p)th, `hi` the p-th (with the
    values sorted, `v[k]` and `v[n - 1 - k]`, `k = floor(n (100 - p) / 100)`),
    so that a few outliers do not widen the step of every other value;
    served, values beyond an end are clipped to it. That takes two passes
    over `batches` (one to count, one to keep the `k + 1` values at each
    end), exact whatever their number.

    Args:
        model: A float32 Keras model (as for `Int8Kernels`).
        batches: An iterable of its inputs (dicts of arrays); read twice
            below 100.
        percentile: In (50, 100]; 100 keeps the smallest and largest value.
        smoothing: Optional `smoothing_factors`: a layer's range is then
            that of its input divided by its factors.

    Returns:
        Dict of layer path -> (lo, hi), lo at most 0 and hi at least 0 (as
        `quantize_input` takes them), hi widened by `_MIN_RANGE`.

    Example:
    >>> values = np.arange(1, 10001, dtype="float32") - 1000.0  # -999 .. 9000
    >>> ends = calibration_ends([values], percentile=99.9)
    >>> [float(v) for v in ends]
    [-989.0, 8990.0]
    """
    if not 50.0 < percentile <= 100.0:
        raise ValueError(f"the calibration percentile must be in (50, 100], not {percentile}")
    layers = encoder_dense_layers(model)
    batches = list(batches) if percentile < 100.0 else batches
    smoothing = smoothing or {}

    def run(observe):
        def divided(path, values):
            observe(path, values / smoothing[path] if path in smoothing else values)

        _observe_inputs(model, batches, divided)

    counts = {layer.path: 0 for layer in layers}
    if percentile < 100.0:
        run(lambda path, values: counts.__setitem__(path, counts[path] + values.size))
    collectors = {layer.path: _EndsCollector(counts[layer.path], percentile) for layer in layers}
    run(lambda path, values: collectors[path].add(values))
    ranges = {}
    for path, collector in collectors.items():
        lo, hi = collector.ends()
        ranges[path] = (min(lo, 0.0), max(hi, 0.0) + _MIN_RANGE)
    return ranges


def calibrate(model, batches, percentile=DEFAULT_CALIBRATION_PERCENTILE, smoothing_alpha=DEFAULT_SMOOTHING_ALPHA):
    """`(input_ranges, smoothing)` for `Int8Kernels`, from `batches` run through `model` on their real tokens only.

    The encoders compute real tokens only while calibrating (as a
    padding-free graph and an export run them): padding positions, whose
    outputs nobody reads, do not widen a range.

    Args:
        model: A float32 Keras model (as for `Int8Kernels`).
        batches: An iterable of its inputs (dicts of arrays, with
            `input_mask`); read up to three times.
        percentile: As for `calibrate_input_ranges`.
        smoothing_alpha: As for `smoothing_factors`; 0 or None: no
            smoothing (`smoothing` is then None).

    Returns:
        `(input_ranges, smoothing)`: `calibrate_input_ranges`' dict and
        `smoothing_factors`' (or None).

    Raises:
        ValueError: no batch (ranges of nothing would quantize every value
            to one code).
    """
    from keras_bert_impl.inference.padding_free import real_tokens_only_set_to

    batches = list(batches)
    if not batches:
        raise ValueError("no calibration inputs: give a few hundred of the task's texts, as the model takes them")
    with real_tokens_only_set_to(model, True):
        smoothing = smoothing_factors(model, batches, smoothing_alpha) if smoothing_alpha else None
        return calibrate_input_ranges(model, batches, percentile, smoothing), smoothing


def _observe_inputs(model, batches, observe):
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


def _tail(count, percentile):
    """How many of `count` sorted values lie beyond each end of the `percentile` range: floor(count (100 - p) / 100).

    In integers (the percentile to 1e-7 of a point), so that no float
    rounding moves an exact boundary.
    """
    outside = round((100.0 - percentile) * 10**7)  # (100 - p) in units of 1e-7 of a point
    return count * outside // 10**9


class _EndsCollector:
    """The `k + 1` smallest and largest values seen (`k = _tail(count, percentile)`), kept as batches come."""

    def __init__(self, count, percentile):
        self.keep = _tail(count, percentile) + 1
        self.low = np.zeros([0], np.float32)
        self.high = np.zeros([0], np.float32)

    def add(self, values):
        values = values.reshape(-1).astype(np.float32)
        low, high = np.concatenate([self.low, values]), np.concatenate([self.high, values])
        if low.size > self.keep:
            low = np.partition(low, self.keep - 1)[:self.keep]
            high = np.partition(high, high.size - self.keep)[-self.keep:]
        self.low, self.high = low, high

    def ends(self):
        """(lo, hi): the k-th smallest and k-th largest values (0-based); (0, 0) when nothing was seen."""
        if self.low.size == 0:
            return 0.0, 0.0
        return float(self.low.max()), float(self.high.min())


def calibration_ends(batches_of_values, percentile=100.0):
    """`calibrate_input_ranges`' two ends for one layer, from its input values (arrays) directly.

    Args:
        batches_of_values: A list of arrays (one a batch).
        percentile: As `calibrate_input_ranges`.

    Returns:
        (lo, hi) as floats, before the range is made to hold 0.
    """
    collector = _EndsCollector(sum(values.size for values in batches_of_values), percentile)
    for values in batches_of_values:
        collector.add(np.asarray(values))
    return collector.ends()


def agreement(reference, quantized, labels):
    """How far int8 outputs are from float32's: a dict with one `summary` line.

    Args:
        reference, quantized: float arrays [examples, ...] (logits, or
            embeddings), the same inputs through float32 and int8.
        labels: Whether the last axis holds class scores: argmax agreement;
            else the cosine of each example's flattened output.

    Returns:
        For labels: `argmax_agreement` (fraction), `max_abs_difference`;
        else `mean_cosine`, `min_cosine`; and `summary`.

    Example:
    >>> agreement(np.array([[1.0, 2.0], [3.0, 0.0]]), np.array([[1.1, 2.0], [0.0, 3.0]]), labels=True)["summary"]
    'int8 vs float32 on 2 texts: argmax agrees on 50.0%, largest |difference| 3'
    """
    reference, quantized = np.asarray(reference, np.float64), np.asarray(quantized, np.float64)
    count = len(reference)
    if labels:
        agree = float(np.mean(np.argmax(reference, -1) == np.argmax(quantized, -1)))
        largest = float(np.abs(reference - quantized).max())
        return {"argmax_agreement": agree, "max_abs_difference": largest,
                "summary": f"int8 vs float32 on {count} texts: argmax agrees on {100 * agree:.1f}%, "
                           f"largest |difference| {largest:.3g}"}
    a, b = reference.reshape(count, -1), quantized.reshape(count, -1)
    cosine = np.sum(a * b, 1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-30)
    return {"mean_cosine": float(cosine.mean()), "min_cosine": float(cosine.min()),
            "summary": f"int8 vs float32 on {count} texts: cosine mean {cosine.mean():.4f}, min {cosine.min():.4f}"}


def read_calibration_texts(path):
    """The texts of a calibration file: one request's text a line, blank lines skipped.

    Args:
        path: A UTF-8 text file.

    Returns:
        A tuple of strings (each line without its line break and outer spaces).

    Raises:
        InputFileError: a missing file, invalid UTF-8 (naming `path:line`),
            or no text at all.
    """
    from keras_bert_impl.errors import InputFileError
    from keras_bert_impl.io import read_utf8_lines

    texts = tuple(text.strip() for _, text in read_utf8_lines(path, kind="calibration file") if text.strip())
    if not texts:
        raise InputFileError(f"{path}: the calibration file holds no text (one text a line)")
    return texts
