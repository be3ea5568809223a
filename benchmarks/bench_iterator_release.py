"""How long releasing a `tf.data` iterator holds up its caller, with tf.data's defaults and with ours.

With the defaults, every iterator runs an autotuning thread, and a release
that loses a race with it waits out the rest of the thread's sleep (up to
60 s; see `keras_bert_impl/data/pipeline_options.py`). Each trial reads an
iterator for `--live` seconds, leaves it unused for `--idle` seconds (as one
that Python's garbage collector frees later, or Keras' last iterator of a
`predict`), drops it and times the release; the two settings alternate. The
thread's periods double from 10 ms: read for 1.3 s, it sleeps from 1.27 s to
2.55 s, so a release at 1.8 s that loses waits ~0.75 s. The race is lost more
often where the woken thread runs on the releasing thread's CPU: each setting
runs on every CPU and again in a process held to one CPU (a one-CPU container).

Then the cost side: batches per second of the pretraining input pipeline
(`pretraining_dataset` with dynamic masking, on records this script writes)
with tf.data's autotuning on and off, interleaved rounds, medians.

Last, Keras' `fit` of a dict of arrays, which makes an iterator per epoch:
Keras' own pipeline against our models' (`BertConfigModel.fit`, which
batches the arrays by `array_epochs`), a small classifier trained for
`--epochs` epochs of ~0.4 s, alternating, on every CPU and on one.

Usage:
    .venv/bin/python benchmarks/bench_iterator_release.py [--trials 12] [--live 1.3] [--idle 0.5] [--fits 4]
"""

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))


def release_seconds(dataset, live, idle):
    """Seconds that dropping an iterator of `dataset` took, after `live` s of reading and `idle` s unused."""
    iterator = iter(dataset)
    start = time.monotonic()
    while time.monotonic() - start < live:
        next(iterator)
    time.sleep(idle)
    start = time.monotonic()
    del iterator
    return time.monotonic() - start


def release_rows(args):
    """Release times of iterators over token-id arrays in batches (`array_batches`' shape), both settings."""
    import numpy as np
    import tensorflow as tf

    from keras_bert_impl.data.pipeline_options import array_batches

    ids = np.random.default_rng(0).integers(0, 30522, (4096, 128), dtype=np.int32)
    settings = {
        "tf.data defaults (autotuning thread)":
            tf.data.Dataset.from_tensor_slices({"input_ids": ids}).repeat().batch(32).prefetch(tf.data.AUTOTUNE),
        "`array_batches` (none)": array_batches({"input_ids": ids}, 32).repeat(),
    }
    times = {name: [] for name in settings}
    for _ in range(args.trials):
        for name, dataset in settings.items():
            times[name].append(release_seconds(dataset, args.live, args.idle))
    cpus = len(os.sched_getaffinity(0))
    return [f"| {cpus} | {name} | {statistics.median(seconds):.3f} | {max(seconds):.2f} | "
            f"{sum(s > 0.05 for s in seconds)} of {len(seconds)} | {sum(seconds):.1f} |"
            for name, seconds in times.items()]


def fit_rows(args):
    """Wall time of `fit` of arrays through Keras' own pipeline and through our models', and the time between
    epochs (the last iterator's release among it), alternating."""
    import keras
    import numpy as np

    from keras_bert_impl.config import BertConfig
    from keras_bert_impl.models.classifier import BertClassifier

    rng = np.random.default_rng(0)
    rows, seq = 768, 32
    x = {"input_ids": rng.integers(1, 100, (rows, seq)).astype("int32"), "input_mask": np.ones((rows, seq), "int32"),
         "segment_ids": np.zeros((rows, seq), "int32")}
    y = rng.integers(0, 2, rows)
    config = BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=128, max_position_embeddings=seq)

    class EpochTimes(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.seconds = []

        def on_epoch_begin(self, epoch, logs=None):
            self.start = time.monotonic()

        def on_epoch_end(self, epoch, logs=None):
            self.seconds.append(time.monotonic() - self.start)

    fits = {"Keras' own (tf.data's defaults)": lambda model, **kw: keras.Model.fit(model, x, y, **kw),
            "our models' (`array_epochs`)": lambda model, **kw: model.fit(x, y, **kw)}
    totals, between = {name: [] for name in fits}, {name: [] for name in fits}
    for _ in range(args.fits):
        for name, fit in fits.items():
            model = BertClassifier(config, num_labels=2)
            model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            fit(model, batch_size=32, epochs=1, verbose=0)  # traced
            epochs = EpochTimes()
            start = time.monotonic()
            fit(model, batch_size=32, epochs=args.epochs, verbose=0, callbacks=[epochs])
            totals[name].append(time.monotonic() - start)
            between[name].append(totals[name][-1] - sum(epochs.seconds))
    cpus = len(os.sched_getaffinity(0))
    return [f"| {cpus} | {name} | {statistics.median(totals[name]):.2f} | {max(between[name]):.2f} |"
            for name in fits]


def write_records(path, count, seq_length=128):
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(count):
            length = int(rng.integers(20, seq_length))
            ids = np.zeros(seq_length, np.int64)
            ids[:length] = rng.integers(1000, 30000, length)
            ids[0], ids[length - 1] = 101, 102
            features = {
                "input_ids": ids, "input_mask": (ids > 0).astype(np.int64),
                "segment_ids": np.zeros(seq_length, np.int64), "next_sentence_labels": np.zeros(1, np.int64),
            }
            example = tf.train.Example(features=tf.train.Features(feature={
                key: tf.train.Feature(int64_list=tf.train.Int64List(value=value)) for key, value in features.items()}))
            writer.write(example.SerializeToString())


def throughput_rows(args, directory):
    import tensorflow as tf
    from absl import logging as absl_logging

    from keras_bert_impl.data.pretraining_dataset import DynamicMasking, pretraining_dataset

    absl_logging.set_verbosity(absl_logging.ERROR)  # tf.data warns that `with_autotuning` changes an option
    path = pathlib.Path(directory) / "records.tfrecord"
    write_records(path, 4096)
    masking = DynamicMasking(max_predictions_per_seq=20, masked_lm_prob=0.15, vocab_size=30522, mask_id=103,
                             special_ids=(0, 101, 102))

    def pipeline():  # autotuning off, as the package builds it
        return pretraining_dataset([str(path)], 32, 128, 20, is_training=True, seed=1, dynamic_masking=masking)

    def with_autotuning(dataset):
        options = tf.data.Options()
        options.autotune.enabled = True
        return dataset.with_options(options)

    settings = {"with tf.data's autotuning (its default)": lambda: with_autotuning(pipeline()),
                "without (`pretraining_dataset` as built)": pipeline}
    rates = {name: [] for name in settings}
    for _ in range(args.rounds):
        for name, build in settings.items():
            iterator = iter(build())
            for _ in range(20):
                next(iterator)
            start = time.perf_counter()
            for _ in range(args.batches):
                next(iterator)
            rates[name].append(args.batches / (time.perf_counter() - start))
            del iterator
    return [f"| {name} | {statistics.median(values):.0f} | {min(values):.0f}-{max(values):.0f} |"
            for name, values in rates.items()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--live", type=float, default=1.3, help="seconds an iterator is read")
    parser.add_argument("--idle", type=float, default=0.5, help="seconds it is then left unused")
    parser.add_argument("--one_cpu", choices=("release", "fit"), help="(internal) those rows only, on CPU 0")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--fits", type=int, default=4, help="fits of each kind, alternating")
    parser.add_argument("--epochs", type=int, default=8, help="epochs per fit")
    args = parser.parse_args()

    if args.one_cpu:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # before TensorFlow starts a thread
        for row in (release_rows if args.one_cpu == "release" else fit_rows)(args):
            print(row)
        return

    import tensorflow as tf

    from keras_bert_impl.hardware import cpu_description

    print(f"CPU: {cpu_description()}; TensorFlow {tf.__version__}")
    print_table(f"Releasing an iterator read for {args.live:g} s, then unused for {args.idle:g} s; {args.trials} "
                "trials each", "| CPUs | iterators of | release, median s | worst s | releases over 50 ms | total s |",
                release_rows(args) + [on_one_cpu("release", args)])
    with tempfile.TemporaryDirectory() as directory:
        print_table(f"The pretraining input pipeline (batches of 32 x 128, dynamic masking), batches/s over "
                    f"{args.batches} batches, {args.rounds} interleaved rounds",
                    "| pipeline | batches/s, median | range |", throughput_rows(args, directory))
    print_table(f"`fit` of a dict of arrays (768 rows of 32 tokens, batches of 32), {args.epochs} epochs, "
                f"{args.fits} fits each, alternating",
                "| CPUs | pipeline | fit, median s | longest time between epochs, s |",
                fit_rows(args) + [on_one_cpu("fit", args)])


def print_table(title, header, rows):
    """A title line and a Markdown table: `header`, its alignment row (text left, numbers right), `rows`."""
    columns = [cell.strip() for cell in header.strip("|").split("|")]
    alignment = ["---" if column in ("iterators of", "pipeline") else "---:" for column in columns]
    print(f"\n{title}\n\n{header}\n|{'|'.join(alignment)}|")
    for row in rows:
        print(row, flush=True)


def on_one_cpu(rows, args):
    """The table rows `rows` ("release" or "fit") of this script run in a process held to one CPU."""
    flags = [f"--{name}={getattr(args, name)}" for name in ("trials", "live", "idle", "fits", "epochs")]
    result = subprocess.run([sys.executable, __file__, f"--one_cpu={rows}", *flags], capture_output=True, text=True,
                            check=True)
    return result.stdout.strip()


if __name__ == "__main__":
    main()
