#!/usr/bin/env python
"""Exports a BERT task model as a versioned SavedModel for TF Serving.

Writes `<export_dir>/<version>/` (next free integer version unless --version;
never overwrites) with signatures `serving_default` (raw `text`, tokenized
in-graph), `serve_text_pair` (`text`, `text_b`), `serve_ids` (ids/mask/segments)
and `serve_examples` (serialized tf.Example, tf-models feature names), warmup
requests in `assets.extra/`, and `<export_dir>/models.config`.

Example:
    bert-export --bert_config_file=release/bert_config.json \
      --init_checkpoint=out/model.ckpt-1000 --vocab_file=release/vocab.txt \
      --task=classifier --num_labels=2 --label_names=negative,positive \
      --max_seq_length=128 --export_dir=saved_models/sentiment
"""

import os
import sys

if __package__ in (None, ""):  # run as `python tools/export_saved_model.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from keras_bert_impl.cli import FlagParser, quiet_tensorflow, run_tool  # noqa: E402

TASKS = ("classifier", "regression", "span_qa", "embeddings", "fill_mask")


def build_parser():
    parser = FlagParser(prog="export_saved_model", description="Versioned SavedModel export for TF Serving.")
    add = parser.add_argument
    add("--bert_config_file", help="bert_config.json (or give --model_dir).")
    add("--init_checkpoint", help="Original-format checkpoint of the trained model (or give --model_dir).")
    add("--vocab_file", help="vocab.txt (or give --model_dir).")
    add("--model_dir", help="A directory written by our tools: bert_config.json, vocab.txt and its latest checkpoint.")
    parser.add_bool("do_lower_case", True, "Lower-case in the in-graph tokenizer; must match the model")
    add("--max_seq_length", type=int, default=128, help="Padded length of every request (default: %(default)s).")
    add("--task", choices=TASKS, help="What the SavedModel computes.")
    add("--num_labels", type=int, default=2, help="Classes of a classifier (default: %(default)s).")
    add("--label_names", default=None, help="Comma-separated class names (default: 0..num_labels-1).")
    add("--export_dir", help="saved_models/<model_name>; versions are written below it.")
    add("--version", type=int, default=None, help="Version number (default: the next free one).")
    return parser


def resolve_release(args, parser):
    """Fills config/checkpoint/vocab from --model_dir when given."""
    import tensorflow as tf

    if args.model_dir:
        args.bert_config_file = args.bert_config_file or os.path.join(args.model_dir, "bert_config.json")
        args.vocab_file = args.vocab_file or os.path.join(args.model_dir, "vocab.txt")
        if not args.init_checkpoint:
            args.init_checkpoint = tf.train.latest_checkpoint(args.model_dir) or os.path.join(args.model_dir, "bert_model.ckpt")
    parser.require(args, "bert_config_file", "init_checkpoint", "vocab_file", "task", "export_dir")


def build_model(task, config, num_labels):
    from keras_bert_impl.models.bert_model import BertModel
    from keras_bert_impl.models.classifier import BertClassifier
    from keras_bert_impl.models.pretraining import BertPretrainingModel

    if task == "classifier":
        return BertClassifier(config, num_labels=num_labels), ()
    if task == "regression":
        return BertClassifier(config, num_labels=1), ()
    if task == "embeddings":
        return BertModel(config), ()
    if task == "fill_mask":
        return BertPretrainingModel(config), ("cls/seq_relationship/",)
    from keras_bert_impl.models.span_qa import BertSpanQA

    return BertSpanQA(config), ()


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    quiet_tensorflow()
    resolve_release(args, parser)
    if args.max_seq_length < 3:
        parser.error("--max_seq_length must be at least 3")

    from keras_bert_impl.checkpoints.original import load_original_checkpoint
    from keras_bert_impl.config import BertConfig
    from keras_bert_impl.errors import ConfigError
    from keras_bert_impl.serving.export import ExportError, export_saved_model

    if args.version is not None and os.path.exists(os.path.join(args.export_dir, str(args.version))):
        # Checked before any work: versions are never overwritten.
        raise ExportError(f"{os.path.join(args.export_dir, str(args.version))}: version {args.version} already exists")

    config = BertConfig.from_json_file(args.bert_config_file)
    if args.max_seq_length > config.max_position_embeddings:
        raise ConfigError(
            f"--max_seq_length {args.max_seq_length} exceeds max_position_embeddings "
            f"{config.max_position_embeddings} of {args.bert_config_file}"
        )
    label_names = args.label_names.split(",") if args.label_names else None
    num_labels = len(label_names) if label_names else args.num_labels
    model, optional = build_model(args.task, config, num_labels)
    report = load_original_checkpoint(model, args.init_checkpoint, allow_fresh=optional)
    print(f"export_saved_model: {args.init_checkpoint}: {report.summary()}", file=sys.stderr)
    path = export_saved_model(
        model, args.task, args.vocab_file, args.export_dir, do_lower_case=args.do_lower_case,
        max_seq_length=args.max_seq_length, label_names=label_names, version=args.version,
    )
    print(f"export_saved_model: wrote {path}", file=sys.stderr)


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
