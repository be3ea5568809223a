"""The original `embedding_lookup` and `embedding_postprocessor` as Keras layers."""

import keras
import tensorflow as tf
from keras import ops

from keras_bert_impl.errors import SequenceLengthError
from keras_bert_impl.layers.graph_checks import check, ids_in_range
from keras_bert_impl.layers.layer_norm import LayerNorm

_PACKAGE = "keras_bert_impl"
LAYER_NORM_EPSILON = 1e-12  # what tf.contrib.layers.layer_norm used in the original


def truncated_normal(initializer_range):
    """The original's `create_initializer`: truncated normal, given stddev.

    Args:
        initializer_range: Stddev of the normal distribution (the config's
            `initializer_range`, 0.02 in every released BERT).

    Returns:
        A `keras.initializers.TruncatedNormal` with mean 0 and that stddev
        (values beyond two stddevs are redrawn, as `tf.truncated_normal`).
    """
    return keras.initializers.TruncatedNormal(stddev=initializer_range)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class WordEmbedding(keras.layers.Layer):
    """Word embeddings (`bert/embeddings/word_embeddings`), the original `embedding_lookup`.

    The same table is the MLM output projection (`cls/predictions` is tied to
    it), so the layer exposes it as `self.embeddings`.

    Args:
        vocab_size: Number of WordPiece ids.
        hidden_size: Embedding width.
        initializer_range: Stddev of the truncated-normal initializer.

    Example:
    >>> layer = WordEmbedding(vocab_size=10, hidden_size=4)
    >>> layer(keras.ops.convert_to_tensor([[1, 2, 3]])).shape
    TensorShape([1, 3, 4])
    """

    def __init__(self, vocab_size, hidden_size, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        # Ids are looked up as they come: Keras would cast float ids to a
        # bfloat16/float16 compute dtype first (30001 -> 29952), as
        # `keras.layers.Embedding` also prevents.
        self.autocast = False
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range

    def build(self, input_shape):
        self.embeddings = self.add_weight(
            name="word_embeddings",
            shape=(self.vocab_size, self.hidden_size),
            initializer=truncated_normal(self.initializer_range),
        )

    def call(self, input_ids):
        # [batch_size, seq_length] -> [batch_size, seq_length, hidden_size]
        # tf.gather, as the original: `ops.take` would wrap a negative id
        # around to the last rows instead of failing on it.
        table = ops.cast(self.embeddings, self.compute_dtype)  # autocast is off: cast here, as Keras' Embedding
        return tf.gather(table, ops.cast(input_ids, "int32"))

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.hidden_size,)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            initializer_range=self.initializer_range,
        )
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class EmbeddingPostprocessor(keras.layers.Layer):
    """Adds token-type and position embeddings, then LayerNorm and dropout.

    Mirrors the original `embedding_postprocessor` (`bert/embeddings/...`):
    `token_type_embeddings` [type_vocab_size, E], `position_embeddings`
    [max_position_embeddings, E] sliced to the sequence length, and
    `LayerNorm` (epsilon 1e-12). `E` is the embedding width (`H` but in ALBERT).

    The variants configure it (docs/VARIANTS.md): `type_vocab_size=0` adds no
    token types (DistilBERT; `segment_ids` are then ignored);
    `position_offset` starts the positions at that row (RoBERTa's 2: rows 0
    and 1 belong to its padding index, never read here); `projection_size`
    ends with ALBERT's `embedding_hidden_mapping_in`, a dense layer from `E`
    to `H` (ALBERT scopes it in `bert/encoder`; it sits here so that every
    consumer of the embeddings gets `H`-wide rows).

    RoBERTa's position ids: Hugging Face counts them from the non-pad tokens
    (`cumsum(input_ids != padding_idx) + padding_idx`), so padded slots read
    row `padding_idx` and real tokens rows `padding_idx + 1 + i`. Here slot
    `i` always reads row `position_offset + i`: the same rows at every real
    token of a left-aligned input (padding only at the end, no `<pad>` id
    among the real tokens), which is every input our preprocessors make;
    padded slots differ, and the attention mask keeps them from every real
    token.

    Args:
        hidden_size: Embedding width `E` (the tables' width).
        type_vocab_size: Number of segment ids; 0 for none.
        max_position_embeddings: Rows of the position table; input longer
            than `max_position_embeddings - position_offset` raises
            `SequenceLengthError`.
        dropout_rate: `hidden_dropout_prob`.
        initializer_range: Stddev of the truncated-normal initializer.
        position_offset: First row of the position table read.
        layer_norm_epsilon: The LayerNorm's epsilon.
        projection_size: When given, the output is projected to this width
            (`embedding_projection`, ALBERT's `embedding_hidden_mapping_in`).

    Example:
    >>> layer = EmbeddingPostprocessor(hidden_size=4, type_vocab_size=2,
    ...                                max_position_embeddings=8)
    >>> word = keras.ops.ones((1, 3, 4))
    >>> layer(word, keras.ops.convert_to_tensor([[0, 0, 1]])).shape
    TensorShape([1, 3, 4])
    >>> albert = EmbeddingPostprocessor(hidden_size=4, type_vocab_size=2, max_position_embeddings=8,
    ...                                 projection_size=6)
    >>> albert(word, keras.ops.convert_to_tensor([[0, 0, 1]])).shape
    TensorShape([1, 3, 6])
    """

    def __init__(
        self,
        hidden_size,
        type_vocab_size=16,
        max_position_embeddings=512,
        dropout_rate=0.1,
        initializer_range=0.02,
        position_offset=0,
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        projection_size=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.type_vocab_size = type_vocab_size
        self.max_position_embeddings = max_position_embeddings
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        self.position_offset = position_offset
        self.layer_norm_epsilon = layer_norm_epsilon
        self.projection_size = projection_size
        self.layer_norm = LayerNorm(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="LayerNorm"
        )
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy)
        self.embedding_projection = None
        if projection_size is not None:
            self.embedding_projection = keras.layers.Dense(
                projection_size,
                kernel_initializer=truncated_normal(initializer_range),
                dtype=self.dtype_policy,
                name="embedding_hidden_mapping_in",
            )

    def build(self, word_embeddings_shape, segment_ids_shape=None):
        initializer = truncated_normal(self.initializer_range)
        self.token_type_embeddings = None
        if self.type_vocab_size:
            self.token_type_embeddings = self.add_weight(
                name="token_type_embeddings",
                shape=(self.type_vocab_size, self.hidden_size),
                initializer=initializer,
            )
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(self.max_position_embeddings, self.hidden_size),
            initializer=initializer,
        )
        self.layer_norm.build(word_embeddings_shape)
        if self.embedding_projection is not None:
            self.embedding_projection.build((None, self.hidden_size))

    def _check_length(self, seq_length):
        limit = self.max_position_embeddings - self.position_offset
        # The original's words where there is no offset: the two are the same limit then.
        what = "max_position_embeddings" if not self.position_offset else (
            f"max_position_embeddings - position_offset ({self.max_position_embeddings} - {self.position_offset})")
        if isinstance(seq_length, int):
            if seq_length > limit:
                raise SequenceLengthError(f"sequence length {seq_length} exceeds {what} {limit}")
            return []
        return [check(seq_length <= limit, f"sequence length exceeds {what}", "sequence length:", seq_length)]

    def call(self, word_embeddings, segment_ids, training=None):
        seq_length = word_embeddings.shape[1]
        if seq_length is None:
            seq_length = ops.shape(word_embeddings)[1]
        checks = self._check_length(seq_length)
        with tf.control_dependencies(checks):
            # [seq_length, E], broadcast over the batch.
            offset = self.position_offset
            positions = self.position_embeddings[offset:offset + seq_length] if offset else (
                self.position_embeddings[:seq_length])
        output = word_embeddings
        if self.token_type_embeddings is not None:
            output = output + self._token_types(segment_ids)
        output = output + positions  # in the original's order: (word + token type) + position
        output = self.dropout(self.layer_norm(output), training=training)
        if self.embedding_projection is not None:
            # [batch_size, seq_length, E] -> [batch_size, seq_length, H]
            output = self.embedding_projection(output)
        return output

    def _token_types(self, segment_ids):
        """The token-type rows of `segment_ids`, by the original's one-hot
        product: its gradient is one dense [type_vocab_size, H] tensor, so
        clipping by global norm measures what the original's does (a gather's
        gradient holds one row per token, whose squares sum to another norm).
        An id outside [0, type_vocab_size) is an error (the original's one-hot
        rows would be silently zero)."""
        ids = ops.cast(segment_ids, "int32")
        checks = ids_in_range(ids, self.type_vocab_size, "segment_ids holds a negative id",
                              f"segment_ids holds an id >= type_vocab_size {self.type_vocab_size}")
        table = ops.convert_to_tensor(self.token_type_embeddings)
        with tf.control_dependencies(checks):
            # [batch_size * seq_length, type_vocab_size]
            one_hot = tf.one_hot(tf.reshape(ids, [-1]), self.type_vocab_size, dtype=table.dtype)
        # [batch_size * seq_length, hidden_size] -> [batch_size, seq_length, hidden_size]
        flat = tf.matmul(one_hot, table)
        return tf.reshape(flat, tf.concat([tf.shape(ids), [self.hidden_size]], axis=0))

    def compute_output_shape(self, word_embeddings_shape, segment_ids_shape=None):
        if self.projection_size is not None:
            return tuple(word_embeddings_shape[:-1]) + (self.projection_size,)
        return word_embeddings_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            type_vocab_size=self.type_vocab_size,
            max_position_embeddings=self.max_position_embeddings,
            dropout_rate=self.dropout_rate,
            initializer_range=self.initializer_range,
            position_offset=self.position_offset,
            layer_norm_epsilon=self.layer_norm_epsilon,
            projection_size=self.projection_size,
        )
        return config
