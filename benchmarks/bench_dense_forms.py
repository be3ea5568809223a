"""One BERT-base Dense product in several TensorFlow forms: which oneDNN kernel each gets, and its time.

The intermediate layer's product (1016 real rows x 768 -> 3072, bf16 unless
said): a plain MatMul on a variable; with a bias; with bias and GELU; the
kernel a float32 variable cast on each call (mixed_bfloat16); a 3-D einsum;
the kernel a graph constant (with bias, with bias and GELU); float32. Run it
with `ONEDNN_VERBOSE=1` to see each form's kernel: a marker line `==== form`
precedes each form's timed calls (`onednn_primitives.parse_exec_lines` reads
them). The table gives the median of 8 calls after 2 warm-up calls.

Usage:
    ONEDNN_VERBOSE=1 .venv/bin/python benchmarks/bench_dense_forms.py > dense.log
    grep -A1 "^====" dense.log | grep exec | cut -d, -f6,7,9 | sort | uniq -c
"""

import os
import pathlib
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_bert_impl.hardware import cpu_description, onednn_description  # noqa: E402

ROWS, HIDDEN, INTERMEDIATE = 1016, 768, 3072


def forms(seed=0):
    """Form name -> function of a bf16 [ROWS, HIDDEN] input."""
    rng = np.random.default_rng(seed)
    kernel32 = tf.Variable(rng.standard_normal((HIDDEN, INTERMEDIATE)).astype("float32") * 0.03)
    kernel = tf.Variable(tf.cast(kernel32, tf.bfloat16))
    bias32 = tf.Variable(np.zeros(INTERMEDIATE, "float32"))
    bias = tf.Variable(tf.cast(bias32, tf.bfloat16))
    constant = tf.cast(kernel32, tf.bfloat16).numpy()  # made a graph constant inside each trace
    return {
        "matmul, bf16 variable": lambda x: tf.matmul(x, kernel),
        "matmul + bias, bf16 variable": lambda x: tf.matmul(x, kernel) + bias,
        "matmul + bias + gelu, bf16 variable": lambda x: tf.nn.gelu(tf.matmul(x, kernel) + bias, approximate=True),
        "matmul + bias, float32 variable cast": lambda x: tf.matmul(x, tf.cast(kernel32, tf.bfloat16))
        + tf.cast(bias32, tf.bfloat16),
        "einsum 3-D + bias, bf16 variable": lambda x: tf.einsum("btd,dk->btk", tf.reshape(x, [8, -1, HIDDEN]),
                                                                 kernel) + bias,
        "matmul + bias, constant kernel": lambda x: tf.nn.bias_add(tf.matmul(x, tf.constant(constant)), bias),
        "matmul + bias + gelu, constant kernel": lambda x: tf.nn.gelu(
            tf.nn.bias_add(tf.matmul(x, tf.constant(constant)), bias), approximate=True),
        "matmul + bias, float32": lambda x: tf.matmul(tf.cast(x, tf.float32), kernel32) + bias32,
    }


def main():
    print(f"{ROWS} x {HIDDEN} x {INTERMEDIATE}; CPU: {cpu_description()}; {onednn_description()}", flush=True)
    inputs = tf.cast(tf.constant(np.random.default_rng(1).standard_normal((ROWS, HIDDEN)), tf.float32), tf.bfloat16)
    rows = []
    for name, function in forms().items():
        function = tf.function(function, autograph=False)
        for _ in range(2):
            function(inputs).numpy()
        sys.stdout.flush()
        os.write(1, f"==== {name}\n".encode())  # unbuffered: lands between oneDNN's lines
        times = []
        for _ in range(8):
            start = time.perf_counter()
            function(inputs).numpy()
            times.append(time.perf_counter() - start)
        milliseconds = statistics.median(times) * 1e3
        rows.append(f"| {name} | {milliseconds:.2f} | {2 * ROWS * HIDDEN * INTERMEDIATE / milliseconds / 1e6:.0f} |")
    sys.stdout.flush()
    os.write(1, ("\n| form | median ms | GFLOP/s |\n|---|---:|---:|\n" + "\n".join(rows) + "\n").encode())


if __name__ == "__main__":
    main()
