"""Dense kernels as graph constants: what oneDNN packs once (AMX tiles where the CPU has them).

Checked by behaviour: a function whose kernels are constants ignores later
assignments to the kernel variables but follows its biases (still variables);
its outputs are the variable graph's within float32 (or bfloat16) rounding;
an export holds the kernels in its graph, not among its variables, says so in
its metadata, and refuses constants that would not fit a SavedModel.
"""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl import hardware
from keras_bert_impl.errors import TrainingEnvironmentError
from keras_bert_impl.inference import plan
from keras_bert_impl.inference.constant_kernels import ConstantKernels, dense_kernel_bytes, dense_kernels
from keras_bert_impl.inference.padding_free import make_padding_free_function
from keras_bert_impl.models.bert_model import BertModel
from keras_bert_impl.models.classifier import BertClassifier
from keras_bert_impl.models.distillation_losses import DistillationTrainer
from keras_bert_impl.models.pretraining import BertPretrainingModel
from keras_bert_impl.serving.export import (
    METADATA_FILE, ONLINE_THREADS_HINT, ExportError, ExportOptions, export_saved_model,
)
from tests.helpers import random_inputs, randomize, tiny_config
from tests.test_serving import FILL_MASK_TEXT, PAIRS, SENTENCES, probe_many
from tests.test_serving_precision import BF16_ATOL

SEQ = 24


def masked(outputs, inputs):
    """`sequence_output` as float32 with padded positions zeroed (they are not compared)."""
    mask = tf.cast(inputs["input_mask"], tf.float32)[..., None]
    return tf.cast(outputs["sequence_output"], tf.float32).numpy() * mask.numpy()


@pytest.fixture()
def bert():
    config = tiny_config()
    model = BertModel(config)
    randomize(model, seed=5, scale=0.2)
    return model


def test_the_snapshot_holds_every_dense_kernel_and_nothing_else(bert):
    kernels = ConstantKernels(bert)
    layers = bert.bert_config.num_hidden_layers
    # Per layer query, key, value, attention output, intermediate, output; then the pooler.
    assert len(kernels) == 6 * layers + 1
    assert all(variable.path.endswith("/kernel") and len(variable.shape) == 2 for variable in dense_kernels(bert))
    assert kernels.nbytes == sum(int(np.prod(v.shape)) * 4 for v in dense_kernels(bert))
    assert dense_kernel_bytes(bert) == kernels.nbytes  # what an export weighs before it takes a snapshot
    assert not kernels.holds(bert.word_embedding.embeddings)
    with pytest.raises(RuntimeError, match="for tracing a tf.function"):
        kernels.scope()


@pytest.mark.parametrize("padding_free", [False, True])
def test_kernels_are_read_once_and_biases_on_every_call(bert, padding_free):
    inputs = random_inputs(bert.bert_config, batch=3, seq=10)
    kernels = ConstantKernels(bert)
    if padding_free:
        forward = make_padding_free_function(bert, jit_compile=False, kernels=kernels)
    else:
        @tf.function(autograph=False)
        def forward(inputs):
            with kernels.scope():
                return bert(inputs, training=False)
    before = masked(bert(inputs), inputs)
    np.testing.assert_allclose(masked(forward(inputs), inputs), before, atol=1e-5)

    intermediate = bert.encoder.blocks[0].intermediate
    kernel = intermediate.kernel.numpy()
    intermediate.kernel.assign(kernel * 3.0)
    changed = masked(bert(inputs), inputs)
    assert np.abs(changed - before).max() > 1e-2  # the variable graph follows the new kernel
    np.testing.assert_allclose(masked(forward(inputs), inputs), before, atol=1e-5)  # the constant one does not
    intermediate.kernel.assign(kernel)

    intermediate.bias.assign(intermediate.bias.numpy() + 0.5)
    moved = masked(bert(inputs), inputs)
    assert np.abs(moved - before).max() > 1e-2
    np.testing.assert_allclose(masked(forward(inputs), inputs), moved, atol=1e-5)  # biases stay variables


# bfloat16: another kernel (blocked, packed once) sums in another order, and
# each of the few roundings on the way moves a value by up to one epsilon
# (2**-7) of itself: four epsilons relative, on top of the absolute bound.
@pytest.mark.parametrize("dtype, atol, rtol", [("float32", 1e-5, 0), ("mixed_bfloat16", BF16_ATOL, 4 * 2**-7)])
@pytest.mark.parametrize("padding_free", [False, True])
def test_frozen_inference_functions_compute_the_models_outputs(dtype, atol, rtol, padding_free):
    model = BertModel(tiny_config(), dtype=dtype)
    randomize(model, seed=7, scale=0.2)
    inputs = random_inputs(model.bert_config, batch=4, seq=12)
    forward = model.make_inference_function(jit_compile=False, padding_free=padding_free, freeze_kernels=True)
    expected = masked(model(inputs), inputs)
    np.testing.assert_allclose(masked(forward(inputs), inputs), expected, atol=atol, rtol=rtol)
    # Another shape is traced again, with its own constants; the model's later changes stay out.
    longer = random_inputs(model.bert_config, batch=2, seq=16, seed=3)
    expected_longer = masked(model(longer), longer)
    for variable in dense_kernels(model):
        variable.assign(tf.zeros_like(variable))
    np.testing.assert_allclose(masked(forward(longer), longer), expected_longer, atol=atol, rtol=rtol)


def kernel_consts(saved_model_dir):
    """The two-dimensional floating-point constants in a SavedModel's graph functions, by shape."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    graph = saved_model.meta_graphs[0].graph_def
    shapes = []
    for node in [node for function in graph.library.function for node in function.node_def] + list(graph.node):
        if node.op == "Const" and node.attr["dtype"].type in (tf.float32.as_datatype_enum,
                                                               tf.bfloat16.as_datatype_enum):
            dims = tuple(d.size for d in node.attr["value"].tensor.tensor_shape.dim)
            if len(dims) == 2:
                shapes.append(dims)
    return sorted(shapes)


def saved_variables(saved_model_dir):
    """The names of the variables a SavedModel's checkpoint holds."""
    reader = tf.train.load_checkpoint(os.path.join(saved_model_dir, "variables", "variables"))
    return sorted(name for name in reader.get_variable_to_shape_map() if "VARIABLE_VALUE" in name)


@pytest.fixture(scope="module")
def classifier(tiny_classifier):
    """The tiny classifier of conftest (seed 3), shared with test_serving_precision and test_int8."""
    return tiny_classifier


@pytest.fixture(scope="module")
def kernel_exports(tmp_path_factory, bert_vocab_file, classifier, tiny_classifier_float32_export):
    """`classifier` exported with its kernels as graph constants and as variables (conftest's float32 export,
    shared with other files); what the latter logged."""
    constants = export_saved_model(
        classifier, "classifier", bert_vocab_file, tmp_path_factory.mktemp("kernels") / "constants",
        ExportOptions(max_seq_length=SEQ, precision="float32", constant_kernels=True),
    )
    variables, said = tiny_classifier_float32_export
    return constants, variables, list(said)


def test_export_holds_its_kernels_as_constants_and_answers_the_same(kernel_exports, classifier, served):
    constants, variables, said = kernel_exports
    # An export of variable kernels (whatever machine writes it) says how a server on oneDNN packs them once.
    assert any(f"{hardware.FROZEN_WEIGHTS_ENV}=1 packs them once" in line for line in said)
    # One intra-op thread per request, each request's ops in its own thread, pays for float32 exports too.
    assert said[-1] == ONLINE_THREADS_HINT
    metadata = {}
    for name, path in (("constants", constants), ("variables", variables)):
        with open(os.path.join(path, "assets.extra", METADATA_FILE)) as f:
            metadata[name] = json.load(f)["kernels"]
    assert metadata == {"constants": "graph constants", "variables": "variables"}

    dense_shapes = sorted(tuple(v.shape) for v in dense_kernels(classifier))
    # One copy, shared by every signature (skip_padding runs one graph for padded and unpadded batches).
    assert kernel_consts(constants) == dense_shapes
    assert kernel_consts(variables) == []
    # The kernels are saved once, as constants: not as variables too.
    assert len(saved_variables(variables)) - len(saved_variables(constants)) == len(dense_shapes)

    answers = served["plain"]
    assert len(answers["constants"]) == len(VARIABLE_KERNEL_TEXTS["classifier"])
    for held, read in zip(answers["constants"], answers["variables"], strict=True):
        np.testing.assert_allclose(held["probabilities"], read["probabilities"], atol=1e-5)


def test_constants_past_the_savedmodel_budget_are_refused_or_left_out(tmp_path, bert_vocab_file, monkeypatch):
    # One layer: what is checked is the export's choice against the budget its kernels' bytes set, whatever the
    # depth (each of its three exports traces a layer less).
    classifier = BertClassifier(tiny_config(vocab_size=30522, max_position_embeddings=64, num_hidden_layers=1),
                                num_labels=3)
    budget = ConstantKernels(classifier).nbytes - 1  # one copy does not fit
    monkeypatch.setattr(plan, "MAX_CONSTANT_BYTES", budget)
    with pytest.raises(ExportError, match="kernels as constants would take .* MiB of the SavedModel's graph"):
        export_saved_model(
            classifier, "classifier", bert_vocab_file, tmp_path / "m",
            ExportOptions(max_seq_length=SEQ, precision="float32", constant_kernels=True),
        )
    assert not any((tmp_path / "m").glob("[0-9]*"))
    # This CPU's form where the kernels are not packed (`inference.packed_kernels`): variables past the budget,
    # constants where the one copy fits, with or without skip_padding.
    kinds = []
    for budget_now, skip_padding in ((budget, None), (budget + 1, None), (budget + 1, False)):
        monkeypatch.setattr(plan, "MAX_CONSTANT_BYTES", budget_now)
        path = export_saved_model(
            classifier, "classifier", bert_vocab_file, tmp_path / "m",
            ExportOptions(max_seq_length=SEQ, precision="float32", skip_padding=skip_padding, packed_kernels=False,
                          optimize_for="this_cpu"),
        )
        with open(os.path.join(path, "assets.extra", METADATA_FILE)) as f:
            kinds.append(json.load(f)["kernels"])
    assert kinds == ["variables", "graph constants", "graph constants"]


def _matmul_count(function, inputs):
    graph_def = function.get_concrete_function(inputs).graph.as_graph_def()
    nodes = list(graph_def.node) + [node for f in graph_def.library.function for node in f.node_def]
    return sum(node.op == "MatMul" for node in nodes)


@pytest.mark.parametrize("padding_free", [False, True])
def test_query_key_and_value_are_one_product_where_the_kernels_are_constants(bert, padding_free):
    # With the kernels as constants on oneDNN, each layer's query, key and
    # value are one product on the concatenated kernels (two products fewer
    # a layer), with the same outputs.
    from keras_bert_impl.inference.function import make_inference_function
    from keras_bert_impl.inference.plan import InferencePlan

    inputs = random_inputs(bert.bert_config, batch=3, seq=10, seed=2)
    expected = masked(bert(inputs), inputs)
    counts = {}
    for constants in (False, True):
        forward = make_inference_function(bert, InferencePlan(
            "float32", padding_free=padding_free, held_weights=True, constant_kernels=constants, onednn_forms=True))
        np.testing.assert_allclose(masked(forward(inputs), inputs), expected, atol=1e-5)
        counts[constants] = _matmul_count(forward, inputs)
    assert counts[False] - counts[True] == 2 * bert.bert_config.num_hidden_layers


# TensorFlow's oneDNN products pack their second operand once and keep it
# where this is set in the serving process (`TF_ONEDNN_ASSUME_FROZEN_WEIGHTS`).
FROZEN_WEIGHTS = {hardware.FROZEN_WEIGHTS_ENV: "1"}


def float_leaves(value):
    """Every float in a JSON answer, in order (ints and strings follow from them)."""
    if isinstance(value, dict):
        return [leaf for key in sorted(value) for leaf in float_leaves(value[key])]
    if isinstance(value, list):
        return [leaf for item in value for leaf in float_leaves(item)]
    return [value] if isinstance(value, float) else []


# The classifier's requests go to both `kernel_exports` (constants and variables): texts of two batch sizes through
# one signature, then the text-pair signature.
VARIABLE_KERNEL_TEXTS = {
    "classifier": [{"signature": "serving_default", "inputs": {"text": SENTENCES[:2]}},
                   {"signature": "serving_default", "inputs": {"text": SENTENCES[2:]}},
                   {"signature": "serve_text_pair", "inputs": {"text": SENTENCES, "text_b": PAIRS}}],
    "fill_mask": [{"signature": "serving_default", "inputs": {"text": [FILL_MASK_TEXT]}},
                  {"signature": "serving_default", "inputs": {"text": ["Rome is the [MASK] of Italy."]}}],
}


class Product(tf.Module):
    """A product-plus-bias whose second operand is a request's input (not a weight)."""

    def __init__(self):
        # A bias of zeros would be folded away, and with it the fused product.
        self.bias = tf.Variable(tf.ones([384]))

    @tf.function(input_signature=[tf.TensorSpec([None, 384], tf.float32), tf.TensorSpec([384, 384], tf.float32)])
    def __call__(self, x, y):
        return {"product": tf.nn.bias_add(tf.matmul(x, y), self.bias)}


def product_requests():
    """(x, the three second operands, the requests of x times each), a BERT-sized product."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((20, 384)).astype("float32")
    operands = [rng.standard_normal((384, 384)).astype("float32") for _ in range(3)]
    return x, operands, [{"signature": "serving_default", "inputs": {"x": x.tolist(), "y": y.tolist()}}
                         for y in operands]


@pytest.fixture(scope="module")
def served(tmp_path_factory, bert_vocab_file, kernel_exports):
    """The answers of this module's exports under TF Serving's loader: {"plain": ..., "frozen": ...}, each from
    one process (without and with `FROZEN_WEIGHTS`, which a process reads once): `kernel_exports`
    ("constants", plain only; "variables", the classifier export of variable kernels, in both), a fill-mask
    export of variable kernels ("fill_mask"), and `Product` ("product")."""
    root = tmp_path_factory.mktemp("served")
    constants, variables, _ = kernel_exports
    # One layer: its answers with and without the setting are compared, whatever its depth.
    fill_mask = BertPretrainingModel(tiny_config(vocab_size=30522, max_position_embeddings=64, num_hidden_layers=1))
    randomize(fill_mask, seed=1, scale=0.2)
    jobs = {
        "variables": (variables, VARIABLE_KERNEL_TEXTS["classifier"]),
        "fill_mask": (export_saved_model(fill_mask, "fill_mask", bert_vocab_file, root / "fill_mask", ExportOptions(
            max_seq_length=SEQ, precision="float32", constant_kernels=False, packed_kernels=False)),
            VARIABLE_KERNEL_TEXTS["fill_mask"]),
    }
    module = Product()
    tf.saved_model.save(module, str(root / "product"), signatures={"serving_default": module.__call__})
    jobs["product"] = (root / "product", product_requests()[2])
    plain = probe_many({"constants": (constants, VARIABLE_KERNEL_TEXTS["classifier"]), **jobs})
    return {"plain": plain, "frozen": probe_many(jobs, **FROZEN_WEIGHTS)}


def test_exports_of_variable_kernels_answer_the_same_where_the_server_assumes_frozen_weights(served):
    # docs/BENCHMARKS.md ("Memory that holds"): served with the setting, an
    # export of variable kernels runs as fast as one of constant kernels at a
    # fraction of the memory. That holds only while every product's second
    # operand is a weight: each export answers requests of different texts,
    # after its first, as it does without the setting. The classifier's
    # products are the Dense layers of every task's head; fill-mask's output
    # product reads the word embeddings (tied), transposed.
    # (Exported, and served in one process per setting with the other exports here, by `served`.)
    texts = VARIABLE_KERNEL_TEXTS
    plain, frozen = served["plain"], served["frozen"]
    for task, key in (("classifier", "variables"), ("fill_mask", "fill_mask")):
        assert len(frozen[key]) == len(texts[task])
        for answer, expected in zip(frozen[key], plain[key]):
            assert "error" not in expected and float_leaves(expected)
            np.testing.assert_allclose(float_leaves(answer), float_leaves(expected), atol=1e-5)


@pytest.mark.skipif(not plan.Machine().onednn_runs_graphs, reason="the setting is read by oneDNN's products only")
def test_assumed_frozen_weights_keep_the_first_operand_of_a_product_that_is_not_a_weight(served):
    # Why the setting is the server's to choose for the models it serves: a
    # product-plus-bias whose second operand is a request's input answers
    # every later request with the first one's operand. (`Product`, saved and
    # served in one process per setting by `served`, its own session there.)
    x, operands, requests = product_requests()
    for setting, stale in (("plain", False), ("frozen", True)):
        answers = served[setting]["product"]
        assert len(answers) == len(requests)
        errors = [np.abs(np.array(answer["product"]) - (x @ y + 1)).max() for answer, y in zip(answers, operands)]
        assert errors[0] < 1e-4
        assert all(error > 1.0 for error in errors[1:]) if stale else max(errors) < 1e-4


@pytest.mark.parametrize("value, on", [("1", True), ("True", True), (" true ", True), ("0", False), ("false", False),
                                       ("", False)])
def test_the_serving_only_setting_is_read_as_tensorflow_reads_it(monkeypatch, value, on):
    # TensorFlow's ReadBoolFromEnvVar: 1 / true (any case) on, 0 / false off; oneDNN's products only.
    environ = {hardware.FROZEN_WEIGHTS_ENV: value}
    monkeypatch.setattr(hardware, "onednn_graph_rewrites", lambda: True)
    assert hardware.onednn_assumes_frozen_weights(environ) is on
    monkeypatch.setattr(hardware, "onednn_graph_rewrites", lambda: False)
    assert hardware.onednn_assumes_frozen_weights(environ) is False


def test_training_is_refused_where_the_process_assumes_frozen_weights(monkeypatch):
    # Trained with the setting, each product keeps the first step's weights
    # (the test above shows it for any operand): `fit` refuses before a step,
    # for our models and the distillation trainer, and leaves the weights.
    @tf.function
    def fused_product(a, b):
        return tf.nn.bias_add(tf.matmul(a, b), tf.zeros([2]))

    # TensorFlow reads the variable once per process, at its first oneDNN
    # product: read it now, unset, so that no later test here trains with it.
    fused_product(tf.ones([1, 2]), tf.ones([2, 2]))
    config = tiny_config(num_hidden_layers=1)  # the refusal is before any step, whatever the depth
    classifier = BertClassifier(config, num_labels=2)
    classifier.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    inputs, labels = random_inputs(config, batch=2, seq=6), np.array([0, 1])
    student, teacher = BertClassifier(config, num_labels=2), BertClassifier(config, num_labels=2)
    trainer = DistillationTrainer(
        keras.Model(student.inputs, {"soft": student.outputs[0], "hidden": []}),
        keras.Model(teacher.inputs, {"soft": teacher.outputs[0], "hidden": []}), {"soft": 1.0})
    trainer.compile(optimizer="sgd")
    monkeypatch.setenv(hardware.FROZEN_WEIGHTS_ENV, "1")
    monkeypatch.setattr(hardware, "onednn_graph_rewrites", lambda: True)
    for model, targets in ((classifier, labels), (trainer, {})):
        before = [weight.numpy() for weight in model.trainable_weights]
        with pytest.raises(TrainingEnvironmentError, match=f"{hardware.FROZEN_WEIGHTS_ENV} is set .* serving process"):
            model.fit(inputs, targets, batch_size=2, epochs=1, verbose=0)
        assert all(np.array_equal(weight.numpy(), value) for weight, value in zip(model.trainable_weights, before))
    monkeypatch.setenv(hardware.FROZEN_WEIGHTS_ENV, "0")
    classifier.fit(inputs, labels, batch_size=2, epochs=1, verbose=0)
