"""`layers.layer_norm`: the original's layer_norm in the arrangement oneDNN fuses into one kernel.

Checked against a float64 NumPy layer norm written here; what a whole model
runs with and without the oneDNN rewrites: tests/test_onednn_kernels.py.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.layers.layer_norm import LayerNorm, fused_layer_norm


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
