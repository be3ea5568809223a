"""`benchmarks/profile_forward.py`: the op profile adds up what the executor really ran."""

import numpy as np
import pytest
import tensorflow as tf

from tests.helpers import load_benchmark


@pytest.fixture(scope="module")
def profiler():
    return load_benchmark("profile_forward")


def test_kinds_of_the_ops_bert_runs(profiler):
    assert profiler.op_kind("bert/encoder/layer_0/self/MatMul_1", "BatchMatMulV2") == "matmul"
    assert profiler.op_kind("query/MatMul", "_MklNativeFusedMatMul") == "matmul"
    assert profiler.op_kind("query/Cast", "Cast") == "cast"
    assert profiler.op_kind("layer_0/self/Softmax", "Softmax") == "softmax"
    assert profiler.op_kind("layer_0/attention_output_layer_norm/moments/mean", "Mean") == "layer_norm"
    assert profiler.op_kind("layer_0/output/LayerNorm/batchnorm/Rsqrt", "Rsqrt") == "layer_norm"
    assert profiler.op_kind("layer_0/ffn/Erf", "Erf") == "gelu"
    assert profiler.op_kind("layer_0/add", "AddV2") == "adds"
    assert profiler.op_kind("embeddings/GatherV2", "GatherV2") == "gather/scatter"
    assert profiler.op_kind("self/transpose", "Transpose") == "layout"
    assert profiler.op_kind("query/ReadVariableOp", "ReadVariableOp") == "variable reads"
    assert set(map(lambda pair: profiler.op_kind(*pair), [("a", "Sqrt"), ("b", "Maximum")])) == {"other"}


def test_profile_counts_each_executed_op_once_per_call(profiler):
    # Two products of a float32 kernel cast to bfloat16 on every call, as a
    # mixed-precision Dense layer does, then a softmax: three calls profiled.
    kernel = tf.Variable(np.random.default_rng(0).standard_normal((64, 64)).astype("float32"))

    @tf.function
    def forward(inputs):
        hidden = tf.matmul(inputs["x"], tf.cast(kernel, tf.bfloat16), name="first")
        hidden = tf.matmul(hidden, tf.cast(kernel, tf.bfloat16), name="second")
        return (tf.nn.softmax(tf.cast(hidden, tf.float32), name="probs"),)

    inputs = {"x": tf.ones((32, 64), tf.bfloat16)}
    seconds, wall = profiler.profile(forward, inputs, steps=3)
    matmuls = {node for node, op_type in seconds if profiler.op_kind(node, op_type) == "matmul"}
    assert matmuls == {"first", "second"}
    kinds = {profiler.op_kind(node, op_type) for node, op_type in seconds}
    assert {"matmul", "cast", "softmax"} <= kinds
    assert all(value > 0 for value in seconds.values()) and wall > 0
    rows = profiler.kind_table(seconds, steps=3, wall=wall)
    # Kinds, largest first, then the total, the wall time and their ratio.
    assert rows[-3].startswith("| all ops") and rows[-2].startswith("| wall time")
    assert rows[-1].startswith("| ops running at once")
    shares = [int(row.rsplit("|", 2)[1].strip().rstrip("%")) for row in rows[:-3]]
    assert shares == sorted(shares, reverse=True) and 97 <= sum(shares) <= 103
