"""The original BERT WordPiece tokenizer, exact and fast.

Token for token this reproduces google-research/bert `tokenization.py` for every
input, cased and uncased:

1. `BasicTokenizer` cleans the text (drops NUL, U+FFFD and control characters,
   turns every whitespace character into a space), puts spaces around CJK
   ideographs, splits on whitespace, lower-cases and strips accents (NFD, then
   drop every `Mn` mark) when `do_lower_case`, and splits off each punctuation
   character (all non-alphanumeric printable ASCII plus Unicode `P*`).
2. `WordpieceTokenizer` splits each word greedily, longest match first, into
   vocabulary pieces (continuations prefixed with `##`); a word that cannot be
   covered, or that is longer than `max_input_chars_per_word`, becomes `[UNK]`.

The original walks the text one Python character at a time. Here each step is a
whole-string operation (`str.translate` with a character table the tokenizer
instance fills lazily, `str.lower`, `unicodedata.normalize`, `str.split`), and
WordPiece results are memoised per word in a bounded cache owned by the
instance. Running `lower` and NFD on the whole cleaned text instead of token by
token gives the same result because tokens are separated by whitespace, which
is neither cased nor case-ignorable (so Greek final sigma is decided the same
way) and has canonical combining class 0 (so NFD never reorders across it).
"""

import collections
import os
import re
import unicodedata

from keras_bert_impl import filesystem
from keras_bert_impl.errors import ConfigError, VocabError

# The "CJK character" ranges of the original `_is_chinese_char` (inclusive).
# Hangul, Hiragana and Katakana are deliberately not in them.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)

# Checkpoint directory names of the released Google models, by casing.
_LOWER_CASED_MODELS = (
    "uncased_L-24_H-1024_A-16",
    "uncased_L-12_H-768_A-12",
    "multilingual_L-12_H-768_A-12",
    "chinese_L-12_H-768_A-12",
)
_CASED_MODELS = (
    "cased_L-12_H-768_A-12",
    "cased_L-24_H-1024_A-16",
    "multi_cased_L-12_H-768_A-12",
)

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


# ----------------------------------------------------------------------------
# Character classes, as defined by the original.
# ----------------------------------------------------------------------------


def is_whitespace(char):
    """Whether `char` counts as whitespace: space, tab, newline, CR or `Zs`.

    Example:
    >>> is_whitespace("\\u3000"), is_whitespace("\\u200b")
    (True, False)
    """
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def is_control(char):
    """Whether `char` is a control (`Cc`/`Cf`) character other than tab/newline/CR.

    Example:
    >>> is_control("\\x0b"), is_control("\\u200b"), is_control("\\n")
    (True, True, False)
    """
    if char in "\t\n\r":
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def is_punctuation(char):
    """Whether `char` is split off as its own token.

    All printable non-alphanumeric ASCII counts (so `$`, `^`, `` ` `` do even
    though Unicode files them as symbols), plus every Unicode `P*` category.

    Example:
    >>> is_punctuation("$"), is_punctuation("\\u00bf"), is_punctuation("\\u20ac")
    (True, True, False)
    """
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def is_cjk_char(cp):
    """Whether code point `cp` lies in one of the original's CJK ideograph ranges.

    Example:
    >>> is_cjk_char(ord("中")), is_cjk_char(ord("か")), is_cjk_char(ord("한"))
    (True, False, False)
    """
    return any(low <= cp <= high for low, high in CJK_RANGES)


def _cleaned(char):
    """`char` after the original `_clean_text` and `_tokenize_chinese_chars`."""
    cp = ord(char)
    if cp == 0 or cp == 0xFFFD or is_control(char):
        return ""
    if is_whitespace(char):
        return " "
    if is_cjk_char(cp):
        return " " + char + " "
    return char


def _split_off(char):
    """`char` padded with spaces if it is punctuation, else itself."""
    return " " + char + " " if is_punctuation(char) else char


def _split_off_unaccented(char):
    """Like `_split_off`, but drops nonspacing marks (`Mn`), for uncased text."""
    if unicodedata.category(char) == "Mn":
        return ""
    return _split_off(char)


def _cleaned_and_split_off(char):
    """`_cleaned` and `_split_off` in one step (the character sets are disjoint)."""
    cleaned = _cleaned(char)
    return _split_off(char) if cleaned == char else cleaned


class _CharTable(dict):
    """A `str.translate` table that classifies each code point on first sight.

    Only the characters a tokenizer actually meets are ever classified, so
    building one is free and the lookups after the first are a C dict hit.
    """

    def __init__(self, replacement):
        super().__init__()
        self._replacement = replacement
        for cp in range(128):
            self[cp] = replacement(chr(cp))

    def __missing__(self, cp):
        value = self._replacement(chr(cp))
        self[cp] = value
        return value


# ----------------------------------------------------------------------------
# Vocabulary and text helpers.
# ----------------------------------------------------------------------------


def convert_to_unicode(text):
    """Returns `text` as `str`, decoding `bytes` as UTF-8 and dropping bad bytes.

    Args:
        text: `str` or `bytes`.

    Returns:
        The text as `str`.

    Raises:
        ValueError: if `text` is neither `str` nor `bytes` (as the original).

    Example:
    >>> convert_to_unicode(b"caf\\xc3\\xa9 \\xff!")
    'café !'
    """
    if isinstance(text, str):
        return text
    if isinstance(text, bytes):
        return text.decode("utf-8", "ignore")
    raise ValueError(f"Unsupported string type: {type(text)}")


def whitespace_tokenize(text):
    """Splits `text` on runs of whitespace (Python's `str.split()` definition).

    Example:
    >>> whitespace_tokenize("  hello\\u3000world\\n")
    ['hello', 'world']
    """
    return text.split()


def _read_vocab_text(vocab_file):
    """The vocabulary file's bytes, from any file system (`keras_bert_impl.filesystem`)."""
    path = os.fspath(vocab_file)
    try:
        with filesystem.open_file(path, "rb") as reader:
            return reader.read()
    except OSError as error:
        raise VocabError(f"{path}: cannot read vocabulary file ({error.strerror or error})") from None


def load_vocab(vocab_file):
    """Loads a `vocab.txt` (one token per line) into an ordered token -> id map.

    Exactly the original's semantics, which read the file with TensorFlow's
    `GFile.readline`: the id is the line number (from 0); every line is
    `strip()`-ed, so an empty line is the token `""`; a repeated token keeps the
    id of its last line; every `\\r` is dropped wherever it appears in a line
    (TF's line reader discards them), and only `\\n` ends a line.

    Args:
        vocab_file: Path of the vocabulary file (local, or a `tf.io.gfile` URL).

    Returns:
        `collections.OrderedDict` mapping token to id.

    Raises:
        VocabError: if the file is missing or unreadable, or is not UTF-8 (the
            message names the file and the line).

    Example:
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "vocab.txt"
    >>> _ = path.write_text("[PAD]\\nhello\\r\\n\\n##s\\n", encoding="utf-8")
    >>> list(load_vocab(path).items())
    [('[PAD]', 0), ('hello', 1), ('', 2), ('##s', 3)]
    """
    data = _read_vocab_text(vocab_file).replace(b"\r", b"")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line_number = data.count(b"\n", 0, error.start) + 1
        raise VocabError(
            f"{vocab_file}:{line_number}: vocabulary is not valid UTF-8 "
            f"({error.reason} at byte {error.start})"
        ) from None
    lines = text.split("\n")
    if lines[-1] == "":  # The text after the final newline is not a line.
        lines.pop()
    vocab = collections.OrderedDict()
    for index, line in enumerate(lines):
        vocab[line.strip()] = index
    return vocab


def check_special_tokens(vocab, vocab_file, required=SPECIAL_TOKENS):
    """Checks that `vocab` holds every token of `required`.

    Args:
        vocab: token -> id mapping, e.g. from `load_vocab`.
        vocab_file: Where `vocab` came from, for the error message.
        required: Tokens that must be present.

    Raises:
        VocabError: naming `vocab_file` and each missing token.

    Example:
    >>> check_special_tokens({"[UNK]": 0}, "vocab.txt", required=("[UNK]", "[CLS]"))
    Traceback (most recent call last):
    ...
    keras_bert_impl.errors.VocabError: vocab.txt: missing special tokens [CLS]
    """
    missing = [token for token in required if token not in vocab]
    if missing:
        raise VocabError(f"{vocab_file}: missing special tokens {', '.join(missing)}")


def check_vocab_fits(vocab, vocab_file, vocab_size, config_file="bert_config.json"):
    """Checks that every id of `vocab` has a row in the word embeddings.

    A vocabulary longer than the config's `vocab_size` would fail only when
    a text first reaches one of the extra tokens, as an embedding-lookup
    traceback (or, on a GPU, silently read zeros). A shorter one is fine.

    Args:
        vocab: token -> id mapping, e.g. from `load_vocab`.
        vocab_file: Where `vocab` came from, for the error message.
        vocab_size: The config's `vocab_size`.
        config_file: Where `vocab_size` came from, for the error message.

    Raises:
        VocabError: naming both files and both sizes.

    Example:
    >>> check_vocab_fits({"[PAD]": 0, "[UNK]": 1, "the": 2}, "vocab.txt", 2)
    Traceback (most recent call last):
    ...
    keras_bert_impl.errors.VocabError: vocab.txt: 3 tokens (ids up to 2), more than vocab_size 2 of bert_config.json
    """
    largest = max(vocab.values(), default=-1)
    if largest >= vocab_size:
        raise VocabError(
            f"{vocab_file}: {len(vocab)} tokens (ids up to {largest}), more than vocab_size {vocab_size} of {config_file}"
        )


def validate_case_matches_checkpoint(do_lower_case, init_checkpoint):
    """Checks `do_lower_case` against the casing implied by a Google checkpoint name.

    Only paths ending in `<model name>/bert_model.ckpt...` for one of the
    released models are recognised; anything else passes, as in the original.

    Args:
        do_lower_case: The casing the user asked for.
        init_checkpoint: Checkpoint path, or empty/None.

    Raises:
        ConfigError: when the casing contradicts the model name (the original's
            message).

    Example:
    >>> validate_case_matches_checkpoint(True, "/m/uncased_L-12_H-768_A-12/bert_model.ckpt")
    >>> validate_case_matches_checkpoint(True, "/m/cased_L-12_H-768_A-12/bert_model.ckpt")
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    keras_bert_impl.errors.ConfigError: You passed in `--do_lower_case=True` ...
    """
    if not init_checkpoint:
        return
    # The unescaped "." is the original's pattern; keep it so the same paths match.
    match = re.match("^.*?([A-Za-z0-9_-]+)/bert_model.ckpt", init_checkpoint)
    if match is None:
        return
    model_name = match.group(1)
    if model_name in _LOWER_CASED_MODELS and not do_lower_case:
        actual_flag, case_name, opposite_flag = "False", "lowercased", "True"
    elif model_name in _CASED_MODELS and do_lower_case:
        actual_flag, case_name, opposite_flag = "True", "cased", "False"
    else:
        return
    raise ConfigError(
        f"You passed in `--do_lower_case={actual_flag}` with "
        f"`--init_checkpoint={init_checkpoint}`. However, `{model_name}` seems to "
        f"be a {case_name} model, so you should pass in "
        f"`--do_lower_case={opposite_flag}` so that the fine-tuning matches how "
        "the model was pre-training. If this error is wrong, please just comment "
        "out this check."
    )


# ----------------------------------------------------------------------------
# Tokenizers.
# ----------------------------------------------------------------------------


class BasicTokenizer:
    """Cleans text and splits it on whitespace and punctuation (no vocabulary).

    Args:
        do_lower_case: Lower-case and strip accents (`Mn` marks after NFD).

    Example:
    >>> BasicTokenizer(do_lower_case=True).tokenize("Héllo,\\u00a0WORLD!中文")
    ['hello', ',', 'world', '!', '中', '文']
    >>> BasicTokenizer(do_lower_case=False).tokenize("Héllo,\\u00a0WORLD!")
    ['Héllo', ',', 'WORLD', '!']
    """

    def __init__(self, do_lower_case=True):
        self.do_lower_case = do_lower_case
        # Plain ASCII needs no NFD and has no CJK: one precomputed table does it.
        self._ascii_table = {cp: _cleaned_and_split_off(chr(cp)) for cp in range(128)}
        if do_lower_case:
            # Punctuation is split after lower-casing and NFD, which can create
            # some (U+1FEF GREEK VARIA decomposes to "`"), so it is a second pass.
            self._clean_table = _CharTable(_cleaned)
            self._split_table = _CharTable(_split_off_unaccented)
        else:
            self._clean_table = _CharTable(_cleaned_and_split_off)

    def tokenize(self, text):
        """Splits `text` into basic tokens.

        Args:
            text: `str`, or UTF-8 `bytes` (undecodable bytes are dropped).

        Returns:
            List of `str` tokens, none empty and none containing whitespace.
        """
        text = convert_to_unicode(text)
        if text.isascii():
            text = text.translate(self._ascii_table)
            if self.do_lower_case:
                text = text.lower()
            return text.split()
        text = text.translate(self._clean_table)
        if self.do_lower_case:
            text = text.lower()
            if not text.isascii():
                text = unicodedata.normalize("NFD", text)
            text = text.translate(self._split_table)
        return text.split()


class WordpieceTokenizer:
    """Greedy longest-match-first WordPiece over a fixed vocabulary.

    Results are memoised per word in a cache owned by this instance (cleared
    when it reaches `cache_size` words, or when `unk_token` or
    `max_input_chars_per_word` is reassigned), so `vocab` must not be changed
    after construction.

    Args:
        vocab: Mapping (or set) of vocabulary tokens; continuation pieces start
            with `##`.
        unk_token: Emitted for a word that cannot be covered by pieces.
        max_input_chars_per_word: Longer words become `unk_token` outright.
        cache_size: Most words memoised at once; 0 disables the cache.

    Example:
    >>> wordpiece = WordpieceTokenizer({"un": 0, "##aff": 1, "##able": 2, "[UNK]": 3})
    >>> wordpiece.tokenize("unaffable unaffected")
    ['un', '##aff', '##able', '[UNK]']
    """

    def __init__(
        self, vocab, unk_token="[UNK]", max_input_chars_per_word=200, cache_size=1 << 17
    ):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word
        self.cache_size = cache_size
        # No piece is longer than the longest token, so shorter candidates
        # are the only ones worth looking up; the result is unchanged.
        self._max_token_chars = max(map(len, vocab), default=0)
        self._cache = {}
        self._cache_settings = (unk_token, max_input_chars_per_word)

    def tokenize(self, text):
        """Splits whitespace-separated words of `text` into word pieces.

        Args:
            text: `str` or UTF-8 `bytes`, normally already through `BasicTokenizer`.

        Returns:
            List of word pieces.
        """
        return self.tokenize_words(whitespace_tokenize(convert_to_unicode(text)))

    def tokenize_words(self, words):
        """Word pieces of each word of `words` (which must hold no whitespace), concatenated.

        Example:
        >>> WordpieceTokenizer({"a": 0, "##b": 1}).tokenize_words(["ab", "a"])
        ['a', '##b', 'a']
        """
        cache = self._cache
        settings = (self.unk_token, self.max_input_chars_per_word)
        if settings != self._cache_settings:
            cache.clear()
            self._cache_settings = settings
        pieces = []
        for word in words:
            word_pieces = cache.get(word)
            if word_pieces is None:
                word_pieces = self._word_pieces(word)
                if len(cache) >= self.cache_size:
                    cache.clear()
                if self.cache_size:
                    cache[word] = word_pieces
            pieces += word_pieces
        return pieces

    def _word_pieces(self, word):
        """The pieces of one word, as a tuple, without the cache."""
        length = len(word)
        if length > self.max_input_chars_per_word:
            return (self.unk_token,)
        vocab = self.vocab
        pieces = []
        start = 0
        while start < length:
            if start == 0:
                end = min(length, self._max_token_chars)
                while end > 0 and word[:end] not in vocab:
                    end -= 1
                piece = word[:end]
            else:
                # A "##" piece holds at most the longest token's length less 2
                # (none when every token is shorter than 3: then it is [UNK]).
                end = min(length, start + max(self._max_token_chars - 2, 0))
                while end > start and "##" + word[start:end] not in vocab:
                    end -= 1
                piece = "##" + word[start:end]
            if end == start:
                return (self.unk_token,)
            pieces.append(piece)
            start = end
        return tuple(pieces)


class FullTokenizer:
    """End-to-end BERT tokenization: `BasicTokenizer` then `WordpieceTokenizer`.

    Args:
        vocab_file: Path of the `vocab.txt` (see `load_vocab`).
        do_lower_case: Must match the checkpoint: True for `uncased_*` models.

    Attributes:
        vocab: `OrderedDict` token -> id.
        inv_vocab: `dict` id -> token.
        do_lower_case: As given.
        basic_tokenizer: The `BasicTokenizer`.
        wordpiece_tokenizer: The `WordpieceTokenizer`.

    Raises:
        VocabError: if `vocab_file` cannot be read (see `load_vocab`).

    Example:
    >>> vocab = {"[UNK]": 0, "hello": 1, "world": 2, "!": 3, "wo": 4, "##rld": 5}
    >>> tokenizer = FullTokenizer.from_vocab(vocab, do_lower_case=True)
    >>> tokens = tokenizer.tokenize("Hello, WÖRLD!")
    >>> tokens
    ['hello', '[UNK]', 'world', '!']
    >>> tokenizer.convert_tokens_to_ids(tokens)
    [1, 0, 2, 3]
    """

    def __init__(self, vocab_file, do_lower_case=True):
        self._build(load_vocab(vocab_file), do_lower_case)

    @classmethod
    def from_vocab(cls, vocab, do_lower_case=True):
        """A tokenizer over an in-memory token -> id mapping instead of a file.

        Args:
            vocab: Mapping token -> id (copied into an `OrderedDict`).
            do_lower_case: As for the constructor.

        Returns:
            A `FullTokenizer`.
        """
        tokenizer = cls.__new__(cls)
        tokenizer._build(collections.OrderedDict(vocab), do_lower_case)
        return tokenizer

    def _build(self, vocab, do_lower_case):
        self.vocab = vocab
        self.inv_vocab = {index: token for token, index in vocab.items()}
        self.do_lower_case = do_lower_case
        self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
        self.wordpiece_tokenizer = WordpieceTokenizer(vocab=vocab)

    def tokenize(self, text):
        """Splits `text` (`str` or UTF-8 `bytes`) into word pieces."""
        return self.wordpiece_tokenizer.tokenize_words(self.basic_tokenizer.tokenize(text))

    def convert_tokens_to_ids(self, tokens):
        """Ids of `tokens`; raises `KeyError` for a token not in the vocab (as the original)."""
        return list(map(self.vocab.__getitem__, tokens))

    def convert_ids_to_tokens(self, ids):
        """Tokens of `ids`; raises `KeyError` for an unknown id (as the original)."""
        return list(map(self.inv_vocab.__getitem__, ids))
