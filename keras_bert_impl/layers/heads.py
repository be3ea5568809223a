"""Task heads with the original variable names: MLM, NSP and classifier."""

import keras
import tensorflow as tf
from keras import ops

from keras_bert_impl.layers.activations import get_activation
from keras_bert_impl.layers.embeddings import LAYER_NORM_EPSILON, truncated_normal
from keras_bert_impl.layers.gather import gather_indexes  # noqa: F401 (also imported from here)
from keras_bert_impl.layers.layer_norm import LayerNorm

_PACKAGE = "keras_bert_impl"


@keras.saving.register_keras_serializable(package=_PACKAGE)
class MaskedLMHead(keras.layers.Layer):
    """`cls/predictions`: transform, LayerNorm, then logits tied to the embeddings.

    The decoder is the word-embedding table (transposed), owned by the
    `WordEmbedding` layer passed in; only `output_bias` [vocab_size] is
    this head's own. The tie is a reference to another layer: the model that
    owns both rebuilds it from its own config, while `from_config` on the
    head alone rebuilds it with a fresh embedding layer of the same shape,
    whose weights it does not own (set them, or tie it, before use).

    Each variant's masked-LM head is this layer (docs/VARIANTS.md): the
    transform maps the encoder's `H` to the embedding width `E` (ALBERT's
    `predictions.dense`, H -> E; `H` itself elsewhere), RoBERTa's `lm_head`
    (dense, exact GELU, LayerNorm 1e-5, tied decoder, bias) and DistilBERT's
    `vocab_transform`/`vocab_layer_norm`/`vocab_projector` are the same
    computation under other names.

    Args:
        word_embedding: The model's `WordEmbedding` layer.
        hidden_act: Activation of the transform (the encoder's `hidden_act`;
            `BertConfig.masked_lm_act`).
        initializer_range: Stddev of the truncated-normal initializer.
        layer_norm_epsilon: The transform LayerNorm's epsilon.

    Call args:
        sequence_output: [batch_size, seq_length, H]; `H` may differ from
            the embedding width (ALBERT).
        masked_lm_positions: [batch_size, max_predictions_per_seq], or None
            when `sequence_output` holds only those positions already
            ([batch_size, max_predictions_per_seq, H]).

    Returns:
        Logits [batch_size, max_predictions_per_seq, vocab_size].

    Example:
    >>> from keras_bert_impl.layers.embeddings import WordEmbedding
    >>> embedding = WordEmbedding(vocab_size=10, hidden_size=4)
    >>> embedding.build((None, None))
    >>> head = MaskedLMHead(embedding)
    >>> head(keras.ops.ones((2, 5, 4)), keras.ops.zeros((2, 3), "int32")).shape
    TensorShape([2, 3, 10])
    """

    def __init__(self, word_embedding, hidden_act="gelu", initializer_range=0.02,
                 layer_norm_epsilon=LAYER_NORM_EPSILON, **kwargs):
        super().__init__(**kwargs)
        # Held without Keras tracking: the table belongs to the encoder, and
        # tracking it here would save it twice and list it under both owners.
        object.__setattr__(self, "word_embedding", word_embedding)
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon
        # The transform's output width: the embedding table's (E).
        self.hidden_size = word_embedding.hidden_size
        self.vocab_size = word_embedding.vocab_size
        self.transform = keras.layers.Dense(
            self.hidden_size,
            activation=get_activation(hidden_act),
            kernel_initializer=truncated_normal(initializer_range),
            dtype=self.dtype_policy,
            name="transform_dense",
        )
        self.layer_norm = LayerNorm(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="transform_LayerNorm"
        )

    def build(self, sequence_output_shape, masked_lm_positions_shape=None):
        # The encoder's width H (E only where the two are equal).
        self.transform.build((None, sequence_output_shape[-1]))
        self.layer_norm.build((None, self.hidden_size))
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.vocab_size,), initializer="zeros"
        )

    def call(self, sequence_output, masked_lm_positions=None):
        # [batch_size, num_positions, H]
        hidden = sequence_output
        if masked_lm_positions is not None:
            hidden = gather_indexes(sequence_output, masked_lm_positions)
        batch_size, num_positions = ops.shape(hidden)[0], ops.shape(hidden)[1]
        # [batch_size * num_positions, H] -> [batch_size * num_positions, E]
        hidden = self.layer_norm(self.transform(ops.reshape(hidden, (-1, self.transform.kernel.shape[0]))))
        # [batch_size * num_positions, vocab_size]. The table is used as
        # stored, [vocab_size, H], with the product transposing it: its
        # gradient then comes out in the table's layout, with no transpose of
        # a vocab-sized matrix per step.
        embeddings = ops.cast(self.word_embedding.embeddings, hidden.dtype)
        logits = tf.matmul(hidden, embeddings, transpose_b=True)
        logits = logits + ops.cast(self.output_bias, logits.dtype)
        # [batch_size, num_positions, vocab_size]
        return ops.reshape(logits, (batch_size, num_positions, self.vocab_size))

    def compute_output_shape(self, sequence_output_shape, masked_lm_positions_shape=None):
        if masked_lm_positions_shape is None:
            return (sequence_output_shape[0], sequence_output_shape[1], self.vocab_size)
        return (sequence_output_shape[0], masked_lm_positions_shape[1], self.vocab_size)

    def get_config(self):
        config = super().get_config()
        config.update(
            word_embedding=keras.layers.serialize(self.word_embedding),
            hidden_act=self.hidden_act,
            initializer_range=self.initializer_range,
            layer_norm_epsilon=self.layer_norm_epsilon,
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["word_embedding"] = keras.layers.deserialize(config["word_embedding"])
        return cls(**config)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class OutputProjection(keras.layers.Layer):
    """`logits = x · output_weightsᵀ + output_bias`, the original heads' layout.

    The original NSP head (`cls/seq_relationship`) and the run_classifier head
    store `output_weights` as [num_outputs, H] (transposed w.r.t. a Keras
    Dense kernel) next to `output_bias` [num_outputs]; this layer keeps that
    layout so checkpoints map one to one.

    Args:
        num_outputs: Number of logits (2 for NSP, `num_labels` for a classifier).
        initializer_range: Stddev of the truncated-normal initializer.

    Example:
    >>> OutputProjection(num_outputs=2)(keras.ops.ones((3, 4))).shape
    TensorShape([3, 2])
    """

    def __init__(self, num_outputs, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.num_outputs = num_outputs
        self.initializer_range = initializer_range

    def build(self, inputs_shape):
        self.output_weights = self.add_weight(
            name="output_weights",
            shape=(self.num_outputs, inputs_shape[-1]),
            initializer=truncated_normal(self.initializer_range),
        )
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.num_outputs,), initializer="zeros"
        )

    def call(self, inputs):
        # [batch_size, H] -> [batch_size, num_outputs]
        return ops.matmul(inputs, ops.transpose(self.output_weights)) + self.output_bias

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape[:-1]) + (self.num_outputs,)

    def get_config(self):
        config = super().get_config()
        config.update(num_outputs=self.num_outputs, initializer_range=self.initializer_range)
        return config
