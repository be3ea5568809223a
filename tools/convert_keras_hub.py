#!/usr/bin/env python
"""Converts between a BERT release (bert_config.json, vocab.txt, bert_model.ckpt)
and a keras-hub preset directory, both ways, with no code of ours needed to
load the preset.

--to_preset writes a preset that keras_hub.models.BertBackbone, BertTokenizer,
BertTextClassifier and (when the checkpoint has cls/predictions) BertMaskedLM
load with from_preset(dir). --from_preset writes a keras-hub BERT preset as a
release our tools and the original scripts take. A preset written here keeps
what keras-hub cannot hold (the exact bert_config.json, the next-sentence head)
in its original/ folder, so release -> preset -> release is bit-identical.

Examples:
    bert-convert-keras-hub --to_preset --bert_config_file=release/bert_config.json \\
        --init_checkpoint=release/bert_model.ckpt --vocab_file=release/vocab.txt \\
        --do_lower_case --preset_dir=preset/
    bert-convert-keras-hub --from_preset --preset_dir=preset/ --output_dir=release_again/
"""

import sys

from absl import flags

from keras_bert_impl.cli import FlagError, flag_values, parse_flags, quiet_tensorflow, require, run_tool
from keras_bert_impl.io import check_output_dir
from keras_bert_impl.jobs.convert_keras_hub import convert_keras_hub


def define_flags(fv):
    define = dict(flag_values=fv)
    flags.DEFINE_boolean("to_preset", False, "Convert the release of the flags below into --preset_dir.", **define)
    flags.DEFINE_boolean("from_preset", False, "Convert the keras-hub preset --preset_dir into --output_dir.", **define)
    flags.DEFINE_string("preset_dir", None, "The keras-hub preset directory (new or empty for --to_preset).", **define)
    flags.DEFINE_string("bert_config_file", None, "The release's bert_config.json (--to_preset).", **define)
    flags.DEFINE_string("init_checkpoint", None, "The release's checkpoint prefix (--to_preset).", **define)
    flags.DEFINE_string("vocab_file", None, "The release's vocab.txt (--to_preset).", **define)
    flags.DEFINE_boolean(
        "do_lower_case", True,
        "The release is uncased: keras-hub's tokenizer lower-cases and strips accents (--to_preset).", **define,
    )
    flags.DEFINE_string("output_dir", None, "Where the release is written (--from_preset).", **define)


def main(argv=None):
    fv = parse_flags(define_flags, argv, prog="convert_keras_hub", description=__doc__)
    if fv.to_preset == fv.from_preset:
        raise FlagError("give exactly one of --to_preset or --from_preset")
    require(fv, "preset_dir")
    if fv.to_preset:
        require(fv, "bert_config_file", "init_checkpoint", "vocab_file")
        check_output_dir(fv.preset_dir, "--preset_dir")
    else:
        require(fv, "output_dir")
        check_output_dir(fv.output_dir, "--output_dir")
    quiet_tensorflow()
    convert_keras_hub(**flag_values(fv, (
        "to_preset", "from_preset", "preset_dir", "bert_config_file", "init_checkpoint", "vocab_file",
        "do_lower_case", "output_dir",
    )))


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
