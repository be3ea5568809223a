#!/usr/bin/env python
"""Fine-tunes BERT for SQuAD v1.1 / v2.0 span QA and writes its predictions.

A drop-in for google-research/bert's `run_squad.py`: the same flags and
defaults, the same feature conversion (doc-stride windows, max-context rule,
improved answer spans), the same loss (mean of start and end cross-entropy)
and the same outputs in `--output_dir`:

* `predictions.json`: question id -> answer text ("" for no answer, v2.0).
* `nbest_predictions.json`: id -> the `--n_best_size` best answers, each
  `{text, probability, start_logit, end_logit}`.
* `null_odds.json` (v2.0): id -> null score minus best non-null score; the
  official v2.0 script's `--na-prob-file`.
* `eval_results.txt`: when `--predict_file` has gold answers, the official
  evaluation as `key = value` lines: v1.1 `exact_match`, `f1`; v2.0 what
  `evaluate-v2.0.py --na-prob-file null_odds.json` prints (`exact`, `f1`,
  `total`, `HasAns_*`, `NoAns_*`, `best_exact`, `best_f1` and their
  thresholds; `best_f1_thresh` is the `--null_score_diff_threshold` to use).
* `model.ckpt`: after `--do_train`, the model in the original's variable
  names (`cls/squad/output_weights` [2, H], `cls/squad/output_bias`),
  `global_step`, and copies of `bert_config.json` and `vocab.txt`;
  `model.ckpt-<step>` every `--save_checkpoints_steps`; TensorBoard logs.

Training is Keras `model.fit` with the original optimizer for
`int(questions / batch * epochs)` steps over the windows of the questions,
shuffled as the original (`random.Random(12345)` over the questions, then a
100-window buffer). Without `--do_train`, the weights come from
`--output_dir/model.ckpt` when it exists, else from `--init_checkpoint`,
which must then hold the `cls/squad` head.

Training questions whose answer text is not where `answer_start` points are
skipped, as in the original, and counted on stderr (`--verbose_logging`
lists every id). The original's TPU flags are accepted: `--use_tpu` selects
`--strategy=tpu`; `--tpu_zone`, `--gcp_project`, `--master`,
`--num_tpu_cores` and `--iterations_per_loop` have no effect.

The fine-tuning plumbing here (release checks, strategy and model, fit to a
step count, fine-tuned release in and out) is shared with `run_ner.py`.

Example:
    bert-run-squad --vocab_file=$BERT/vocab.txt \
      --bert_config_file=$BERT/bert_config.json \
      --init_checkpoint=$BERT/bert_model.ckpt --do_train \
      --train_file=$SQUAD_DIR/train-v1.1.json --do_predict \
      --predict_file=$SQUAD_DIR/dev-v1.1.json --train_batch_size=12 \
      --learning_rate=3e-5 --num_train_epochs=2.0 --max_seq_length=384 \
      --doc_stride=128 --output_dir=/tmp/squad_base/
"""

import math
import os
import random
import shutil
import sys

if __package__ in (None, ""):  # run as `python tools/run_squad.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from keras_bert_impl.cli import FlagParser, quiet_tensorflow, run_tool  # noqa: E402

FINE_TUNED_CHECKPOINT = "model.ckpt"
_HEAD = ("cls/squad/output_weights", "cls/squad/output_bias")
_INPUTS = ("input_ids", "input_mask", "segment_ids")


def build_parser():
    parser = FlagParser(
        prog="run_squad",
        description="BERT fine-tuning and prediction for SQuAD v1.1/v2.0 (original run_squad.py flags).",
    )
    parser.add_argument("--output_dir", help="Where checkpoints, logs and predictions are written.")
    parser.add_argument("--train_file", help="SQuAD JSON for training, e.g. train-v1.1.json.")
    parser.add_argument("--predict_file", help="SQuAD JSON to predict, e.g. dev-v1.1.json.")
    parser.add_argument("--max_seq_length", type=int, default=384, help="Sequence length after WordPiece (default: %(default)s).")
    parser.add_argument("--doc_stride", type=int, default=128, help="Tokens between the starts of context windows (default: %(default)s).")
    parser.add_argument("--max_query_length", type=int, default=64, help="Questions are truncated to this many tokens (default: %(default)s).")
    parser.add_bool("do_train", False, "Fine-tune on --train_file.")
    parser.add_bool("do_predict", False, "Predict --predict_file.")
    parser.add_fine_tuning_flags()
    parser.add_argument("--predict_batch_size", type=int, default=8, help="Total batch size for predictions (default: %(default)s).")
    parser.add_argument("--n_best_size", type=int, default=20, help="Answers per question in nbest_predictions.json (default: %(default)s).")
    parser.add_argument("--max_answer_length", type=int, default=30, help="Longest answer, in tokens (default: %(default)s).")
    parser.add_bool("verbose_logging", False, "List every skipped training question.")
    parser.add_bool("version_2_with_negative", False, "SQuAD v2.0: some questions have no answer.")
    parser.add_argument("--null_score_diff_threshold", type=float, default=0.0, help="Predict no answer when null score - best non-null score exceeds this (default: %(default)s).")
    parser.add_bool("use_tpu", False, "Same as --strategy=tpu.")
    for flag in ("tpu_zone", "gcp_project", "master", "num_tpu_cores", "iterations_per_loop"):
        parser.add_argument(f"--{flag}", help="Accepted for the original's command lines; no effect.")
    return parser


def check_flags(parser, args):
    """The original's `validate_flags_or_throw`, plus values it would trip over later."""
    parser.require(args, "vocab_file", "bert_config_file", "output_dir")
    if not (args.do_train or args.do_predict):
        parser.error("at least one of --do_train or --do_predict must be true")
    if args.do_train:
        parser.require(args, "train_file")
    if args.do_predict:
        parser.require(args, "predict_file")
    for flag in ("train_batch_size", "predict_batch_size", "save_checkpoints_steps", "doc_stride",
                 "max_query_length", "n_best_size", "max_answer_length"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag} must be positive, got {getattr(args, flag)}")
    if args.max_seq_length <= args.max_query_length + 3:
        parser.error(
            f"--max_seq_length ({args.max_seq_length}) must be greater than --max_query_length ({args.max_query_length}) + 3"
        )
    if not args.num_train_epochs > 0:
        parser.error(f"--num_train_epochs must be positive, got {args.num_train_epochs}")
    if not 0.0 <= args.warmup_proportion <= 1.0:
        parser.error(f"--warmup_proportion must lie in [0, 1], got {args.warmup_proportion}")
    if args.use_tpu:
        args.strategy = "tpu"


def log(message):
    print(f"run_squad: {message}", file=sys.stderr, flush=True)


def write_atomically(path, text):
    """Writes `text` under a temporary name in the same directory, then renames it."""
    partial = f"{path}.partial-{os.getpid()}"
    try:
        with open(partial, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


def copy_atomically(source, target):
    if os.path.abspath(source) == os.path.abspath(target):
        return
    partial = f"{target}.partial-{os.getpid()}"
    try:
        shutil.copyfile(source, partial)
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


def read_release(args):
    """`(config, tokenizer)` from the flags, checked against each other."""
    from keras_bert_impl.config import BertConfig
    from keras_bert_impl.errors import ConfigError
    from keras_bert_impl.tokenization import FullTokenizer, check_special_tokens, validate_case_matches_checkpoint

    config = BertConfig.from_json_file(args.bert_config_file)
    if args.max_seq_length > config.max_position_embeddings:
        raise ConfigError(
            f"--max_seq_length {args.max_seq_length} exceeds max_position_embeddings "
            f"{config.max_position_embeddings} of {args.bert_config_file}"
        )
    validate_case_matches_checkpoint(args.do_lower_case, args.init_checkpoint)
    tokenizer = FullTokenizer(args.vocab_file, do_lower_case=args.do_lower_case)
    check_special_tokens(tokenizer.vocab, args.vocab_file)
    return config, tokenizer


def build_task_model(args, make_model, batch_flags):
    """The distribution strategy and the task model built in its scope.

    Args:
        args: The parsed flags (`strategy`, `tpu_name`, `seed`, `output_dir`).
        make_model: `() -> keras.Model`.
        batch_flags: Names of the batch-size flags in use; each must split
            over the replicas.

    Returns:
        `(model, strategy)`.
    """
    import keras

    from keras_bert_impl.training.strategy import check_batch_size, get_strategy

    strategy = get_strategy(args.strategy, args.tpu_name)
    for flag in batch_flags:
        check_batch_size(getattr(args, flag), strategy, f"--{flag}")
    os.makedirs(args.output_dir, exist_ok=True)
    keras.utils.set_random_seed(args.seed)
    with strategy.scope():
        return make_model(), strategy


def read_training_examples(args):
    """The training questions, shuffled as the original, skipped ones reported."""
    from keras_bert_impl.data.squad import read_squad_examples
    from keras_bert_impl.errors import InputFileError

    examples, skipped = read_squad_examples(args.train_file, True, args.version_2_with_negative)
    if skipped:
        shown = skipped if args.verbose_logging else skipped[:5]
        more = "" if len(shown) == len(skipped) else f", ... ({len(skipped) - len(shown)} more; --verbose_logging lists all)"
        log(
            f"{args.train_file}: skipped {len(skipped)} of {len(skipped) + len(examples)} questions whose "
            f"answer text is not at answer_start (as the original): {', '.join(map(str, shown))}{more}"
        )
    if not examples:
        raise InputFileError(f"{args.train_file}: no usable training questions")
    # The original pre-shuffles so that a small shuffle buffer suffices.
    random.Random(args.seed).shuffle(examples)
    return examples


def feature_arrays(features, is_training):
    """`(inputs, targets)`: int32 arrays [num_features, max_seq_length] of the
    model inputs, and for training `{start_logits, end_logits}` positions."""
    import numpy as np

    columns = {key: [] for key in _INPUTS}
    starts, ends = [], []
    for feature in features:
        for key in _INPUTS:
            columns[key].append(np.asarray(getattr(feature, key), np.int32))
        if is_training:
            starts.append(feature.start_position)
            ends.append(feature.end_position)
    inputs = {key: np.stack(rows) for key, rows in columns.items()}
    targets = None
    if is_training:
        targets = {"start_logits": np.asarray(starts, np.int32), "end_logits": np.asarray(ends, np.int32)}
    return inputs, targets


def training_steps(num_questions, batch_size, num_epochs, warmup_proportion):
    """The original's `(num_train_steps, num_warmup_steps)`, counted in questions."""
    num_train_steps = int(num_questions / batch_size * num_epochs)
    return num_train_steps, int(num_train_steps * warmup_proportion)


def fine_tune(model, num_questions, inputs, targets, args, strategy):
    """`model.fit` with the original optimizer, loss and step count; returns the global step."""
    import tensorflow as tf

    from keras_bert_impl.errors import InputFileError
    from keras_bert_impl.models.span_qa import span_qa_losses
    from keras_bert_impl.training.optimization import create_optimizer

    num_train_steps, num_warmup_steps = training_steps(
        num_questions, args.train_batch_size, args.num_train_epochs, args.warmup_proportion
    )
    if num_train_steps < 1:
        raise InputFileError(
            f"{args.train_file}: {num_questions} questions with --train_batch_size={args.train_batch_size} "
            f"and --num_train_epochs={args.num_train_epochs} make 0 training steps"
        )
    num_windows = len(targets["start_logits"])
    log(
        f"training on {num_questions} questions ({num_windows} windows): {num_train_steps} steps "
        f"of {args.train_batch_size} ({num_warmup_steps} warmup)"
    )
    with strategy.scope():
        loss, loss_weights = span_qa_losses()
        model.compile(
            optimizer=create_optimizer(args.learning_rate, num_train_steps, num_warmup_steps),
            loss=loss,
            loss_weights=loss_weights,
        )
    dataset = (
        tf.data.Dataset.from_tensor_slices((inputs, targets))
        .repeat()
        .shuffle(100, seed=args.seed)
        .batch(args.train_batch_size, drop_remainder=True)
        .prefetch(tf.data.AUTOTUNE)
    )
    return fit_for_steps(model, dataset, num_train_steps, num_windows, args)


def fit_for_steps(model, dataset, num_train_steps, num_examples, args):
    """`model.fit` on a repeating `dataset` until `num_train_steps` optimizer
    steps, with training checkpoints and TensorBoard summaries in
    `--output_dir`; returns the global step.

    A rerun of the same command continues from the newest `model.ckpt-<step>`
    in `--output_dir` (weights, Adam slots, step) and from the same place in
    the (seeded) data, so an interrupted fine-tuning, even by kill -9, ends
    where the uninterrupted one would.
    """
    from keras_bert_impl.training.callbacks import StopAtStep, TrainingSummaries
    from keras_bert_impl.training.checkpointing import (
        TrainingCheckpoint,
        checkpoint_steps,
        restore_training_checkpoint,
    )

    step = 0
    existing = checkpoint_steps(args.output_dir)
    if existing:
        prefix = os.path.join(args.output_dir, f"model.ckpt-{existing[-1]}")
        with model.distribute_strategy.scope():
            step = restore_training_checkpoint(model, model.optimizer, prefix)
        log(f"resuming from {prefix} (step {step} of {num_train_steps})")
    if step >= num_train_steps:
        return step
    steps_per_epoch = min(num_train_steps, max(1, num_examples // args.train_batch_size))
    model.fit(
        dataset.skip(step),  # The batches the restored steps consumed.
        initial_epoch=step // steps_per_epoch,
        epochs=math.ceil(num_train_steps / steps_per_epoch),
        steps_per_epoch=steps_per_epoch,
        verbose=2,
        callbacks=[
            StopAtStep(num_train_steps),
            TrainingCheckpoint(args.output_dir, args.save_checkpoints_steps),
            TrainingSummaries(
                args.output_dir,
                every_n_steps=max(1, min(100, args.save_checkpoints_steps, num_train_steps // 20)),
            ),
        ],
    )
    return int(model.optimizer.iterations.numpy())


def load_fine_tuned(model, args, head, task, log):
    """Weights for prediction without training; returns their global step.

    They come from `--output_dir/model.ckpt` when it exists, else from
    `--init_checkpoint`, which must hold the `head` variables.

    Args:
        model: The task model.
        args: The parsed flags (`output_dir`, `init_checkpoint`).
        head: Original names of the head's variables.
        task: What the head is for, in messages ("SQuAD").
        log: The tool's `log`.
    """
    import tensorflow as tf

    from keras_bert_impl.checkpoints.original import list_original_variables, load_original_checkpoint
    from keras_bert_impl.errors import CheckpointError

    prefix = os.path.join(args.output_dir, FINE_TUNED_CHECKPOINT)
    if not os.path.exists(prefix + ".index"):
        prefix = args.init_checkpoint
    if not prefix:
        raise CheckpointError(
            f"--init_checkpoint is not set and {args.output_dir} holds no {FINE_TUNED_CHECKPOINT}: "
            "no fine-tuned weights (add --do_train to fine-tune first)"
        )
    names = list_original_variables(prefix)
    if not all(name in names for name in head):
        raise CheckpointError(
            f"{prefix}: has no {' or '.join(head)}, so it is not fine-tuned for {task} "
            "(add --do_train to fine-tune it)"
        )
    log(f"using the weights of {prefix}")
    load_original_checkpoint(model, prefix)
    return int(tf.train.load_checkpoint(prefix).get_tensor("global_step")) if "global_step" in names else 0


def save_fine_tuned(model, args, global_step, log):
    """Writes `--output_dir/model.ckpt` with copies of the config and vocab: a release."""
    from keras_bert_impl.checkpoints.original import save_original_checkpoint

    prefix = save_original_checkpoint(
        model, os.path.join(args.output_dir, FINE_TUNED_CHECKPOINT), global_step=global_step
    )
    copy_atomically(args.bert_config_file, os.path.join(args.output_dir, "bert_config.json"))
    copy_atomically(args.vocab_file, os.path.join(args.output_dir, "vocab.txt"))
    log(f"wrote {prefix} (global_step {global_step})")


def has_gold_answers(dataset, version_2_with_negative):
    """Whether the official evaluation can run: every question has `answers`
    (for v1.1 at least one each; v2.0's unanswerable ones have none)."""
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answers = qa.get("answers")
                if not isinstance(answers, list) or not (answers or version_2_with_negative):
                    return False
                if not all(isinstance(a, dict) and isinstance(a.get("text"), str) for a in answers):
                    return False
    return True


def format_eval_results(result):
    """`key = value` lines sorted by key (as run_classifier's eval_results.txt)."""
    return "".join(f"{key} = {result[key]}\n" for key in sorted(result))


def predict(model, examples, args, tokenizer, global_step):
    """Predicts `--predict_file`, writes the JSON files and, with gold answers, the evaluation."""
    import json

    from keras_bert_impl.data.squad import (
        convert_examples_to_features,
        load_squad_json,
        postprocess_predictions,
        predictions_json,
    )
    from keras_bert_impl.data.squad_metrics import evaluate_v1, evaluate_v2

    features = list(
        convert_examples_to_features(
            examples, tokenizer, args.max_seq_length, args.doc_stride, args.max_query_length, is_training=False
        )
    )
    log(f"predicting {len(examples)} questions ({len(features)} windows)")
    logits = {"start_logits": [], "end_logits": []}
    if features:
        inputs, _ = feature_arrays(features, is_training=False)
        logits = model.predict(inputs, batch_size=args.predict_batch_size, verbose=0)
    results = zip([f.unique_id for f in features], logits["start_logits"], logits["end_logits"])
    output = postprocess_predictions(
        examples, features, results, args.n_best_size, args.max_answer_length, args.do_lower_case,
        args.version_2_with_negative, args.null_score_diff_threshold,
    )
    files = [("predictions.json", output.predictions), ("nbest_predictions.json", output.nbest)]
    if args.version_2_with_negative:
        files.append(("null_odds.json", output.null_odds))
    for name, mapping in files:
        write_atomically(os.path.join(args.output_dir, name), predictions_json(mapping))
    log(f"wrote {', '.join(name for name, _ in files)} to {args.output_dir}")

    dataset = load_squad_json(args.predict_file)
    if not has_gold_answers(dataset, args.version_2_with_negative):
        log(f"{args.predict_file} has no gold answers for every question: no eval_results.txt")
        return
    if args.version_2_with_negative:
        result = evaluate_v2(dataset, output.predictions, na_probs=output.null_odds)
    else:
        result = evaluate_v1(dataset, output.predictions)
    result["global_step"] = global_step
    text = format_eval_results(result)
    write_atomically(os.path.join(args.output_dir, "eval_results.txt"), text)
    log(f"official {'v2.0' if args.version_2_with_negative else 'v1.1'} evaluation: {json.dumps(result)}")


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    check_flags(parser, args)
    quiet_tensorflow()

    from keras_bert_impl.data.squad import convert_examples_to_features, read_squad_examples

    # Everything about the input is checked before TensorFlow starts.
    config, tokenizer = read_release(args)
    train_examples = read_training_examples(args) if args.do_train else None
    predict_examples = read_squad_examples(args.predict_file, False)[0] if args.do_predict else None
    if args.do_train:
        train_features = convert_examples_to_features(
            train_examples, tokenizer, args.max_seq_length, args.doc_stride, args.max_query_length, is_training=True
        )
        train_inputs, train_targets = feature_arrays(train_features, is_training=True)

    from keras_bert_impl.checkpoints.original import load_original_checkpoint
    from keras_bert_impl.models.span_qa import BertSpanQA

    batch_flags = [flag for flag, used in (("train_batch_size", args.do_train), ("predict_batch_size", args.do_predict)) if used]
    model, strategy = build_task_model(args, lambda: BertSpanQA(config), batch_flags)
    if args.do_train:
        if args.init_checkpoint:
            report = load_original_checkpoint(model, args.init_checkpoint, allow_fresh=_HEAD)
            log(f"{args.init_checkpoint}: {report.summary()}")
        global_step = fine_tune(model, len(train_examples), train_inputs, train_targets, args, strategy)
        save_fine_tuned(model, args, global_step, log)
    else:
        global_step = load_fine_tuned(model, args, _HEAD, "SQuAD", log)

    if args.do_predict:
        predict(model, predict_examples, args, tokenizer, global_step)


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
