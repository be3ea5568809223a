#!/usr/bin/env python
r"""Fine-tunes BERT for sentence (pair) classification, evaluates, predicts.

A drop-in for google-research/bert's `run_classifier.py`: the same flags and
defaults, the same input files (see `keras_bert_impl/data/classification_datasets.py`
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

`--multi_label` (csv/tsv/jsonl tasks) gives each text any number of labels:
named in one column, joined by `--label_delimiter` (`--label_column`,
default `labels`; a JSON list in jsonl; empty for none), or one 0/1 column
per label (`--label_columns=toxic,insult,...`). Each label gets a sigmoid and
binary cross-entropy; `eval_results.txt` holds `micro_f1`, `macro_f1`,
`micro_precision`, `micro_recall`, `exact_match` and per label
`<label>_precision/_recall/_f1/_support` at `--threshold` (0.5; without
training, what the release records) with each `<label>_threshold`, and
`test_results.tsv` each label's probability. `--tune_threshold` chooses each
label's threshold for its F1 on the dev set (0.05 to 0.95; ties nearest 0.5,
a label with no positive in dev keeps 0.5) and scores at them. The release
records the labels and thresholds (`multi_label.json`), which
`TextClassifier.from_release` and `bert-export --task=multi_label` use.

`--long_text=head_tail|windows` keeps what the original cuts off a text longer
than `--max_seq_length`: its first `--head_tokens` and last word pieces, or
windows every `--window_stride` word pieces (each trained with the text's
label; their logits pooled, `--window_pooling=mean|max`, for
`eval_results.txt` and `test_results.tsv`). The fine-tuned release records it
(`long_text.json`), so evaluation, `bert-export` and `TextClassifier.from_release`
read texts as training did.

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
    classification_dataset_options,
    define_classification_data_flags,
    define_fine_tuning_flags,
    define_long_text_flags,
    define_multi_label_data_flags,
    fine_tuning_run,
    long_text_flag_options,
    multi_label_dataset,
    parse_flags,
    quiet_tensorflow,
    require,
    require_positive,
    run_tool,
)


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
    define_classification_data_flags(fv)
    flags.DEFINE_boolean("multi_label", False, "csv/tsv/jsonl tasks: each text has any number of labels (a sigmoid per label, binary cross-entropy, micro/macro F1).", **define)
    define_multi_label_data_flags(fv, "With --multi_label")
    flags.DEFINE_float("threshold", 0.5, "With --multi_label: a label is predicted where its probability is at least this (default 0.5; without --do_train, the thresholds the release records in multi_label.json).", **define)
    flags.DEFINE_boolean("tune_threshold", False, "With --multi_label and --do_eval: choose each label's threshold for its F1 on the dev set, score at them, and write them to eval_results.txt and the fine-tuned release's multi_label.json (which bert-export uses).", **define)
    define_long_text_flags(fv, "Default: cut when training; else what the fine-tuned release records "
                               "(its long_text.json, written by a run that trained with head_tail or windows).")


def main(argv=None):
    fv = parse_flags(define_flags, argv, prog="run_classifier", description=__doc__)
    require(fv, "task_name", "data_dir")
    if not (fv.do_train or fv.do_eval or fv.do_predict):
        raise FlagError("at least one of --do_train, --do_eval or --do_predict must be true")
    check_fine_tuning_flags(fv)
    require_positive(fv, "eval_batch_size", "predict_batch_size")
    if fv.max_seq_length < 3:
        raise FlagError("--max_seq_length must be at least 3 ([CLS] a [SEP])")
    options = classification_dataset_options(fv)
    if not fv.multi_label:
        changed = [f"--{name}" for name in ("label_columns", "label_delimiter", "threshold", "tune_threshold")
                   if fv[name].present]
        if changed:
            raise FlagError(f"{changed[0]} applies with --multi_label only")
    if fv.tune_threshold and fv["threshold"].present:
        raise FlagError("--threshold and --tune_threshold both set the thresholds: give one")
    if fv.tune_threshold and not fv.do_eval:
        raise FlagError("--tune_threshold chooses the thresholds on the dev set: it needs --do_eval")
    dataset = multi_label_dataset(fv, options) if fv.multi_label else None
    if fv.multi_label and not 0.0 < fv.threshold < 1.0:
        raise FlagError(f"--threshold must lie in (0, 1), got {fv.threshold}")
    long_text = long_text_flag_options(fv)
    if long_text is not None and fv.multi_label:
        raise FlagError("--long_text applies to single-label classification and regression; --multi_label cuts "
                        "long texts (TextClassifier(multi_label=True, long_text=...) reads them in Python)")
    quiet_tensorflow()

    from keras_bert_impl.data.classification_datasets import get_dataset
    from keras_bert_impl.jobs.run_fine_tuning import run_fine_tuning
    from keras_bert_impl.tasks.classifier import ClassifierFineTuning
    from keras_bert_impl.tasks.multi_label import MultiLabelFineTuning
    from keras_bert_impl.training.fine_tuning import log_to_stderr

    run_fine_tuning(
        MultiLabelFineTuning(dataset, fv.data_dir, fv.threshold if fv["threshold"].present else None,
                             fv.tune_threshold) if fv.multi_label
        else ClassifierFineTuning(get_dataset(fv.task_name, **options), fv.data_dir, long_text),
        fine_tuning_run(fv),
        log=log_to_stderr("run_classifier"),
    )


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
