"""Does TensorFlow's oneDNN fusion of the GELU into the matrix product pay on this CPU?

With its oneDNN graph rewrites on (TensorFlow's default on CPUs with
AVX-512 VNNI, bf16 or AMX; `TF_ENABLE_ONEDNN_OPTS=1` elsewhere), TensorFlow
fuses MatMul + bias + GELU into one kernel, but only when the GELU is built
in the arrangement `tf.nn.gelu` builds (`0.5 x (1 + tanh(...))`); the
original BERT's arrangement of the same formula (`x * cdf`) stays as
separate element-wise ops. (`layers.activations.gelu` takes `tf.nn.gelu`'s:
the two give the same bits unfused.) This
times BERT's intermediate layer, [tokens, H] x [H, I] + bias + GELU, in both
arrangements and alone (MatMul + bias, the floor), as plain graphs,
interleaved one call of each in turn, and says which ones ran fused (from
the ops TensorFlow's profiler saw executed).

Usage:
    .venv/bin/python benchmarks/bench_gelu_fusion.py [--tokens 728] [--hidden 768]
        [--intermediate 3072] [--steps 30] [--precisions fp32,bf16]
    TF_ENABLE_ONEDNN_OPTS=1 .venv/bin/python benchmarks/bench_gelu_fusion.py

Example (a test runs it):
>>> rows = measure(tokens=16, hidden=8, intermediate=32, steps=2, precisions=("fp32",))
>>> sorted({row["arrangement"] for row in rows})
['matmul + bias only', 'original (x * cdf)', 'tf.nn.gelu']
"""

import argparse
import math
import os
import pathlib
import statistics
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

BENCHMARKS = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCHMARKS.parent))  # For `keras_bert_impl` from a checkout.
sys.path.insert(0, str(BENCHMARKS))  # For the scripts beside this one.

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import bench_forward  # noqa: E402
import profile_forward  # noqa: E402

DTYPES = {"fp32": tf.float32, "bf16": tf.bfloat16}
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
# The GELU (tanh form) as the original `modeling.py` arranges it and as
# `tf.nn.gelu(approximate=True)` does; None: the product and bias alone.
ARRANGEMENTS = {
    "original (x * cdf)": lambda x: x * (0.5 * (1.0 + tf.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * tf.pow(x, 3))))),
    "tf.nn.gelu": lambda x: tf.nn.gelu(x, approximate=True),
    "matmul + bias only": None,
}
# Element-wise op types that, if executed, show the GELU ran unfused.
_GELU_OPS = {"Tanh", "Pow", "Square"}


def intermediate_layer(kernel, bias, activation):
    """`activation(x @ kernel + bias)` as a plain-graph tf.function of [tokens, H] rows.

    Both arrangements compute the same GELU (gelu(1) = 0.8412, gelu(-1) = -0.1588):
    >>> rows = tf.constant([[1.0, -1.0]])
    >>> for name in ("original (x * cdf)", "tf.nn.gelu"):
    ...     forward = intermediate_layer(tf.eye(2), tf.zeros(2), ARRANGEMENTS[name])
    ...     print([round(float(value), 4) for value in forward(rows)[0][0]])
    [0.8412, -0.1588]
    [0.8412, -0.1588]
    """

    @tf.function
    def forward(rows):
        hidden = tf.nn.bias_add(tf.matmul(rows, kernel), bias)  # [tokens, I]
        return (hidden if activation is None else activation(hidden),)

    return forward


def measure(tokens, hidden, intermediate, steps, precisions, seed=0):
    """One row per (precision, arrangement): ms per call, fused or not.

    Returns:
        A list of dicts with precision, arrangement, fused (None for the
        product alone), ms (median wall time per call) and cpu_ms (median
        process CPU time, all threads).
    """
    rng = np.random.default_rng(seed)
    functions, inputs = {}, {}
    for precision in precisions:
        dtype = DTYPES[precision]
        inputs[precision] = tf.constant(rng.normal(size=(tokens, hidden)), dtype)
        kernel = tf.constant(rng.normal(scale=0.02, size=(hidden, intermediate)), dtype)
        bias = tf.constant(rng.normal(scale=0.02, size=(intermediate,)), dtype)
        for name, activation in ARRANGEMENTS.items():
            functions[precision, name] = intermediate_layer(kernel, bias, activation)

    fused = {}
    for (precision, name), forward in functions.items():
        op_seconds, _ = profile_forward.profile(forward, inputs[precision], steps=1)
        ran = {op_type for _, op_type in op_seconds}
        fused[precision, name] = None if ARRANGEMENTS[name] is None else not (ran & _GELU_OPS)

    times = {key: [] for key in functions}
    for _ in range(steps):  # Interleaved rounds: load falls on every function alike.
        for key, forward in functions.items():
            times[key].append(bench_forward.run_batch(forward, inputs[key[0]]))
    return [
        {"precision": precision, "arrangement": name, "fused": fused[precision, name],
         "ms": 1e3 * statistics.median(wall for wall, _ in times[precision, name]),
         "cpu_ms": 1e3 * statistics.median(cpu for _, cpu in times[precision, name])}
        for precision, name in functions
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=728, help="Rows: 8 x 128 at 71 %% real tokens.")
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--intermediate", type=int, default=3072)
    parser.add_argument("--steps", type=int, default=30, help="Timed calls per function.")
    parser.add_argument("--precisions", default="fp32,bf16", help="Comma-separated, from fp32, bf16.")
    args = parser.parse_args(argv)

    from keras_bert_impl.hardware import cpu_description, onednn_description

    rows = measure(args.tokens, args.hidden, args.intermediate, args.steps, args.precisions.split(","))
    print(f"BERT intermediate layer [{args.tokens}, {args.hidden}] x [{args.hidden}, {args.intermediate}] + bias "
          f"+ GELU, plain graphs, {args.steps} interleaved calls each\n"
          f"CPU: {cpu_description()}; {onednn_description()}; TensorFlow {tf.__version__}\n")
    print("| precision | GELU arrangement | fused into the MatMul | ms per call | CPU ms | vs matmul + bias only |")
    print("|---|---|---|---:|---:|---:|")
    for row in rows:
        floor = next(other["ms"] for other in rows
                     if other["precision"] == row["precision"] and other["fused"] is None)
        fused = {None: "", True: "yes", False: "no"}[row["fused"]]
        print(f"| {row['precision']} | {row['arrangement']} | {fused} | {row['ms']:.2f} | {row['cpu_ms']:.2f} "
              f"| {row['ms'] / floor:.2f}x |")


if __name__ == "__main__":
    main()
