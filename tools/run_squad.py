#!/usr/bin/env python
r"""Fine-tunes BERT for SQuAD v1.1 / v2.0 span QA and writes its predictions.

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
  `global_step`, and copies of `bert_config.json` and `vocab.txt` (a
  variant's `vocab.json` + `merges.txt` or `spiece.model`);
  `model.ckpt-<step>` every `--save_checkpoints_steps`; TensorBoard logs.

A variant release (`--model_dir=R` from `bert-convert-hf`: RoBERTa, ALBERT,
DistilBERT) is fine-tuned the same way: its tokenizer cuts each context word
as it cuts it in running text, the windows are laid out with its special
tokens (RoBERTa: `<s> question </s></s> context </s>`, so `--max_seq_length`
must exceed `--max_query_length` + 4), and answers are the context's
characters between the first and last token's offsets, as Hugging Face's
`run_qa` recovers them.

Training is Keras `model.fit` with the original optimizer for
`int(questions / batch * epochs)` steps over the windows of the questions,
shuffled as the original (`random.Random(12345)` over the questions, then a
100-window buffer). Without `--do_train`, the weights come from
`--output_dir/model.ckpt` when it exists, else from `--init_checkpoint`,
which must then hold the `cls/squad` head.

The questions can come from TensorFlow Datasets instead of the JSON files:
`--tfds_name=squad/v1.1` (or `squad/v2.0` with `--version_2_with_negative`,
or any dataset with SQuAD's features) read from `--data_dir`, where it must
already be prepared (e.g. `tfds build squad/v1.1 --data_dir=$TFDS_DIR`;
nothing is downloaded), the splits `--train_split` (train) and
`--predict_split` (validation). They become the same examples as the JSON
files' and the official evaluation runs on them; TFDS keeps no file order,
so the questions come (and are shuffled for training) in its stored order.

Training questions whose answer text is not where `answer_start` points are
skipped, as in the original, and counted on stderr (`--verbose_logging`
lists every id). The original's TPU flags are accepted: `--use_tpu` selects
`--strategy=tpu`; `--tpu_zone`, `--gcp_project`, `--master`,
`--num_tpu_cores` and `--iterations_per_loop` have no effect.

Example:
    bert-run-squad --vocab_file=$BERT/vocab.txt \
      --bert_config_file=$BERT/bert_config.json \
      --init_checkpoint=$BERT/bert_model.ckpt --do_train \
      --train_file=$SQUAD_DIR/train-v1.1.json --do_predict \
      --predict_file=$SQUAD_DIR/dev-v1.1.json --train_batch_size=12 \
      --learning_rate=3e-5 --num_train_epochs=2.0 --max_seq_length=384 \
      --doc_stride=128 --output_dir=/tmp/squad_base/

    bert-run-squad --tfds_name=squad/v1.1 --data_dir=$TFDS_DIR \
      --do_train --do_predict ...   (the other flags as above)
"""

import sys

from absl import flags

from keras_bert_impl.cli import (
    FlagError,
    check_fine_tuning_flags,
    define_fine_tuning_flags,
    fine_tuning_run,
    flag_values,
    parse_flags,
    quiet_tensorflow,
    require,
    require_positive,
    run_tool,
)


def define_flags(fv):
    define = dict(flag_values=fv)
    flags.DEFINE_string("train_file", None, "SQuAD json for training. E.g., train-v1.1.json", **define)
    flags.DEFINE_string("predict_file", None, "SQuAD json for predictions. E.g., dev-v1.1.json or test-v1.1.json", **define)
    flags.DEFINE_string("tfds_name", None, "Instead of --train_file/--predict_file: a TFDS dataset with SQuAD's features, e.g. squad/v1.1 or squad/v2.0 (with --version_2_with_negative), prepared in --data_dir.", **define)
    flags.DEFINE_string("data_dir", None, "With --tfds_name: the TFDS data directory where the dataset is prepared (nothing is downloaded).", **define)
    flags.DEFINE_string("train_split", "train", "With --tfds_name: the split (or expression, e.g. train[:10%]) trained on.", **define)
    flags.DEFINE_string("predict_split", "validation", "With --tfds_name: the split predicted (and evaluated).", **define)
    define_fine_tuning_flags(fv, default_max_seq_length=384)
    flags.DEFINE_integer("doc_stride", 128, "When splitting up a long document into chunks, how much stride to take between chunks.", **define)
    flags.DEFINE_integer("max_query_length", 64, "The maximum number of tokens for the question; longer ones are truncated.", **define)
    flags.DEFINE_boolean("do_train", False, "Whether to run training.", **define)
    flags.DEFINE_boolean("do_predict", False, "Whether to run eval on the dev set.", **define)
    flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predictions.", **define)
    flags.DEFINE_integer("n_best_size", 20, "Answers per question in nbest_predictions.json.", **define)
    flags.DEFINE_integer("max_answer_length", 30, "The maximum length of an answer that can be generated.", **define)
    flags.DEFINE_boolean("verbose_logging", False, "List every skipped training question.", **define)
    flags.DEFINE_boolean("version_2_with_negative", False, "SQuAD v2.0: some questions have no answer.", **define)
    flags.DEFINE_float("null_score_diff_threshold", 0.0, "If null_score - best_non_null is greater than the threshold predict null.", **define)


def main(argv=None):
    """The original's `validate_flags_or_throw`, then one call into the package."""
    fv = parse_flags(define_flags, argv, prog="run_squad", description=__doc__)
    check_fine_tuning_flags(fv)
    if not (fv.do_train or fv.do_predict):
        raise FlagError("at least one of --do_train or --do_predict must be true")
    if fv.tfds_name:
        require(fv, "data_dir")
        for flag in ("train_file", "predict_file"):
            if fv[flag].value:
                raise FlagError(f"--{flag} and --tfds_name both name the questions; give one")
    else:
        for flag in ("data_dir", "train_split", "predict_split"):
            if fv[flag].present:
                raise FlagError(f"--{flag} applies with --tfds_name only")
        if fv.do_train:
            require(fv, "train_file")
        if fv.do_predict:
            require(fv, "predict_file")
    require_positive(fv, "predict_batch_size", "doc_stride", "max_query_length", "n_best_size", "max_answer_length")
    if fv.max_seq_length <= fv.max_query_length + 3:
        raise FlagError(
            f"--max_seq_length ({fv.max_seq_length}) must be greater than --max_query_length ({fv.max_query_length}) + 3"
        )
    quiet_tensorflow()

    from keras_bert_impl.jobs.run_fine_tuning import run_fine_tuning
    from keras_bert_impl.tasks.span_qa import SquadFineTuning
    from keras_bert_impl.training.fine_tuning import log_to_stderr

    run_fine_tuning(
        SquadFineTuning(**flag_values(fv, (
            "train_file", "predict_file", "doc_stride", "max_query_length", "n_best_size", "max_answer_length",
            "verbose_logging", "version_2_with_negative", "null_score_diff_threshold", "tfds_name", "data_dir",
            "train_split", "predict_split",
        ))),
        fine_tuning_run(fv),
        log=log_to_stderr("run_squad"),
    )


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
