"""MLM + NSP pretraining steps/s against keras-hub and tf-models-official, same config.

Each implementation trains the same BERT (random initial weights) on the same
batch of pretraining features, each the way its library trains it:

- keras_bert_impl: `BertPretrainingModel` compiled with our `create_optimizer`
  (the original AdamW, warmup + linear decay, global-norm clipping at 1.0),
  one `train_on_batch` per step: what `run_pretraining` runs under `fit`.
- keras_hub: `BertMaskedLM` compiled as keras-hub's pretraining guide does
  (sparse categorical cross-entropy weighted by `masked_lm_weights`, weighted
  accuracy) with Keras' `AdamW` set to the original's hyper-parameters
  (weight decay 0.01 except LayerNorm and biases, epsilon 1e-6, clipping at
  1.0). keras-hub has no next-sentence head, so its step does an MLM step only
  (a next-sentence head is one H x 2 dense layer: negligible work).
- tf_models: tf-models-official's `MaskedLMTask` (BertPretrainerV2 with its
  `next_sentence` classification head), its own `train_step` (losses,
  metrics, `apply_gradients`) in a `tf.function`, with the AdamW and schedule
  of `official.nlp.optimization.create_optimizer` and global-norm clipping
  at 1.0, the way tf-models' trainer runs it.

Every implementation is run plain (TensorFlow graph) and compiled with XLA
(`jit_compile=True`), at each precision (fp32 and mixed bfloat16). All
variants are built and warmed up first; the timed steps are then taken in
interleaved rounds, one step of each variant per round, so that other load on
the machine falls on all of them alike. The first table gives each
implementation's best variant and its ratio to the best peer at that
precision; the second, every variant with its median and best step time and
its process CPU time per step.

Usage:
    .venv/bin/python benchmarks/bench_pretraining.py [--configs mini,small]
        [--batch_size 32] [--seq_length 128] [--max_predictions_per_seq 20]
        [--steps 10] [--precisions fp32,bf16]
        [--implementations keras_bert_impl,keras_hub,tf_models]
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
sys.path.insert(0, str(REPO_ROOT / "benchmarks"))  # For the forward benchmark's helpers.

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bench_forward import CONFIGS, MAX_POSITION_EMBEDDINGS, TYPE_VOCAB_SIZE, VOCAB_SIZE, machine_notes  # noqa: E402

tf.get_logger().setLevel("ERROR")

PRECISIONS = {"fp32": "float32", "bf16": "mixed_bfloat16"}
VARIANTS = {"graph": False, "XLA": True}
OURS = "keras_bert_impl"
PEERS = ("keras_hub", "tf_models")
# The original run_pretraining's optimizer settings, given to every implementation.
LEARNING_RATE, NUM_TRAIN_STEPS, NUM_WARMUP_STEPS = 1e-4, 10000, 100


def make_batch(batch_size, seq_length, max_predictions, rng):
    """A batch of pretraining features in the original schema.

    Rows are filled the way the original `create_pretraining_data` fills
    them: to `seq_length` nine times in ten (its `short_seq_prob` is 0.1),
    otherwise to a length drawn from [seq_length / 4, seq_length]. Each row is
    `[CLS] A [SEP] B [SEP]` with random word ids, 15% of its real tokens (up to
    `max_predictions`, never [CLS]/[SEP]) masked, zero-padded prediction
    slots of weight 0, and a random next-sentence label.

    Returns:
        Dict of the original seven feature names to NumPy arrays.
    """
    batch = {name: np.zeros((batch_size, seq_length), "int32")
             for name in ("input_ids", "input_mask", "segment_ids")}
    positions = np.zeros((batch_size, max_predictions), "int32")
    ids = np.zeros((batch_size, max_predictions), "int32")
    weights = np.zeros((batch_size, max_predictions), "float32")
    for row in range(batch_size):
        length = seq_length
        if rng.random() < 0.1:
            length = int(rng.integers(seq_length // 4, seq_length + 1))
        first_sep = int(rng.integers(2, length - 2))
        batch["input_ids"][row, :length] = rng.integers(1000, VOCAB_SIZE, length)
        batch["input_ids"][row, [0, first_sep, length - 1]] = (101, 102, 102)  # [CLS], [SEP], [SEP]
        batch["input_mask"][row, :length] = 1
        batch["segment_ids"][row, first_sep + 1 : length] = 1
        candidates = [i for i in range(1, length - 1) if i != first_sep]
        count = min(max_predictions, max(1, round(0.15 * length)))
        chosen = np.sort(rng.choice(candidates, count, replace=False))
        positions[row, :count] = chosen
        ids[row, :count] = batch["input_ids"][row, chosen]
        weights[row, :count] = 1.0
        batch["input_ids"][row, chosen] = 103  # [MASK]
    batch.update(masked_lm_positions=positions, masked_lm_ids=ids, masked_lm_weights=weights,
                 next_sentence_labels=rng.integers(0, 2, (batch_size, 1)).astype("int32"))
    return batch


def keras_step(model, x, y, sample_weight=None):
    """One optimizer step through Keras' compiled train function."""

    def step():
        logs = model.train_on_batch(x, y, sample_weight=sample_weight, return_dict=True)
        return float(logs["loss"])

    return step


def build_ours(config, precision, jit_compile, batch):
    """Our BertPretrainingModel and optimizer, as run_pretraining builds them."""
    from keras_bert_impl.config import BertConfig
    from keras_bert_impl.models.pretraining import BertPretrainingModel, split_pretraining_features
    from keras_bert_impl.training.optimization import create_optimizer

    layers, hidden, heads, intermediate = config
    bert_config = BertConfig(
        vocab_size=VOCAB_SIZE, hidden_size=hidden, num_hidden_layers=layers,
        num_attention_heads=heads, intermediate_size=intermediate,
        max_position_embeddings=MAX_POSITION_EMBEDDINGS, type_vocab_size=TYPE_VOCAB_SIZE,
    )
    model = BertPretrainingModel(bert_config, dtype=PRECISIONS[precision])
    model.compile(optimizer=create_optimizer(LEARNING_RATE, NUM_TRAIN_STEPS, NUM_WARMUP_STEPS),
                  jit_compile=jit_compile)
    x, y = split_pretraining_features({k: tf.constant(v) for k, v in batch.items()})
    return keras_step(model, x, y)


def build_keras_hub(config, precision, jit_compile, batch):
    """keras-hub's BertMaskedLM, compiled as its pretraining guide does."""
    import keras
    import keras_hub

    layers, hidden, heads, intermediate = config
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB_SIZE, num_layers=layers, num_heads=heads, hidden_dim=hidden,
        intermediate_dim=intermediate, max_sequence_length=MAX_POSITION_EMBEDDINGS,
        num_segments=TYPE_VOCAB_SIZE, dtype=PRECISIONS[precision],
    )
    model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    schedule = keras.optimizers.schedules.PolynomialDecay(LEARNING_RATE, NUM_TRAIN_STEPS, 0.0)
    optimizer = keras.optimizers.AdamW(
        schedule, weight_decay=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-6, global_clipnorm=1.0)
    optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=[keras.metrics.SparseCategoricalAccuracy()],
        jit_compile=jit_compile,
    )
    x = {
        "token_ids": tf.constant(batch["input_ids"]),
        "segment_ids": tf.constant(batch["segment_ids"]),
        "padding_mask": tf.constant(batch["input_mask"]),
        "mask_positions": tf.constant(batch["masked_lm_positions"]),
    }
    return keras_step(model, x, tf.constant(batch["masked_lm_ids"]),
                      sample_weight=tf.constant(batch["masked_lm_weights"]))


def build_tf_models(config, precision, jit_compile, batch):
    """tf-models-official's MaskedLMTask and its train_step (tf_keras)."""
    import tf_keras
    from official.nlp import optimization
    from official.nlp.configs import bert, encoders
    from official.nlp.data import pretrain_dataloader
    from official.nlp.tasks import masked_lm

    layers, hidden, heads, intermediate = config
    # tf_keras layers take their policy from the global one when built.
    tf_keras.mixed_precision.set_global_policy(PRECISIONS[precision])
    try:
        task = masked_lm.MaskedLMTask(masked_lm.MaskedLMConfig(model=bert.PretrainerConfig(
            encoder=encoders.EncoderConfig(type="bert", bert=encoders.BertEncoderConfig(
                vocab_size=VOCAB_SIZE, hidden_size=hidden, num_layers=layers,
                num_attention_heads=heads, intermediate_size=intermediate,
                max_position_embeddings=MAX_POSITION_EMBEDDINGS,
                type_vocab_size=TYPE_VOCAB_SIZE)),
            cls_heads=[bert.ClsHeadConfig(inner_dim=hidden, num_classes=2, dropout_rate=0.1,
                                          name="next_sentence")],
        ), train_data=pretrain_dataloader.BertPretrainDataConfig(use_next_sentence_label=True)))
        model = task.build_model()
        metrics = task.build_metrics()
        optimizer = optimization.create_optimizer(LEARNING_RATE, NUM_TRAIN_STEPS, NUM_WARMUP_STEPS)
        optimizer.global_clipnorm = 1.0  # Set by tf-models' optimizer config in its trainer.
        features = {
            "input_word_ids": tf.constant(batch["input_ids"]),
            "input_mask": tf.constant(batch["input_mask"]),
            "input_type_ids": tf.constant(batch["segment_ids"]),
            "masked_lm_positions": tf.constant(batch["masked_lm_positions"]),
            "masked_lm_ids": tf.constant(batch["masked_lm_ids"]),
            "masked_lm_weights": tf.constant(batch["masked_lm_weights"]),
            "next_sentence_labels": tf.constant(batch["next_sentence_labels"][:, 0]),
        }
        model(features)  # Builds every layer (some are built on first call) under the policy.
    finally:
        tf_keras.mixed_precision.set_global_policy("float32")

    @tf.function(jit_compile=jit_compile)
    def train_step(features):
        return task.train_step(features, model, optimizer, metrics)["loss"]

    return lambda: float(train_step(features))


BUILDERS = {OURS: build_ours, "keras_hub": build_keras_hub, "tf_models": build_tf_models}


def timed(step):
    """`(wall seconds, process CPU seconds)` of one step, its loss fetched."""
    start, cpu_start = time.perf_counter(), time.process_time()
    loss = step()
    if not np.isfinite(loss):
        raise FloatingPointError(f"non-finite loss {loss}")
    return time.perf_counter() - start, time.process_time() - cpu_start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", default="mini,small",
                        help=f"Comma-separated, from {', '.join(CONFIGS)}.")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--steps", type=int, default=10, help="Timed steps per variant.")
    parser.add_argument("--precisions", default="fp32,bf16",
                        help=f"Comma-separated, from {', '.join(PRECISIONS)}.")
    parser.add_argument("--implementations", default=",".join(BUILDERS),
                        help=f"Comma-separated, from {', '.join(BUILDERS)}.")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"Comma-separated, from {', '.join(VARIANTS)}.")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    lists = {name: getattr(args, name).split(",")
             for name in ("configs", "precisions", "implementations", "variants")}
    for name, known in (("configs", CONFIGS), ("precisions", PRECISIONS),
                        ("implementations", BUILDERS), ("variants", VARIANTS)):
        unknown = sorted(set(lists[name]) - set(known))
        if unknown:
            parser.error(f"--{name}: unknown {', '.join(unknown)}; known: {', '.join(known)}")
    if not 8 <= args.seq_length <= MAX_POSITION_EMBEDDINGS:
        parser.error(f"--seq_length must be in [8, {MAX_POSITION_EMBEDDINGS}]")

    batch = make_batch(args.batch_size, args.seq_length, args.max_predictions_per_seq,
                       np.random.default_rng(args.seed))
    real_tokens = batch["input_mask"].mean()
    print(f"batch {args.batch_size} x seq {args.seq_length} ({real_tokens:.0%} real tokens), "
          f"{args.max_predictions_per_seq} max predictions "
          f"({int(batch['masked_lm_weights'].sum())} real), {args.steps} timed steps per variant")
    print(machine_notes())
    print("load average at start: {:.2f} {:.2f} {:.2f}\n".format(*os.getloadavg()), flush=True)

    keys = [(config, precision, implementation, variant)
            for config in lists["configs"] for precision in lists["precisions"]
            for implementation in lists["implementations"] for variant in lists["variants"]]
    steps = {}
    for key in keys:
        config, precision, implementation, variant = key
        step = BUILDERS[implementation](CONFIGS[config], precision, VARIANTS[variant], batch)
        first, _ = timed(step)  # Traces (and compiles, with XLA).
        warm, _ = timed(step)
        print(f"  {config} {precision} {implementation} {variant}: first step {first:.1f} s, "
              f"second {warm:.2f} s", flush=True)
        steps[key] = step

    wall, cpu = {key: [] for key in keys}, {key: [] for key in keys}
    for _ in range(args.steps):
        for key in keys:
            seconds, cpu_seconds = timed(steps[key])
            wall[key].append(seconds)
            cpu[key].append(cpu_seconds)
    rate = {key: args.batch_size / statistics.median(times) for key, times in wall.items()}

    print("\nload average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    print("\n| config | precision | implementation | best variant | examples/s | steps/s "
          "| ratio vs best peer |")
    print("|---|---|---|---|---:|---:|---:|")
    for config in lists["configs"]:
        for precision in lists["precisions"]:
            best = {}
            for implementation in lists["implementations"]:
                best[implementation] = max(
                    ((variant, rate[config, precision, implementation, variant])
                     for variant in lists["variants"]), key=lambda item: item[1])
            best_peer = max((best[peer][1] for peer in PEERS if peer in best), default=None)
            for implementation, (variant, examples) in best.items():
                ratio = f"{examples / best_peer:.2f}x" if best_peer else "n/a"
                print(f"| {config} | {precision} | {implementation} | {variant} "
                      f"| {examples:.1f} | {examples / args.batch_size:.3f} | {ratio} |")

    print("\nAll variants (examples/s from the median step; CPU s is process CPU time, "
          "all threads):\n")
    print("| config | precision | implementation | variant | median s | best s "
          "| median CPU s | examples/s |")
    print("|---|---|---|---|---:|---:|---:|---:|")
    for key in keys:
        print("| {} | {} | {} | {} ".format(*key)
              + f"| {statistics.median(wall[key]):.3f} | {min(wall[key]):.3f} "
              f"| {statistics.median(cpu[key]):.3f} | {rate[key]:.1f} |")


if __name__ == "__main__":
    main()
