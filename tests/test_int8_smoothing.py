"""Smoothed int8 inputs (SmoothQuant): the scales follow the paper's formula, the product with them equals its NumPy
emulation and is closer to the float product where a channel has outliers, factors are read from what each input
really took (one set per input), calibration runs on real tokens only, and what cannot be smoothed is refused."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.inference import int8, int8_smoothing
from keras_bert_impl.inference.constant_kernels import reading_as_constants
from tests.helpers import X86_ONLY, random_inputs, randomize, tiny_config
from tests.test_int8 import captured_inputs
from tests.test_serving_precision import model  # noqa: F401 (a fixture)

pytestmark = X86_ONLY


def test_smoothing_scales_follow_smoothquants_formula():
    # s[c] = max|x_c|^alpha / max|W[c, :]|^(1 - alpha), hand-computed. Channel 2 was silent: its maximum counts as
    # a fifth of the median channel's (4 -> 0.8; channel 1's, above it, stays); the zero kernel row of channel 4 counts
    # as 1e-5.
    channel_max = np.array([16.0, 1.0, 0.0, 9.0, 4.0])
    kernel = np.array([[1.0, -0.5], [4.0, 0.0], [2.0, 0.5], [-0.25, 0.1], [0.0, 0.0]])
    np.testing.assert_allclose(int8.smoothing_scales(channel_max, kernel, 0.5),
                               [4.0, 0.5, np.sqrt(0.4), 6.0, 2.0 / np.sqrt(1e-5)], rtol=1e-6)
    np.testing.assert_allclose(int8.smoothing_scales(channel_max, kernel, 1.0), [16.0, 1.0, 0.8, 9.0, 4.0], rtol=1e-6)
    np.testing.assert_allclose(int8.smoothing_scales(channel_max, kernel, 0.0), [1.0, 0.25, 0.5, 4.0, 1e5], rtol=1e-6)
    # All silent: no median to lean on, 1e-5 each.
    np.testing.assert_allclose(int8.smoothing_scales(np.zeros(2), np.ones((2, 1)), 1.0), [1e-5, 1e-5], rtol=1e-6)
    with pytest.raises(ValueError, match=r"alpha must be in \[0, 1\]"):
        int8.smoothing_scales(channel_max, kernel, 1.5)


def outlier_input(rows, seed):
    """[rows, 48] activations with two channels 40x the others (as a LayerNorm's output has), a [48, 64] kernel."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 48)).astype("float32")
    x[:, [5, 30]] *= 40.0
    return x, rng.normal(0, 0.05, size=(48, 64)).astype("float32"), rng.normal(0, 0.1, size=64).astype("float32")


def test_a_smoothed_product_equals_its_emulation_and_is_closer_to_the_float_product():
    x, weights, bias = outlier_input(200, seed=7)
    exact = x.astype(np.float64) @ weights + bias

    def int8_product(scales):
        smoothed = x / scales if scales is not None else x
        lo, hi = min(float(smoothed.min()), 0.0), float(smoothed.max())
        kernel = int8.quantize_kernel(int8.smoothed(weights, scales))
        product = tf.function(lambda x: int8.int8_matmul(
            *int8.quantize_input(x, lo, hi, scales)[:1], lo, int8.calibrated_step(lo, hi)[2], kernel, bias))
        got = product(tf.constant(x)).numpy()
        # The codes of x / s, the division folded into the multiplier: oneDNN's rounding, emulated in NumPy.
        np.testing.assert_allclose(got, int8.int8_reference(x, lo, hi, kernel, bias, channel_scales=scales),
                                   rtol=1e-5, atol=1e-4)
        return np.abs(got - exact).mean()

    plain = int8_product(None)
    scales = int8.smoothing_scales(np.abs(x).max(axis=0), weights, int8.DEFAULT_SMOOTHING_ALPHA)
    assert scales[5] > 5 * np.median(scales) and scales[30] > 5 * np.median(scales)  # the outliers' spread moves
    smoothed = int8_product(scales)
    assert smoothed < plain / 2.5, (smoothed, plain)  # measured 0.017 against 0.062


def test_a_channel_silent_in_calibration_is_not_clipped_when_serving(monkeypatch):
    # Channel 9 is 0 on every calibration row and a fifth of the others when serving. Without the floor its factor
    # is ~1e-5^0.7 / |W|^0.3: its values leave the calibrated range by orders of magnitude and are clipped, and
    # the product loses the channel's contribution; with it, the channel counts as one a fifth of the median.
    rng = np.random.default_rng(3)
    calibration = rng.normal(size=(300, 48)).astype("float32")
    calibration[:, 9] = 0.0
    serving = rng.normal(size=(50, 48)).astype("float32")
    serving[:, 9] *= 0.2
    without_channel = serving.copy()
    without_channel[:, 9] = 0.0
    weights = rng.normal(0, 0.05, size=(48, 64)).astype("float32")
    contribution = serving[:, 9:10].astype(np.float64) * weights[9]  # what channel 9 adds to the exact product

    def served_contribution(floor):
        monkeypatch.setattr(int8_smoothing, "SMOOTHING_FLOOR", floor)  # where smoothing_scales reads it
        scales = int8.smoothing_scales(np.abs(calibration).max(axis=0), weights, int8.DEFAULT_SMOOTHING_ALPHA)
        lo, hi = float((calibration / scales).min()), float((calibration / scales).max())
        kernel = int8.quantize_kernel(int8.smoothed(weights, scales))
        product = lambda x: int8.int8_reference(x, lo, hi, kernel, channel_scales=scales)  # noqa: E731
        return product(serving) - product(without_channel)

    floor = int8.SMOOTHING_FLOOR
    lost = np.abs(served_contribution(0.0) - contribution).mean()
    kept = np.abs(served_contribution(floor) - contribution).mean()
    scale = np.abs(contribution).mean()
    assert lost > 0.9 * scale, (lost, scale)  # the channel is clipped to ~0
    assert kept < 0.1 * scale, (kept, scale)  # measured 0.03


def test_smoothing_factors_are_read_from_each_input_once(model):
    batches = [random_inputs(model.bert_config, batch=4, seq=12, seed=seed) for seed in range(2)]
    factors = int8.smoothing_factors(model, batches, alpha=0.6)
    captured = {path: np.concatenate([v.reshape(-1, v.shape[-1]) for v in values])
                for path, values in captured_inputs(model, batches).items()}
    layers = {layer.path: layer for layer in int8.encoder_dense_layers(model)}
    attentions = int8.self_attention_layers(model)
    output_layers = set(int8.requantized_pairs(model).values())
    assert len(attentions) == len(output_layers) == 2
    assert set(factors) == set(layers) - output_layers  # their input comes requantized: none
    for attention in attentions:
        group = [attention.query.path, attention.key.path, attention.value.path]
        kernel = np.concatenate([layers[path].kernel.numpy() for path in group], axis=1)
        expected = int8.smoothing_scales(np.abs(captured[group[0]]).max(axis=0), kernel, 0.6)
        for path in group:  # one input, quantized once: one set of factors
            np.testing.assert_allclose(factors[path], expected, rtol=1e-6)
    for path in set(factors) - {p for a in attentions for p in (a.query.path, a.key.path, a.value.path)}:
        expected = int8.smoothing_scales(np.abs(captured[path]).max(axis=0), layers[path].kernel.numpy(), 0.6)
        np.testing.assert_allclose(factors[path], expected, rtol=1e-6)
    # Ranges calibrated with the factors: those of each input divided by them.
    ranges = int8.calibrate_input_ranges(model, batches, 100.0, smoothing=factors)
    for path, scales in factors.items():
        divided = captured[path] / scales
        assert ranges[path][0] == pytest.approx(min(float(divided.min()), 0.0), rel=1e-6)
        assert ranges[path][1] == pytest.approx(float(divided.max()) + int8.MIN_RANGE, rel=1e-6)


def test_a_model_with_an_outlier_channel_answers_closer_to_float32_smoothed():
    from keras_bert_impl.models.bert_model import BertModel

    model = BertModel(tiny_config(hidden_size=32, intermediate_size=64))
    randomize(model, seed=2, scale=0.2)
    # Two channels of the embeddings' LayerNorm 30x the others: the first query/key/value input has outliers.
    gamma = next(w for w in model.weights if "embeddings" in w.path and "gamma" in w.path)
    gamma.assign(gamma.numpy() * np.where(np.isin(np.arange(32), [3, 17]), 30.0, 1.0).astype("float32"))
    batches = [random_inputs(model.bert_config, batch=4, seq=12, seed=seed, pad=False) for seed in range(4)]
    inputs = random_inputs(model.bert_config, batch=4, seq=12, seed=9, pad=False)
    expected = model(inputs, training=False)["sequence_output"].numpy()

    def error_and_ops(smoothing):
        ranges = int8.calibrate_input_ranges(model, batches, 100.0, smoothing=smoothing)
        kernels = int8.Int8Kernels(model, ranges, smoothing)

        @tf.function
        def forward(inputs):
            with reading_as_constants(kernels):
                return model(inputs, training=False)["sequence_output"]

        graph = forward.get_concrete_function(inputs).graph.as_graph_def()
        ops = sorted(node.op for node in graph.node)
        return np.abs(forward(inputs).numpy() - expected).mean(), ops

    (plain, plain_ops), (smoothed, smoothed_ops) = error_and_ops(None), error_and_ops(
        int8.smoothing_factors(model, batches))
    assert smoothed < 0.7 * plain, (smoothed, plain)  # measured 0.032 against 0.060
    assert smoothed_ops == plain_ops  # folded into the constants: no op more


def test_int8_kernels_refuse_smoothing_they_cannot_apply(model):
    batches = [random_inputs(model.bert_config, batch=2, seq=8, seed=0)]
    factors = int8.smoothing_factors(model, batches)
    ranges = int8.calibrate_input_ranges(model, batches, 100.0, smoothing=factors)
    with pytest.raises(ValueError, match="smoothing is for calibrated ranges"):
        int8.Int8Kernels(model, None, factors)
    output_path = next(iter(int8.requantized_pairs(model).values()))
    with pytest.raises(ValueError, match=f"{output_path}: its input comes quantized from the intermediate product"):
        int8.Int8Kernels(model, ranges, {**factors, output_path: np.ones(64, np.float32)})
    query = int8.self_attention_layers(model)[0].query.path
    with pytest.raises(ValueError, match="read one input: give them the same smoothing"):
        int8.Int8Kernels(model, ranges, {**factors, query: factors[query] * 2})
    without_query = {path: scales for path, scales in factors.items() if path != query}
    with pytest.raises(ValueError, match="read one input: give them the same smoothing"):
        int8.Int8Kernels(model, ranges, without_query)


def test_export_calibration_reads_real_tokens_only(model, bert_vocab_file):
    # The export's graph never computes padding positions: its calibration does not either. Reference: each text
    # alone, cut to its own length (no padding at all), through the model as it is.
    from keras_bert_impl.serving.export import int8_calibration
    from keras_bert_impl.serving.signatures import BertServingModule
    from keras_bert_impl.tokenization import load_vocab
    from keras_bert_impl.tokenization.in_graph import InGraphTokenizer
    from keras_bert_impl.tokenization.preprocessor import shared_tables
    from tests.test_int8 import TEXTS

    vocab = load_vocab(bert_vocab_file)
    tokens = [""] * (max(vocab.values()) + 1)
    for token, index in vocab.items():
        tokens[index] = token
    module = BertServingModule(model, "classifier", InGraphTokenizer(tokens, tables=shared_tables()), 24,
                               {"cls": vocab["[CLS]"], "sep": vocab["[SEP]"], "mask": vocab["[MASK]"]})
    texts = [text for text in TEXTS if text.strip()]
    ranges, smoothing = int8_calibration(module, model, texts, 100.0, smoothing_alpha=None, batch_size=8)
    assert smoothing is None
    alone = []
    for text in texts:
        inputs = module.encode(tf.constant([text]))
        length = int(np.sum(inputs["input_mask"]))
        alone.append({key: value[:, :length] for key, value in inputs.items()})
    expected = int8.calibrate_input_ranges(model, alone, 100.0)
    for path, (lo, hi) in expected.items():
        assert ranges[path] == pytest.approx((lo, hi), rel=1e-5, abs=1e-6)
    # The padded batches as the model computes them otherwise: other ranges (what this test would catch).
    padded = [module.encode(tf.constant(texts[start:start + 8])) for start in range(0, len(texts), 8)]
    with_padding = int8.calibrate_input_ranges(model, padded, 100.0)
    assert any(with_padding[path] != pytest.approx(expected[path], rel=1e-3) for path in expected)


@pytest.mark.parametrize("padding_free", [False, True])
def test_a_calibrated_int8_inference_function(padding_free):
    # `make_inference_function(precision="int8", calibration_inputs=...)`: the export's calibrated products (fixed
    # ranges, the intermediate product requantized for the next, no range ops), the ranges and smoothing of
    # `int8.calibrate` on those inputs, and answers close to float32.
    from keras_bert_impl.models.bert_model import BertModel

    model = BertModel(tiny_config(hidden_size=32, intermediate_size=64))
    randomize(model, seed=5, scale=0.2)
    batches = [random_inputs(model.bert_config, batch=4, seq=12, seed=seed) for seed in range(3)]
    inputs = random_inputs(model.bert_config, batch=3, seq=10, seed=8)
    forward = model.make_inference_function(precision="int8", padding_free=padding_free, calibration_inputs=batches)
    graph = forward.get_concrete_function(inputs).graph.as_graph_def()
    nodes = list(graph.node) + [node for f in graph.library.function for node in f.node_def]
    fused = [tuple(s.decode() for s in node.attr["fused_ops"].list.s) for node in nodes if node.op == "_QuantizedMatMul"]
    layers = model.bert_config.num_hidden_layers
    assert sorted(fused) == [("BiasAdd", "Dequantize")] * 3 * layers + [("BiasAdd", "GeluApproximate", "Requantize")] * layers
    assert not {"Min", "Max"} & {node.op for node in nodes}  # no per-batch range

    # The same products built here from `int8.calibrate` on the model itself.
    kernels = int8.Int8Kernels(model, *int8.calibrate(model, batches))

    @tf.function
    def reference(inputs):
        with reading_as_constants(kernels):
            return model(inputs, training=False)["sequence_output"]

    mask = np.asarray(inputs["input_mask"], bool)
    got = forward(inputs)["sequence_output"].numpy()[mask]
    np.testing.assert_allclose(got, reference(inputs).numpy()[mask], atol=1e-5)
    expected = model(inputs, training=False)["sequence_output"].numpy()[mask]
    cosine = np.sum(got * expected, -1) / (np.linalg.norm(got, axis=-1) * np.linalg.norm(expected, axis=-1))
    assert cosine.min() > 0.99 and np.abs(got - expected).max() > 1e-6
    with pytest.raises(ValueError, match="calibration_inputs are for precision='int8'"):
        model.make_inference_function(calibration_inputs=batches)
    with pytest.raises(ValueError, match="no calibration inputs"):
        model.make_inference_function(precision="int8", calibration_inputs=iter([]))
