"""BERT weights in the HF layout (`config.json`, `model.safetensors`), no torch.

The HF names are a mechanical respelling of the original TF names (the
transformers project converts between them), so we convert names to the
original layout and reuse the original-checkpoint loader: one loading path.
"""

import json
import os
import re
import struct

import numpy as np

from keras_bert_impl.checkpoints.original import assign_original_weights, save_original_checkpoint
from keras_bert_impl.config import BertConfig
from keras_bert_impl.errors import CheckpointError, ConfigError
from keras_bert_impl.io import copy_atomically
from keras_bert_impl.models.bert_model import BertModel
from keras_bert_impl.models.pretraining import BertPretrainingModel

_SAFETENSORS_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}

# HF activation names -> ours. HF's "gelu" is the exact erf form.
HF_ACTIVATIONS = {
    "gelu": "gelu_exact",
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}

# (HF pattern, original replacement, transpose?) applied in order to a name
# with any leading "bert." removed. Dense `.weight`s are [out, in] in HF and
# [in, out] kernels in the original; embeddings and the two original
# `output_weights` matrices keep their layout.
HF_NAME_RULES = (
    (r"^embeddings\.(word|position|token_type)_embeddings\.weight$", r"bert/embeddings/\1_embeddings", False),
    (r"^embeddings\.LayerNorm\.(weight|gamma)$", "bert/embeddings/LayerNorm/gamma", False),
    (r"^embeddings\.LayerNorm\.(bias|beta)$", "bert/embeddings/LayerNorm/beta", False),
    (r"^encoder\.layer\.(\d+)\.(.+)\.LayerNorm\.(weight|gamma)$", r"bert/encoder/layer_\1/\2/LayerNorm/gamma", False),
    (r"^encoder\.layer\.(\d+)\.(.+)\.LayerNorm\.(bias|beta)$", r"bert/encoder/layer_\1/\2/LayerNorm/beta", False),
    (r"^encoder\.layer\.(\d+)\.(.+)\.weight$", r"bert/encoder/layer_\1/\2/kernel", True),
    (r"^encoder\.layer\.(\d+)\.(.+)\.bias$", r"bert/encoder/layer_\1/\2/bias", False),
    (r"^pooler\.dense\.weight$", "bert/pooler/dense/kernel", True),
    (r"^pooler\.dense\.bias$", "bert/pooler/dense/bias", False),
    (r"^cls\.predictions\.transform\.dense\.weight$", "cls/predictions/transform/dense/kernel", True),
    (r"^cls\.predictions\.transform\.dense\.bias$", "cls/predictions/transform/dense/bias", False),
    (r"^cls\.predictions\.transform\.LayerNorm\.(weight|gamma)$", "cls/predictions/transform/LayerNorm/gamma", False),
    (r"^cls\.predictions\.transform\.LayerNorm\.(bias|beta)$", "cls/predictions/transform/LayerNorm/beta", False),
    (r"^cls\.predictions\.bias$", "cls/predictions/output_bias", False),
    (r"^cls\.seq_relationship\.weight$", "cls/seq_relationship/output_weights", False),
    (r"^cls\.seq_relationship\.bias$", "cls/seq_relationship/output_bias", False),
)
# Buffers and tied copies that have no variable of their own in the original.
HF_SKIPPED = re.compile(r"(position_ids|cls\.predictions\.decoder\.(weight|bias))$")


def hf_to_original_name(hf_name):
    """Maps an HF parameter name to `(original_name, transpose)`, or None if skipped.

    Example:
    >>> hf_to_original_name("encoder.layer.3.attention.self.query.weight")
    ('bert/encoder/layer_3/attention/self/query/kernel', True)
    """
    name = hf_name[len("bert."):] if hf_name.startswith("bert.") else hf_name
    if HF_SKIPPED.search(name):
        return None
    for pattern, replacement, transpose in HF_NAME_RULES:
        if re.match(pattern, name):
            original = re.sub(pattern, replacement, name).replace(".", "/")
            return original, transpose
    return None


def read_safetensors(path):
    """Reads a `.safetensors` file into `{name: numpy array}` (memory-mapped).

    Raises:
        CheckpointError: missing file or a malformed header.
    """
    path = os.fspath(path)
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            (header_size,) = struct.unpack("<Q", f.read(8))
            if header_size > size - 8:
                raise ValueError("header length exceeds file size")
            header = json.loads(f.read(header_size))
    except FileNotFoundError:
        raise CheckpointError(f"{path}: safetensors file not found") from None
    except (OSError, ValueError, struct.error) as e:
        raise CheckpointError(f"{path}: not a safetensors file ({e})") from None
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_size)
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = info.get("dtype")
        if dtype == "BF16":
            raise CheckpointError(f"{path}: {name} is bfloat16; convert it to float32 first")
        if dtype not in _SAFETENSORS_DTYPES:
            raise CheckpointError(f"{path}: {name} has unsupported dtype {dtype}")
        begin, end = info["data_offsets"]
        array = data[begin:end].view(_SAFETENSORS_DTYPES[dtype]).reshape(info["shape"])
        tensors[name] = array
    return tensors


def bert_config_from_hf(config_path):
    """Converts an HF BERT `config.json` to a `BertConfig`.

    HF's `"gelu"` (exact erf) becomes `"gelu_exact"`. Features the original
    architecture lacks (relative positions, another LayerNorm epsilon) are
    refused rather than silently approximated.

    Raises:
        ConfigError: naming the file and the key.
    """
    config_path = os.fspath(config_path)
    try:
        with open(config_path, encoding="utf-8") as f:
            values = json.load(f)
    except FileNotFoundError:
        raise ConfigError(f"{config_path}: config file not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{config_path}: cannot read config ({e})") from None
    if values.get("model_type", "bert") != "bert":
        raise ConfigError(f"{config_path}: model_type is {values['model_type']!r}, not 'bert'")
    if values.get("position_embedding_type", "absolute") != "absolute":
        raise ConfigError(f"{config_path}: position_embedding_type must be 'absolute'")
    if abs(values.get("layer_norm_eps", 1e-12) - 1e-12) > 1e-15:
        raise ConfigError(f"{config_path}: layer_norm_eps must be 1e-12 as in the original BERT")
    act = values.get("hidden_act", "gelu")
    if act not in HF_ACTIVATIONS:
        raise ConfigError(f"{config_path}: 'hidden_act' {act!r} has no BERT equivalent")
    keys = (
        "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
        "intermediate_size", "hidden_dropout_prob", "attention_probs_dropout_prob",
        "max_position_embeddings", "type_vocab_size", "initializer_range",
    )
    missing = [key for key in keys if key not in values]
    if missing:
        raise ConfigError(f"{config_path}: missing key(s) {', '.join(missing)}")
    converted = {key: values[key] for key in keys}
    converted["hidden_act"] = HF_ACTIVATIONS[act]
    return BertConfig.from_dict(converted, source=config_path)


def hf_weights_as_original(model_dir_or_file):
    """Reads HF safetensors and returns `{original_name: array}`.

    Args:
        model_dir_or_file: A directory holding `model.safetensors`, or the file.
    """
    path = os.fspath(model_dir_or_file)
    if os.path.isdir(path):
        path = os.path.join(path, "model.safetensors")
    weights = {}
    for hf_name, array in read_safetensors(path).items():
        mapped = hf_to_original_name(hf_name)
        if mapped is None:
            continue
        name, transpose = mapped
        weights[name] = np.ascontiguousarray(array.T) if transpose else array
    return weights


def load_hf_checkpoint(model, model_dir, allow_fresh=()):
    """Loads HF-layout BERT weights (`model.safetensors`) into one of our models.

    Args:
        model: Built model whose config matches `bert_config_from_hf(...)`.
        model_dir: Directory with `model.safetensors` (or the file itself).
        allow_fresh: See `assign_original_weights`.

    Returns:
        A `LoadReport`.
    """
    weights = hf_weights_as_original(model_dir)
    shapes = {name: array.shape for name, array in weights.items()}
    return assign_original_weights(
        model, weights.__getitem__, shapes, source=os.fspath(model_dir), allow_fresh=allow_fresh
    )


def convert_hf_to_original(hf_dir, output_dir):
    """Writes an HF-layout BERT as an original release directory.

    Produces `bert_config.json`, `bert_model.ckpt.{index,data-*}` and
    `vocab.txt` in `output_dir`: what google-research/bert's scripts (and ours)
    take as `--bert_config_file`, `--init_checkpoint` and `--vocab_file`. The
    weights pass through a model of the matching architecture, so a file that
    does not fit the config is refused; the values are copied bit for bit.

    Args:
        hf_dir: Directory with `config.json`, `model.safetensors`, `vocab.txt`.
        output_dir: Created if needed.

    Returns:
        `(bert_config, checkpoint_prefix)`.
    """
    hf_dir, output_dir = os.fspath(hf_dir), os.fspath(output_dir)
    config = bert_config_from_hf(os.path.join(hf_dir, "config.json"))
    weights = hf_weights_as_original(hf_dir)
    has_heads = any(name.startswith("cls/") for name in weights)
    model = BertPretrainingModel(config) if has_heads else BertModel(config)
    shapes = {name: array.shape for name, array in weights.items()}
    assign_original_weights(model, weights.__getitem__, shapes, source=hf_dir)

    os.makedirs(output_dir, exist_ok=True)
    prefix = save_original_checkpoint(model, os.path.join(output_dir, "bert_model.ckpt"))
    config.to_json_file(os.path.join(output_dir, "bert_config.json"))
    vocab = os.path.join(hf_dir, "vocab.txt")
    if os.path.exists(vocab):
        copy_atomically(vocab, os.path.join(output_dir, "vocab.txt"))
    return config, prefix
