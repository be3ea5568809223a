#!/usr/bin/env python
r"""Fine-tunes BERT for sentence (pair) classification, evaluates, predicts.

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
  interruption, even kill -9, continues from the newest; a rerun with other
  training settings is refused unless `--allow_changed_settings`);
  `training_settings.json`, what they were; TensorBoard logs.

Without `--do_train`, the weights come from `--output_dir/model.ckpt` when it
exists, else from `--init_checkpoint`, which must then be a fine-tuned
classifier. `--use_tpu` selects `--strategy=tpu`; the other TPU flags have no
effect.

Besides the original's tasks (cola, mnli, mrpc, xnli) there are sst-2, qqp,
qnli, rte, wnli, sts-b (GLUE TSV files), and `csv`/`tsv`/`jsonl`: `train`,
`dev` and `test` files with the columns named by `--text_a_column`,
`--text_b_column` and `--label_column`, the labels given by `--labels` or
inferred from train.

TensorFlow Datasets are read only when already prepared in `--data_dir`
(e.g. `tfds build glue/mrpc --data_dir=$TFDS_DIR`), never downloaded:
`--task_name=glue/<name>` as the GLUE task of that name, or any TFDS text
classification dataset given its features, e.g. `--task_name=imdb_reviews
--tfds_text_feature=text` (`--tfds_text_b_feature` for pairs,
`--tfds_label_feature`, default `label`): its labels are the label's
`ClassLabel` names, else `--labels` or the train split's; a float label is a
regression. `--train_split`, `--eval_split` and `--predict_split` pick the
TFDS splits (default train, validation, test; slices such as `train[:90%]`
work). TFDS keeps no file order: test_results.tsv follows the stored order,
which `tfds.load` gives too.

Example:
    bert-run-classifier --task_name=MRPC --do_train --do_eval \
      --data_dir=$GLUE_DIR/MRPC --vocab_file=$BERT/vocab.txt \
      --bert_config_file=$BERT/bert_config.json \
      --init_checkpoint=$BERT/bert_model.ckpt --max_seq_length=128 \
      --train_batch_size=32 --learning_rate=2e-5 --num_train_epochs=3.0 \
      --output_dir=/tmp/mrpc_output/

    bert-run-classifier --task_name=imdb_reviews/plain_text \
      --tfds_text_feature=text --eval_split=test --do_train --do_eval \
      --data_dir=$TFDS_DIR ...   (the release flags as above)
"""

import sys

from absl import flags

from keras_bert_impl.cli import (
    FlagError,
    check_fine_tuning_flags,
    define_fine_tuning_flags,
    fine_tuning_run,
    parse_flags,
    parse_label_list,
    quiet_tensorflow,
    require,
    require_positive,
    run_tool,
)

_COLUMN_FLAGS = ("text_a_column", "text_b_column", "label_column", "labels")
# TFDS flag -> get_task option.
_TFDS_FEATURE_FLAGS = {
    "tfds_text_feature": "text_a_feature",
    "tfds_text_b_feature": "text_b_feature",
    "tfds_label_feature": "label_feature",
}
_SPLIT_FLAGS = {"train_split": "train", "eval_split": "dev", "predict_split": "test"}


def define_flags(fv):
    define = dict(flag_values=fv)
    flags.DEFINE_string("task_name", None, "cola, mnli, mrpc, xnli, sst-2, qqp, qnli, rte, wnli, sts-b, glue/<name>, csv, tsv or jsonl; or a TFDS dataset name with --tfds_text_feature.", **define)
    flags.DEFINE_string("data_dir", None, "The task's data directory (for TFDS tasks the TFDS data directory where the dataset is prepared; nothing is downloaded).", **define)
    flags.DEFINE_boolean("do_train", False, "Fine-tune on the train split.", **define)
    flags.DEFINE_boolean("do_eval", False, "Evaluate on the dev split.", **define)
    flags.DEFINE_boolean("do_predict", False, "Predict the test split.", **define)
    define_fine_tuning_flags(fv)
    flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.", **define)
    flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.", **define)
    flags.DEFINE_string("text_a_column", None, "csv/tsv/jsonl tasks: column of the first text (default: text).", **define)
    flags.DEFINE_string("text_b_column", None, "csv/tsv/jsonl tasks: column of the second text (default: none).", **define)
    flags.DEFINE_string("label_column", None, "csv/tsv/jsonl tasks: column of the label (default: label).", **define)
    flags.DEFINE_string("labels", None, "csv/tsv/jsonl and --tfds_text_feature tasks: comma-separated label list (default: the ClassLabel's names for TFDS, else the train split's labels, sorted).", **define)
    flags.DEFINE_string("tfds_text_feature", None, "Makes --task_name a TFDS text classification dataset: the feature of its (first) text.", **define)
    flags.DEFINE_string("tfds_text_b_feature", None, "With --tfds_text_feature: the feature of the second text of pairs (default: none).", **define)
    flags.DEFINE_string("tfds_label_feature", None, "With --tfds_text_feature: the label's feature (default: label); a ClassLabel gives the label list, a float feature a regression.", **define)
    flags.DEFINE_string("train_split", None, "TFDS tasks: the split (or expression, e.g. train[:90%]) trained on (default: train).", **define)
    flags.DEFINE_string("eval_split", None, "TFDS tasks: the split evaluated (default: validation; glue/mnli: validation_matched).", **define)
    flags.DEFINE_string("predict_split", None, "TFDS tasks: the split predicted (default: test; glue/mnli: test_matched).", **define)


def task_options(fv):
    """`get_task` options from the flags; flags that do not fit the task are refused."""
    from keras_bert_impl.data.classifier_data import COLUMN_FORMATS, TFDS_TASKS

    name = fv.task_name.strip().lower()

    def given(names):
        return [flag for flag in names if fv[flag].value is not None]

    tfds_text = fv.tfds_text_feature is not None
    if given(_TFDS_FEATURE_FLAGS) and not tfds_text:
        raise FlagError(f"--{given(_TFDS_FEATURE_FLAGS)[0]} needs --tfds_text_feature")
    if tfds_text and name in COLUMN_FORMATS:
        raise FlagError(f"--tfds_text_feature names a TFDS feature; --task_name {fv.task_name} reads files")
    # --labels also fixes the label list of a TFDS text task.
    column_flags = given(_COLUMN_FLAGS)
    misplaced = [flag for flag in column_flags if not (tfds_text and flag == "labels")]
    if misplaced and name not in COLUMN_FORMATS:
        raise FlagError(f"--{misplaced[0]} applies to --task_name csv, tsv or jsonl only")
    if given(_SPLIT_FLAGS) and not (tfds_text or name in TFDS_TASKS):
        raise FlagError(f"--{given(_SPLIT_FLAGS)[0]} applies to TFDS tasks only (glue/<name> or --tfds_text_feature)")
    options = {flag: fv[flag].value for flag in column_flags}
    options.update({option: fv[flag].value for flag, option in _TFDS_FEATURE_FLAGS.items() if fv[flag].value is not None})
    if "labels" in options:
        options["labels"] = tuple(parse_label_list(options["labels"]))
    splits = {split: fv[flag].value for flag, split in _SPLIT_FLAGS.items() if fv[flag].value is not None}
    if splits:
        options["splits"] = splits
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
    options = task_options(fv)
    quiet_tensorflow()

    from keras_bert_impl.data.classifier_data import get_task
    from keras_bert_impl.jobs.run_fine_tuning import run_fine_tuning
    from keras_bert_impl.tasks.classifier import ClassifierFineTuning
    from keras_bert_impl.training.fine_tuning import log_to_stderr

    run_fine_tuning(
        ClassifierFineTuning(get_task(fv.task_name, **options), fv.data_dir),
        fine_tuning_run(fv),
        log=log_to_stderr("run_classifier"),
    )


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
