"""BERT weights in the HF layout (`config.json`, `model.safetensors`), no torch.

The HF names are a mechanical respelling of the original TF names (the
transformers project converts between them), so we convert names to the
original layout and reuse the original-checkpoint loader: one loading path.

RoBERTa, ALBERT and DistilBERT directories, as `save_pretrained` writes them
for the base model or its `*ForMaskedLM` (names under `roberta.`, `albert.`,
`distilbert.`, the decoder tied to the word embeddings), convert the same
way: their name rules (`HF_VARIANT_NAME_RULES`) map onto the original layout
and google-research/albert's names, their `config.json` onto `BertConfig`'s
variant keys (`config_values_from_hf`), and their tokenizer files are copied
into the release as they are (`release.TOKENIZER_FILES`).

A `*ForSequenceClassification` directory of any of the four converts into a
fine-tuned classifier (`BertClassifier`): its head is the pooler (a dense
layer on the first token and its activation) and `output_weights`
(`HF_SEQUENCE_CLASSIFIER_HEADS`), its labels those of `id2label`
(`sequence_classifier_head`). One whose `problem_type` is
`multi_label_classification` (a sigmoid per label) converts into a
multi-label classifier release: the same head, and `multi_label.json`
(`release.MULTI_LABEL_FILE`: its labels, each at threshold 0.5) beside
`label_list.txt` (`classifier_release_files`).
"""

import dataclasses
import json
import os
import re
import struct

import numpy as np

from keras_bert_impl import filesystem
from keras_bert_impl.checkpoints.original import assign_original_weights, original_weights, write_checkpoint_tensors
from keras_bert_impl.checkpoints.hf_checks import check_weights_fit_config, tokenizer_files_to_copy
from keras_bert_impl.checkpoints.release import (
    LABEL_LIST_FILE,
    MultiLabelRecord,
    begin_release,
    write_release_labels,
    write_release_multi_label,
)
from keras_bert_impl.config import BertConfig
from keras_bert_impl.errors import CheckpointError, ConfigError
from keras_bert_impl.io import copy_atomically
from keras_bert_impl.models.bert_model import BertModel
from keras_bert_impl.models.classifier import BertClassifier
from keras_bert_impl.models.pretraining import BertPretrainingModel
from keras_bert_impl.models.span_qa import BertSpanQA

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
    "gelu_python": "gelu_exact",  # the same erf GELU, written in Python
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
    # A fine-tuned head: BertFor{Sequence,Token}Classification's `classifier`
    # is [num_labels, hidden] as run_classifier's `output_weights`;
    # BertForQuestionAnswering's `qa_outputs` is [2, hidden] as run_squad's.
    (r"^classifier\.weight$", "output_weights", False),
    (r"^classifier\.bias$", "output_bias", False),
    (r"^qa_outputs\.weight$", "cls/squad/output_weights", False),
    (r"^qa_outputs\.bias$", "cls/squad/output_bias", False),
)
# Buffers and tied copies that have no variable of their own in the original.
HF_SKIPPED = re.compile(r"(position_ids|cls\.predictions\.decoder\.(weight|bias))$")

_BERT_EMBEDDINGS_AND_LAYERS = HF_NAME_RULES[:9]  # embeddings, encoder.layer.N, pooler: RoBERTa's too
_QA_OUTPUTS = HF_NAME_RULES[-2:]

# The variants' rules, as `HF_NAME_RULES` (applied to a name with the model's
# prefix removed). Heads map onto the original heads of the same role:
# RoBERTa's `lm_head`, ALBERT's `predictions` and DistilBERT's
# `vocab_transform`/`vocab_layer_norm`/`vocab_projector` are `cls/predictions`;
# ALBERT's sentence-order head is `cls/seq_relationship`.
HF_VARIANT_NAME_RULES = {
    "roberta": _BERT_EMBEDDINGS_AND_LAYERS + (
        (r"^lm_head\.dense\.weight$", "cls/predictions/transform/dense/kernel", True),
        (r"^lm_head\.dense\.bias$", "cls/predictions/transform/dense/bias", False),
        (r"^lm_head\.layer_norm\.weight$", "cls/predictions/transform/LayerNorm/gamma", False),
        (r"^lm_head\.layer_norm\.bias$", "cls/predictions/transform/LayerNorm/beta", False),
        (r"^lm_head\.bias$", "cls/predictions/output_bias", False),
        # RobertaForSequenceClassification's `classifier` (dense, tanh, `out_proj` on <s>): a pooler and an output layer.
        (r"^classifier\.dense\.weight$", "bert/pooler/dense/kernel", True),
        (r"^classifier\.dense\.bias$", "bert/pooler/dense/bias", False),
        (r"^classifier\.out_proj\.weight$", "output_weights", False),
        (r"^classifier\.out_proj\.bias$", "output_bias", False),
    ) + _QA_OUTPUTS,
    "albert": (
        (r"^embeddings\.(word|position|token_type)_embeddings\.weight$", r"bert/embeddings/\1_embeddings", False),
        (r"^embeddings\.LayerNorm\.weight$", "bert/embeddings/LayerNorm/gamma", False),
        (r"^embeddings\.LayerNorm\.bias$", "bert/embeddings/LayerNorm/beta", False),
        (r"^encoder\.embedding_hidden_mapping_in\.weight$", "bert/encoder/embedding_hidden_mapping_in/kernel", True),
        (r"^encoder\.embedding_hidden_mapping_in\.bias$", "bert/encoder/embedding_hidden_mapping_in/bias", False),
        (r"^encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.attention\.(query|key|value)\.weight$",
         r"bert/encoder/transformer/group_\1/inner_group_\2/attention_1/self/\3/kernel", True),
        (r"^encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.attention\.(query|key|value)\.bias$",
         r"bert/encoder/transformer/group_\1/inner_group_\2/attention_1/self/\3/bias", False),
        (r"^encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.attention\.dense\.weight$",
         r"bert/encoder/transformer/group_\1/inner_group_\2/attention_1/output/dense/kernel", True),
        (r"^encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.attention\.dense\.bias$",
         r"bert/encoder/transformer/group_\1/inner_group_\2/attention_1/output/dense/bias", False),
        (r"^encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.attention\.LayerNorm\.weight$",
         r"bert/encoder/transformer/group_\1/inner_group_\2/LayerNorm/gamma", False),
        (r"^encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.attention\.LayerNorm\.bias$",
         r"bert/encoder/transformer/group_\1/inner_group_\2/LayerNorm/beta", False),
        (r"^encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.ffn\.weight$",
         r"bert/encoder/transformer/group_\1/inner_group_\2/ffn_1/intermediate/dense/kernel", True),
        (r"^encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.ffn\.bias$",
         r"bert/encoder/transformer/group_\1/inner_group_\2/ffn_1/intermediate/dense/bias", False),
        (r"^encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.ffn_output\.weight$",
         r"bert/encoder/transformer/group_\1/inner_group_\2/ffn_1/intermediate/output/dense/kernel", True),
        (r"^encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.ffn_output\.bias$",
         r"bert/encoder/transformer/group_\1/inner_group_\2/ffn_1/intermediate/output/dense/bias", False),
        (r"^encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.full_layer_layer_norm\.weight$",
         r"bert/encoder/transformer/group_\1/inner_group_\2/LayerNorm_1/gamma", False),
        (r"^encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.full_layer_layer_norm\.bias$",
         r"bert/encoder/transformer/group_\1/inner_group_\2/LayerNorm_1/beta", False),
        (r"^pooler\.weight$", "bert/pooler/dense/kernel", True),
        (r"^pooler\.bias$", "bert/pooler/dense/bias", False),
        (r"^predictions\.dense\.weight$", "cls/predictions/transform/dense/kernel", True),
        (r"^predictions\.dense\.bias$", "cls/predictions/transform/dense/bias", False),
        (r"^predictions\.LayerNorm\.weight$", "cls/predictions/transform/LayerNorm/gamma", False),
        (r"^predictions\.LayerNorm\.bias$", "cls/predictions/transform/LayerNorm/beta", False),
        (r"^predictions\.bias$", "cls/predictions/output_bias", False),
        (r"^sop_classifier\.classifier\.weight$", "cls/seq_relationship/output_weights", False),
        (r"^sop_classifier\.classifier\.bias$", "cls/seq_relationship/output_bias", False),
        (r"^classifier\.weight$", "output_weights", False),  # AlbertForSequenceClassification: on the pooler
        (r"^classifier\.bias$", "output_bias", False),
    ) + _QA_OUTPUTS,
    "distilbert": (
        (r"^embeddings\.(word|position)_embeddings\.weight$", r"bert/embeddings/\1_embeddings", False),
        (r"^embeddings\.LayerNorm\.weight$", "bert/embeddings/LayerNorm/gamma", False),
        (r"^embeddings\.LayerNorm\.bias$", "bert/embeddings/LayerNorm/beta", False),
        (r"^transformer\.layer\.(\d+)\.attention\.q_lin\.weight$", r"bert/encoder/layer_\1/attention/self/query/kernel", True),
        (r"^transformer\.layer\.(\d+)\.attention\.q_lin\.bias$", r"bert/encoder/layer_\1/attention/self/query/bias", False),
        (r"^transformer\.layer\.(\d+)\.attention\.k_lin\.weight$", r"bert/encoder/layer_\1/attention/self/key/kernel", True),
        (r"^transformer\.layer\.(\d+)\.attention\.k_lin\.bias$", r"bert/encoder/layer_\1/attention/self/key/bias", False),
        (r"^transformer\.layer\.(\d+)\.attention\.v_lin\.weight$", r"bert/encoder/layer_\1/attention/self/value/kernel", True),
        (r"^transformer\.layer\.(\d+)\.attention\.v_lin\.bias$", r"bert/encoder/layer_\1/attention/self/value/bias", False),
        (r"^transformer\.layer\.(\d+)\.attention\.out_lin\.weight$", r"bert/encoder/layer_\1/attention/output/dense/kernel", True),
        (r"^transformer\.layer\.(\d+)\.attention\.out_lin\.bias$", r"bert/encoder/layer_\1/attention/output/dense/bias", False),
        (r"^transformer\.layer\.(\d+)\.sa_layer_norm\.weight$", r"bert/encoder/layer_\1/attention/output/LayerNorm/gamma", False),
        (r"^transformer\.layer\.(\d+)\.sa_layer_norm\.bias$", r"bert/encoder/layer_\1/attention/output/LayerNorm/beta", False),
        (r"^transformer\.layer\.(\d+)\.ffn\.lin1\.weight$", r"bert/encoder/layer_\1/intermediate/dense/kernel", True),
        (r"^transformer\.layer\.(\d+)\.ffn\.lin1\.bias$", r"bert/encoder/layer_\1/intermediate/dense/bias", False),
        (r"^transformer\.layer\.(\d+)\.ffn\.lin2\.weight$", r"bert/encoder/layer_\1/output/dense/kernel", True),
        (r"^transformer\.layer\.(\d+)\.ffn\.lin2\.bias$", r"bert/encoder/layer_\1/output/dense/bias", False),
        (r"^transformer\.layer\.(\d+)\.output_layer_norm\.weight$", r"bert/encoder/layer_\1/output/LayerNorm/gamma", False),
        (r"^transformer\.layer\.(\d+)\.output_layer_norm\.bias$", r"bert/encoder/layer_\1/output/LayerNorm/beta", False),
        (r"^vocab_transform\.weight$", "cls/predictions/transform/dense/kernel", True),
        (r"^vocab_transform\.bias$", "cls/predictions/transform/dense/bias", False),
        (r"^vocab_layer_norm\.weight$", "cls/predictions/transform/LayerNorm/gamma", False),
        (r"^vocab_layer_norm\.bias$", "cls/predictions/transform/LayerNorm/beta", False),
        (r"^vocab_projector\.bias$", "cls/predictions/output_bias", False),
        # DistilBertForSequenceClassification's `pre_classifier` (ReLU: `pooler_act`) and `classifier`.
        (r"^pre_classifier\.weight$", "bert/pooler/dense/kernel", True),
        (r"^pre_classifier\.bias$", "bert/pooler/dense/bias", False),
        (r"^classifier\.weight$", "output_weights", False),
        (r"^classifier\.bias$", "output_bias", False),
    ) + _QA_OUTPUTS,
}
# Each variant's buffers and tied copies: its MLM decoder (tied to the word
# embeddings, checked in `read_hf_weights`) and the decoder bias that is the
# head's bias again.
HF_VARIANT_SKIPPED = {
    "roberta": re.compile(r"(position_ids|token_type_ids|lm_head\.decoder\.(weight|bias))$"),
    "albert": re.compile(r"(position_ids|token_type_ids|predictions\.decoder\.(weight|bias))$"),
    "distilbert": re.compile(r"(position_ids|vocab_projector\.weight)$"),
}
# The decoder matrix of each type's MLM head, tied to the word embeddings.
_TIED_DECODERS = {
    "bert": "cls.predictions.decoder.weight",
    "roberta": "lm_head.decoder.weight",
    "albert": "predictions.decoder.weight",
    "distilbert": "vocab_projector.weight",
}


# Each model type's `*ForSequenceClassification` head as our classifier's
# pooler and output layer: the HF names (the model's prefix removed) of the
# dense layer [H, H] on the first token, its activation (`pooler_act`), and
# the output layer [num_labels, H]. Hugging Face's dropouts sit between them,
# as the original's before `output_weights`: none computes at inference.
HF_SEQUENCE_CLASSIFIER_HEADS = {
    "bert": ("pooler.dense", "tanh", "classifier"),
    "albert": ("pooler", "tanh", "classifier"),
    "roberta": ("classifier.dense", "tanh", "classifier.out_proj"),
    "distilbert": ("pre_classifier", "relu", "classifier"),
}


def _name_rules(model_type):
    """`(prefix, rules, skipped)` of an HF model type."""
    if model_type == "bert":
        return "bert.", HF_NAME_RULES, HF_SKIPPED
    return f"{model_type}.", HF_VARIANT_NAME_RULES[model_type], HF_VARIANT_SKIPPED[model_type]


def hf_to_original_name(hf_name, model_type="bert"):
    """Maps an HF parameter name to `(original_name, transpose)`, or None if skipped.

    Args:
        hf_name: The name in `model.safetensors`, with or without the
            model's prefix (`bert.`, `roberta.`, `albert.`, `distilbert.`).
        model_type: The `config.json`'s `model_type`.

    Example:
    >>> hf_to_original_name("encoder.layer.3.attention.self.query.weight")
    ('bert/encoder/layer_3/attention/self/query/kernel', True)
    >>> hf_to_original_name("albert.encoder.albert_layer_groups.0.albert_layers.0.ffn_output.weight", "albert")
    ('bert/encoder/transformer/group_0/inner_group_0/ffn_1/intermediate/output/dense/kernel', True)
    >>> hf_to_original_name("vocab_projector.bias", "distilbert")
    ('cls/predictions/output_bias', False)
    """
    prefix, rules, skipped = _name_rules(model_type)
    name = hf_name[len(prefix):] if hf_name.startswith(prefix) else hf_name
    if skipped.search(name):
        return None
    for pattern, replacement, transpose in rules:
        if re.match(pattern, name):
            original = re.sub(pattern, replacement, name).replace(".", "/")
            return original, transpose
    return None


# The format's own ceiling on the JSON header (safetensors refuses larger ones).
_MAX_HEADER_BYTES = 100 * 1024 * 1024


def _safetensors_header(path):
    """`(header dict, data buffer size)` of the file at `path`, header checked to be a JSON object."""
    try:
        size = filesystem.getsize(path)
        with filesystem.open_file(path, "rb") as f:
            prefix = f.read(8)
            if len(prefix) < 8:
                raise CheckpointError(
                    f"{path}: not a safetensors file ({size} bytes, shorter than its 8-byte header length)"
                )
            (header_size,) = struct.unpack("<Q", prefix)
            if header_size > size - 8:
                raise CheckpointError(
                    f"{path}: header length {header_size} runs past the end of the file ({size} bytes): "
                    "truncated, or not a safetensors file"
                )
            if header_size > _MAX_HEADER_BYTES:
                raise CheckpointError(f"{path}: header length {header_size} exceeds the format's 100 MB limit")
            raw = f.read(header_size)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: safetensors file not found") from None
    except IsADirectoryError:
        raise CheckpointError(f"{path}: is a directory, expected a safetensors file") from None
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read safetensors file ({e.strerror or e})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{path}: header is not valid UTF-8 (byte {8 + e.start})") from None
    try:
        header = json.loads(text)
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path}: header is not valid JSON ({e.msg} at byte {8 + e.pos})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: header is a JSON {type(header).__name__}, expected an object")
    return header, size - 8 - header_size


def _is_count(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _tensor_entry(path, name, info, data_size):
    """`(numpy dtype, shape, begin, end)` of one header entry, every field checked.

    Raises:
        CheckpointError: naming `path`, the tensor and the field that is wrong.
    """
    where = f"{path}: tensor {name!r}"
    if not isinstance(info, dict):
        raise CheckpointError(f"{where}: entry is a JSON {type(info).__name__}, expected an object")
    missing = [key for key in ("dtype", "shape", "data_offsets") if key not in info]
    if missing:
        raise CheckpointError(f"{where}: entry lacks {', '.join(missing)}")
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if dtype == "BF16":
        raise CheckpointError(f"{where} is bfloat16; convert it to float32 first")
    if dtype not in _SAFETENSORS_DTYPES:
        raise CheckpointError(f"{where}: unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
        raise CheckpointError(f"{where}: shape {shape!r} is not a list of non-negative integers")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_count(o) for o in offsets)
            and offsets[0] <= offsets[1]):
        raise CheckpointError(f"{where}: data_offsets {offsets!r} are not [begin, end] with begin <= end")
    begin, end = offsets
    if end > data_size:
        raise CheckpointError(
            f"{where}: data_offsets [{begin}, {end}] run past the end of the data ({data_size} bytes): "
            "the file is truncated"
        )
    numpy_dtype = np.dtype(_SAFETENSORS_DTYPES[dtype])
    needed = int(np.prod(shape, dtype=np.int64)) * numpy_dtype.itemsize
    if end - begin != needed:
        raise CheckpointError(
            f"{where}: shape {shape} of {dtype} needs {needed} bytes, data_offsets [{begin}, {end}] hold {end - begin}"
        )
    return numpy_dtype, tuple(shape), begin, end


def read_safetensors(path):
    """Reads a `.safetensors` file into `{name: numpy array}` (memory-mapped when local).

    The whole header is checked before any tensor is read: its length lies
    within the file, it is a UTF-8 JSON object, every tensor names a known
    dtype, a shape and `data_offsets` whose byte count is that of the shape,
    and the tensors tile the data buffer exactly (no gap, no overlap, no
    byte past the end), as the format requires. A truncated or overwritten
    header is therefore refused by name, not met later as a reshape error.

    Args:
        path: The `.safetensors` file.

    Returns:
        `{tensor name: read-only numpy array}`.

    Raises:
        CheckpointError: missing file or malformed content, naming the file,
            the tensor and what is wrong.
    """
    path = os.fspath(path)
    header, data_size = _safetensors_header(path)
    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict):
        raise CheckpointError(f"{path}: __metadata__ is a JSON {type(metadata).__name__}, expected an object")
    entries = {name: _tensor_entry(path, name, info, data_size) for name, info in header.items()}
    covered = 0
    for name, (_, _, begin, end) in sorted(entries.items(), key=lambda item: item[1][2:]):
        if begin != covered:
            problem = "overlaps the tensor before it" if begin < covered else f"leaves bytes {covered}..{begin} unused"
            raise CheckpointError(f"{path}: tensor {name!r} at data_offsets [{begin}, {end}] {problem}")
        covered = end
    if covered != data_size:
        raise CheckpointError(
            f"{path}: the tensors cover {covered} of the {data_size} data bytes: not a whole safetensors file"
        )
    if not data_size:
        return {name: np.zeros(shape, dtype) for name, (dtype, shape, _, _) in entries.items()}
    offset = filesystem.getsize(path) - data_size
    if filesystem.is_remote(path):  # No memory map across a network: read the data buffer once.
        with filesystem.open_file(path, "rb") as f:
            f.seek(offset)
            data = np.frombuffer(f.read(), np.uint8)
    else:
        data = np.memmap(path, dtype=np.uint8, mode="r", offset=offset)
    return {
        name: data[begin:end].view(dtype).reshape(shape)
        for name, (dtype, shape, begin, end) in entries.items()
    }


def _read_hf_config(config_path):
    config_path = os.fspath(config_path)
    try:
        with filesystem.open_file(config_path, "rb") as f:
            values = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{config_path}: config file not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{config_path}: cannot read config ({e})") from None
    if not isinstance(values, dict):
        raise ConfigError(f"{config_path}: expected a JSON object, got {type(values).__name__}")
    return values


# Hugging Face `config.json` key -> ours, per variant (BERT's, RoBERTa's and
# ALBERT's keys are ours already). DistilBERT spells them its own way.
_DISTILBERT_KEYS = {
    "vocab_size": "vocab_size",
    "dim": "hidden_size",
    "n_layers": "num_hidden_layers",
    "n_heads": "num_attention_heads",
    "hidden_dim": "intermediate_size",
    "dropout": "hidden_dropout_prob",
    "attention_dropout": "attention_probs_dropout_prob",
    "max_position_embeddings": "max_position_embeddings",
    "initializer_range": "initializer_range",
}
_BERT_KEYS = (
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
    "intermediate_size", "hidden_dropout_prob", "attention_probs_dropout_prob",
    "max_position_embeddings", "type_vocab_size", "initializer_range",
)


def _require(values, keys, config_path):
    missing = [key for key in keys if key not in values]
    if missing:
        raise ConfigError(f"{config_path}: missing key(s) {', '.join(missing)}")


def _activation(values, key, config_path):
    act = values.get(key, "gelu")
    if act not in HF_ACTIVATIONS:
        raise ConfigError(f"{config_path}: '{key}' {act!r} has no BERT equivalent")
    return HF_ACTIVATIONS[act]


def config_values_from_hf(values, config_path="config.json"):
    """`BertConfig` keys of an HF BERT, RoBERTa, ALBERT or DistilBERT `config.json`'s values.

    HF's `"gelu"` (exact erf) becomes `"gelu_exact"`, `"gelu_new"` the
    original's tanh `"gelu"`. RoBERTa's positions start at
    `pad_token_id + 1`; DistilBERT has no token types and no pooler. Features
    these architectures lack here (relative positions, a decoder) are
    refused rather than silently approximated.

    Raises:
        ConfigError: naming the file and the key.

    Example:
    >>> values = config_values_from_hf({"model_type": "distilbert", "vocab_size": 30, "dim": 8, "n_layers": 2,
    ...     "n_heads": 2, "hidden_dim": 16, "dropout": 0.1, "attention_dropout": 0.1,
    ...     "max_position_embeddings": 32, "initializer_range": 0.02, "activation": "gelu"})
    >>> values["hidden_size"], values["type_vocab_size"], values["use_pooler"], values["hidden_act"]
    (8, 0, False, 'gelu_exact')
    """
    model_type = values.get("model_type", "bert")
    if model_type not in ("bert", "roberta", "albert", "distilbert"):
        raise ConfigError(f"{config_path}: model_type is {model_type!r}, not one of 'bert', 'roberta', "
                          "'albert', 'distilbert'")
    if values.get("position_embedding_type", "absolute") != "absolute":
        raise ConfigError(f"{config_path}: position_embedding_type must be 'absolute'")
    for flag in ("is_decoder", "add_cross_attention"):
        if values.get(flag):
            raise ConfigError(f"{config_path}: {flag} is true: a decoder (causal or cross-attending) BERT, which "
                              "the original's bidirectional encoder cannot compute")
    if model_type == "distilbert":
        _require(values, _DISTILBERT_KEYS, config_path)
        if values.get("sinusoidal_pos_embds"):
            pass  # The sinusoidal table is saved as the position embeddings' weight: it loads as any table.
        converted = {ours: values[theirs] for theirs, ours in _DISTILBERT_KEYS.items()}
        converted.update(hidden_act=_activation(values, "activation", config_path), type_vocab_size=0,
                         model_type="distilbert", use_pooler=False, layer_norm_eps=1e-12)
        return converted
    _require(values, _BERT_KEYS, config_path)
    converted = {key: values[key] for key in _BERT_KEYS}
    converted["hidden_act"] = _activation(values, "hidden_act", config_path)
    eps = values.get("layer_norm_eps", 1e-12)
    if model_type == "bert":
        if abs(eps - 1e-12) > 1e-15:
            raise ConfigError(f"{config_path}: layer_norm_eps must be 1e-12 as in the original BERT")
        return converted
    converted.update(model_type=model_type, layer_norm_eps=eps)
    if model_type == "roberta":
        # HF's RobertaEmbeddings: padding_idx = pad_token_id, real positions from padding_idx + 1.
        converted["position_offset"] = values.get("pad_token_id", 1) + 1
    else:  # albert
        _require(values, ("embedding_size", "num_hidden_groups", "inner_group_num"), config_path)
        converted.update(embedding_size=values["embedding_size"], num_hidden_groups=values["num_hidden_groups"],
                         inner_group_num=values["inner_group_num"])
    return converted


def bert_config_from_hf(config_path):
    """Converts an HF BERT, RoBERTa, ALBERT or DistilBERT `config.json` to a `BertConfig`.

    See `config_values_from_hf`.

    Raises:
        ConfigError: naming the file and the key.
    """
    config_path = os.fspath(config_path)
    converted = config_values_from_hf(_read_hf_config(config_path), config_path)
    return BertConfig.from_dict(converted, source=config_path)


def _model_type_of(path):
    """The `model_type` of the `config.json` beside HF weights ("bert" without one)."""
    directory = path if filesystem.isdir(path) else filesystem.dirname(path)
    config_path = filesystem.join(directory or ".", "config.json")
    if not filesystem.exists(config_path):
        return "bert"
    return _read_hf_config(config_path).get("model_type", "bert")


def read_hf_weights(model_dir_or_file, model_type=None):
    """Reads HF safetensors as `({original_name: array}, unconverted)`.

    Args:
        model_dir_or_file: A directory holding `model.safetensors`, or the file.
        model_type: `"bert"`, `"roberta"`, `"albert"` or `"distilbert"`;
            None reads it from the `config.json` beside the weights ("bert"
            without one).

    Returns:
        The weights under their original names, and the sorted HF names of
        the tensors that have no place in the original layout (buffers and
        tied copies, `HF_SKIPPED`, are not among them; an MLM decoder that
        differs from the word embeddings is, marked as not tied).
    """
    path = os.fspath(model_dir_or_file)
    if model_type is None:
        model_type = _model_type_of(path)
    if model_type not in _TIED_DECODERS:
        raise ConfigError(f"{path}: model_type is {model_type!r}, not one of {', '.join(map(repr, _TIED_DECODERS))}")
    if filesystem.isdir(path):
        path = filesystem.join(path, "model.safetensors")
    _, _, skipped = _name_rules(model_type)
    weights, sources, unconverted, decoders = {}, {}, [], {}
    for hf_name, array in read_safetensors(path).items():
        mapped = hf_to_original_name(hf_name, model_type)
        if mapped is None:
            if not skipped.search(hf_name):
                unconverted.append(hf_name)
            elif hf_name.endswith(_TIED_DECODERS[model_type]):
                decoders[hf_name] = array
            continue
        name, transpose = mapped
        if array.dtype.kind != "f":  # An id buffer (I64) or a mask (BOOL) under a weight's name.
            raise CheckpointError(f"{path}: tensor {hf_name} is {array.dtype}, not floating point: not a weight")
        if name in sources:  # A pooler beside a classifier head that is one (RoBERTa's `classifier.dense`).
            first, second = sorted((sources[name], hf_name))
            raise CheckpointError(f"{path}: tensors {first} and {second} are both {name}: two heads "
                                  "where the model has a place for one")
        sources[name] = hf_name
        weights[name] = np.ascontiguousarray(array.T) if transpose else array
    embeddings = weights.get("bert/embeddings/word_embeddings")
    for hf_name, decoder in decoders.items():
        # The original ties the MLM decoder to the word embeddings: an untied one has no place.
        if embeddings is not None and not (decoder.shape == embeddings.shape and np.array_equal(decoder, embeddings)):
            unconverted.append(f"{hf_name} (not tied to the word embeddings)")
    return weights, sorted(unconverted)


def hf_weights_as_original(model_dir_or_file, model_type=None):
    """`{original_name: array}` of HF safetensors (see `read_hf_weights`)."""
    return read_hf_weights(model_dir_or_file, model_type)[0]


def load_hf_checkpoint(model, model_dir, allow_fresh=()):
    """Loads HF-layout BERT weights (`model.safetensors`) into one of our models.

    Args:
        model: Built model whose config matches `bert_config_from_hf(...)`.
        model_dir: Directory with `model.safetensors` (or the file itself).
        allow_fresh: See `assign_original_weights`.

    Returns:
        A `LoadReport`.
    """
    weights = hf_weights_as_original(model_dir, getattr(getattr(model, "bert", model), "bert_config").model_type)
    shapes = {name: array.shape for name, array in weights.items()}
    return assign_original_weights(
        model, weights.__getitem__, shapes, source=os.fspath(model_dir), allow_fresh=allow_fresh
    )


# Parts of the original layout that HF's task models leave out (their
# `add_pooling_layer=False`, BertForMaskedLM's missing NSP head).
_MAY_BE_ABSENT = ("bert/pooler/", "cls/seq_relationship/")


@dataclasses.dataclass(frozen=True)
class SequenceClassifierHead:
    """A `*ForSequenceClassification` head, as our classifier takes it.

    Attributes:
        num_labels: Rows of the output layer (1: a regression).
        labels: The label names in class-id order (`id2label`), or None for
            a regression.
        pooler_act: The activation of the dense layer on the first token.
        multi_label: A sigmoid per label (`problem_type:
            multi_label_classification`), not a softmax over them.
    """

    num_labels: int
    labels: tuple
    pooler_act: str
    multi_label: bool = False


def _strip_prefix(name, model_type):
    prefix = f"{model_type}."
    return name[len(prefix):] if name.startswith(prefix) else name


def _hf_labels(values, config_path):
    """`(num_labels or None, labels or None)` that `config.json` names (`id2label`, else `num_labels`)."""
    id2label, num_labels = values.get("id2label"), values.get("num_labels")
    if num_labels is not None and not (_is_count(num_labels) and num_labels > 0):
        raise ConfigError(f"{config_path}: num_labels must be a positive integer, got {num_labels!r}")
    if id2label is None:
        return num_labels, None
    if not isinstance(id2label, dict) or not id2label:
        raise ConfigError(f"{config_path}: id2label must be a non-empty object of class id -> label, got {id2label!r}")
    ids = sorted(id2label, key=lambda key: int(key) if str(key).isdigit() else -1)
    if ids != [str(i) for i in range(len(ids))]:
        raise ConfigError(f"{config_path}: id2label's keys must be the class ids 0..{len(ids) - 1}, got "
                          f"{', '.join(map(str, ids))}")
    labels = tuple(id2label[key] for key in ids)
    for key, label in zip(ids, labels):
        # One label a line of label_list.txt, read back stripped.
        if not isinstance(label, str) or not label.strip() or label != label.strip() or "\n" in label or "\r" in label:
            raise ConfigError(f"{config_path}: id2label[{key}] is {label!r}: a label must be text without line breaks "
                              "or leading and trailing spaces")
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise ConfigError(f"{config_path}: id2label names {repeated[0]!r} for more than one class")
    if num_labels is not None and num_labels != len(labels):
        raise ConfigError(f"{config_path}: num_labels is {num_labels} but id2label names {len(labels)} labels")
    return len(labels), labels


def sequence_classifier_head(hf_dir, values, model_type, hidden_size, shapes):
    """The `*ForSequenceClassification` head of an HF directory, checked; None where it has none.

    A directory has one where `config.json`'s `architectures` names a
    `*ForSequenceClassification`, or where the model type's head
    (`HF_SEQUENCE_CLASSIFIER_HEADS`: its dense layer and its output layer)
    is in the file. BERT's and ALBERT's `classifier` without the pooler is
    a token classifier's, not this.

    Args:
        hf_dir: The HF directory.
        values: Its `config.json`, read.
        model_type: `"bert"`, `"roberta"`, `"albert"` or `"distilbert"`.
        hidden_size: `H`.
        shapes: `{HF tensor name: shape}` of its `model.safetensors`.

    Returns:
        A `SequenceClassifierHead`, or None.

    Raises:
        CheckpointError: a head tensor missing or of another shape, or an
            output layer whose rows are not `config.json`'s labels; naming
            the file and the tensor.
        ConfigError: an `id2label` or `num_labels` that cannot be a label
            list; a regression of several outputs.
    """
    dense, activation, output = HF_SEQUENCE_CLASSIFIER_HEADS[model_type]
    names = {_strip_prefix(name, model_type): name for name in shapes}
    declared = [name for name in values.get("architectures") or () if isinstance(name, str)
                and name.endswith(("ForSequenceClassification", "ForMultipleChoice"))]
    if not declared and not (f"{dense}.weight" in names and f"{output}.weight" in names):
        return None
    weights_path = filesystem.join(hf_dir, "model.safetensors")
    config_path = filesystem.join(hf_dir, "config.json")
    what = declared[0] if declared else f"a {model_type} sequence classifier"
    parts = (f"{dense}.weight", f"{dense}.bias", f"{output}.weight", f"{output}.bias")
    for part in parts:
        if part not in names:
            raise CheckpointError(f"{weights_path}: no tensor {part}, which the head of {what} has "
                                  f"({' + '.join(parts)})")
    output_shape = tuple(shapes[names[f"{output}.weight"]])
    rows = output_shape[0] if len(output_shape) == 2 and output_shape[0] > 0 else None
    expected = {f"{dense}.weight": (hidden_size, hidden_size), f"{dense}.bias": (hidden_size,),
                f"{output}.weight": (rows, hidden_size), f"{output}.bias": (rows,)}
    for part, shape in expected.items():
        actual = tuple(shapes[names[part]])
        if actual != shape:
            wanted = "[num_labels, hidden_size]" if part == f"{output}.weight" else list(shape)
            raise CheckpointError(f"{weights_path}: tensor {names[part]} has shape {list(actual)}, not {wanted} "
                                  f"(hidden_size {hidden_size}): not the head of {what}")
    if declared and declared[0].endswith("ForMultipleChoice"):
        # One score per (context, choice) pair, softmaxed over the choices (`models.multiple_choice`): the
        # config's `id2label` (transformers' default two labels) names no classes of this head.
        if rows != 1:
            raise CheckpointError(f"{weights_path}: tensor {names[f'{output}.weight']} has {rows} rows; the head "
                                  f"of {what} scores each choice with one")
        return SequenceClassifierHead(1, None, activation)
    problem = values.get("problem_type")
    num_labels, labels = _hf_labels(values, config_path)
    if num_labels is not None and num_labels != rows:
        raise CheckpointError(f"{weights_path}: tensor {names[f'{output}.weight']} has {rows} rows (one per label) "
                              f"but {config_path} names {num_labels} labels")
    if problem == "multi_label_classification":  # The same head; a sigmoid per label on its logits.
        return SequenceClassifierHead(rows, labels or tuple(f"LABEL_{i}" for i in range(rows)), activation,
                                      multi_label=True)
    if problem == "regression" or (problem is None and rows == 1):
        if rows != 1:
            raise ConfigError(f"{config_path}: problem_type 'regression' of {rows} outputs; ours predicts one score")
        return SequenceClassifierHead(1, None, activation)
    return SequenceClassifierHead(rows, labels or tuple(f"LABEL_{i}" for i in range(rows)), activation)


def _hf_tensor_shapes(path):
    """`{name: shape}` of a safetensors file's tensors, from its header."""
    header, _ = _safetensors_header(path)
    return {name: info["shape"] for name, info in header.items() if name != "__metadata__"}


@dataclasses.dataclass(frozen=True)
class HfModel:
    """An HF-layout BERT loaded into our model of its architecture.

    Attributes:
        config: Its `BertConfig`.
        model: A `BertPretrainingModel` (pre-training heads `cls.*`), a
            `BertSpanQA` (`qa_outputs`), a `BertClassifier` (`classifier`),
            or a `BertModel`.
        absent: Original names of the model's variables the file lacks
            (`_MAY_BE_ABSENT` only); they hold fresh values and are not
            written as converted.
        unconverted: HF names of the file's tensors that have no place in
            the original layout.
        labels: A sequence classifier's label names in class-id order
            (`SequenceClassifierHead.labels`), else None.
        multi_label: The sequence classifier is multi-label (a sigmoid per
            label).
    """

    config: object
    model: object
    absent: tuple = ()
    unconverted: tuple = ()
    labels: tuple = None
    multi_label: bool = False


def load_hf_model(hf_dir):
    """Builds our model of an HF-layout BERT and loads its weights.

    Args:
        hf_dir: Directory with `config.json` and `model.safetensors`.

    Returns:
        An `HfModel`.

    Raises:
        ConfigError: a bad `config.json`.
        CheckpointError: a malformed `model.safetensors`, or weights that do
            not fit the config.
    """
    hf_dir = os.fspath(hf_dir)
    config_path = filesystem.join(hf_dir, "config.json")
    config = bert_config_from_hf(config_path)
    weights, unconverted = read_hf_weights(hf_dir, config.model_type)
    check_weights_fit_config(config, {name: array.shape for name, array in weights.items()}, hf_dir)
    cls_heads = any(name.startswith("cls/") for name in weights)  # pre-training or SQuAD
    head = None if cls_heads else sequence_classifier_head(
        hf_dir, _read_hf_config(config_path), config.model_type, config.hidden_size,
        _hf_tensor_shapes(filesystem.join(hf_dir, "model.safetensors")))
    if any(name.startswith("cls/squad/") for name in weights):
        model = BertSpanQA(config)
    elif cls_heads:
        model = BertPretrainingModel(config)
    elif head is not None:
        # A fine-tuned classifier: its release has the pooler (DistilBERT's `pre_classifier`, ReLU).
        config = dataclasses.replace(config, use_pooler=True, pooler_act=head.pooler_act)
        model = BertClassifier(config, num_labels=head.num_labels)
    elif "output_weights" in weights:  # A token classifier's head: on a pooler that the file lacks.
        model = BertClassifier(dataclasses.replace(config, use_pooler=True),
                               num_labels=weights["output_weights"].shape[0])
    else:
        model = BertModel(config)
    shapes = {name: array.shape for name, array in weights.items()}
    report = assign_original_weights(model, weights.__getitem__, shapes, source=hf_dir, allow_fresh=_MAY_BE_ABSENT)
    # Tensors with original names that this model has no place for (a classifier head beside pre-training heads).
    unplaced = [f"{name} (no place in a {model.name})" for name in report.unexpected]
    return HfModel(config, model, tuple(sorted(report.fresh)), tuple(sorted(unconverted + unplaced)),
                   head.labels if head is not None else None, head is not None and head.multi_label)


def classifier_release_files(loaded):
    """`write_more(directory)` for `write_converted_release`: what a release of `loaded` (an `HfModel`)
    holds besides its weights and tokenizer: a sequence classifier's `label_list.txt` (its `id2label`) and,
    for a multi-label one, `multi_label.json` (those labels, each at threshold 0.5); an earlier release's
    files of either kind there are removed where `loaded` has none."""
    def write_more(directory):
        if loaded.labels is None:
            filesystem.remove(filesystem.join(directory, LABEL_LIST_FILE), missing_ok=True)
        else:
            write_release_labels(directory, loaded.labels)
        record = MultiLabelRecord(loaded.labels, (0.5,) * len(loaded.labels)) if loaded.multi_label else None
        write_release_multi_label(directory, record)

    return write_more


def activation_change_difference(model, hidden_act, inputs=None, batch_size=2, seq_length=16, seed=0):
    """How far `model`'s sequence output moves when its weights run under `hidden_act`.

    The same weights go into a `BertModel` whose config differs only in
    `hidden_act` (e.g. the original's tanh `"gelu"` for weights trained with
    the exact one), and both encode the same batch.

    Args:
        model: A loaded `BertModel` or task model (its encoder is compared).
        hidden_act: The activation to compare with.
        inputs: Dict of `input_ids`, `input_mask`, `segment_ids`; by default
            a fixed batch of random token ids (all attended, the second half
            of each row segment 1) of the next three arguments.
        batch_size: Rows of the default batch.
        seq_length: Tokens per row of the default batch (capped at
            `max_position_embeddings`).
        seed: Seed of the default batch's token ids.

    Returns:
        Max absolute difference of `sequence_output`, a Python float.
    """
    encoder = model if isinstance(model, BertModel) else model.bert  # A task model: its encoder.
    config = encoder.bert_config
    other = BertModel(dataclasses.replace(config, hidden_act=hidden_act))
    other.set_weights(encoder.get_weights())
    if inputs is None:
        seq_length = min(seq_length, config.max_sequence_length)
        rng = np.random.default_rng(seed)
        segment_ids = np.zeros((batch_size, seq_length), "int32")
        segment_ids[:, seq_length // 2:] = max(0, min(1, config.type_vocab_size - 1))
        inputs = {
            "input_ids": rng.integers(0, config.vocab_size, (batch_size, seq_length)).astype("int32"),
            "input_mask": np.ones((batch_size, seq_length), "int32"),
            "segment_ids": segment_ids,
        }
    # [batch_size, seq_length, hidden_size] each
    ours = np.asarray(encoder(inputs, training=False)["sequence_output"], np.float64)
    theirs = np.asarray(other(inputs, training=False)["sequence_output"], np.float64)
    return float(np.max(np.abs(ours - theirs)))


def write_converted_release(model, config, hf_dir, output_dir, absent=(), write_more=None):
    """Writes `model` as a release: checkpoint, the tokenizer files of `hf_dir`, then `bert_config.json`.

    The tokenizer files are the model type's (`release.TOKENIZER_FILES`:
    BERT's and DistilBERT's `vocab.txt`, RoBERTa's `vocab.json` and
    `merges.txt`, ALBERT's `spiece.model`), with `release.TOKENIZER_EXTRAS`
    (`tokenizer.json`, `tokenizer_config.json`, `special_tokens_map.json`)
    where the directory has them: each read and checked first
    (`hf_checks.tokenizer_files_to_copy`), then copied as it is. The config is
    written last (and an earlier one removed first), so a run stopped part
    way leaves no directory that has all of them.

    Args:
        model: The loaded model (`load_hf_model`).
        config: The `BertConfig` to write as `bert_config.json`.
        absent: Names of `model`'s variables the HF file lacked: left out
            of the checkpoint, as a loader then reports them missing.
        hf_dir: The HF directory, with the model's tokenizer files.
        output_dir: Created if needed.
        write_more: `write_more(output_dir)` writes further files of the
            release (a classifier's label list) before its config.

    Returns:
        The checkpoint prefix written.

    Raises:
        InputFileError: `hf_dir` lacks a tokenizer file, or one is a link
            (checked before anything is written).
        VocabError: a tokenizer file that does not parse or does not fit
            the config's `vocab_size` (checked before anything is written).
    """
    hf_dir, output_dir = os.fspath(hf_dir), os.fspath(output_dir)
    names = tokenizer_files_to_copy(hf_dir, config)
    begin_release(output_dir)
    tensors = {name: value for name, value in original_weights(model).items() if name not in absent}
    prefix = write_checkpoint_tensors(tensors, filesystem.join(output_dir, "bert_model.ckpt"))
    for name in names:
        copy_atomically(filesystem.join(hf_dir, name), filesystem.join(output_dir, name))
    if write_more is not None:
        write_more(output_dir)
    config.to_json_file(filesystem.join(output_dir, "bert_config.json"))
    return prefix


def convert_hf_to_original(hf_dir, output_dir, original_compatible_config=False):
    """Writes an HF-layout BERT (or RoBERTa, ALBERT, DistilBERT) as a release directory.

    Produces `bert_config.json`, `bert_model.ckpt.{index,data-*}` and
    `vocab.txt` (a variant: its tokenizer files) in `output_dir`: what google-research/bert's scripts (and ours)
    take as `--bert_config_file`, `--init_checkpoint` and `--vocab_file`. The
    weights pass through a model of the matching architecture, so a file that
    does not fit the config is refused; the values are copied bit for bit.

    Args:
        hf_dir: Directory with `config.json`, `model.safetensors` and the
            tokenizer files (`vocab.txt`; a variant's, `write_converted_release`).
        output_dir: Created if needed.
        original_compatible_config: Write the activation the original's
            `modeling.get_activation` accepts (`"gelu"`, its tanh form, for
            exact-GELU weights) instead of our exact `"gelu_exact"`; see
            `activation_change_difference` for what that costs.

    Returns:
        `(bert_config, checkpoint_prefix)`, the config as written.
    """
    loaded = load_hf_model(hf_dir)
    config = loaded.config.original_compatible() if original_compatible_config else loaded.config
    prefix = write_converted_release(loaded.model, config, hf_dir, output_dir, loaded.absent)
    return config, prefix
