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

from keras_bert_impl import filesystem
from keras_bert_impl.tokenization.from_files import (
    SPECIAL_TOKENS,
    WORDPIECE,
    in_graph_tokenizer,
    python_tokenizer,
    read_tokenizer_files,
    token_ids,
    vocab_file_kind,
    vocabulary,
)
from keras_bert_impl.tokenization.preprocessor import BertPreprocessor, pack_inputs, shared_tables

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
        # Byte-level BPE and SentencePiece find their special tokens (the mask
        # among them) written in the text, as Hugging Face's tokenizers do;
        # WordPiece here does not (`BertPreprocessor(masks_in_text=True)` does).
        self.masks_in_text = tokenizer_files["kind"] != WORDPIECE
        self.mask_id = (token_ids(tokenizer_files, [specials.mask])[0]
                        if self.masks_in_text or specials.mask in self.vocabulary else 0)
        tables = shared_tables() if tokenizer_files["kind"] == WORDPIECE else None
        self.tokenizer = in_graph_tokenizer(tokenizer_files, do_lower_case=do_lower_case, tables=tables)
        self.built = True

    @property
    def vocabulary(self):
        """The tokens in id order (SentencePiece: its pieces)."""
        if not hasattr(self, "_vocabulary"):
            self._vocabulary = vocabulary(self.tokenizer_files)
        return self._vocabulary

    def python_tokenizer(self):
        """The Python tokenizer that tokenizes exactly as this layer (`from_files.python_tokenizer`)."""
        return python_tokenizer(self.tokenizer_files, self.do_lower_case)

    def write_tokenizer_files(self, directory):
        """Writes the tokenizer's files (`vocab.json` + `merges.txt`, `spiece.model`
        or `vocab.txt`) into `directory`, as a release holds them."""
        import base64
        import json

        from keras_bert_impl.io import write_text_atomically

        files, kind = self.tokenizer_files, self.tokenizer_files["kind"]
        if kind == WORDPIECE:
            write_text_atomically(filesystem.join(directory, "vocab.txt"),
                                  "".join(f"{token}\n" for token in files["vocabulary"]))
        elif "model_proto" in files:
            with filesystem.open_file(filesystem.join(directory, "spiece.model"), "wb", encoding=None) as f:
                f.write(base64.b64decode(files["model_proto"]))
        else:
            write_text_atomically(filesystem.join(directory, "vocab.json"), json.dumps(files["vocab"], ensure_ascii=False))
            write_text_atomically(filesystem.join(directory, "merges.txt"),
                                  "#version: 0.2\n" + "".join(f"{merge}\n" for merge in files["merges"]))

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


def release_preprocessor(vocab_file, do_lower_case=True, max_seq_length=128, masks_in_text=False):
    """The preprocessing layer of a release's tokenizer.

    Args:
        vocab_file: The release's first tokenizer file (`ReleaseFiles.vocab_file`):
            a WordPiece `vocab.txt` gives `BertPreprocessor`, exactly as
            before the variants; `vocab.json` or `spiece.model` a
            `TextPreprocessor` over the files beside it.
        do_lower_case: As the tokenizer takes it.
        max_seq_length: Padded length.
        masks_in_text: For WordPiece, read "[MASK]" written in a text as the
            mask token (the variants' tokenizers always do).

    Returns:
        `BertPreprocessor` or `TextPreprocessor`.
    """
    if vocab_file_kind(vocab_file) == WORDPIECE:
        return BertPreprocessor(vocab_file, do_lower_case=do_lower_case, max_seq_length=max_seq_length,
                                masks_in_text=masks_in_text)
    return TextPreprocessor(filesystem.dirname(vocab_file) or ".", do_lower_case=do_lower_case,
                            max_seq_length=max_seq_length)
