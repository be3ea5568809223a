#!/usr/bin/env python
r"""Fine-tunes BERT for multiple choice (SWAG), evaluates, predicts.

Each question is a context and its choices; every (context, choice) pair is
encoded as a sentence pair (`[CLS] context [SEP] choice [SEP]`), its pooled
output scored by one unit (`output_weights` [1, H], `output_bias`), and the
scores softmaxed over the question's choices, as the BERT paper's SWAG
experiment and Hugging Face's `BertForMultipleChoice`.

Input: SWAG's CSV files as released (`train.csv`, `val.csv`, `test.csv` in
`--data_dir`, or `--train_file`, `--eval_file`, `--predict_file`): the
context is `sent1`, choice i is `sent2 + " " + ending<i>`, `label` the right
choice's index. Any CSV, TSV or JSON-lines file with named columns works:
`--context_column`, `--choice_columns` (comma-separated, one per choice,
any number) or `--choices_column` (a JSON list of choices), an optional
`--choice_prefix_column` (SWAG's `sent2`; "" for none), `--label_column`.
A row with a missing choice, or a label that is not a choice's index, is
one error naming `file:line` and the field.

Outputs in `--output_dir`:

* `eval_results.txt`: `eval_accuracy`, `eval_loss`, `global_step`.
* `test_results.tsv`: one line per test question, its choices'
  probabilities separated by tabs.
* `model.ckpt` and the release files after `--do_train`, as
  bert-run-classifier writes them (`model.ckpt-<step>` every
  `--save_checkpoints_steps`; a rerun resumes).

Example:
    bert-run-multiple-choice --do_train --do_eval --data_dir=$SWAG_DIR \
      --model_dir=$BERT --max_seq_length=80 --train_batch_size=16 \
      --learning_rate=2e-5 --num_train_epochs=3.0 --output_dir=/tmp/swag/
"""

import sys

from absl import flags

from keras_bert_impl.cli import (
    FlagError,
    check_fine_tuning_flags,
    choice_columns,
    define_choice_column_flags,
    define_fine_tuning_flags,
    fine_tuning_run,
    parse_flags,
    quiet_tensorflow,
    require_positive,
    run_tool,
)


def define_flags(fv):
    define = dict(flag_values=fv)
    flags.DEFINE_string("data_dir", None, "Directory of train.csv, val.csv (or dev.*) and test.csv (.tsv, .jsonl).", **define)
    flags.DEFINE_string("train_file", None, "The training file (default: <data_dir>/train.csv).", **define)
    flags.DEFINE_string("eval_file", None, "The evaluation file (default: <data_dir>/val.csv).", **define)
    flags.DEFINE_string("predict_file", None, "The file to predict (default: <data_dir>/test.csv).", **define)
    flags.DEFINE_boolean("do_train", False, "Fine-tune on the train file.", **define)
    flags.DEFINE_boolean("do_eval", False, "Evaluate on the eval file.", **define)
    flags.DEFINE_boolean("do_predict", False, "Predict the predict file.", **define)
    define_fine_tuning_flags(fv)
    flags.DEFINE_integer("eval_batch_size", 8, "Questions per eval batch.", **define)
    flags.DEFINE_integer("predict_batch_size", 8, "Questions per predict batch.", **define)
    define_choice_column_flags(fv)


def main(argv=None):
    fv = parse_flags(define_flags, argv, prog="run_multiple_choice", description=__doc__)
    if not (fv.do_train or fv.do_eval or fv.do_predict):
        raise FlagError("at least one of --do_train, --do_eval or --do_predict must be true")
    for split_flag, wanted in (("train_file", fv.do_train), ("eval_file", fv.do_eval),
                               ("predict_file", fv.do_predict)):
        if wanted and not (fv[split_flag].value or fv.data_dir):
            raise FlagError(f"--{split_flag} or --data_dir is required")
    check_fine_tuning_flags(fv)
    require_positive(fv, "eval_batch_size", "predict_batch_size")
    if fv.max_seq_length < 5:
        raise FlagError("--max_seq_length must be at least 5 ([CLS] a [SEP] b [SEP])")
    columns = choice_columns(fv)
    quiet_tensorflow()

    from keras_bert_impl.jobs.run_fine_tuning import run_fine_tuning
    from keras_bert_impl.tasks.multiple_choice import MultipleChoiceFineTuning
    from keras_bert_impl.training.fine_tuning import log_to_stderr

    files = {"train": fv.train_file, "dev": fv.eval_file, "test": fv.predict_file}
    run_fine_tuning(
        MultipleChoiceFineTuning(fv.data_dir, {split: path for split, path in files.items() if path}, columns),
        fine_tuning_run(fv),
        log=log_to_stderr("run_multiple_choice"),
    )


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
