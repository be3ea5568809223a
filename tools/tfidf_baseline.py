#!/usr/bin/env python
"""TF-IDF (word 1-2 grams) + logistic regression on a csv text/label task: the
baseline a fine-tuned BERT has to beat. Prints dev accuracy.

Example:
    bert-tfidf-baseline --data_dir=data/sentiment
"""

import sys

from absl import flags

from keras_bert_impl.cli import flag_values, parse_flags, require, run_tool
from keras_bert_impl.jobs.tfidf_baseline import tfidf_baseline


def define_flags(fv):
    define = dict(flag_values=fv)
    flags.DEFINE_string("data_dir", None, "Directory with train.csv and dev.csv.", **define)
    flags.DEFINE_string("text_column", "text", "CSV column of the text.", **define)
    flags.DEFINE_string("label_column", "label", "CSV column of the label.", **define)
    flags.DEFINE_integer("seed", 0, "Seed of the cross-validated logistic regression.", **define)


def main(argv=None):
    fv = parse_flags(define_flags, argv, prog="tfidf_baseline", description=__doc__)
    require(fv, "data_dir")
    accuracy, train, dev = tfidf_baseline(**flag_values(fv, ("data_dir", "text_column", "label_column", "seed")))
    print(f"tfidf_baseline: dev accuracy = {accuracy:.4f} ({train} train, {dev} dev)")


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
