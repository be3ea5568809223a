"""What `bert-convert-hf` checks in a Hugging Face directory before it builds or writes anything.

Two kinds of check, each refusing by name rather than failing later:

* the weights against `config.json` (`check_weights_fit_config`): the
  header's shapes and layer count agree with the config before the model is
  built, so a config of `vocab_size: 2000000000` or `num_hidden_layers:
  100000` is refused at once, not met as a 128 GB allocation or minutes of
  building;
* the tokenizer files (`tokenizer_files_to_copy`): each is a regular file
  (a link is refused: its target, `/etc/passwd` say, is not the model's)
  that parses as what its name says and fits the config's `vocab_size`, so
  that a release that looks complete does not fail in the next tool.

Example:
>>> import os, tempfile
>>> directory = tempfile.mkdtemp()
>>> _ = open(os.path.join(directory, "vocab.txt"), "w").write("[PAD]\\n[UNK]\\n")
>>> from keras_bert_impl.config import BertConfig
>>> tokenizer_files_to_copy(directory, BertConfig(vocab_size=2, hidden_size=4, num_hidden_layers=1,
...                                               num_attention_heads=1, intermediate_size=4))
('vocab.txt',)
"""

import json
import os
import re

from keras_bert_impl import filesystem
from keras_bert_impl.errors import CheckpointError, InputFileError, VocabError
from keras_bert_impl.io import read_utf8_lines

_LAYER = re.compile(r"^bert/encoder/layer_(\d+)/")
_ALBERT_GROUP = re.compile(r"^bert/encoder/transformer/group_(\d+)/")


def _regular_file(path):
    """Refuses a link (its target is not the model's file) or anything but a regular file."""
    if filesystem.is_remote(path):
        return
    if os.path.islink(path):
        raise InputFileError(f"{path}: a symbolic link (to {os.readlink(path)}); a release copies regular files "
                             "only: put the file itself in the directory")
    if not os.path.isfile(path):
        raise InputFileError(f"{path}: not a regular file")


def _text_lines(path, what):
    """The lines of a UTF-8 text file (`io.read_utf8_lines`: `file:line` of a bad byte), a NUL byte refused
    as the sign of a binary file."""
    lines = []
    for number, line in read_utf8_lines(path, kind=what):
        if "\x00" in line:
            raise VocabError(f"{path}:{number}: {what} holds a NUL byte: a binary file, not text")
        lines.append(line)
    return lines


def _check_wordpiece_vocab(path, vocab_size):
    lines = _text_lines(path, "WordPiece vocabulary")
    if not lines:
        raise VocabError(f"{path}: empty; a vocabulary holds one token a line")
    if len(lines) > vocab_size:
        raise VocabError(f"{path}: {len(lines)} tokens, but config.json's vocab_size is {vocab_size}: the model has "
                         f"no embedding for ids {vocab_size} and above")


def _check_vocab_json(path, vocab_size):
    from keras_bert_impl.tokenization.byte_level_bpe import load_vocab_json

    vocab = load_vocab_json(path)  # an object of token -> distinct, non-negative integer ids
    beyond = sorted(token for token, index in vocab.items() if index >= vocab_size)
    if beyond:
        raise VocabError(f"{path}: token {beyond[0]!r} has id {vocab[beyond[0]]}, beyond config.json's vocab_size "
                         f"{vocab_size}")


def _check_merges(path, vocab_size):
    from keras_bert_impl.tokenization.byte_level_bpe import load_merges

    _text_lines(path, "merges file")  # text, not binary
    load_merges(path)  # two tokens a line


def _check_sentencepiece(path, vocab_size):
    from keras_bert_impl.tokenization.sentencepiece_tokenizer import SentencePieceTokenizer

    if filesystem.getsize(path) == 0:
        raise VocabError(f"{path}: empty, not a SentencePiece model")
    size = len(SentencePieceTokenizer(path).vocab)  # VocabError for bytes that are not a model
    if size > vocab_size:
        raise VocabError(f"{path}: {size} pieces, but config.json's vocab_size is {vocab_size}")


def _check_json_object(path, vocab_size):
    try:
        value = json.loads("".join(_text_lines(path, "JSON file")))
    except json.JSONDecodeError as error:
        raise VocabError(f"{path}:{error.lineno}: not JSON ({error.msg})") from None
    if not isinstance(value, dict):
        raise VocabError(f"{path}: a JSON {type(value).__name__}, expected an object")


_CHECKS = {"vocab.txt": _check_wordpiece_vocab, "vocab.json": _check_vocab_json, "merges.txt": _check_merges,
           "spiece.model": _check_sentencepiece}


def tokenizer_files_to_copy(hf_dir, config):
    """The tokenizer files of `hf_dir` a release of `config` copies, each read and checked.

    The model type's files (`release.TOKENIZER_FILES`) must be there, the
    extras (`release.TOKENIZER_EXTRAS`) are taken where they are. Each must
    be a regular file (not a link) and parse: `vocab.txt` UTF-8 text of at
    most `vocab_size` lines; `vocab.json` an object of token -> distinct id
    below `vocab_size`; `merges.txt` text of two tokens a line;
    `spiece.model` a SentencePiece model of at most `vocab_size` pieces; the
    extras JSON objects.

    Args:
        hf_dir: The Hugging Face directory.
        config: The model's `BertConfig` (its `model_type`, `vocab_size`).

    Returns:
        The file names, required ones first.

    Raises:
        InputFileError: a required file missing, a link, or not a regular file.
        VocabError: a file that does not parse or does not fit `vocab_size`
            (naming the file and, for text, the line).
    """
    from keras_bert_impl.checkpoints.release import tokenizer_files_of

    hf_dir = os.fspath(hf_dir)
    required, extras = tokenizer_files_of(config.model_type)
    names = list(required)
    for name in required:
        path = filesystem.join(hf_dir, name)
        if not filesystem.exists(path) and not os.path.islink(path):
            what = "WordPiece vocabulary" if name == "vocab.txt" else f"{config.model_type} tokenizer file"
            raise InputFileError(f"{path}: no such file; a release needs the model's {what}")
    names += [name for name in extras if filesystem.exists(filesystem.join(hf_dir, name))
              or os.path.islink(filesystem.join(hf_dir, name))]
    for name in names:
        path = filesystem.join(hf_dir, name)
        _regular_file(path)
        _CHECKS.get(name, _check_json_object)(path, config.vocab_size)
    return tuple(names)


def _shape_text(shape):
    return "[" + ", ".join(map(str, shape)) + "]"


def check_weights_fit_config(config, shapes, source):
    """Refuses a `config.json` that the weights' shapes or layer count contradict, before a model is built.

    Args:
        config: The `BertConfig` read from `config.json`.
        shapes: `{original name: shape}` of the weights (`read_hf_weights`).
        source: The HF directory, named in errors.

    Raises:
        CheckpointError: an embedding table of another size than the
            config's, an intermediate layer of another width, or layers
            (ALBERT: groups) the config does not have or that the file lacks.
    """
    width = config.embedding_size or config.hidden_size
    expected = {
        "bert/embeddings/word_embeddings": ((config.vocab_size, width), "vocab_size"),
        "bert/embeddings/position_embeddings": ((config.max_position_embeddings, width), "max_position_embeddings"),
        "bert/embeddings/token_type_embeddings": ((config.type_vocab_size, width), "type_vocab_size"),
    }
    expected.update({name: ((config.hidden_size, config.intermediate_size), "hidden_size, intermediate_size")
                     for name in shapes if name.endswith("intermediate/dense/kernel")})
    for name, (shape, keys) in expected.items():
        if name in shapes and tuple(shapes[name]) != shape:
            raise CheckpointError(
                f"{source}: model.safetensors's {name} is {_shape_text(shapes[name])}, but config.json "
                f"({keys}) makes it {_shape_text(shape)}: the config and the weights disagree")
    if config.model_type == "albert":  # Its layers share the weights of its groups.
        pattern, count, what, unit = _ALBERT_GROUP, config.num_hidden_groups, "num_hidden_groups", "group"
    else:
        pattern, count, what, unit = _LAYER, config.num_hidden_layers, "num_hidden_layers", "layer"
    present = sorted({int(m.group(1)) for m in map(pattern.match, shapes) if m})
    beyond = [index for index in present if index >= count]
    if beyond:
        raise CheckpointError(
            f"{source}: model.safetensors holds {unit}(s) {', '.join(map(str, beyond))} beyond the "
            f"{what} {count} of config.json: the config and the weights disagree")
    if present and len(present) < count:
        raise CheckpointError(
            f"{source}: config.json's {what} is {count}, but model.safetensors holds {len(present)} {unit}(s) "
            f"({', '.join(map(str, present))}): the config and the weights disagree")
