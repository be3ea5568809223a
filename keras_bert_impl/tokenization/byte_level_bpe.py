"""RoBERTa's (GPT-2's) byte-level BPE, in Python and in TensorFlow ops, exact.

A release holds `vocab.json` (token -> id) and `merges.txt` (one merge
`a b` a line, in the order they were learned). Text becomes ids as Hugging
Face's `RobertaTokenizer` does it:

1. special tokens written in the text (`<s> </s> <pad> <unk> <mask>`) are
   split out first, `<mask>` taking the whitespace on its left
   (`special_tokens.py`); each piece between them is tokenized on its own;
2. GPT-2's pre-tokenization regex splits a piece into words:
   `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+`
   (so a space joins the word after it, and of a whitespace run before a
   word only the last character can);
3. each word's UTF-8 bytes become printable characters (`bytes_to_unicode`:
   the space byte is `Ġ`, newline `Ċ`), and the BPE merges are applied,
   lowest rank first, every occurrence left to right;
4. the resulting tokens are looked up in the vocabulary.

`add_prefix_space` (False for RoBERTa, as Hugging Face's default) puts a
space before a piece that does not start with one.

The classes `\\p{L}`, `\\p{N}` and `\\s` are read from this interpreter's
`unicodedata` (`\\s`: Unicode White_Space, as Oniguruma, which `tokenizers`
uses, defines it) and written into both versions, so Python and graph agree
on every code point. The graph version needs no lookahead (RE2 has none): it
finds word starts from each code point's class and its neighbours'. BPE runs
as one `tf.while_loop` over all distinct words of a batch; only core
TensorFlow and TF Text ops are used (no py_function), so a SavedModel holding
it is served by the standard TF Serving binary.
"""

import functools
import json
import os
import re
import unicodedata

import numpy as np
import tensorflow as tf

from keras_bert_impl import filesystem
from keras_bert_impl.errors import VocabError
from keras_bert_impl.tokenization.special_tokens import (
    BYTE_LEVEL_BPE,
    WHITE_SPACE,
    join_piece_ids,
    split_on_special_tokens_in_graph,
    tokens_around_special_tokens,
)

MAX_CODE_POINT = 0x110000
# Classes of the pre-tokenization regex.
OTHER, LETTER, NUMBER, SPACE = 0, 1, 2, 3
_NO_MERGE = np.iinfo(np.int64).max
_SPACE_CP, _APOSTROPHE = 32, 39


def bytes_to_unicode():
    """GPT-2's map from each byte value to a printable character.

    Printable Latin-1 bytes map to themselves; the other 68 (controls, space,
    0x7F-0xA0, 0xAD) to U+0100 onwards, in byte order.

    Returns:
        dict int (0..255) -> one-character `str`.

    Example:
    >>> table = bytes_to_unicode()
    >>> table[ord("a")], table[ord(" ")], table[ord("\\n")], len(set(table.values()))
    ('a', 'Ġ', 'Ċ', 256)
    """
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table = {byte: chr(byte) for byte in printable}
    extra = 0
    for byte in range(256):
        if byte not in table:
            table[byte] = chr(256 + extra)
            extra += 1
    return dict(sorted(table.items()))


@functools.lru_cache(maxsize=1)
def character_classes():
    """The pre-tokenization class of every code point, from `unicodedata`.

    Returns:
        uint8 numpy array [0x110000]: `LETTER` (category L*), `NUMBER` (N*),
        `SPACE` (White_Space) or `OTHER`.
    """
    classes = np.zeros(MAX_CODE_POINT, np.uint8)
    for cp in range(MAX_CODE_POINT):
        category = unicodedata.category(chr(cp))
        if category[0] == "L":
            classes[cp] = LETTER
        elif category[0] == "N":
            classes[cp] = NUMBER
    for char in WHITE_SPACE:
        classes[ord(char)] = SPACE
    return classes


def _class_ranges(classes, wanted):
    """`re` character-class body for the code points whose class is `wanted`."""
    selected = np.flatnonzero(classes == wanted)
    breaks = np.flatnonzero(np.diff(selected) != 1)
    starts = np.concatenate([selected[:1], selected[breaks + 1]])
    ends = np.concatenate([selected[breaks], selected[-1:]])
    return "".join(
        re.escape(chr(a)) if a == b else re.escape(chr(a)) + "-" + re.escape(chr(b)) for a, b in zip(starts, ends)
    )


@functools.lru_cache(maxsize=1)
def pretokenization_regex():
    """GPT-2's pre-tokenization pattern, compiled for Python's `re`.

    Example:
    >>> pretokenization_regex().findall("Hello  world's 42€!\\n")
    ['Hello', ' ', ' world', "'s", ' 42', '€!', '\\n']
    """
    classes = character_classes()
    letters, numbers, spaces = (_class_ranges(classes, c) for c in (LETTER, NUMBER, SPACE))
    return re.compile(
        rf"'s|'t|'re|'ve|'m|'ll|'d| ?[{letters}]+| ?[{numbers}]+| ?[^{spaces}{letters}{numbers}]+"
        rf"|[{spaces}]+(?![^{spaces}])|[{spaces}]+"
    )


# ----------------------------------------------------------------------------
# Files.
# ----------------------------------------------------------------------------


def _read_text(path, what):
    path = os.fspath(path)
    try:
        with filesystem.open_file(path, "rb") as reader:
            data = reader.read()
    except OSError as error:
        raise VocabError(f"{path}: cannot read {what} ({error.strerror or error})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise VocabError(f"{path}:{line}: {what} is not valid UTF-8 ({error.reason} at byte {error.start})") from None


def load_vocab_json(vocab_file):
    """Reads a `vocab.json` (a JSON object token -> id).

    Args:
        vocab_file: Path (local or a `tf.io.gfile` URL).

    Returns:
        dict token -> int id.

    Raises:
        VocabError: unreadable, not JSON, or not an object of distinct,
            non-negative integer ids (naming the file, and the line of a
            JSON error).

    Example:
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "vocab.json"
    >>> _ = path.write_text('{"<s>": 0, "a": 1}', encoding="utf-8")
    >>> load_vocab_json(path)
    {'<s>': 0, 'a': 1}
    """
    text = _read_text(vocab_file, "vocabulary")
    try:
        vocab = json.loads(text)
    except json.JSONDecodeError as error:
        raise VocabError(f"{vocab_file}:{error.lineno}: not JSON ({error.msg})") from None
    if not isinstance(vocab, dict) or not all(isinstance(i, int) and not isinstance(i, bool) for i in vocab.values()):
        raise VocabError(f"{vocab_file}: expected a JSON object of token -> integer id")
    # Two tokens of one id would read as one (the later wins), and a negative id has no embedding.
    tokens_of = {}
    for token, index in vocab.items():
        if index < 0:
            raise VocabError(f"{vocab_file}: token {token!r} has the negative id {index}")
        if index in tokens_of:
            raise VocabError(f"{vocab_file}: tokens {tokens_of[index]!r} and {token!r} both have id {index}")
        tokens_of[index] = token
    return vocab


def load_merges(merges_file):
    """Reads a `merges.txt`: an optional `#version` line, then `a b` a line.

    Args:
        merges_file: Path (local or a `tf.io.gfile` URL).

    Returns:
        List of `(a, b)` pairs, highest priority (rank 0) first.

    Raises:
        VocabError: unreadable, or a line that is not two tokens
            (`file:line` in the message).

    Example:
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "merges.txt"
    >>> _ = path.write_text("#version: 0.2\\nĠ t\\nh e\\n", encoding="utf-8")
    >>> load_merges(path)
    [('Ġ', 't'), ('h', 'e')]
    """
    lines = _read_text(merges_file, "merges file").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    merges = []
    for number, line in enumerate(lines, start=1):
        line = line.rstrip("\r")
        if number == 1 and line.startswith("#version"):
            continue
        parts = line.split(" ")
        if len(parts) != 2 or not all(parts):
            raise VocabError(f"{merges_file}:{number}: expected a merge 'a b', got {line!r}")
        merges.append((parts[0], parts[1]))
    return merges


def _check_vocab(vocab, special_tokens, where):
    missing = [token for token in (special_tokens.unk,) if token not in vocab]
    if missing:
        raise VocabError(f"{where}: missing special tokens {', '.join(missing)}")


# ----------------------------------------------------------------------------
# Python.
# ----------------------------------------------------------------------------


class ByteLevelBpeTokenizer:
    """RoBERTa's byte-level BPE tokenizer in Python (ids as Hugging Face's).

    Words are memoised in a bounded cache owned by the instance.

    Args:
        vocab_file: `vocab.json` path.
        merges_file: `merges.txt` path.
        add_prefix_space: Put a space before each piece of text that has none
            (RoBERTa: False).
        special_tokens: The `SpecialTokens` found in text (RoBERTa's).
        cache_size: Most words memoised at once; 0 disables the cache.

    Attributes:
        vocab: dict token -> id.
        inv_vocab: dict id -> token.
        merge_ranks: dict `(a, b)` -> rank.

    Raises:
        VocabError: unreadable files, or no unknown token in the vocabulary.

    Example:
    >>> vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4,
    ...          "h": 5, "i": 6, "Ġ": 7, "hi": 8, "Ġhi": 9}
    >>> tokenizer = ByteLevelBpeTokenizer.from_vocab(vocab, [("h", "i"), ("Ġ", "hi")])
    >>> tokenizer.tokenize("hi hi <mask>")
    ['hi', 'Ġhi', '<mask>']
    >>> tokenizer.encode("hi hi <mask>")
    [8, 9, 4]
    """

    def __init__(self, vocab_file, merges_file, add_prefix_space=False, special_tokens=BYTE_LEVEL_BPE,
                 cache_size=1 << 16):
        self._build(load_vocab_json(vocab_file), load_merges(merges_file), add_prefix_space, special_tokens,
                    cache_size, where=vocab_file)

    @classmethod
    def from_vocab(cls, vocab, merges, add_prefix_space=False, special_tokens=BYTE_LEVEL_BPE, cache_size=1 << 16):
        """A tokenizer over an in-memory vocabulary (token -> id) and merge list."""
        tokenizer = cls.__new__(cls)
        tokenizer._build(dict(vocab), list(merges), add_prefix_space, special_tokens, cache_size, where="vocab")
        return tokenizer

    def _build(self, vocab, merges, add_prefix_space, special_tokens, cache_size, where):
        _check_vocab(vocab, special_tokens, where)
        self.vocab = vocab
        self.inv_vocab = {index: token for token, index in vocab.items()}
        self.merges = [tuple(pair) for pair in merges]
        self.merge_ranks = {pair: rank for rank, pair in reversed(list(enumerate(self.merges)))}
        self.add_prefix_space = add_prefix_space
        self.special_tokens = special_tokens
        self.specials_in_text = [token for token in special_tokens.all_tokens() if token in vocab]
        self.cache_size = cache_size
        self._byte_chars = bytes_to_unicode()
        self._byte_table = [self._byte_chars[b] for b in range(256)]
        self._pattern = pretokenization_regex()
        self._cache = {}

    def _bpe(self, word):
        """The BPE tokens of one word (already byte-level characters)."""
        symbols = list(word)
        ranks = self.merge_ranks
        while len(symbols) > 1:
            best = min(zip(symbols, symbols[1:]), key=lambda pair: ranks.get(pair, _NO_MERGE))
            if best not in ranks:
                break
            first, second = best
            merged = []
            i = 0
            while i < len(symbols):
                if i + 1 < len(symbols) and symbols[i] == first and symbols[i + 1] == second:
                    merged.append(first + second)
                    i += 2
                else:
                    merged.append(symbols[i])
                    i += 1
            symbols = merged
        return tuple(symbols)

    def _word_tokens(self, word):
        tokens = self._cache.get(word)
        if tokens is None:
            tokens = self._bpe("".join(self._byte_table[b] for b in word.encode("utf-8")))
            if len(self._cache) >= self.cache_size:
                self._cache.clear()
            if self.cache_size:
                self._cache[word] = tokens
        return tokens

    def tokenize(self, text):
        """Byte-level BPE tokens of `text` (`str`, or UTF-8 `bytes`, bad bytes -> U+FFFD)."""
        return tokens_around_special_tokens(text, self.specials_in_text, self.special_tokens.lstrip, self._piece_tokens)

    def _piece_tokens(self, piece):
        if self.add_prefix_space and not piece.startswith(" "):
            piece = " " + piece
        return [token for word in self._pattern.findall(piece) for token in self._word_tokens(word)]

    def convert_tokens_to_ids(self, tokens):
        """Ids of `tokens`; a token not in the vocabulary is the unknown token's id."""
        unk_id = self.vocab[self.special_tokens.unk]
        return [self.vocab.get(token, unk_id) for token in tokens]

    def convert_ids_to_tokens(self, ids):
        """Tokens of `ids`; raises `KeyError` for an unknown id."""
        return list(map(self.inv_vocab.__getitem__, ids))

    def encode(self, text):
        """`convert_tokens_to_ids(tokenize(text))`."""
        return self.convert_tokens_to_ids(self.tokenize(text))

    def tokenize_word(self, word, after_space=True):
        """The tokens of one word of running text, as `tokenize` cuts the text there.

        GPT-2's pre-tokenization puts the one space before a word into the
        word (`Ġ`) and no token crosses a space, so the tokens of words
        joined by single spaces are each word's tokens with its space; the
        first word of a text has none (unless `add_prefix_space`).

        Args:
            word: `str` without spaces.
            after_space: Whether a space comes before it in the text.

        Example:
        >>> vocab = {"<unk>": 0, "h": 1, "i": 2, "Ġ": 3, "hi": 4, "Ġhi": 5}
        >>> tokenizer = ByteLevelBpeTokenizer.from_vocab(vocab, [("h", "i"), ("Ġ", "hi")])
        >>> tokenizer.tokenize_word("hi"), tokenizer.tokenize_word("hi", after_space=False)
        (['Ġhi'], ['hi'])
        """
        return self.tokenize(" " + word if after_space else word)

    def word_token_spans(self, word, tokens, after_space=True):
        """Where each of `tokenize_word(word, after_space)`'s tokens lies in `word`.

        Hugging Face's offsets (`trim_offsets`): the space a token carries is
        no part of it (a token of that space alone is empty, at the word's
        start), and a token holding some of a character's UTF-8 bytes spans
        the whole character. Should the tokens not spell the word, each spans
        all of it.

        Args:
            word: `str` without spaces.
            tokens: `tokenize_word(word, after_space)`.
            after_space: As for `tokenize_word`.

        Returns:
            List of `(start, end)` character offsets into `word`, end exclusive.

        Example:
        >>> vocab = {"<unk>": 0, "h": 1, "i": 2, "Ġ": 3, "hi": 4, "Ġhi": 5}
        >>> tokenizer = ByteLevelBpeTokenizer.from_vocab(vocab, [("h", "i")])
        >>> tokenizer.tokenize_word("hiï"), tokenizer.word_token_spans("hiï", ['Ġ', 'hi', 'Ã', '¯'])
        (['Ġ', 'hi', 'Ã', '¯'], [(0, 0), (0, 2), (2, 3), (2, 3)])
        """
        prefix = 1 if after_space or self.add_prefix_space else 0
        text = " " * prefix + word
        data = text.encode("utf-8")
        char_of_byte = [index for index, char in enumerate(text) for _ in char.encode("utf-8")] + [len(text)]
        decoder = {char: byte for byte, char in self._byte_chars.items()}
        spans = []
        position = 0
        for token in tokens:
            if all(char in decoder for char in token):
                token_bytes = bytes(decoder[char] for char in token)
            else:
                token_bytes = token.encode("utf-8")
            found = data.find(token_bytes, position) if token_bytes else -1
            # Only whitespace may lie between tokens (what a special token's lstrip took).
            if found < 0 or data[position:found].strip():
                return [(0, len(word))] * len(tokens)
            start, position = found, found + len(token_bytes)
            while start < position and data[start] == _SPACE_CP:
                start += 1
            char_start = char_of_byte[start]
            char_end = char_of_byte[position - 1] + 1 if position > start else char_start
            spans.append((max(char_start - prefix, 0), max(char_end - prefix, 0)))
        if data[position:].strip():
            return [(0, len(word))] * len(tokens)
        return spans


# ----------------------------------------------------------------------------
# TensorFlow graph.
# ----------------------------------------------------------------------------


def _behind(values, k, fill, row_ids):
    """values[i - k] where it is in the same row as i, else `fill`. [n] -> [n]."""
    n = tf.size(values)
    shifted = tf.pad(values, [[k, 0]], constant_values=fill)[:n]
    same_row = tf.pad(row_ids, [[k, 0]], constant_values=-1)[:n] == row_ids
    return tf.where(same_row, shifted, fill)


def _ahead(values, k, fill, row_ids):
    """values[i + k] where it is in the same row as i, else `fill`. [n] -> [n]."""
    shifted = tf.pad(values, [[0, k]], constant_values=fill)[k:]
    same_row = tf.pad(row_ids, [[0, k]], constant_values=-1)[k:] == row_ids
    return tf.where(same_row, shifted, fill)


def word_starts(code_points, classes):
    """Where GPT-2's pre-tokenization regex starts a word, without lookahead.

    Args:
        code_points: Ragged [texts, (chars)] int32 code points.
        classes: `character_classes()`-style table, as a [0x110000] tensor.

    Returns:
        [chars] bool over `code_points.flat_values`: True where a word starts.
    """
    values = code_points.flat_values
    row_ids = code_points.value_rowids()
    cls = tf.cast(tf.gather(classes, values), tf.int32)
    prev_cls = _behind(cls, 1, -1, row_ids)
    next_cls = _ahead(cls, 1, -1, row_ids)
    # Runs of one class are words...
    start = tf.not_equal(cls, prev_cls)
    # ...but the last whitespace before a non-space starts its own word
    # (`\s+(?!\S)` leaves it), and joins that word if it is a plain space (` ?X+`).
    start |= (cls == SPACE) & (next_cls >= 0) & (next_cls != SPACE)
    start &= ~((_behind(values, 1, -1, row_ids) == _SPACE_CP) & (cls != SPACE) & (prev_cls >= 0))
    # An apostrophe that starts a word takes a contraction's letters ('s 't 'm 'd 're 've 'll).
    c1, c2 = _ahead(values, 1, -1, row_ids), _ahead(values, 2, -1, row_ids)
    apostrophe = start & (values == _APOSTROPHE)
    two = apostrophe & ((c1 == ord("s")) | (c1 == ord("t")) | (c1 == ord("m")) | (c1 == ord("d")))
    three = apostrophe & (
        (((c1 == ord("r")) | (c1 == ord("v"))) & (c2 == ord("e"))) | ((c1 == ord("l")) & (c2 == ord("l")))
    )
    start &= ~(_behind(two | three, 1, False, row_ids) | _behind(three, 2, False, row_ids))
    start |= _behind(two, 2, False, row_ids) | _behind(three, 3, False, row_ids)
    return start


def _split_runs(candidate):
    """Of each run of consecutive True in `candidate`, the 1st, 3rd, 5th... [n] bool -> [n] bool.

    Merging the pair at each of them merges every occurrence left to right
    without overlap (`a a a` -> `aa a`).
    """
    n = tf.size(candidate)
    positions = tf.range(n)
    group = tf.cumsum(tf.cast(~candidate, tf.int32))
    first = tf.gather(tf.math.unsorted_segment_min(positions, group, tf.maximum(n + 1, 1)), group)
    run_start = first + tf.cast(~tf.gather(candidate, first), tf.int32)
    return candidate & (tf.math.floormod(positions - run_start, 2) == 0)


class InGraphByteLevelBpeTokenizer(tf.Module):
    """`ByteLevelBpeTokenizer` in TensorFlow ops, for SavedModels that take raw text.

    Args:
        vocab: dict token -> id (`load_vocab_json`).
        merges: List of `(a, b)` pairs, rank 0 first (`load_merges`).
        add_prefix_space: As `ByteLevelBpeTokenizer`.
        special_tokens: As `ByteLevelBpeTokenizer`.

    Example:
    >>> vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4,
    ...          "h": 5, "i": 6, "Ġ": 7, "hi": 8, "Ġhi": 9}
    >>> tokenizer = InGraphByteLevelBpeTokenizer(vocab, [("h", "i"), ("Ġ", "hi")])
    >>> tokenizer.tokenize(tf.constant(["hi hi <mask>", ""])).to_list()
    [[8, 9, 4], []]
    """

    def __init__(self, vocab, merges, add_prefix_space=False, special_tokens=BYTE_LEVEL_BPE, name=None):
        super().__init__(name=name)
        _check_vocab(vocab, special_tokens, "vocab")
        self.add_prefix_space = add_prefix_space
        self.special_tokens = special_tokens
        self.specials_in_text = [token for token in special_tokens.all_tokens() if token in vocab]
        self.unk_id = vocab[special_tokens.unk]
        self.token_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(vocab), tf.string), tf.constant(list(vocab.values()), tf.int64)
            ),
            default_value=self.unk_id,
        )
        # The first rank of a merge listed twice, as the Python dict built in reverse.
        ranks = {}
        for rank, (a, b) in enumerate(merges):
            ranks.setdefault(a + " " + b, rank)
        self.merge_ranks = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(ranks) or [""], tf.string),
                tf.constant(list(ranks.values()) or [_NO_MERGE], tf.int64),
            ),
            default_value=_NO_MERGE,
        )
        table = bytes_to_unicode()
        # [256] byte value -> its printable character, and single-byte strings -> byte value.
        self.byte_chars = tf.constant([table[b] for b in range(256)], tf.string)
        self.byte_values = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant([bytes([b]) for b in range(256)], tf.string), tf.range(256, dtype=tf.int32)
            ),
            default_value=0,
        )
        self.char_classes = tf.Variable(character_classes(), trainable=False, name="char_classes")

    def pretokenize(self, pieces):
        """[n] strings -> ragged [n, (words)] strings, as GPT-2's regex."""
        code_points = tf.strings.unicode_decode(pieces, "UTF-8", errors="replace")
        start = word_starts(code_points, self.char_classes)
        word_ids = tf.cumsum(tf.cast(start, tf.int64)) - 1
        words = tf.RaggedTensor.from_value_rowids(
            code_points.flat_values, word_ids, nrows=tf.reduce_sum(tf.cast(start, tf.int64)), validate=False
        )
        words_per_piece = tf.math.unsorted_segment_sum(
            tf.cast(start, tf.int64), code_points.value_rowids(), code_points.nrows()
        )
        return tf.RaggedTensor.from_row_lengths(tf.strings.unicode_encode(words, "UTF-8"), words_per_piece)

    def bpe(self, words):
        """[n] words -> ragged [n, (tokens)] byte-level BPE tokens (strings)."""
        unique_words, index = tf.unique(words)
        byte_strings = tf.strings.bytes_split(unique_words)  # [unique, (bytes)]
        symbols = tf.gather(self.byte_chars, self.byte_values.lookup(byte_strings.flat_values))
        count = tf.size(unique_words, out_type=tf.int64)

        def merge_once(values, row_ids, _):
            same_word = row_ids[:-1] == row_ids[1:]
            ranks = self.merge_ranks.lookup(tf.strings.join([values[:-1], values[1:]], separator=" "))
            ranks = tf.where(same_word, ranks, _NO_MERGE)  # [symbols - 1], at each pair's left symbol
            best = tf.gather(tf.math.unsorted_segment_min(ranks, row_ids[:-1], count), row_ids[:-1])
            selected = _split_runs((ranks == best) & (ranks < _NO_MERGE))
            selected_left = tf.concat([selected, [False]], axis=0)
            selected_right = tf.concat([[False], selected], axis=0)
            following = tf.concat([values[1:], [""]], axis=0)
            values = tf.where(selected_left, tf.strings.join([values, following]), values)
            keep = ~selected_right
            return tf.boolean_mask(values, keep), tf.boolean_mask(row_ids, keep), tf.reduce_any(selected)

        values, row_ids, _ = tf.while_loop(
            lambda values, row_ids, merged: merged,
            merge_once,
            [symbols, byte_strings.value_rowids(), tf.constant(True)],
            shape_invariants=[tf.TensorShape([None]), tf.TensorShape([None]), tf.TensorShape([])],
        )
        tokens = tf.RaggedTensor.from_value_rowids(values, row_ids, nrows=count, validate=False)
        return tf.gather(tokens, index)

    @tf.autograph.experimental.do_not_convert
    def tokenize(self, texts):
        """[batch] strings -> ragged [batch, (tokens)] int64 ids."""
        texts = tf.convert_to_tensor(texts, tf.string)
        pieces, is_special = split_on_special_tokens_in_graph(texts, self.specials_in_text, self.special_tokens.lstrip)
        flat, special = pieces.flat_values, is_special.flat_values
        text_pieces = tf.boolean_mask(flat, ~special)
        if self.add_prefix_space:
            text_pieces = tf.where(tf.strings.regex_full_match(text_pieces, "(?s) .*"), text_pieces,
                                   tf.strings.join([" ", text_pieces]))
        words = self.pretokenize(text_pieces)  # [text pieces, (words)]
        tokens = tf.RaggedTensor.from_row_splits(self.bpe(words.flat_values), words.row_splits, validate=False)
        text_ids = self.token_table.lookup(tokens.merge_dims(1, 2))  # [text pieces, (ids)]
        special_ids = self.token_table.lookup(tf.boolean_mask(flat, special))
        return join_piece_ids(pieces, is_special, text_ids, special_ids)


def read_byte_level_bpe_files(directory):
    """`(vocab, merges)` of a release directory's `vocab.json` and `merges.txt`.

    Example:
    >>> import pathlib, tempfile
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "vocab.json").write_text('{"<unk>": 0}', encoding="utf-8")
    >>> _ = (root / "merges.txt").write_text("#version: 0.2\\n", encoding="utf-8")
    >>> read_byte_level_bpe_files(root)
    ({'<unk>': 0}, [])
    """
    return (
        load_vocab_json(filesystem.join(os.fspath(directory), "vocab.json")),
        load_merges(filesystem.join(os.fspath(directory), "merges.txt")),
    )


__all__ = [
    "ByteLevelBpeTokenizer",
    "InGraphByteLevelBpeTokenizer",
    "bytes_to_unicode",
    "character_classes",
    "load_merges",
    "load_vocab_json",
    "pretokenization_regex",
    "read_byte_level_bpe_files",
    "word_starts",
]
