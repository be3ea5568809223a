"""ALBERT's SentencePiece tokenizer (`spiece.model`), in Python and in TensorFlow ops.

Text becomes ids as google-research/albert's `tokenization.py` (and Hugging
Face's SentencePiece-backed `AlbertTokenizer` of transformers 4) do it:

1. special tokens written in the text (`[CLS] [SEP] <pad> <unk> [MASK]`) are
   split out first, as Hugging Face does (`special_tokens.py`); each piece
   between them is tokenized on its own;
2. `preprocess_text`: whitespace runs become one space and the ends are
   stripped (`remove_space`), ``` `` ``` and `''` become `"`, NFKD and every
   combining character dropped (unless `keep_accents`), `str.lower` (if
   `do_lower_case`);
3. the SentencePiece model (unigram for ALBERT, with its own NFKC-based
   normalisation) cuts the text into pieces;
4. ALBERT's digit-comma rule: a piece that ends in a digit and a comma
   (`▁1990,`) is cut again without the comma, and the comma is a piece of
   its own (`▁1990`, `,`), as ALBERT was pretrained.

transformers 5's `AlbertTokenizer` (the `tokenizers` one, also transformers
4's `AlbertTokenizerFast`) differs from this on three kinds of text: it does
not apply step 4 (`split_digit_comma=False` leaves it out here too), it strips
every mark (`Mc` too, e.g. Devanagari vowel signs) where the original drops
characters with a combining class, and it lower-cases `Σ` to `σ` always where
`str.lower` writes a final `ς`. docs/ARCHITECTURE.md lists them.

The Python version runs the `sentencepiece` package (the `[keras-hub]` extra
installs it). The graph version runs TF Text's SentencePiece op on the same
model bytes (`SentencePieceModel`), after steps 1-2 in TensorFlow ops from
tables read from this interpreter's `unicodedata` (so the two agree on every
code point), and step 4 as a second pass of the op over the pieces it applies
to.
"""

import functools
import os
import unicodedata
import uuid

import numpy as np
import tensorflow as tf

# TF Text's SentencePiece ops, as its own `SentencepieceTokenizer` calls them
# (`SentencePieceModel` says why not through that class).
from tensorflow_text.python.ops.sentencepiece_tokenizer import gen_sentencepiece_tokenizer as sentencepiece_ops

from keras_bert_impl import filesystem
from keras_bert_impl.errors import VocabError
from keras_bert_impl.extras import import_extra
from keras_bert_impl.tokenization.in_graph import lower_code_points
from keras_bert_impl.tokenization.preprocessor import shared_tables
from keras_bert_impl.tokenization.special_tokens import (
    SENTENCEPIECE,
    join_piece_ids,
    split_on_special_tokens_in_graph,
    tokens_around_special_tokens,
)

SPIECE_UNDERLINE = "\u2581"
MAX_CODE_POINT = 0x110000


def preprocess_text(text, do_lower_case=True, keep_accents=False, remove_space=True):
    """ALBERT's text normalisation before SentencePiece (its `preprocess_text`).

    Args:
        text: `str`.
        do_lower_case: `str.lower` at the end.
        keep_accents: Keep combining characters (else NFKD, then drop them).
        remove_space: Collapse whitespace runs to one space, strip the ends.

    Returns:
        The normalised `str`.

    Example:
    >>> preprocess_text("  Café\\t``Naïve''  ﬁ ")
    'cafe "naive" fi'
    """
    if remove_space:
        text = " ".join(text.strip().split())
    text = text.replace("``", '"').replace("''", '"')
    if not keep_accents:
        text = unicodedata.normalize("NFKD", text)
        text = "".join(char for char in text if not unicodedata.combining(char))
    if do_lower_case:
        text = text.lower()
    return text


def normalized_characters(word, do_lower_case=True, keep_accents=False):
    """`word` normalised as `preprocess_text` and SentencePiece's NFKC do it,
    character by character, each with the characters of `word` it comes from.

    Whitespace is left out (it becomes the `▁` that starts a piece).

    Args:
        word: `str`.
        do_lower_case, keep_accents: As `preprocess_text`.

    Returns:
        List of `(char, start, end)`: a normalised character and the
        offsets of the characters of `word` it comes from, end exclusive.

    Example:
    >>> normalized_characters("Ré``ﬁ")
    [('r', 0, 1), ('e', 1, 2), ('"', 2, 4), ('f', 4, 5), ('i', 4, 5)]
    """
    result = []
    index = 0
    while index < len(word):
        if word[index:index + 2] in ("``", "''"):
            result.append(('"', index, index + 2))
            index += 2
            continue
        if not word[index].isspace():
            normal = preprocess_text(word[index], do_lower_case, keep_accents, remove_space=False)
            result.extend((char, index, index + 1) for char in unicodedata.normalize("NFKC", normal))
        index += 1
    return result


def split_digit_comma_pieces(pieces, encode_as_pieces):
    """ALBERT's rule for pieces ending in a digit and a comma.

    Args:
        pieces: SentencePiece pieces (`str`).
        encode_as_pieces: The model's text -> pieces function.

    Returns:
        The pieces, each `…9,` replaced by the pieces of `…9` (without a
        leading `▁` the original piece did not have) and `,`.

    Example:
    >>> split_digit_comma_pieces(["▁in", "▁1990,"], lambda text: ["▁19", "90"])
    ['▁in', '▁19', '90', ',']
    """
    result = []
    for piece in pieces:
        if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
            sub_pieces = encode_as_pieces(piece[:-1].replace(SPIECE_UNDERLINE, ""))
            if piece[0] != SPIECE_UNDERLINE and sub_pieces and sub_pieces[0][0] == SPIECE_UNDERLINE:
                if len(sub_pieces[0]) == 1:
                    sub_pieces = sub_pieces[1:]
                else:
                    sub_pieces[0] = sub_pieces[0][1:]
            result.extend(sub_pieces)
            result.append(piece[-1])
        else:
            result.append(piece)
    return result


def read_model_proto(model_file):
    """The bytes of a `spiece.model`.

    Raises:
        VocabError: naming the file when it cannot be read.
    """
    path = os.fspath(model_file)
    try:
        with filesystem.open_file(path, "rb") as reader:
            return reader.read()
    except OSError as error:
        raise VocabError(f"{path}: cannot read SentencePiece model ({error.strerror or error})") from None


class SentencePieceTokenizer:
    """ALBERT's tokenizer in Python, on the `sentencepiece` package.

    Args:
        model_file: `spiece.model` path.
        do_lower_case: As `preprocess_text` (ALBERT: True).
        keep_accents: As `preprocess_text` (ALBERT: False).
        remove_space: As `preprocess_text` (ALBERT: True).
        split_digit_comma: ALBERT's digit-comma rule (False: as transformers 5).
        special_tokens: The `SpecialTokens` found in text (ALBERT's).

    Attributes:
        vocab: dict piece -> id.
        inv_vocab: dict id -> piece.

    Raises:
        VocabError: unreadable or invalid model file, or no unknown token.
        MissingExtraError: `sentencepiece` is not installed.

    Example:
    >>> tokenizer = SentencePieceTokenizer("spiece.model")  # doctest: +SKIP
    >>> tokenizer.tokenize("In 1990, [MASK] Café")  # doctest: +SKIP
    ['▁in', '▁1990', ',', '[MASK]', '▁cafe']
    """

    def __init__(self, model_file, do_lower_case=True, keep_accents=False, remove_space=True,
                 split_digit_comma=True, special_tokens=SENTENCEPIECE):
        self._build(read_model_proto(model_file), do_lower_case, keep_accents, remove_space, split_digit_comma,
                    special_tokens, where=model_file)

    @classmethod
    def from_model_proto(cls, model_proto, do_lower_case=True, keep_accents=False, remove_space=True,
                         split_digit_comma=True, special_tokens=SENTENCEPIECE):
        """A tokenizer over the bytes of a SentencePiece model."""
        tokenizer = cls.__new__(cls)
        tokenizer._build(model_proto, do_lower_case, keep_accents, remove_space, split_digit_comma, special_tokens,
                         where="model_proto")
        return tokenizer

    def _build(self, model_proto, do_lower_case, keep_accents, remove_space, split_digit_comma, special_tokens,
               where):
        sentencepiece = import_extra("sentencepiece", "keras-hub", "the SentencePiece (ALBERT) tokenizer")
        self.model_proto = model_proto
        self.sp_model = sentencepiece.SentencePieceProcessor()
        try:
            self.sp_model.LoadFromSerializedProto(model_proto)
        except (RuntimeError, OSError) as error:
            raise VocabError(f"{where}: not a SentencePiece model ({error})") from None
        self.vocab = {self.sp_model.IdToPiece(i): i for i in range(self.sp_model.GetPieceSize())}
        self.inv_vocab = {i: piece for piece, i in self.vocab.items()}
        if special_tokens.unk not in self.vocab:
            raise VocabError(f"{where}: missing special tokens {special_tokens.unk}")
        self.do_lower_case = do_lower_case
        self.keep_accents = keep_accents
        self.remove_space = remove_space
        self.split_digit_comma = split_digit_comma
        self.special_tokens = special_tokens
        self.specials_in_text = [token for token in special_tokens.all_tokens() if token in self.vocab]

    def tokenize(self, text):
        """Pieces of `text` (`str`, or UTF-8 `bytes`, bad bytes -> U+FFFD)."""
        return tokens_around_special_tokens(text, self.specials_in_text, self.special_tokens.lstrip, self._piece_tokens)

    def _piece_tokens(self, piece):
        piece = preprocess_text(piece, self.do_lower_case, self.keep_accents, self.remove_space)
        pieces = self.sp_model.EncodeAsPieces(piece)
        if self.split_digit_comma:
            pieces = split_digit_comma_pieces(pieces, self.sp_model.EncodeAsPieces)
        return pieces

    def convert_tokens_to_ids(self, tokens):
        """Ids of `tokens` (`PieceToId`: a piece not in the model is the unknown id)."""
        return [self.sp_model.PieceToId(token) for token in tokens]

    def convert_ids_to_tokens(self, ids):
        """Pieces of `ids`; raises `KeyError` for an unknown id."""
        return list(map(self.inv_vocab.__getitem__, ids))

    def encode(self, text):
        """`convert_tokens_to_ids(tokenize(text))`."""
        return self.convert_tokens_to_ids(self.tokenize(text))

    def tokenize_word(self, word, after_space=True):
        """The pieces of one word of running text, as `tokenize` cuts the text there.

        SentencePiece starts every word with `▁`, the text's first too, and
        ALBERT's model cuts no piece across a space, so a word's pieces in
        running text are those of the word alone (`after_space` changes
        nothing; it is there for byte-level BPE's sake).

        Args:
            word: `str` without spaces.
            after_space: Whether a space comes before it in the text.
        """
        return self.tokenize(word)

    def word_token_spans(self, word, tokens, after_space=True):
        """Where each of `tokenize_word(word)`'s pieces lies in `word`.

        Hugging Face's offsets: a piece spans the characters its normalised
        characters come from (`normalized_characters`: both pieces of `ﬁ`
        span it), a `▁` alone the character after it. Should the pieces not
        spell the normalised word (a final `Σ`, a mark that NFKC composes
        with `keep_accents`, a special token), each spans all of it.

        Args:
            word: `str` without spaces.
            tokens: `tokenize_word(word)`.
            after_space: As for `tokenize_word`.

        Returns:
            List of `(start, end)` character offsets into `word`, end exclusive.
        """
        characters = normalized_characters(word, self.do_lower_case, self.keep_accents)
        spans = []
        position = 0
        for token in tokens:
            surface = token.replace(SPIECE_UNDERLINE, "")
            these = characters[position:position + len(surface)]
            if "".join(char for char, _, _ in these) != surface:
                return [(0, len(word))] * len(tokens)
            if these:
                spans.append((these[0][1], max(end for _, _, end in these)))
            elif position < len(characters):
                spans.append(characters[position][1:])
            else:
                spans.append((len(word), len(word)))
            position += len(surface)
        if position != len(characters):
            return [(0, len(word))] * len(tokens)
        return spans


# ----------------------------------------------------------------------------
# TensorFlow graph.
# ----------------------------------------------------------------------------


def _re2_class(code_points):
    return "[" + "".join(f"\\x{{{cp:x}}}" for cp in code_points) + "]"


@functools.lru_cache(maxsize=1)
def preprocessing_tables():
    """What `preprocess_text` needs per code point, read from `unicodedata`.

    Returns:
        dict: `spaces` and `digits` (RE2 classes of `str.isspace` and
        `str.isdigit`); `strip_keys` int32 [n] and `strip_rows` int32 [n, k]
        (-1 padded): each code point that NFKD-then-drop-combining changes,
        and what it becomes (possibly nothing).
    """
    spaces, digits, keys, rows = [], [], [], []
    for cp in range(MAX_CODE_POINT):
        char = chr(cp)
        if char.isspace():
            spaces.append(cp)
        if char.isdigit():
            digits.append(cp)
        if 0xD800 <= cp <= 0xDFFF or unicodedata.category(char) in ("Cn", "Co"):
            continue  # Unassigned and private use: no decomposition, no combining class.
        stripped = "".join(c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c))
        if stripped != char:
            keys.append(cp)
            rows.append([ord(c) for c in stripped])
    width = max(map(len, rows))
    return {
        "spaces": _re2_class(spaces),
        "digits": _re2_class(digits),
        "strip_keys": np.array(keys, np.int32),
        "strip_rows": np.array([row + [-1] * (width - len(row)) for row in rows], np.int32),
    }


def _expand(cps, index_table, rows):
    """Replaces each code point found in `index_table` by its row of `rows` (-1 padded)."""
    values = cps.flat_values
    index = index_table.lookup(values)
    width = tf.shape(rows)[1]
    own = tf.concat([values[:, None], tf.fill([tf.size(values), width - 1], -1)], axis=1)
    expanded = tf.where((index >= 0)[:, None], tf.gather(rows, tf.maximum(index, 0)), own)  # [chars, width]
    valid = expanded >= 0
    row_ids = tf.repeat(cps.value_rowids()[:, None], width, axis=1)
    return tf.RaggedTensor.from_value_rowids(
        tf.boolean_mask(expanded, valid), tf.boolean_mask(row_ids, valid), nrows=cps.nrows(), validate=False
    )


class SentencePieceModel(tf.saved_model.experimental.TrackableResource):
    """A `spiece.model` loaded into TF Text's SentencePiece op, for as long as this object lives.

    TF Text's `SentencepieceTokenizer` creates its model as a resource that
    the op's kernel owns. Created eagerly, that kernel sits in TensorFlow's
    cache of eager kernels, and `tf.random.set_seed`,
    `keras.utils.set_random_seed` and `keras.backend.clear_session` empty
    that cache: the model is deleted under every tokenizer built before
    ("Resource localhost/_0_SentencepieceOp/... does not exist"). A notebook
    or a sweep that seeds each model (as `run_fine_tuning` does) lost the
    tokenizer of the ALBERT models it had made. Here an eager model is a
    named resource of its own, made by a function dropped after (so no
    cached kernel keeps the model bytes either) and deleted when this object
    is; in a graph (a SavedModel's) it stays the kernel's, as TF Text writes
    it, so an export is unchanged and each load owns its copy.

    Args:
        model_proto: The bytes of the `spiece.model`.

    Example:
    >>> model = SentencePieceModel(read_model_proto("spiece.model"))  # doctest: +SKIP
    >>> model.tokenize(tf.constant(["hello world"]))  # doctest: +SKIP
    <tf.RaggedTensor [[10, 42]]>
    """

    def __init__(self, model_proto):
        super().__init__()
        self.model_proto = model_proto
        _ = self.resource_handle  # a bad proto fails here, not at the first text

    def _create_resource(self):
        if not tf.executing_eagerly():
            return sentencepiece_ops.sentencepiece_op(model=self.model_proto)
        # An eager op's kernel, and the model bytes in its attributes, would stay cached, one per model.
        shared_name = f"sentencepiece_{uuid.uuid4().hex}"
        create = tf.function(lambda: sentencepiece_ops.sentencepiece_op(model=self.model_proto,
                                                                        shared_name=shared_name), autograph=False)
        return create()

    def _destroy_resource(self):
        # Only the eager model is ours to delete; in a graph (the SavedModel's destroyer) nothing is.
        handle = self._resource_handle
        if tf.executing_eagerly() and handle is not None and not tf.is_symbolic_tensor(handle):
            tf.raw_ops.DestroyResourceOp(resource=handle, ignore_lookup_error=True)

    def tokenize(self, texts):
        """[n] strings -> ragged [n, (ids)] int32."""
        ids, row_splits = sentencepiece_ops.sentencepiece_tokenize_op(
            self.resource_handle, texts, nbest_size=0, alpha=1.0, add_bos=False, add_eos=False, reverse=False,
            out_type=tf.int32)
        return tf.RaggedTensor.from_row_splits(ids, row_splits, validate=False)

    def id_to_string(self, ids):
        """[n] int32 ids -> [n] pieces."""
        return sentencepiece_ops.sentencepiece_id_to_string_op(self.resource_handle, ids)

    def pieces(self):
        """The model's pieces in id order, as `str`."""
        size = sentencepiece_ops.sentencepiece_vocab_size_op(self.resource_handle)
        return [piece.decode("utf-8") for piece in self.id_to_string(tf.range(size)).numpy()]


class InGraphSentencePieceTokenizer(tf.Module):
    """`SentencePieceTokenizer` in TensorFlow ops (TF Text's SentencePiece op).

    Args:
        model_proto: The bytes of the `spiece.model`.
        do_lower_case, keep_accents, remove_space, split_digit_comma,
            special_tokens: As `SentencePieceTokenizer`.

    Example:
    >>> tokenizer = InGraphSentencePieceTokenizer(read_model_proto("spiece.model"))  # doctest: +SKIP
    >>> tokenizer.tokenize(tf.constant(["In 1990, [MASK] Café"]))  # doctest: +SKIP
    <tf.RaggedTensor [[25, 1390, 15, 4, 12320]]>
    """

    def __init__(self, model_proto, do_lower_case=True, keep_accents=False, remove_space=True,
                 split_digit_comma=True, special_tokens=SENTENCEPIECE, name=None):
        super().__init__(name=name)
        self.do_lower_case = do_lower_case
        self.keep_accents = keep_accents
        self.remove_space = remove_space
        self.split_digit_comma = split_digit_comma
        self.special_tokens = special_tokens
        self.sentencepiece = SentencePieceModel(model_proto)
        vocab = {piece: i for i, piece in enumerate(self.sentencepiece.pieces())}
        if special_tokens.unk not in vocab:
            raise VocabError(f"the SentencePiece model has no {special_tokens.unk}")
        self.specials_in_text = [token for token in special_tokens.all_tokens() if token in vocab]
        self.piece_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(list(vocab)), tf.constant(list(vocab.values()), tf.int64)),
            default_value=vocab[special_tokens.unk],
        )
        self.comma_id = self.piece_table.lookup(tf.constant(","))
        tables = preprocessing_tables()
        self.spaces, self.digits = tables["spaces"], tables["digits"]
        if keep_accents:
            # Lower-casing U+0130 gives `i` + U+0307; a U+0307 kept with the
            # accents must stay, so write U+0130 as I + U+0307 first (the same lower case).
            keys, rows = np.array([0x130], np.int32), np.array([[0x49, 0x307]], np.int32)
        else:
            keys, rows = tables["strip_keys"], tables["strip_rows"]
        self.strip_index = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(keys, tf.range(len(keys), dtype=tf.int32)), default_value=-1
        )
        self.strip_rows = tf.constant(rows)
        if do_lower_case:
            bert_tables = shared_tables()
            self.classes = tf.Variable(bert_tables["classes"].astype(np.int32), trainable=False, name="char_classes")
            self.lower_table = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(bert_tables["lower_keys"], bert_tables["lower_values"]),
                default_value=-1,
            )

    def _encode(self, texts):
        """[n] preprocessed strings -> ragged [n, (ids)] int64, by the SentencePiece op."""
        return tf.cast(self.sentencepiece.tokenize(texts), tf.int64)

    def _pieces(self, ids):
        return self.sentencepiece.id_to_string(tf.cast(ids, tf.int32))

    def preprocess(self, texts):
        """[n] strings -> [n] strings, as `preprocess_text`."""
        if self.remove_space:
            texts = tf.strings.regex_replace(texts, self.spaces + "+", " ")
            texts = tf.strings.regex_replace(texts, "^ | $", "")
        texts = tf.strings.regex_replace(texts, "``", '"')
        texts = tf.strings.regex_replace(texts, "''", '"')
        if self.keep_accents and not self.do_lower_case:
            return texts
        cps = tf.strings.unicode_decode(texts, "UTF-8", errors="replace")
        cps = _expand(cps, self.strip_index, self.strip_rows)
        if self.do_lower_case:
            cps = lower_code_points(cps, self.classes, self.lower_table)
        return tf.strings.unicode_encode(cps, "UTF-8")

    def _split_digit_comma(self, ids):
        """ALBERT's digit-comma rule on ragged [n, (ids)] -> ragged [n, (ids)]."""
        flat = ids.flat_values
        pieces = self._pieces(flat)
        flagged = tf.strings.regex_full_match(pieces, "(?s).*" + self.digits + ",")
        chosen = tf.boolean_mask(pieces, flagged)
        without_comma = tf.strings.regex_replace(chosen, ",$", "")
        sub = self._encode(tf.strings.regex_replace(without_comma, SPIECE_UNDERLINE, ""))  # [f, (k)]
        first_piece = self._pieces(sub.to_tensor(default_value=0, shape=[None, 1])[:, 0])
        strip = (~tf.strings.regex_full_match(chosen, "(?s)" + SPIECE_UNDERLINE + ".*")
                 & tf.strings.regex_full_match(first_piece, "(?s)" + SPIECE_UNDERLINE + ".*")
                 & (sub.row_lengths() > 0))
        drop = strip & tf.equal(first_piece, SPIECE_UNDERLINE)
        stripped_id = self.piece_table.lookup(tf.strings.regex_replace(first_piece, "^" + SPIECE_UNDERLINE, ""))
        sub_rows = sub.value_rowids()
        is_first = tf.range(tf.size(sub.flat_values, out_type=tf.int64)) == tf.gather(sub.row_splits, sub_rows)
        values = tf.where(is_first & tf.gather(strip, sub_rows), tf.gather(stripped_id, sub_rows), sub.flat_values)
        keep = ~(is_first & tf.gather(drop, sub_rows))
        sub = tf.RaggedTensor.from_value_rowids(
            tf.boolean_mask(values, keep), tf.boolean_mask(sub_rows, keep), nrows=sub.nrows(), validate=False
        )
        commas = tf.RaggedTensor.from_tensor(tf.fill([sub.nrows(), 1], self.comma_id))
        replacements = tf.concat([sub, commas], axis=1)  # [f, (k + 1)]
        # Each id's row: itself, or its replacement.
        singles = tf.RaggedTensor.from_tensor(flat[:, None])
        order = tf.where(
            flagged,
            tf.cumsum(tf.cast(flagged, tf.int64), exclusive=True) + tf.size(flat, out_type=tf.int64),
            tf.range(tf.size(flat, out_type=tf.int64)),
        )
        per_id = tf.gather(tf.concat([singles, replacements], axis=0), order)  # [ids, (new ids)]
        return tf.RaggedTensor.from_row_splits(per_id, ids.row_splits, validate=False).merge_dims(1, 2)

    @tf.autograph.experimental.do_not_convert
    def tokenize(self, texts):
        """[batch] strings -> ragged [batch, (pieces)] int64 ids."""
        texts = tf.convert_to_tensor(texts, tf.string)
        pieces, is_special = split_on_special_tokens_in_graph(texts, self.specials_in_text, self.special_tokens.lstrip)
        flat, special = pieces.flat_values, is_special.flat_values
        text_pieces = tf.boolean_mask(flat, ~special)
        text_ids = self._encode(self.preprocess(text_pieces))  # [text pieces, (ids)]
        if self.split_digit_comma:
            text_ids = self._split_digit_comma(text_ids)
        special_ids = self.piece_table.lookup(tf.boolean_mask(flat, special))
        return join_piece_ids(pieces, is_special, text_ids, special_ids)


__all__ = [
    "InGraphSentencePieceTokenizer",
    "SentencePieceModel",
    "SentencePieceTokenizer",
    "normalized_characters",
    "preprocess_text",
    "preprocessing_tables",
    "read_model_proto",
    "split_digit_comma_pieces",
]
