#!/usr/bin/env python
r"""Fine-tunes BERT for token classification (NER) on CoNLL-2003-format files.

Files hold one word per line with its columns (`EU NNP B-NP B-ORG`), the
label last, sentences separated by blank lines, `-DOCSTART-` lines between
documents (see `keras_bert_impl/data/conll.py`). A word's label is trained
and predicted on its first word piece; the other pieces are ignored by the
loss (mean cross-entropy over labelled pieces). Sentences longer than
`--max_seq_length` are split into windows at word boundaries, so every word
is predicted.

Outputs in `--output_dir`:

* `eval_results.txt`: entity-level (conlleval/seqeval) `precision`,
  `recall`, `f1`, per-type `<TYPE>_precision/_recall/_f1/_support`, word
  `accuracy`, `eval_loss`, `global_step`, as `key = value` lines.
* `eval_predictions.txt`, `test_predictions.txt`: every word line of
  `--eval_file` / `--predict_file` with the predicted label appended
  (conlleval's input when the file has gold labels).
* `model.ckpt`: after `--do_train`, the model in original-style names (the
  BERT encoder, `output_weights` [num_labels, H], `output_bias`), with
  `global_step`, copies of `bert_config.json` and `vocab.txt` (a variant's
  `vocab.json` + `merges.txt` or `spiece.model`), and `label_list.txt` (one
  label per line, in id order); `model.ckpt-<step>` every
  `--save_checkpoints_steps`; TensorBoard logs.

A variant release (`--model_dir=R` from `bert-convert-hf`: RoBERTa, ALBERT,
DistilBERT) is fine-tuned the same way: its tokenizer cuts each word as in
the sentence's text (RoBERTa's words after the first carry their space, the
`Ġ`), between its own special tokens (`<s> ... </s>` for RoBERTa).

The sentences can come from TensorFlow Datasets instead of the files:
`--tfds_name=conll2003` read from `--data_dir`, where it must already be
prepared (e.g. `tfds build conll2003 --data_dir=$TFDS_DIR`; nothing is
downloaded), the splits `--train_split` (train), `--eval_split` (dev) and
`--predict_split` (test). They are the files' sentences with the same
columns, the labels the `ner` feature's ClassLabel names (in its id order,
written to `label_list.txt`); TFDS keeps no file order, so sentences are
predicted and written back in its stored order.

Without `--do_train`, weights come from `--output_dir/model.ckpt` when it
exists, else from `--init_checkpoint`; labels from `--labels`, else from the
checkpoint directory's `label_list.txt`.

Example:
    bert-run-ner --do_train --do_eval --do_predict \
      --train_file=conll2003/train.txt --eval_file=conll2003/valid.txt \
      --predict_file=conll2003/test.txt --vocab_file=$BERT/vocab.txt \
      --bert_config_file=$BERT/bert_config.json \
      --init_checkpoint=$BERT/bert_model.ckpt --do_lower_case=False \
      --max_seq_length=128 --train_batch_size=32 --learning_rate=5e-5 \
      --num_train_epochs=3.0 --output_dir=/tmp/ner_output/

    bert-run-ner --tfds_name=conll2003 --data_dir=$TFDS_DIR \
      --do_train --do_eval --do_predict ...   (the other flags as above)
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
    parse_label_list,
    quiet_tensorflow,
    require,
    require_positive,
    run_tool,
)


def define_flags(fv):
    define = dict(flag_values=fv)
    flags.DEFINE_string("train_file", None, "CoNLL file to train on.", **define)
    flags.DEFINE_string("eval_file", None, "CoNLL file with gold labels to evaluate.", **define)
    flags.DEFINE_string("predict_file", None, "CoNLL file to predict (a label column is optional).", **define)
    flags.DEFINE_string("tfds_name", None, "Instead of the files: a TFDS CoNLL dataset (conll2003: features tokens ... ner) prepared in --data_dir.", **define)
    flags.DEFINE_string("data_dir", None, "With --tfds_name: the TFDS data directory where the dataset is prepared (nothing is downloaded).", **define)
    flags.DEFINE_string("train_split", "train", "With --tfds_name: the split (or expression, e.g. train[:10%]) trained on.", **define)
    flags.DEFINE_string("eval_split", "dev", "With --tfds_name: the split evaluated (conll2003's validation split is dev).", **define)
    flags.DEFINE_string("predict_split", "test", "With --tfds_name: the split predicted.", **define)
    flags.DEFINE_boolean("do_train", False, "Fine-tune on --train_file.", **define)
    flags.DEFINE_boolean("do_eval", False, "Evaluate --eval_file.", **define)
    flags.DEFINE_boolean("do_predict", False, "Predict --predict_file.", **define)
    define_fine_tuning_flags(fv)
    flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.", **define)
    flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.", **define)
    flags.DEFINE_string("labels", None, 'Comma-separated label list (default: the train file\'s, "O" first, or the checkpoint\'s label_list.txt).', **define)


def main(argv=None):
    fv = parse_flags(define_flags, argv, prog="run_ner", description=__doc__)
    check_fine_tuning_flags(fv)
    if not (fv.do_train or fv.do_eval or fv.do_predict):
        raise FlagError("at least one of --do_train, --do_eval or --do_predict must be true")
    file_flags = (("train_file", fv.do_train), ("eval_file", fv.do_eval), ("predict_file", fv.do_predict))
    if fv.tfds_name:
        require(fv, "data_dir")
        for flag, _ in file_flags:
            if fv[flag].value:
                raise FlagError(f"--{flag} and --tfds_name both name the sentences; give one")
    else:
        for flag in ("data_dir", "train_split", "eval_split", "predict_split"):
            if fv[flag].present:
                raise FlagError(f"--{flag} applies with --tfds_name only")
        for flag, wanted in file_flags:
            if wanted:
                require(fv, flag)
    require_positive(fv, "eval_batch_size", "predict_batch_size")
    if fv.max_seq_length < 3:
        raise FlagError("--max_seq_length must be at least 3 ([CLS] word [SEP])")
    labels = parse_label_list(fv.labels) if fv.labels is not None else None
    quiet_tensorflow()

    from keras_bert_impl.jobs.run_fine_tuning import run_fine_tuning
    from keras_bert_impl.tasks.token_tagging import TaggingFineTuning
    from keras_bert_impl.training.fine_tuning import log_to_stderr

    run_fine_tuning(
        TaggingFineTuning(labels=labels, **flag_values(fv, (
            "train_file", "eval_file", "predict_file", "tfds_name", "data_dir", "train_split", "eval_split",
            "predict_split",
        ))),
        fine_tuning_run(fv),
        log=log_to_stderr("run_ner"),
    )


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
