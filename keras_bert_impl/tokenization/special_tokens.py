"""Each tokenizer family's special tokens, and how they are found in raw text.

BERT's WordPiece releases name them `[CLS] [SEP] [PAD] [UNK] [MASK]`;
RoBERTa's byte-level BPE `<s> </s> <pad> <unk> <mask>`; ALBERT's SentencePiece
model `[CLS] [SEP] <pad> <unk> [MASK]`. They also differ in how a pair is laid
out (`[CLS] a [SEP] b [SEP]` with segment ids, or `<s> a </s></s> b </s>` with
none), which `SpecialTokens` records for the packing of `pack_inputs`.

Hugging Face's RoBERTa and ALBERT tokenizers treat a special token written in
the text as that token (the original BERT does not, hence `[MASK]` handling
being opt-in in `BertPreprocessor`). They find them case-sensitively, before
any normalisation, leftmost first; a token with `lstrip` (RoBERTa's `<mask>`)
also swallows the whitespace to its left, where whitespace is Unicode's
White_Space property (Rust's `char::is_whitespace`). The text between special
tokens is tokenized on its own. `split_on_special_tokens` does this in Python,
`split_on_special_tokens_in_graph` in TensorFlow ops (RE2 through TF Text).
"""

import dataclasses
import re

import tensorflow as tf
import tensorflow_text as tf_text

# Unicode's White_Space property, as Rust's `char::is_whitespace` and
# Oniguruma's `\s` define it (Python's `str.isspace` adds U+001C..U+001F).
WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


@dataclasses.dataclass(frozen=True)
class SpecialTokens:
    """The special tokens of one tokenizer family and its pair layout.

    Args:
        cls: First token of every sequence.
        sep: Closes each text.
        pad: Fills `input_ids` past the last token.
        unk: Stands for what the vocabulary cannot express.
        mask: The masked-LM token.
        separators_between: `sep` tokens between the two texts of a pair
            (1: BERT, ALBERT; 2: RoBERTa).
        segment_ids: Whether the second text of a pair gets segment id 1
            (False: every segment id is 0, as RoBERTa has no token types).
        lstrip: Tokens that swallow the whitespace to their left when found
            in text.

    Example:
    >>> BYTE_LEVEL_BPE.all_tokens()
    ('<s>', '</s>', '<pad>', '<unk>', '<mask>')
    """

    cls: str
    sep: str
    pad: str
    unk: str
    mask: str
    separators_between: int = 1
    segment_ids: bool = True
    lstrip: tuple = ()

    def all_tokens(self):
        """The five tokens, in the order cls, sep, pad, unk, mask."""
        return (self.cls, self.sep, self.pad, self.unk, self.mask)


WORDPIECE = SpecialTokens("[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]")
# Hugging Face's RobertaTokenizer: <mask> with lstrip=True, as in roberta-base's tokenizer files.
BYTE_LEVEL_BPE = SpecialTokens("<s>", "</s>", "<pad>", "<unk>", "<mask>", 2, False, ("<mask>",))
# Hugging Face's AlbertTokenizer: [MASK] with lstrip=True (no effect where the
# text's ends are stripped anyway, as `remove_space` does).
SENTENCEPIECE = SpecialTokens("[CLS]", "[SEP]", "<pad>", "<unk>", "[MASK]", lstrip=("[MASK]",))


def space_class(re2=False):
    """A character class of `WHITE_SPACE`, for Python's `re` or (`re2=True`) for RE2.

    Example:
    >>> bool(re.fullmatch(space_class(), "\u3000")), bool(re.fullmatch(space_class(), "\x1c"))
    (True, False)
    """
    if re2:  # RE2 writes a code point as \x{...}.
        return "[" + "".join(f"\\x{{{ord(c):x}}}" for c in WHITE_SPACE) + "]"
    return "[" + re.escape(WHITE_SPACE) + "]"


def special_token_pattern(tokens, lstrip=(), re2=False):
    """A regular expression matching any of `tokens` (for Python's `re`, or RE2).

    Longer tokens come first, so that of two where one begins the other the
    longer wins, as Hugging Face's leftmost-longest matcher does.

    Args:
        tokens: The special tokens.
        lstrip: Those of `tokens` that take the whitespace before them.
        re2: Write the pattern for RE2 (TensorFlow's regex ops).

    Returns:
        The pattern, as a string.

    Example:
    >>> re.findall(special_token_pattern(["<s>", "<mask>"], ["<mask>"]), "a <s> b  <mask>")
    ['<s>', '  <mask>']
    """
    ordered = sorted(set(tokens), key=lambda token: (-len(token), token))
    spaces = space_class(re2) + "*"
    return "|".join((spaces if token in lstrip else "") + re.escape(token) for token in ordered)


def split_on_special_tokens(text, tokens, lstrip=()):
    """Splits `text` at the special tokens written in it, as Hugging Face does.

    Args:
        text: `str`.
        tokens: The special tokens to find.
        lstrip: Those of `tokens` that swallow the whitespace on their left.

    Returns:
        List of `(piece, is_special)`: a special piece is the bare token (its
        swallowed whitespace dropped); no piece is empty.

    Example:
    >>> split_on_special_tokens("Hi  <mask>!</s>", ["<mask>", "</s>"], ["<mask>"])
    [('Hi', False), ('<mask>', True), ('!', False), ('</s>', True)]
    """
    if not tokens:
        return [(text, False)] if text else []
    pieces = []
    start = 0
    for match in re.finditer(special_token_pattern(tokens, lstrip), text):
        if match.start() > start:
            pieces.append((text[start:match.start()], False))
        pieces.append((match.group().lstrip(WHITE_SPACE), True))
        start = match.end()
    if start < len(text):
        pieces.append((text[start:], False))
    return pieces


def tokens_around_special_tokens(text, tokens, lstrip, tokenize_piece):
    """The tokens of `text`: its special tokens as they are, every other piece through `tokenize_piece`.

    Args:
        text: `str`, or UTF-8 `bytes` (bad bytes -> U+FFFD).
        tokens, lstrip: As for `split_on_special_tokens`.
        tokenize_piece: A function of a `str` piece returning its list of tokens.

    Example:
    >>> tokens_around_special_tokens(b"a b<mask>", ["<mask>"], ["<mask>"], str.split)
    ['a', 'b', '<mask>']
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    result = []
    for piece, is_special in split_on_special_tokens(text, tokens, lstrip):
        result.extend([piece] if is_special else tokenize_piece(piece))
    return result


def split_on_special_tokens_in_graph(texts, tokens, lstrip=()):
    """`split_on_special_tokens` in TensorFlow ops, over a batch.

    Args:
        texts: [batch] string tensor.
        tokens: The special tokens to find.
        lstrip: Those of `tokens` that swallow the whitespace on their left.

    Returns:
        `(pieces, is_special)`: ragged [batch, (pieces)] strings (special
        pieces are the bare tokens) and ragged [batch, (pieces)] bool.

    Example:
    >>> pieces, is_special = split_on_special_tokens_in_graph(
    ...     tf.constant(["Hi  <mask>!</s>"]), ["<mask>", "</s>"], ["<mask>"])
    >>> pieces.to_list(), is_special.to_list()
    ([[b'Hi', b'<mask>', b'!', b'</s>']], [[False, True, False, True]])
    """
    texts = tf.convert_to_tensor(texts, tf.string)
    if not tokens:
        pieces = tf.RaggedTensor.from_tensor(texts[:, None], lengths=tf.cast(tf.strings.length(texts) > 0, tf.int64))
        return pieces, tf.zeros_like(pieces, tf.bool)
    pattern = special_token_pattern(tokens, lstrip, re2=True)
    pieces = tf_text.regex_split(texts, pattern, pattern)  # [batch, (pieces)]
    # A piece between two matches can never match whole (the leftmost search
    # would have found it), so a whole match is a special token.
    is_special = tf.strings.regex_full_match(pieces.flat_values, pattern)
    bare = tf.where(is_special, tf.strings.regex_replace(pieces.flat_values, "^" + space_class(re2=True) + "+", ""),
                    pieces.flat_values)
    return pieces.with_flat_values(bare), pieces.with_flat_values(is_special)


def join_piece_ids(pieces, is_special, text_ids, special_ids):
    """Puts the ids of text pieces and of special pieces back in text order.

    Args:
        pieces: Ragged [batch, (pieces)] (its row structure is used).
        is_special: Ragged [batch, (pieces)] bool, as `pieces`.
        text_ids: Ragged [text pieces, (ids)], the non-special pieces' ids in order.
        special_ids: [special pieces] ids of the special pieces in order.

    Returns:
        Ragged [batch, (ids)].

    Example:
    >>> pieces = tf.ragged.constant([["a", "<s>", "b"]])
    >>> ids = join_piece_ids(pieces, tf.ragged.constant([[False, True, False]]),
    ...                      tf.ragged.constant([[5, 6], [7]]), tf.constant([0]))
    >>> ids.to_list()
    [[5, 6, 0, 7]]
    """
    special = is_special.flat_values
    specials = tf.RaggedTensor.from_tensor(tf.cast(special_ids, text_ids.dtype)[:, None])
    # Row i of concat([text_ids, specials]) for each piece: a text piece's
    # index among text pieces, or a special's among specials after them all.
    order = tf.where(
        special,
        tf.cumsum(tf.cast(special, tf.int64), exclusive=True) + text_ids.nrows(),
        tf.cumsum(tf.cast(~special, tf.int64), exclusive=True),
    )
    piece_ids = tf.gather(tf.concat([text_ids, specials], axis=0), order)  # [pieces, (ids)]
    return tf.RaggedTensor.from_row_splits(piece_ids, pieces.row_splits, validate=False).merge_dims(1, 2)
