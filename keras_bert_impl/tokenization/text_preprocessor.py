"""Raw text -> model inputs for any release's tokenizer: `TextPreprocessor`.

`BertPreprocessor` for WordPiece, RoBERTa's byte-level BPE and ALBERT's
SentencePiece alike: the release's tokenizer files (`from_files.py`) pick
the in-graph tokenizer, and `pack_inputs` lays the ids out with the
family's special tokens: `[CLS] a [SEP] b [SEP]` with segment ids 0 then 1
(BERT, ALBERT), `<s> a </s></s> b </s>` with segment ids all 0 and `<pad>`
(id 1) as padding (RoBERTa). Pairs are truncated as the original
`_truncate_seq_pair` (Hugging Face's `longest_first` is the same rule).
"""

import keras
import tensorflow as tf

from keras_bert_impl.tokenization.from_files import (
    SPECIAL_TOKENS,
    WORDPIECE,
    in_graph_tokenizer,
    read_tokenizer_files,
    token_ids,
)
from keras_bert_impl.tokenization.preprocessor import pack_inputs, shared_tables

_PACKAGE = "keras_bert_impl"


@keras.saving.register_keras_serializable(package=_PACKAGE)
class TextPreprocessor(keras.layers.Layer):
    """Raw strings (one text, or a pair) -> `input_ids`, `input_mask`, `segment_ids`.

    Args:
        tokenizer_files: `read_tokenizer_files(directory)` (kept in the config,
            so a saved layer needs no files), or a directory to read it from.
        do_lower_case: For WordPiece and SentencePiece.
        max_seq_length: Padded length, special tokens included.

    Call arguments:
        inputs: A [batch] string tensor (or list of strings), or a tuple of
            two for pairs.

    Example:
    >>> files = {"kind": "wordpiece", "vocabulary": ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"]}
    >>> TextPreprocessor(files, max_seq_length=6)((["hi"], ["hi hi"]))["input_ids"].numpy().tolist()
    [[2, 5, 3, 5, 5, 3]]
    """

    def __init__(self, tokenizer_files, do_lower_case=True, max_seq_length=128, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(tokenizer_files, dict):
            tokenizer_files = read_tokenizer_files(tokenizer_files)
        self.tokenizer_files = tokenizer_files
        self.do_lower_case = do_lower_case
        self.max_seq_length = max_seq_length
        self.special_tokens = SPECIAL_TOKENS[tokenizer_files["kind"]]
        specials = self.special_tokens
        if max_seq_length < 2 + specials.separators_between:
            raise ValueError(f"max_seq_length must be at least {2 + specials.separators_between}, got {max_seq_length}")
        self.cls_id, self.sep_id, self.pad_id = token_ids(tokenizer_files, [specials.cls, specials.sep, specials.pad])
        tables = shared_tables() if tokenizer_files["kind"] == WORDPIECE else None
        self.tokenizer = in_graph_tokenizer(tokenizer_files, do_lower_case=do_lower_case, tables=tables)
        self.built = True

    def token_ids(self, texts):
        """[batch] strings -> ragged [batch, (ids)] int32."""
        return tf.cast(self.tokenizer.tokenize(tf.convert_to_tensor(texts, tf.string)), tf.int32)

    def __call__(self, inputs, **kwargs):
        if isinstance(inputs, tuple) and len(inputs) == 2:
            inputs = tuple(tf.convert_to_tensor(texts, tf.string) for texts in inputs)
        elif not isinstance(inputs, (tf.Tensor, keras.KerasTensor)):
            inputs = tf.convert_to_tensor(inputs, tf.string)
        return super().__call__(inputs, **kwargs)

    def call(self, inputs):
        texts, texts_b = inputs if isinstance(inputs, (tuple, list)) else (inputs, None)
        specials = self.special_tokens
        return pack_inputs(
            self.token_ids(texts),
            None if texts_b is None else self.token_ids(texts_b),
            self.max_seq_length,
            self.cls_id,
            self.sep_id,
            pad_id=self.pad_id,
            separators_between=specials.separators_between,
            second_segment_id=1 if specials.segment_ids else 0,
        )

    def compute_output_spec(self, inputs):
        return {name: keras.KerasTensor((None, self.max_seq_length), dtype="int32")
                for name in ("input_ids", "input_mask", "segment_ids")}

    def get_config(self):
        return {
            **super().get_config(),
            "tokenizer_files": self.tokenizer_files,
            "do_lower_case": self.do_lower_case,
            "max_seq_length": self.max_seq_length,
        }
