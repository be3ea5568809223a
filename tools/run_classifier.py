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
* `model.ckpt`: the fine-tuned model in the original's variable names, next
  to copies of `bert_config.json` and `vocab.txt`, so `--output_dir` is
  itself a release that `--init_checkpoint` accepts; `model.ckpt-<step>`
  every `--save_checkpoints_steps` (rerunning the same command after an
  interruption, even kill -9, continues from the newest); TensorBoard logs.

Without `--do_train`, the weights come from `--output_dir/model.ckpt` when it
exists, else from `--init_checkpoint`, which must then be a fine-tuned
classifier. `--use_tpu` selects `--strategy=tpu`; the other TPU flags have no
effect.

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

import sys

from absl import flags

from keras_bert_impl.cli import (
    FlagError,
    check_fine_tuning_flags,
    define_fine_tuning_flags,
    flag_values,
    parse_flags,
    parse_label_list,
    quiet_tensorflow,
    require,
    require_positive,
    run_tool,
)

_COLUMN_FLAGS = ("text_a_column", "text_b_column", "label_column", "labels")


def define_flags(fv):
    define = dict(flag_values=fv)
    flags.DEFINE_string("task_name", None, "cola, mnli, mrpc, xnli, sst-2, qqp, qnli, rte, wnli, sts-b, glue/<name>, csv, tsv or jsonl.", **define)
    flags.DEFINE_string("data_dir", None, "The task's data directory (the TFDS data directory for glue/<name>).", **define)
    flags.DEFINE_boolean("do_train", False, "Fine-tune on the train split.", **define)
    flags.DEFINE_boolean("do_eval", False, "Evaluate on the dev split.", **define)
    flags.DEFINE_boolean("do_predict", False, "Predict the test split.", **define)
    define_fine_tuning_flags(fv)
    flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.", **define)
    flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.", **define)
    flags.DEFINE_string("text_a_column", None, "csv/tsv/jsonl tasks: column of the first text (default: text).", **define)
    flags.DEFINE_string("text_b_column", None, "csv/tsv/jsonl tasks: column of the second text (default: none).", **define)
    flags.DEFINE_string("label_column", None, "csv/tsv/jsonl tasks: column of the label (default: label).", **define)
    flags.DEFINE_string("labels", None, "csv/tsv/jsonl tasks: comma-separated label list (default: the train file's labels, sorted).", **define)


def column_options(fv):
    """`ColumnTask` fields from the flags; those flags are refused for other tasks."""
    from keras_bert_impl.data.classifier_data import COLUMN_FORMATS

    options = {flag: fv[flag].value for flag in _COLUMN_FLAGS if fv[flag].value is not None}
    if options and fv.task_name.strip().lower() not in COLUMN_FORMATS:
        raise FlagError(f"--{next(iter(options))} applies to --task_name csv, tsv or jsonl only")
    if "labels" in options:
        options["labels"] = tuple(parse_label_list(options["labels"]))
    return options


def main(argv=None):
    fv = parse_flags(define_flags, argv, prog="run_classifier", description=__doc__)
    require(fv, "task_name", "data_dir")
    if not (fv.do_train or fv.do_eval or fv.do_predict):
        raise FlagError("at least one of --do_train, --do_eval or --do_predict must be true")
    check_fine_tuning_flags(fv)
    require_positive(fv, "eval_batch_size", "predict_batch_size")
    if fv.max_seq_length < 3:
        raise FlagError("--max_seq_length must be at least 3 ([CLS] a [SEP])")
    options = column_options(fv)
    quiet_tensorflow()

    from keras_bert_impl.data.classifier_data import get_task
    from keras_bert_impl.tasks.classifier import run_classifier
    from keras_bert_impl.training.fine_tuning import FineTuningSettings, log_to_stderr

    run_classifier(
        get_task(fv.task_name, **options),
        settings=FineTuningSettings(**flag_values(fv, FineTuningSettings.field_names())),
        log=log_to_stderr("run_classifier"),
        **flag_values(fv, ("data_dir", "output_dir", "bert_config_file", "vocab_file", "init_checkpoint",
                           "do_lower_case", "max_seq_length", "do_train", "do_eval", "do_predict",
                           "eval_batch_size", "predict_batch_size")),
    )


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
