"""Dense kernels kept as variables that oneDNN's products pack once (`inference.packed_kernels`).

References: NumPy's products and activations; the Keras model's own outputs;
oneDNN's own account of what it ran (`ONEDNN_VERBOSE`): packed once (a
reorder of each kernel on the first request only), `brgemm` after.
"""

import dataclasses
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from scipy.special import erf

from keras_bert_impl.inference import plan
from keras_bert_impl.inference.encoder_layers import self_attention_layers
from keras_bert_impl.inference.packed_kernels import PackedKernels, packed_product
from keras_bert_impl.models.classifier import BertClassifier
from keras_bert_impl.models.pretraining import BertPretrainingModel
from keras_bert_impl.serving.export import METADATA_FILE, ExportError, ExportOptions, export_saved_model
from tests.helpers import random_inputs, randomize, tiny_config
from tests.test_serving import FILL_MASK_TEXT, REPO, SENTENCES, probe_many

pytestmark = pytest.mark.skipif(not plan.Machine().onednn_runs_graphs,
                                reason="oneDNN's products (stock x86 TensorFlow with its rewrites on)")

SEQ = 24
ACTIVATIONS = {
    None: lambda y: y,
    "Tanh": np.tanh,
    "Relu": lambda y: np.maximum(y, 0),
    "GeluExact": lambda y: 0.5 * y * (1 + erf(y / np.sqrt(2))),
    "GeluApproximate": lambda y: 0.5 * y * (1 + np.tanh(np.sqrt(2 / np.pi) * (y + 0.044715 * y ** 3))),
}


@pytest.mark.parametrize("dtype, atol", [("float32", 2e-5), ("bfloat16", 0.06)])
@pytest.mark.parametrize("activation", list(ACTIVATIONS))
def test_the_product_is_x_times_its_kernel_plus_bias_through_the_activation(dtype, atol, activation):
    rng = np.random.default_rng(0)
    x, kernel, bias = (rng.normal(0, 1, shape).astype("float32") for shape in ((20, 48), (48, 32), (32,)))
    kernel /= 4
    variable = tf.Variable(tf.cast(kernel, dtype))
    product = tf.function(lambda x: packed_product(x, variable.value(), tf.cast(bias, dtype), activation))
    # The reference from the operands as the product sees them (rounded to bfloat16 there).
    as_seen = [tf.cast(tf.cast(value, dtype), "float64").numpy() for value in (x, kernel, bias)]
    expected = ACTIVATIONS[activation](as_seen[0] @ as_seen[1] + as_seen[2])
    for rows in (20, 7, 20):  # another shape, then the first again: the kernel packed once serves them all
        np.testing.assert_allclose(tf.cast(product(tf.cast(x[:rows], dtype)), "float64"), expected[:rows],
                                   atol=atol, rtol=atol)
    eager = packed_product(tf.cast(x, dtype), variable, tf.cast(bias, dtype), activation)
    np.testing.assert_allclose(tf.cast(eager, "float64"), expected, atol=atol, rtol=atol)
    with pytest.raises(ValueError, match="activation must be None or one of"):
        packed_product(x, kernel, bias, "Sigmoid")


def _ops(function, inputs):
    return [op.type for op in function.get_concrete_function(inputs).graph.get_operations()]


@pytest.mark.parametrize("model_class, hidden_act", [(BertClassifier, "gelu"), (BertPretrainingModel, "gelu_exact")])
def test_every_dense_layer_computes_one_packed_product_with_the_models_outputs(model_class, hidden_act):
    config = tiny_config(hidden_act=hidden_act)
    model = model_class(config, num_labels=3) if model_class is BertClassifier else model_class(config)
    randomize(model, seed=3, scale=0.2)
    inputs = random_inputs(config, batch=3, seq=10)
    if model_class is BertPretrainingModel:  # the last layer computes its queries at these positions only
        inputs["masked_lm_positions"] = np.array([[1, 4], [2, 3], [5, 0]], "int32")
    kernels = PackedKernels(model)
    # Query, key and value of each layer as one product, on variables of their own in place of the three.
    replaced = [layer for attention in self_attention_layers(model)
                for layer in (attention.query, attention.key, attention.value)]
    assert len(kernels.variables) == 2 * config.num_hidden_layers
    assert all(kernels.holds(layer.kernel) and kernels.holds(layer.bias) for layer in replaced)
    assert sum(kernels.holds(variable) for variable in model.weights) == 6 * config.num_hidden_layers
    assert kernels.nbytes == 0

    @tf.function
    def forward(inputs):
        with kernels.scope():
            return model(inputs, training=False)

    expected, packed = model(inputs, training=False), forward(inputs)
    if not isinstance(expected, dict):
        expected, packed = {"logits": expected}, {"logits": packed}
    for name, value in packed.items():
        np.testing.assert_allclose(value, expected[name], atol=2e-5, err_msg=name)
    ops = _ops(forward, inputs)
    # Per layer: query/key/value, attention output, intermediate, output; then the pooler, and the MLM head's
    # transform (the original's output layers are products of their own, `OutputProjection`).
    heads = 1 if model_class is BertClassifier else 2
    assert ops.count("_MklNativeFusedMatMul") == 4 * config.num_hidden_layers + heads
    with pytest.raises(RuntimeError, match="for tracing a tf.function"):
        with kernels.scope():
            pass


def test_a_kernel_in_another_dtype_than_its_products_is_refused():
    model = BertClassifier(tiny_config(), num_labels=2, dtype="mixed_bfloat16")  # float32 kernels, bf16 products
    with pytest.raises(ValueError, match="its kernel is float32, its products bfloat16"):
        PackedKernels(model)


# The tool's `predict` of each job (`test_serving.probe_many`'s work), then three requests to one export in a
# session of its own, each after a line "REQUEST": with `ONEDNN_VERBOSE` set, oneDNN writes a line to stdout for
# each primitive it runs. The answers follow a line "ANSWERS". (TF Text's kernels are loaded by the tool's first
# `predict`, without its Python package, which would load Keras.)
PROBE_MANY_AND_VERBOSE = r"""
import importlib.util, json, sys
import numpy as np, tensorflow as tf
spec = importlib.util.spec_from_file_location("predict_saved_model", sys.argv[1])
tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tool)
answers = [tool._finite_json(tool.predict(path, requests, **threads))
           for path, requests, threads in json.load(sys.stdin)]
with tf.compat.v1.Session(graph=tf.Graph()) as session:
    signature = tf.compat.v1.saved_model.loader.load(session, ["serve"], sys.argv[2]).signature_def["serve_ids"]
    feeds = {name: tensor.name for name, tensor in signature.inputs.items()}
    fetches = {name: tensor.name for name, tensor in signature.outputs.items()}
    for length in (9, 14, 6):
        ids = np.full((2, length), 7, np.int32)
        mask = np.ones_like(ids)
        mask[1, length // 2:] = 0
        print("REQUEST", flush=True)
        session.run(fetches, {feeds["input_ids"]: ids, feeds["input_mask"]: mask, feeds["segment_ids"]: 0 * ids})
print("ANSWERS", flush=True)
print(json.dumps(answers, allow_nan=False), flush=True)
"""


def probe_many_and_onednn_primitives(jobs, saved_model_dir):
    """`probe_many(jobs)` and oneDNN's account of three requests to `saved_model_dir`, from one process.

    Returns:
        `(answers, executed)`: `probe_many`'s {key: results}, and for each of the three requests (to `serve_ids`,
        in a session of their own after the jobs) the oneDNN primitives it ran (`ONEDNN_VERBOSE` exec lines,
        split at commas).
    """
    result = subprocess.run(
        [sys.executable, "-c", PROBE_MANY_AND_VERBOSE, os.path.join(REPO, "tools", "predict_saved_model.py"),
         str(saved_model_dir)],
        input=json.dumps([(str(job[0]), job[1], job[2] if len(job) > 2 else {}) for job in jobs.values()]),
        capture_output=True, text=True, timeout=600, cwd="/",
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", ONEDNN_VERBOSE="1"))
    assert result.returncode == 0, result.stderr[-3000:]
    verbose, answers = result.stdout.split("ANSWERS\n")
    payloads = json.loads(answers)
    assert len(payloads) == len(jobs)
    assert all(payload["blocked_modules_loaded"] == [] for payload in payloads)
    requests_seen = verbose.split("REQUEST\n")[1:]
    assert len(requests_seen) == 3
    executed = [[line.split(",") for line in text.splitlines() if ",exec," in line] for text in requests_seen]
    return {key: payload["results"] for key, payload in zip(jobs, payloads)}, executed


def test_this_cpus_export_here_packs_variable_kernels_once_and_answers_as_constants_do(tmp_path, bert_vocab_file):
    # On this machine (oneDNN runs the graphs) this CPU's export (`optimize_for="this_cpu"`) holds its kernels as
    # variables that oneDNN's products pack once: it answers as the export of constant kernels does, under TF
    # Serving's loader, with TensorFlow's oneDNN rewrites on or off (the op is oneDNN's own kernel either way).
    # Two layers where the kernels are counted (the classifier's: every layer's packed once); one for fill-mask,
    # whose answers are compared only (a layer less to trace in each of its two exports and loads).
    config = tiny_config(vocab_size=30522, max_position_embeddings=64)
    models = {"classifier": BertClassifier(config, num_labels=3),
              "fill_mask": BertPretrainingModel(dataclasses.replace(config, num_hidden_layers=1))}
    requests = {"classifier": [{"signature": "serving_default", "inputs": {"text": SENTENCES}}],
                "fill_mask": [{"signature": "serving_default", "inputs": {"text": [FILL_MASK_TEXT]}}]}
    jobs = {}
    for seed, (task, model) in enumerate(models.items()):
        randomize(model, seed=seed, scale=0.2)
        for kind, choice in (("packed", None), ("constants", True)):
            path = pathlib.Path(export_saved_model(model, task, bert_vocab_file, tmp_path / kind / task, ExportOptions(
                max_seq_length=SEQ, precision="float32", constant_kernels=choice, optimize_for="this_cpu")))
            kernels = json.loads((path / "assets.extra" / METADATA_FILE).read_text())["kernels"]
            assert kernels.startswith("variables, packed once") if kind == "packed" else kernels == "graph constants"
            jobs[(task, kind)] = (path, requests[task])
    saved = tf.train.load_checkpoint(str(jobs[("classifier", "packed")][0] / "variables" / "variables"))
    shapes = [tuple(shape) for name, shape in saved.get_variable_to_shape_map().items() if "VARIABLE_VALUE" in name]
    hidden = config.hidden_size
    # Each layer's query, key and value kernels and biases saved once, side by side; the [H, H] kernels left
    # are each layer's attention output and the pooler.
    assert shapes.count((hidden, 3 * hidden)) == shapes.count((3 * hidden,)) == config.num_hidden_layers
    assert shapes.count((hidden, hidden)) == config.num_hidden_layers + 1
    # TensorFlow's oneDNN rewrites on (with oneDNN's account of the packed classifier's requests) and off.
    answers_on, executed = probe_many_and_onednn_primitives(jobs, jobs[("classifier", "packed")][0])
    for answers in (answers_on, probe_many(jobs, TF_ENABLE_ONEDNN_OPTS="0")):
        for task in models:
            packed, constants = answers[(task, "packed")][0], answers[(task, "constants")][0]
            assert packed.keys() == constants.keys()
            for name, value in packed.items():
                if np.asarray(value).dtype.kind == "f":
                    np.testing.assert_allclose(value, constants[name], atol=1e-6, err_msg=name)
                else:  # ids, token strings, counts: the same
                    assert value == constants[name], name

    # oneDNN's account of three requests: each kernel reordered (packed) on the first, `brgemm` on every one.
    reorders = [sum(fields[5] == "reorder" for fields in lines) for lines in executed]
    # Per layer the query/key/value, attention output, intermediate and output kernels; the pooler's.
    packed_products = 4 * config.num_hidden_layers + 1
    assert reorders == [packed_products, 0, 0]
    for lines in executed:
        assert sum(fields[5] == "inner_product" and fields[6].startswith("brgemm") for fields in lines) == \
            packed_products


def test_kernels_asked_for_both_ways_or_neither_in_int8_are_refused_before_any_work(tmp_path, bert_vocab_file):
    model = BertClassifier(tiny_config(vocab_size=30522, max_position_embeddings=64), num_labels=2)
    for options, message in ((dict(constant_kernels=True, packed_kernels=True), "not both"),
                             (dict(precision="int8", constant_kernels=False, packed_kernels=False),
                              "leave one of them on")):
        with pytest.raises(ExportError, match=message):
            export_saved_model(model, "classifier", bert_vocab_file, tmp_path / "m",
                               ExportOptions(max_seq_length=SEQ, **options))
    assert not (tmp_path / "m").exists()
