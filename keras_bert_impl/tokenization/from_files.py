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

from keras_bert_impl import filesystem
from keras_bert_impl.errors import VocabError
from keras_bert_impl.tokenization import special_tokens
from keras_bert_impl.tokenization.byte_level_bpe import (
    ByteLevelBpeTokenizer,
    InGraphByteLevelBpeTokenizer,
    load_merges,
    load_vocab_json,
    read_byte_level_bpe_files,
)
from keras_bert_impl.tokenization.full_tokenizer import FullTokenizer, load_vocab
from keras_bert_impl.tokenization.in_graph import InGraphTokenizer
from keras_bert_impl.tokenization.sentencepiece_tokenizer import (
    InGraphSentencePieceTokenizer,
    SentencePieceModel,
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
    return _wordpiece_files(filesystem.join(directory, "vocab.txt"))


def _wordpiece_files(vocab_file):
    """`read_tokenizer_files`' dict of a `vocab.txt`: its tokens in id order."""
    vocab = load_vocab(vocab_file)
    if not vocab:
        raise VocabError(f"{vocab_file}: empty; a vocabulary holds one token a line")
    tokens = [""] * (max(vocab.values()) + 1)
    for token, index in vocab.items():
        tokens[index] = token
    return {"kind": WORDPIECE, "vocabulary": tokens}


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


def vocabulary(files):
    """The tokens of `read_tokenizer_files`' dict in id order (SentencePiece: its pieces).

    Example:
    >>> vocabulary({"kind": "byte_level_bpe", "vocab": {"<s>": 0, "a": 2, "<pad>": 1}, "merges": []})
    ['<s>', '<pad>', 'a']
    """
    kind = files["kind"]
    if kind == WORDPIECE:
        return list(files["vocabulary"])
    if kind == SENTENCEPIECE:
        return SentencePieceModel(base64.b64decode(files["model_proto"])).pieces()
    tokens = [""] * (max(files["vocab"].values()) + 1)
    for token, index in files["vocab"].items():
        tokens[index] = token
    return tokens


def vocab_file_kind(vocab_file):
    """The tokenizer a release's first tokenizer file names (`ReleaseFiles.vocab_file`).

    `spiece.model` (any `*.model`) is SentencePiece, `vocab.json` (any
    `*.json`) byte-level BPE with `merges.txt` beside it, anything else a
    WordPiece `vocab.txt`, read as the original reads it.

    Example:
    >>> vocab_file_kind("release/vocab.json"), vocab_file_kind("uncased_L-2_H-128_A-2/vocab.txt")
    ('byte_level_bpe', 'wordpiece')
    """
    name = os.fspath(vocab_file)
    if name.endswith(".model"):
        return SENTENCEPIECE
    if name.endswith(".json"):
        return BYTE_LEVEL_BPE
    return WORDPIECE


def release_do_lower_case(directory):
    """Whether a variant release's tokenizer lower-cases: its `tokenizer_config.json`'s
    `do_lower_case` where it says, else Hugging Face's default for the kind
    (ALBERT's SentencePiece: True; byte-level BPE never lower-cases: False).

    WordPiece releases are not asked here: `checkpoints.release.infer_do_lower_case`.
    """
    import json

    path = filesystem.join(os.fspath(directory), "tokenizer_config.json")
    if filesystem.exists(path):
        with filesystem.open_file(path) as f:
            try:
                value = json.load(f).get("do_lower_case")
            except (ValueError, AttributeError):
                raise VocabError(f"{path}: not a JSON object") from None
        if isinstance(value, bool):
            return value
    return tokenizer_kind(directory) != BYTE_LEVEL_BPE


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
        pieces = SentencePieceModel(base64.b64decode(files["model_proto"])).pieces()
        vocab = {piece: i for i, piece in enumerate(pieces)}
    elif kind == BYTE_LEVEL_BPE:
        vocab = files["vocab"]
    else:
        vocab = {token: i for i, token in enumerate(files["vocabulary"])}
    missing = [token for token in tokens if token not in vocab]
    if missing:
        raise VocabError(f"the {kind} vocabulary has no {', '.join(missing)}")
    return [vocab[token] for token in tokens]


def read_vocab_file(vocab_file):
    """The tokenizer files that one named file stands for, as `read_tokenizer_files`' dict.

    For the tools that take a single `--vocab_file`: `vocab_file_kind` says
    the kind; `vocab.json` needs its `merges.txt` beside it. Unlike
    `read_tokenizer_files`, the file is read under whatever name it has.

    Args:
        vocab_file: `vocab.txt`, `vocab.json` (with `merges.txt` beside it)
            or `spiece.model` (any `*.model`).

    Returns:
        `{"kind": ..., ...}`, as `read_tokenizer_files`.

    Raises:
        VocabError: naming the file that is missing, unreadable, or not of
            the kind its name says (a Hugging Face `tokenizer.json` is no
            token -> id object, nor a `.model` of another kind a SentencePiece
            model).

    Example:
    >>> import pathlib, tempfile
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "vocab.json").write_text('{"<unk>": 0}', encoding="utf-8")
    >>> read_vocab_file(root / "vocab.json")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    keras_bert_impl.errors.VocabError: .../merges.txt: not found; a byte-level BPE vocab.json (...) is read with ...
    """
    vocab_file = os.fspath(vocab_file)
    kind = vocab_file_kind(vocab_file)
    if not filesystem.exists(vocab_file):
        raise VocabError(f"{vocab_file}: tokenizer file not found")
    if kind == SENTENCEPIECE:
        proto = SentencePieceTokenizer(vocab_file).model_proto  # a model, with an unknown piece
        return {"kind": kind, "model_proto": base64.b64encode(proto).decode("ascii")}
    if kind == BYTE_LEVEL_BPE:
        merges_file = filesystem.join(filesystem.dirname(vocab_file) or ".", "merges.txt")
        if not filesystem.exists(merges_file):
            raise VocabError(f"{merges_file}: not found; a byte-level BPE vocab.json ({vocab_file}) is read with "
                             "the merges.txt beside it")
        merges = load_merges(merges_file)
        return {"kind": kind, "vocab": load_vocab_json(vocab_file), "merges": [a + " " + b for a, b in merges]}
    return _wordpiece_files(vocab_file)


def release_tokenizer(vocab_file, vocab_size, do_lower_case=True, config_file="bert_config.json"):
    """The checked Python tokenizer of a variant release, given its first tokenizer file.

    Args:
        vocab_file: `vocab.json` (with `merges.txt` beside it) or `spiece.model`.
        vocab_size: The config's; every id of the tokenizer must lie below it.
        do_lower_case: For SentencePiece.
        config_file: Named in errors.

    Returns:
        `ByteLevelBpeTokenizer` or `SentencePieceTokenizer`, with its
        `special_tokens`.

    Raises:
        VocabError: the files are missing or unreadable, lack a special
            token, or hold ids the model's embeddings do not have.
    """
    directory = filesystem.dirname(os.fspath(vocab_file)) or "."
    files = read_tokenizer_files(directory)
    if files["kind"] != vocab_file_kind(vocab_file):
        raise VocabError(f"{vocab_file}: {directory} holds {files['kind']} files, not those {vocab_file} names")
    specials = SPECIAL_TOKENS[files["kind"]]
    token_ids(files, [specials.cls, specials.sep, specials.pad, specials.unk])  # each must be there
    size = len(vocabulary(files))
    if size > vocab_size:
        raise VocabError(f"{vocab_file}: {size} tokens, but the model's embeddings ({config_file}: vocab_size "
                         f"{vocab_size}) have rows for {vocab_size}")
    return python_tokenizer(files, do_lower_case)


def tokenizer_from_files(directory, do_lower_case=True):
    """`python_tokenizer(read_tokenizer_files(directory), do_lower_case)`."""
    return python_tokenizer(read_tokenizer_files(directory), do_lower_case)


__all__ = [
    "KIND_FILES",
    "SPECIAL_TOKENS",
    "in_graph_tokenizer",
    "python_tokenizer",
    "read_tokenizer_files",
    "read_vocab_file",
    "release_do_lower_case",
    "release_tokenizer",
    "token_ids",
    "tokenizer_from_files",
    "tokenizer_kind",
    "vocab_file_kind",
    "vocabulary",
]
