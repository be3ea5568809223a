"""The original pooler (`bert/pooler/dense`): a tanh dense layer on the [CLS] vector
(DistilBERT's `pre_classifier`: ReLU in place of tanh)."""

import keras

from keras_bert_impl.layers.activations import get_activation
from keras_bert_impl.layers.embeddings import truncated_normal

_PACKAGE = "keras_bert_impl"


@keras.saving.register_keras_serializable(package=_PACKAGE)
class Pooler(keras.layers.Layer):
    """Takes the first token's hidden state through a dense layer and its activation (tanh).

    Args:
        hidden_size: `H`.
        initializer_range: Stddev of the truncated-normal initializer.
        activation: A name of `activations.get_activation`: the original's
            `"tanh"`; `"relu"` is DistilBERT's `pre_classifier`
            (`BertConfig.pooler_act`).

    Example:
    >>> Pooler(hidden_size=4)(keras.ops.ones((2, 3, 4))).shape
    TensorShape([2, 4])
    >>> bool(keras.ops.all(Pooler(hidden_size=4, activation="relu")(keras.ops.ones((2, 3, 4))) >= 0))
    True
    """

    def __init__(self, hidden_size, initializer_range=0.02, activation="tanh", **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.activation = activation
        self.dense = keras.layers.Dense(
            hidden_size,
            activation=get_activation(activation),
            kernel_initializer=truncated_normal(initializer_range),
            dtype=self.dtype_policy,
            name="dense",
        )

    def build(self, sequence_output_shape):
        self.dense.build((None, self.hidden_size))

    def call(self, sequence_output):
        # [batch_size, seq_length, H] -> [batch_size, H]
        return self.dense(sequence_output[:, 0, :])

    def compute_output_shape(self, sequence_output_shape):
        return (sequence_output_shape[0], self.hidden_size)

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size, initializer_range=self.initializer_range, activation=self.activation
        )
        return config
