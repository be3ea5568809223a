#!/usr/bin/env python
"""Fine-tunes BERT for sentence (pair) classification, evaluates, predicts.

A drop-in for google-research/bert's `run_classifier.py`: the same flags and
defaults, the same input files (see `keras_bert_impl/data/classifier_data.py`
for every task's layout) and the same outputs in `--output_dir`:

* `eval_results.txt`: `key = value` lines sorted by key: `eval_accuracy`,
  `eval_loss`, `global_step`, `loss`, plus `f1` (MRPC, QQP), `mcc` (CoLA),
  `pearson`/`spearman` (STS-B; a regression, so no accuracy).
* `test_results.tsv`: one line per test example, the class probabilities
  separated by tabs (the predicted score for STS-B).
* `model.ckpt`: the fine-tuned model in the original's variable names (with
  `output_weights`/`output_bias` and `global_step`), next to copies of
  `bert_config.json` and `vocab.txt`, so `--output_dir` is itself a release
  that `--init_checkpoint` accepts; `model.ckpt-<step>` every
  `--save_checkpoints_steps` (with Adam slots, the last 5 kept); TensorBoard
  logs.

Training is Keras `model.fit` with the original optimizer (AdamW, warmup then
linear decay, clipping at 1.0) for `int(examples / batch * epochs)` steps.
Rerunning the same command after an interruption (even kill -9) continues
from the newest `model.ckpt-<step>` in `--output_dir`, as the original's
Estimator does, at the same place in the seeded data.
Without `--do_train`, the weights come from `--output_dir/model.ckpt` when it
exists (as the original's Estimator restores its model_dir), else from
`--init_checkpoint`, which must then be a fine-tuned classifier.

The release checks, strategy and model set-up, and the fine-tuned release
in and out are the plumbing `run_squad.py` shares with `run_ner.py` and this
tool.

The original's TPU flags are accepted: `--use_tpu` selects
`--strategy=tpu`; `--tpu_zone`, `--gcp_project`, `--master`,
`--num_tpu_cores` and `--iterations_per_loop` have no effect.

Besides the original's tasks (cola, mnli, mrpc, xnli) there are sst-2, qqp,
qnli, rte, wnli, sts-b (GLUE TSV files), `glue/<name>` (TFDS, prepared in
`--data_dir`, never downloaded), and `csv`/`tsv`/`jsonl`: `train`, `dev` and
`test` files with the columns named by `--text_a_column`, `--text_b_column`
and `--label_column`, the labels given by `--labels` or inferred from train.

Example:
    bert-run-classifier --task_name=MRPC --do_train --do_eval \
      --data_dir=$GLUE_DIR/MRPC --vocab_file=$BERT/vocab.txt \
      --bert_config_file=$BERT/bert_config.json \
      --init_checkpoint=$BERT/bert_model.ckpt --max_seq_length=128 \
      --train_batch_size=32 --learning_rate=2e-5 --num_train_epochs=3.0 \
      --output_dir=/tmp/mrpc_output/
"""

import os
import sys

if __package__ in (None, ""):  # run as `python tools/run_classifier.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from tools import run_squad as fine_tuning  # noqa: E402
else:  # the shared fine-tuning plumbing lives in the sibling run_squad
    from . import run_squad as fine_tuning

from keras_bert_impl.cli import FlagParser, quiet_tensorflow, run_tool  # noqa: E402

_HEAD = ("output_weights", "output_bias")
_COLUMN_FLAGS = ("text_a_column", "text_b_column", "label_column", "labels")


def build_parser():
    parser = FlagParser(
        prog="run_classifier",
        description="BERT fine-tuning for classification (original run_classifier.py flags).",
    )
    parser.add_argument("--task_name", help="cola, mnli, mrpc, xnli, sst-2, qqp, qnli, rte, wnli, sts-b, glue/<name>, csv, tsv or jsonl.")
    parser.add_argument("--data_dir", help="The task's data directory (the TFDS data directory for glue/<name>).")
    parser.add_argument("--output_dir", help="Where checkpoints, logs and results are written.")
    parser.add_argument("--max_seq_length", type=int, default=128, help="Padded sequence length after WordPiece (default: %(default)s).")
    parser.add_bool("do_train", False, "Fine-tune on the train split.")
    parser.add_bool("do_eval", False, "Evaluate on the dev split.")
    parser.add_bool("do_predict", False, "Predict the test split.")
    parser.add_fine_tuning_flags()
    parser.add_argument("--eval_batch_size", type=int, default=8, help="Total batch size for eval (default: %(default)s).")
    parser.add_argument("--predict_batch_size", type=int, default=8, help="Total batch size for predict (default: %(default)s).")
    parser.add_bool("use_tpu", False, "Same as --strategy=tpu.")
    for flag in ("tpu_zone", "gcp_project", "master", "num_tpu_cores", "iterations_per_loop"):
        parser.add_argument(f"--{flag}", help="Accepted for the original's command lines; no effect.")
    parser.add_argument("--text_a_column", help="csv/tsv/jsonl tasks: column of the first text (default: text).")
    parser.add_argument("--text_b_column", help="csv/tsv/jsonl tasks: column of the second text (default: none).")
    parser.add_argument("--label_column", help="csv/tsv/jsonl tasks: column of the label (default: label).")
    parser.add_argument("--labels", help="csv/tsv/jsonl tasks: comma-separated label list (default: the train file's labels, sorted).")
    return parser


def check_flags(parser, args):
    """One-line errors for flag values the original would only trip over later."""
    parser.require(args, "task_name", "data_dir", "vocab_file", "bert_config_file", "output_dir")
    if not (args.do_train or args.do_eval or args.do_predict):
        parser.error("at least one of --do_train, --do_eval or --do_predict must be true")
    for flag in ("train_batch_size", "eval_batch_size", "predict_batch_size", "save_checkpoints_steps"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag} must be positive, got {getattr(args, flag)}")
    if args.max_seq_length < 3:
        parser.error("--max_seq_length must be at least 3 ([CLS] a [SEP])")
    if not args.num_train_epochs > 0:
        parser.error(f"--num_train_epochs must be positive, got {args.num_train_epochs}")
    if not 0.0 <= args.warmup_proportion <= 1.0:
        parser.error(f"--warmup_proportion must lie in [0, 1], got {args.warmup_proportion}")
    if args.use_tpu:
        args.strategy = "tpu"


def column_options(parser, args):
    """`ColumnTask` fields from the flags; those flags are refused for other tasks."""
    from keras_bert_impl.data.classifier_data import COLUMN_FORMATS

    options = {flag: getattr(args, flag) for flag in _COLUMN_FLAGS if getattr(args, flag) is not None}
    if options and args.task_name.strip().lower() not in COLUMN_FORMATS:
        parser.error(f"--{next(iter(options))} applies to --task_name csv, tsv or jsonl only")
    if "labels" in options:
        labels = tuple(label.strip() for label in options["labels"].split(","))
        if len(labels) < 2 or len(set(labels)) != len(labels) or not all(labels):
            parser.error(f"--labels must list two or more distinct labels, got {args.labels!r}")
        options["labels"] = labels
    return options


def read_task_data(task, data_dir, args):
    """`(task, {split: examples})` for the splits the run needs.

    A column task without `--labels` gets its label list from the train file,
    which is then read even for an eval/predict-only run.
    """
    from keras_bert_impl.data.classifier_data import read_examples, with_labels
    from keras_bert_impl.errors import InputFileError

    data = {}
    if args.do_train or (task.labels is None and not task.is_regression):
        data["train"] = read_examples(task, data_dir, "train")
        task = with_labels(task, data["train"])
    for split, wanted in (("dev", args.do_eval), ("test", args.do_predict)):
        if wanted:
            data[split] = read_examples(task, data_dir, split)
    for split, examples in data.items():
        if not examples:
            raise InputFileError(f"{data_dir}: the {split} split of task {task.name} has no examples")
    return task, data


def encode(examples, tokenizer, max_seq_length):
    """`{input_ids, input_mask, segment_ids}` int32 arrays [num_examples, max_seq_length]."""
    import numpy as np

    from keras_bert_impl.data.text_pairs import convert_example_to_features

    features = [convert_example_to_features(e, tokenizer, max_seq_length) for e in examples]
    return {
        key: np.array([getattr(f, key) for f in features], np.int32).reshape(len(features), max_seq_length)
        for key in ("input_ids", "input_mask", "segment_ids")
    }


def evaluation_results(task, labels, logits, batch_size, global_step):
    """The original's eval metrics, from the dev logits (pure NumPy).

    Args:
        task: The task (regression or not, extra metrics).
        labels: Class ids [n], or regression targets [n].
        logits: Model outputs [n, num_labels] ([n, 1] for regression).
        batch_size: `--eval_batch_size`; `loss` is the mean of per-batch mean
            losses (the Estimator's `loss`), `eval_loss` the per-example mean.
        global_step: Training steps of the evaluated weights.

    Returns:
        `{name: value}`.
    """
    import numpy as np

    from keras_bert_impl.data.classifier_data import accuracy, task_metrics

    logits = np.asarray(logits, np.float64)
    if task.is_regression:
        predictions = logits[:, 0]
        per_example_loss = (predictions - labels) ** 2
    else:
        shifted = logits - logits.max(axis=-1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
        per_example_loss = -log_probs[np.arange(len(labels)), labels]
        predictions = logits.argmax(axis=-1)
    batch_losses = [per_example_loss[i : i + batch_size].mean() for i in range(0, len(labels), batch_size)]
    result = {
        "eval_loss": float(per_example_loss.mean()),
        "global_step": int(global_step),
        "loss": float(np.mean(batch_losses)),
    }
    if not task.is_regression:
        result["eval_accuracy"] = accuracy(labels, predictions)
    result.update(task_metrics(task, labels, predictions))
    return result


def format_eval_results(result):
    """`key = value` lines sorted by key; floats printed as the original's float32."""
    import numpy as np

    lines = []
    for key in sorted(result):
        value = result[key]
        lines.append(f"{key} = {value if isinstance(value, int) else str(np.float32(value))}\n")
    return "".join(lines)


def format_test_results(task, logits):
    """One line per example: tab-separated class probabilities (the score for regression)."""
    import numpy as np

    logits = np.asarray(logits, np.float64)
    if task.is_regression:
        return "".join(str(np.float32(value)) + "\n" for value in logits[:, 0])
    exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probabilities = (exp / exp.sum(axis=-1, keepdims=True)).astype(np.float32)
    return "".join("\t".join(str(p) for p in row) + "\n" for row in probabilities)


def log(message):
    print(f"run_classifier: {message}", file=sys.stderr, flush=True)


def fine_tune(model, task, features, labels, args, strategy):
    """`model.fit` with the original optimizer and step count; returns the global step."""
    import keras
    import tensorflow as tf

    from keras_bert_impl.errors import InputFileError
    from keras_bert_impl.training.optimization import create_optimizer

    num_examples = len(labels)
    num_train_steps, num_warmup_steps = fine_tuning.training_steps(
        num_examples, args.train_batch_size, args.num_train_epochs, args.warmup_proportion
    )
    if num_train_steps < 1:
        raise InputFileError(
            f"{args.data_dir}: {num_examples} training examples with --train_batch_size="
            f"{args.train_batch_size} and --num_train_epochs={args.num_train_epochs} make 0 training steps"
        )
    log(f"training on {num_examples} examples: {num_train_steps} steps of {args.train_batch_size} "
        f"({num_warmup_steps} warmup)")
    with strategy.scope():
        if task.is_regression:
            loss, metrics = keras.losses.MeanSquaredError(), []
        else:
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            metrics = [keras.metrics.SparseCategoricalAccuracy("accuracy")]
        model.compile(
            optimizer=create_optimizer(args.learning_rate, num_train_steps, num_warmup_steps),
            loss=loss,
            metrics=metrics,
        )
    targets = labels.reshape(-1, 1) if task.is_regression else labels
    # As the original: shuffled, repeated, batches of exactly train_batch_size,
    # stopped at num_train_steps (with a whole-set shuffle buffer, not 100).
    dataset = (
        tf.data.Dataset.from_tensor_slices((features, targets))
        .shuffle(num_examples, seed=args.seed, reshuffle_each_iteration=True)
        .repeat()
        .batch(args.train_batch_size, drop_remainder=True)
        .prefetch(tf.data.AUTOTUNE)
    )
    return fine_tuning.fit_for_steps(model, dataset, num_train_steps, num_examples, args)


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    check_flags(parser, args)
    options = column_options(parser, args)
    quiet_tensorflow()

    from keras_bert_impl.data.classifier_data import get_task, label_ids

    # Everything about the input is checked before TensorFlow starts.
    task = get_task(args.task_name, **options)
    config, tokenizer = fine_tuning.read_release(args)
    task, data = read_task_data(task, args.data_dir, args)

    from keras_bert_impl.checkpoints.original import load_original_checkpoint
    from keras_bert_impl.models.classifier import BertClassifier

    batch_flags = [
        flag for flag, used in (("train_batch_size", args.do_train), ("eval_batch_size", args.do_eval),
                                ("predict_batch_size", args.do_predict)) if used
    ]
    num_labels = 1 if task.is_regression else len(task.labels)
    model, strategy = fine_tuning.build_task_model(args, lambda: BertClassifier(config, num_labels), batch_flags)
    if args.do_train:
        if args.init_checkpoint:
            report = load_original_checkpoint(model, args.init_checkpoint, allow_fresh=_HEAD)
            log(f"{args.init_checkpoint}: {report.summary()}")
        features = encode(data["train"], tokenizer, args.max_seq_length)
        global_step = fine_tune(model, task, features, label_ids(task, data["train"]), args, strategy)
        fine_tuning.save_fine_tuned(model, args, global_step, log)
    else:
        global_step = fine_tuning.load_fine_tuned(model, args, _HEAD, "classification", log)

    if args.do_eval:
        examples = data["dev"]
        inputs = encode(examples, tokenizer, args.max_seq_length)
        logits = model.predict(inputs, batch_size=args.eval_batch_size, verbose=0)
        result = evaluation_results(task, label_ids(task, examples), logits, args.eval_batch_size, global_step)
        text = format_eval_results(result)
        fine_tuning.write_atomically(os.path.join(args.output_dir, "eval_results.txt"), text)
        log(f"eval on {len(examples)} examples:\n{text.rstrip()}")
    if args.do_predict:
        examples = data["test"]
        inputs = encode(examples, tokenizer, args.max_seq_length)
        logits = model.predict(inputs, batch_size=args.predict_batch_size, verbose=0)
        path = os.path.join(args.output_dir, "test_results.tsv")
        fine_tuning.write_atomically(path, format_test_results(task, logits))
        log(f"wrote predictions for {len(examples)} examples to {path}")


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
