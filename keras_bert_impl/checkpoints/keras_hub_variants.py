"""keras-hub's RoBERTa, ALBERT and DistilBERT presets <-> releases of those variants.

The same conversions as `keras_hub` (BERT), with each variant's names written
out as data: `KERAS_HUB_VARIANTS` (`keras_hub_variant_table`) says which keras-hub classes hold it and
where its embeddings, blocks and pooler live; the blocks' own sub-paths are
BERT's (`keras_hub.TRANSFORMER_LAYER_VARIABLES`: keras-hub builds all four
from one `TransformerEncoder`), joined to ALBERT's TF1 names through
`name_map` by the role each variable has in our layers.

What keras-hub holds otherwise, and where this goes:

* RoBERTa: keras-hub's position table leaves out the two rows RoBERTa
  reserves (our `position_offset`), and its backbone has no token types (HF
  RoBERTa's one row is zero in every released model). A preset written here
  keeps both in `original/extra_variables.ckpt`; from a preset without them
  the two rows and the token-type row come back as zeros.
* The tokenizer files of the release (`vocab.json` + `merges.txt`,
  `spiece.model`, `vocab.txt`) are copied as they are into `original/` and
  come back from there; from a keras-hub-made preset they are keras-hub's
  tokenizer assets.
* keras-hub's masked-LM heads use LayerNorm epsilon 1e-5 (ALBERT's and
  DistilBERT's use 1e-12): measured, as for BERT, by `keras_hub_differences`.

Example:
>>> variant_variable_map(KERAS_HUB_VARIANTS["albert"], num_layers=1, num_groups=1)[
...     "bert/encoder/transformer/group_0/inner_group_0/ffn_1/intermediate/output/dense/kernel"]
('group_0_inner_layer_0/feedforward_output_dense/kernel', None)
"""

import os

import numpy as np

from keras_bert_impl import extras, filesystem
from keras_bert_impl.checkpoints import keras_hub as bert_hub
from keras_bert_impl.checkpoints import name_map
from keras_bert_impl.checkpoints.keras_hub_variant_table import KERAS_HUB_VARIANTS, VARIANTS_BY_BACKBONE
from keras_bert_impl.checkpoints.original import write_checkpoint_tensors
from keras_bert_impl.checkpoints.release import TOKENIZER_FILES, begin_release
from keras_bert_impl.config import BertConfig
from keras_bert_impl.errors import CheckpointError, ConfigError
from keras_bert_impl.io import copy_atomically


# Tensors held in keras-hub from the `position_offset`-th row on.
_ROWS_FROM_OFFSET = ("bert/embeddings/position_embeddings",)

# ALBERT's TF1 block names -> BERT's, by the attribute of our `TransformerLayer` both name.
_ALBERT_TO_BERT_BLOCK_NAMES = {
    albert: bert
    for albert, path in name_map.ALBERT_TRANSFORMER_LAYER_VARIABLES.items()
    for bert, same in name_map.TRANSFORMER_LAYER_VARIABLES.items()
    if path == same
}


def variant_variable_map(variant, num_layers, num_groups=None, inner_group_num=1, masked_lm=False):
    """Original checkpoint name -> `(keras-hub variable path, head axes)` of a variant.

    Args:
        variant: A `keras_hub_variant_table.KerasHubVariant`.
        num_layers: `num_hidden_layers` (one block each but in ALBERT).
        num_groups, inner_group_num: ALBERT's layer groups.
        masked_lm: Also map `cls/predictions` to the `*MaskedLM` head.

    Example:
    >>> names = variant_variable_map(KERAS_HUB_VARIANTS["roberta"], num_layers=2, masked_lm=True)
    >>> names["bert/encoder/layer_1/attention/self/key/kernel"], len(names)
    (('transformer_layer_1/self_attention_layer/key/kernel', 'last'), 41)
    """
    names = {name: (path, None) for name, path in variant.embeddings.items()}
    if variant.model_type == "albert":
        for group in range(num_groups):
            for inner in range(inner_group_num):
                scope = f"bert/encoder/transformer/group_{group}/inner_group_{inner}"
                block = variant.block.format(group=group, inner=inner)
                for albert, bert in _ALBERT_TO_BERT_BLOCK_NAMES.items():
                    path = bert_hub.TRANSFORMER_LAYER_VARIABLES[bert]
                    names[f"{scope}/{albert}"] = (f"{block}/{path}", bert_hub.HEAD_AXES.get(bert))
    else:
        for layer in range(num_layers):
            block = variant.block.format(layer=layer)
            for bert, path in bert_hub.TRANSFORMER_LAYER_VARIABLES.items():
                names[f"bert/encoder/layer_{layer}/{bert}"] = (f"{block}/{path}", bert_hub.HEAD_AXES.get(bert))
    if variant.pooler:
        names["bert/pooler/dense/kernel"] = (f"{variant.pooler}/kernel", None)
        names["bert/pooler/dense/bias"] = (f"{variant.pooler}/bias", None)
    if masked_lm:
        names.update((name, (path, None)) for name, path in bert_hub.MASKED_LM_VARIABLES.items())
    return names


def backbone_arguments(variant, config):
    """The keras-hub backbone's constructor arguments of a variant's `BertConfig`.

    Example:
    >>> config = BertConfig(vocab_size=60, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
    ...                     intermediate_size=32, max_position_embeddings=34, type_vocab_size=1,
    ...                     model_type="roberta", position_offset=2, layer_norm_eps=1e-5, hidden_act="gelu_exact")
    >>> backbone_arguments(KERAS_HUB_VARIANTS["roberta"], config)["max_sequence_length"]
    32
    """
    arguments = dict(vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
                     num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
                     intermediate_dim=config.intermediate_size, dropout=config.hidden_dropout_prob,
                     max_sequence_length=config.max_sequence_length)
    if variant.model_type == "albert":
        arguments.update(embedding_dim=config.embedding_width, num_groups=config.num_hidden_groups,
                         num_inner_repetitions=config.inner_group_num, num_segments=config.type_vocab_size)
    return arguments


def config_of_backbone(variant, arguments, source="config.json"):
    """The `BertConfig` of what a keras-hub variant backbone of `arguments` computes.

    Raises:
        ConfigError: a key is missing or a value is not valid.
    """
    keys = ["vocabulary_size", "num_layers", "num_heads", "hidden_dim", "intermediate_dim", "dropout",
            "max_sequence_length"]
    if variant.model_type == "albert":
        keys += ["embedding_dim", "num_groups", "num_inner_repetitions", "num_segments"]
    missing = [key for key in keys if key not in arguments]
    if missing:
        raise ConfigError(f"{source}: missing key(s) {', '.join(missing)}")
    offset = 2 if variant.model_type == "roberta" else 0
    values = dict(
        vocab_size=arguments["vocabulary_size"], hidden_size=arguments["hidden_dim"],
        num_hidden_layers=arguments["num_layers"], num_attention_heads=arguments["num_heads"],
        intermediate_size=arguments["intermediate_dim"], hidden_act=variant.hidden_act,
        hidden_dropout_prob=arguments["dropout"], attention_probs_dropout_prob=arguments["dropout"],
        max_position_embeddings=arguments["max_sequence_length"] + offset,
        initializer_range=bert_hub.KERAS_HUB_INITIALIZER_RANGE, model_type=variant.model_type,
        layer_norm_eps=variant.layer_norm_eps, position_offset=offset,
        type_vocab_size={"roberta": 1, "distilbert": 0}.get(variant.model_type, arguments.get("num_segments")),
    )
    if variant.model_type == "albert":
        values.update(embedding_size=arguments["embedding_dim"], num_hidden_groups=arguments["num_groups"],
                      inner_group_num=arguments["num_inner_repetitions"])
    if variant.model_type == "distilbert":
        values["use_pooler"] = False
    return BertConfig.from_dict(values, source=source)


def _to_keras_hub(tensors, names, config, source):
    missing = [name for name in names if name not in tensors]
    if missing:
        raise CheckpointError(f"{source}: has no {', '.join(missing[:3])}")
    weights = {}
    for name, (path, head_axes) in names.items():
        value = tensors[name][config.position_offset:] if name in _ROWS_FROM_OFFSET else tensors[name]
        weights[path] = bert_hub.to_keras_hub_layout(value, head_axes, config.num_attention_heads)
    return weights


def _from_keras_hub(keras_hub_model, names, config, extra):
    values = {variable.path: np.asarray(variable) for variable in keras_hub_model.weights}
    tensors = {}
    for name, (path, head_axes) in names.items():
        value = bert_hub.to_original_layout(values[path], head_axes)
        if name in _ROWS_FROM_OFFSET and config.position_offset:
            # The reserved rows: as the preset's `original/` kept them, else zeros (never read).
            kept = extra.get(name)
            head = kept[:config.position_offset] if kept is not None else np.zeros(
                (config.position_offset, value.shape[1]), value.dtype)
            value = np.concatenate([head, value])
        tensors[name] = value
    if config.model_type == "roberta" and "bert/embeddings/token_type_embeddings" not in extra:
        # keras-hub adds no token type: the one row of zeros that computes the same.
        tensors["bert/embeddings/token_type_embeddings"] = np.zeros((1, config.hidden_size), np.float32)
    return tensors


def _keras_hub():
    return extras.import_extra("keras_hub", "keras-hub", "bert-convert-keras-hub")


def _tokenizer(variant, files, do_lower_case):
    keras_hub = _keras_hub()
    cls = getattr(keras_hub.models, variant.tokenizer)
    if variant.model_type == "roberta":
        return cls(vocabulary=files[0], merges=files[1])
    if variant.model_type == "albert":
        return cls(proto=files[0])
    vocabulary = bert_hub.read_vocabulary(files[0], 10**12)
    return cls(vocabulary=vocabulary, lowercase=do_lower_case)


def release_to_preset(bert_config_file, init_checkpoint, vocab_file, preset_dir, do_lower_case=True):
    """A release of BERT or one of its variants as a keras-hub preset: `keras_hub.release_to_preset` for BERT's,
    `variant_release_to_preset` for the others (its Args and Raises)."""
    config = BertConfig.from_json_file(bert_config_file)
    if config.model_type == "bert":
        return bert_hub.release_to_preset(bert_config_file, init_checkpoint, vocab_file, preset_dir, do_lower_case)
    return variant_release_to_preset(config, bert_config_file, init_checkpoint, vocab_file, preset_dir,
                                     do_lower_case)


def preset_to_release(preset_dir, output_dir):
    """A keras-hub preset of BERT or one of its variants as a release: `variant_preset_to_release` for a
    RoBERTa, ALBERT or DistilBERT backbone, else `keras_hub.preset_to_release` (its Args and Raises)."""
    backbone_json = bert_hub._read_preset_json(os.fspath(preset_dir), "config.json")
    if backbone_json is not None and backbone_json.get("class_name") in VARIANTS_BY_BACKBONE:
        return variant_preset_to_release(os.fspath(preset_dir), output_dir, backbone_json)
    return bert_hub.preset_to_release(preset_dir, output_dir)


def variant_release_to_preset(config, bert_config_file, init_checkpoint, vocab_file, preset_dir,
                              do_lower_case=True):
    """A RoBERTa, ALBERT or DistilBERT release as a keras-hub preset (`keras_hub.release_to_preset`).

    Args:
        config: The release's `BertConfig` (its `model_type` picks the variant).
        bert_config_file, init_checkpoint: The release's files.
        vocab_file: The first of its tokenizer files (`release.TOKENIZER_FILES`);
            the others are read beside it.
        preset_dir: A new or empty directory.
        do_lower_case: DistilBERT's tokenizer casing.

    Returns:
        A `keras_hub.Conversion`.
    """
    variant = KERAS_HUB_VARIANTS[config.model_type]
    directory = filesystem.dirname(os.fspath(vocab_file)) or "."
    files = [filesystem.join(directory, name) for name in TOKENIZER_FILES[config.model_type]]
    for path in files:
        if not filesystem.exists(path):
            raise CheckpointError(f"{path}: no such file; a {config.model_type} preset needs the release's tokenizer")
    bert_hub._check_new_preset_dir(bert_hub._local_path(preset_dir))
    tensors = bert_hub.read_checkpoint_tensors(init_checkpoint)
    masked_lm = any(name.startswith("cls/predictions/") for name in tensors)
    model = bert_hub._load_ours(config, tensors, masked_lm, source=os.fspath(init_checkpoint))
    keras_hub = _keras_hub()
    backbone = getattr(keras_hub.models, variant.backbone)(**backbone_arguments(variant, config), dtype="float32")
    tokenizer = _tokenizer(variant, files, do_lower_case)
    keras_hub_model = backbone
    if masked_lm:
        preprocessor = getattr(keras_hub.models, variant.masked_lm_preprocessor)(
            tokenizer=tokenizer, sequence_length=config.max_sequence_length)
        keras_hub_model = getattr(keras_hub.models, variant.masked_lm)(backbone=backbone, preprocessor=preprocessor)
    names = variant_variable_map(variant, config.num_hidden_layers, config.num_hidden_groups,
                                 config.inner_group_num, masked_lm)
    weights = _to_keras_hub(tensors, names, config, init_checkpoint)
    bert_hub.assign_keras_hub_weights(keras_hub_model, weights, source=init_checkpoint)
    differences = bert_hub.keras_hub_differences(model, keras_hub_model, config)
    # What keras-hub has no variable for, whole (the position table too, for its reserved rows).
    extra = {name: value for name, value in tensors.items() if name not in names or name in _ROWS_FROM_OFFSET
             and config.position_offset}
    notes = ()
    if config.hidden_act != variant.hidden_act and not {config.hidden_act, variant.hidden_act} <= {"gelu", "gelu_new"}:
        notes += (f"keras-hub's {variant.backbone} computes {variant.hidden_act}, not hidden_act {config.hidden_act}",)
    if abs(config.layer_norm_eps - variant.layer_norm_eps) > 1e-15:
        notes += (f"keras-hub's {variant.backbone} uses LayerNorm epsilon {variant.layer_norm_eps}, not "
                  f"layer_norm_eps {config.layer_norm_eps}",)
    path = bert_hub.write_preset(keras_hub_model, tokenizer, bert_config_file, extra, preset_dir,
                                 classifier_preprocessor=variant.classifier_preprocessor, original_files=files)
    return bert_hub.Conversion(
        path=path, config=config, masked_lm=masked_lm, extra_variables=tuple(extra), differences=differences,
        probe_shape=bert_hub._probe_shape(config), do_lower_case=do_lower_case,
        config_source=os.fspath(bert_config_file), notes=notes,
    )


def variant_preset_to_release(preset_dir, output_dir, backbone_json):
    """A keras-hub RoBERTa, ALBERT or DistilBERT preset as a release (`keras_hub.preset_to_release`).

    The config is `original/bert_config.json` when the preset has it, else
    that of what keras-hub computes (`config_of_backbone`); the tokenizer
    files are `original/`'s, else keras-hub's tokenizer assets.

    Returns:
        A `keras_hub.Conversion` (`path` is the checkpoint prefix written).
    """
    preset_dir = os.fspath(preset_dir)
    variant = VARIANTS_BY_BACKBONE[backbone_json["class_name"]]
    derived = config_of_backbone(variant, backbone_json.get("config", {}),
                                 source=filesystem.join(preset_dir, "config.json"))
    config_file = filesystem.join(preset_dir, bert_hub.ORIGINAL_DIR, "bert_config.json")
    config = derived
    if filesystem.exists(config_file):
        config = BertConfig.from_json_file(config_file)
        for key in ("model_type", "vocab_size", "hidden_size", "num_hidden_layers", "max_position_embeddings"):
            if getattr(config, key) != getattr(derived, key):
                raise ConfigError(f"{config_file}: {key} {getattr(config, key)} but config.json's backbone says "
                                  f"{getattr(derived, key)}: the preset was saved over another model")
    else:
        config_file = None
    task = (bert_hub._read_preset_json(preset_dir, "task.json") or {}).get("class_name")
    masked_lm = task == variant.masked_lm
    keras_hub = _keras_hub()
    try:
        if masked_lm:
            keras_hub_model = getattr(keras_hub.models, variant.masked_lm).from_preset(preset_dir)
        else:
            keras_hub_model = getattr(keras_hub.models, variant.backbone).from_preset(preset_dir)
    except (ValueError, OSError) as e:
        raise CheckpointError(f"{preset_dir}: keras-hub cannot load the preset ({type(e).__name__}: {e})") from None
    extra_path = filesystem.join(preset_dir, bert_hub.ORIGINAL_DIR, bert_hub.EXTRA_VARIABLES)
    extra = bert_hub.read_checkpoint_tensors(extra_path) if filesystem.exists(extra_path + ".index") else {}
    names = variant_variable_map(variant, config.num_hidden_layers, config.num_hidden_groups,
                                 config.inner_group_num, masked_lm)
    tensors = _from_keras_hub(keras_hub_model, names, config, extra)
    tensors.update((name, value) for name, value in extra.items() if name not in tensors)
    model = bert_hub._load_ours(config, tensors, masked_lm, source=preset_dir)
    differences = bert_hub.keras_hub_differences(model, keras_hub_model, config)

    begin_release(output_dir)
    prefix = write_checkpoint_tensors(tensors, filesystem.join(output_dir, bert_hub.RELEASE_CHECKPOINT))
    for keras_hub_name, ours in variant.tokenizer_assets.items():
        kept = filesystem.join(preset_dir, bert_hub.ORIGINAL_DIR, ours)
        source = kept if filesystem.exists(kept) else filesystem.join(preset_dir, "assets", "tokenizer", keras_hub_name)
        copy_atomically(source, filesystem.join(output_dir, ours))
    release_config = filesystem.join(output_dir, "bert_config.json")
    if config_file:
        copy_atomically(config_file, release_config)
    else:
        config.to_json_file(release_config)
    return bert_hub.Conversion(
        path=prefix, config=config, masked_lm=masked_lm, extra_variables=tuple(extra), differences=differences,
        probe_shape=bert_hub._probe_shape(config), do_lower_case=True,
        config_source=config_file or filesystem.join(preset_dir, "config.json"),
    )
