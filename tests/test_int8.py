"""int8 exports: the int8 product equals a NumPy emulation of its quantization, an int8 export loads in a process
without our Python and answers close to the float32 export, and bad requests for it are refused in one line."""

import json
import os
from fractions import Fraction

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.errors import BertError
from keras_bert_impl.inference import int8
from keras_bert_impl.serving import int8_gate
from keras_bert_impl.serving.export import (
    METADATA_FILE, ONLINE_THREADS_HINT, ExportError, ExportOptions, export_saved_model,
)
from tests.helpers import X86_ONLY, random_inputs, randomize, run_tool_here, tiny_config, tiny_release_export_tool
from tests.test_serving import SENTENCES, probe
from tests.test_packed_kernels import probe_many_and_onednn_primitives
from tests.test_serving_precision import model, saved_graph_def  # noqa: F401 (`model`: a fixture)
from tools import export_saved_model as export_tool

SEQ = 24
# Requests for the comparison: more and varied texts than SENTENCES, a few real words each.
TEXTS = SENTENCES + [
    "a gripping, beautifully shot film", "the plot makes no sense at all", "I would not watch it again",
    "one of the best performances this year", "dull and far too long", "funny, warm and surprising",
    "the soundtrack is wonderful", "an utter waste of two hours", "quiet, patient and moving",
    "nothing works here", "it left me cold", "smart writing and a great cast",
]

pytestmark = X86_ONLY


def test_kernel_quantization_is_per_output_channel():
    rng = np.random.default_rng(0)
    kernel = rng.normal(size=(64, 5)).astype("float32") * np.array([0.01, 0.1, 1.0, 10.0, 0.0], "float32")
    quantized = int8.quantize_kernel(kernel)
    # Each column's largest |weight| is 127 (the zero column: all 0, scale 1).
    np.testing.assert_array_equal(np.abs(quantized.values).max(axis=0), [127, 127, 127, 127, 0])
    np.testing.assert_allclose(quantized.scales[:4], np.abs(kernel[:, :4]).max(axis=0) / 127, rtol=1e-6)
    # Rounding to nearest: at most half a step from each weight, per column.
    error = np.abs(quantized.values * quantized.scales - kernel)
    assert np.all(error <= quantized.scales / 2 * (1 + 1e-5))
    np.testing.assert_array_equal(quantized.column_sums, quantized.values.astype(np.int64).sum(axis=0))


def gelu_reference(x, approximate):
    """The two GELUs in float64: the original's tanh form and the exact erf form."""
    from scipy.special import erf

    if approximate:
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + erf(x / np.sqrt(2)))


@pytest.mark.parametrize("rows", [37, 300])
@pytest.mark.parametrize("ranges", ["dynamic", "static"])
@pytest.mark.parametrize("activation", [None, "GeluApproximate", "GeluExact"])
def test_int8_product_equals_numpy_emulation(ranges, rows, activation):
    rng = np.random.default_rng(1)
    # The shapes of an attention output and FFN input; skewed activations (as after a GELU).
    x = (rng.normal(size=(rows, 48)) + 0.3 * rng.standard_exponential(size=(rows, 48))).astype("float32")
    kernel = int8.quantize_kernel(rng.normal(0, 0.05, size=(48, 96)).astype("float32"))
    bias = rng.normal(0, 0.1, size=96).astype("float32")
    if ranges == "dynamic":
        lo, hi = min(float(x.min()), 0.0), max(float(x.max()), 0.0) + int8.MIN_RANGE
    else:  # a calibrated range narrower than this batch: the ends are clipped
        lo, hi = -1.5, 2.0

    @tf.function
    def product(x):
        if ranges == "dynamic":
            low, high = int8.dynamic_input_range(x)
            bias_ = tf.constant(bias)
        else:
            low, high, bias_ = lo, hi, bias  # numbers: the shifted bias is one constant
        quantized, step = int8.quantize_input(x, low, high)
        return int8.int8_matmul(quantized, low, step, kernel, bias_, activation)

    got = product(tf.constant(x)).numpy()
    expected = int8.int8_reference(x, lo, hi, kernel, bias)
    if activation:
        expected = gelu_reference(expected, approximate=activation == "GeluApproximate")
    # float32 rounding of sums of 48 terms of order 1e2 (the int32 sum is exact); oneDNN's GELU to ~1e-6.
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)
    # and really quantized: not the float product
    dequantized = x.astype(np.float64) @ (kernel.values * kernel.scales).astype(np.float64) + bias
    assert np.abs(got - (gelu_reference(dequantized, False) if activation else dequantized)).max() > 1e-3


def test_a_requantized_product_gives_the_codes_the_next_layer_would():
    # The intermediate product hands the output product its input quantized over the latter's calibrated range:
    # the codes `quantize_input` gives the float32 output, but for values within float rounding of a half.
    rng = np.random.default_rng(5)
    x = rng.normal(size=(40, 32)).astype("float32")
    kernel = int8.quantize_kernel(rng.normal(0, 0.2, size=(32, 64)).astype("float32"))
    bias = rng.normal(0, 0.1, size=64).astype("float32")
    out_lo, out_hi = -0.17, 2.5  # narrower than the outputs: both ends clipped

    @tf.function
    def both(x):
        u8, step = int8.quantize_input(x, -3.0, 3.0)
        floats = int8.int8_matmul(u8, -3.0, step, kernel, bias, "GeluExact")
        codes = int8.int8_matmul(u8, -3.0, step, kernel, bias, "GeluExact", requantize_range=(out_lo, out_hi))
        return floats, codes, int8.quantize_input(floats, out_lo, out_hi)[0]

    floats, codes, expected = (t.numpy() for t in both(tf.constant(x)))
    codes, expected = codes.view(np.uint8).astype(int), expected.view(np.uint8).astype(int)
    assert codes.dtype != np.float32 and codes.min() == 0 and codes.max() == 255  # clipped at both ends
    scaled = (floats - np.float32(out_lo)) * (255 / (out_hi - out_lo))
    near_half = np.abs(scaled - np.floor(scaled) - 0.5) < 1e-3
    np.testing.assert_array_equal(codes[~near_half], expected[~near_half])
    assert np.abs(codes - expected).max() <= 1 and near_half.mean() < 0.01


def test_one_product_of_concatenated_kernels_is_the_products_side_by_side():
    # Per-channel scales and sums: query, key and value as one int8 product give each product exactly.
    rng = np.random.default_rng(3)
    x = rng.normal(size=(9, 16)).astype("float32")
    floats = [rng.normal(0, 0.1, size=(16, 8)).astype("float32") for _ in range(3)]
    kernels = [int8.quantize_kernel(kernel) for kernel in floats]
    biases = [rng.normal(0, 0.1, size=8).astype("float32") for _ in range(3)]
    fused = int8.concatenated(kernels)
    whole = int8.quantize_kernel(np.concatenate(floats, axis=1))  # the concatenation quantized as one kernel
    for field in ("values", "scales", "column_sums"):
        np.testing.assert_array_equal(getattr(fused, field), getattr(whole, field))
    lo, hi = float(x.min()), float(x.max())
    u8, step = int8.quantize_input(tf.constant(x), lo, hi)
    one = int8.int8_matmul(u8, lo, step, fused, tf.constant(np.concatenate(biases))).numpy()
    three = [int8.int8_matmul(u8, lo, step, k, tf.constant(b)).numpy() for k, b in zip(kernels, biases)]
    np.testing.assert_array_equal(one, np.concatenate(three, axis=1))


@pytest.mark.parametrize("rows", [20, 600])
@pytest.mark.parametrize("shape_known", [True, False])
def test_element_wise_quantization_gives_onednns_codes(rows, shape_known):
    # oneDNN's float32 arithmetic rounded to nearest even (int8_reference), exact halves included, at any
    # row count, by element-wise ops alone (no QuantizeV2, no cond on the row count).
    rng = np.random.default_rng(rows)
    halves = rng.integers(-3, 258, size=(rows, 8)) + 0.5  # with lo=0, hi=255 the step is 1: every value a half
    x = np.concatenate([halves, rng.normal(0, 60, size=(rows, 8)) + 120], axis=1).astype("float32")
    spec = tf.TensorSpec([rows if shape_known else None, 16], tf.float32)
    quantize = tf.function(lambda x: int8.quantize_input(x, 0.0, 255.0)[0], input_signature=[spec])
    codes = tf.bitcast(quantize(tf.constant(x)), tf.uint8).numpy()
    expected = np.clip(np.rint(x * np.float32(1.0) + np.float32(0.0)), 0, 255)
    np.testing.assert_array_equal(codes, expected)
    assert (codes == 0).any() and (codes == 255).any() and (codes % 2 == 0).mean() > 0.5  # clipped; halves to even
    graph = quantize.get_concrete_function().graph.as_graph_def()
    ops = {node.op for node in graph.node} | {node.op for f in graph.library.function for node in f.node_def}
    assert "Round" in ops and not ops & {"QuantizeV2", "If", "StatelessIf"}


def captured_inputs(model, batches):
    """{layer path: [input arrays]}: what each encoder Dense layer of `model` read on `batches`.

    Captured by the test's own wrapper of each layer's call (not the code's `dense_calls_set_to`).
    """
    layers = int8.encoder_dense_layers(model)
    captured = {}

    def capture(layer):
        original = layer.call

        def call(inputs, *args, **kwargs):
            captured.setdefault(layer.path, []).append(np.asarray(inputs))
            return original(inputs, *args, **kwargs)
        return call

    originals = {layer.path: layer.call for layer in layers}
    try:
        for layer in layers:
            layer.call = capture(layer)
        for inputs in batches:
            model(inputs, training=False)
    finally:
        for layer in layers:
            layer.call = originals[layer.path]
    return captured


def test_calibrated_ranges_end_at_the_percentile(model):
    """Each layer's range: the k-th smallest and k-th largest of every value its input took, k = floor(n (1 - p))."""
    batches = [random_inputs(model.bert_config, batch=4, seq=12, seed=seed) for seed in range(3)]
    layers = int8.encoder_dense_layers(model)
    seen = {path: np.sort(np.concatenate([v.ravel() for v in values]))
            for path, values in captured_inputs(model, batches).items()}
    assert len(seen) == len(layers) == 2 * 6
    for percentile in (100.0, 99.9, 99.0, 90.0):
        # Batches as a generator: read twice below 100.
        ranges = int8.calibrate_input_ranges(model, (inputs for inputs in batches), percentile)
        assert sorted(ranges) == sorted(seen)
        for path, values in seen.items():
            k = int(values.size * (100 - Fraction(str(percentile))) / 100)  # floor, in exact arithmetic
            lo, hi = ranges[path]
            assert lo == min(float(values[k]), 0.0)
            assert hi == max(float(values[-1 - k]), 0.0) + int8.MIN_RANGE
        if percentile == 99.0:
            assert any(ranges[path][1] < seen[path][-1] for path in seen)  # outliers really left out
    with pytest.raises(ValueError, match="percentile must be in"):
        int8.calibrate_input_ranges(model, batches, 40.0)


@pytest.fixture(scope="module")
def exports(tmp_path_factory, bert_vocab_file, model, tiny_classifier_float32_export):
    """`model` in float32 (conftest's export, shared with other files) and in int8, three ways: dynamic ranges,
    calibrated, calibrated with its kernels as graph constants; and the int8 exports' log lines."""
    root = tmp_path_factory.mktemp("saved_models")
    logged = []
    paths = {
        "float32": tiny_classifier_float32_export[0],
        "int8": export_saved_model(model, "classifier", bert_vocab_file, root / "int8",
                                   ExportOptions(max_seq_length=SEQ, precision="int8"), log=logged.append),
        "int8_calibrated": export_saved_model(
            model, "classifier", bert_vocab_file, root / "int8_calibrated",
            ExportOptions(max_seq_length=SEQ, precision="int8", calibration_texts=tuple(TEXTS)), log=logged.append),
        "int8_constants": export_saved_model(
            model, "classifier", bert_vocab_file, root / "int8_constants",
            ExportOptions(max_seq_length=SEQ, precision="int8", calibration_texts=tuple(TEXTS),
                          constant_kernels=True)),
    }
    return paths, logged


def test_int8_export_runs_int8_products_and_says_so(exports):
    paths, logged = exports
    for name, pooler_op, kernels in (
            ("int8_calibrated", "_MklNativeFusedMatMul", "int8 variables, packed once by oneDNN's _QuantizedMatMul"),
            ("int8_constants", "MatMul", "graph constants")):
        graph = saved_graph_def(paths[name])
        nodes = [node for function in graph.library.function for node in function.node_def]
        products = [node for node in nodes if node.op == "_QuantizedMatMul"]
        # 2 layers x 4 products (query, key and value as one; the three after), once: one graph for every batch.
        assert len(products) == 2 * 4
        # The GELU inside the intermediate product, whose output comes quantized for the output product.
        fused_ops = sorted(tuple(s.decode() for s in node.attr["fused_ops"].list.s) for node in products)
        assert fused_ops == [("BiasAdd", "Dequantize")] * 6 + [("BiasAdd", "GeluApproximate", "Requantize")] * 2
        # No encoder product is left in float32: only the pooler's and the head's (and the segment embedding's
        # one-hot); with the int8 kernels as variables the pooler (a Dense layer) packs its variable once.
        float_products = [node for node in nodes if "embeddings" not in node.name
                          and node.op in ("MatMul", "_FusedMatMul", "_MklNativeFusedMatMul")]
        assert len(float_products) == 2, name
        assert [node.op for node in float_products if "/pooler" in node.name] == [pooler_op], name
        with open(os.path.join(paths[name], "assets.extra", METADATA_FILE)) as f:
            metadata = json.load(f)
        assert metadata["kernels"] == kernels
    assert metadata["precision"] == "int8" and metadata["dtype_policy"] == "float32"
    report = metadata["int8"]
    # The empty text is left out.
    assert report["activation_ranges"] == (f"calibrated on {len(TEXTS) - 1} texts, 99.999th percentile, "
                                           "inputs smoothed per channel (alpha 0.7)")
    assert report["calibration_percentile"] == int8.DEFAULT_CALIBRATION_PERCENTILE == 99.999
    assert report["smoothing_alpha"] == int8.DEFAULT_SMOOTHING_ALPHA == 0.7
    assert report["argmax_agreement"] >= 0.9
    # Each int8 export says how its agreement went on texts the calibration did not see (a calibration of fewer
    # than 32 texts warned of), then how to serve it online.
    assert logged[1] == logged[4] == ONLINE_THREADS_HINT
    assert "--tensorflow_intra_op_parallelism=1 --tensorflow_inter_op_parallelism=-1" in ONLINE_THREADS_HINT
    calibrated = [text for text in TEXTS if text.strip()]  # the empty text is left out of the calibration
    held_out = int8_gate.held_out_texts(calibrated, ExportOptions().warmup_texts)
    assert "" in held_out and not set(held_out) & set(calibrated)
    assert logged[2].startswith(f"int8 vs float32 on {len(held_out)} texts: argmax agrees on ")
    assert logged[3].startswith(f"int8 calibrated on {len(TEXTS) - 1} texts: ranges fitted to so few texts clip ")
    assert logged[0].endswith("on texts the calibration did not see (activation ranges per batch (dynamic))")


REQUESTS = [{"signature": "serving_default", "inputs": {"text": TEXTS}},
            {"signature": "serve_text_pair", "inputs": {"text": TEXTS, "text_b": TEXTS[::-1]}}]


@pytest.fixture(scope="module")
def served(exports):
    """Every export's answers to `REQUESTS` under TF Serving's loader, in one process without our Python; under
    "online", the calibrated export's in a session of the export's online hint's threads (its last jobs); then,
    in that process, oneDNN's account of three requests to the calibrated export in a session of their own:
    `(answers, executed)` (`test_packed_kernels.probe_many_and_onednn_primitives`)."""
    paths, _ = exports
    jobs = {name: (path, REQUESTS) for name, path in paths.items()}
    jobs["online"] = (paths["int8_calibrated"], REQUESTS, {"intra_op_threads": 1, "inter_op_threads": -1})
    return probe_many_and_onednn_primitives(jobs, paths["int8_calibrated"])


def test_int8_export_loads_without_our_python_and_agrees_with_float32(exports, served):
    paths, _ = exports
    answers, _ = served
    requests = REQUESTS
    # Served by a TensorFlow with its oneDNN graph rewrites off: the same int8 products (oneDNN's op either way).
    rewrites_off = probe(paths["int8_calibrated"], requests, TF_ENABLE_ONEDNN_OPTS="0")
    for on, off in zip(answers["int8_calibrated"], rewrites_off):
        np.testing.assert_allclose(off["probabilities"], on["probabilities"], atol=1e-5)
    # Served as the export's hint advises for online traffic: one intra-op thread, and every op of a request run
    # synchronously in the thread that sent it (a negative inter-op count: no pool to hand ops to), the warmup
    # requests included; an op that waited on another thread would hang here. (A session's own setting: run in
    # the process of the other answers, after them.)
    online = answers["online"]
    assert len(online) == len(requests)
    for default, one_thread in zip(answers["int8_calibrated"], online):
        np.testing.assert_allclose(one_thread["probabilities"], default["probabilities"], atol=1e-5)
    for name in ("int8", "int8_calibrated"):
        for full, quantized in zip(answers["float32"], answers[name]):
            full, quantized = np.asarray(full["probabilities"]), np.asarray(quantized["probabilities"])
            assert full.shape == quantized.shape == (len(TEXTS), 3)
            # Each int8 rounding moves a value by up to half a step, 1/510 of its tensor's range (inputs) or
            # 1/254 of its column's largest weight (kernels): a few hundred of these through two layers of 16
            # and 32 units, LayerNorms and a softmax, as the bfloat16 bound (3e-2 for steps of 2**-9 of each
            # value) scaled by steps about four times coarser.
            np.testing.assert_allclose(quantized, full, atol=0.1)
            assert np.abs(quantized - full).max() > 1e-6  # really int8: not the float32 graph
            assert np.mean(np.argmax(quantized, 1) == np.argmax(full, 1)) >= 0.85
            np.testing.assert_allclose(quantized.sum(axis=1), 1.0, atol=1e-6)


def test_int8_kernels_held_as_variables_answer_as_constants_saved_once_and_packed_once(exports, served, model):
    """The int8 export's default: its int8 kernels are variables (saved once, in place of the float32 encoder
    kernels; none in the graph) that `_QuantizedMatMul` reorders once, on the first request, as it does a
    constant: the answers of the export holding them as graph constants, under TF Serving's loader."""
    paths, _ = exports
    answers, executed = served
    saved = tf.train.load_checkpoint(os.path.join(paths["int8_calibrated"], "variables", "variables"))
    dtypes, shapes = saved.get_variable_to_dtype_map(), saved.get_variable_to_shape_map()
    int8_shapes = sorted(tuple(shapes[name]) for name, dtype in dtypes.items() if dtype == tf.int8)
    config = model.bert_config
    hidden, inner, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    assert int8_shapes == sorted([(hidden, 3 * hidden), (hidden, hidden), (hidden, inner), (inner, hidden)] * layers)
    float_shapes = [tuple(shapes[name]) for name, dtype in dtypes.items()
                    if dtype == tf.float32 and "VARIABLE_VALUE" in name]
    assert (hidden, inner) not in float_shapes and (inner, hidden) not in float_shapes  # not saved twice
    assert float_shapes.count((hidden, hidden)) == 1  # the pooler's; no query, key, value or attention output

    def kernel_constants(path):
        """The (dtype, shape) of each rank-2 constant in the export's graph: the kernels it holds."""
        graph = saved_graph_def(path)
        tensors = [node.attr["value"].tensor for function in graph.library.function for node in function.node_def
                   if node.op == "Const"]
        return sorted((tf.as_dtype(t.dtype).name, tuple(d.size for d in t.tensor_shape.dim)) for t in tensors
                      if len(t.tensor_shape.dim) == 2 and min(d.size for d in t.tensor_shape.dim) > 1)

    # The constants export holds each int8 kernel and the pooler's float32 one in its graph; this one none.
    assert kernel_constants(paths["int8_constants"]) == sorted(
        [("qint8", shape) for shape in int8_shapes] + [("float32", (hidden, hidden))])
    assert kernel_constants(paths["int8_calibrated"]) == []

    for held, constants in zip(answers["int8_calibrated"], answers["int8_constants"], strict=True):
        np.testing.assert_allclose(held["probabilities"], constants["probabilities"], atol=1e-6)

    # oneDNN's account of three requests: each int8 kernel and the pooler's float32 kernel reordered (packed) on
    # the first, none after.
    reorders = [sum(fields[5] == "reorder" for fields in lines) for lines in executed]
    assert reorders == [4 * layers + 1, 0, 0], reorders
    for lines in executed:
        int8_products = [fields for fields in lines if fields[5] == "inner_product" and "s8" in ",".join(fields)]
        assert len(int8_products) == 4 * layers


def test_an_int8_version_below_the_agreement_threshold_is_not_published(tmp_path, bert_vocab_file):
    """Agreement is measured on texts the calibration did not see, and a version below the threshold is not
    published. Was: measured on the calibration texts only (one calibration line: "on 1 texts: argmax agrees
    on 100.0%", whatever other requests then answered) and published whatever it was (ranges at the 50.001th
    percentile: "argmax agrees on 50.0 %", published)."""
    from keras_bert_impl.models.classifier import BertClassifier

    # Weights of a trained model's spread: confident answers, which clipped ranges change.
    confident = BertClassifier(tiny_config(vocab_size=30522, max_position_embeddings=64), num_labels=3)
    randomize(confident, seed=3, scale=1.0)
    warmup = ExportOptions().warmup_texts
    calibrated = [text for text in TEXTS if text.strip()]  # the empty text is left out of the calibration

    def export(**options):
        logged = []
        version = export_saved_model(confident, "classifier", bert_vocab_file, tmp_path / "m",
                                     ExportOptions(max_seq_length=SEQ, precision="int8", **options), log=logged.append)
        with open(os.path.join(version, "assets.extra", METADATA_FILE)) as f:
            return json.load(f)["int8"], logged

    with pytest.raises(ExportError) as refused:
        export(calibration_texts=tuple(TEXTS), calibration_percentile=50.001)
    held_out = int8_gate.held_out_texts(calibrated, warmup)
    message = str(refused.value)
    assert message.startswith(f"int8 vs float32 on {len(held_out)} texts: argmax agrees on "), message
    assert "below the 95% required on texts the calibration did not see: the version is not published" in message
    assert not [path for path in (tmp_path / "m").iterdir() if path.name.isdigit()]  # nothing published

    # One calibration line (one string is one text): measured on the held-out texts, and warned of.
    report, logged = export(calibration_texts="good film", min_int8_agreement=0)
    held_out = int8_gate.held_out_texts(["good film"], warmup)
    assert report["activation_ranges"].startswith("calibrated on 1 texts")
    assert report["summary"].startswith(f"int8 vs float32 on {len(held_out)} texts: ") and "" in held_out
    assert logged[1].startswith("int8 calibrated on 1 text: ranges fitted to so few texts clip other requests")

    # A calibration the held-out texts agree with is published at the default threshold.
    report, _ = export(calibration_texts=tuple(TEXTS))
    assert report["kept_answers"] >= int8_gate.DEFAULT_MIN_AGREEMENT["kept_answers"]
    assert report["summary"].startswith(f"int8 vs float32 on {len(int8_gate.held_out_texts(calibrated, warmup))} texts")


def test_int8_refusals_name_the_cause(tmp_path, bert_vocab_file, model):
    def export(**options):
        return export_saved_model(model, "classifier", bert_vocab_file, tmp_path / "m",
                                  ExportOptions(max_seq_length=SEQ, **options))

    with pytest.raises(ExportError, match="as variables that its products pack once .packed kernels. or as graph "
                                          "constants: leave one of them on"):
        export(precision="int8", constant_kernels=False, packed_kernels=False)
    with pytest.raises(ExportError, match="calibration texts are for an int8 export"):
        export(precision="float32", calibration_texts=("a text",))
    with pytest.raises(ExportError, match="the calibration texts hold no text"):
        export(precision="int8", calibration_texts=("  ", ""))
    with pytest.raises(ExportError, match=r"--calibration_percentile 30: must be in \(50, 100\]"):
        export(precision="int8", calibration_texts=("a text",), calibration_percentile=30.0)
    with pytest.raises(ExportError, match=r"--smoothing_alpha -0.5: must be in \[0, 1\]"):
        export(precision="int8", calibration_texts=("a text",), smoothing_alpha=-0.5)
    # Was: "precision 'int4' is not one of auto, float32, bfloat16" (int8 left out).
    with pytest.raises(ExportError, match=r"^precision 'int4' is not one of auto, float32, bfloat16, int8$"):
        export(precision="int4")
    with pytest.raises(ExportError, match=r"min_int8_agreement 1.5: must be in \[0, 1\]"):
        export(precision="int8", min_int8_agreement=1.5)
    # Was: AttributeError: 'NoneType' object has no attribute 'strip'.
    with pytest.raises(ExportError, match=r"calibration_texts\[1\] is None, not a string: each is one text"):
        export(precision="int8", calibration_texts=["a text", None])
    assert not (tmp_path / "m").exists()


def test_export_tool_int8_flags(tmp_path, bert_vocab_file, capfd):
    from keras_bert_impl.cli import parse_flags

    # The tool defines its flags without loading TensorFlow: its default is written there again.
    defaults = parse_flags(export_tool.define_flags, [])
    assert defaults.calibration_percentile == int8.DEFAULT_CALIBRATION_PERCENTILE
    assert defaults.smoothing_alpha == int8.DEFAULT_SMOOTHING_ALPHA
    tiny_release_export_tool(tmp_path, bert_vocab_file)  # the release; the tool runs through its `main` here

    calibration = tmp_path / "calibration.txt"
    calibration.write_text("a fine film\n\nnot good at all\n", encoding="utf-8")
    release = [f"--model_dir={tmp_path}/release", "--task=classifier", "--max_seq_length=16",
               f"--export_dir={tmp_path}/saved_models/tiny"]
    # The export through the tool's `main` in this process (the code after the parse, as its process runs it).
    # --noverify: what is checked here is what the flags choose and the export says (the check as TF Serving
    # loads an int8 version, ~2 s of CPU, is test_verification's).
    export_tool.main(release + ["--precision=int8", f"--calibration_file={calibration}",
                                "--calibration_percentile=100", "--smoothing_alpha=0", "--noverify"])
    stderr = capfd.readouterr().err
    assert "computing in int8 (CPU: " in stderr
    held_out = int8_gate.held_out_texts(["a fine film", "not good at all"], ExportOptions().warmup_texts)
    assert f"int8 vs float32 on {len(held_out)} texts: argmax agrees on " in stderr
    assert "(activation ranges calibrated on 2 texts, smallest to largest value)" in stderr
    # Refused in one line, naming the file and line, before anything is written: once as its console script runs
    # it (`run_tool_here`: its exit status and its one line of stderr; tests/test_tools_cli.py runs the tools'
    # processes), then each refusal through its `main` (the same message).
    broken = tmp_path / "broken.txt"
    broken.write_bytes(b"a fine film\nnot \xff good\n")
    bad = run_tool_here(export_tool.main, release + ["--precision=int8", f"--calibration_file={broken}"], capfd,
                        "export_saved_model")
    lines = bad.stderr.strip().splitlines()
    assert bad.returncode != 0 and len(lines) == 1 and f"error: {broken}:2: not valid UTF-8" in lines[0], bad.stderr
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n", encoding="utf-8")
    for flags, message in (
        (["--precision=int8", f"--calibration_file={empty}"], f"{empty}: the calibration file holds no text"),
        (["--precision=int8", f"--calibration_file={tmp_path}/absent.txt"], "absent.txt: calibration file not found"),
        (["--precision=float32", f"--calibration_file={calibration}"], "--calibration_file is for --precision=int8"),
        (["--precision=int8", "--calibration_percentile=99.9"], "--calibration_percentile is for --calibration_file"),
        (["--precision=int8", f"--calibration_file={calibration}", "--calibration_percentile=101"],
         "--calibration_percentile=101: must be in (50, 100]"),
        (["--precision=int8", "--smoothing_alpha=0.5"], "--smoothing_alpha is for --calibration_file"),
        (["--precision=float32", "--min_int8_agreement=0.5"], "--min_int8_agreement is for --precision=int8"),
        (["--precision=int8", "--min_int8_agreement=2"], "--min_int8_agreement=2: must be in [0, 1]"),
        (["--precision=int8", f"--calibration_file={calibration}", "--smoothing_alpha=1.5"],
         "--smoothing_alpha=1.5: must be in [0, 1] (0: no smoothing)"),
    ):
        with pytest.raises(BertError) as refused:
            export_tool.main(release + flags)
        assert message in str(refused.value) and "\n" not in str(refused.value)
    assert sorted(os.listdir(tmp_path / "saved_models" / "tiny")) == ["1"]


@X86_ONLY
@pytest.mark.parametrize("padding_free", [False, True])
def test_an_int8_inference_function_runs_int8_products_and_agrees_with_float32(padding_free):
    # The function of `BertModel.make_inference_function(precision="int8")`: the
    # export's int8 products in a plain graph, the same outputs as the model to
    # int8 rounding, and its weights taken when made.
    from keras_bert_impl.models.bert_model import BertModel

    model = BertModel(tiny_config(hidden_size=32, intermediate_size=64))
    randomize(model, seed=11, scale=0.2)
    inputs = random_inputs(model.bert_config, batch=3, seq=10, seed=4)
    forward = model.make_inference_function(precision="int8", padding_free=padding_free)
    graph_def = forward.get_concrete_function(inputs).graph.as_graph_def()
    nodes = list(graph_def.node) + [node for f in graph_def.library.function for node in f.node_def]
    layers = model.bert_config.num_hidden_layers
    # Query, key and value as one product, and the three after.
    products = [node for node in nodes if node.op == "_QuantizedMatMul"]
    assert len(products) == 4 * layers
    # Ranges per batch: the intermediate product gives float32 (after its GELU), as the others.
    assert sum(node.attr["fused_ops"].list.s == [b"BiasAdd", b"GeluApproximate", b"Dequantize"]
               for node in products) == layers
    expected = model(inputs)["sequence_output"].numpy()
    mask = np.asarray(inputs["input_mask"], bool)
    got, expected = forward(inputs)["sequence_output"].numpy()[mask], expected[mask]
    cosine = np.sum(got * expected, -1) / (np.linalg.norm(got, axis=-1) * np.linalg.norm(expected, axis=-1))
    assert cosine.min() > 0.99
    assert np.abs(got - expected).max() > 1e-6  # int8, not float32
    with pytest.raises(ValueError, match="not XLA's"):
        model.make_inference_function(precision="int8", jit_compile=True)
