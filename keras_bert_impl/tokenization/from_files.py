"""The tokenizer a release's files call for: WordPiece, byte-level BPE or SentencePiece.

A release directory holds one of `vocab.txt` (BERT, DistilBERT: WordPiece),
`vocab.json` + `merges.txt` (RoBERTa: byte-level BPE) or `spiece.model`
(ALBERT: SentencePiece). `read_tokenizer_files` reads whichever is there into
one JSON-able dict (so a Keras layer can keep it in its config), and
`python_tokenizer` / `in_graph_tokenizer` build the matching tokenizer from
it. Every Python tokenizer has `tokenize`, `convert_tokens_to_ids`,
`convert_ids_to_tokens` and `vocab`; every in-graph one maps [batch] strings
to ragged [batch, (ids)] int64 with `tokenize`.
"""

import base64
import os

import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_impl import filesystem
from keras_bert_impl.errors import VocabError
from keras_bert_impl.tokenization import special_tokens
from keras_bert_impl.tokenization.byte_level_bpe import (
    ByteLevelBpeTokenizer,
    InGraphByteLevelBpeTokenizer,
    read_byte_level_bpe_files,
)
from keras_bert_impl.tokenization.full_tokenizer import FullTokenizer, load_vocab
from keras_bert_impl.tokenization.in_graph import InGraphTokenizer
from keras_bert_impl.tokenization.sentencepiece_tokenizer import (
    InGraphSentencePieceTokenizer,
    SentencePieceTokenizer,
    read_model_proto,
)

WORDPIECE, BYTE_LEVEL_BPE, SENTENCEPIECE = "wordpiece", "byte_level_bpe", "sentencepiece"
# Which files mark each kind, looked for in this order.
KIND_FILES = (
    (SENTENCEPIECE, ("spiece.model",)),
    (BYTE_LEVEL_BPE, ("vocab.json", "merges.txt")),
    (WORDPIECE, ("vocab.txt",)),
)
SPECIAL_TOKENS = {
    WORDPIECE: special_tokens.WORDPIECE,
    BYTE_LEVEL_BPE: special_tokens.BYTE_LEVEL_BPE,
    SENTENCEPIECE: special_tokens.SENTENCEPIECE,
}


def tokenizer_kind(directory):
    """Which tokenizer the files in `directory` are for.

    Args:
        directory: A release (or Hugging Face model) directory.

    Returns:
        `"sentencepiece"`, `"byte_level_bpe"` or `"wordpiece"`.

    Raises:
        VocabError: none of `spiece.model`, `vocab.json` + `merges.txt`,
            `vocab.txt` is there.

    Example:
    >>> import pathlib, tempfile
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "vocab.txt").write_text("[UNK]\\n", encoding="utf-8")
    >>> tokenizer_kind(root)
    'wordpiece'
    """
    directory = os.fspath(directory)
    for kind, names in KIND_FILES:
        if all(filesystem.exists(filesystem.join(directory, name)) for name in names):
            return kind
    raise VocabError(f"{directory}: no tokenizer files (spiece.model, vocab.json + merges.txt, or vocab.txt)")


def read_tokenizer_files(directory):
    """The tokenizer files of `directory`, as one JSON-able dict.

    Returns:
        `{"kind": ..., ...}`: `vocabulary` (token list in id order) for
        WordPiece; `vocab` (token -> id) and `merges` (`"a b"` strings) for
        byte-level BPE; `model_proto` (base64) for SentencePiece.

    Raises:
        VocabError: as `tokenizer_kind`, or an unreadable file.
    """
    kind = tokenizer_kind(directory)
    directory = os.fspath(directory)
    if kind == SENTENCEPIECE:
        proto = read_model_proto(filesystem.join(directory, "spiece.model"))
        return {"kind": kind, "model_proto": base64.b64encode(proto).decode("ascii")}
    if kind == BYTE_LEVEL_BPE:
        vocab, merges = read_byte_level_bpe_files(directory)
        return {"kind": kind, "vocab": vocab, "merges": [a + " " + b for a, b in merges]}
    vocab_file = filesystem.join(directory, "vocab.txt")
    vocab = load_vocab(vocab_file)
    if not vocab:
        raise VocabError(f"{vocab_file}: empty; a vocabulary holds one token a line")
    tokens = [""] * (max(vocab.values()) + 1)
    for token, index in vocab.items():
        tokens[index] = token
    return {"kind": kind, "vocabulary": tokens}


def python_tokenizer(files, do_lower_case=True):
    """The Python tokenizer for `read_tokenizer_files`' dict.

    Args:
        files: `read_tokenizer_files(directory)`.
        do_lower_case: For WordPiece and SentencePiece (byte-level BPE never
            lower-cases).

    Returns:
        `FullTokenizer`, `ByteLevelBpeTokenizer` or `SentencePieceTokenizer`.
    """
    kind = files["kind"]
    if kind == SENTENCEPIECE:
        return SentencePieceTokenizer.from_model_proto(base64.b64decode(files["model_proto"]),
                                                       do_lower_case=do_lower_case)
    if kind == BYTE_LEVEL_BPE:
        return ByteLevelBpeTokenizer.from_vocab(files["vocab"], [tuple(m.split(" ")) for m in files["merges"]])
    return FullTokenizer.from_vocab({token: i for i, token in enumerate(files["vocabulary"])}, do_lower_case)


def in_graph_tokenizer(files, do_lower_case=True, tables=None):
    """The in-graph tokenizer for `read_tokenizer_files`' dict.

    Args:
        files: `read_tokenizer_files(directory)`.
        do_lower_case: As `python_tokenizer`.
        tables: For WordPiece, precomputed `in_graph.build_tables()`.

    Returns:
        `InGraphTokenizer`, `InGraphByteLevelBpeTokenizer` or
        `InGraphSentencePieceTokenizer`.
    """
    kind = files["kind"]
    if kind == SENTENCEPIECE:
        return InGraphSentencePieceTokenizer(base64.b64decode(files["model_proto"]), do_lower_case=do_lower_case)
    if kind == BYTE_LEVEL_BPE:
        return InGraphByteLevelBpeTokenizer(files["vocab"], [tuple(m.split(" ")) for m in files["merges"]])
    return InGraphTokenizer(files["vocabulary"], do_lower_case=do_lower_case, tables=tables)


def token_ids(files, tokens):
    """Ids of `tokens` in the vocabulary of `read_tokenizer_files`' dict.

    Raises:
        VocabError: a token the vocabulary lacks.

    Example:
    >>> token_ids({"kind": "wordpiece", "vocabulary": ["[PAD]", "[CLS]"]}, ["[CLS]"])
    [1]
    """
    kind = files["kind"]
    if kind == SENTENCEPIECE:
        model = tf_text.SentencepieceTokenizer(model=base64.b64decode(files["model_proto"]))
        pieces = model.id_to_string(tf.range(model.vocab_size())).numpy()
        vocab = {piece.decode("utf-8"): i for i, piece in enumerate(pieces)}
    elif kind == BYTE_LEVEL_BPE:
        vocab = files["vocab"]
    else:
        vocab = {token: i for i, token in enumerate(files["vocabulary"])}
    missing = [token for token in tokens if token not in vocab]
    if missing:
        raise VocabError(f"the {kind} vocabulary has no {', '.join(missing)}")
    return [vocab[token] for token in tokens]


def tokenizer_from_files(directory, do_lower_case=True):
    """`python_tokenizer(read_tokenizer_files(directory), do_lower_case)`."""
    return python_tokenizer(read_tokenizer_files(directory), do_lower_case)


__all__ = [
    "KIND_FILES",
    "SPECIAL_TOKENS",
    "in_graph_tokenizer",
    "python_tokenizer",
    "read_tokenizer_files",
    "token_ids",
    "tokenizer_from_files",
    "tokenizer_kind",
]
