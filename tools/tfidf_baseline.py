#!/usr/bin/env python
"""TF-IDF (word 1-2 grams) + logistic regression on a csv text/label task: the
baseline a fine-tuned BERT has to beat. Prints dev accuracy.

Example:
    bert-tfidf-baseline --data_dir=data/sentiment
"""

import csv
import os
import sys
import warnings

if __package__ in (None, ""):  # run as `python tools/tfidf_baseline.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from keras_bert_impl.cli import FlagParser, run_tool  # noqa: E402


def read_split(path, text_column, label_column):
    from keras_bert_impl.errors import InputFileError

    try:
        with open(path, encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
    except FileNotFoundError:
        raise InputFileError(f"{path}: not found") from None
    if rows and (text_column not in rows[0] or label_column not in rows[0]):
        raise InputFileError(f"{path}:1: needs columns {text_column!r} and {label_column!r}")
    return [row[text_column] for row in rows], [row[label_column] for row in rows]


def main(argv=None):
    parser = FlagParser(prog="tfidf_baseline", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", help="Directory with train.csv and dev.csv.")
    parser.add_argument("--text_column", default="text")
    parser.add_argument("--label_column", default="label")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    parser.require(args, "data_dir")

    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.pipeline import make_pipeline

    train_x, train_y = read_split(os.path.join(args.data_dir, "train.csv"), args.text_column, args.label_column)
    dev_x, dev_y = read_split(os.path.join(args.data_dir, "dev.csv"), args.text_column, args.label_column)
    model = make_pipeline(
        TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True),
        LogisticRegressionCV(Cs=10, cv=5, max_iter=2000, random_state=args.seed),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(train_x, train_y)
    print(f"tfidf_baseline: dev accuracy = {model.score(dev_x, dev_y):.4f} ({len(train_x)} train, {len(dev_x)} dev)")


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
