"""A default export runs anywhere: float32 in ops that TensorFlow runs on a GPU as on a CPU, whatever machine
wrote it; this CPU's form (bfloat16, oneDNN's packed products) only when asked for by name.

Written on a machine that claims AMX and oneDNN's rewrites (where the old default was bfloat16 with
`_MklNativeFusedMatMul` products), the default export's every op, in every signature and every function of
its graph library, must have a GPU kernel in TensorFlow's own registry, but for the host ops a GPU-served
graph keeps on the CPU (`HOST_OPS`).
"""

import json
import os

import pytest
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import kernels

from keras_bert_impl import hardware
from keras_bert_impl.models.classifier import BertClassifier
from keras_bert_impl.serving.export import (
    DEFAULT_THREADS_HINT,
    METADATA_FILE,
    ONLINE_THREADS_HINT,
    ExportOptions,
    export_checkpoint,
    export_saved_model,
    threads_hint,
)
from tests.helpers import X86_ONLY, randomize, tiny_config

SEQ = 24
# Ops without a GPU kernel that a GPU-served graph runs on the host, before or around the encoder; no product,
# LayerNorm, softmax or other per-token arithmetic of the encoder may be here.
HOST_OPS = frozenset({
    # The in-graph WordPiece tokenizer (TF Text) and its string work.
    "StaticRegexFullMatch", "StaticRegexReplace", "StringJoin", "StringLength", "StringLower", "StringSplitV2",
    "UnicodeDecode", "UnicodeEncode", "WordpieceTokenizeWithOffsets",
    # Token ids packed into [CLS] a [SEP] b [SEP] rows: integer index work on ragged tensors.
    "RaggedGather", "RaggedRange", "RaggedTensorToTensor",
    # The vocabulary and labels tables.
    "HashTableV2", "InitializeTableFromTextFileV2", "LookupTableFindV2", "LookupTableImportV2",
    # serve_examples, classify, regress: serialized tf.Examples parsed.
    "ParseExampleV2",
    # The SavedModel's saver: restoring and saving the variables.
    "MergeV2Checkpoints", "RestoreV2", "SaveV2", "ShardedFilename",
})
# Ops TensorFlow registers for any device (Placeholder, NoOp, If, PartitionedCall, ReadVariableOp, ...).
ANY_DEVICE = "DEFAULT"


def graph_op_types(saved_model_dir):
    """Every op type in a SavedModel: its MetaGraph's nodes and every function of its graph library."""
    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    graph = saved_model.meta_graphs[0].graph_def
    return {node.op for node in graph.node} | {node.op for function in graph.library.function
                                               for node in function.node_def}


def ops_without_a_gpu_kernel(op_types):
    """The op types that TensorFlow's kernel registry has no GPU (nor any-device) kernel for."""
    return {op for op in op_types
            if not {kernel.device_type for kernel in kernels.get_registered_kernels_for_op(op).kernel}
            & {"GPU", ANY_DEVICE}}


def metadata_of(version_dir):
    with open(os.path.join(version_dir, "assets.extra", METADATA_FILE)) as f:
        return json.load(f)


@pytest.fixture
def amx_machine_with_onednn(monkeypatch):
    """This process's machine facts as a Sapphire Rapids' with TensorFlow's oneDNN rewrites on: the old
    default's bfloat16 and packed-kernel machine."""
    flags = frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})
    monkeypatch.setattr(hardware, "read_cpuinfo", lambda path=hardware.CPUINFO: ("Intel Xeon 8480+", flags))
    monkeypatch.setattr(hardware, "read_cpu_vendor", lambda path=hardware.CPUINFO: "GenuineIntel")
    monkeypatch.setattr(hardware, "onednn_graph_rewrites", lambda: True)
    monkeypatch.setattr(hardware, "accelerator_visible", lambda: False)


@pytest.fixture(scope="module")
def release(tmp_path_factory, bert_vocab_file):
    """A tiny classifier release in the original checkpoint layout: `(model, bert_config.json, checkpoint, vocab)`."""
    from keras_bert_impl.checkpoints.original import save_original_checkpoint

    root = tmp_path_factory.mktemp("release")
    # One layer: what is checked is each op of the export, and each layer has the same ops.
    model = BertClassifier(tiny_config(vocab_size=30522, max_position_embeddings=64, num_hidden_layers=1), num_labels=3)
    randomize(model, seed=5, scale=0.2)
    save_original_checkpoint(model, str(root / "model.ckpt"))
    model.bert_config.to_json_file(root / "bert_config.json")
    return model, str(root / "bert_config.json"), str(root / "model.ckpt"), str(bert_vocab_file)


def test_the_default_export_of_a_bf16_machine_is_float32_in_ops_with_gpu_kernels(tmp_path, release,
                                                                                 amx_machine_with_onednn):
    _, config_file, checkpoint, vocab_file = release
    path = export_checkpoint("classifier", config_file, checkpoint, vocab_file, tmp_path / "tiny",
                             ExportOptions(max_seq_length=SEQ, label_names=("a", "b", "c")), log=lambda _: None)
    metadata = metadata_of(path)
    assert (metadata["precision"], metadata["optimized_for"], metadata["kernels"]) == \
        ("float32", "portable", "variables")
    assert metadata["needs"] == "portable: stock TensorFlow ops, CPU and GPU"
    assert metadata["onednn_forms"] is False
    op_types = graph_op_types(path)
    assert {"MatMul", "BatchMatMulV2", "Softmax"} <= op_types  # the encoder's products and softmax are here
    assert ops_without_a_gpu_kernel(op_types) <= HOST_OPS, ops_without_a_gpu_kernel(op_types) - HOST_OPS


@X86_ONLY
def test_this_cpus_form_is_asked_for_by_name_and_says_what_it_needs(tmp_path, release, amx_machine_with_onednn):
    _, config_file, checkpoint, vocab_file = release
    path = export_checkpoint("classifier", config_file, checkpoint, vocab_file, tmp_path / "tiny",
                             ExportOptions(max_seq_length=SEQ, optimize_for="this_cpu"), num_labels=3,
                             log=lambda _: None)
    metadata = metadata_of(path)
    # The old default on this machine: bfloat16, products that oneDNN packs once.
    assert (metadata["precision"], metadata["optimized_for"]) == ("bfloat16", "this_cpu")
    assert metadata["needs"] == "TensorFlow with oneDNN on x86 (CPU only): its products are oneDNN ops"
    # The check the default export passes fails here: its products run on a CPU only.
    assert "_MklNativeFusedMatMul" in ops_without_a_gpu_kernel(graph_op_types(path)) - HOST_OPS


# A default export serves the float32 model's values under TF Serving's loader (a TextClassifier, its preprocessor
# in the graph): test_serving_precision.test_the_default_export_serves_the_float32_models_values, served there in
# one process with that file's other exports.


def test_an_unknown_target_is_refused_before_anything_is_written(tmp_path, release):
    from keras_bert_impl.serving.versions import ExportError

    model, _, _, vocab_file = release
    with pytest.raises(ExportError, match="optimize_for 'gpu' is not one of portable, this_cpu"):
        export_saved_model(model, "classifier", vocab_file, tmp_path / "m",
                           ExportOptions(max_seq_length=SEQ, optimize_for="gpu"))
    assert not (tmp_path / "m").exists()


def test_the_thread_advice_follows_the_models_width():
    # Measured (docs/BENCHMARKS.md, "Portable export against this CPU's form"): online threads made one MiniLM
    # text faster in every form, one BERT-base-shaped text slower in float32 and bfloat16.
    minilm = tiny_config(hidden_size=384, num_attention_heads=12, intermediate_size=1536)
    base = tiny_config(hidden_size=768, num_attention_heads=12, intermediate_size=3072)
    assert threads_hint(minilm) == ONLINE_THREADS_HINT
    assert "--tensorflow_intra_op_parallelism=1 --tensorflow_inter_op_parallelism=-1" in ONLINE_THREADS_HINT
    assert threads_hint(base) == DEFAULT_THREADS_HINT
    assert "keep TF Serving's default threads" in DEFAULT_THREADS_HINT
