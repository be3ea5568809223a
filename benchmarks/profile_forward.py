"""Where a BERT forward pass spends its time: TensorFlow's op profile, by kind of work.

`bench_forward.py` says how fast each implementation is and how far from the
matrix-product floor; this script says where the rest goes. It runs the same
batches (`bench_forward.make_inputs`, random weights) through our inference
paths and, for comparison, keras-hub's BertBackbone and the matmul floor, each
as a plain TensorFlow graph (what TF Serving and Keras `predict()` run on a
CPU), records a TensorFlow profile of `--steps` batches after a warm-up, and
adds up the time of every op the executor ran, by kind:

- matmul: the matrix products (MatMul, BatchMatMul, Einsum and their oneDNN
  forms, fused bias/activation included);
- cast: dtype conversions (under `mixed_bfloat16`, mostly the float32 kernels
  converted to bfloat16 on every call);
- softmax, layer_norm, gelu: the element-wise blocks between the products
  (by op type, or by the name scope they run in: the GELU is the intermediate
  Dense layer's activation);
- adds: bias adds the products did not fuse, residual adds, the mask;
- gather/scatter: embedding lookups and the padding-free row gathers;
- layout: transposes, reshapes, slices, concatenations, pads, copies;
- variable reads and everything else.

Op time is summed over the executor's threads, so with inter-op parallelism
it can exceed the wall time; the table gives both, and their ratio (how many
ops ran at once on average). Each kind's share says what removing it could
gain at most. `--intra_op_threads` / `--inter_op_threads` set TensorFlow's
thread pools (0: its default, one thread per core each).

Which kernels oneDNN picked is not in this profile: with `ONEDNN_VERBOSE=1`
each oneDNN primitive prints a line with its implementation and shapes
(`amx` in the implementation's name where AMX multiplies), and the CPU's
instruction set in the header; a product that prints no line did not run
in oneDNN (on a CPU without bf16 units, TensorFlow's bfloat16 MatMul does
not).

Variants (ours):
- `call`: `model(inputs, training=False)` in a `tf.function`, every position;
- `serving`: what an export's signatures run: `drop_unused_padding`, then the
  model, built as an export builds it (`inference.precision.inference_dtype_policy`:
  in bf16 the weights are held in bfloat16, but the LayerNorms');
- `padding_free`: `make_inference_function(jit_compile=False,
  padding_free=True)`; `padding_free_frozen` adds `freeze_kernels=True`;
  `padding_free_frozen_keras_ops` is that traced as if oneDNN did not run
  the graph (a plan with `onednn_forms` off): Keras' LayerNorm
  and the float32 softmax in place of the arrangements oneDNN fuses.

Usage:
    .venv/bin/python benchmarks/profile_forward.py [--config base] [--batch_size 8]
        [--seq_length 128] [--steps 3] [--precisions fp32,bf16]
        [--variants call,serving,padding_free,padding_free_frozen,keras_hub,matmul_floor]
        [--top 8] [--intra_op_threads 0] [--inter_op_threads 0]
"""

import argparse
import collections
import os
import pathlib
import re
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

BENCHMARKS = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCHMARKS.parent))  # For `keras_bert_impl` from a checkout.
sys.path.insert(0, str(BENCHMARKS))  # For `bench_forward` beside this script.

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.get_logger().setLevel("ERROR")

import bench_forward  # noqa: E402

VARIANTS = ("call", "serving", "padding_free", "padding_free_frozen", "padding_free_frozen_keras_ops",
            "keras_hub", "matmul_floor")
KINDS = ("matmul", "cast", "softmax", "layer_norm", "gelu", "adds", "gather/scatter", "layout",
         "variable reads", "other")
# An executed op's profiler event is named "<node name>:<op type>".
_OP_EVENT = re.compile(r"^(?P<node>[^:]+):(?P<type>[A-Za-z_][A-Za-z0-9_]*)$")
_LAYOUT_TYPES = {"Transpose", "Reshape", "StridedSlice", "Slice", "ConcatV2", "Pad", "PadV2",
                 "Identity", "Squeeze", "ExpandDims", "Split", "SplitV", "Pack", "Unpack",
                 "Tile", "BroadcastTo", "Shape", "Fill", "ZerosLike", "_MklTranspose",
                 "_MklNativeTranspose", "_MklConcatV2", "_MklNativeConcatV2", "_MklReshape"}
_GATHER_TYPES = {"GatherV2", "ResourceGather", "GatherNd", "ScatterNd", "TensorScatterUpdate",
                 "UnsortedSegmentSum", "Where", "OneHot"}


def op_kind(node_name, op_type):
    """The kind of work an executed op does: one of `KINDS`.

    Args:
        node_name: The graph node's name, with its name scopes
            ("bert/encoder/layer_0/output/LayerNorm/moments/mean").
        op_type: The op's type as the executor ran it ("MatMul",
            "_MklNativeFusedMatMul", "Cast").

    Returns:
        A string from `KINDS`.

    Example:
    >>> op_kind("layer_0/attention/self/query/MatMul", "_MklNativeFusedMatMul")
    'matmul'
    >>> op_kind("layer_0/output/layer_norm/moments/mean", "Mean")
    'layer_norm'
    >>> op_kind("layer_0/intermediate_dense/mul_2", "Mul")
    'gelu'
    """
    scope = node_name.lower()
    if "MatMul" in op_type or "Einsum" in op_type:
        return "matmul"
    if op_type in ("Cast", "_MklCast"):
        return "cast"
    if "Softmax" in op_type:
        return "softmax"
    if "layernorm" in scope.replace("_", "") or "LayerNorm" in op_type:
        return "layer_norm"
    if "gelu" in scope or "intermediate" in scope or op_type in ("Erf", "Erfc", "Tanh"):
        return "gelu"
    if op_type in ("BiasAdd", "AddV2", "Add", "_MklAdd", "_MklAddV2"):
        return "adds"
    if op_type in _GATHER_TYPES:
        return "gather/scatter"
    if op_type in _LAYOUT_TYPES:
        return "layout"
    if op_type in ("ReadVariableOp", "_MklReadVariableOp"):
        return "variable reads"
    return "other"


def op_times(xspace):
    """Seconds per (node name, op type) over every executed op of a profile.

    Args:
        xspace: A `tensorflow.profiler.XSpace` (a `*.xplane.pb` file, parsed).

    Returns:
        `collections.Counter` of (node name, op type) -> seconds, summed over
        threads and calls; ops the executor ran inside a function call count
        once each (the call's own event is not an op).
    """
    seconds = collections.Counter()
    for plane in xspace.planes:
        if not plane.name.startswith("/host:"):
            continue
        names = {key: metadata.name for key, metadata in plane.event_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                match = _OP_EVENT.match(names.get(event.metadata_id, ""))
                if match and "::" not in match["node"]:
                    seconds[match["node"], match["type"]] += event.duration_ps * 1e-12
    return seconds


def profile(forward, inputs, steps):
    """(op seconds per (node, type), median wall seconds) of `steps` profiled calls.

    `forward` is called once more, untimed, before the profile (trace and
    warm-up); wall times are taken unprofiled afterwards, `steps` calls.
    """
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    def call():
        for output in forward(inputs):
            output.numpy()

    call()
    with tempfile.TemporaryDirectory() as logdir:
        options = tf.profiler.experimental.ProfilerOptions(
            host_tracer_level=2, python_tracer_level=0, device_tracer_level=0)
        tf.profiler.experimental.start(logdir, options=options)
        try:
            for _ in range(steps):
                call()
        finally:
            tf.profiler.experimental.stop()
        xspace = xplane_pb2.XSpace()
        paths = list(pathlib.Path(logdir).rglob("*.xplane.pb"))
        xspace.ParseFromString(paths[0].read_bytes())
    wall = []
    for _ in range(steps):
        start = time.perf_counter()
        call()
        wall.append(time.perf_counter() - start)
    return op_times(xspace), statistics.median(wall)


def build_variant(variant, precision, config):
    """(forward function, its inputs' names) for one variant at one precision."""
    from keras_bert_impl.inference.padding_free import drop_unused_padding

    sizes = bench_forward.CONFIGS[config]
    if variant == "keras_hub":
        model = bench_forward.build_keras_hub(*sizes, precision)
        return bench_forward.forward_function(model, False), bench_forward.INPUT_NAMES["keras_hub"]
    if variant == "matmul_floor":
        return bench_forward.forward_function(bench_forward.MatmulFloor(*sizes, precision), False), {}
    model = bench_forward.build_ours(*sizes, precision)
    if variant == "call":
        return bench_forward.forward_function(model, False), {}
    if variant == "serving":
        from keras_bert_impl.models.bert_model import BertModel
        from keras_bert_impl.inference.precision import inference_dtype_policy

        model = BertModel(model.bert_config, dtype=inference_dtype_policy(model, bench_forward.SERVING[precision]))

        @tf.function(autograph=False)
        def serving(inputs):
            outputs = model(drop_unused_padding(inputs), training=False)
            return outputs["sequence_output"], outputs["pooled_output"]
        return serving, {}
    freeze = variant.startswith("padding_free_frozen")
    if variant == "padding_free_frozen_keras_ops":
        import dataclasses

        from keras_bert_impl.inference.function import make_inference_function
        from keras_bert_impl.inference.plan import function_plan

        plan = function_plan(model, jit_compile=False, padding_free=True, bucket_size=1, freeze_kernels=True)
        inference = make_inference_function(model, dataclasses.replace(plan, onednn_forms=False))
        return (lambda inputs: tuple(inference(inputs)[name] for name in ("sequence_output", "pooled_output"))), {}
    return bench_forward.inference_function(model, False, True, freeze, bucket_size=1), {}


def kind_table(seconds, steps, wall):
    """Markdown rows: kind | ms per batch | share of op time, largest first."""
    by_kind = collections.Counter()
    for (node, op_type), value in seconds.items():
        by_kind[op_kind(node, op_type)] += value
    total = sum(by_kind.values())
    rows = [f"| {kind} | {value / steps * 1e3:.1f} | {value / total:.0%} |"
            for kind, value in by_kind.most_common()]
    rows.append(f"| all ops (summed over threads) | {total / steps * 1e3:.1f} | 100% |")
    rows.append(f"| wall time per batch | {wall * 1e3:.1f} | |")
    rows.append(f"| ops running at once, on average | {total / steps / wall:.2f} | |")
    return rows


def top_types(seconds, steps, count):
    """Markdown rows: the `count` (op type, kind) pairs that took longest."""
    by_type, nodes = collections.Counter(), collections.Counter()
    for (node, op_type), value in seconds.items():
        key = (op_type, op_kind(node, op_type))
        by_type[key] += value
        nodes[key] += 1
    return [f"| {op_type} | {kind} | {nodes[op_type, kind]} | {value / steps * 1e3:.1f} |"
            for (op_type, kind), value in by_type.most_common(count)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", choices=sorted(bench_forward.CONFIGS), default="base")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3, help="Profiled (and then timed) batches.")
    parser.add_argument("--precisions", default="fp32,bf16",
                        help=f"Comma-separated, from {', '.join(bench_forward.PRECISIONS)}.")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"Comma-separated, from {', '.join(VARIANTS)}.")
    parser.add_argument("--top", type=int, default=8, help="Op types listed per variant.")
    parser.add_argument("--intra_op_threads", type=int, default=0,
                        help="Threads within one op (0: TensorFlow's default).")
    parser.add_argument("--inter_op_threads", type=int, default=0,
                        help="Ops run at once (0: TensorFlow's default).")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    tf.config.threading.set_intra_op_parallelism_threads(args.intra_op_threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.inter_op_threads)
    precisions, variants = args.precisions.split(","), args.variants.split(",")
    for names, known in ((precisions, bench_forward.PRECISIONS), (variants, VARIANTS)):
        unknown = sorted(set(names) - set(known))
        if unknown:
            parser.error(f"unknown {', '.join(unknown)}; known: {', '.join(known)}")

    inputs = {key: tf.constant(value) for key, value in bench_forward.make_inputs(
        args.batch_size, args.seq_length, np.random.default_rng(args.seed)).items()}
    real_tokens = float(np.mean(inputs["input_mask"].numpy()))
    layers, hidden, heads, intermediate = bench_forward.CONFIGS[args.config]
    print(f"BERT-{args.config} (L={layers}, H={hidden}, A={heads}, I={intermediate}), "
          f"batch {args.batch_size} x seq {args.seq_length} ({real_tokens:.0%} real tokens), "
          f"plain graphs, {args.steps} profiled batches per variant, threads intra-op "
          f"{args.intra_op_threads or 'default'}, inter-op {args.inter_op_threads or 'default'}")
    print(bench_forward.machine_notes(), flush=True)

    for precision in precisions:
        for variant in variants:
            forward, names = build_variant(variant, precision, args.config)
            model_inputs = {names.get(key, key): value for key, value in inputs.items()}
            seconds, wall = profile(forward, model_inputs, args.steps)
            print(f"\n### {variant}, {precision}: {args.batch_size / wall:.2f} seq/s\n")
            print("| kind | ms per batch | share of op time |\n|---|---:|---:|")
            print("\n".join(kind_table(seconds, args.steps, wall)))
            print("\n| op type | kind | nodes | ms per batch |\n|---|---|---:|---:|")
            print("\n".join(top_types(seconds, args.steps, args.top)), flush=True)


if __name__ == "__main__":
    main()
