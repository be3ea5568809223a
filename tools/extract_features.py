#!/usr/bin/env python
"""Extracts per-token hidden states from chosen encoder layers, as JSON lines.

A drop-in for google-research/bert's `extract_features.py`: the same flags,
`text_a` or `text_a ||| text_b` input lines, and the same output layout, one
JSON object per input line:

    {"linex_index": 0, "features": [{"token": "[CLS]", "layers": [
        {"index": -1, "values": [0.123456, ...]}, ...]}, ...]}

Example:
    bert-extract-features --input_file=input.txt --output_file=out.jsonl \\
      --vocab_file=$BERT/vocab.txt --bert_config_file=$BERT/bert_config.json \\
      --init_checkpoint=$BERT/bert_model.ckpt --layers=-1,-2,-3,-4 \\
      --max_seq_length=128 --batch_size=8
"""

import sys

from absl import flags

from keras_bert_impl.cli import (
    TPU_FLAG_HELP,
    define_tpu_flags,
    fill_release_flags,
    flag_values,
    parse_flags,
    quiet_tensorflow,
    require,
    require_positive,
    run_tool,
)
from keras_bert_impl.inference.plan import PRECISION_CHOICES
from keras_bert_impl.jobs.extract_features import extract_features

REQUIRED = ("input_file", "output_file", "bert_config_file", "init_checkpoint", "vocab_file")


def define_flags(fv):
    define = dict(flag_values=fv)
    flags.DEFINE_string("input_file", None, "Text file, one `text_a` or `text_a ||| text_b` per line.", **define)
    flags.DEFINE_string("output_file", None, "JSON-lines output (written atomically).", **define)
    flags.DEFINE_string("layers", "-1,-2,-3,-4", "Comma list of encoder layer indexes.", **define)
    flags.DEFINE_string("bert_config_file", None, "The original bert_config.json.", **define)
    flags.DEFINE_integer("max_seq_length", 128, "Padded sequence length after WordPiece.", **define)
    flags.DEFINE_string("init_checkpoint", None, "Original-format checkpoint prefix (bert_model.ckpt), or a named "
                        "release such as hf://ORG/NAME (docs/SOURCES.md), which fills in --bert_config_file and "
                        "--vocab_file too.", **define)
    flags.DEFINE_string("vocab_file", None, "vocab.txt the model was trained on.", **define)
    flags.DEFINE_boolean("do_lower_case", True, "Lower-case the input; must match the checkpoint.", **define)
    flags.DEFINE_integer("batch_size", 32, "Batch size for inference.", **define)
    flags.DEFINE_enum(
        "precision", "float32", list(PRECISION_CHOICES),
        "float32: the original's values. bfloat16: bfloat16 products with the weights held rounded, values within "
        "bfloat16 rounding of those; faster only on CPUs with AMX (amx_bf16), AMD's AVX-512 bf16 or a GPU. "
        "auto: bfloat16 where this CPU has amx_bf16 (or avx512_bf16 on AMD) and TensorFlow's oneDNN rewrites are on, else "
        "float32.", **define,
    )
    flags.DEFINE_boolean("use_tpu", False, TPU_FLAG_HELP, **define)
    define_tpu_flags(fv, ("master", "num_tpu_cores"))
    flags.DEFINE_boolean("use_one_hot_embeddings", False, TPU_FLAG_HELP, **define)


def main(argv=None):
    fv = parse_flags(define_flags, argv, prog="extract_features", description=__doc__)
    fill_release_flags(fv)
    require(fv, *REQUIRED)
    require_positive(fv, "batch_size")
    quiet_tensorflow()
    options = ("layers", "max_seq_length", "do_lower_case", "batch_size", "precision")
    extract_features(**flag_values(fv, REQUIRED + options))


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
