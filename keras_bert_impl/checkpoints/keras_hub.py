"""keras-hub's BERT (`BertBackbone`, `BertMaskedLM`, `BertTokenizer`) <-> original releases.

(RoBERTa, ALBERT and DistilBERT presets: `keras_hub_variants`, which both
directions below hand a variant to.)

keras-hub stores the same weights as the original under other names, and keeps
the attention projections' width H as two axes, [num_heads, size_per_head];
the maps below are the whole difference, written out as data (as
`name_map.py` is for our variables). Both directions only rename and reshape,
so values pass bit for bit.

A keras-hub preset cannot say everything a release says. Its `config.json`
has one dropout rate, no initializer range and no activation (the backbone
always computes the tanh GELU), and keras-hub has no next-sentence head. So a
preset written here carries, beside keras-hub's own files, a folder
`original/` that keras-hub ignores: the release's `bert_config.json` as it
was, and every checkpoint tensor keras-hub has no variable for (the
next-sentence head, `global_step`, ...) in `original/extra_variables.ckpt`.
`preset_to_release` reads it back, so release -> preset -> release gives the
same checkpoint tensors and the same `bert_config.json`; a preset without it
(one keras-hub made) gets the config of what keras-hub computes.

Where keras-hub computes something else, the conversions measure by how much
on `probe_batch` (their callers print it):

* the backbone's activation is the tanh GELU (our `"gelu"`); a
  `"gelu_exact"` model runs under it approximately;
* `BertMaskedLM`'s head computes its transform with the exact GELU and a
  LayerNorm epsilon of 1e-5, where `cls/predictions` uses `hidden_act` and
  1e-12;
* keras-hub masks padded keys out exactly where the original adds -10000:
  rows of real tokens agree, padded rows do not (the batch has no padding).

Example:
>>> keras_hub_variable_map(num_layers=2)["bert/encoder/layer_1/attention/self/query/kernel"]
('transformer_layer_1/self_attention_layer/query/kernel', 'last')
"""

import dataclasses
import json
import os
import shutil
import tempfile

import numpy as np

from keras_bert_impl import extras, filesystem
from keras_bert_impl.checkpoints.original import (
    assign_original_weights,
    open_checkpoint,
    write_checkpoint_tensors,
)
from keras_bert_impl.checkpoints.release import begin_release
from keras_bert_impl.config import BertConfig
from keras_bert_impl.errors import CheckpointError, ConfigError, OutputPathError, VocabError
from keras_bert_impl.io import copy_atomically, temporary_path, write_text_atomically
from keras_bert_impl.models.bert_model import BertModel
from keras_bert_impl.models.pretraining import BertPretrainingModel
from keras_bert_impl.tokenization import (
    SPECIAL_TOKENS,
    check_special_tokens,
    load_vocab,
    validate_case_matches_checkpoint,
)

# Relative to the `BertBackbone`, and to a task model holding one (keras-hub's
# variable paths leave the backbone out).
EMBEDDING_VARIABLES = {
    "bert/embeddings/word_embeddings": "token_embedding/embeddings",
    "bert/embeddings/token_type_embeddings": "segment_embedding/embeddings",
    "bert/embeddings/position_embeddings": "position_embedding/embeddings",
    "bert/embeddings/LayerNorm/gamma": "embeddings_layer_norm/gamma",
    "bert/embeddings/LayerNorm/beta": "embeddings_layer_norm/beta",
}

# Under `bert/encoder/layer_{N}/` and `transformer_layer_{N}/`.
TRANSFORMER_LAYER_VARIABLES = {
    "attention/self/query/kernel": "self_attention_layer/query/kernel",
    "attention/self/query/bias": "self_attention_layer/query/bias",
    "attention/self/key/kernel": "self_attention_layer/key/kernel",
    "attention/self/key/bias": "self_attention_layer/key/bias",
    "attention/self/value/kernel": "self_attention_layer/value/kernel",
    "attention/self/value/bias": "self_attention_layer/value/bias",
    "attention/output/dense/kernel": "self_attention_layer/attention_output/kernel",
    "attention/output/dense/bias": "self_attention_layer/attention_output/bias",
    "attention/output/LayerNorm/gamma": "self_attention_layer_norm/gamma",
    "attention/output/LayerNorm/beta": "self_attention_layer_norm/beta",
    "intermediate/dense/kernel": "feedforward_intermediate_dense/kernel",
    "intermediate/dense/bias": "feedforward_intermediate_dense/bias",
    "output/dense/kernel": "feedforward_output_dense/kernel",
    "output/dense/bias": "feedforward_output_dense/bias",
    "output/LayerNorm/gamma": "feedforward_layer_norm/gamma",
    "output/LayerNorm/beta": "feedforward_layer_norm/beta",
}

# keras-hub's `MultiHeadAttention` splits H into [num_heads, size_per_head]:
# "last" for [..., H] <-> [..., num_heads, size_per_head], "first" for
# [H, ...] <-> [num_heads, size_per_head, ...]. A reshape: same values, same order.
HEAD_AXES = {
    "attention/self/query/kernel": "last",
    "attention/self/query/bias": "last",
    "attention/self/key/kernel": "last",
    "attention/self/key/bias": "last",
    "attention/self/value/kernel": "last",
    "attention/self/value/bias": "last",
    "attention/output/dense/kernel": "first",
}

POOLER_VARIABLES = {
    "bert/pooler/dense/kernel": "pooled_dense/kernel",
    "bert/pooler/dense/bias": "pooled_dense/bias",
}

# Relative to `BertMaskedLM`. Its decoder is the token embedding, tied, as
# the original's is the word embedding: only the output bias is the head's own.
MASKED_LM_VARIABLES = {
    "cls/predictions/transform/dense/kernel": "mlm_head/intermediate_dense/kernel",
    "cls/predictions/transform/dense/bias": "mlm_head/intermediate_dense/bias",
    "cls/predictions/transform/LayerNorm/gamma": "mlm_head/intermediate_layer_norm/gamma",
    "cls/predictions/transform/LayerNorm/beta": "mlm_head/intermediate_layer_norm/beta",
    "cls/predictions/output_bias": "mlm_head/output_bias",
}

# `bert_config.json` key -> the `BertBackbone` argument that means the same.
# keras-hub's one `dropout` stands for both of ours; it has no initializer
# range (it initialises with 0.02) and no activation (the tanh GELU).
CONFIG_KEYS = {
    "vocab_size": "vocabulary_size",
    "hidden_size": "hidden_dim",
    "num_hidden_layers": "num_layers",
    "num_attention_heads": "num_heads",
    "intermediate_size": "intermediate_dim",
    "max_position_embeddings": "max_sequence_length",
    "type_vocab_size": "num_segments",
}
KERAS_HUB_INITIALIZER_RANGE = 0.02
# Our activations that keras-hub's backbone computes, exactly or approximately.
KERAS_HUB_ACTIVATIONS = ("gelu", "gelu_exact")

# What a preset written here carries beside keras-hub's files.
ORIGINAL_DIR = "original"
EXTRA_VARIABLES = "extra_variables.ckpt"
RELEASE_CHECKPOINT = "bert_model.ckpt"


def keras_hub_variable_map(num_layers, masked_lm=False):
    """Original checkpoint name -> `(keras-hub variable path, head axes)`.

    Args:
        num_layers: Transformer layers of the model.
        masked_lm: Also map `cls/predictions` to `BertMaskedLM`'s head.

    Returns:
        Dict from names such as `bert/encoder/layer_0/attention/self/query/kernel`
        to `("transformer_layer_0/self_attention_layer/query/kernel", "last")`;
        the second item is `HEAD_AXES`' entry, None for the same layout.

    Example:
    >>> len(keras_hub_variable_map(num_layers=2)), len(keras_hub_variable_map(num_layers=2, masked_lm=True))
    (39, 44)
    """
    names = {name: (path, None) for name, path in EMBEDDING_VARIABLES.items()}
    for index in range(num_layers):
        for name, path in TRANSFORMER_LAYER_VARIABLES.items():
            names[f"bert/encoder/layer_{index}/{name}"] = (f"transformer_layer_{index}/{path}", HEAD_AXES.get(name))
    names.update((name, (path, None)) for name, path in POOLER_VARIABLES.items())
    if masked_lm:
        names.update((name, (path, None)) for name, path in MASKED_LM_VARIABLES.items())
    return names


def to_keras_hub_layout(value, head_axes, num_heads):
    """An original tensor in keras-hub's layout (a reshape; None leaves it as it is).

    Example:
    >>> to_keras_hub_layout(np.zeros((16, 8)), "first", num_heads=2).shape
    (2, 8, 8)
    """
    value = np.asarray(value)
    if head_axes == "last":
        # [..., H] -> [..., num_heads, size_per_head]
        return value.reshape(value.shape[:-1] + (num_heads, -1))
    if head_axes == "first":
        # [H, ...] -> [num_heads, size_per_head, ...]
        return value.reshape((num_heads, -1) + value.shape[1:])
    return value


def to_original_layout(value, head_axes):
    """A keras-hub tensor in the original layout; undoes `to_keras_hub_layout`.

    Example:
    >>> to_original_layout(np.zeros((16, 2, 4)), "last").shape
    (16, 8)
    """
    value = np.asarray(value)
    if head_axes == "last":
        # [..., num_heads, size_per_head] -> [..., H]
        return value.reshape(value.shape[:-2] + (-1,))
    if head_axes == "first":
        # [num_heads, size_per_head, ...] -> [H, ...]
        return value.reshape((-1,) + value.shape[2:])
    return value


def keras_hub_weights(weights, config, masked_lm=False, source="weights"):
    """Original-named weights as keras-hub's `BertBackbone` (or `BertMaskedLM`) holds them.

    Args:
        weights: `{original name: array}`, e.g. `original_weights(bert_model)`.
        config: The model's `BertConfig`.
        masked_lm: Also convert `cls/predictions` (for a `BertMaskedLM`).
        source: Where `weights` came from, for the error message.

    Returns:
        `{keras-hub variable path: array}`.

    Raises:
        CheckpointError: `weights` lacks a name the map needs.
    """
    names = keras_hub_variable_map(config.num_hidden_layers, masked_lm)
    missing = [name for name in names if name not in weights]
    if missing:
        more = f" (and {len(missing) - 3} more)" if len(missing) > 3 else ""
        raise CheckpointError(f"{source}: has no {', '.join(missing[:3])}{more}")
    return {
        path: to_keras_hub_layout(weights[name], head_axes, config.num_attention_heads)
        for name, (path, head_axes) in names.items()
    }


def assign_keras_hub_weights(model, weights, source="weights"):
    """Assigns `{keras-hub variable path: array}` to every variable of `model`.

    Raises:
        CheckpointError: a variable `weights` has no value for, or one of
            another shape; nothing is assigned then.
    """
    variables = {variable.path: variable for variable in model.weights}
    missing = [path for path in variables if path not in weights]
    mismatched = [
        f"{path}: {list(np.shape(weights[path]))} vs keras-hub {list(variable.shape)}"
        for path, variable in variables.items()
        if path in weights and tuple(np.shape(weights[path])) != tuple(variable.shape)
    ]
    if missing or mismatched:
        problems = [f"no value for {path}" for path in missing[:3]] + mismatched[:3]
        raise CheckpointError(f"{source}: does not fit keras-hub's {model.name}: " + "; ".join(problems))
    for path, variable in variables.items():
        variable.assign(np.asarray(weights[path], dtype=variable.dtype))


def weights_of_keras_hub(model, masked_lm=False):
    """`{original name: numpy array}` of a keras-hub `BertBackbone` or `BertMaskedLM`.

    Args:
        model: The keras-hub model.
        masked_lm: Also read `BertMaskedLM`'s head as `cls/predictions`.
    """
    values = {variable.path: np.asarray(variable) for variable in model.weights}
    backbone = getattr(model, "backbone", model)
    return {
        name: to_original_layout(values[path], head_axes)
        for name, (path, head_axes) in keras_hub_variable_map(backbone.num_layers, masked_lm).items()
    }


def backbone_arguments(config):
    """The `BertBackbone` constructor arguments of a `BertConfig`.

    Example:
    >>> config = BertConfig(vocab_size=60, hidden_size=16, num_hidden_layers=2,
    ...                     num_attention_heads=4, intermediate_size=32, type_vocab_size=2)
    >>> sorted(backbone_arguments(config).items())  # doctest: +NORMALIZE_WHITESPACE
    [('dropout', 0.1), ('hidden_dim', 16), ('intermediate_dim', 32), ('max_sequence_length', 512),
     ('num_heads', 4), ('num_layers', 2), ('num_segments', 2), ('vocabulary_size', 60)]
    """
    arguments = {theirs: getattr(config, ours) for ours, theirs in CONFIG_KEYS.items()}
    arguments["dropout"] = config.hidden_dropout_prob
    return arguments


def config_of_backbone(arguments, source="config.json"):
    """The `BertConfig` of what a `BertBackbone` of `arguments` computes.

    Args:
        arguments: The backbone's config (`config.json`'s `"config"`).
        source: For error messages.

    Raises:
        ConfigError: a key is missing or a value is not valid.
    """
    missing = [key for key in (*CONFIG_KEYS.values(), "dropout") if key not in arguments]
    if missing:
        raise ConfigError(f"{source}: missing key(s) {', '.join(missing)}")
    values = {ours: arguments[theirs] for ours, theirs in CONFIG_KEYS.items()}
    values.update(
        hidden_act="gelu",
        hidden_dropout_prob=arguments["dropout"],
        attention_probs_dropout_prob=arguments["dropout"],
        initializer_range=KERAS_HUB_INITIALIZER_RANGE,
    )
    return BertConfig.from_dict(values, source=source)


def build_keras_hub_model(config, vocabulary, do_lower_case, masked_lm=False):
    """A keras-hub BERT of `config`, freshly initialised, and its tokenizer.

    Args:
        config: The `BertConfig`; its `hidden_act` must be in `KERAS_HUB_ACTIVATIONS`.
        vocabulary: Tokens in id order.
        do_lower_case: The original's flag: lower-case and strip accents.
        masked_lm: Build `BertMaskedLM` (with its preprocessor) around the backbone.

    Returns:
        `(model, tokenizer)`: a `BertMaskedLM` or a `BertBackbone`, and a `BertTokenizer`.
    """
    keras_hub = extras.import_extra("keras_hub", "keras-hub", "bert-convert-keras-hub")

    backbone = keras_hub.models.BertBackbone(**backbone_arguments(config), dtype="float32")
    # The original's do_lower_case also strips accents; keras-hub has a flag for each.
    tokenizer = keras_hub.models.BertTokenizer(
        vocabulary=list(vocabulary), lowercase=do_lower_case, strip_accents=do_lower_case
    )
    if not masked_lm:
        return backbone, tokenizer
    preprocessor = keras_hub.models.BertMaskedLMPreprocessor(
        tokenizer=tokenizer, sequence_length=config.max_position_embeddings
    )
    return keras_hub.models.BertMaskedLM(backbone=backbone, preprocessor=preprocessor), tokenizer


def probe_batch(config, batch_size=2, seq_length=16, num_masks=3, seed=0):
    """The fixed batch the conversions measure differences on.

    Random token ids, all attended, segment 1 on the second half of each row
    (where the model has two segments), masked-LM positions spread over the row.

    Returns:
        `(ours, keras_hub's)`: the same batch as our input names
        (`input_ids`, `input_mask`, `segment_ids`, `masked_lm_positions`) and
        as keras-hub's (`token_ids`, `padding_mask`, `segment_ids`,
        `mask_positions`), each [batch_size, seq_length] or [batch_size, num_masks].

    Example:
    >>> ours, theirs = probe_batch(BertConfig(vocab_size=60, hidden_size=16, num_hidden_layers=1,
    ...                                       num_attention_heads=4, intermediate_size=32))
    >>> ours["input_ids"].shape, theirs["mask_positions"][0].tolist()
    ((2, 16), [1, 8, 15])
    """
    seq_length = min(seq_length, config.max_sequence_length)
    rng = np.random.default_rng(seed)
    # [batch_size, seq_length]
    input_ids = rng.integers(0, config.vocab_size, (batch_size, seq_length)).astype("int32")
    segment_ids = np.zeros_like(input_ids)
    segment_ids[:, seq_length // 2:] = max(0, min(1, config.type_vocab_size - 1))
    input_mask = np.ones_like(input_ids)
    # [batch_size, num_masks]
    positions = np.tile(np.linspace(1, seq_length - 1, num_masks).astype("int32"), (batch_size, 1))
    ours = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids,
            "masked_lm_positions": positions}
    theirs = {"token_ids": input_ids, "padding_mask": input_mask, "segment_ids": segment_ids,
              "mask_positions": positions}
    return ours, theirs


def keras_hub_differences(model, keras_hub_model, config):
    """Max abs differences between one of our models and a keras-hub model, on `probe_batch`.

    Args:
        model: A `BertModel` or `BertPretrainingModel`.
        keras_hub_model: A `BertBackbone` or `BertMaskedLM` (or a variant's:
            `RobertaBackbone`, `AlbertMaskedLM`, ...; each is given the
            inputs it takes).
        config: The `BertConfig` of `model`.

    Returns:
        `{"sequence_output": float}`, with `"masked_lm_logits"` when both
        models have the masked-LM head.
    """
    ours, theirs = probe_batch(config)
    bert = getattr(model, "bert", model)
    backbone = getattr(keras_hub_model, "backbone", keras_hub_model)
    encoder_inputs = {name: ours[name] for name in ("input_ids", "input_mask", "segment_ids")}
    backbone_inputs = {name: theirs[name] for name in backbone.input if name in theirs}
    backbone_output = backbone(backbone_inputs, training=False)
    if isinstance(backbone_output, dict):
        backbone_output = backbone_output["sequence_output"]  # RoBERTa's and DistilBERT's return it alone
    # [batch_size, seq_length, H] each
    differences = {
        "sequence_output": _max_abs_difference(bert(encoder_inputs, training=False)["sequence_output"],
                                               backbone_output)
    }
    if isinstance(model, BertPretrainingModel) and backbone is not keras_hub_model:
        task_inputs = {name: value for name, value in theirs.items() if name in backbone_inputs or
                       name == "mask_positions"}
        # [batch_size, num_masks, vocab_size] each
        differences["masked_lm_logits"] = _max_abs_difference(
            model(ours, training=False)["masked_lm_logits"], keras_hub_model(task_inputs, training=False)
        )
    return differences


def _max_abs_difference(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def read_checkpoint_tensors(checkpoint_prefix):
    """`{name: numpy array}` of every tensor of a TF checkpoint (a prefix, or a directory).

    Raises:
        CheckpointError: no checkpoint there, or an unreadable one.
    """
    _, reader = open_checkpoint(checkpoint_prefix)
    return {name: reader.get_tensor(name) for name in sorted(reader.get_variable_to_shape_map())}


def read_vocabulary(vocab_file, vocab_size):
    """The tokens of `vocab_file` in id order, checked for keras-hub's `BertTokenizer`.

    Raises:
        VocabError: a repeated token (its ids would shift), a special token
            keras-hub needs missing, or more tokens than `vocab_size`.
    """
    vocab = load_vocab(vocab_file)
    check_special_tokens(vocab, vocab_file, required=SPECIAL_TOKENS)
    vocabulary = sorted(vocab, key=vocab.get)
    if vocab[vocabulary[-1]] != len(vocabulary) - 1:
        raise VocabError(f"{vocab_file}: repeats a token; keras-hub's tokenizer needs each token once")
    if len(vocabulary) > vocab_size:
        raise VocabError(f"{vocab_file}: {len(vocabulary)} tokens, more than vocab_size {vocab_size}")
    return vocabulary


def _local_path(path):
    """`path` made absolute when local; a remote one (`gs://...`) as it is."""
    path = os.fspath(path)
    return path if filesystem.is_remote(path) else os.path.abspath(path)


def _check_new_preset_dir(preset_dir):
    if filesystem.exists(preset_dir) and not filesystem.isdir(preset_dir):
        raise OutputPathError(f"{preset_dir}: is a file, not a directory")
    if filesystem.isdir(preset_dir) and filesystem.listdir(preset_dir):
        raise OutputPathError(
            f"{preset_dir}: not empty; a preset is written only into a new or empty directory, since "
            "keras-hub reads any task.json or preprocessor.json it finds there"
        )


def _upload_preset(staging, preset_dir):
    """Copies the local preset `staging` to the remote `preset_dir`, file by file, atomically.

    keras-hub reads a preset through its `config.json`, so that is copied
    last: until it appears, `preset_dir` is not a preset.
    """
    files = []
    for root, _, names in os.walk(staging):
        files += [os.path.relpath(os.path.join(root, name), staging) for name in names]
    for relative in sorted(files, key=lambda name: name == "config.json"):
        target = filesystem.join(preset_dir, *relative.split(os.sep))
        filesystem.makedirs_for(target)
        copy_atomically(os.path.join(staging, relative), target)


def write_preset(keras_hub_model, tokenizer, bert_config_file, extra_variables, preset_dir,
                 classifier_preprocessor="BertTextClassifierPreprocessor", original_files=()):
    """Writes a keras-hub preset, plus `original/`, as one directory rename.

    keras-hub saves presets on the local disk only; a remote `preset_dir`
    (`gs://...`) is saved in a local temporary directory and copied up, its
    `config.json` last.

    Args:
        keras_hub_model: A `BertBackbone`, or a task (its preprocessor holds `tokenizer`).
        tokenizer: The `BertTokenizer`.
        bert_config_file: Copied as it is to `original/bert_config.json`.
        extra_variables: `{name: array}` for `original/extra_variables.ckpt`
            (nothing is written when empty).
        classifier_preprocessor: The keras-hub class saved as the preset's
            preprocessor when `keras_hub_model` is a backbone.
        original_files: Further files copied as they are into `original/`
            (a variant's tokenizer files).
        preset_dir: New or empty; it appears only once complete.

    Raises:
        OutputPathError: `preset_dir` is a file or not empty.
    """
    preset_dir = _local_path(preset_dir)
    remote = filesystem.is_remote(preset_dir)
    _check_new_preset_dir(preset_dir)
    filesystem.makedirs_for(preset_dir)
    staging = tempfile.mkdtemp(prefix="keras-hub-preset-") if remote else temporary_path(preset_dir)
    try:
        keras_hub_model.save_to_preset(staging)
        if getattr(keras_hub_model, "preprocessor", None) is None:
            # A backbone: the classifier's preprocessor (with the tokenizer), so that
            # `BertTextClassifier.from_preset` pads to a length the backbone takes
            # (keras-hub's default is 512, past a shorter `max_position_embeddings`).
            keras_hub = extras.import_extra("keras_hub", "keras-hub", "bert-convert-keras-hub")
            getattr(keras_hub.models, classifier_preprocessor)(
                tokenizer=tokenizer, sequence_length=min(512, keras_hub_model.max_sequence_length)
            ).save_to_preset(staging)
        original = os.path.join(staging, ORIGINAL_DIR)
        os.makedirs(original)
        copy_atomically(bert_config_file, os.path.join(original, "bert_config.json"))
        for path in original_files:
            copy_atomically(path, os.path.join(original, filesystem.basename(path)))
        if extra_variables:
            write_checkpoint_tensors(extra_variables, os.path.join(original, EXTRA_VARIABLES))
        _check_new_preset_dir(preset_dir)
        if remote:
            _upload_preset(staging, preset_dir)
        else:
            if os.path.isdir(preset_dir):
                os.rmdir(preset_dir)
            os.rename(staging, preset_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return preset_dir


@dataclasses.dataclass(frozen=True)
class Conversion:
    """What a conversion wrote and measured.

    Attributes:
        path: The preset directory, or the release's checkpoint prefix.
        config: The model's `BertConfig` (as the release has or gets it).
        masked_lm: Whether the masked-LM head was converted (`BertMaskedLM`
            <-> `cls/predictions`).
        extra_variables: Names carried in `original/extra_variables.ckpt`.
        differences: `keras_hub_differences` of the two models.
        probe_shape: `(batch_size, seq_length)` of the batch they were measured on.
        do_lower_case: The tokenizer's lower-casing.
        config_source: The file the release's config came from.
        notes: What else the conversion could not carry over, one sentence each.
    """

    path: str
    config: BertConfig
    masked_lm: bool
    extra_variables: tuple
    differences: dict
    probe_shape: tuple
    do_lower_case: bool
    config_source: str
    notes: tuple = ()


def _load_ours(config, tensors, masked_lm, source):
    """Our model of `config` holding `tensors` (checked to fit)."""
    model = BertPretrainingModel(config) if masked_lm else BertModel(config)
    shapes = {name: np.shape(value) for name, value in tensors.items()}
    # A variant's release may lack the pooler (HF's *ForMaskedLM have none), as keras-hub's RoBERTa does.
    allow_fresh = ("cls/seq_relationship/",) + (("bert/pooler/",) if config.model_type != "bert" else ())
    assign_original_weights(model, tensors.__getitem__, shapes, source=source, allow_fresh=allow_fresh)
    return model


def _probe_shape(config):
    return tuple(probe_batch(config)[0]["input_ids"].shape)


def release_to_preset(bert_config_file, init_checkpoint, vocab_file, preset_dir, do_lower_case=True):
    """Writes a release as a keras-hub preset directory.

    `keras_hub.models.BertBackbone.from_preset(preset_dir)`,
    `BertTokenizer.from_preset(preset_dir)` and
    `BertTextClassifier.from_preset(preset_dir, num_classes=...)` load it;
    when the checkpoint has `cls/predictions`, so does `BertMaskedLM.from_preset`.

    Args:
        bert_config_file: The release's `bert_config.json`; `hidden_act` must
            be `"gelu"` or `"gelu_exact"` (run approximately by keras-hub).
        init_checkpoint: Its checkpoint prefix.
        vocab_file: Its `vocab.txt`.
        preset_dir: A new or empty directory.
        do_lower_case: The release's casing (keras-hub's `lowercase` and
            `strip_accents`).

    Returns:
        A `Conversion` (`path` is the preset directory).

    Raises:
        ConfigError, VocabError, CheckpointError: bad or mismatched release
            files; OutputPathError: `preset_dir` not new or empty. Nothing
            is written then.
    """
    config = BertConfig.from_json_file(bert_config_file)
    if config.model_type != "bert":
        # The variants' conversions build on this module's (`keras_hub_variants.release_to_preset` takes both).
        raise ConfigError(f"{bert_config_file}: a {config.model_type} release, not BERT's: "
                          f"keras_hub_variants.release_to_preset converts it")
    if config.hidden_act not in KERAS_HUB_ACTIVATIONS:
        raise ConfigError(
            f"{bert_config_file}: 'hidden_act' {config.hidden_act!r} has no keras-hub equivalent "
            "(its BertBackbone always computes the tanh GELU)"
        )
    validate_case_matches_checkpoint(do_lower_case, init_checkpoint)
    vocabulary = read_vocabulary(vocab_file, config.vocab_size)
    _check_new_preset_dir(_local_path(preset_dir))
    tensors = read_checkpoint_tensors(init_checkpoint)
    masked_lm = any(name.startswith("cls/predictions/") for name in tensors)
    model = _load_ours(config, tensors, masked_lm, source=os.fspath(init_checkpoint))
    keras_hub_model, tokenizer = build_keras_hub_model(config, vocabulary, do_lower_case, masked_lm)
    weights = keras_hub_weights(tensors, config, masked_lm, source=init_checkpoint)
    assign_keras_hub_weights(keras_hub_model, weights, source=init_checkpoint)
    differences = keras_hub_differences(model, keras_hub_model, config)
    names = keras_hub_variable_map(config.num_hidden_layers, masked_lm)
    extra = {name: value for name, value in tensors.items() if name not in names}
    notes = ("keras-hub's BertTokenizer (TF Text) gives the original's ids on most text but not all: uncased, it "
             "case-folds (ß -> ss); it splits at NUL and zero-width spaces (docs/FINDINGS.md)",)
    if config.attention_probs_dropout_prob != config.hidden_dropout_prob:
        notes += (
            f"keras-hub has one dropout rate, hidden_dropout_prob {config.hidden_dropout_prob}; "
            f"attention_probs_dropout_prob {config.attention_probs_dropout_prob} is kept in {ORIGINAL_DIR}/ only",
        )
    if masked_lm and config.max_position_embeddings < 512:
        notes += (
            f"the preset's preprocessor is BertMaskedLM's; other keras-hub tasks default to sequence_length 512, "
            f"past max_position_embeddings {config.max_position_embeddings}: give them a preprocessor of "
            f"sequence_length={config.max_position_embeddings} (e.g. BertTextClassifier.from_preset(..., "
            f"preprocessor=BertTextClassifierPreprocessor.from_preset(..., "
            f"sequence_length={config.max_position_embeddings})))",
        )
    path = write_preset(keras_hub_model, tokenizer, bert_config_file, extra, preset_dir)
    return Conversion(
        path=path,
        config=config,
        masked_lm=masked_lm,
        extra_variables=tuple(extra),
        differences=differences,
        probe_shape=_probe_shape(config),
        do_lower_case=do_lower_case,
        config_source=os.fspath(bert_config_file),
        notes=notes,
    )


def _read_preset_json(preset_dir, name):
    path = filesystem.join(preset_dir, name)
    try:
        with filesystem.open_file(path, "rb") as f:
            return json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{path}: cannot read ({e})") from None


def _release_config(preset_dir, backbone_config):
    """`(BertConfig, file it came from)`: `original/bert_config.json` when the preset has it."""
    derived = config_of_backbone(backbone_config, source=filesystem.join(preset_dir, "config.json"))
    path = filesystem.join(preset_dir, ORIGINAL_DIR, "bert_config.json")
    if not filesystem.exists(path):
        return derived, None
    config = BertConfig.from_json_file(path)
    for ours, theirs in CONFIG_KEYS.items():
        if getattr(config, ours) != getattr(derived, ours):
            raise ConfigError(
                f"{path}: {ours} {getattr(config, ours)} but config.json's {theirs} is {getattr(derived, ours)}: "
                f"the preset was saved over another model; remove {ORIGINAL_DIR}/ to convert what config.json describes"
            )
    return config, path


def _load_keras_hub_preset(preset_dir, masked_lm):
    keras_hub = extras.import_extra("keras_hub", "keras-hub", "bert-convert-keras-hub")

    try:
        if masked_lm:
            model = keras_hub.models.BertMaskedLM.from_preset(preset_dir)
            return model, model.preprocessor.tokenizer
        backbone = keras_hub.models.BertBackbone.from_preset(preset_dir)
        return backbone, keras_hub.models.BertTokenizer.from_preset(preset_dir)
    except (ValueError, OSError) as e:  # OSError: h5py on a damaged model.weights.h5
        detail = " ".join(str(e).split())  # keras-hub's reason is past its first line (e.g. the shapes)
        detail = detail if len(detail) <= 600 else detail[:600] + " ..."
        raise CheckpointError(f"{preset_dir}: keras-hub cannot load the preset ({type(e).__name__}: {detail})") from None


def preset_to_release(preset_dir, output_dir):
    """Writes a keras-hub BERT preset directory as an original release.

    `output_dir` gets `bert_model.ckpt.*`, `vocab.txt`, then
    `bert_config.json` (last, so that a run stopped part way leaves no
    directory with all three). The config is the preset's
    `original/bert_config.json` when it has one (a preset `release_to_preset`
    wrote), else that of what keras-hub computes (`hidden_act` `"gelu"`,
    both dropouts its `dropout`, `initializer_range` 0.02). A `BertMaskedLM`
    task (`task.json`) becomes `cls/predictions`, and the tensors of
    `original/extra_variables.ckpt` are added back.

    Args:
        preset_dir: A local keras-hub preset of a `BertBackbone` (read by
            keras-hub's `from_preset`; nothing is downloaded).
        output_dir: Created if needed.

    Returns:
        A `Conversion` (`path` is the checkpoint prefix written).

    Raises:
        ConfigError, CheckpointError: not a BERT preset, or files that do
            not fit together.
    """
    preset_dir = os.fspath(preset_dir)
    backbone_json = _read_preset_json(preset_dir, "config.json")
    if backbone_json is None:
        raise CheckpointError(f"{preset_dir}: not a keras-hub preset (it has no config.json)")
    if backbone_json.get("class_name") != "BertBackbone":
        # RoBERTa's, ALBERT's and DistilBERT's: `keras_hub_variants.preset_to_release` takes those and this one.
        raise ConfigError(f"{preset_dir}/config.json: a {backbone_json.get('class_name')!r}, not a BertBackbone")
    config, config_file = _release_config(preset_dir, backbone_json.get("config", {}))
    task = (_read_preset_json(preset_dir, "task.json") or {}).get("class_name")
    masked_lm = task == "BertMaskedLM"
    keras_hub_model, tokenizer = _load_keras_hub_preset(preset_dir, masked_lm)
    notes = []
    if task and not masked_lm:
        notes.append(f"task.json holds a {task}, whose head a release has no place for: only its backbone is converted")
    if tokenizer.strip_accents != tokenizer.lowercase:
        notes.append(
            f"the preset's tokenizer has lowercase={tokenizer.lowercase} but strip_accents={tokenizer.strip_accents}; "
            "a release's tokenizer strips accents exactly when it lower-cases"
        )
    tensors = weights_of_keras_hub(keras_hub_model, masked_lm)
    extra_path = filesystem.join(preset_dir, ORIGINAL_DIR, EXTRA_VARIABLES)
    extra = {}
    if filesystem.exists(extra_path + ".index"):
        extra = {name: value for name, value in read_checkpoint_tensors(extra_path).items() if name not in tensors}
        tensors.update(extra)
    model = _load_ours(config, tensors, masked_lm, source=preset_dir)
    differences = keras_hub_differences(model, keras_hub_model, config)

    begin_release(output_dir)
    prefix = write_checkpoint_tensors(tensors, filesystem.join(output_dir, RELEASE_CHECKPOINT))
    vocabulary = tokenizer.get_vocabulary()
    write_text_atomically(filesystem.join(output_dir, "vocab.txt"), "".join(f"{token}\n" for token in vocabulary))
    release_config = filesystem.join(output_dir, "bert_config.json")
    if config_file:
        copy_atomically(config_file, release_config)
    else:
        config.to_json_file(release_config)
    return Conversion(
        path=prefix,
        config=config,
        masked_lm=masked_lm,
        extra_variables=tuple(extra),
        differences=differences,
        probe_shape=_probe_shape(config),
        do_lower_case=bool(tokenizer.lowercase),
        config_source=config_file or filesystem.join(preset_dir, "config.json"),
        notes=tuple(notes),
    )
