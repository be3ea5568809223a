"""Raw text -> BERT inputs in TensorFlow ops: `BertPreprocessor`.

One preprocessing for training and serving: `BertPreprocessor` (a Keras
layer, for `tf.data` pipelines and Python task models) and the exported
SavedModel signatures both call `pack_inputs` on the ids of the in-graph
tokenizer, which tokenizes exactly as `FullTokenizer`. Pairs are truncated
as the original `_truncate_seq_pair` and laid out as `[CLS] a [SEP] b [SEP]`
with segment ids 0 then 1, as the original `convert_single_example`.
"""

import functools

import keras
import tensorflow as tf

from keras_bert_impl.errors import VocabError
from keras_bert_impl.tokenization.full_tokenizer import load_vocab
from keras_bert_impl.tokenization.in_graph import InGraphTokenizer, build_tables

MASK_LITERAL = "[MASK]"
_PACKAGE = "keras_bert_impl"


@functools.lru_cache(maxsize=1)
def shared_tables():
    """`build_tables()`, computed once per process (they take seconds)."""
    return build_tables()


def truncated_pair_lengths(length_a, length_b, max_total):
    """The original `_truncate_seq_pair`, in closed form over a batch.

    The original pops one token at a time from the longer list (from `b` on a
    tie). Equivalently: shorten the longer one towards the other, then take
    the rest alternately, `b` first.

    Args:
        length_a, length_b: [batch] int32 token counts.
        max_total: Tokens allowed for `a` and `b` together.

    Returns:
        `(new_length_a, new_length_b)`: [batch] int32 each; a pair that
        already fits keeps its lengths.

    Example:
    >>> a, b = truncated_pair_lengths(tf.constant([5, 2, 4, 2]),
    ...                               tf.constant([1, 6, 4, 1]), 5)
    >>> a.numpy().tolist(), b.numpy().tolist()
    ([4, 2, 3, 2], [1, 3, 2, 1])
    """
    excess = tf.maximum(length_a + length_b - max_total, 0)
    cut_a = tf.where(length_a > length_b, tf.minimum(excess, length_a - length_b), 0)
    length_a, excess = length_a - cut_a, excess - cut_a
    cut_b = tf.where(length_b > length_a, tf.minimum(excess, length_b - length_a), 0)
    length_b, excess = length_b - cut_b, excess - cut_b
    return length_a - excess // 2, length_b - (excess - excess // 2)


def token_ids_with_masks(tokenizer, texts, mask_id):
    """Ragged [batch, (ids)] int32 where "[MASK]" written in a text is `mask_id`
    (the tokenizer alone would split it into "[", "mask", "]").

    Each text is split at the literal, case-sensitive "[MASK]", the parts are
    tokenized, and one `mask_id` goes between consecutive parts.

    Args:
        tokenizer: A tokenizer whose `tokenize` maps [n] strings to ragged
            [n, (ids)] word-piece ids, e.g. `InGraphTokenizer`.
        texts: [batch] string tensor.
        mask_id: Id of `[MASK]`.

    Returns:
        Ragged int32 [batch, (ids)].
    """
    parts = tf.strings.split(texts, sep=MASK_LITERAL)  # [batch, (parts)]
    pieces = tf.cast(tokenizer.tokenize(parts.flat_values), tf.int32)  # [parts, (ids)]
    index_in_row = tf.ragged.range(parts.row_lengths()).flat_values
    is_last = index_in_row == tf.gather(parts.row_lengths(), parts.value_rowids()) - 1
    masks = tf.RaggedTensor.from_row_lengths(
        tf.fill([tf.reduce_sum(tf.cast(~is_last, tf.int32))], mask_id),
        tf.cast(~is_last, tf.int64),
    )
    joined = tf.concat([pieces, masks], axis=1)  # each part followed by [MASK], but the last
    return tf.RaggedTensor.from_row_splits(joined, parts.row_splits).merge_dims(1, 2)


def pack_one_text(ids, max_seq_length, cls_id, sep_id, pad_id=0):
    """`pack_inputs` for single texts, in dense ops: `[CLS] ids [SEP]`, the ids cut to `max_seq_length - 2`.

    A few ops on a [batch, max_seq_length] frame, where ragged concatenation
    takes ~100 small ones: most of what raw text adds to one request's time.

    Args:
        ids: Ragged int32 [batch, (ids)].
        max_seq_length: Padded length, special tokens included (at least 2).
        cls_id, sep_id, pad_id: As `pack_inputs`.

    Returns:
        Dict of int32 [batch, max_seq_length] `input_ids`, `input_mask`,
        `segment_ids` (zeros).

    Example:
    >>> ids = tf.ragged.constant([[5, 6, 7, 8], [5], []], dtype=tf.int32)
    >>> pack_one_text(ids, max_seq_length=5, cls_id=2, sep_id=3, pad_id=1)["input_ids"].numpy().tolist()
    [[2, 5, 6, 7, 3], [2, 5, 3, 1, 1], [2, 3, 1, 1, 1]]
    """
    width = max_seq_length - 2
    # [batch, width]: each row's first `width` ids (the original's truncation), then pad_id.
    body = ids.to_tensor(pad_id, shape=[None, width])
    lengths = tf.minimum(tf.cast(ids.row_lengths(), tf.int32), width)  # [batch]
    column = tf.fill([tf.shape(body)[0], 1], tf.constant(0, tf.int32))
    # [batch, max_seq_length]: [CLS], the ids, pad_id.
    framed = tf.concat([column + cls_id, body, column + pad_id], axis=1)
    positions = tf.range(max_seq_length)[None, :]  # [1, max_seq_length]
    sep_at = lengths[:, None] + 1  # [batch, 1]
    input_ids = tf.where(positions == sep_at, sep_id, framed)
    return {
        "input_ids": input_ids,
        "input_mask": tf.cast(positions <= sep_at, tf.int32),
        "segment_ids": tf.zeros_like(input_ids),
    }


def pack_inputs(ids_a, ids_b, max_seq_length, cls_id, sep_id, pad_id=0, separators_between=1,
                second_segment_id=1):
    """Ragged word-piece ids -> the model's padded inputs, as the original.

    In dense ops: each row's layout follows from its two kept lengths, and
    one gather over a [batch, max_seq_length] grid of indices into the
    flat ids reads it out (ragged concatenation would trace some 2,000 ops).

    Args:
        ids_a: Ragged int32 [batch, (ids)] of the first texts.
        ids_b: Ragged int32 [batch, (ids)] of the second texts, or None. A
            second text with no tokens gives the single-text layout, as the
            original.
        max_seq_length: Padded length, special tokens included.
        cls_id, sep_id: Ids of `[CLS]` and `[SEP]` (RoBERTa: `<s>`, `</s>`).
        pad_id: Fills `input_ids` past the tokens (RoBERTa's `<pad>` is 1).
        separators_between: `sep_id`s between the texts of a pair (RoBERTa: 2,
            `<s> a </s></s> b </s>`).
        second_segment_id: Segment id of the second text and its separators
            (RoBERTa, which has no token types: 0).

    Returns:
        Dict of int32 [batch, max_seq_length] `input_ids`, `input_mask`,
        `segment_ids`.

    Example:
    >>> ids_a = tf.ragged.constant([[5, 6, 7], [5]], dtype=tf.int32)
    >>> ids_b = tf.ragged.constant([[8, 9], []], dtype=tf.int32)
    >>> inputs = pack_inputs(ids_a, ids_b, max_seq_length=6, cls_id=2, sep_id=3)
    >>> inputs["input_ids"].numpy().tolist()
    [[2, 5, 6, 3, 8, 3], [2, 5, 3, 0, 0, 0]]
    >>> inputs["input_mask"].numpy().tolist()
    [[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]]
    >>> inputs["segment_ids"].numpy().tolist()
    [[0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 0, 0]]
    """
    if ids_b is None:
        return pack_one_text(ids_a, max_seq_length, cls_id, sep_id, pad_id)
    raw_a, raw_b = tf.cast(ids_a.row_lengths(), tf.int32), tf.cast(ids_b.row_lengths(), tf.int32)  # [batch]
    has_b = raw_b > 0
    pair_a, pair_b = truncated_pair_lengths(raw_a, raw_b, max(max_seq_length - 2 - separators_between, 0))
    length_a = tf.where(has_b, pair_a, tf.minimum(raw_a, max(max_seq_length - 2, 0)))
    # As the original, the separators and the second text follow only if any
    # of it is left after truncation (none is at max_seq_length 3, or 4 when
    # the first text is the longer).
    length_b = tf.where(has_b, pair_b, 0)
    kept_b = tf.cast(length_b > 0, tf.int32)
    # Where each part starts, per row: [CLS] a [SEP]*separators_between b [SEP].
    start_b = (length_a + 1 + kept_b * separators_between)[:, None]  # [batch, 1]
    last_sep = start_b + length_b[:, None]  # [batch, 1]
    positions = tf.range(max_seq_length)[None, :]  # [1, max_seq_length]
    in_a = (positions >= 1) & (positions <= length_a[:, None])  # [batch, max_seq_length]
    in_b = (positions >= start_b) & (positions < last_sep)
    # Indices into [ids_a's flat ids, ids_b's, cls_id, sep_id, pad_id].
    count_a, count_b = tf.size(ids_a.values, tf.int32), tf.size(ids_b.values, tf.int32)
    cls_index, sep_index, pad_index = count_a + count_b, count_a + count_b + 1, count_a + count_b + 2
    # [batch, 1]: the token of `a` (of `b`) at a position p is flat index offset_a + p (offset_b + p).
    offset_a = tf.cast(ids_a.row_starts(), tf.int32)[:, None] - 1
    offset_b = tf.cast(ids_b.row_starts(), tf.int32)[:, None] + count_a - start_b
    index = tf.where(positions <= last_sep, sep_index, pad_index)  # separators, then padding
    index = tf.where(in_a, offset_a + positions, tf.where(in_b, offset_b + positions, index))
    index = tf.where(positions == 0, cls_index, index)
    specials = tf.constant([cls_id, sep_id, pad_id], ids_a.dtype)
    flat_ids = tf.concat([ids_a.values, ids_b.values, specials], axis=0)
    input_mask = tf.cast(positions <= last_sep, tf.int32)  # [batch, max_seq_length]
    # The second text, and the [SEP] after it, are the second segment; the separators between are the first's.
    second = in_b | ((positions == last_sep) & (kept_b[:, None] > 0))
    return {
        "input_ids": tf.gather(flat_ids, index),  # [batch, max_seq_length]
        "input_mask": input_mask,
        "segment_ids": tf.cast(second, tf.int32) * second_segment_id,
    }


def _vocabulary_list(vocabulary):
    if isinstance(vocabulary, (list, tuple)):
        return list(vocabulary)
    vocab = load_vocab(vocabulary)
    if not vocab:  # The original reads an empty file as no tokens; a preprocessor needs some.
        raise VocabError(f"{vocabulary}: empty; a vocabulary holds one token a line")
    tokens = [""] * (max(vocab.values()) + 1)
    for token, index in vocab.items():
        tokens[index] = token
    return tokens


def _as_strings(texts):
    # Tensors, and Keras's symbolic inputs (a functional model's), as they are.
    if isinstance(texts, (tf.Tensor, keras.KerasTensor)):
        return texts
    return tf.convert_to_tensor(texts, tf.string)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertPreprocessor(keras.layers.Layer):
    """Raw strings (one text, or a pair) -> `input_ids`, `input_mask`, `segment_ids`.

    Tokenizes exactly as the original `FullTokenizer` (in TensorFlow ops, so
    it runs inside `tf.data` and in exported SavedModels), truncates pairs as
    the original and pads to `max_seq_length`.

    Args:
        vocabulary: A `vocab.txt` path, or the token list in id order.
        do_lower_case: As `FullTokenizer` (uncased models: True).
        max_seq_length: Padded length, special tokens included.
        masks_in_text: Read "[MASK]" written in a text as the mask token
            (fill-mask inputs).

    Call arguments:
        inputs: A string tensor [batch] (or a list of strings), or a tuple
            `(texts, texts_b)` of two (a tuple is always a pair, as in
            keras-hub: `("a", "b")` is one pair); a single string or pair of
            strings (rank 0) gives outputs of shape [max_seq_length], without
            the batch axis.

    Example:
    >>> preprocessor = BertPreprocessor(
    ...     ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "!"],
    ...     max_seq_length=8)
    >>> outputs = preprocessor((["Hello world!"], ["hello"]))
    >>> outputs["input_ids"].numpy().tolist()
    [[2, 5, 6, 7, 3, 5, 3, 0]]
    >>> outputs["segment_ids"].numpy().tolist()
    [[0, 0, 0, 0, 0, 1, 1, 0]]
    """

    def __init__(self, vocabulary, do_lower_case=True, max_seq_length=128, masks_in_text=False, **kwargs):
        super().__init__(**kwargs)
        self.vocabulary = _vocabulary_list(vocabulary)
        if max_seq_length < 3:
            raise ValueError(f"max_seq_length must be at least 3 ([CLS] a [SEP]), got {max_seq_length}")
        self.do_lower_case = do_lower_case
        self.max_seq_length = max_seq_length
        self.masks_in_text = masks_in_text
        index = {token: i for i, token in enumerate(self.vocabulary)}  # the last id of a repeated token
        missing = [token for token in ("[UNK]", "[CLS]", "[SEP]") + (("[MASK]",) if masks_in_text else ())
                   if token not in index]
        if missing:
            raise ValueError(f"the vocabulary has no {', '.join(missing)}")
        self.cls_id, self.sep_id, self.mask_id = index["[CLS]"], index["[SEP]"], index.get("[MASK]", 0)
        self.tokenizer = InGraphTokenizer(self.vocabulary, do_lower_case=do_lower_case, tables=shared_tables())
        self.built = True

    def token_ids(self, texts):
        """[batch] strings -> ragged [batch, (ids)] int32 word-piece ids."""
        texts = tf.convert_to_tensor(texts, tf.string)
        if self.masks_in_text:
            return token_ids_with_masks(self.tokenizer, texts, self.mask_id)
        return tf.cast(self.tokenizer.tokenize(texts), tf.int32)

    def __call__(self, inputs, **kwargs):
        # Keras takes only tensors positionally; strings and lists become tensors here.
        if isinstance(inputs, tuple) and len(inputs) == 2:  # A pair, as keras-hub reads a tuple: ("a", "b") is one.
            inputs = tuple(_as_strings(texts) for texts in inputs)
        else:
            inputs = _as_strings(inputs)
        return super().__call__(inputs, **kwargs)

    def call(self, inputs):
        if isinstance(inputs, (tuple, list)) and len(inputs) == 2 and not isinstance(inputs[0], str):  # tensors
            texts, texts_b = inputs
        else:
            texts, texts_b = inputs, None
        # One text (a scalar) gives one row without the batch axis, as keras-hub's preprocessors.
        unbatched = texts.shape.rank == 0
        if unbatched:
            texts = texts[tf.newaxis]
            texts_b = None if texts_b is None else tf.reshape(texts_b, [1])
        ids_b = None if texts_b is None else self.token_ids(texts_b)
        outputs = pack_inputs(self.token_ids(texts), ids_b, self.max_seq_length, self.cls_id, self.sep_id)
        return {name: value[0] for name, value in outputs.items()} if unbatched else outputs

    def compute_output_spec(self, inputs):
        texts = inputs[0] if isinstance(inputs, (tuple, list)) else inputs
        shape = (self.max_seq_length,) if len(texts.shape) == 0 else (None, self.max_seq_length)
        # One KerasTensor per output: a functional model tells its outputs apart by object.
        return {name: keras.KerasTensor(shape, dtype="int32") for name in ("input_ids", "input_mask", "segment_ids")}

    def get_config(self):
        return {
            **super().get_config(),
            "vocabulary": self.vocabulary,
            "do_lower_case": self.do_lower_case,
            "max_seq_length": self.max_seq_length,
            "masks_in_text": self.masks_in_text,
        }
