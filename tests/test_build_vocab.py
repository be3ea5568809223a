"""bert-build-vocab: the learner against a merge-by-merge reference written from
the algorithm's definition, the layout against the released bert-base-uncased
vocab.txt, and a vocabulary learned from real news used on held-out articles
by `FullTokenizer` and the in-graph tokenizer (the same ids; [UNK] exactly for
the words with a character the corpus never showed); bad input as one line."""

import collections
import os
import subprocess
import sys

import hypothesis
import pytest
from hypothesis import strategies as st

from keras_bert_impl.checkpoints.pip_assets import BERT_BASE_UNCASED_VOCAB, NEWS_ARTICLES
from keras_bert_impl.data.real_corpora import news_articles, seeded_splits
from keras_bert_impl.io import read_utf8_blocks, read_utf8_lines
from keras_bert_impl.jobs.build_vocab import build_vocab
from keras_bert_impl.tokenization import BasicTokenizer, FullTokenizer, load_vocab
from keras_bert_impl.tokenization.wordpiece_learner import count_words, learn_pieces, learn_vocab, reserved_tokens
from tests.assets import fetch_or_skip

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Accents, Greek (final sigma), CJK, Hangul, symbols inside words, a fullwidth form.
MULTILINGUAL = (
    "Crème brûlée in Zürich costs €12; naïve café owners say ΟΔΟΣ and Σίσυφος.\n"
    "東京 and 大阪 are cities; 서울 is too. Ａｂｃ ½-price deals at 7‑Eleven™!\n"
)


def reference_pieces(word_counts, num_pieces, min_frequency):
    """The bottom-up algorithm restated from its definition, without any
    bookkeeping: every round recounts every adjacent pair of every word."""
    segmented = {tuple([word[0]] + ["##" + c for c in word[1:]]): count
                 for word, count in word_counts.items() if len(word) > 1}
    vocabulary = {piece for pieces in segmented for piece in pieces}
    learned = []
    while len(learned) < num_pieces:
        pairs = collections.Counter()
        for pieces, count in segmented.items():
            for pair in zip(pieces, pieces[1:]):
                pairs[pair] += count
        candidates = [(-count, pair) for pair, count in pairs.items() if count >= min_frequency]
        if not candidates:
            break
        _, (left, right) = min(candidates)  # most frequent; ties by the pair's text
        joined = left + right[2:]
        if joined not in vocabulary:
            vocabulary.add(joined)
            learned.append(joined)
        merged = {}
        for pieces, count in segmented.items():
            out, i = [], 0
            while i < len(pieces):
                if pieces[i:i + 2] == (left, right):
                    out.append(joined)
                    i += 2
                else:
                    out.append(pieces[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + count
        segmented = merged
    return learned


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(
    st.dictionaries(st.text("abcab", min_size=1, max_size=9), st.integers(1, 6), min_size=1, max_size=25),
    st.integers(0, 40),
    st.integers(1, 3),
)
def test_learned_pieces_equal_the_reference_on_random_words(word_counts, num_pieces, min_frequency):
    # A three-letter alphabet makes repeated pairs ("##a ##a ##a"), pieces
    # reached by two merge paths, and ties common.
    assert learn_pieces(word_counts, num_pieces, min_frequency) == reference_pieces(word_counts, num_pieces, min_frequency)


@pytest.fixture(scope="module")
def articles():
    return news_articles(fetch_or_skip(NEWS_ARTICLES) / "NewsArticles.zip")


def test_learned_pieces_equal_the_reference_on_real_news(articles):
    counts = count_words(articles[:40])
    assert learn_pieces(counts, 150, 2) == reference_pieces(counts, 150, 2)


def test_reserved_tokens_are_the_released_vocabularys():
    released = list(load_vocab(fetch_or_skip(BERT_BASE_UNCASED_VOCAB) / "vocab.txt"))
    assert reserved_tokens(994) == released[:999]
    assert reserved_tokens()[100:] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]  # ids 100-103 as released
    assert reserved_tokens(0) == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def test_counting_blocks_of_lines_counts_as_line_by_line(tmp_path, articles):
    text = "\n".join(articles[:30]) + "\n" + MULTILINGUAL + "ΟΔΟΣ\nΣ\x00x\u200b\ty\n"
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    blocks = [block for _, block in read_utf8_blocks(path, block_bytes=4096)]
    assert len(blocks) > 10 and "".join(blocks) == text
    for lower in (True, False):
        tokenizer = BasicTokenizer(do_lower_case=lower)
        expected = collections.Counter(word for _, line in read_utf8_lines(path) for word in tokenizer.tokenize(line))
        assert count_words(blocks, do_lower_case=lower) == expected


@pytest.mark.parametrize("block_bytes", [7, 64, 1 << 20])
def test_blocks_name_the_undecodable_line_as_the_line_reader_does(tmp_path, block_bytes):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"\xef\xbb\xbfa BOM first\n" + b"fine line\n" * 20 + b"bad \xc3\x28 byte\nmore\n")
    with pytest.raises(Exception) as by_lines:
        list(read_utf8_lines(path))
    with pytest.raises(Exception) as by_blocks:
        list(read_utf8_blocks(path, block_bytes=block_bytes))
    assert str(by_blocks.value) == str(by_lines.value) and f"{path}:22:" in str(by_blocks.value)


@pytest.fixture(scope="module")
def tables():
    from keras_bert_impl.tokenization.in_graph import build_tables

    return build_tables()


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_a_vocab_learned_from_news_tokenizes_held_out_text_alike_in_python_and_in_graph(
        tmp_path, articles, tables, do_lower_case):
    import tensorflow as tf

    from keras_bert_impl.tokenization.in_graph import InGraphTokenizer

    train, held_out = seeded_splits(articles, (900, 100), seed=3)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(train) + "\n" + MULTILINGUAL, encoding="utf-8")
    vocab_file = tmp_path / "vocab.txt"
    stats = build_vocab(str(corpus), str(vocab_file), vocab_size=3000, do_lower_case=do_lower_case, verbose=False)
    vocab = list(load_vocab(vocab_file))
    assert stats.tokens == len(vocab) == 3000 and vocab[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert len(set(vocab)) == len(vocab)

    # Held out: the articles, the multilingual lines reordered, and characters the corpus never showed.
    texts = held_out + [" ".join(reversed(MULTILINGUAL.split())), "A parrot 🦜 said ǂhoa to Ελλάδα."]
    python = FullTokenizer(vocab_file, do_lower_case=do_lower_case)
    in_graph = InGraphTokenizer(vocab, do_lower_case=do_lower_case, tables=tables)
    python_ids = [python.convert_tokens_to_ids(python.tokenize(text)) for text in texts]
    graph_ids = tf.function(in_graph.tokenize)(tf.constant(texts)).to_list()
    assert graph_ids == python_ids

    seen = set(corpus.read_text(encoding="utf-8"))
    if do_lower_case:
        seen = set("".join(count_words([corpus.read_text(encoding="utf-8")])))
    words = [word for text in texts for word in python.basic_tokenizer.tokenize(text)]
    unknown = [word for word in words if python.wordpiece_tokenizer.tokenize_words([word]) == ["[UNK]"]]
    assert unknown == [word for word in words if not set(word) <= seen]
    assert {"🦜", "ǂhoa"} <= set(unknown)
    # As compact as Hugging Face's WordPieceTrainer makes one of the same size from the same words.
    ours = sum(map(len, python_ids))
    peer = FullTokenizer.from_vocab(tokenizers_vocab(train + [MULTILINGUAL], 3000, do_lower_case), do_lower_case)
    theirs = sum(len(peer.tokenize(text)) for text in texts)
    assert ours <= 1.01 * theirs, (ours / len(words), theirs / len(words))


def tokenizers_vocab(texts, vocab_size, do_lower_case):
    """`tokenizers`' WordPieceTrainer's vocabulary ({token: id}) from the BasicTokenizer's words of `texts`."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    basic = BasicTokenizer(do_lower_case=do_lower_case)
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=reserved_tokens(), show_progress=False)
    tokenizer.train_from_iterator((" ".join(basic.tokenize(text)) for text in texts), trainer)
    return tokenizer.get_vocab()


def test_cased_keeps_case_and_accents_and_cjk_has_no_continuations(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(MULTILINGUAL * 3, encoding="utf-8")
    cased = learn_vocab(count_words([MULTILINGUAL * 3], do_lower_case=False), 400).tokens
    uncased = learn_vocab(count_words([MULTILINGUAL * 3]), 400).tokens
    assert {"C", "è", "Σ", "ς", "東"} <= set(cased) and "##è" in cased
    assert not {"C", "è", "Σ"} & set(uncased) and {"c", "e", "σ", "ς", "東"} <= set(uncased)  # "οδος": a final sigma
    # Hangul syllables are no CJK characters: they continue words, cased as they are, uncased as NFD's jamo.
    assert "##서" in cased and "##\u1109" in uncased and "##서" not in uncased
    for vocab in (cased, uncased):
        assert "##東" not in vocab and "##;" not in vocab and "##€" in vocab
        singles = vocab[vocab.index("[MASK]") + 1:]
        starts = [t for t in singles if len(t) == 1]
        assert starts == sorted(starts) and singles[:len(starts)] == starts
        continuations = [t for t in vocab if len(t) == 3 and t.startswith("##")]
        assert vocab[-len(continuations):] == sorted(continuations)


def run_tool(*flags):
    return subprocess.run([sys.executable, os.path.join(REPO, "tools", "build_vocab.py"), *flags],
                          capture_output=True, text=True, cwd=REPO, timeout=120,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))


def test_the_tool_writes_a_vocab_the_tokenizer_loads(tmp_path):
    corpus = tmp_path / "a.txt"
    corpus.write_text(MULTILINGUAL * 4, encoding="utf-8")
    (tmp_path / "b.txt").write_text("lowest lower low\n" * 5, encoding="utf-8")
    output = tmp_path / "new" / "dir" / "vocab.txt"
    result = run_tool(f"--input_file={tmp_path}/a.txt,{tmp_path}/b*", f"--output_file={output}",
                      "--vocab_size=150", "--num_unused=2", "--min_frequency=3")
    assert result.returncode == 0, result.stderr
    assert "in 2 file(s)" in result.stderr and f"wrote 150 tokens to {output}\n" in result.stderr
    tokenizer = FullTokenizer(output)
    assert list(tokenizer.vocab)[:7] == reserved_tokens(2) and len(tokenizer.vocab) == 150
    assert tokenizer.tokenize("Lowest naïve CAFÉ!") == ["lowest", "n", "##aive", "c", "##afe", "!"]
    assert [name for name in os.listdir(output.parent)] == ["vocab.txt"]


def test_a_corpus_with_too_few_pairs_gives_a_shorter_vocab_and_says_so(tmp_path):
    (tmp_path / "a.txt").write_text("ab ab cd\n", encoding="utf-8")
    result = run_tool(f"--input_file={tmp_path}/a.txt", f"--output_file={tmp_path}/vocab.txt", "--vocab_size=500")
    assert result.returncode == 0
    assert "wrote 113 tokens" in result.stderr and "fewer than --vocab_size 500" in result.stderr
    assert list(load_vocab(tmp_path / "vocab.txt"))[104:] == ["a", "b", "c", "d", "ab", "##a", "##b", "##c", "##d"]


@pytest.mark.parametrize("case", ["no_input", "empty", "too_small", "not_utf8", "min_frequency", "output_under_file"])
def test_bad_input_is_one_line_and_leaves_the_earlier_vocab(tmp_path, case):
    good = tmp_path / "good.txt"
    good.write_text("plenty of words here\n" * 3, encoding="utf-8")
    output = tmp_path / "vocab.txt"
    output.write_text("earlier\n", encoding="utf-8")
    flags = {"input_file": str(good), "output_file": str(output), "vocab_size": "500"}
    if case == "no_input":
        flags["input_file"] = f"{good},{tmp_path}/missing*.txt"
        expected, code = f"{tmp_path}/missing*.txt: no such input file", 1
    elif case == "empty":
        (tmp_path / "blank.txt").write_text("\n \t\n\x00\u200b\n\n", encoding="utf-8")
        flags["input_file"] = str(tmp_path / "blank.txt")
        expected, code = "the input files hold no words", 1
    elif case == "too_small":
        flags["vocab_size"] = "110"
        expected, code = "--vocab_size 110 cannot hold the 104 special and unused tokens and the corpus's 13 characters", 2
    elif case == "not_utf8":
        (tmp_path / "bad.txt").write_bytes(b"fine\n" * 4 + b"caf\xe9 latin-1\n")
        flags["input_file"] = f"{good},{tmp_path}/bad.txt"
        expected, code = f"{tmp_path}/bad.txt:5: not valid UTF-8 (byte 3: b'\\xe9')", 1
    elif case == "min_frequency":
        flags["min_frequency"] = "0"
        expected, code = "--min_frequency must be at least 1, got 0", 2
    else:
        flags["output_file"] = str(good / "vocab.txt")
        expected, code = f"--output_file's directory {good}: is a file, not a directory", 1
    result = run_tool(*(f"--{name}={value}" for name, value in flags.items()))
    assert result.returncode == code
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], result.stderr
    assert output.read_text(encoding="utf-8") == "earlier\n"
    assert not [name for name in os.listdir(tmp_path) if ".partial-" in name]


# Beam's DirectRunner with two worker processes, as tests/test_pretraining_beam.py runs it.
MULTI_PROCESS = ["--runner=DirectRunner", "--direct_num_workers=2", "--direct_running_mode=multi_processing"]


def write_beam_corpus(directory):
    """Three files and a blank one: made-up words from a few syllables (many pairs to merge, many seen once),
    the multilingual lines, a word of 25 characters, a BOM, CRLF endings, a last line without its newline, and
    characters the tokenizer drops or splits at (NUL, U+0085, U+2028, zero-width space)."""
    import random

    draw = random.Random(7)
    syllables = ["ka", "lo", "mi", "re", "su", "tan", "vel", "qu", "ä", "Ö", "ng"]
    words = ["".join(draw.choice(syllables) for _ in range(draw.randint(1, 4))) for _ in range(3000)]
    lines = [" ".join(words[i:i + 12]) + draw.choice([".", ",", "!", ""]) for i in range(0, len(words), 12)]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "a.txt").write_bytes(("\ufeff" + "\n".join(lines[:120]) + "\n").encode("utf-8"))
    (directory / "b.txt").write_bytes(("\r\n".join(lines[120:]) + "\r\n" + MULTILINGUAL * 3).encode("utf-8"))
    long_word = "Incomprehensibilities" + "abcd"  # 25 characters: over --max_input_chars_per_word=20
    (directory / "c.txt").write_bytes(
        f"{long_word} {long_word} kalo\x00mi su\x85re tan\u2028vel qu\u200bng\n{MULTILINGUAL}last line".encode("utf-8"))
    (directory / "d.txt").write_bytes(b"\n \n")
    return f"{directory}/a.txt,{directory}/[bcd].txt"


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_beam_counts_give_the_one_process_vocab_byte_for_byte(tmp_path, capsys, monkeypatch, do_lower_case):
    """`--beam` on two worker processes against the one-process run: the same vocab.txt bytes and the same
    summary (words, distinct words, files); what an earlier failed run left in the counts directory is not read."""
    from tools import build_vocab as tool

    # The worker processes start a fresh Python and unpickle the DoFn there:
    # they import this checkout, whatever copy the environment has installed.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    inputs = write_beam_corpus(tmp_path / "corpus")
    common = [f"--input_file={inputs}", "--vocab_size=400", "--num_unused=3", "--max_input_chars_per_word=20",
              "--do_lower_case" if do_lower_case else "--nodo_lower_case"]
    one, beam = tmp_path / "one" / "vocab.txt", tmp_path / "beam" / "vocab.txt"
    tool.main(common + [f"--output_file={one}"])
    stale = tmp_path / "beam" / "vocab.txt.counts"  # As a killed run leaves it.
    stale.mkdir(parents=True)
    (stale / "words-00000-of-00002").write_text("zzzz\t99999\n", encoding="utf-8")
    (stale / "long_words.json").write_text('{"distinct": 9, "occurrences": 9, "shortest": 30}', encoding="utf-8")
    tool.main(common + [f"--output_file={beam}", "--beam", *MULTI_PROCESS])
    assert beam.read_bytes() == one.read_bytes()
    assert os.listdir(beam.parent) == ["vocab.txt"]  # The counts directory removed.
    vocab = one.read_text(encoding="utf-8").split("\n")
    accented = {"##ä", "Ö"} & set(vocab)  # Kept cased; uncased, "a" and "o".
    assert len(vocab) == 401 and accented == (set() if do_lower_case else {"##ä", "Ö"})
    assert not [token for token in vocab if "ncomprehensibilit" in token.lower()]  # The long word not learned from.
    summaries = [line.split(" counted in ")[0] for line in capsys.readouterr().err.splitlines() if "words (" in line]
    assert len(summaries) == 2 and summaries[0] == summaries[1] and "in 4 file(s)" in summaries[0], summaries


@pytest.mark.parametrize("case", ["not_utf8", "words_too_long"])
def test_beam_bad_input_is_the_one_process_line_and_leaves_the_earlier_vocab(tmp_path, capsys, monkeypatch, case):
    """The tool's one error line (Beam's own logging aside), as the one-process run says it; nothing written."""
    from keras_bert_impl.cli import run_tool as run_main
    from tools import build_vocab as tool

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    good = tmp_path / "good.txt"
    good.write_text("plenty of words here\n" * 3, encoding="utf-8")
    output = tmp_path / "vocab.txt"
    output.write_text("earlier\n", encoding="utf-8")
    flags = [f"--output_file={output}", "--vocab_size=500", "--beam"]
    if case == "not_utf8":
        (tmp_path / "bad.txt").write_bytes(b"fine\n" * 4 + b"caf\xe9 latin-1\n" + b"fine\n" * 3)
        flags += [f"--input_file={good},{tmp_path}/bad.txt", *MULTI_PROCESS]
        expected, code = f"build_vocab: error: {tmp_path}/bad.txt:5: not valid UTF-8 (byte 3: b'\\xe9')", 1
    else:
        good.write_text("plenty words here\n" * 3, encoding="utf-8")
        flags += [f"--input_file={good}", "--max_input_chars_per_word=3"]
        expected, code = ("build_vocab: error: --max_input_chars_per_word 3 leaves none of the words to learn "
                          "from (the shortest has 4 characters) (see --help)"), 2
    one_process = [flag for flag in flags if flag != "--beam" and flag not in MULTI_PROCESS]
    assert run_main(tool.main, one_process, prog="build_vocab") == code
    assert capsys.readouterr().err.strip().splitlines() == [expected]
    assert run_main(tool.main, flags, prog="build_vocab") == code
    assert capsys.readouterr().err.strip().splitlines() == [expected]
    assert sorted(os.listdir(tmp_path)) == ["bad.txt", "good.txt", "vocab.txt"][case != "not_utf8":]
    assert output.read_text(encoding="utf-8") == "earlier\n"


def test_counts_of_an_unfinished_run_are_refused(tmp_path):
    from keras_bert_impl.data.beam_word_counts import LongWords, read_counts
    from keras_bert_impl.errors import InputFileError

    (tmp_path / "words-00001-of-00002").write_text("ab\t3\nc\t1\n", encoding="utf-8")
    (tmp_path / "long_words.json").write_text('{"distinct": 1, "occurrences": 2, "shortest": 30}', encoding="utf-8")
    with pytest.raises(InputFileError, match="the word counts are incomplete \\(1 shard"):
        read_counts(str(tmp_path))
    (tmp_path / "words-00000-of-00002").write_text("d\u2028e\t2\n", encoding="utf-8")  # a line separator inside a word
    counted = read_counts(str(tmp_path))
    assert counted.counts == {"ab": 3, "c": 1, "d\u2028e": 2} and counted.long_words == LongWords(1, 2, 30)
