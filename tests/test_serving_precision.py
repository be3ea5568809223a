"""Export precision: float32 or bfloat16, chosen per CPU and written into the
export's metadata. A bfloat16 export computes its products in bfloat16 with
stock TensorFlow ops and answers within bfloat16 rounding of the float32
export, through the same signatures, in a process without our Python."""

import dataclasses
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl import hardware
from keras_bert_impl.cli import FlagError
from keras_bert_impl.inference import plan
from keras_bert_impl.models.classifier import BertClassifier
from keras_bert_impl.serving.export import (
    METADATA_FILE, ONLINE_THREADS_HINT, ExportError, ExportOptions, export_saved_model,
)
from keras_bert_impl.tasks.text_classifier import TextClassifier
from tests.helpers import (
    X86_ONLY,
    randomize,
    run_with_onednn_rewrites,
    tiny_config,
    tiny_release_export_tool,
    weight_casts,
)
from tests.test_export_portable import HOST_OPS, graph_op_types, ops_without_a_gpu_kernel
from tests.test_serving import SENTENCES, probe_many, signature_defs
from tools import export_saved_model as export_tool

SEQ = 24
# bfloat16 keeps 8 significant bits: each rounding moves a value by up to
# 2**-9 of itself. The classifier's probabilities pass through two layers of
# products, LayerNorms and a softmax; a few dozen roundings of values of
# order one bound them by about 3e-2 (the padding-free tests' bound).
BF16_ATOL = 3e-2


def cpuinfo_text(model_name, flags, vendor="GenuineIntel"):
    """Two logical CPUs' blocks as Linux writes them."""
    block = f"processor\t: {{}}\nvendor_id\t: {vendor}\nmodel name\t: {model_name}\nflags\t\t: {' '.join(flags)}\n\n"
    return block.format(0) + block.format(1).replace(model_name, "a second, ignored name")


@pytest.mark.parametrize("flags, vendor, expected, isa", [
    (("fpu", "avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"), "GenuineIntel", "bfloat16",
     "avx2, avx512f, avx512_bf16, amx_bf16"),  # Sapphire Rapids and later: 5.3x float32's products
    (("fpu", "avx2", "avx512f", "avx512_bf16"), "AuthenticAMD", "bfloat16",
     "avx2, avx512f, avx512_bf16; no amx_bf16"),  # Zen 4: 1.9x
    # Cooper Lake, or a VM that hides AMX: bf16 dot products at float32's FMA rate, 0.6x measured.
    (("fpu", "avx2", "avx512f", "avx512_bf16"), "GenuineIntel", "float32",
     "avx2, avx512f, avx512_bf16; no amx_bf16"),
    (("fpu", "avx2", "avx512f", "avx512_vnni"), "GenuineIntel", "float32",
     "avx2, avx512f; no avx512_bf16, amx_bf16"),  # Cascade Lake, Ice Lake: int8 units only
    (("fpu", "avx2"), "AuthenticAMD", "float32", "avx2; no avx512f, avx512_bf16, amx_bf16"),  # Zen 2/3
])
def test_precision_follows_the_cpus_matrix_units(tmp_path, monkeypatch, flags, vendor, expected, isa):
    path = tmp_path / "cpuinfo"
    path.write_text(cpuinfo_text("Intel(R) Xeon(R) Platinum 8480+", flags, vendor))
    name, read_flags = hardware.read_cpuinfo(path)
    assert (name, read_flags) == ("Intel(R) Xeon(R) Platinum 8480+", frozenset(flags))
    assert hardware.read_cpu_vendor(path) == vendor
    assert plan.default_precision(read_flags, onednn_rewrites=True, vendor=vendor) == expected
    assert plan.resolve_precision("auto", read_flags, onednn_rewrites=True, vendor=vendor) == expected
    assert plan.resolve_precision("float32", read_flags) == "float32"
    # AMX is reached only through oneDNN's kernels: without the rewrites, float32.
    assert plan.default_precision(read_flags, onednn_rewrites=False, vendor=vendor) == "float32"
    # By default the state is this process's; where the build does not say, the flags decide.
    monkeypatch.setattr(hardware, "onednn_graph_rewrites", lambda: None)
    assert plan.default_precision(read_flags, vendor=vendor) == expected
    monkeypatch.setattr(hardware, "onednn_graph_rewrites", lambda: False)
    assert plan.default_precision(read_flags, vendor=vendor) == "float32"
    assert hardware.cpu_description(path) == f"Intel(R) Xeon(R) Platinum 8480+ ({isa}), {os.cpu_count()} logical cores"


def test_no_cpuinfo_serves_float32(tmp_path):
    name, flags = hardware.read_cpuinfo(tmp_path / "absent")
    assert name and flags == frozenset() and hardware.read_cpu_vendor(tmp_path / "absent") == ""
    assert plan.default_precision(flags) == "float32"


# In a fresh process: the rewrites' state as `hardware` reports it, and the
# kernel TensorFlow actually runs a MatMul + bias with (from the graph the
# runtime executed, after its rewrites).
ONEDNN_PROBE = """
import json
import numpy as np
import tensorflow as tf
from keras_bert_impl import hardware
from keras_bert_impl.inference import plan
tf1 = tf.compat.v1
graph = tf.Graph()
with graph.as_default():
    x = tf1.placeholder(tf.float32, [4, 8])
    y = tf.nn.bias_add(tf.matmul(x, tf.ones([8, 3])), tf.ones([3])) * 2.0
    with tf1.Session(graph=graph) as session:
        metadata = tf1.RunMetadata()
        session.run(y, {x: np.ones([4, 8])}, options=tf1.RunOptions(output_partition_graphs=True),
                    run_metadata=metadata)
ops = sorted({node.op for part in metadata.partition_graphs for node in part.node if "MatMul" in node.op})
# The same product in bfloat16: which kernel runs it.
graph = tf.Graph()
with graph.as_default():
    x = tf1.placeholder(tf.bfloat16, [4, 8])
    y = tf.matmul(x, tf.ones([8, 3], tf.bfloat16)) * 2.0
    with tf1.Session(graph=graph) as session:
        metadata = tf1.RunMetadata()
        session.run(y, {x: np.ones([4, 8])}, options=tf1.RunOptions(output_partition_graphs=True),
                    run_metadata=metadata)
bf16_ops = sorted({node.op for part in metadata.partition_graphs for node in part.node if "MatMul" in node.op})
amx = frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16"})
print(json.dumps([hardware.onednn_graph_rewrites(), hardware.onednn_description(), ops, bf16_ops,
                  plan.default_precision(amx)]))
"""


@X86_ONLY
@pytest.mark.parametrize("setting", ["0", "1"])
def test_onednn_rewrites_state_is_what_tensorflow_runs(setting):
    enabled, description, matmul_ops, bf16_matmul_ops, amx_precision = run_with_onednn_rewrites(ONEDNN_PROBE, setting)
    if setting == "1":
        assert enabled is True and description == "oneDNN graph rewrites on (TF_ENABLE_ONEDNN_OPTS=1)"
        assert matmul_ops == ["_MklNativeFusedMatMul"]
        # An AMX CPU in this state runs bfloat16 products in oneDNN: bfloat16 is the default.
        assert amx_precision == "bfloat16"
    else:
        assert enabled is False and description == "oneDNN graph rewrites off (TF_ENABLE_ONEDNN_OPTS=0)"
        assert all(not op.startswith("_Mkl") for op in matmul_ops) and matmul_ops
        # Without the rewrites a bfloat16 product is TensorFlow's own (Eigen) MatMul, whatever
        # the CPU: no AMX, so even an AMX CPU exports float32 in this state.
        assert bf16_matmul_ops == ["MatMul"]
        assert amx_precision == "float32"


@pytest.fixture(scope="module")
def model(tiny_classifier):
    """The tiny classifier of conftest (seed 3), shared with test_int8 and test_constant_kernels."""
    return tiny_classifier


@pytest.fixture(scope="module")
def exports(tmp_path_factory, bert_vocab_file, model, tiny_classifier_float32_export):
    """`model` exported in float32 (conftest's export, shared with other files) and in bfloat16."""
    return {
        "float32": tiny_classifier_float32_export[0],
        "bfloat16": export_saved_model(
            model, "classifier", bert_vocab_file, tmp_path_factory.mktemp("saved_models") / "bfloat16",
            ExportOptions(max_seq_length=SEQ, precision="bfloat16"),
        ),
    }


def saved_graph_def(saved_model_dir):
    """The GraphDef of a SavedModel's (only) MetaGraph, its functions in `library`."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    return saved_model.meta_graphs[0].graph_def


def graph_dtypes(saved_model_dir):
    """Every `T`/`dtype`-like type attribute of every op in the SavedModel's graphs."""
    graph = saved_graph_def(saved_model_dir)
    nodes = list(graph.node) + [node for function in graph.library.function for node in function.node_def]
    return {(node.op, tf.dtypes.as_dtype(value.type).name) for node in nodes
            for key, value in node.attr.items() if key in ("T", "DstT") and value.type}


def test_bfloat16_export_computes_in_bfloat16_and_says_so(exports):
    float32_ops, bfloat16_ops = graph_dtypes(exports["float32"]), graph_dtypes(exports["bfloat16"])
    # The products themselves run in bfloat16; the float32 export has none.
    assert {("MatMul", "bfloat16"), ("BatchMatMulV2", "bfloat16")} <= bfloat16_ops
    assert not any(dtype == "bfloat16" for _, dtype in float32_ops)
    for precision, path in exports.items():
        with open(os.path.join(path, "assets.extra", METADATA_FILE)) as f:
            metadata = json.load(f)
        assert metadata["precision"] == precision
        assert metadata["dtype_policy"] == plan.DTYPE_POLICIES[precision]
        assert (metadata["task"], metadata["max_seq_length"], metadata["do_lower_case"]) == ("classifier", SEQ, True)
        assert metadata["exported_on_cpu"] == hardware.read_cpuinfo()[0]
        assert metadata["exported_with_onednn_rewrites"] == hardware.onednn_graph_rewrites()


@pytest.fixture(scope="module")
def text_classifier_exports(tmp_path_factory, bert_vocab_file, model):
    """A one-layer `model` as a `TextClassifier` (its preprocessor in the model), exported by default (float32,
    portable) and in bfloat16; and its probabilities for `SENTENCES` in Python (float32): `({precision: path},
    expected)`. (One layer: what is checked is that the exports answer as the model does in Python, whatever its
    depth; each export and the Python predict trace a layer less.)"""
    from keras_bert_impl.tokenization.preprocessor import BertPreprocessor

    with open(bert_vocab_file, encoding="utf-8") as f:
        vocabulary = [line.rstrip("\n") for line in f]
    preprocessor = BertPreprocessor(vocabulary, max_seq_length=SEQ)
    config = dataclasses.replace(model.bert_config, num_hidden_layers=1)
    weights = BertClassifier(config, num_labels=3)
    randomize(weights, seed=3, scale=0.2)
    classifier = TextClassifier(config, 3, preprocessor)
    classifier.set_weights(weights.get_weights())
    root = tmp_path_factory.mktemp("saved_models")
    # verify=False: both exports' answers under TF Serving's loader (`answers`) are compared with the Python
    # probabilities by this file's tests (the export's own check of its warmup requests, ~2 s of CPU each, is
    # test_verification's).
    paths = {"float32": classifier.export(root / "text_classifier_default", verify=False),
             "bfloat16": classifier.export(root / "text_classifier", precision="bfloat16", verify=False)}
    return paths, classifier.predict(SENTENCES, verbose=0)


REQUESTS = [{"signature": "serving_default", "inputs": {"text": SENTENCES}},
            {"signature": "serve_text_pair", "inputs": {"text": SENTENCES, "text_b": SENTENCES[::-1]}}]


@pytest.fixture(scope="module")
def answers(exports, text_classifier_exports):
    """`REQUESTS` to each of `exports` and to `text_classifier_exports` ("text_classifier" in bfloat16,
    "text_classifier_default" in float32), under TF Serving's loader in one process without our Python."""
    jobs = {precision: (path, REQUESTS) for precision, path in exports.items()}
    paths, _ = text_classifier_exports
    jobs["text_classifier"] = (paths["bfloat16"], REQUESTS[:1])
    jobs["text_classifier_default"] = (paths["float32"], REQUESTS[:1])
    return probe_many(jobs)


def test_bfloat16_answers_within_bfloat16_rounding_of_float32(exports, model, answers):
    for full, half in zip(answers["float32"], answers["bfloat16"]):
        full, half = np.asarray(full["probabilities"]), np.asarray(half["probabilities"])
        assert full.shape == half.shape == (len(SENTENCES), 3)
        np.testing.assert_allclose(half, full, atol=BF16_ATOL)
        assert np.abs(half - full).max() > 1e-6  # really rounded: not the float32 graph again
        np.testing.assert_allclose(half.sum(axis=1), 1.0, atol=1e-6)  # the softmax itself is float32
    # Signatures keep float32 outputs, whatever the precision inside.
    outputs = signature_defs(exports["bfloat16"])["serving_default"].outputs
    assert outputs["probabilities"].dtype == tf.float32.as_datatype_enum
    # The source model was not changed by the bfloat16 export.
    assert model.bert.word_embedding.compute_dtype == "float32"


def test_unknown_precision_is_refused_before_anything_is_written(tmp_path, bert_vocab_file, model):
    with pytest.raises(ExportError, match="'float16' is not one of auto, float32, bfloat16"):
        export_saved_model(
            model, "classifier", bert_vocab_file, tmp_path / "m",
            ExportOptions(max_seq_length=SEQ, precision="float16"),
        )
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("max_seq_length", [2, 65])
def test_a_max_seq_length_the_model_cannot_serve_is_refused(tmp_path, bert_vocab_file, model, max_seq_length):
    # 65 > the model's 64 positions: every request longer than 64 pieces would fail in TF Serving.
    with pytest.raises(ExportError, match=f"--max_seq_length {max_seq_length}: must be at least 3 .* at most .* 64"):
        export_saved_model(
            model, "classifier", bert_vocab_file, tmp_path / "tiny",
            ExportOptions(max_seq_length=max_seq_length),
        )
    assert not (tmp_path / "tiny").exists()


def test_a_model_that_is_not_the_tasks_is_refused_in_another_precision(tmp_path, bert_vocab_file, model):
    # A 3-class classifier is not a regression model: its head cannot be copied.
    with pytest.raises(ExportError, match="cannot rebuild 'classifier' in bfloat16: its variables are not a regression"):
        export_saved_model(
            model, "regression", bert_vocab_file, tmp_path / "m",
            ExportOptions(max_seq_length=SEQ, precision="bfloat16"),
        )
    assert not any((tmp_path / "m").glob("[0-9]*"))


def test_text_classifier_exports_in_bfloat16(text_classifier_exports, answers):
    paths, expected = text_classifier_exports  # expected: float32 probabilities, in Python
    with open(os.path.join(paths["bfloat16"], "assets.extra", METADATA_FILE)) as f:
        assert json.load(f)["precision"] == "bfloat16"
    (served,) = answers["text_classifier"]
    np.testing.assert_allclose(served["probabilities"], expected, atol=BF16_ATOL)
    assert np.abs(np.asarray(served["probabilities"]) - expected).max() > 1e-6


def test_the_default_export_serves_the_float32_models_values(text_classifier_exports, answers):
    # test_export_portable's check of a default export's values, here to be served in the process that serves
    # this file's other exports (one TensorFlow start-up fewer), with the Python probabilities computed once.
    paths, expected = text_classifier_exports  # expected: float32 probabilities, in Python
    with open(os.path.join(paths["float32"], "assets.extra", METADATA_FILE)) as f:
        assert json.load(f)["precision"] == "float32"
    assert ops_without_a_gpu_kernel(graph_op_types(paths["float32"])) <= HOST_OPS
    (served,) = answers["text_classifier_default"]
    assert np.asarray(served["probabilities"]).shape == (len(SENTENCES), 3)
    np.testing.assert_allclose(served["probabilities"], expected, atol=1e-4, rtol=0)


def test_export_tool_precision_flag(tmp_path, bert_vocab_file, capsys):
    tiny_release_export_tool(tmp_path, bert_vocab_file)  # the release; the tool runs through its `main` here
    with open("/proc/cpuinfo") as f:
        flags = f.read().split()
    # AMX anywhere; AVX-512 bf16 on AMD (on Intel it runs at float32's rate).
    bf16_units = "amx_bf16" in flags or ("avx512_bf16" in flags and "AuthenticAMD" in flags)
    # TensorFlow turns its oneDNN rewrites on by default on CPUs with bf16 units; only the variable turns them off.
    onednn_off = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "").lower() in ("0", "false")
    this_cpus = "bfloat16" if bf16_units and not onednn_off else "float32"
    release = [f"--model_dir={tmp_path}/release", "--task=classifier", "--max_seq_length=16",
               f"--export_dir={tmp_path}/saved_models/tiny"]
    # Through the tool's `main` in this process (the code its process runs after the parse; no process start):
    # the default (float32, portable, whatever this CPU), a precision named and this CPU's form. --noverify on
    # the first and the last: what is checked here is the precision the flags choose (the check as TF Serving
    # loads a version, ~2 s of CPU each, is test_verification's; such exports' served answers are checked by
    # this file's `answers` and test_packed_kernels); the bfloat16 version is verified as the tool does by default.
    cases = (("1", ["--noverify"], "float32"), ("2", ["--precision=bfloat16", "--noskip_padding"], "bfloat16"),
             ("3", ["--optimize_for=this_cpu", "--noverify"], this_cpus))
    for version, flags, expected in cases:
        export_tool.main(release + flags)
        stderr = capsys.readouterr().err
        assert f"computing in {expected} (CPU: " in stderr and "; oneDNN graph rewrites " in stderr
        with open(tmp_path / "saved_models" / "tiny" / version / "assets.extra" / METADATA_FILE) as f:
            metadata = json.load(f)
        assert metadata["precision"] == expected
        # The last line says what the export needs to run.
        assert stderr.strip().splitlines()[-1].endswith(f"/saved_models/tiny/{version}: it needs {metadata['needs']}")
        # Padding is skipped by default (this CPU's form: where no GPU is visible, none in CI).
        assert metadata["skips_padding"] is ("--noskip_padding" not in flags)
    assert metadata_needs_of(tmp_path, "1") == "portable: stock TensorFlow ops, CPU and GPU"
    with pytest.raises(FlagError, match="fp16") as refused:
        export_tool.main(release + ["--precision=fp16"])
    assert "--precision" in str(refused.value)
    assert sorted(os.listdir(tmp_path / "saved_models" / "tiny")) == ["1", "2", "3"]


def metadata_needs_of(tmp_path, version):
    with open(tmp_path / "saved_models" / "tiny" / version / "assets.extra" / METADATA_FILE) as f:
        return json.load(f)["needs"]


def saved_variable_dtypes(saved_model_dir):
    """{floating-point variable of the SavedModel (its name): the dtype its checkpoint holds}."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    reader = tf.train.load_checkpoint(os.path.join(saved_model_dir, "variables", "variables"))
    stored = reader.get_variable_to_dtype_map()
    graph = saved_model.meta_graphs[0].object_graph_def
    dtypes = {}
    for node_id, node in enumerate(graph.nodes):
        if node.WhichOneof("kind") == "variable":
            (key,) = [k for k in stored if k.endswith("/.ATTRIBUTES/VARIABLE_VALUE") and _node_of(graph, k) == node_id]
            if stored[key].is_floating:
                dtypes[node.variable.name] = stored[key].name
    return dtypes


def _node_of(graph, checkpoint_key):
    """The object-graph node that a checkpoint key's path of attribute names leads to from the root."""
    node = 0
    for part in checkpoint_key.split("/.ATTRIBUTES/")[0].split("/"):
        node = next(child.node_id for child in graph.nodes[node].children if child.local_name == part)
    return node


def weight_casts_per_function(saved_model_dir):
    """{function name: how many variables it reads and converts to bfloat16} over the SavedModel,
    the LayerNorms' scale and offset left out (`helpers.weight_casts_but_layer_norms`)."""
    counts = {}
    for function in saved_graph_def(saved_model_dir).library.function:
        reads = {node.name for node in function.node_def if node.op == "ReadVariableOp"}
        counts[function.signature.name] = sum(
            node.op == "Cast" and node.attr["DstT"].type == tf.bfloat16.as_datatype_enum
            and node.input[0].split(":")[0] in reads and "LayerNorm" not in node.name for node in function.node_def)
    return counts


def test_bfloat16_export_holds_its_weights_rounded_once(exports, model, tmp_path, bert_vocab_file):
    # A mixed_bfloat16 layer rounds its float32 weights to bfloat16 each time
    # it reads them; the export holds them rounded instead: every weight but
    # the LayerNorms' is stored as bfloat16 (half the bytes), and the
    # float32 export holds no bfloat16. Whether the Dense kernels are
    # variables or constants of the graph (one copy: skip_padding runs one graph).
    from keras_bert_impl.inference.constant_kernels import dense_kernels

    weights = {v.path for v in model.weights if v.dtype == "float32"}
    layer_norm = {path for path in weights if "LayerNorm" in path}
    assert len(layer_norm) == 2 * (2 * model.bert_config.num_hidden_layers + 1)  # gamma, beta; 2 per layer + embeddings
    kernels = len(dense_kernels(model))
    said = []
    exports = dict(exports, bfloat16_constants=export_saved_model(
        model, "classifier", bert_vocab_file, tmp_path / "constants",
        ExportOptions(max_seq_length=SEQ, precision="bfloat16", constant_kernels=True), log=said.append))
    assert said[-1] == ONLINE_THREADS_HINT  # a bfloat16 export says how to serve it online
    for name, path in exports.items():
        with open(os.path.join(path, "assets.extra", METADATA_FILE)) as f:
            metadata = json.load(f)
        # By default (portable) plain variables; graph constants where asked for.
        constants = metadata["kernels"] == "graph constants"
        assert constants == (name == "bfloat16_constants") and metadata["kernels"] in ("variables", "graph constants")
        stored = saved_variable_dtypes(path)
        held = kernels if constants else 0  # kernels held as constants are not saved as variables too
        if name == "float32":
            assert sorted(stored.values()) == ["float32"] * len(weights)
            assert matrix_constant_dtypes(path) == {}
            continue
        float32 = sorted(variable for variable, dtype in stored.items() if dtype == "float32")
        assert len(float32) == len(layer_norm) and all("LayerNorm/" in variable for variable in float32)
        assert len(stored) == len(weights) - held
        assert matrix_constant_dtypes(path) == ({"bfloat16": kernels} if constants else {})
        # Under mixed_bfloat16, each of those is read and converted on every
        # call; no function of the export converts a weight.
        assert set(weight_casts_per_function(path).values()) == {0}
        assert metadata["weights_dtype"] == "bfloat16 (LayerNorm float32)"
    assert weight_casts_mixed(model) >= len(weights) - len(layer_norm)


def matrix_constant_dtypes(saved_model_dir):
    """{dtype: count} of the two-dimensional floating-point constants in a SavedModel's functions."""
    graph = saved_graph_def(saved_model_dir)
    counts = {}
    for node in (node for function in graph.library.function for node in function.node_def):
        dtype = tf.dtypes.as_dtype(node.attr["dtype"].type) if node.op == "Const" else None
        if dtype is not None and dtype.is_floating and len(node.attr["value"].tensor.tensor_shape.dim) == 2:
            counts[dtype.name] = counts.get(dtype.name, 0) + 1
    return counts


def weight_casts_mixed(model):
    """Variables read and converted to bfloat16 by the forward graph of `model` under mixed_bfloat16."""
    mixed = BertClassifier(model.bert_config, num_labels=3, dtype="mixed_bfloat16")
    mixed.set_weights(model.get_weights())
    inputs = {name: tf.TensorSpec([None, SEQ], tf.int32) for name in ("input_ids", "input_mask", "segment_ids")}
    return len(weight_casts(tf.function(lambda x: mixed(x, training=False)).get_concrete_function(inputs)))


def test_bfloat16_export_answers_as_the_mixed_bfloat16_model(exports, model):
    # Rounding the weights once instead of on every call changes no value:
    # the export's logits are those of the model built with mixed_bfloat16.
    from keras_bert_impl.serving.export import in_precision
    from keras_bert_impl.tasks.registry import get_task

    mixed = BertClassifier(model.bert_config, num_labels=3, dtype="mixed_bfloat16")
    mixed.set_weights(model.get_weights())
    held = in_precision(model, get_task("classifier"), "bfloat16")
    assert {v.dtype for v in held.weights} == {"float32", "bfloat16"}
    rng = np.random.default_rng(0)
    inputs = {"input_ids": rng.integers(1000, 30000, (4, SEQ)).astype("int32"),
              "input_mask": (np.arange(SEQ) < np.array([[SEQ], [9], [17], [3]])).astype("int32"),
              "segment_ids": np.zeros((4, SEQ), "int32")}
    expected = tf.function(lambda x: mixed(x, training=False))(inputs)
    got = tf.function(lambda x: held(x, training=False))(inputs)
    np.testing.assert_array_equal(np.asarray(got, "float32"), np.asarray(expected, "float32"))
    # A model already built that way is exported as it is.
    assert in_precision(held, get_task("classifier"), "bfloat16") is held
    assert in_precision(mixed, get_task("classifier"), "bfloat16") is not mixed


@pytest.mark.parametrize("task", ["classifier", "regression", "span_qa", "token_tagging", "embeddings", "fill_mask"])
def test_every_exported_task_rebuilt_in_bfloat16_answers_as_mixed_bfloat16(task):
    # Whatever its head (tied MLM output, per-token tagger, span logits), a
    # task model rebuilt with its weights held in bfloat16 computes the very
    # values of the same model under mixed_bfloat16. (One layer: the heads are what differ between the tasks;
    # the encoder's layers are rebuilt alike, and each model traces a layer less.)
    from keras_bert_impl.serving.export import in_precision
    from keras_bert_impl.tasks.registry import get_task

    spec = get_task(task)
    config = tiny_config(vocab_size=99, max_position_embeddings=32, num_hidden_layers=1)
    source = spec.build_model(config, 3)
    randomize(source, seed=5, scale=0.2)
    mixed = spec.build_model(config, 3, dtype="mixed_bfloat16")
    mixed.set_weights(source.get_weights())
    held = in_precision(source, spec, "bfloat16")
    assert "bfloat16" in {v.dtype for v in held.weights}
    rng = np.random.default_rng(1)
    every_input = {"input_ids": rng.integers(5, 99, (2, 16)).astype("int32"),
                   "input_mask": (np.arange(16) < np.array([[16], [7]])).astype("int32"),
                   "segment_ids": (np.arange(16) >= np.array([[9], [4]])).astype("int32"),
                   "masked_lm_positions": np.array([[1, 3], [2, 5]], "int32")}
    inputs = {tensor.name: every_input[tensor.name] for tensor in tf.nest.flatten(held.inputs)}
    expected = tf.nest.flatten(tf.function(lambda x: mixed(x, training=False))(inputs))
    got = tf.nest.flatten(tf.function(lambda x: held(x, training=False))(inputs))
    assert len(got) == len(expected) >= 1
    for value, reference in zip(got, expected):
        np.testing.assert_array_equal(np.asarray(value, "float32"), np.asarray(reference, "float32"))
