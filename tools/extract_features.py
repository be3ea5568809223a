#!/usr/bin/env python
"""Extracts per-token hidden states from chosen encoder layers, as JSON lines.

A drop-in for google-research/bert's `extract_features.py`: the same flags,
`text_a` or `text_a ||| text_b` input lines, and the same output layout, one
JSON object per input line:

    {"linex_index": 0, "features": [{"token": "[CLS]", "layers": [
        {"index": -1, "values": [0.123456, ...]}, ...]}, ...]}

Example:
    bert-extract-features --input_file=input.txt --output_file=out.jsonl \
      --vocab_file=$BERT/vocab.txt --bert_config_file=$BERT/bert_config.json \
      --init_checkpoint=$BERT/bert_model.ckpt --layers=-1,-2,-3,-4 \
      --max_seq_length=128 --batch_size=8
"""

import collections
import json
import os
import sys

if __package__ in (None, ""):  # run as `python tools/extract_features.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from keras_bert_impl.cli import FlagParser, quiet_tensorflow, run_tool  # noqa: E402


def build_parser():
    parser = FlagParser(
        prog="extract_features",
        description="Per-token features from a BERT checkpoint (original extract_features.py flags).",
    )
    parser.add_argument("--input_file", help="Text file, one `text_a` or `text_a ||| text_b` per line.")
    parser.add_argument("--output_file", help="JSON-lines output (written atomically).")
    parser.add_argument("--layers", default="-1,-2,-3,-4", help="Comma list of encoder layer indexes (default: %(default)s).")
    parser.add_argument("--bert_config_file", help="The original bert_config.json.")
    parser.add_argument("--init_checkpoint", help="Original-format checkpoint prefix (bert_model.ckpt).")
    parser.add_argument("--vocab_file", help="vocab.txt the model was trained on.")
    parser.add_argument("--max_seq_length", type=int, default=128, help="Padded sequence length (default: %(default)s).")
    parser.add_bool("do_lower_case", True, "Lower-case the input; must match the checkpoint.")
    parser.add_argument("--batch_size", type=int, default=32, help="Batch size for inference (default: %(default)s).")
    return parser


def parse_layers(text, num_layers, parser):
    try:
        layers = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        parser.error(f"--layers must be a comma list of integers, got {text!r}")
    bad = [i for i in layers if not -num_layers <= i < num_layers]
    if not layers or bad:
        parser.error(f"--layers {text!r}: indexes must lie in [{-num_layers}, {num_layers - 1}] for a {num_layers}-layer model")
    return layers


def feature_record(features, layer_outputs, layer_indexes):
    """The original's JSON object for one example.

    Args:
        features: `InputFeatures` of the example.
        layer_outputs: One [seq_length, H] array per entry of `layer_indexes`.
        layer_indexes: As given by `--layers`.
    """
    tokens = []
    for position, token in enumerate(features.tokens):
        layers = [
            collections.OrderedDict(
                index=index, values=[round(float(x), 6) for x in output[position]]
            )
            for index, output in zip(layer_indexes, layer_outputs)
        ]
        tokens.append(collections.OrderedDict(token=token, layers=layers))
    return collections.OrderedDict(linex_index=features.unique_id, features=tokens)


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    parser.require(args, "input_file", "output_file", "bert_config_file", "init_checkpoint", "vocab_file")
    if args.batch_size < 1:
        parser.error("--batch_size must be positive")
    quiet_tensorflow()

    import numpy as np

    from keras_bert_impl.checkpoints.original import load_original_checkpoint
    from keras_bert_impl.config import BertConfig
    from keras_bert_impl.data.text_pairs import convert_example_to_features, read_text_pair_examples
    from keras_bert_impl.errors import ConfigError
    from keras_bert_impl.models.bert_model import BertModel
    from keras_bert_impl.tokenization import FullTokenizer, check_special_tokens, validate_case_matches_checkpoint

    config = BertConfig.from_json_file(args.bert_config_file)
    if args.max_seq_length > config.max_position_embeddings:
        raise ConfigError(
            f"--max_seq_length {args.max_seq_length} exceeds max_position_embeddings "
            f"{config.max_position_embeddings} of {args.bert_config_file}"
        )
    if args.max_seq_length < 3:
        parser.error("--max_seq_length must be at least 3")
    layer_indexes = parse_layers(args.layers, config.num_hidden_layers, parser)
    validate_case_matches_checkpoint(args.do_lower_case, args.init_checkpoint)
    tokenizer = FullTokenizer(args.vocab_file, do_lower_case=args.do_lower_case)
    check_special_tokens(tokenizer.vocab, args.vocab_file)
    examples = read_text_pair_examples(args.input_file)
    features = [convert_example_to_features(e, tokenizer, args.max_seq_length) for e in examples]

    model = BertModel(config, output_all_encoder_layers=True)
    load_original_checkpoint(model, args.init_checkpoint)

    output_dir = os.path.dirname(os.path.abspath(args.output_file))
    os.makedirs(output_dir, exist_ok=True)
    partial = f"{args.output_file}.partial-{os.getpid()}"
    try:
        with open(partial, "w", encoding="utf-8") as writer:
            for start in range(0, len(features), args.batch_size):
                batch = features[start : start + args.batch_size]
                inputs = {
                    key: np.array([getattr(f, key) for f in batch], "int32")
                    for key in ("input_ids", "input_mask", "segment_ids")
                }
                all_layers = model.predict_on_batch(inputs)["encoder_outputs"]
                for row, feature in enumerate(batch):
                    outputs = [np.asarray(all_layers[i][row]) for i in layer_indexes]
                    writer.write(json.dumps(feature_record(feature, outputs, layer_indexes)) + "\n")
        os.replace(partial, args.output_file)
    finally:
        if os.path.exists(partial):
            os.remove(partial)
    print(f"extract_features: wrote {len(features)} examples to {args.output_file}", file=sys.stderr)


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
