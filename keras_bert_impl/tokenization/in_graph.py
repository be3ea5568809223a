"""The original BERT tokenizer as TensorFlow graph ops, exact to `FullTokenizer`.

TF Text's `BertTokenizer` is close to the original but not equal to it: it
case-folds (`ß` -> `ss`, `ς` -> `σ`) where the original lower-cases, uses ICU's
(newer) Unicode tables, and counts the WordPiece word limit in bytes. Serving
raw text must give the ids the model was trained on, so this module rebuilds
the original's `BasicTokenizer` from per-code-point tables computed here in
Python from the very functions the Python tokenizer uses (`unicodedata` of this
interpreter, `str.lower`, `str.isspace`), and uses TF Text only for its
`WordpieceTokenizer` op (greedy longest-match-first, as the original). All ops
are core TensorFlow or TF Text, which the standard TF Serving binary bundles.

Pipeline (batch of strings -> ragged word-piece ids):
  0. if every string of the batch is ASCII (one regex match over the batch),
     steps 1-5 are the ASCII fast path below instead;
  1. decode UTF-8 (invalid bytes dropped, as `decode("utf-8", "ignore")` and
     the original's removal of U+FFFD do);
  2. drop NUL, U+FFFD and control characters; whitespace -> space;
  3. put spaces around CJK ideographs;
  4. uncased only: lower-case (with Python's final-sigma rule), canonical
     decomposition (NFD, incl. canonical reordering) and removal of `Mn` marks;
  5. put spaces around punctuation, split on spaces;
  6. words over 200 characters -> [UNK]; WordPiece.

ASCII fast path (the common request; each step a whole-string op instead of
the ~60 small per-code-point ops above, which dominate a short request):
  a. drop the ASCII control characters the original removes (`_ASCII_REMOVED`);
  b. put spaces around the original's ASCII punctuation (`_ASCII_PUNCTUATION`);
  c. uncased only: lower-case A-Z (accent stripping, NFD and the final sigma
     do nothing to ASCII, and ASCII holds no CJK ideograph);
  d. split on ASCII whitespace (space, \\t, \\n, \\r: the only whitespace left
     after a.), then step 6 as above.
"""

import unicodedata

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_impl.tokenization.full_tokenizer import CJK_RANGES, is_control, is_punctuation, is_whitespace

MAX_CODE_POINT = 0x110000

# Bits of the per-code-point class table.
REMOVE = 1  # dropped by the original's _clean_text
SPACE = 2  # a word separator
CJK = 4  # split into its own word (before lower-casing)
PUNCT = 8  # split into its own word (after accent stripping)
MARK = 16  # category Mn: removed after NFD when lower-casing
CASED = 32  # for Python's final-sigma rule
CASE_IGNORABLE = 64  # for Python's final-sigma rule

_SPACE_CP = 32
_CAPITAL_SIGMA, _SMALL_SIGMA, _FINAL_SIGMA = 0x3A3, 0x3C3, 0x3C2
_MAX_DECOMPOSITION = 4

# RE2 patterns of the ASCII fast path (UTF-8 mode, so `\xNN` is a code point;
# on an all-ASCII batch that is the byte). Derived from the original:
# `_clean_text` drops code point 0 and `is_control` characters (`Cc`/`Cf`
# other than \t, \n, \r): in ASCII 0x00-0x08, 0x0B, 0x0C, 0x0E-0x1F, 0x7F.
# (0x0B, 0x0C and 0x1C-0x1F are `str.isspace` too, but `is_control` wins.)
_ASCII_ONLY = r"[\x00-\x7f]*"  # full match: no byte >= 0x80, no invalid UTF-8
_ASCII_REMOVED = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]"
# `is_punctuation` on ASCII: 33-47, 58-64, 91-96, 123-126 (`!`-`/`, `:`-`@`,
# `[`-backtick, `{`-`~`); no other ASCII code point is in a `P*` category.
_ASCII_PUNCTUATION = r"[\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]"


def _is_cased(char):
    return char.islower() or char.isupper() or char.istitle()


def _is_case_ignorable(char):
    # Python decides 'Σ' -> 'ς' by skipping case-ignorable characters back to
    # the nearest other one, which must be cased. Probe that rule directly
    # (after a cased 'A' and after an uncased '1') rather than re-deriving
    # Unicode's Case_Ignorable property.
    after_cased = ("A" + char + "\u03a3").lower()[-1] == "\u03c2"
    after_uncased = ("1" + char + "\u03a3").lower()[-1] == "\u03c2"
    return after_cased and not after_uncased


def build_tables():
    """Per-code-point tables, from the Python tokenizer's own definitions.

    Returns:
        dict of numpy arrays: `classes` uint8 [0x110000]; `lower_keys` /
        `lower_values` (code points whose `str.lower` differs); `nfd_keys` /
        `nfd_values` [n, 4] (-1 padded canonical decompositions); `ccc`
        (canonical combining class, uint8 [0x110000]).
    """
    classes = np.zeros(MAX_CODE_POINT, np.uint8)
    ccc = np.zeros(MAX_CODE_POINT, np.uint8)
    lower_keys, lower_values, nfd_keys, nfd_values = [], [], [], []
    for cp in range(MAX_CODE_POINT):
        if 0xD800 <= cp <= 0xDFFF:  # surrogates never come out of UTF-8 decoding
            classes[cp] = REMOVE
            continue
        char = chr(cp)
        category = unicodedata.category(char)
        if category in ("Cn", "Co"):
            # Unassigned and private-use code points (six in seven of all) have
            # no property any test below looks for: not control, space,
            # punctuation, mark, cased or case-ignorable; lower-case, NFD and
            # combining class leave them as they are. Only the CJK ranges
            # (set for every code point below) can hold them.
            continue
        bits = 0
        if cp == 0 or cp == 0xFFFD or is_control(char):
            bits |= REMOVE
        elif is_whitespace(char) or char.isspace():
            bits |= SPACE  # `str.split()` also splits on e.g. U+2028
        if is_punctuation(char):
            bits |= PUNCT
        if category == "Mn":
            bits |= MARK
        if _is_cased(char):
            bits |= CASED
        if _is_case_ignorable(char):
            bits |= CASE_IGNORABLE
        classes[cp] = bits
        ccc[cp] = unicodedata.combining(char)
        lowered = char.lower()
        if lowered != char:
            # Only U+0130 lowers to two code points (i + U+0307); the U+0307 is
            # an Mn mark that accent stripping removes right after, so 'i' is exact.
            lower_keys.append(cp)
            lower_values.append(ord(lowered[0]))
        decomposed = unicodedata.normalize("NFD", char)
        if decomposed != char:
            nfd_keys.append(cp)
            row = [ord(c) for c in decomposed]
            nfd_values.append(row + [-1] * (_MAX_DECOMPOSITION - len(row)))
    for low, high in CJK_RANGES:
        classes[low:high + 1] |= CJK
    return {
        "classes": classes,
        "ccc": ccc,
        "lower_keys": np.array(lower_keys, np.int32),
        "lower_values": np.array(lower_values, np.int32),
        "nfd_keys": np.array(nfd_keys, np.int32),
        "nfd_values": np.array(nfd_values, np.int32),
    }


def _rebuild(ragged, flat_values):
    return tf.RaggedTensor.from_row_splits(flat_values, ragged.row_splits, validate=False)


# The full path works on flat code points with the row of each ([n] values,
# [n] int64 row ids, sorted), not on RaggedTensors: a ragged tensor's
# `value_rowids()` and `tf.boolean_mask` each add ~30-75 graph ops, and the
# path needs a dozen of them (843 ops in all before, 1,249 with the rest of
# the tokenizer: ~0.5 s of every export's tracing, and a larger graph for
# TF Serving to load and optimise).


def _row_ids(row_splits, count):
    """[count] int64: the row of each of `count` flat values, from [rows + 1] int64 `row_splits`."""
    # Row r holds positions splits[r] <= p < splits[r + 1]: the number of splits[1:] at or below p.
    return tf.raw_ops.UpperBound(
        sorted_inputs=row_splits[tf.newaxis, 1:], values=tf.range(count, dtype=tf.int64)[tf.newaxis], out_type=tf.int64
    )[0]


def _row_splits(row_ids, nrows):
    """[nrows + 1] int64 row splits of sorted int64 `row_ids` (empty rows included)."""
    return tf.raw_ops.LowerBound(
        sorted_inputs=row_ids[tf.newaxis], values=tf.range(nrows + 1, dtype=tf.int64)[tf.newaxis], out_type=tf.int64
    )[0]


def _select(keep, *tensors):
    """The entries of each [n] tensor where [n] bool `keep` is true (order kept)."""
    indices = tf.reshape(tf.where(keep), [-1])
    return tuple(tf.gather(tensor, indices) for tensor in tensors)


def _surround_with_spaces(values, row_ids, selected):
    """Replaces each selected code point c by ' ', c, ' ' (others unchanged): new `(values, row_ids)`."""
    spaces = tf.fill(tf.shape(values), _SPACE_CP)
    triples = tf.reshape(tf.stack([spaces, values, spaces], axis=1), [-1])  # [3n]
    keep = tf.reshape(tf.stack([selected, tf.ones_like(selected), selected], axis=1), [-1])
    rows = tf.reshape(tf.tile(row_ids[:, tf.newaxis], [1, 3]), [-1])
    return _select(keep, triples, rows)


def lower_code_points(cps, classes_table, lower_table):
    """Python's `str.lower` of each row, final sigma included, on code points.

    Args:
        cps: Ragged [texts, (chars)] int32 code points (int64 row splits).
        classes_table: `build_tables()["classes"]` as a tensor (its `CASED`
            and `CASE_IGNORABLE` bits decide the final sigma).
        lower_table: Hash table code point -> its lower case (-1: unchanged);
            U+0130 maps to `i` alone (its U+0307 is for the caller to keep).

    Returns:
        Ragged [texts, (chars)] int32, `cps`'s row structure.
    """
    splits = tf.cast(cps.row_splits, tf.int64)
    values = cps.flat_values
    row_ids = _row_ids(splits, tf.size(values, out_type=tf.int64))
    return _rebuild(cps, _lower_values(values, row_ids, splits, classes_table, lower_table))


def _lower_values(values, row_ids, row_splits, classes_table, lower_table):
    """`lower_code_points` on flat [n] code points, their [n] int64 rows and the rows' int64 splits."""
    classes = tf.gather(classes_table, values)
    lowered = lower_table.lookup(values)
    lowered = tf.where(lowered >= 0, lowered, values)
    sigma = tf.equal(values, _CAPITAL_SIGMA)

    def with_final_sigma():
        # Python: 'Σ' -> 'ς' when the nearest non-case-ignorable character
        # before it is cased and the nearest one after it is not.
        count = tf.shape(values)[0]
        positions = tf.range(count)
        row_starts = tf.cast(tf.gather(row_splits, row_ids), tf.int32)
        row_ends = tf.cast(tf.gather(row_splits[1:], row_ids), tf.int32)
        relevant = tf.equal(tf.bitwise.bitwise_and(classes, CASE_IGNORABLE), 0)
        (relevant_positions,) = _select(relevant, positions)
        before = tf.cumsum(tf.cast(relevant, tf.int32), exclusive=True)
        upto = tf.cumsum(tf.cast(relevant, tf.int32))
        cased = tf.not_equal(tf.bitwise.bitwise_and(classes, CASED), 0)
        prev = tf.gather(relevant_positions, tf.maximum(before - 1, 0))
        has_prev = (before > 0) & (prev >= row_starts) & tf.gather(cased, tf.maximum(prev, 0))
        next_ = tf.gather(relevant_positions, tf.minimum(upto, tf.size(relevant_positions) - 1))
        has_next = (upto < tf.size(relevant_positions)) & (next_ < row_ends) & tf.gather(cased, tf.minimum(next_, count - 1))
        final = sigma & has_prev & ~has_next
        return tf.where(final, _FINAL_SIGMA, lowered)

    return tf.cond(tf.reduce_any(sigma), with_final_sigma, lambda: lowered)


class InGraphTokenizer(tf.Module):
    """`FullTokenizer` in TensorFlow ops, for SavedModels that take raw text.

    Args:
        vocab: Token list in id order (e.g. `FullTokenizer(...).inv_vocab` values).
        do_lower_case: As the Python tokenizer.
        max_input_chars_per_word: 200 in the original.
        tables: Optional precomputed `build_tables()` (they take a few seconds).

    Example:
    >>> tokenizer = InGraphTokenizer(["[PAD]", "[UNK]", "hello", "!"])  # doctest: +SKIP
    >>> tokenizer.tokenize(tf.constant(["Hello!"]))  # doctest: +SKIP
    <tf.RaggedTensor [[2, 3]]>
    """

    def __init__(self, vocab, do_lower_case=True, max_input_chars_per_word=200, unk_token="[UNK]", tables=None, name=None):
        super().__init__(name=name)
        if unk_token not in vocab:
            # tf_text would give the id -1 to every word it cannot piece.
            raise ValueError(f"the vocabulary has no {unk_token}, the token of words it cannot piece")
        tables = tables or build_tables()
        self.do_lower_case = do_lower_case
        self.max_input_chars_per_word = max_input_chars_per_word
        self.unk_token = unk_token
        # [vocab_size] id -> token, for outputs that name tokens.
        self.id_to_token = tf.constant(list(vocab), tf.string)
        # The original's vocab dict keeps the last id of a duplicated token.
        last_id = {token: index for index, token in enumerate(vocab)}
        self.vocab_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(last_id)), tf.constant(list(last_id.values()), tf.int64)
            ),
            default_value=-1,
        )
        self.classes = tf.Variable(tables["classes"].astype(np.int32), trainable=False, name="char_classes")
        self.ccc = tf.Variable(tables["ccc"].astype(np.int32), trainable=False, name="combining_classes")
        self.lower_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tables["lower_keys"], tables["lower_values"]), default_value=-1
        )
        self.nfd_index = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tables["nfd_keys"], tf.range(len(tables["nfd_keys"]), dtype=tf.int32)
            ),
            default_value=-1,
        )
        self.nfd_values = tf.Variable(tables["nfd_values"], trainable=False, name="nfd_values")
        self.wordpiece = tf_text.WordpieceTokenizer(
            self.vocab_table,
            suffix_indicator="##",
            # Bytes, not characters: generous so that only our character limit applies.
            max_bytes_per_word=4 * max_input_chars_per_word + 4,
            token_out_type=tf.int64,
            unknown_token=unk_token,
            split_unknown_characters=False,
        )

    # -- the basic tokenizer, on flat code points and their rows ------------

    def _classes_of(self, values):
        return tf.gather(self.classes, values)

    def _nfd_without_marks(self, values, row_ids):
        """Canonical decomposition of [n] code points (rows [n]) less its `Mn` marks: new `(values, row_ids)`."""
        index = self.nfd_index.lookup(values)
        own = tf.stack([values] + [tf.fill(tf.shape(values), -1)] * (_MAX_DECOMPOSITION - 1), axis=1)
        rows = tf.where((index >= 0)[:, None], tf.gather(self.nfd_values, tf.maximum(index, 0)), own)  # [n, 4]
        # [n * 4] -> the valid code points, in order, with their rows.
        decomposed, decomposed_rows = _select(
            tf.reshape(rows >= 0, [-1]),
            tf.reshape(rows, [-1]),
            tf.reshape(tf.tile(row_ids[:, tf.newaxis], [1, _MAX_DECOMPOSITION]), [-1]),
        )
        # Canonical ordering: stable sort of each run of non-starters by
        # combining class (starters, class 0, never move; nor does a row's
        # first code point, so no run crosses rows and the rows stay as they are).
        ccc = tf.gather(self.ccc, decomposed)
        row_start = tf.concat([[True], decomposed_rows[1:] != decomposed_rows[:-1]], axis=0)
        group = tf.cumsum(tf.cast((ccc == 0) | row_start, tf.int64))
        # Combining classes are below 256, and the stable sort keeps the order
        # within a class: no position term, so no int64 overflow however many
        # characters a batch holds (a position term overflowed past 2**23 starters).
        key = group * 256 + tf.cast(ccc, tf.int64)
        decomposed = tf.gather(decomposed, tf.argsort(key, stable=True))
        keep = tf.equal(tf.bitwise.bitwise_and(tf.gather(self.classes, decomposed), MARK), 0)
        return _select(keep, decomposed, decomposed_rows)

    def _ascii_words(self, texts):
        """[batch] ASCII strings -> ragged [batch, (words)] strings (fast path).

        Exact for ASCII only: the caller checks that every string is ASCII.
        """
        texts = tf.strings.regex_replace(texts, _ASCII_REMOVED, "")
        texts = tf.strings.regex_replace(texts, _ASCII_PUNCTUATION, r" \0 ")
        if self.do_lower_case:
            texts = tf.strings.lower(texts)  # encoding "": ASCII A-Z only
        # With no separator `tf.strings.split` splits on runs of ASCII
        # whitespace (space, \t, \n, \v, \f, \r) and drops empty words, as
        # the original's whitespace -> space and `str.split()`; \v and \f are
        # already gone (controls), so the separators are exactly the original's.
        return tf.strings.split(texts)

    def _unicode_words(self, texts):
        """[batch] strings -> ragged [batch, (words)] strings, any UTF-8 (full path)."""
        cps = tf.strings.unicode_decode(texts, "UTF-8", errors="ignore")
        nrows = tf.shape(cps.row_splits, out_type=tf.int64)[0] - 1
        values = cps.flat_values  # [n] int32
        row_ids = _row_ids(cps.row_splits, tf.size(values, out_type=tf.int64))  # [n] int64
        classes = self._classes_of(values)
        values, row_ids, classes = _select(
            tf.equal(tf.bitwise.bitwise_and(classes, REMOVE), 0), values, row_ids, classes
        )
        values = tf.where(tf.bitwise.bitwise_and(classes, SPACE) > 0, _SPACE_CP, values)
        values, row_ids = _surround_with_spaces(values, row_ids, tf.bitwise.bitwise_and(classes, CJK) > 0)
        if self.do_lower_case:
            values = _lower_values(values, row_ids, _row_splits(row_ids, nrows), self.classes, self.lower_table)
            values, row_ids = self._nfd_without_marks(values, row_ids)
        classes = self._classes_of(values)
        values, row_ids = _surround_with_spaces(values, row_ids, tf.bitwise.bitwise_and(classes, PUNCT) > 0)
        cps = tf.RaggedTensor.from_row_splits(values, _row_splits(row_ids, nrows), validate=False)
        return tf.strings.split(tf.strings.unicode_encode(cps, "UTF-8"))

    # Plain TensorFlow ops and Python-level branches only: autograph has
    # nothing to convert here, and skipping it (and the TF Text code called
    # inside) makes every signature that tokenizes trace in a fraction of the time.
    @tf.autograph.experimental.do_not_convert
    def basic_tokenize(self, texts):
        """[batch] strings -> ragged [batch, (words)] strings, as `BasicTokenizer`.

        An all-ASCII batch takes the fast path (`_ascii_words`), any other the
        full one (`_unicode_words`); both give the same ragged structure (int64
        row splits), so `tf.cond` picks at run time in a traced graph, and
        eagerly runs only the branch taken.
        """
        texts = tf.convert_to_tensor(texts, tf.string)
        # [] bool: no string holds a byte >= 0x80 (invalid UTF-8 fails too).
        all_ascii = tf.reduce_all(tf.strings.regex_full_match(texts, _ASCII_ONLY))
        return tf.cond(all_ascii, lambda: self._ascii_words(texts), lambda: self._unicode_words(texts))

    @tf.autograph.experimental.do_not_convert
    def tokenize(self, texts):
        """[batch] strings -> ragged [batch, (pieces)] int64 word-piece ids."""
        words = self.basic_tokenize(texts)
        too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > self.max_input_chars_per_word
        words = _rebuild(words, tf.where(too_long, self.unk_token, words.flat_values))
        pieces = self.wordpiece.tokenize(words)  # [batch, (words), (pieces)]
        return pieces.merge_dims(1, 2)
