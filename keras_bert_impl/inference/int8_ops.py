"""The int8 product as one op of stock TensorFlow: oneDNN's `_QuantizedMatMul`, written by `int8_matmul`.

Example:
>>> from keras_bert_impl.inference.int8_arithmetic import quantize_input, quantize_kernel
>>> kernel = quantize_kernel(np.eye(3, dtype="float32"))
>>> u8, step = quantize_input(tf.constant([[0.5, 1.0, 0.0]]), 0.0, 1.0)
>>> [round(float(v), 2) for v in int8_matmul(u8, 0.0, step, kernel)[0]]
[0.5, 1.0, 0.0]
"""

import numpy as np
import tensorflow as tf

from keras_bert_impl.inference.onednn_ops import POST_OPS, registered_op


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
