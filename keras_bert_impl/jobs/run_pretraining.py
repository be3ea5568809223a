"""MLM + NSP pretraining with `model.fit`, resumable and distributed, as the
original run_pretraining.py (`tools/run_pretraining.py`, console
`bert-run-pretraining`); and the variants' recipes: ALBERT's sentence order
(the same head on records made with `--sentence_order_prediction`), RoBERTa's
masked-LM only (`next_sentence_prediction=False`) with dynamic masking
(`dynamic_masking=True`); and LAMB in place of the original's AdamW for
large batches (`optimizer="lamb"`, as tf-models-official and the MLPerf
reference offer it).

Checkpoints `model.ckpt-<step>` in `output_dir` are in the original layout
(weights, Adam slots, global_step): rerunning after a crash (even kill -9)
continues from the latest one, with optimizer state, step and data position,
and stops at `num_train_steps`. Evaluation writes `eval_results.txt`.

The input files are checked before anything is built or written: each must
be a TFRecord file whose first record has the original features at the
lengths of `max_seq_length` and `max_predictions_per_seq`, and (unless
`scan_input_files=False`) every record is read once, so that a truncated or
corrupted file stops the run at once rather than hours in. One `seed` makes
a fresh run repeatable: initial weights, dropout masks and data order.

Example:
>>> MIXED_PRECISION["bfloat16"]
'mixed_bfloat16'
>>> is_chief()  # No TF_CONFIG: a single worker, which is the chief.
True
"""

import json
import math
import os
import sys
import time

from keras_bert_impl.cli import FlagError
from keras_bert_impl.errors import VocabError

# --mixed_precision values -> Keras dtype policies.
MIXED_PRECISION = {"none": None, "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
# The recipe settings a run records only where they differ from these, BERT's own.
RECIPE_DEFAULTS = {"next_sentence_prediction": True, "dynamic_masking": False, "optimizer": "adamw"}


def split_logical_cpus(count):
    """Splits the CPU into `count` logical devices (lets MirroredStrategy run on a CPU box)."""
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * count)


def is_chief():
    """Only the chief writes checkpoints, summaries and results under a
    multi-worker strategy: the `chief` task, or worker 0 of a cluster without one."""
    tf_config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    task = tf_config.get("task", {})
    if task.get("type", "chief") == "chief":
        return True
    has_chief = bool(tf_config.get("cluster", {}).get("chief"))
    return not has_chief and task.get("type") == "worker" and task.get("index", 0) == 0


def run_pretraining(
    *,
    bert_config_file,
    input_file,
    output_dir,
    init_checkpoint=None,
    max_seq_length=128,
    max_predictions_per_seq=20,
    do_train=False,
    do_eval=False,
    train_batch_size=32,
    eval_batch_size=8,
    learning_rate=5e-5,
    optimizer="adamw",
    num_train_steps=100000,
    num_warmup_steps=10000,
    save_checkpoints_steps=1000,
    max_eval_steps=100,
    keep_checkpoint_max=5,
    strategy="default",
    tpu_name=None,
    mixed_precision="none",
    jit_compile=False,
    clip_norm=1.0,
    gradient_accumulation_steps=1,
    seed=12345,
    num_cpu_devices=0,
    summary_steps=100,
    scan_input_files=True,
    allow_changed_settings=False,
    next_sentence_prediction=True,
    dynamic_masking=False,
    vocab_file=None,
    masked_lm_prob=0.15,
):
    """Trains and/or evaluates a `BertPretrainingModel`; the arguments are
    run_pretraining.py's flags (and this tool's extra ones).

    Args:
        bert_config_file: The original `bert_config.json`.
        input_file: Comma list of TFRecord files and globs.
        output_dir: Checkpoints, TensorBoard logs and `eval_results.txt`.
        init_checkpoint: Original-format checkpoint to start a fresh run from.
        max_seq_length, max_predictions_per_seq: As the records were written.
        do_train, do_eval: Train to `num_train_steps`; evaluate.
        train_batch_size, eval_batch_size: Global batch sizes.
        learning_rate, num_train_steps, num_warmup_steps: The optimizer's
            peak rate and its schedule.
        optimizer: `adamw` (the original's AdamWeightDecay) or `lamb`
            (`training.optimization.Lamb`, for large batches).
        save_checkpoints_steps: Steps between `model.ckpt-<step>` checkpoints.
        max_eval_steps: Evaluation batches.
        keep_checkpoint_max: Checkpoints kept.
        strategy, tpu_name: The distribution strategy.
        mixed_precision: A key of `MIXED_PRECISION`.
        jit_compile: Compile the train step with XLA.
        clip_norm: Global-norm gradient clipping (0 or None: none).
        gradient_accumulation_steps: Micro-batches per optimizer step.
        seed: Seed of the initial weights, dropout and data order.
        num_cpu_devices: Split the CPU into this many logical devices.
        summary_steps: TensorBoard scalar frequency.
        scan_input_files: Read every input record once before starting.
        allow_changed_settings: Resume from `output_dir`'s checkpoints even
            though they were trained with other settings (as the original's
            second phase at 512 tokens continues the 128-token run); by
            default that is refused (`training.run_settings`).
        next_sentence_prediction: Train the `cls/seq_relationship` head on
            `next_sentence_labels` (NSP, or ALBERT's sentence order for
            records made with `--sentence_order_prediction`); False:
            masked-LM only (RoBERTa). A config without a pooler has no
            sentence head either way.
        dynamic_masking: The records are unmasked (`create_pretraining_data
            --dynamic_masking`); the input pipeline draws each batch's masks
            (`pretraining_dataset.draw_masked_lm_predictions`), anew each
            epoch, from `seed`.
        vocab_file: With `dynamic_masking`, the tokenizer file the records
            were made with (its mask and special tokens).
        masked_lm_prob: With `dynamic_masking`, the fraction of tokens masked.

    Returns:
        The evaluation results (`{}` without `do_eval`), also written to
        `output_dir/eval_results.txt` by the chief.

    Raises:
        InputFileError: an input file is missing, not a TFRecord file, of
            another `max_seq_length`/`max_predictions_per_seq`, truncated or
            corrupted (named, with what is wrong).
        ChangedSettingsError: a resume with other training settings.
        FlagError, ConfigError, CheckpointError: other bad input.
    """
    import keras
    import tensorflow as tf

    from keras_bert_impl import filesystem
    from keras_bert_impl.checkpoints.original import load_original_checkpoint
    from keras_bert_impl.config import BertConfig
    from keras_bert_impl.data.pretraining_dataset import (
        DynamicMasking,
        check_pretraining_files,
        pretraining_dataset,
        reading_input_files,
    )
    from keras_bert_impl.data.tfrecord_files import resolve_input_files
    from keras_bert_impl.io import check_max_seq_length, write_results
    from keras_bert_impl.models.pretraining import BertPretrainingModel, split_pretraining_features
    from keras_bert_impl.training.callbacks import global_step
    from keras_bert_impl.training.checkpointing import save_training_checkpoint
    from keras_bert_impl.training.optimization import OPTIMIZERS, StepCountingLossScaleOptimizer, create_optimizer
    from keras_bert_impl.training.resume import resume_training, step_callbacks
    from keras_bert_impl.training.strategy import (
        adapt_model_to_multi_worker,
        check_batch_size,
        get_strategy,
        weights_digest,
    )

    def pretraining_settings():
        # What decides the run's course (not checkpoint or summary frequency,
        # strategy or XLA, which leave the trained weights as they are).
        return {
            "bert_config": config.to_dict(),
            "input_files": sorted(path if "://" in path else os.path.abspath(path) for path in input_files),
            "max_seq_length": max_seq_length,
            "max_predictions_per_seq": max_predictions_per_seq,
            "train_batch_size": train_batch_size,
            "gradient_accumulation_steps": gradient_accumulation_steps,
            "learning_rate": learning_rate,
            "num_train_steps": num_train_steps,
            "num_warmup_steps": num_warmup_steps,
            "mixed_precision": mixed_precision,
            "clip_norm": clip_norm,
            "seed": seed,
            # The recipes' settings, only where they differ from BERT's
            # (`RECIPE_DEFAULTS`): a run checkpointed before they existed
            # resumes unchanged.
            **({} if next_sentence_prediction else {"next_sentence_prediction": False}),
            **({"dynamic_masking": True, "masked_lm_prob": masked_lm_prob} if dynamic_masking else {}),
            **({} if optimizer_type == RECIPE_DEFAULTS["optimizer"] else {"optimizer": optimizer_type}),
        }

    if num_cpu_devices > 1:
        split_logical_cpus(num_cpu_devices)
    config = BertConfig.from_json_file(bert_config_file)
    check_max_seq_length(max_seq_length, config, bert_config_file)
    optimizer_type = optimizer  # The name; `optimizer` becomes the optimizer below.
    if optimizer_type not in OPTIMIZERS:
        raise FlagError(f"--optimizer {optimizer_type!r} is unknown; choose one of {', '.join(OPTIMIZERS)}")
    if train_batch_size % gradient_accumulation_steps:
        raise FlagError("--train_batch_size must be divisible by --gradient_accumulation_steps")
    masking = None
    if dynamic_masking:
        if not vocab_file:
            raise FlagError("--dynamic_masking needs --vocab_file: the tokenizer file the records were made with")
        if max_predictions_per_seq > max_seq_length:
            raise FlagError(f"--max_predictions_per_seq {max_predictions_per_seq} exceeds --max_seq_length {max_seq_length}")
        try:
            masking = DynamicMasking.from_vocab_file(vocab_file, config.vocab_size, max_predictions_per_seq, masked_lm_prob)
        except VocabError:
            raise  # Names the file already.
        except ValueError as error:
            raise FlagError(f"--{error}") from None
    elif vocab_file:
        raise FlagError("--vocab_file is read only with --dynamic_masking")
    input_files = resolve_input_files(input_file)
    # The strategy comes before any TensorFlow op runs: a multi-worker one
    # can only configure its collectives at program start.
    distribution = get_strategy(strategy, tpu_name)
    check_batch_size(train_batch_size, distribution, "--train_batch_size")
    check_batch_size(eval_batch_size, distribution, "--eval_batch_size")
    # Before any output: a file of another schema or a damaged one is named
    # now, not as a tf.data traceback after the model is built.
    scan_start = time.perf_counter()
    num_records = check_pretraining_files(
        input_files, max_seq_length, max_predictions_per_seq, scan_input_files, dynamic_masking=dynamic_masking
    )
    scan_seconds = time.perf_counter() - scan_start
    chief = is_chief()
    if chief:
        filesystem.makedirs(output_dir)

    # One seed for the initial weights and the dropout masks (Keras' global
    # seed, as `fine_tuning.build_in_strategy` sets it for the fine-tuning
    # tools) and for the data order (`pretraining_dataset` below).
    keras.utils.set_random_seed(seed)
    with distribution.scope():
        model = BertPretrainingModel(
            config, dtype=MIXED_PRECISION[mixed_precision], next_sentence=next_sentence_prediction
        )
        optimizer = create_optimizer(
            learning_rate, num_train_steps, num_warmup_steps, optimizer_type=optimizer_type,
            gradient_accumulation_steps=gradient_accumulation_steps if gradient_accumulation_steps > 1 else None,
            # Under a strategy, Keras clips each replica's gradient before the
            # all-reduce; the original's TPU code also clipped per core, but
            # the gradient of the core's whole loss (docs/FINDINGS.md).
            global_clipnorm=clip_norm or None,
        )
        if mixed_precision == "float16":
            optimizer = StepCountingLossScaleOptimizer(optimizer)
        model.compile(optimizer=optimizer, jit_compile=jit_compile)
        optimizer.build(model.trainable_variables)
        adapt_model_to_multi_worker(model, distribution)

        step, prefix = resume_training(
            model, optimizer, output_dir, pretraining_settings() if do_train else None, allow_changed_settings,
            chief=chief, log=lambda message: print(f"run_pretraining: {message}", file=sys.stderr),
            setting_defaults=RECIPE_DEFAULTS,
        )
        if prefix:
            print(f"run_pretraining: resuming from {prefix} (step {step})", file=sys.stderr)
        elif init_checkpoint:
            report = load_original_checkpoint(model, init_checkpoint, allow_fresh=["cls/"])
            print(f"run_pretraining: {init_checkpoint}: {report.summary()}", file=sys.stderr)
        elif not do_train:
            # As the original's Estimator says "Could not find trained model": said, not silent.
            print(f"run_pretraining: no model.ckpt-<step> in {output_dir} and no --init_checkpoint: "
                  "evaluating freshly initialized weights", file=sys.stderr)
    if num_records is not None:
        print(
            f"run_pretraining: {num_records} records in {len(input_files)} input files, "
            f"all read in {scan_seconds:.1f}s",
            file=sys.stderr,
        )

    if do_train and step < num_train_steps:
        accumulation = gradient_accumulation_steps
        micro_batch = train_batch_size // accumulation
        dataset = pretraining_dataset(
            input_files, micro_batch, max_seq_length, max_predictions_per_seq, is_training=True, seed=seed,
            dynamic_masking=masking,
        ).map(split_pretraining_features)
        # The data position: skip the micro-batches the restored steps consumed.
        dataset = dataset.skip(step * accumulation)
        dataset = dataset.prefetch(tf.data.AUTOTUNE)
        # Keras epochs of `save_checkpoints_steps` optimizer steps over one
        # endless iterator; StopAtStep ends the run exactly at num_train_steps.
        chunk = save_checkpoints_steps * accumulation
        # The other workers hold the same weights (synchronous all-reduce)
        # and write nothing: checkpoints and summaries are the chief's. They
        # still read the metrics with it (a collective across workers).
        callbacks = step_callbacks(
            num_train_steps, output_dir, save_checkpoints_steps, filesystem.join(output_dir, "train"), summary_steps,
            keep=keep_checkpoint_max, chief=chief,
        )
        start = time.perf_counter()
        with reading_input_files(input_files):
            model.fit(
                dataset,
                steps_per_epoch=chunk,
                initial_epoch=(step * accumulation) // chunk,
                epochs=math.ceil(num_train_steps * accumulation / chunk),
                callbacks=callbacks,
                verbose=1 if chief else 0,
                shuffle=False,  # The dataset shuffles; Keras would only warn.
            )
        if chief:
            save_training_checkpoint(model, optimizer, output_dir, keep=keep_checkpoint_max)
            config.to_json_file(filesystem.join(output_dir, "bert_config.json"))
        print(f"run_pretraining: trained to step {global_step(optimizer)} in {time.perf_counter() - start:.1f}s", file=sys.stderr)
        if isinstance(distribution, tf.distribute.MultiWorkerMirroredStrategy):
            # Equal on every worker when they trained in sync.
            digest = weights_digest([*model.weights, *optimizer.variables])
            print(f"run_pretraining: weights and optimizer digest {digest}", file=sys.stderr)

    results = {}
    if do_eval:
        dataset = pretraining_dataset(
            input_files, eval_batch_size, max_seq_length, max_predictions_per_seq,
            is_training=False, drop_remainder=True, seed=seed, dynamic_masking=masking,
        ).map(split_pretraining_features).take(max_eval_steps)
        with reading_input_files(input_files):
            results = model.evaluate(dataset, return_dict=True, verbose=1 if chief else 0)
        results = {k: float(v) for k, v in results.items()}
        if not hasattr(model, "next_sentence_head"):  # Masked-LM only: no sentence metrics to report.
            results = {k: v for k, v in results.items() if not k.startswith("next_sentence_")}
        results["global_step"] = global_step(optimizer)
        if chief:
            write_results(filesystem.join(output_dir, "eval_results.txt"), results)
            for key in sorted(results):
                print(f"  {key} = {results[key]}", file=sys.stderr)
    return results
