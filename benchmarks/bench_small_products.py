"""MiniLM's Dense products at one request's size: TensorFlow's graph (oneDNN) against XLA and its CPU dot backends.

At one text of ~20 tokens the products are most of a request's time
(docs/BENCHMARKS.md, "The products themselves"). XLA's CPU compiler has
flags that hand its dots to other libraries: `--xla_cpu_use_xnnpack`
(XNNPACK, built for batch-1 inference) and `--xla_cpu_use_onednn`. Each
setting runs in a process of its own (XLA reads XLA_FLAGS once), timing 12
products with distinct kernels (graph constants, as in the export) in one
function, a sum of each output kept so that nothing is left out; the same
function without the products is timed and taken off. Median of `--calls`
calls after 20 warm-up calls, microseconds per product.

Usage:
    .venv/bin/python benchmarks/bench_small_products.py [--calls 200]
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

# MiniLM's products (rows x in -> out): query/key/value fused, attention output, intermediate, FFN output at one
# text of 20 tokens, and the intermediate at a batch (32 x 20 rows).
SHAPES = ((20, 384, 1152), (20, 384, 384), (20, 384, 1536), (20, 1536, 384), (640, 384, 1536))
SETTINGS = (("TensorFlow graph (oneDNN)", None, ""), ("XLA, its own dots", True, ""),
            ("XLA, XNNPACK dots", True, "--xla_cpu_use_xnnpack=true"),
            ("XLA, oneDNN dots", True, "--xla_cpu_use_onednn=true"))
PRODUCTS = 12


def median_seconds(function, argument, calls):
    for _ in range(20):
        function(argument).numpy()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        function(argument).numpy()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def measure(jit_compile, calls):
    """{shape: microseconds per product} in this process."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    result = {}
    for rows, width, out in SHAPES:
        kernels = [tf.constant(rng.standard_normal((width, out)).astype("float32") * 0.05) for _ in range(PRODUCTS)]
        x = tf.constant(rng.standard_normal((rows, width)).astype("float32"))

        def products(x, with_products=True):
            total = tf.constant(0.0)
            for i, kernel in enumerate(kernels):  # x + i: no two products alike (none merged)
                shifted = x + float(i)
                total += tf.reduce_sum(tf.matmul(shifted, kernel) if with_products else shifted)
            return total

        timed = tf.function(products, jit_compile=jit_compile)
        without = tf.function(lambda x: products(x, with_products=False), jit_compile=jit_compile)
        seconds = median_seconds(timed, x, calls) - median_seconds(without, x, calls)
        result[f"{rows} x {width} -> {out}"] = seconds / PRODUCTS * 1e6
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)  # "jit" or "graph": one setting's run
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child == "jit", args.calls)))
        return
    from keras_bert_impl.hardware import cpu_description, onednn_description

    print(f"CPU: {cpu_description()}; {onednn_description()}")
    rows = {}
    for name, jit_compile, xla_flags in SETTINGS:
        environment = dict(os.environ, XLA_FLAGS=xla_flags)
        output = subprocess.run(
            [sys.executable, __file__, "--calls", str(args.calls), "--child", "jit" if jit_compile else "graph"],
            capture_output=True, text=True, env=environment, check=True)
        rows[name] = json.loads(output.stdout.splitlines()[-1])
    shapes = list(next(iter(rows.values())))
    print("\n| microseconds per product | " + " | ".join(shapes) + " |")
    print("|---|" + "---:|" * len(shapes))
    for name, times in rows.items():
        print(f"| {name} | " + " | ".join(f"{times[shape]:.0f}" for shape in shapes) + " |")


if __name__ == "__main__":
    main()
