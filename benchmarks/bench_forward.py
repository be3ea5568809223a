"""BertModel forward throughput against keras-hub and tf-models-official, same config.

Each implementation is built from the same BERT hyper-parameters (random
weights: throughput does not depend on their values) and run the way a user
serving it would run it at its best: `model(inputs, training=False)` inside a
`tf.function`, once as a plain TensorFlow graph and once compiled with XLA
(`jit_compile=True`); ours also runs padding-free
(`BertModel.make_inference_function(padding_free=True)`, per-token work on
real tokens only, equal at real positions), as a plain graph and with XLA
(one program per `--bucket_size` real tokens), and with frozen weights
(`freeze_kernels=True`: rounded to the compute dtype once, when the function
is made, not on every call; in a plain graph every position or padding-free,
with XLA padding-free). Every
(implementation, precision, variant) is traced and warmed up first; then the
timed batches are taken in interleaved rounds, one batch of each in turn, so
that load from other processes on the machine falls on all of them alike.

The first table gives each implementation's best variant at each precision,
its throughput (from the median batch time) and its ratio to the best peer
(the faster of keras-hub and tf-models at that precision). `matmul_floor` is
not an implementation but a bound: only the encoder's matrix products, with
nothing between them, so no BERT can be faster than it on this machine; each
row's share of it says how close to the matrix units' limit it runs (a
padding-free variant skips the padding's products, so it can pass 100 %). The
second table has every variant, with best and median batch times and the
process CPU time per batch, which shows whether a difference is other load on
the machine or real.

Usage:
    .venv/bin/python benchmarks/bench_forward.py [--config base] [--batch_size 8]
        [--seq_length 128] [--steps 8] [--precisions fp32,bf16]
        [--implementations keras_bert_impl,keras_hub,tf_models,matmul_floor]
        [--bucket_size 16] [--fetch outputs|checksum] [--xla both|off]

On a GPU, `--fetch checksum` times the forward pass itself: the copy of
`sequence_output` to the host, the same for every implementation, otherwise
takes most of a batch.
"""

import argparse
import os
import pathlib
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # For `keras_bert_impl` from a checkout.

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.get_logger().setLevel("ERROR")  # One tf.function per variant is meant, not retracing.

# (num_hidden_layers, hidden_size, num_attention_heads, intermediate_size),
# the BERT-base and the small/mini sizes of google-research/bert's README.
CONFIGS = {
    "base": (12, 768, 12, 3072),
    "small": (4, 512, 8, 2048),
    "mini": (4, 256, 4, 1024),
}
VOCAB_SIZE = 30522
MAX_POSITION_EMBEDDINGS = 512
TYPE_VOCAB_SIZE = 2
PRECISIONS = {"fp32": "float32", "bf16": "mixed_bfloat16"}
SERVING = {"fp32": "float32", "bf16": "bfloat16"}  # Each precision's name for `bert-export --precision`.
VARIANTS = {"tf.function": False, "tf.function(jit_compile=True)": True}
OURS = "keras_bert_impl"
FLOOR = "matmul_floor"
PEERS = ("keras_hub", "tf_models")


def make_inputs(batch_size, seq_length, rng):
    """A batch of sentence pairs padded to `seq_length`, in our input names.

    Each row is `[CLS] A [SEP] B [SEP]` followed by padding, with a real length
    drawn uniformly from [seq_length / 4, seq_length]: the padding mask is
    what a batch of real, unequal sentences gives.

    Returns:
        Dict of int32 `input_ids`, `input_mask`, `segment_ids`, each
        [batch_size, seq_length].
    """
    input_ids = np.zeros((batch_size, seq_length), "int32")
    input_mask = np.zeros((batch_size, seq_length), "int32")
    segment_ids = np.zeros((batch_size, seq_length), "int32")
    for row in range(batch_size):
        length = int(rng.integers(max(seq_length // 4, 5), seq_length + 1))
        first_sep = int(rng.integers(2, length - 2))
        input_ids[row, :length] = rng.integers(1000, VOCAB_SIZE, length)
        input_ids[row, [0, first_sep, length - 1]] = (101, 102, 102)  # [CLS], [SEP], [SEP]
        input_mask[row, :length] = 1
        segment_ids[row, first_sep + 1 : length] = 1
    return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}


def build_ours(layers, hidden, heads, intermediate, precision):
    """Our BertModel."""
    from keras_bert_impl.config import BertConfig
    from keras_bert_impl.models.bert_model import BertModel

    config = BertConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=intermediate,
        max_position_embeddings=MAX_POSITION_EMBEDDINGS,
        type_vocab_size=TYPE_VOCAB_SIZE,
    )
    return BertModel(config, dtype=PRECISIONS[precision])


def build_keras_hub(layers, hidden, heads, intermediate, precision):
    """keras-hub's BertBackbone (Keras 3)."""
    import keras_hub

    return keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB_SIZE,
        num_layers=layers,
        num_heads=heads,
        hidden_dim=hidden,
        intermediate_dim=intermediate,
        max_sequence_length=MAX_POSITION_EMBEDDINGS,
        num_segments=TYPE_VOCAB_SIZE,
        dtype=PRECISIONS[precision],
    )


def build_tf_models(layers, hidden, heads, intermediate, precision):
    """tf-models-official's BertEncoder (tf_keras)."""
    import tf_keras
    from official.nlp.modeling import networks

    # tf_keras layers take their policy from the global one when built.
    tf_keras.mixed_precision.set_global_policy(PRECISIONS[precision])
    try:
        return networks.BertEncoder(
            vocab_size=VOCAB_SIZE,
            hidden_size=hidden,
            num_layers=layers,
            num_attention_heads=heads,
            max_sequence_length=MAX_POSITION_EMBEDDINGS,
            type_vocab_size=TYPE_VOCAB_SIZE,
            inner_dim=intermediate,
            dict_outputs=True,
        )
    finally:
        tf_keras.mixed_precision.set_global_policy("float32")


class MatmulFloor:
    """Only the encoder's matrix products, chained: a lower bound for any implementation.

    Per layer: the query/key/value, attention-output, intermediate and output
    projections and the two attention products (QK^T, probs x V), in the
    compute dtype, with no bias, activation, softmax or LayerNorm between them
    (the values are meaningless). Called like a model; not a peer, so not in
    the ratios.
    """

    def __init__(self, layers, hidden, heads, intermediate, precision, seed=0):
        dtype = "bfloat16" if precision == "bf16" else "float32"
        rng = np.random.default_rng(seed)
        # Scaled like an initializer would; the values themselves are never used.
        weight = lambda *shape: tf.Variable(  # noqa: E731
            (rng.standard_normal(shape) / np.sqrt(shape[0])).astype("float32"), dtype=dtype)
        self.layers = [
            (weight(hidden, 3 * hidden), weight(hidden, hidden),
             weight(hidden, intermediate), weight(intermediate, hidden))
            for _ in range(layers)
        ]
        self.embeddings = weight(VOCAB_SIZE, hidden)
        self.heads, self.hidden, self.dtype = heads, hidden, dtype

    def __call__(self, inputs, training=False):
        batch_size, seq_length = inputs["input_ids"].shape
        heads, size_per_head = self.heads, self.hidden // self.heads
        # [batch * seq, H]; a gather keeps the inputs in the program.
        hidden_states = tf.gather(self.embeddings, tf.reshape(inputs["input_ids"], [-1]))

        def split_heads(x):  # [batch * seq, H] -> [batch, N, seq, D]
            x = tf.reshape(x, [batch_size, seq_length, heads, size_per_head])
            return tf.transpose(x, [0, 2, 1, 3])

        for qkv_kernel, output_kernel, intermediate_kernel, ffn_kernel in self.layers:
            query, key, value = tf.split(hidden_states @ qkv_kernel, 3, axis=-1)
            # [batch, N, seq, seq]
            scores = tf.matmul(split_heads(query), split_heads(key), transpose_b=True)
            context = tf.transpose(scores @ split_heads(value), [0, 2, 1, 3])
            context = tf.reshape(context, [-1, self.hidden])
            hidden_states = ((context @ output_kernel) @ intermediate_kernel) @ ffn_kernel
        sequence_output = tf.reshape(hidden_states, [batch_size, seq_length, self.hidden])
        return {"sequence_output": sequence_output, "pooled_output": sequence_output[:, 0]}


# Each builder takes (layers, hidden, heads, intermediate, precision).
BUILDERS = {
    OURS: build_ours,
    "keras_hub": build_keras_hub,
    "tf_models": build_tf_models,
    FLOOR: MatmulFloor,
}
# Our input names -> each peer's.
INPUT_NAMES = {
    "keras_hub": {"input_ids": "token_ids", "segment_ids": "segment_ids",
                  "input_mask": "padding_mask"},
    "tf_models": {"input_ids": "input_word_ids", "segment_ids": "input_type_ids",
                  "input_mask": "input_mask"},
}


def forward_function(model, jit_compile):
    """The serving forward pass: `model(inputs, training=False)` as a tf.function.

    Returns:
        A function of the inputs dict returning `(sequence_output,
        pooled_output)`; every implementation has both outputs, and fetching
        them as NumPy arrays waits for the whole computation.
    """

    @tf.function(jit_compile=jit_compile)
    def forward(inputs):
        outputs = model(inputs, training=False)
        return outputs["sequence_output"], outputs["pooled_output"]

    return forward


# Our other inference functions: variant name -> (jit_compile, padding_free,
# freeze_kernels). Frozen in a plain graph: a copy holding its weights in the
# compute dtype; with XLA: the Dense kernels held as float32.
OUR_VARIANTS = {
    "tf.function, frozen weights": (False, False, True),
    "tf.function, padding-free": (False, True, False),
    "tf.function, padding-free, frozen weights": (False, True, True),
    "tf.function(jit_compile=True), padding-free": (True, True, False),
    "tf.function(jit_compile=True), padding-free, frozen kernels": (True, True, True),
}


def inference_function(model, jit_compile, padding_free, freeze_kernels, bucket_size):
    """`BertModel.make_inference_function(...)`, both outputs fetched."""
    inference = model.make_inference_function(jit_compile=jit_compile, padding_free=padding_free,
                                              bucket_size=bucket_size, freeze_kernels=freeze_kernels)

    def forward(inputs):
        outputs = inference(inputs)
        return outputs["sequence_output"], outputs["pooled_output"]

    return forward


def checksum_function(forward):
    """`forward` with both outputs summed on the device: one scalar comes back.

    Every output value is still computed (the sum reads all of them), but the
    device-to-host copy of `sequence_output`, which every implementation
    pays alike and which dominates a fast GPU's step, is left out.
    """

    @tf.function(autograph=False)
    def summed(inputs):
        return (sum(tf.reduce_sum(tf.cast(output, tf.float32)) for output in forward(inputs)),)

    return summed


def run_batch(forward, inputs):
    """`(wall seconds, process CPU seconds)` for one forward pass, outputs fetched.

    CPU seconds (all threads) hardly change when other processes share the
    cores, so they show whether a wall-clock difference is load or real.
    """
    start, cpu_start = time.perf_counter(), time.process_time()
    for output in forward(inputs):
        output.numpy()
    return time.perf_counter() - start, time.process_time() - cpu_start


def machine_notes():
    """One line on the CPU, threads and library versions the numbers come from."""
    import keras
    import keras_hub
    import tf_keras

    from keras_bert_impl.hardware import cpu_description, onednn_description

    cpu = f"{cpu_description()}; {onednn_description()}"
    gpus = [tf.config.experimental.get_device_details(gpu).get("device_name", gpu.name)
            for gpu in tf.config.list_physical_devices("GPU")]
    if gpus:  # TensorFlow places every variant on the first GPU.
        tf32 = "on" if tf.config.experimental.tensor_float_32_execution_enabled() else "off"
        cpu += f"; GPU: {', '.join(gpus)} (float32 matmuls in TF32: {tf32})"
    return (
        f"{cpu}; TensorFlow {tf.__version__}, "
        f"Keras {keras.__version__}, keras-hub {keras_hub.__version__}, "
        f"tf_keras {tf_keras.__version__}"
    )


def best_variants(throughput):
    """(implementation, precision) -> (variant, seq/s) of its fastest variant."""
    best = {}
    for (implementation, precision, variant), rate in throughput.items():
        if rate > best.get((implementation, precision), (None, 0.0))[1]:
            best[implementation, precision] = (variant, rate)
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", choices=sorted(CONFIGS), default="base")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=8, help="Timed batches per variant.")
    parser.add_argument("--precisions", default="fp32,bf16",
                        help=f"Comma-separated, from {', '.join(PRECISIONS)}.")
    parser.add_argument("--implementations", default=",".join(BUILDERS),
                        help=f"Comma-separated, from {', '.join(BUILDERS)}.")
    parser.add_argument("--max_variant_seconds", type=float, default=30.0,
                        help="Stop timing a variant once its timed batches took this long "
                             "(it keeps at least one), and skip its warm-up batch when its "
                             "first call took this long: bounds the run when one is very slow.")
    parser.add_argument("--bucket_size", type=int, default=16,
                        help="Padding-free with XLA: real-token counts are rounded up to a "
                             "multiple of this (one compiled program per multiple).")
    parser.add_argument("--fetch", choices=("outputs", "checksum"), default="outputs",
                        help="outputs: both outputs come back to the host as NumPy arrays, as "
                             "a server would need them; checksum: only their sum does (every "
                             "value still computed), which times the forward pass on the "
                             "device without the output copy.")
    parser.add_argument("--xla", choices=("both", "off"), default="both",
                        help="off: plain graphs only (XLA on a CPU uses neither oneDNN nor bf16 "
                             "instructions, and compiling BERT-base takes minutes on 2 cores).")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    plain_only = args.xla == "off"
    precisions = args.precisions.split(",")
    implementations = args.implementations.split(",")
    for names, known in ((precisions, PRECISIONS), (implementations, BUILDERS)):
        unknown = sorted(set(names) - set(known))
        if unknown:
            parser.error(f"unknown {', '.join(unknown)}; known: {', '.join(known)}")
    if not 8 <= args.seq_length <= MAX_POSITION_EMBEDDINGS:
        parser.error(f"--seq_length must be in [8, {MAX_POSITION_EMBEDDINGS}]")

    layers, hidden, heads, intermediate = CONFIGS[args.config]
    inputs = {key: tf.constant(value) for key, value in
              make_inputs(args.batch_size, args.seq_length, np.random.default_rng(args.seed)).items()}
    real_tokens = int(inputs["input_mask"].numpy().sum()) / inputs["input_mask"].shape.num_elements()
    print(f"BERT-{args.config} (L={layers}, H={hidden}, A={heads}, I={intermediate}), "
          f"batch {args.batch_size} x seq {args.seq_length} ({real_tokens:.0%} real tokens), "
          f"{args.steps} timed batches per variant, fetching {args.fetch}")
    print(machine_notes())
    print("load average at start: {:.2f} {:.2f} {:.2f}\n".format(*os.getloadavg()), flush=True)

    fetched = checksum_function if args.fetch == "checksum" else (lambda forward: forward)

    # Build, trace and warm up every variant before any timing.
    variants = {}  # (implementation, precision, variant) -> (forward, its inputs)
    for implementation in implementations:
        for precision in precisions:
            model = BUILDERS[implementation](layers, hidden, heads, intermediate, precision)
            names = INPUT_NAMES.get(implementation, {})
            model_inputs = {names.get(key, key): value for key, value in inputs.items()}
            for variant, jit_compile in VARIANTS.items():
                if jit_compile and plain_only:
                    continue
                forward = fetched(forward_function(model, jit_compile))
                first, _ = run_batch(forward, model_inputs)  # Traces (and compiles, with XLA).
                note = f"first call {first:.1f} s"
                if first < args.max_variant_seconds:
                    note += f", warm-up batch {run_batch(forward, model_inputs)[0]:.2f} s"
                print(f"  {implementation} {precision} {variant}: {note}", flush=True)
                variants[implementation, precision, variant] = (forward, model_inputs)
            if implementation == OURS:
                # Frozen weights; per-token work on real tokens only (with XLA,
                # one program per `bucket_size` real tokens).
                for variant, (jit_compile, padding_free, freeze_kernels) in OUR_VARIANTS.items():
                    if jit_compile and plain_only:
                        continue
                    forward = fetched(inference_function(model, jit_compile, padding_free, freeze_kernels,
                                                         args.bucket_size))
                    first, _ = run_batch(forward, model_inputs)
                    print(f"  {implementation} {precision} {variant}: first call {first:.1f} s, "
                          f"warm-up batch {run_batch(forward, model_inputs)[0]:.2f} s", flush=True)
                    variants[implementation, precision, variant] = (forward, model_inputs)

    # Interleaved rounds: one batch of every variant per round.
    wall, cpu = {key: [] for key in variants}, {key: [] for key in variants}
    for _ in range(args.steps):
        for key, (forward, model_inputs) in variants.items():
            if not wall[key] or sum(wall[key]) < args.max_variant_seconds:
                seconds, cpu_seconds = run_batch(forward, model_inputs)
                wall[key].append(seconds)
                cpu[key].append(cpu_seconds)
    throughput = {key: args.batch_size / statistics.median(times) for key, times in wall.items()}
    best = best_variants(throughput)
    best_peer = {
        precision: max((best[peer, precision][1] for peer in PEERS if peer in implementations),
                       default=None)
        for precision in precisions
    }

    floor = {precision: best[FLOOR, precision][1] if FLOOR in implementations else None
             for precision in precisions}

    def ratio(rate, reference):
        return f"{rate / reference:.2f}x" if reference else "n/a"

    print("\nload average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    print("\n| implementation | precision | variant | seq/s | ratio vs best peer "
          "| share of matmul floor | median CPU s/batch |")
    print("|---|---|---|---:|---:|---:|---:|")
    for precision in precisions:
        for implementation in implementations:
            variant, rate = best[implementation, precision]
            cpu_seconds = statistics.median(cpu[implementation, precision, variant])
            share = f"{rate / floor[precision]:.0%}" if floor[precision] else "n/a"
            print(f"| {implementation} | {precision} | {variant} | {rate:.2f} "
                  f"| {ratio(rate, best_peer[precision])} | {share} | {cpu_seconds:.3f} |")

    print("\nAll variants (seq/s from the median wall time; CPU s is process CPU time, "
          "all threads):\n")
    print("| implementation | precision | variant | batches | median s | best s "
          "| median CPU s | seq/s |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for (implementation, precision, variant), times in wall.items():
        print(f"| {implementation} | {precision} | {variant} | {len(times)} "
              f"| {statistics.median(times):.3f} | {min(times):.3f} "
              f"| {statistics.median(cpu[implementation, precision, variant]):.3f} "
              f"| {throughput[implementation, precision, variant]:.2f} |")


if __name__ == "__main__":
    main()
