#!/usr/bin/env python
"""Pictures of a run: training curves from TensorBoard event files, and an
attention heatmap of one sentence through a BERT checkpoint.

Examples:
    bert-figures --event_dirs=pretrain_out,classifier_out --curves_png=curves.png
    bert-figures --bert_config_file=release/bert_config.json \\
      --init_checkpoint=release/bert_model.ckpt --vocab_file=release/vocab.txt \\
      --sentence="The weather is lovely today." --attention_png=attention.png
"""

import sys

from absl import flags

from keras_bert_impl.cli import FlagError, flag_values, parse_flags, quiet_tensorflow, require, run_tool
from keras_bert_impl.jobs.make_figures import make_figures

JOB_FLAGS = (
    "event_dirs", "curves_png", "bert_config_file", "init_checkpoint", "vocab_file",
    "do_lower_case", "sentence", "layer", "attention_png",
)


def define_flags(fv):
    define = dict(flag_values=fv)
    flags.DEFINE_string("event_dirs", None, "Comma list of directories holding TensorBoard event files (searched recursively).", **define)
    flags.DEFINE_string("curves_png", None, "Where to write the training curves.", **define)
    flags.DEFINE_string("bert_config_file", None, "bert_config.json for the attention heatmap.", **define)
    flags.DEFINE_string("init_checkpoint", None, "Checkpoint for the attention heatmap.", **define)
    flags.DEFINE_string("vocab_file", None, "vocab.txt for the attention heatmap.", **define)
    flags.DEFINE_boolean("do_lower_case", True, "Lower-case the sentence.", **define)
    flags.DEFINE_string("sentence", "The weather is lovely today.", "Sentence for the heatmap.", **define)
    flags.DEFINE_integer("layer", -1, "Encoder layer of the heatmap (-1: the last).", **define)
    flags.DEFINE_string("attention_png", None, "Where to write the attention heatmap.", **define)


def main(argv=None):
    fv = parse_flags(define_flags, argv, prog="make_figures", description=__doc__)
    if not (fv.curves_png or fv.attention_png):
        raise FlagError("give --curves_png and/or --attention_png")
    if fv.curves_png:
        require(fv, "event_dirs")
    if fv.attention_png:
        require(fv, "bert_config_file", "init_checkpoint", "vocab_file")
    quiet_tensorflow()
    make_figures(**flag_values(fv, JOB_FLAGS))


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
