#!/usr/bin/env python
"""MLM + NSP pretraining with `model.fit`: a drop-in for the original
run_pretraining.py (same flags, same outputs), resumable, distributed.

Checkpoints `model.ckpt-<step>` in `--output_dir` are in the original layout
(weights, Adam slots, global_step): rerunning the same command after a crash
(even kill -9) continues from the latest one, with optimizer state, step and
data position, and stops at `--num_train_steps`.

Example:
    bert-run-pretraining --input_file=data/*.tfrecord --output_dir=out \
      --bert_config_file=release/bert_config.json --init_checkpoint=release/bert_model.ckpt \
      --do_train --do_eval --train_batch_size=32 --max_seq_length=128 \
      --max_predictions_per_seq=20 --num_train_steps=10000 --num_warmup_steps=1000 \
      --learning_rate=2e-5
"""

import math
import os
import sys
import time

if __package__ in (None, ""):  # run as `python tools/run_pretraining.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from keras_bert_impl.cli import FlagParser, quiet_tensorflow, run_tool  # noqa: E402

MIXED_PRECISION = {"none": None, "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}


def build_parser():
    parser = FlagParser(prog="run_pretraining", description="BERT MLM+NSP pretraining (original run_pretraining.py flags).")
    add = parser.add_argument
    add("--bert_config_file", help="The original bert_config.json.")
    add("--input_file", help="Input TFRecord file(s): comma list and globs.")
    add("--output_dir", help="Checkpoints, TensorBoard logs and eval_results.txt go here.")
    add("--init_checkpoint", default=None, help="Original-format checkpoint to start from (heads optional).")
    add("--max_seq_length", type=int, default=128, help="Must match the data (default: %(default)s).")
    add("--max_predictions_per_seq", type=int, default=20, help="Must match the data (default: %(default)s).")
    parser.add_bool("do_train", False, "Run training")
    parser.add_bool("do_eval", False, "Run evaluation on --input_file")
    add("--train_batch_size", type=int, default=32, help="Global batch size (default: %(default)s).")
    add("--eval_batch_size", type=int, default=8, help="Global batch size (default: %(default)s).")
    add("--learning_rate", type=float, default=5e-5, help="Peak Adam learning rate (default: %(default)s).")
    add("--num_train_steps", type=int, default=100000, help="Optimizer steps (default: %(default)s).")
    add("--num_warmup_steps", type=int, default=10000, help="Linear warmup steps (default: %(default)s).")
    add("--save_checkpoints_steps", type=int, default=1000, help="Checkpoint every N steps (default: %(default)s).")
    add("--max_eval_steps", type=int, default=100, help="Eval batches (default: %(default)s).")
    add("--keep_checkpoint_max", type=int, default=5, help="Checkpoints kept (default: %(default)s).")
    add("--strategy", default="default", help="default, one_device, mirrored, multi_worker_mirrored or tpu.")
    add("--tpu_name", default=None, help="TPU for --strategy=tpu.")
    parser.add_bool("use_tpu", False, "Original flag: same as --strategy=tpu")
    add("--mixed_precision", default="none", choices=sorted(MIXED_PRECISION), help="Compute dtype (default: %(default)s).")
    parser.add_bool("jit_compile", False, "Compile the train step with XLA")
    add("--clip_norm", type=float, default=1.0, help="Global-norm gradient clipping, 0 for none (default: %(default)s, the original's).")
    add("--gradient_accumulation_steps", type=int, default=1, help="Micro-batches per optimizer step (default: %(default)s).")
    add("--seed", type=int, default=12345, help="Shuffling seed (default: %(default)s).")
    add("--num_cpu_devices", type=int, default=0, help=argparse_suppress())
    add("--summary_steps", type=int, default=100, help="TensorBoard scalar frequency (default: %(default)s).")
    return parser


def argparse_suppress():
    import argparse

    return argparse.SUPPRESS


def validate(parser, args):
    parser.require(args, "bert_config_file", "input_file", "output_dir")
    if not (args.do_train or args.do_eval):
        parser.error("at least one of --do_train or --do_eval must be set")
    for flag in ("train_batch_size", "eval_batch_size", "num_train_steps", "save_checkpoints_steps",
                 "max_eval_steps", "max_seq_length", "max_predictions_per_seq", "gradient_accumulation_steps"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag} must be positive")
    if args.num_warmup_steps < 0:
        parser.error("--num_warmup_steps must be >= 0")
    if args.use_tpu:
        args.strategy = "tpu"


def split_logical_cpus(count):
    """Splits the CPU into `count` logical devices (lets MirroredStrategy run on a CPU box)."""
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * count)


def is_chief():
    """Only the chief writes checkpoints and results under a multi-worker strategy."""
    import json

    task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
    return task.get("type", "chief") == "chief" or (task.get("type") == "worker" and task.get("index", 0) == 0)


def write_results(path, results):
    """`key = value` lines sorted by key, as the original writes eval_results.txt."""
    partial = f"{path}.partial-{os.getpid()}"
    with open(partial, "w", encoding="utf-8") as f:
        for key in sorted(results):
            f.write(f"{key} = {results[key]}\n")
    os.replace(partial, path)


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    validate(parser, args)
    quiet_tensorflow()

    import keras
    import tensorflow as tf

    from keras_bert_impl.checkpoints.original import load_original_checkpoint
    from keras_bert_impl.config import BertConfig
    from keras_bert_impl.data.tfrecords import pretraining_dataset, resolve_input_files
    from keras_bert_impl.errors import ConfigError
    from keras_bert_impl.models.pretraining import BertPretrainingModel, split_pretraining_features
    from keras_bert_impl.training.callbacks import StopAtStep, TrainingSummaries
    from keras_bert_impl.training.checkpointing import (
        TrainingCheckpoint,
        checkpoint_steps,
        restore_training_checkpoint,
        save_training_checkpoint,
    )
    from keras_bert_impl.training.optimization import create_optimizer
    from keras_bert_impl.training.strategy import adapt_model_to_multi_worker, check_batch_size, get_strategy

    if args.num_cpu_devices > 1:
        split_logical_cpus(args.num_cpu_devices)
    config = BertConfig.from_json_file(args.bert_config_file)
    if args.max_seq_length > config.max_position_embeddings:
        raise ConfigError(
            f"--max_seq_length {args.max_seq_length} exceeds max_position_embeddings "
            f"{config.max_position_embeddings} of {args.bert_config_file}"
        )
    input_files = resolve_input_files(args.input_file)
    strategy = get_strategy(args.strategy, args.tpu_name)
    check_batch_size(args.train_batch_size, strategy, "--train_batch_size")
    check_batch_size(args.eval_batch_size, strategy, "--eval_batch_size")
    chief = is_chief()
    output_dir = args.output_dir if chief else os.path.join(args.output_dir, f".worker-{os.getpid()}")
    os.makedirs(output_dir, exist_ok=True)

    policy = MIXED_PRECISION[args.mixed_precision]
    with strategy.scope():
        model = BertPretrainingModel(config, dtype=policy)
        optimizer = create_optimizer(
            args.learning_rate, args.num_train_steps, args.num_warmup_steps,
            gradient_accumulation_steps=args.gradient_accumulation_steps if args.gradient_accumulation_steps > 1 else None,
            # Under a strategy, Keras clips each replica's gradient before the
            # all-reduce, as the original's TPU code clipped per core.
            global_clipnorm=args.clip_norm or None,
        )
        if args.mixed_precision == "float16":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        model.compile(optimizer=optimizer, jit_compile=args.jit_compile)
        optimizer.build(model.trainable_variables)
        adapt_model_to_multi_worker(model, strategy)

        step = 0
        existing = checkpoint_steps(args.output_dir)
        if existing:
            prefix = os.path.join(args.output_dir, f"model.ckpt-{existing[-1]}")
            step = restore_training_checkpoint(model, optimizer, prefix)
            print(f"run_pretraining: resuming from {prefix} (step {step})", file=sys.stderr)
        elif args.init_checkpoint:
            report = load_original_checkpoint(model, args.init_checkpoint, allow_fresh=["cls/"])
            print(f"run_pretraining: {args.init_checkpoint}: {report.summary()}", file=sys.stderr)

    if args.do_train and step < args.num_train_steps:
        accumulation = args.gradient_accumulation_steps
        micro_batch = args.train_batch_size // accumulation
        if micro_batch * accumulation != args.train_batch_size:
            parser.error("--train_batch_size must be divisible by --gradient_accumulation_steps")
        dataset = pretraining_dataset(
            input_files, micro_batch, args.max_seq_length, args.max_predictions_per_seq,
            is_training=True, seed=args.seed,
        ).map(split_pretraining_features)
        # The data position: skip the micro-batches the restored steps consumed.
        dataset = dataset.skip(step * accumulation)
        dataset = dataset.prefetch(tf.data.AUTOTUNE)
        # Keras epochs of `save_checkpoints_steps` optimizer steps over one
        # endless iterator; StopAtStep ends the run exactly at --num_train_steps.
        chunk = args.save_checkpoints_steps * accumulation
        start = time.perf_counter()
        model.fit(
            dataset,
            steps_per_epoch=chunk,
            initial_epoch=(step * accumulation) // chunk,
            epochs=math.ceil(args.num_train_steps * accumulation / chunk),
            callbacks=[
                StopAtStep(args.num_train_steps),
                TrainingCheckpoint(output_dir, args.save_checkpoints_steps, keep=args.keep_checkpoint_max),
                TrainingSummaries(os.path.join(output_dir, "train"), args.summary_steps),
            ],
            verbose=1 if chief else 0,
        )
        save_training_checkpoint(model, optimizer, output_dir, keep=args.keep_checkpoint_max)
        config.to_json_file(os.path.join(output_dir, "bert_config.json"))
        print(f"run_pretraining: trained to step {args.num_train_steps} in {time.perf_counter() - start:.1f}s", file=sys.stderr)

    if args.do_eval:
        dataset = pretraining_dataset(
            input_files, args.eval_batch_size, args.max_seq_length, args.max_predictions_per_seq,
            is_training=False, drop_remainder=True,
        ).map(split_pretraining_features).take(args.max_eval_steps)
        results = model.evaluate(dataset, return_dict=True, verbose=1 if chief else 0)
        inner = getattr(optimizer, "inner_optimizer", optimizer)
        results = {k: float(v) for k, v in results.items()}
        results["global_step"] = int(inner.iterations.numpy())
        if chief:
            write_results(os.path.join(args.output_dir, "eval_results.txt"), results)
            for key in sorted(results):
                print(f"  {key} = {results[key]}", file=sys.stderr)


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
