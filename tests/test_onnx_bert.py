"""`benchmarks/onnx_bert.py`: the ONNX graph of a BertModel computes what the
model computes, plain and after ONNX Runtime's transformer optimizer (every
layer fused), so that the CPU-inference peers run the same function as ours.

Skipped where ONNX Runtime is not installed (it is in the `bench` extra)."""

import doctest

import numpy as np
import pytest

onnxruntime = pytest.importorskip("onnxruntime")

from keras_bert_impl.checkpoints.original import original_weights  # noqa: E402
from keras_bert_impl.models.bert_model import BertModel  # noqa: E402
from tests.helpers import load_benchmark, random_inputs, randomize, tiny_config  # noqa: E402

TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def onnx_bert():
    return load_benchmark("onnx_bert")


def run_graph(path, inputs):
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return dict(zip(("sequence_output", "pooled_output"), session.run(["sequence_output", "pooled_output"], inputs)))


@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_exact"])
def test_onnx_graph_agrees_with_bert_model_plain_and_fused(onnx_bert, hidden_act, tmp_path):
    config = tiny_config(hidden_act=hidden_act)
    model = BertModel(config)
    randomize(model, seed=3)
    inputs = random_inputs(config, batch=3, seq=10)
    expected = {name: value.numpy() for name, value in model(inputs, training=False).items()}
    real = inputs["input_mask"].astype(bool)  # padded positions are not outputs any caller reads

    plain = tmp_path / "bert.onnx"
    plain.write_bytes(onnx_bert.bert_onnx_model(original_weights(model), config).SerializeToString())
    pytest.importorskip("sympy")  # the optimizer's shape inference
    fused = onnx_bert.optimize_bert(plain, tmp_path / "bert_optimized.onnx", config)
    assert {op: fused.get(op, 0) for op in onnx_bert.expected_fusions(config)} == onnx_bert.expected_fusions(config)

    for path in (plain, tmp_path / "bert_optimized.onnx"):
        outputs = run_graph(path, inputs)
        np.testing.assert_allclose(outputs["sequence_output"][real], expected["sequence_output"][real],
                                   atol=TOLERANCE, err_msg=path.name)
        np.testing.assert_allclose(outputs["pooled_output"], expected["pooled_output"], atol=TOLERANCE,
                                   err_msg=path.name)


def test_int8_graph_stays_close_to_float32(onnx_bert, tmp_path):
    config = tiny_config(hidden_act="gelu_exact")
    model = BertModel(config)
    randomize(model, seed=4, scale=0.1)
    inputs = random_inputs(config, batch=3, seq=10)
    plain = tmp_path / "bert.onnx"
    plain.write_bytes(onnx_bert.bert_onnx_model(original_weights(model), config).SerializeToString())
    pytest.importorskip("sympy")
    onnx_bert.optimize_bert(plain, tmp_path / "bert_optimized.onnx", config)
    onnx_bert.quantize_int8(tmp_path / "bert_optimized.onnx", tmp_path / "bert_int8.onnx", per_channel=True)
    float32 = model(inputs, training=False)["sequence_output"].numpy()[:, 0]  # [batch, H], the [CLS] vectors
    int8 = run_graph(tmp_path / "bert_int8.onnx", inputs)["sequence_output"][:, 0]
    cosine = np.sum(float32 * int8, -1) / (np.linalg.norm(float32, axis=-1) * np.linalg.norm(int8, axis=-1))
    assert cosine.min() > 0.95, cosine


def test_other_activations_are_refused(onnx_bert):
    config = tiny_config(hidden_act="relu")
    with pytest.raises(ValueError, match="relu"):
        onnx_bert.bert_onnx_model({}, config)


def test_docstring_example(onnx_bert):
    result = doctest.testmod(onnx_bert, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted >= 5 and result.failed == 0, f"{result.failed} of {result.attempted} examples failed"
