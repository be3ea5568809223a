"""The original `layer_norm` as a Keras layer that TensorFlow's oneDNN runs as one kernel.

Keras' `LayerNormalization` computes in about ten element-wise ops (mean,
squared difference, mean, rsqrt, products, sums), in float32 with casts
around them under mixed precision: on a CPU, after the products, the
largest piece of a BERT forward pass (its share: docs/BENCHMARKS.md).
TensorFlow's oneDNN graph rewrites have one fused LayerNorm kernel
(`_MklLayerNorm`, bfloat16 or float32 in and out, statistics in float32),
which grappler's remapper substitutes for one arrangement only: the one
Keras 2 (tf_keras) emits, a `FusedBatchNormV3` in training mode over a
[1, rows, width, 1] reshape of the input, with scale and offset made by
`Fill`, then `* gamma + beta`. `fused_layer_norm` builds exactly that;
`LayerNorm` uses it for inference where its `onednn_forms` is on (the
inference plan sets it where the rewrites are on and no GPU or TPU is
visible: `layers.onednn_forms`), and Keras' own computation everywhere
else (training included: the fused kernel has no gradient). Measured:
docs/BENCHMARKS.md.
"""

import keras
import tensorflow as tf

from keras_bert_impl.layers.onednn_forms import traced_outside_xla

_PACKAGE = "keras_bert_impl"
# Fewer rows than this take Keras' computation even where the fused kernel
# applies (measured: docs/BENCHMARKS.md, "Numbers the code's notes rest on").
FUSED_MIN_ROWS = 128


def fused_layer_norm(inputs, gamma, beta, epsilon):
    """LayerNorm over the last axis of a 2-D or 3-D tensor, in the arrangement oneDNN's fused kernel replaces.

    Computed as written (a `FusedBatchNormV3` per row), it equals the
    original's `layer_norm` within float rounding; with TensorFlow's oneDNN
    rewrites on, inside a `tf.function`, grappler runs it as one
    `_MklLayerNorm`.

    Args:
        inputs: [rows, width] or [batch, seq, width], float32 or bfloat16.
        gamma, beta: [width], cast to the inputs' dtype.
        epsilon: Added to the variance (the original's 1e-12; passed to the
            op as it is, where `tf.nn.fused_batch_norm` would raise it to
            1.001e-5 for cuDNN).

    Returns:
        A tensor of the inputs' shape and dtype.

    Example:
    >>> x = tf.constant([[1.0, 2.0, 3.0, 4.0], [2.0, 2.0, 2.0, 6.0]])
    >>> y = fused_layer_norm(x, tf.ones([4]), tf.zeros([4]), 1e-12)
    >>> [round(float(v), 4) for v in y[1]]
    [-0.5774, -0.5774, -0.5774, 1.7321]
    """
    inputs = tf.convert_to_tensor(inputs)
    shape = tf.shape(inputs)
    width = shape[-1]
    rows = tf.reduce_prod(shape[:-1])
    # The scale and offset must stay `Fill`s for the remapper to match: a
    # PlaceholderWithDefault keeps their size from being folded into
    # constants where the shape is known when the graph is built.
    size = tf.raw_ops.PlaceholderWithDefault(input=tf.reshape(rows, [1]), shape=[1])
    empty = tf.constant([], tf.float32)
    # [1, rows, width, 1]: one "channel" per row, normalised over its width.
    normalized = tf.raw_ops.FusedBatchNormV3(
        x=tf.reshape(inputs, tf.stack([1, rows, width, 1])),
        scale=tf.fill(size, 1.0), offset=tf.fill(size, 0.0), mean=empty, variance=empty,
        epsilon=epsilon, data_format="NCHW", is_training=True,
    )[0]
    normalized = tf.reshape(normalized, shape)
    return normalized * tf.cast(gamma, inputs.dtype) + tf.cast(beta, inputs.dtype)


def fused_layer_norm_applies(inputs, layer, training=None):
    """Whether `layer` should compute `inputs` with `fused_layer_norm` (see the module's notes)."""
    return (
        not training
        and inputs.shape.rank in (2, 3)
        and [axis % inputs.shape.rank for axis in layer.axis] == [inputs.shape.rank - 1]
        and layer.center and layer.scale and not layer.rms_scaling
        and inputs.dtype in (tf.float32, tf.bfloat16)
        and layer.onednn_forms
        and traced_outside_xla()
    )


@keras.saving.register_keras_serializable(package=_PACKAGE)
class LayerNorm(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization` that oneDNN runs as one kernel for inference on a CPU.

    The same variables (`gamma`, `beta`), arguments and config as Keras'
    layer; for inference inside a `tf.function` not compiled with XLA, with
    `onednn_forms` on (set by the inference plan where TensorFlow's oneDNN
    rewrites are on and no GPU or TPU is visible), it computes
    `fused_layer_norm` in its compute dtype (bfloat16 in and out under
    mixed_bfloat16, the statistics in float32 inside the kernel) for
    `FUSED_MIN_ROWS` rows or more, else Keras' computation.

    Example:
    >>> layer = LayerNorm(epsilon=1e-12)
    >>> layer.onednn_forms = True
    >>> x = tf.constant([[1.0, 2.0, 3.0, 4.0]])
    >>> eager, traced = layer(x), tf.function(lambda v: layer(v, training=False))(x)
    >>> bool(tf.reduce_max(tf.abs(eager - traced)) < 1e-5)
    True
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.onednn_forms = False

    def call(self, inputs, training=None):
        if not fused_layer_norm_applies(inputs, self, training):
            return super().call(inputs)
        # [rows]: the fused kernel's set-up on each call outweighs the work
        # of a few rows (one request), where Keras' element-wise ops are faster.
        rows = inputs.shape[:-1].num_elements()
        if rows is None:
            # The width is known where the layer is built: the row count as
            # the size's share, two ops where a shape's product takes four.
            few_rows = tf.size(inputs, out_type=tf.int64) < FUSED_MIN_ROWS * inputs.shape[-1]
            return tf.cond(few_rows, lambda: super(LayerNorm, self).call(inputs),
                           lambda: fused_layer_norm(inputs, self.gamma, self.beta, self.epsilon))
        if rows < FUSED_MIN_ROWS:
            return super().call(inputs)
        return fused_layer_norm(inputs, self.gamma, self.beta, self.epsilon)
