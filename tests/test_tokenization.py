"""Tests of keras_bert_impl.tokenization against the original BERT tokenizer.

The oracle is tf-models' `official/nlp/tools/tokenization.py`, a copy of
google-research/bert `tokenization.py`. It differs from the original in one
default only: its `WordpieceTokenizer` allows 400 characters per word where the
original allows 200, so every oracle here is set back to 200.
"""

import re

import hypothesis
import pytest
from hypothesis import strategies as st
from official.nlp.tools import tokenization as orig

from keras_bert_impl.errors import ConfigError, VocabError
from keras_bert_impl.tokenization import (
    BasicTokenizer,
    FullTokenizer,
    WordpieceTokenizer,
    check_special_tokens,
    convert_to_unicode,
    load_vocab,
    validate_case_matches_checkpoint,
    whitespace_tokenize,
)

ORIGINAL_MAX_INPUT_CHARS_PER_WORD = 200

# Real sentences, plus the characters the original treats specially.
MULTILINGUAL_SENTENCES = [
    "The quick brown fox jumps over the lazy dog; it's 3.14 o'clock (roughly)!",
    "Hello, WORLD!!! Don't over-think it: e-mail me at john.doe@example.com, $5/hr.",
    "unaffable UNWANTED running jumped tokenization's state-of-the-art #hashtag",
    "Über den Wolken muss die Freiheit wohl grenzenlos sein, sagt Reinhard Mey.",
    "Straße, Größe, Fußgängerübergänge: Mädchen und Jungen spielen Fußball.",
    "Ça coûte très cher, à mon avis ; l'élève préfère le théâtre où l'on rêve.",
    "¿Dónde está la biblioteca? ¡Allí, señor! Niño, pingüino, acción.",
    "Москва — столица России; «Война и мир» написал Лев Толстой в 1869 году.",
    "Ἐν ἀρχῇ ἦν ὁ λόγος· ΟΔΟΣ ΣΑΣ Οδυσσεύς ΣΊΣΥΦΟΣ ὈΔΥΣΣΕΎΣ.",
    "اللغة العربية جميلة، أليس كذلك؟ نعم! ١٢٣ ٤٥٦",
    "עברית היא שפה שמית; שָׁלוֹם עֲלֵיכֶם, מה שלומך?",
    "हिन्दी भारत की राजभाषा है। नमस्ते, आप कैसे हैं?",
    "ภาษาไทยเขียนติดกันโดยไม่เว้นวรรค สวัสดีครับ",
    "北京是中华人民共和国的首都，人口超过两千万。我爱自然语言处理！",
    "東京タワーは日本の観光名所です。ひらがな、カタカナ、漢字を使います。",
    "한국어는 한글로 씁니다. 서울특별시는 대한민국의 수도입니다!",
    "Emoji: 😀👍🏽 👨‍👩‍👧‍👦 🇩🇪 ❤️ ☕ and symbols € £ ¥ © ® ™ ° ± § ¶ • … ‰",
    "Quotes “curly” ‘single’ „German“ «French» ‹one› — dashes – and ‐hyphens‑",
    "Math ∑∫√∞≠≤≥ ½ ¼ x² H₂O, arrows →←↑ and brackets ⟨a⟩ 【b】 「c」 『d』",
    "Whitespace:\u00a0nbsp\u2003emsp\u3000ideographic\u2009thin\u202fnarrow\u205fmath"
    "\u1680ogham\u2028line\u2029para\u0085nel\u000bvt\u000cff\u001cfs",
    "Zero\u200bwidth\u200cjoiners\u200dand\u2060word\ufeffBOM\u00adsoft\u200ehyphen",
    "Control\x00NUL\x01\x07\x1b[0mescape\x7fdel\ufffdreplacement\ufffeNONCHAR tab\there",
    "Combining: e\u0301 a\u0308 n\u0303 o\u0302\u0323 Z\u0335\u0327a\u0361l\u0489go\u20dd",
    "Kelvin \u212a, Ångström \u212b, ligature \ufb01ne, İstanbul, ǅemal, ΐ, ẞ, ŉ",
    "Greek varia \u1fef and oxia \u1ffd, ano teleia \u0387, question mark \u037e;",
    "CJK ext:a\U00020000b\U0002a700c\U0002b740d\U0002b820e\uf900f\U0002f800g 〇ㄅ⺀々",
    "Fullwidth ＡＢＣ１２３！？ halfwidth ｶﾀｶﾅ and circled ①②③ ⓐⓑ",
    "   \t\n\r  leading and trailing whitespace only matters between words \r\n",
    "",
    " \u3000\u00a0 ",
    "a" * 199 + " " + "b" * 200 + " " + "c" * 201,
]


def original_tokenizer(vocab_file, do_lower_case):
    """The oracle, with the original's 200-character word limit."""
    tokenizer = orig.FullTokenizer(str(vocab_file), do_lower_case=do_lower_case)
    tokenizer.wordpiece_tokenizer.max_input_chars_per_word = ORIGINAL_MAX_INPUT_CHARS_PER_WORD
    return tokenizer


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def tokenizer_pair(request, bert_vocab_file):
    """(ours, original) over the real bert-base-uncased vocabulary."""
    do_lower_case = request.param
    return (
        FullTokenizer(bert_vocab_file, do_lower_case=do_lower_case),
        original_tokenizer(bert_vocab_file, do_lower_case),
    )


def write_vocab(directory, tokens, name="vocab.txt"):
    path = directory / name
    path.write_text("".join(token + "\n" for token in tokens), encoding="utf-8")
    return path


# ----------------------------------------------------------------------------
# Equality with the original.
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("text", MULTILINGUAL_SENTENCES)
def test_matches_original_on_multilingual_text(tokenizer_pair, text):
    ours, original = tokenizer_pair
    assert ours.basic_tokenizer.tokenize(text) == original.basic_tokenizer.tokenize(text)
    assert ours.tokenize(text) == original.tokenize(text)
    assert ours.tokenize(text.encode("utf-8")) == original.tokenize(text.encode("utf-8"))


def test_matches_original_on_all_sentences_at_once(tokenizer_pair):
    ours, original = tokenizer_pair
    text = "\n".join(MULTILINGUAL_SENTENCES)
    assert ours.tokenize(text) == original.tokenize(text)


def test_real_vocab_matches_original_loader(bert_vocab_file):
    vocab = load_vocab(bert_vocab_file)
    assert vocab == orig.load_vocab(str(bert_vocab_file))
    # Well-known ids of bert-base-uncased.
    assert len(vocab) == 30522
    assert [vocab[t] for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [
        0, 100, 101, 102, 103,
    ]
    check_special_tokens(vocab, bert_vocab_file)


@pytest.mark.parametrize("length", [199, 200, 201])
@pytest.mark.parametrize(
    "unit",
    ["a", "ab", "é", "e\u0301", "İ", "中"],
    ids=["ascii", "ascii2", "precomposed", "decomposed", "dotted-I", "cjk"],
)
def test_word_length_limit_matches_original(tokenizer_pair, unit, length):
    ours, original = tokenizer_pair
    word = (unit * length)[:length]
    text = f"x {word} y"
    assert ours.tokenize(text) == original.tokenize(text)


def test_word_length_limit_is_200_chars_after_basic_tokenization(bert_vocab_file):
    ours = FullTokenizer(bert_vocab_file, do_lower_case=True)
    assert ours.tokenize("a" * 201) == ["[UNK]"]
    assert "[UNK]" not in ours.tokenize("a" * 200)
    # 200 dotted capital I lower-case to 400 chars ("i" + U+0307), and the
    # accent strip brings them back to 200: still under the limit.
    assert "[UNK]" not in ours.tokenize("\u0130" * 200)
    cased = FullTokenizer(bert_vocab_file, do_lower_case=False)
    # Cased text keeps the combining accent: 101 x "e\u0301" is 202 chars.
    assert cased.tokenize("e\u0301" * 101) == ["[UNK]"]


def _each_char_between_letters(code_points):
    return "".join(f"x{chr(cp)}y " for cp in code_points if not 0xD800 <= cp <= 0xDFFF)


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_basic_tokenizer_matches_original_on_every_code_point(do_lower_case):
    # All of the BMP, every CJK range edge, and a stride through planes 1-16.
    cjk_edges = [
        cp + delta
        for low, high in [(0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
                          (0x2B820, 0x2CEAF), (0x2F800, 0x2FA1F)]
        for cp in (low, high)
        for delta in (-1, 0, 1)
    ]
    code_points = [*range(0x10000), *cjk_edges, *range(0x10000, 0x110000, 89)]
    text = _each_char_between_letters(code_points)
    ours = BasicTokenizer(do_lower_case=do_lower_case).tokenize(text)
    assert ours == orig.BasicTokenizer(do_lower_case=do_lower_case).tokenize(text)


# Characters the tokenizer treats specially, to make random text hit them often.
_TRICKY_CHARS = (
    " \t\n\r\x00\x0b\x0c\x1c\x85\xa0\u1680\u2000\u2003\u200b\u200d\u2028\u2029\u3000"
    "\ufeff\ufffd\u0301\u0308\u0345\u1fef\u1ffd\u037e\u0387\u0130\u03a3\u212a"
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~¡¿«»“”—…·、。，"
    "中文日本語\uf900\U00020000\U0002f800한국ひらがなカタカナ"
    "aeiouxyzAEIOUXYZéÉñÑßẞøÅçüÜ0123456789"
)
_RANDOM_TEXT = st.text(
    alphabet=st.one_of(st.characters(), st.sampled_from(_TRICKY_CHARS)), max_size=80
) | st.lists(st.sampled_from(["the", "un", "##able", "running", "Zürich", "ΣΑΣ"]),
             max_size=8).map(" ".join)


@hypothesis.settings(max_examples=300, deadline=None, derandomize=True, database=None)
@hypothesis.given(text=_RANDOM_TEXT)
def test_matches_original_on_random_unicode(tokenizer_pair, text):
    ours, original = tokenizer_pair
    assert ours.tokenize(text) == original.tokenize(text)


@hypothesis.settings(max_examples=100, deadline=None, derandomize=True, database=None)
@hypothesis.given(data=st.binary(max_size=60))
def test_matches_original_on_arbitrary_bytes(tokenizer_pair, data):
    ours, original = tokenizer_pair
    assert ours.tokenize(data) == original.tokenize(data)


# ----------------------------------------------------------------------------
# Hand-computed cases on a small vocabulary.
# ----------------------------------------------------------------------------

SMALL_VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "want", "##want", "##ed", "wa", "un", "runn", "##ing", ",",
    "ab", "a", "##bc", "##b", "abc", "##", "#",
]


@pytest.fixture
def small_vocab_file(tmp_path):
    return write_vocab(tmp_path, SMALL_VOCAB)


def test_full_tokenizer_on_small_vocab(small_vocab_file):
    tokenizer = FullTokenizer(small_vocab_file, do_lower_case=True)
    tokens = tokenizer.tokenize("UNwant\u00e9d,running")
    assert tokens == ["un", "##want", "##ed", ",", "runn", "##ing"]
    ids = tokenizer.convert_tokens_to_ids(tokens)
    assert ids == [9, 6, 7, 12, 10, 11]
    assert tokenizer.convert_ids_to_tokens(ids) == tokens
    # Cased: "UNwant" has no piece starting with "U", and "é" is kept.
    cased = FullTokenizer(small_vocab_file, do_lower_case=False)
    assert cased.tokenize("UNwant\u00e9d,running") == ["[UNK]", ",", "runn", "##ing"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("abc", ["abc"]),  # the whole word is a token: longest match wins
        ("abcbc", ["abc", "##bc"]),
        ("abb", ["ab", "##b"]),
        ("abbcb", ["ab", "##bc", "##b"]),
        ("wanted", ["want", "##ed"]),
        ("wawant", ["wa", "##want"]),
        ("abcd", ["[UNK]"]),  # one uncoverable character spoils the whole word
        ("b", ["[UNK]"]),  # "##b" only continues a word
        ("##b", ["#", "#", "[UNK]"]),  # "#" is punctuation, split off first
        ("a,b", ["a", ",", "[UNK]"]),
        ("", []),
        (" \u3000 ", []),
    ],
)
def test_wordpiece_greedy_longest_match_first(small_vocab_file, text, expected):
    tokenizer = FullTokenizer(small_vocab_file, do_lower_case=True)
    assert tokenizer.tokenize(text) == expected
    assert tokenizer.tokenize(text) == original_tokenizer(small_vocab_file, True).tokenize(text)


def test_wordpiece_is_greedy_not_optimal():
    # "a" + "##bc" would cover "abc", but the greedy first match "ab" leaves "c".
    wordpiece = WordpieceTokenizer({"ab": 0, "a": 1, "##bc": 2})
    assert wordpiece.tokenize("abc") == ["[UNK]"]
    assert orig.WordpieceTokenizer({"ab": 0, "a": 1, "##bc": 2}).tokenize("abc") == ["[UNK]"]


@pytest.mark.parametrize("vocab, text", [
    ({"a": 0, "b": 1}, "ab"),  # every token one character: no "##" piece fits
    ({"a": 0, "##": 1}, "aa"),
    ({"ab": 0, "c": 1}, "abc abab"),
    ({}, "a"),
])
def test_wordpiece_with_only_short_tokens_matches_the_original(vocab, text):
    """A vocabulary whose tokens are all shorter than 3 characters (was: an
    endless loop, the "##" piece's length going negative)."""
    import threading

    result = []
    worker = threading.Thread(target=lambda: result.append(WordpieceTokenizer(vocab).tokenize(text)), daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert result, f"WordpieceTokenizer({vocab}).tokenize({text!r}) did not return"
    assert result[0] == orig.WordpieceTokenizer(vocab).tokenize(text)


def test_wordpiece_tokenizer_direct_input():
    vocab = {token: index for index, token in enumerate(SMALL_VOCAB)}
    wordpiece = WordpieceTokenizer(vocab, max_input_chars_per_word=4)
    # Not through BasicTokenizer: "##b" is looked up whole at the word start.
    text = "##b want wanted  abc\tabcbc"
    expected = ["##b", "want", "[UNK]", "abc", "[UNK]"]
    assert wordpiece.tokenize(text) == expected
    oracle = orig.WordpieceTokenizer(vocab, max_input_chars_per_word=4)
    assert oracle.tokenize(text) == expected
    assert WordpieceTokenizer(vocab, unk_token="<?>").tokenize("zz") == ["<?>"]


def test_wordpiece_cache_is_bounded_and_transparent():
    vocab = {"a": 0, "##a": 1, "b": 2, "##b": 3, "[UNK]": 4}
    wordpiece = WordpieceTokenizer(vocab, cache_size=2)
    words = ["ab", "ba", "aab", "c", "ab", "ba", "bbb", "ab"]
    uncached = WordpieceTokenizer(vocab, cache_size=0)
    for _ in range(2):
        assert wordpiece.tokenize_words(words) == uncached.tokenize_words(words)
        assert len(wordpiece._cache) <= 2
    assert len(uncached._cache) == 0
    expected = orig.WordpieceTokenizer(vocab).tokenize(" ".join(words))
    assert uncached.tokenize_words(words) == expected
    # Changing a setting after use must not serve stale cached words.
    wordpiece.max_input_chars_per_word = 2
    wordpiece.unk_token = "<unk>"
    assert wordpiece.tokenize_words(["ab", "aab", "c"]) == ["a", "##b", "<unk>", "<unk>"]


def test_from_vocab_equals_file_tokenizer(small_vocab_file):
    vocab = {token: index for index, token in enumerate(SMALL_VOCAB)}
    from_dict = FullTokenizer.from_vocab(vocab, do_lower_case=False)
    from_file = FullTokenizer(small_vocab_file, do_lower_case=False)
    assert from_dict.vocab == from_file.vocab
    assert from_dict.inv_vocab == from_file.inv_vocab
    assert from_dict.do_lower_case is False
    text = "wanted, Abc abbcb running"
    assert from_dict.tokenize(text) == from_file.tokenize(text) == [
        "want", "##ed", ",", "[UNK]", "ab", "##bc", "##b", "runn", "##ing",
    ]


def test_convert_round_trip_on_real_vocab(bert_vocab_file):
    tokenizer = FullTokenizer(bert_vocab_file, do_lower_case=True)
    ids = list(range(0, 30522, 97))
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert tokenizer.convert_tokens_to_ids(tokens) == ids
    with pytest.raises(KeyError):
        tokenizer.convert_tokens_to_ids(["not-a-token-in-this-vocab"])
    with pytest.raises(KeyError):
        tokenizer.convert_ids_to_tokens([30522])


def test_basic_tokenizer_hand_cases():
    lower = BasicTokenizer(do_lower_case=True)
    cased = BasicTokenizer(do_lower_case=False)
    assert lower.tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["hello", "!", "how", "are", "you", "?"]
    assert cased.tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["HeLLo", "!", "how", "Are", "yoU", "?"]
    assert lower.tokenize("ah\u535a\u63a8zz") == ["ah", "\u535a", "\u63a8", "zz"]
    # Hangul and kana are not "CJK characters": no split.
    assert cased.tokenize("한국ひらがな") == ["한국ひらがな"]
    # NUL, U+FFFD, controls (incl. vertical tab) vanish and join their neighbours;
    # zero-width space is a control (Cf) too.
    assert cased.tokenize("a\x00b\ufffdc\x0bd\u200be") == ["abcde"]
    # Unicode spaces split; U+2028 is not cleaned but still splits as whitespace.
    assert cased.tokenize("a\u00a0b\u3000c\u2028d") == ["a", "b", "c", "d"]
    # "$", "^", "`" are symbols in Unicode but punctuation here; "€" is not.
    assert cased.tokenize("$5^2`x€") == ["$", "5", "^", "2", "`", "x€"]
    # U+1FEF (a symbol) decomposes to "`" under NFD, which only the uncased path runs.
    assert lower.tokenize("a\u1fefb") == ["a", "`", "b"]
    assert cased.tokenize("a\u1fefb") == ["a\u1fefb"]
    # Accents are stripped only when lower-casing; final sigma decided per word.
    assert lower.tokenize("Café ΟΔΟΣ") == ["cafe", "οδος"]
    assert cased.tokenize("Café") == ["Café"]


# ----------------------------------------------------------------------------
# Vocabulary files and their errors.
# ----------------------------------------------------------------------------


def test_load_vocab_line_semantics(tmp_path):
    path = tmp_path / "vocab.txt"
    # Duplicates keep the last id, empty lines are "" tokens, lines are
    # stripped, TF's line reader drops every "\r", the last line needs no "\n".
    path.write_bytes(
        b"[PAD]\r\n dup \n\nx\ry\n\xc2\xa0nbsp\xe2\x80\x83\ndup\n\n\xef\xbb\xbfbom\nlast"
    )
    vocab = load_vocab(path)
    assert list(vocab.items()) == [
        ("[PAD]", 0), ("dup", 5), ("", 6), ("xy", 3), ("nbsp", 4), ("\ufeffbom", 7), ("last", 8),
    ]
    assert vocab == orig.load_vocab(str(path))
    assert list(vocab) == list(orig.load_vocab(str(path)))


def test_load_vocab_empty_file(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    assert load_vocab(path) == {} == orig.load_vocab(str(path))


def test_missing_vocab_file_names_the_file(tmp_path):
    missing = tmp_path / "no_such_vocab.txt"
    with pytest.raises(VocabError, match="no_such_vocab.txt"):
        load_vocab(missing)
    with pytest.raises(VocabError, match="no_such_vocab.txt"):
        FullTokenizer(missing)
    with pytest.raises(VocabError, match=re.escape(str(tmp_path))):
        load_vocab(tmp_path)  # a directory


def test_non_utf8_vocab_names_file_and_line(tmp_path):
    path = tmp_path / "latin1_vocab.txt"
    path.write_bytes(b"[PAD]\n[UNK]\ncaf\xe9\n")
    with pytest.raises(VocabError, match=r"latin1_vocab\.txt:3: .*UTF-8") as raised:
        load_vocab(path)
    assert "\n" not in str(raised.value)


def test_check_special_tokens_names_file_and_tokens(tmp_path):
    path = write_vocab(tmp_path, ["[PAD]", "[UNK]", "[CLS]", "hello"])
    vocab = load_vocab(path)
    with pytest.raises(VocabError) as raised:
        check_special_tokens(vocab, path)
    message = str(raised.value)
    assert str(path) in message and "[SEP]" in message and "[MASK]" in message
    assert "[CLS]" not in message
    check_special_tokens(vocab, path, required=("[UNK]", "hello"))


# ----------------------------------------------------------------------------
# Small helpers and the casing check.
# ----------------------------------------------------------------------------


def test_convert_to_unicode_and_whitespace_tokenize():
    data = b"caf\xc3\xa9\xff!"
    assert convert_to_unicode(data) == "café!" == orig.convert_to_unicode(data)
    assert convert_to_unicode("x") == "x"
    with pytest.raises(ValueError):
        convert_to_unicode(3)
    text = " a\u3000b\n\tc\u2028d  "
    assert whitespace_tokenize(text) == ["a", "b", "c", "d"] == orig.whitespace_tokenize(text)
    assert whitespace_tokenize("   ") == []


def _original_error(do_lower_case, init_checkpoint):
    try:
        orig.validate_case_matches_checkpoint(do_lower_case, init_checkpoint)
    except ValueError as error:
        return str(error)
    return None


@pytest.mark.parametrize(
    "do_lower_case, init_checkpoint, raises",
    [
        (True, "gs://b/uncased_L-12_H-768_A-12/bert_model.ckpt", False),
        (False, "gs://b/uncased_L-12_H-768_A-12/bert_model.ckpt", True),
        (False, "/m/multilingual_L-12_H-768_A-12/bert_model.ckpt-1000", True),
        (False, "chinese_L-12_H-768_A-12/bert_model.ckpt", True),
        (True, "/m/cased_L-24_H-1024_A-16/bert_model.ckpt.index", True),
        (True, "/m/multi_cased_L-12_H-768_A-12/bert_model.ckpt", True),
        (False, "/m/multi_cased_L-12_H-768_A-12/bert_model.ckpt", False),
        (False, "/m/my_finetuned_model/bert_model.ckpt", False),
        (True, "/m/cased_L-12_H-768_A-12/model.ckpt", False),  # not the released name
        (True, "/m/cased_L-12_H-768_A-12/bert_modelXckpt", True),  # "." matches any char
        (False, "", False),
        (False, None, False),
    ],
)
def test_validate_case_matches_checkpoint(do_lower_case, init_checkpoint, raises):
    expected = _original_error(do_lower_case, init_checkpoint)
    assert (expected is not None) == raises
    if raises:
        with pytest.raises(ConfigError) as raised:
            validate_case_matches_checkpoint(do_lower_case, init_checkpoint)
        assert str(raised.value) == expected
    else:
        validate_case_matches_checkpoint(do_lower_case, init_checkpoint)
