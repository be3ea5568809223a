#!/usr/bin/env python
"""Fine-tunes BERT for token classification (NER) on CoNLL-2003-format files.

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
  `global_step`, copies of `bert_config.json` and `vocab.txt`, and
  `label_list.txt` (one label per line, in id order); `model.ckpt-<step>`
  every `--save_checkpoints_steps`; TensorBoard logs.

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
"""

import os
import sys

if __package__ in (None, ""):  # run as `python tools/run_ner.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from tools import run_squad as fine_tuning  # noqa: E402
else:  # the shared fine-tuning plumbing lives in the sibling run_squad
    from . import run_squad as fine_tuning

from keras_bert_impl.cli import FlagParser, quiet_tensorflow, run_tool  # noqa: E402

LABEL_LIST_FILE = "label_list.txt"
_HEAD = ("output_weights", "output_bias")
_INPUTS = ("input_ids", "input_mask", "segment_ids")


def build_parser():
    parser = FlagParser(
        prog="run_ner",
        description="BERT fine-tuning for token classification on CoNLL-2003-format files.",
    )
    parser.add_argument("--train_file", help="CoNLL file to train on.")
    parser.add_argument("--eval_file", help="CoNLL file with gold labels to evaluate.")
    parser.add_argument("--predict_file", help="CoNLL file to predict (a label column is optional).")
    parser.add_argument("--output_dir", help="Where checkpoints, logs, results and predictions are written.")
    parser.add_argument("--max_seq_length", type=int, default=128, help="Sequence length after WordPiece (default: %(default)s).")
    parser.add_bool("do_train", False, "Fine-tune on --train_file.")
    parser.add_bool("do_eval", False, "Evaluate --eval_file.")
    parser.add_bool("do_predict", False, "Predict --predict_file.")
    parser.add_fine_tuning_flags()
    parser.add_argument("--eval_batch_size", type=int, default=8, help="Total batch size for eval (default: %(default)s).")
    parser.add_argument("--predict_batch_size", type=int, default=8, help="Total batch size for predict (default: %(default)s).")
    parser.add_argument("--labels", help="Comma-separated label list (default: the train file's, \"O\" first, or the checkpoint's label_list.txt).")
    return parser


def check_flags(parser, args):
    parser.require(args, "vocab_file", "bert_config_file", "output_dir")
    if not (args.do_train or args.do_eval or args.do_predict):
        parser.error("at least one of --do_train, --do_eval or --do_predict must be true")
    for flag, wanted in (("train_file", args.do_train), ("eval_file", args.do_eval), ("predict_file", args.do_predict)):
        if wanted:
            parser.require(args, flag)
    for flag in ("train_batch_size", "eval_batch_size", "predict_batch_size", "save_checkpoints_steps"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag} must be positive, got {getattr(args, flag)}")
    if args.max_seq_length < 3:
        parser.error("--max_seq_length must be at least 3 ([CLS] word [SEP])")
    if not args.num_train_epochs > 0:
        parser.error(f"--num_train_epochs must be positive, got {args.num_train_epochs}")
    if not 0.0 <= args.warmup_proportion <= 1.0:
        parser.error(f"--warmup_proportion must lie in [0, 1], got {args.warmup_proportion}")
    if args.labels is not None:
        labels = [label.strip() for label in args.labels.split(",")]
        if len(labels) < 2 or len(set(labels)) != len(labels) or not all(labels):
            parser.error(f"--labels must list two or more distinct labels, got {args.labels!r}")
        args.labels = labels


def log(message):
    print(f"run_ner: {message}", file=sys.stderr, flush=True)


def resolve_labels(args, train_sentences):
    """The label list: `--labels`, else the train file's, else the checkpoint's `label_list.txt`."""
    from keras_bert_impl.data.conll import label_list
    from keras_bert_impl.errors import InputFileError

    if args.labels is not None:
        return args.labels
    if train_sentences is not None:
        return label_list(train_sentences)
    for directory in (args.output_dir, os.path.dirname(args.init_checkpoint or "")):
        path = os.path.join(directory, LABEL_LIST_FILE)
        if directory and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                return [line.strip() for line in f if line.strip()]
    raise InputFileError(
        f"no label list: pass --labels, or train first (which writes {LABEL_LIST_FILE} to --output_dir)"
    )


def encode(sentences, tokenizer, args, label_map, path):
    """`(features, arrays)`: the windows and their int32 arrays (inputs, label ids, weights)."""
    import numpy as np

    from keras_bert_impl.data.conll import convert_sentences_to_features

    features, counts = convert_sentences_to_features(sentences, tokenizer, args.max_seq_length, label_map, path)
    notes = [
        f"{counts.split_sentences} sentences split into windows" if counts.split_sentences else "",
        f"{counts.empty_words} words without word pieces read as [UNK]" if counts.empty_words else "",
        f"{counts.cut_words} words cut to {args.max_seq_length - 2} pieces" if counts.cut_words else "",
    ]
    log(f"{path}: {len(sentences)} sentences, {counts.windows} windows" + "".join(f"; {n}" for n in notes if n))
    arrays = {
        key: np.array([getattr(f, key) for f in features], np.int32).reshape(len(features), args.max_seq_length)
        for key in (*_INPUTS, "label_ids", "label_weights")
    }
    return features, arrays


def fine_tune(model, arrays, args, strategy):
    """`model.fit` with the original optimizer; returns the global step."""
    import keras
    import tensorflow as tf

    from keras_bert_impl.errors import InputFileError
    from keras_bert_impl.models.token_classifier import token_classification_loss
    from keras_bert_impl.training.optimization import create_optimizer

    num_windows = len(arrays["input_ids"])
    num_train_steps = int(num_windows / args.train_batch_size * args.num_train_epochs)
    num_warmup_steps = int(num_train_steps * args.warmup_proportion)
    if num_train_steps < 1:
        raise InputFileError(
            f"{args.train_file}: {num_windows} windows with --train_batch_size={args.train_batch_size} "
            f"and --num_train_epochs={args.num_train_epochs} make 0 training steps"
        )
    log(f"training: {num_train_steps} steps of {args.train_batch_size} ({num_warmup_steps} warmup)")
    with strategy.scope():
        model.compile(
            optimizer=create_optimizer(args.learning_rate, num_train_steps, num_warmup_steps),
            loss=token_classification_loss(),
            weighted_metrics=[keras.metrics.SparseCategoricalAccuracy("accuracy")],
        )
    dataset = (
        tf.data.Dataset.from_tensor_slices(
            ({key: arrays[key] for key in _INPUTS}, arrays["label_ids"], arrays["label_weights"])
        )
        .shuffle(num_windows, seed=args.seed, reshuffle_each_iteration=True)
        .repeat()
        .batch(args.train_batch_size, drop_remainder=True)
        .prefetch(tf.data.AUTOTUNE)
    )
    return fine_tuning.fit_for_steps(model, dataset, num_train_steps, num_windows, args)


def predict_labels(model, features, arrays, sentences, labels, batch_size):
    """`(word_labels, logits)`: predicted labels per sentence and word, and the raw logits."""
    from keras_bert_impl.data.conll import word_label_ids

    logits = model.predict({key: arrays[key] for key in _INPUTS}, batch_size=batch_size, verbose=0)
    word_ids = word_label_ids(features, logits.argmax(axis=-1), sentences)
    return [[labels[i] for i in ids] for ids in word_ids], logits


def weighted_loss(logits, label_ids, label_weights):
    """Mean cross-entropy over the labelled pieces (NumPy, float64)."""
    import numpy as np

    logits = np.asarray(logits, np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(log_probs, label_ids[..., None], axis=-1)[..., 0]
    return float(-(picked * label_weights).sum() / max(label_weights.sum(), 1))


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    check_flags(parser, args)
    quiet_tensorflow()

    from keras_bert_impl.data.conll import entity_scores, format_predictions, read_conll

    # Everything about the input is checked before TensorFlow starts.
    config, tokenizer = fine_tuning.read_release(args)
    data = {}
    if args.do_train:
        data["train"] = read_conll(args.train_file)
    if args.do_eval:
        data["eval"] = read_conll(args.eval_file)
    if args.do_predict:
        data["predict"] = read_conll(args.predict_file, require_labels=False)
    labels = resolve_labels(args, data.get("train"))
    label_map = {label: index for index, label in enumerate(labels)}
    paths = {"train": args.train_file, "eval": args.eval_file, "predict": args.predict_file}
    # A predict file's last column is not read as labels (it may be POS tags, or absent).
    encoded = {
        split: encode(sentences, tokenizer, args, None if split == "predict" else label_map, paths[split])
        for split, sentences in data.items()
    }

    from keras_bert_impl.checkpoints.original import load_original_checkpoint
    from keras_bert_impl.models.token_classifier import BertTokenClassifier

    batch_flags = [
        flag for flag, used in (("train_batch_size", args.do_train), ("eval_batch_size", args.do_eval),
                                ("predict_batch_size", args.do_predict)) if used
    ]
    model, strategy = fine_tuning.build_task_model(
        args, lambda: BertTokenClassifier(config, num_labels=len(labels)), batch_flags
    )
    if args.do_train:
        if args.init_checkpoint:
            report = load_original_checkpoint(model, args.init_checkpoint, allow_fresh=_HEAD)
            log(f"{args.init_checkpoint}: {report.summary()}")
        global_step = fine_tune(model, encoded["train"][1], args, strategy)
        fine_tuning.save_fine_tuned(model, args, global_step, log)
        fine_tuning.write_atomically(
            os.path.join(args.output_dir, LABEL_LIST_FILE), "".join(f"{label}\n" for label in labels)
        )
    else:
        global_step = fine_tuning.load_fine_tuned(model, args, _HEAD, "tagging", log)

    if args.do_eval:
        features, arrays = encoded["eval"]
        sentences = data["eval"]
        predicted, logits = predict_labels(model, features, arrays, sentences, labels, args.eval_batch_size)
        result = entity_scores([s.labels for s in sentences], predicted)
        result["eval_loss"] = weighted_loss(logits, arrays["label_ids"], arrays["label_weights"])
        result["global_step"] = global_step
        text = fine_tuning.format_eval_results(result)
        fine_tuning.write_atomically(os.path.join(args.output_dir, "eval_results.txt"), text)
        fine_tuning.write_atomically(
            os.path.join(args.output_dir, "eval_predictions.txt"), format_predictions(sentences, predicted)
        )
        log(f"eval on {len(sentences)} sentences: precision {result['precision']:.4f}, "
            f"recall {result['recall']:.4f}, f1 {result['f1']:.4f}")
    if args.do_predict:
        features, arrays = encoded["predict"]
        sentences = data["predict"]
        predicted, _ = predict_labels(model, features, arrays, sentences, labels, args.predict_batch_size)
        path = os.path.join(args.output_dir, "test_predictions.txt")
        fine_tuning.write_atomically(path, format_predictions(sentences, predicted))
        log(f"wrote predictions for {len(sentences)} sentences to {path}")


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
