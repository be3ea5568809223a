"""A release directory: `bert_config.json`, `vocab.txt` and an original-layout
checkpoint, as google-research/bert publishes them and our tools write them.

A variant's release has its tokenizer's files in place of `vocab.txt`
(`TOKENIZER_FILES`, by the config's `model_type`).

Example:
>>> import os, tempfile
>>> directory = tempfile.mkdtemp()
>>> _ = open(os.path.join(directory, "vocab.txt"), "w").write("[PAD]\\nthe\\nThe\\n")
>>> infer_do_lower_case(os.path.join(directory, "vocab.txt"), None)
False
"""

import dataclasses
import os

from keras_bert_impl import filesystem
from keras_bert_impl.errors import CheckpointError
from keras_bert_impl.io import write_text_atomically

# A release's checkpoint prefixes: a fine-tuned one (ours) and a pretrained
# one (the original's name), preferred in this order unless the directory's
# `checkpoint` state file names the other as the newest written.
_PREFIXES = ("model.ckpt", "bert_model.ckpt")

# The tokenizer files a release of each `model_type` holds, as Hugging Face's
# `save_pretrained` writes them; the first is `ReleaseFiles.vocab_file`.
TOKENIZER_FILES = {
    "bert": ("vocab.txt",),
    "distilbert": ("vocab.txt",),
    "roberta": ("vocab.json", "merges.txt"),
    "albert": ("spiece.model",),
}
# Copied into a converted release too where the source has them (special
# tokens, the fast tokenizer's own file).
TOKENIZER_EXTRAS = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
# A fine-tuned classifier's (or tagger's) label names, one a line in class-id order.
LABEL_LIST_FILE = "label_list.txt"
# How a fine-tuned classifier read texts longer than max_seq_length (`tokenization.long_text`), where not cut.
LONG_TEXT_FILE = "long_text.json"
# A multi-label classifier's labels and each label's threshold (a sigmoid per label, not a softmax over them).
MULTI_LABEL_FILE = "multi_label.json"


def tokenizer_files_of(model_type):
    """`(required, extras)`: the tokenizer file names of a release of `model_type`.

    Example:
    >>> tokenizer_files_of("roberta")[0]
    ('vocab.json', 'merges.txt')
    """
    return TOKENIZER_FILES[model_type], TOKENIZER_EXTRAS


@dataclasses.dataclass(frozen=True)
class ReleaseFiles:
    """The files of a release: `bert_config_file`, `vocab_file`, `checkpoint` (a prefix).

    `vocab_file` is the first of the model type's `TOKENIZER_FILES`
    (`vocab.json` for RoBERTa, `spiece.model` for ALBERT), the others beside it.
    """

    bert_config_file: str
    vocab_file: str
    checkpoint: str


def find_local_release(path):
    """The files of the release at `path`: a directory, or a checkpoint prefix in one (a named source such as
    `hf://ORG/NAME` is `sources.find_release`'s).

    The checkpoint is the prefix given, else the directory's fine-tuned
    `model.ckpt` or its `bert_model.ckpt` (where it has both, the one its
    `checkpoint` state file names as the newest written: a release
    converted into a fine-tuning run's directory is the converted one), else
    the latest training checkpoint that file names.

    Raises:
        CheckpointError: no config, vocabulary or checkpoint there.
    """
    path = os.fspath(path)
    if filesystem.isdir(path):
        directory, prefix = path, None
    elif not filesystem.exists(path + ".index"):
        raise CheckpointError(f"{path}: no such release directory or checkpoint")
    else:
        directory, prefix = filesystem.dirname(path) or ".", path
    config_file = filesystem.join(directory, "bert_config.json")
    if not filesystem.exists(config_file):
        raise CheckpointError(f"{directory}: not a release, it has no bert_config.json")
    tokenizer_files = [filesystem.join(directory, name) for name in TOKENIZER_FILES[release_model_type(config_file)]]
    vocab_file = tokenizer_files[0]
    for required in tokenizer_files:
        if not filesystem.exists(required):
            raise CheckpointError(f"{directory}: not a release, it has no {filesystem.basename(required)}")
    if prefix is None:
        candidates = [filesystem.join(directory, name) for name in _PREFIXES]
        candidates = [c for c in candidates if filesystem.exists(c + ".index")]
        if len(candidates) == 1:
            prefix = candidates[0]  # Whatever the state file names: no TensorFlow start-up to read it.
        else:
            import tensorflow as tf

            latest = tf.train.latest_checkpoint(directory)
            if latest is not None and filesystem.basename(latest) in _PREFIXES and candidates:
                candidates = [filesystem.join(directory, filesystem.basename(latest))]
            prefix = candidates[0] if candidates else latest
    if prefix is None or not filesystem.exists(prefix + ".index"):
        raise CheckpointError(f"{directory}: not a release, it has no checkpoint ({' or '.join(_PREFIXES)})")
    return ReleaseFiles(config_file, vocab_file, prefix)


def write_release_labels(directory, labels):
    """Writes `labels`, one a line in class-id order, as the release's `LABEL_LIST_FILE`."""
    write_text_atomically(filesystem.join(directory, LABEL_LIST_FILE), "".join(f"{label}\n" for label in labels))


def write_release_long_text(directory, options):
    """Writes `options` (`tokenization.long_text.LongTextOptions`) as the release's `LONG_TEXT_FILE`;
    `cut` (or None), the original's reading, removes an earlier one instead."""
    import json

    path = filesystem.join(directory, LONG_TEXT_FILE)
    if options is None or options.mode == "cut":
        filesystem.remove(path, missing_ok=True)
    else:
        write_text_atomically(path, json.dumps(options.to_json(), indent=2) + "\n")


def read_release_long_text(directory):
    """The `LongTextOptions` a release in `directory` records (its `LONG_TEXT_FILE`), or None without one.

    Raises:
        CheckpointError: the file is not JSON or not long-text options, naming it.
    """
    import json

    from keras_bert_impl.tokenization.long_text import LongTextOptions

    path = filesystem.join(directory, LONG_TEXT_FILE)
    if not directory or not filesystem.exists(path):
        return None
    try:
        with filesystem.open_file(path) as f:
            return LongTextOptions.from_json(json.load(f), source=path)
    except (ValueError, UnicodeDecodeError) as error:  # JSONDecodeError is a ValueError
        message = str(error) if str(error).startswith(path) else f"{path}: not JSON ({error})"
        raise CheckpointError(message) from None


@dataclasses.dataclass(frozen=True)
class MultiLabelRecord:
    """What a multi-label classifier's release records in its `MULTI_LABEL_FILE`.

    Attributes:
        labels: The label names in output order (None: the model has none).
        thresholds: One probability per label, at or over which the label
            is predicted.
    """

    labels: tuple
    thresholds: tuple


def write_release_multi_label(directory, record):
    """Writes `record` (a `MultiLabelRecord`) as the release's `MULTI_LABEL_FILE`; None (a single-label
    model) removes an earlier one instead, so that it never calls another model multi-label."""
    import json

    path = filesystem.join(directory, MULTI_LABEL_FILE)
    if record is None:
        filesystem.remove(path, missing_ok=True)
        return
    values = {"labels": None if record.labels is None else list(record.labels),
              "thresholds": [float(t) for t in record.thresholds]}
    write_text_atomically(path, json.dumps(values, indent=2) + "\n")


def read_release_multi_label(directory):
    """The `MultiLabelRecord` of a release in `directory` (its `MULTI_LABEL_FILE`), or None without one.

    Raises:
        CheckpointError: naming the file and the key: not JSON, no
            `thresholds`, labels that are not distinct names, thresholds
            not in (0, 1) or not one per label, labels other than the
            release's `label_list.txt`.
    """
    import json

    from keras_bert_impl.data.multi_label import per_label_thresholds
    from keras_bert_impl.io import read_utf8_lines

    path = filesystem.join(directory, MULTI_LABEL_FILE)
    if not directory or not filesystem.exists(path):
        return None
    try:
        with filesystem.open_file(path) as f:
            values = json.load(f)
    except (ValueError, UnicodeDecodeError) as error:  # JSONDecodeError is a ValueError
        raise CheckpointError(f"{path}: not JSON ({error})") from None
    if not isinstance(values, dict) or "thresholds" not in values:
        raise CheckpointError(f"{path}: not a multi-label record (a JSON object with 'labels' and 'thresholds')")
    labels, thresholds = values.get("labels"), values["thresholds"]
    if labels is not None and (not isinstance(labels, list) or not labels or len(set(map(str, labels))) != len(labels)
                               or not all(isinstance(label, str) and label.strip() == label and label
                                          for label in labels)):
        raise CheckpointError(f"{path}: labels is {labels!r}: a list of distinct names (or null)")
    if not isinstance(thresholds, list) or not thresholds:
        raise CheckpointError(f"{path}: thresholds is {thresholds!r}: a list of one probability per label")
    try:
        thresholds = per_label_thresholds(thresholds, len(labels) if labels else len(thresholds),
                                          f"{path}: thresholds")
    except ValueError as error:
        raise CheckpointError(str(error)) from None
    listed = filesystem.join(directory, LABEL_LIST_FILE)
    if labels is not None and filesystem.exists(listed):
        names = [line.strip() for _, line in read_utf8_lines(listed, kind="label list") if line.strip()]
        if names != labels:
            raise CheckpointError(f"{path}: labels {','.join(labels)} are not those of {listed}: {','.join(names)}")
    return MultiLabelRecord(None if labels is None else tuple(labels), thresholds)


def release_model_type(config_file):
    """The config's `model_type` ("bert" when it has none, or cannot say: `BertConfig` reports that later)."""
    from keras_bert_impl.config import BertConfig
    from keras_bert_impl.errors import ConfigError

    try:
        return BertConfig.from_json_file(config_file).model_type
    except ConfigError:
        return "bert"


def infer_do_lower_case(vocab_file, checkpoint):
    """Whether a release is uncased.

    The original's `validate_case_matches_checkpoint` knows the casing of
    Google's releases by name (`uncased_L-12_H-768_A-12` ...); otherwise an
    uncased vocabulary has no upper-case letters, since its text was
    lower-cased before the vocabulary was built.
    """
    import re

    from keras_bert_impl.tokenization import load_vocab

    match = re.match(r"^.*?([A-Za-z0-9_-]+)/bert_model\.ckpt", checkpoint or "")
    if match:
        name = match.group(1)
        if name in ("uncased_L-24_H-1024_A-16", "uncased_L-12_H-768_A-12", "multilingual_L-12_H-768_A-12",
                    "chinese_L-12_H-768_A-12"):
            return True
        if name in ("cased_L-12_H-768_A-12", "cased_L-24_H-1024_A-16", "multi_cased_L-12_H-768_A-12"):
            return False
    return not any(token != token.lower() for token in load_vocab(vocab_file) if not token.startswith("["))


def begin_release(directory):
    """Makes `directory` and removes its `bert_config.json`, if any, before a release is written there.

    Every release writer writes the config last; over an earlier release,
    removing it first means a write that stops part way never leaves new
    weights beside the old config (or vocabulary) in a directory that has
    all three files.

    Example:
    >>> import tempfile
    >>> directory = tempfile.mkdtemp()
    >>> open(os.path.join(directory, "bert_config.json"), "w").close()
    >>> begin_release(directory)
    >>> os.listdir(directory)
    []
    """
    filesystem.makedirs(directory)
    filesystem.remove(filesystem.join(directory, "bert_config.json"), missing_ok=True)


def write_release(model, directory, config, vocabulary, global_step=None, write_tokenizer=None, write_more=None):
    """Writes `model` as a release: `model.ckpt`, `bert_config.json`, `vocab.txt`.

    Args:
        model: Any of our models.
        directory: Created if missing.
        config: The model's `BertConfig`.
        vocabulary: Token list in id order.
        global_step: Stored in the checkpoint when given.
        write_tokenizer: `write_tokenizer(directory)` writes a variant's
            tokenizer files in place of `vocab.txt` (`TextPreprocessor.
            write_tokenizer_files`).
        write_more: `write_more(directory)` writes (or removes) further
            files of the release (a classifier's label list) before its
            config.

    Returns:
        The checkpoint prefix written.
    """
    from keras_bert_impl.checkpoints.original import save_original_checkpoint

    begin_release(directory)
    prefix = save_original_checkpoint(model, filesystem.join(directory, _PREFIXES[0]), global_step=global_step)
    if write_tokenizer is not None:
        write_tokenizer(directory)
    else:
        write_text_atomically(filesystem.join(directory, "vocab.txt"), "".join(f"{token}\n" for token in vocabulary))
    if write_more is not None:
        write_more(directory)
    config.to_json_file(filesystem.join(directory, "bert_config.json"))  # Last: see begin_release.
    return prefix
