"""int8 arithmetic: a kernel quantized per output channel, an input quantized over a range, and the product's
NumPy reference (how `inference.int8`'s products compute; the op itself: `inference.int8_ops`).

Example:
>>> rng = np.random.default_rng(0)
>>> kernel = quantize_kernel(rng.normal(size=(8, 4)).astype("float32"))
>>> kernel.values.dtype.name, kernel.values.shape, kernel.scales.shape, int(np.abs(kernel.values).max())
('int8', (8, 4), (4,), 127)
"""

import dataclasses

import numpy as np
import tensorflow as tf

# A range never narrower than this (an all-zero input): the step stays positive.
MIN_RANGE = 1e-6


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


def dynamic_input_range(x):
    """[lo, hi] of `x`: holding 0 (so that 0 has a code), never narrower than `MIN_RANGE`.

    Args:
        x: float32 tensor.

    Returns:
        Two float32 scalars.
    """
    lo = tf.minimum(tf.reduce_min(x), 0.0)
    hi = tf.maximum(tf.reduce_max(x), 0.0) + MIN_RANGE
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
