"""`layers.layer_norm`: the original's layer_norm in the arrangement oneDNN fuses into one kernel.

Checked against a float64 NumPy layer norm written here, and by what
TensorFlow ran: with the oneDNN rewrites on, a BERT inference graph runs one
`_MklLayerNorm` per LayerNorm (Keras' ops for a small request) and no
softmax casts; with them off, Keras' element-wise LayerNorm as before.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.layers.layer_norm import LayerNorm, fused_layer_norm
from tests.helpers import TINY_MODEL_PROFILE, X86_ONLY, run_with_onednn_rewrites


def numpy_layer_norm(x, gamma, beta, epsilon):
    x = np.asarray(x, np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


@pytest.mark.parametrize("shape", [(7, 16), (2, 5, 16)])
def test_fused_layer_norm_is_the_originals_layer_norm(shape):
    rng = np.random.default_rng(0)
    x = rng.normal(0.3, 2.0, shape).astype("float32")
    gamma, beta = rng.normal(size=16).astype("float32"), rng.normal(size=16).astype("float32")
    expected = numpy_layer_norm(x, gamma, beta, 1e-12)
    traced = tf.function(lambda v: fused_layer_norm(v, gamma, beta, 1e-12))
    np.testing.assert_allclose(traced(x).numpy(), expected, atol=1e-5)
    np.testing.assert_allclose(fused_layer_norm(x, gamma, beta, 1e-12).numpy(), expected, atol=1e-5)
    # bfloat16 in and out: the input and the result each rounded once more.
    half = traced(tf.cast(x, tf.bfloat16))
    assert half.dtype == tf.bfloat16
    np.testing.assert_allclose(tf.cast(half, tf.float32).numpy(), expected,
                               atol=4 * 2**-8 * np.abs(expected).max())


def test_epsilon_is_the_originals_not_cudnns_minimum():
    # A constant row has variance 0: the output is beta exactly only if the
    # epsilon stays 1e-12 (tf.nn.fused_batch_norm would raise it to 1.001e-5).
    x = tf.constant([[2.0, 2.0, 2.0, 2.0], [0.0, 1e-3, 0.0, -1e-3]])
    y = tf.function(lambda v: fused_layer_norm(v, tf.ones([4]), tf.zeros([4]), 1e-12))(x).numpy()
    np.testing.assert_allclose(y[1], numpy_layer_norm(x.numpy()[1], 1.0, 0.0, 1e-12), atol=1e-4)
    assert np.abs(y[1]).max() > 1.4  # with epsilon 1e-5 the row would shrink to about 0.3


def test_layer_norm_keeps_keras_variables_and_config():
    layer = LayerNorm(epsilon=1e-12, name="LayerNorm")
    layer.build((None, 8))
    assert [v.path for v in layer.weights] == ["LayerNorm/gamma", "LayerNorm/beta"]
    assert isinstance(layer, keras.layers.LayerNormalization)  # precision.py keeps its weights float32
    config = layer.get_config()
    assert config["epsilon"] == 1e-12 and LayerNorm.from_config(config).epsilon == 1e-12
    # Training keeps Keras' computation (the fused kernel has no gradient).
    x = tf.random.normal([3, 8])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(x, training=True) ** 2)
    assert all(gradient is not None for gradient in tape.gradient(loss, layer.trainable_variables))


MODEL_OPS = TINY_MODEL_PROFILE + """
from keras_bert_impl.layers.attention import SelfAttention
# 16 x 12 tokens: past FUSED_MIN_ROWS; 2 x 12 (one small request): below it.
large = {k: tf.tile(v, [8, 1]) for k, v in inputs.items()}
for dtype in ("float32", "mixed_bfloat16"):
    for padding_free in (False, True):
        for size, batch in (("large", large), ("small", inputs)):
            inference = BertModel(config, dtype=dtype).make_inference_function(
                jit_compile=False, padding_free=padding_free, freeze_kernels=True)
            op_seconds, _ = profile_forward.profile(tf.function(lambda x: tuple(inference(x).values())), batch, steps=1)
            ops = {op for _, op in op_seconds}
            ran[f"{dtype} {padding_free} {size}"] = [sum(op == "_MklLayerNorm" for _, op in op_seconds),
                                                     sorted(ops & {"SquaredDifference", "Rsqrt"}),
                                                     sum(op == "_MklTranspose" for _, op in op_seconds)]
# The dtype the attention's softmax takes, in inference and in training, with
# the forms the inference plan sets on this machine (as a model's constructor does).
from keras_bert_impl.inference.plan import Machine
from keras_bert_impl.layers.onednn_forms import set_onednn_forms
attention = SelfAttention(num_attention_heads=2, size_per_head=8, dtype="mixed_bfloat16")
set_onednn_forms(attention, Machine().onednn_runs_graphs)
heads = tf.cast(tf.random.normal([1, 2, 5, 8]), tf.bfloat16)
for training in (False, True):
    graph = tf.function(lambda q: attention.attend(q, q, q, training=training)).get_concrete_function(heads).graph
    ran[f"softmax training={training}"] = [op.get_attr("T").name for op in graph.get_operations() if op.type == "Softmax"]
print(json.dumps(ran))
"""


@X86_ONLY
@pytest.mark.parametrize("setting", ["1", "0"])
def test_the_models_layer_norms_and_softmax_run_on_onednn_kernels_with_the_rewrites(setting):
    ran = run_with_onednn_rewrites(MODEL_OPS, setting)
    keras_ops = ["Rsqrt", "SquaredDifference"]
    for dtype in ("float32", "mixed_bfloat16"):
        for padding_free in (False, True):
            key = f"{dtype} {padding_free}"
            # Embeddings and two per layer: one kernel each with the rewrites (where the
            # rows are many: a small request takes Keras' element-wise ops), else Keras'
            # element-wise ops. No transpose runs on oneDNN with the rewrites (the heads
            # move as integer bits): Eigen's.
            if setting == "1":
                assert ran[f"{key} large"] == [5, [], 0], key
                assert ran[f"{key} small"] == [0, keras_ops, 0], key
            else:
                assert ran[f"{key} large"] == ran[f"{key} small"] == [0, keras_ops, 0], key
    # oneDNN's softmax takes bfloat16 (float32 inside): no casts around it, for inference only.
    assert ran["softmax training=False"] == (["bfloat16"] if setting == "1" else ["float32"])
    assert ran["softmax training=True"] == ["float32"]


@pytest.mark.parametrize("rows", [3, 300])
def test_a_layer_norm_traced_for_any_row_count_takes_either_form_and_equals_the_original(rows):
    # Traced with the row count unknown (as an export's signature is), the
    # layer chooses at run time between Keras' ops (few rows) and the fused form.
    from keras_bert_impl.layers.layer_norm import FUSED_MIN_ROWS

    assert 3 < FUSED_MIN_ROWS <= 300
    layer = LayerNorm(epsilon=1e-12)
    layer.build((None, 16))
    layer.gamma.assign(np.linspace(0.5, 1.5, 16))
    layer.beta.assign(np.linspace(-1, 1, 16))
    layer.onednn_forms = True
    traced = tf.function(lambda v: layer(v, training=False), input_signature=[tf.TensorSpec([None, 16])])
    x = np.random.default_rng(rows).normal(size=(rows, 16)).astype("float32") * 3 + 1
    expected = numpy_layer_norm(x, layer.gamma.numpy(), layer.beta.numpy(), 1e-12)
    np.testing.assert_allclose(traced(x).numpy(), expected, atol=2e-5)
