"""The in-graph tokenizer's ASCII fast path: equal to `FullTokenizer` (and to a
literal transcription of the original `BasicTokenizer`) on ASCII text, cased
and uncased, traced as served; taken for an all-ASCII batch and only then."""

import unicodedata

import hypothesis
import pytest
import tensorflow as tf
from hypothesis import strategies as st

from keras_bert_impl.tokenization import FullTokenizer
from keras_bert_impl.tokenization import in_graph
from keras_bert_impl.tokenization.full_tokenizer import is_cjk_char, is_control, is_punctuation, is_whitespace
from keras_bert_impl.tokenization.in_graph import InGraphTokenizer, build_tables

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PRINTABLE = [chr(cp) for cp in range(33, 127)]
# Every printable ASCII character, alone and as a continuation: every ASCII
# word of up to 200 characters is pieced without [UNK], so the ids spell out
# each word exactly (and the few whole words check the longest match).
VOCAB = SPECIAL + PRINTABLE + ["##" + c for c in PRINTABLE] + ["hello", "world", "the", "##ing", "don", "Hello"]

BETWEEN_WORDS = [f"ab{chr(cp)}cd" for cp in range(128)] + [f"He{chr(cp)}LLo {chr(cp)}x{chr(cp)}" for cp in range(128)]
EDGE_CASES = [
    "".join(map(chr, range(128))),  # all 128 bytes in one string
    "".join(map(chr, reversed(range(128)))),
    "a\t\t\nb\r\n\rc\n\n\n\td",  # whitespace runs
    "\t\n\r \r\n",
    "  leading and trailing \t\n",
    "",
    " ",
    "\x00\x01\x7f",  # only removed characters
    "a\x00b c\x7fd e\x0bf g\x1cH",  # removed characters join words
    "!!!...,,,$$$(((a)))[[x]]{y}<z>",  # punctuation runs
    "don't e.g. a--b 3.14 50% #1 @user ~/path\\x ^_^ `q` |p|",
    "[CLS] hello [SEP]",
    "UPPER lower MiXeD CASE",
    "a" * 200,  # the [UNK] rule: 200 characters are fine, 201 not
    "a" * 201,
    "A" * 201 + " ok",
    "x" * 250 + "!" + "y" * 3,
    "b" * 199 + "." + "c" * 201,
    "The weather is lovely today.",
]
ASCII_TEXTS = BETWEEN_WORDS + EDGE_CASES
NON_ASCII = ["café", b"abc\xff", b"\x80", "東京 ΟΔΥΣΣΕΥΣ", "a\u00a0b"]


def original_basic_tokenize(text, do_lower_case):
    """google-research/bert `BasicTokenizer.tokenize`, character by character."""
    text = text.decode("utf-8", "ignore") if isinstance(text, bytes) else text
    cleaned = []
    for char in text:
        cp = ord(char)
        if cp == 0 or cp == 0xFFFD or is_control(char):
            continue
        cleaned.append(" " if is_whitespace(char) else char)
    text = "".join(" " + c + " " if is_cjk_char(ord(c)) else c for c in cleaned)
    split_tokens = []
    for token in text.strip().split():
        if do_lower_case:
            token = token.lower()
            token = "".join(c for c in unicodedata.normalize("NFD", token) if unicodedata.category(c) != "Mn")
        output, start_new_word = [], True
        for char in token:
            if is_punctuation(char):
                output.append([char])
                start_new_word = True
            else:
                if start_new_word:
                    output.append([])
                start_new_word = False
                output[-1].append(char)
        split_tokens.extend("".join(x) for x in output)
    return " ".join(split_tokens).split()


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("ascii_vocab") / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tables():
    return build_tables()


class CountingTokenizer(InGraphTokenizer):
    """Counts, in the graph, how often each branch of `basic_tokenize` ran."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.ascii_runs = tf.Variable(0, trainable=False)
        self.unicode_runs = tf.Variable(0, trainable=False)

    def _ascii_words(self, texts):
        # The control dependency makes the count part of the branch that ran.
        with tf.control_dependencies([self.ascii_runs.assign_add(1)]):
            return super()._ascii_words(tf.identity(texts))

    def _unicode_words(self, texts):
        with tf.control_dependencies([self.unicode_runs.assign_add(1)]):
            return super()._unicode_words(tf.identity(texts))


def _traced(function):
    return tf.function(function, input_signature=[tf.TensorSpec([None], tf.string)])


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def case(request, vocab_file, tables):
    """(do_lower_case, FullTokenizer, traced tokenize, traced basic_tokenize)."""
    python = FullTokenizer(str(vocab_file), do_lower_case=request.param)
    tokenizer = InGraphTokenizer(VOCAB, do_lower_case=request.param, tables=tables)
    return request.param, python, _traced(tokenizer.tokenize), _traced(tokenizer.basic_tokenize)


def _check(case, texts):
    do_lower_case, python, tokenize, basic_tokenize = case
    batch = tf.constant([t.encode("utf-8") if isinstance(t, str) else t for t in texts])
    words = [[w.decode("utf-8") for w in row] for row in basic_tokenize(batch).to_list()]
    for text, got in zip(texts, words):
        assert got == python.basic_tokenizer.tokenize(text) == original_basic_tokenize(text, do_lower_case), repr(text)
    ids = tokenize(batch).to_list()
    for text, got in zip(texts, ids):
        assert got == python.convert_tokens_to_ids(python.tokenize(text)), repr(text)


def test_ascii_regexes_are_the_originals_character_classes():
    chars = tf.constant([bytes([cp]) for cp in range(128)])
    removed = tf.strings.regex_full_match(chars, in_graph._ASCII_REMOVED).numpy().tolist()
    punctuation = tf.strings.regex_full_match(chars, in_graph._ASCII_PUNCTUATION).numpy().tolist()
    assert removed == [cp == 0 or is_control(chr(cp)) for cp in range(128)]
    assert punctuation == [is_punctuation(chr(cp)) for cp in range(128)]
    ascii_only = tf.strings.regex_full_match(
        tf.constant([bytes(range(128)), b"", b"caf\xc3\xa9", b"\x80", b"a\xff", b"\xc3", b"\xed\xa0\x80"]),
        in_graph._ASCII_ONLY,
    )
    assert ascii_only.numpy().tolist() == [True, True, False, False, False, False, False]


def test_ascii_batch_equals_full_tokenizer(case):
    _check(case, ASCII_TEXTS)


def test_each_ascii_text_alone_equals_full_tokenizer(case):
    for text in EDGE_CASES:
        _check(case, [text])


@pytest.mark.parametrize("odd_one", NON_ASCII)
def test_mixed_batch_takes_the_full_path_and_every_row_still_matches(case, odd_one):
    _check(case, EDGE_CASES + [odd_one] + BETWEEN_WORDS[::9])


def test_both_paths_give_the_same_ascii_rows(case):
    _, _, _, basic_tokenize = case
    fast = basic_tokenize(tf.constant(ASCII_TEXTS)).to_list()
    full = basic_tokenize(tf.constant(ASCII_TEXTS + ["é"])).to_list()[:-1]
    assert fast == full


ASCII_CHARS = st.characters(max_codepoint=127)
SEPARATORS_AND_PUNCTUATION = st.sampled_from("aZz9 \t\n\r\x00\x0b\x0c\x1c\x1f\x7f.,'-[]\\^`{}~!/:@")
ASCII_TEXT = st.text(st.one_of(ASCII_CHARS, SEPARATORS_AND_PUNCTUATION), max_size=60)


@hypothesis.settings(max_examples=60, deadline=None, derandomize=True)
@hypothesis.given(st.lists(ASCII_TEXT, min_size=1, max_size=6))
def test_in_graph_equals_python_on_arbitrary_ascii(case, texts):
    _check(case, texts)


def test_fast_path_is_taken_exactly_for_all_ascii_batches(vocab_file, tables):
    tokenizer = CountingTokenizer(VOCAB, do_lower_case=True, tables=tables)
    traced = _traced(tokenizer.tokenize)

    def runs(texts, function):
        before = (tokenizer.ascii_runs.numpy(), tokenizer.unicode_runs.numpy())
        function(tf.constant(texts, tf.string))
        return tokenizer.ascii_runs.numpy() - before[0], tokenizer.unicode_runs.numpy() - before[1]

    for function in (traced, tokenizer.tokenize):  # as served, and eagerly
        assert runs(["Hello, world!", "".join(map(chr, range(128)))], function) == (1, 0)
        assert runs([], function) == (1, 0)
        assert runs(["Hello, world!", "café"], function) == (0, 1)
        assert runs([b"plain", b"\xff"], function) == (0, 1)  # invalid UTF-8 is not ASCII
        assert runs(["\u00a0"], function) == (0, 1)
