"""One Dense product of a BERT layer in float32 and in int8, with stock TensorFlow ops, timed side by side.

Candidates, each a `tf.function` on the same activations x [rows, in] and
kernel [in, out] (MiniLM's FFN input: 384 x 1536):

- float32: MatMul + BiasAdd, kernel a graph constant (oneDNN's fused inner
  product, what our float32 export runs);
- int8 dynamic: `inference.int8` with the input range found per batch
  (min, max, element-wise quantization, `_QuantizedMatMul` with the
  per-channel scales inside);
- int8 static: the same with a calibrated (constant) range;
- int8 MatMul: Keras' own int8 recipe, `tf.matmul(int8, int8,
  output_type=int32)` with per-row input scales (Eigen's kernel, not oneDNN's).

Prints the CPU, the largest error of each against the float64 product,
and the median time over interleaved rounds for one text (20 tokens) and a
batch of 32 x 40 tokens.

Usage:
    .venv/bin/python benchmarks/bench_int8_ops.py [--rounds 50]
"""

import argparse
import os
import pathlib
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_bert_impl.hardware import cpu_description, onednn_description, read_cpuinfo  # noqa: E402
from keras_bert_impl.inference import int8  # noqa: E402


def candidates(kernel, bias, static_range):
    quantized = int8.quantize_kernel(kernel)

    def float32(x):
        return tf.nn.bias_add(tf.matmul(x, tf.constant(kernel)), tf.constant(bias))

    def int8_dynamic(x):
        lo, hi = int8.dynamic_input_range(x)
        u8, step = int8.quantize_input(x, lo, hi)
        return int8.int8_matmul(u8, lo, step, quantized, tf.constant(bias))

    def int8_static(x):
        lo, hi = static_range
        u8, step = int8.quantize_input(x, lo, hi)
        return int8.int8_matmul(u8, lo, step, quantized, bias)  # numbers: the shifted bias one constant

    def int8_matmul_int32(x):
        # [rows, 1]: one scale per row, as Keras' int8 Dense quantizes its inputs.
        row_scales = tf.reduce_max(tf.abs(x), axis=-1, keepdims=True) / 127.0
        xq = tf.cast(tf.clip_by_value(tf.round(x / row_scales), -127, 127), tf.int8)
        products = tf.matmul(xq, tf.constant(quantized.values), output_type=tf.int32)
        return tf.cast(products, tf.float32) * (row_scales * tf.constant(quantized.scales)) + tf.constant(bias)

    functions = {"float32 MatMul+BiasAdd": float32, "int8 dynamic (ours)": int8_dynamic,
                 "int8 static (ours)": int8_static, "int8 MatMul -> int32 (Keras)": int8_matmul_int32}
    return {name: tf.function(function) for name, function in functions.items()}


def int8_units():
    """The CPU's int8 dot-product flags (VNNI, AMX-int8), or "none"."""
    flags = read_cpuinfo()[1]
    return ", ".join(f for f in ("avx512_vnni", "avx_vnni", "amx_int8") if f in flags) or "none"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--in_size", type=int, default=384)
    parser.add_argument("--out_size", type=int, default=1536)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    kernel = rng.normal(0, 0.05, (args.in_size, args.out_size)).astype("float32")
    bias = rng.normal(0, 0.1, args.out_size).astype("float32")
    functions = candidates(kernel, bias, static_range=(-4.0, 4.0))
    print(f"CPU: {cpu_description()}; int8 units: {int8_units()}; {onednn_description()}; TensorFlow {tf.__version__}")
    print(f"kernel [{args.in_size}, {args.out_size}], activations N(0, 1); {args.rounds} interleaved rounds, medians\n")
    print("| rows | product | max error vs float64 | ms | speed vs float32 |")
    print("|---:|---|---:|---:|---:|")
    for label, rows in (("one text (20 tokens)", 20), ("batch 32 x 40 tokens", 1280)):
        x = tf.constant(np.clip(rng.normal(0, 1, (rows, args.in_size)), -4, 4).astype("float32"))
        exact = x.numpy().astype(np.float64) @ kernel + bias
        errors = {name: float(np.abs(function(x).numpy() - exact).max()) for name, function in functions.items()}
        times = {name: [] for name in functions}
        for _ in range(args.rounds):
            for name, function in functions.items():
                start = time.perf_counter()
                function(x).numpy()
                times[name].append(time.perf_counter() - start)
        base = np.median(times["float32 MatMul+BiasAdd"])
        for name in functions:
            median = np.median(times[name])
            print(f"| {rows} ({label}) | {name} | {errors[name]:.2g} | {1e3 * median:.3f} | {base / median:.2f}x |")


if __name__ == "__main__":
    main()
