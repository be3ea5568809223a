#!/usr/bin/env python
"""MLM + NSP pretraining with `model.fit`: a drop-in for the original
run_pretraining.py (same flags, same outputs), resumable, distributed.

Checkpoints `model.ckpt-<step>` in `--output_dir` are in the original layout
(weights, Adam slots, global_step): rerunning the same command after a crash
(even kill -9) continues from the latest one, with optimizer state, step and
data position, and stops at `--num_train_steps`. A rerun with other training
settings (learning rate, steps, batch size, data, seed) is refused, naming
each change, unless `--allow_changed_settings` (the original README's second
phase at 512 tokens, say). `--seed` makes a fresh run
repeatable (initial weights, dropout, data order). Input files that are not
TFRecords, were written with another `--max_seq_length` or
`--max_predictions_per_seq`, or are truncated, are named in one line before
anything is written.

Example:
    bert-run-pretraining --input_file=data/*.tfrecord --output_dir=out \\
      --bert_config_file=release/bert_config.json --init_checkpoint=release/bert_model.ckpt \\
      --do_train --do_eval --train_batch_size=32 --max_seq_length=128 \\
      --max_predictions_per_seq=20 --num_train_steps=10000 --num_warmup_steps=1000 \\
      --learning_rate=2e-5
    # RoBERTa's recipe on records of create_pretraining_data --full_sentences --dynamic_masking:
    bert-run-pretraining --nonext_sentence_prediction --dynamic_masking --vocab_file=vocab.txt ...
    # LAMB for large batches (its learning rates are not AdamW's):
    bert-run-pretraining --optimizer=lamb --train_batch_size=32768 --learning_rate=4e-3 ...
"""

import math
import sys

from absl import flags

from keras_bert_impl.cli import (
    FlagError,
    define_tpu_flags,
    flag_values,
    parse_flags,
    quiet_tensorflow,
    require,
    require_finite_positive,
    require_positive,
    run_tool,
)
from keras_bert_impl.io import check_output_dir
from keras_bert_impl.jobs.run_pretraining import MIXED_PRECISION, run_pretraining

# The flags run_pretraining() takes; the TPU flags without effect are left out.
JOB_FLAGS = (
    "bert_config_file", "input_file", "output_dir", "init_checkpoint", "max_seq_length", "max_predictions_per_seq",
    "do_train", "do_eval", "train_batch_size", "eval_batch_size", "learning_rate", "optimizer", "num_train_steps",
    "num_warmup_steps", "save_checkpoints_steps", "max_eval_steps", "keep_checkpoint_max", "strategy", "tpu_name",
    "mixed_precision", "jit_compile", "clip_norm", "gradient_accumulation_steps", "seed", "num_cpu_devices",
    "summary_steps", "scan_input_files", "allow_changed_settings", "next_sentence_prediction", "dynamic_masking",
    "vocab_file", "masked_lm_prob",
)


def define_flags(fv):
    define = dict(flag_values=fv)
    # The original's flags, with its types and defaults.
    flags.DEFINE_string("bert_config_file", None, "The original bert_config.json.", **define)
    flags.DEFINE_string("input_file", None, "Input TFRecord file(s): comma list and globs.", **define)
    flags.DEFINE_string("output_dir", None, "Checkpoints, TensorBoard logs and eval_results.txt go here.", **define)
    flags.DEFINE_string("init_checkpoint", None, "Original-format checkpoint to start from (heads optional).", **define)
    flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length; must match the data.", **define)
    flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum masked-LM predictions per sequence; must match the data.", **define)
    flags.DEFINE_boolean("do_train", False, "Run training.", **define)
    flags.DEFINE_boolean("do_eval", False, "Run evaluation on --input_file.", **define)
    flags.DEFINE_integer("train_batch_size", 32, "Global batch size for training.", **define)
    flags.DEFINE_integer("eval_batch_size", 8, "Global batch size for evaluation.", **define)
    flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate of --optimizer.", **define)
    flags.DEFINE_integer("num_train_steps", 100000, "Optimizer steps.", **define)
    flags.DEFINE_integer("num_warmup_steps", 10000, "Linear warmup steps.", **define)
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "Checkpoint every N steps.", **define)
    flags.DEFINE_integer("max_eval_steps", 100, "Evaluation batches.", **define)
    flags.DEFINE_boolean("use_tpu", False, "Same as --strategy=tpu.", **define)
    flags.DEFINE_string("tpu_name", None, "TPU name or grpc:// address for --strategy=tpu.", **define)
    define_tpu_flags(fv)  # tpu_zone, gcp_project, master, num_tpu_cores, iterations_per_loop
    # This tool's own.
    flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints kept.", **define)
    flags.DEFINE_enum(
        "optimizer", "adamw", ["adamw", "lamb"],
        "adamw: the original's AdamW; lamb: LAMB (layer-wise trust ratio) for large batches, e.g. 32k-64k "
        "(docs/VOCABULARY.md, \"A BERT from scratch\"). Its learning rates are not AdamW's.", **define,
    )
    flags.DEFINE_string("strategy", "default", "default, one_device, mirrored, multi_worker_mirrored or tpu.", **define)
    flags.DEFINE_enum("mixed_precision", "none", sorted(MIXED_PRECISION), "Compute dtype.", **define)
    flags.DEFINE_boolean("jit_compile", False, "Compile the train step with XLA.", **define)
    flags.DEFINE_float("clip_norm", 1.0, "Global-norm gradient clipping (the original's 1.0), 0 for none.", **define)
    flags.DEFINE_integer("gradient_accumulation_steps", 1, "Micro-batches per optimizer step.", **define)
    flags.DEFINE_integer("seed", 12345, "Seed of initialisation, dropout and data order.", **define)
    flags.DEFINE_integer("num_cpu_devices", 0, "For tests: split the CPU into N logical devices (0 or 1: no split).", **define)
    flags.DEFINE_integer("summary_steps", 100, "TensorBoard scalar frequency.", **define)
    flags.DEFINE_boolean(
        "scan_input_files", True,
        "Read every input record once before starting, so that a truncated or corrupted file stops the run "
        "at once; --noscan_input_files checks only each file's first record.",
        **define,
    )
    flags.DEFINE_boolean(
        "allow_changed_settings", False,
        "Resume from the checkpoints in --output_dir even though they were trained with other settings "
        "(e.g. the second phase at --max_seq_length=512 on its own data, as the original README describes); "
        "without it such a rerun is refused, naming each change.", **define,
    )
    # The variants' recipes (docs/VARIANTS.md, "Pretraining recipes").
    flags.DEFINE_boolean(
        "next_sentence_prediction", True,
        "Train the cls/seq_relationship head on next_sentence_labels (NSP; ALBERT's sentence order for records "
        "made with --sentence_order_prediction); --nonext_sentence_prediction: masked-LM only (RoBERTa).", **define,
    )
    flags.DEFINE_boolean(
        "dynamic_masking", False,
        "RoBERTa's dynamic masking: the records are unmasked (create_pretraining_data --dynamic_masking) and "
        "each batch's masks are drawn in the input pipeline, anew each epoch (needs --vocab_file).", **define,
    )
    flags.DEFINE_string("vocab_file", None, "--dynamic_masking: the vocab.txt, vocab.json or spiece.model the records were made with.", **define)
    flags.DEFINE_float("masked_lm_prob", 0.15, "--dynamic_masking: fraction of the tokens masked.", **define)


def main(argv=None):
    fv = parse_flags(define_flags, argv, prog="run_pretraining", description=__doc__)
    require(fv, "bert_config_file", "input_file", "output_dir")
    check_output_dir(fv.output_dir, "--output_dir")
    if not (fv.do_train or fv.do_eval):
        raise FlagError("at least one of --do_train or --do_eval must be set")
    require_positive(
        fv, "train_batch_size", "eval_batch_size", "num_train_steps", "save_checkpoints_steps",
        "max_eval_steps", "max_seq_length", "max_predictions_per_seq", "gradient_accumulation_steps", "summary_steps",
    )
    require_finite_positive(fv, "learning_rate")
    if not (math.isfinite(fv.clip_norm) and fv.clip_norm >= 0):
        raise FlagError(f"--clip_norm must be a finite number >= 0 (0: no clipping), got {fv.clip_norm}")
    if fv.num_warmup_steps < 0:
        raise FlagError("--num_warmup_steps must be >= 0")
    if fv.keep_checkpoint_max < 0:  # 0 keeps every checkpoint, as the original's
        raise FlagError(f"--keep_checkpoint_max must be >= 0, got {fv.keep_checkpoint_max}")
    if fv.use_tpu:
        fv.strategy = "tpu"
    quiet_tensorflow()
    run_pretraining(**flag_values(fv, JOB_FLAGS))


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
