"""The original `attention_layer` (scope `attention/self`) as a Keras layer."""

import math

import keras
import tensorflow as tf
from keras import ops

from keras_bert_impl.layers.embeddings import truncated_normal
from keras_bert_impl.layers.gather import gather_indexes
from keras_bert_impl.layers.onednn_forms import traced_outside_xla

_PACKAGE = "keras_bert_impl"

# The original adds this to the scores of masked positions; softmax then gives
# them ~0 weight. Kept as is (not -inf) so padded rows match the original too.
MASK_ADDER = -10000.0
_SAME_WIDTH_INTEGER = {2: tf.int16, 4: tf.int32, 8: tf.int64}
# Grappler folds constants of up to 10 MB; a larger concatenation of the
# query, key and value kernels would be copied on every call.
MAX_FUSED_KERNEL_BYTES = 8 << 20


def _is_graph_constant(value):
    """Whether `value` is a constant of the graph being traced (a `ConstantKernels` read)."""
    return isinstance(value, tf.Tensor) and not tf.executing_eagerly() and getattr(value.op, "type", None) == "Const"


def attention_mask_adder(input_mask, dtype="float32"):
    """Turns a [batch, seq] 0/1 mask into the original's additive bias.

    Args:
        input_mask: [batch_size, seq_length], 1 at tokens to attend to and 0
            at padding (any numeric dtype).
        dtype: dtype of the result, normally the attention scores' compute
            dtype.

    Returns:
        [batch_size, 1, 1, seq_length]: 0 where attended, -10000 where masked.
    """
    mask = ops.cast(input_mask, dtype)
    return (1.0 - mask)[:, None, None, :] * MASK_ADDER


def transpose_as_bits(x, perm):
    """`tf.transpose(x, perm)` done on the bits of `x` as integers of its width.

    With TensorFlow's oneDNN rewrites on, a float32 or bfloat16 transpose
    runs as a oneDNN reorder, whose set-up on every call costs far more than
    moving the few thousand values of one request's heads; the same bits
    moved as int32 or int16 take Eigen's plain transpose. A bitcast is free
    and exact (docs/BENCHMARKS.md, "Where one request's time goes").

    Args:
        x: A tensor of a 16-, 32- or 64-bit dtype.
        perm: The permutation of its axes.

    Example:
    >>> x = tf.reshape(tf.range(6, dtype=tf.float32) / 7, [1, 2, 3])
    >>> bool(tf.reduce_all(transpose_as_bits(x, (0, 2, 1)) == tf.transpose(x, (0, 2, 1))))
    True
    """
    x = tf.convert_to_tensor(x)
    bits = _SAME_WIDTH_INTEGER.get(x.dtype.size)
    if bits is None or x.dtype.is_integer:
        return tf.transpose(x, perm)
    return tf.bitcast(tf.transpose(tf.bitcast(x, bits), perm), x.dtype)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class SelfAttention(keras.layers.Layer):
    """Multi-head scaled dot-product self-attention with the original's weights.

    Holds `query`, `key` and `value` dense layers (kernels [H, H]) exactly as
    the original `attention/self` scope, works on the [batch*seq, H] matrix
    form that the original uses, and applies the -10000 additive mask.

    Args:
        num_attention_heads: Number of heads `N`.
        size_per_head: Width of each head `D` (`H = N * D`).
        dropout_rate: `attention_probs_dropout_prob`.
        initializer_range: Stddev of the truncated-normal initializer.

    Attributes:
        onednn_forms: For inference in a traced graph outside XLA, give the
            softmax its bfloat16 scores as they are, as oneDNN's softmax
            takes them (`layers.onednn_forms`; set by the inference plan,
            off by default).

    Call args:
        hidden_states: [batch_size, seq_length, H].
        mask_adder: [batch_size, 1, 1, seq_length] from `attention_mask_adder`.
        training: Enables dropout.
        query_positions: Optional [batch_size, num_queries] positions: only
            these rows attend (keys and values still cover every position).
            The result is those rows of the full computation, at a fraction
            of the cost when few rows are needed (a model's last layer).

    Returns:
        `(context, probs)`: [batch_size, seq_length, H] and
        [batch_size, N, seq_length, seq_length] (`num_queries` in place of the
        first `seq_length` with `query_positions`).

    Example:
    >>> layer = SelfAttention(num_attention_heads=2, size_per_head=4)
    >>> x = keras.ops.ones((1, 3, 8))
    >>> context, probs = layer(x, attention_mask_adder(keras.ops.ones((1, 3))))
    >>> tuple(context.shape), tuple(probs.shape)
    ((1, 3, 8), (1, 2, 3, 3))
    """

    def __init__(
        self,
        num_attention_heads,
        size_per_head,
        dropout_rate=0.1,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_attention_heads = num_attention_heads
        self.size_per_head = size_per_head
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        width = num_attention_heads * size_per_head
        dense = lambda name: keras.layers.Dense(  # noqa: E731
            width,
            kernel_initializer=truncated_normal(initializer_range),
            dtype=self.dtype_policy,
            name=name,
        )
        self.query = dense("query")
        self.key = dense("key")
        self.value = dense("value")
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy)
        self.onednn_forms = False

    def build(self, hidden_states_shape, mask_adder_shape=None):
        for layer in (self.query, self.key, self.value):
            layer.build((None, hidden_states_shape[-1]))

    def _split_heads(self, x, batch_size, seq_length, training=None):
        # [batch*seq, N*D] -> [batch, N, seq, D]
        x = ops.reshape(
            x, (batch_size, seq_length, self.num_attention_heads, self.size_per_head)
        )
        return self._transpose(x, (0, 2, 1, 3), training)

    def _transpose(self, x, perm, training=None):
        """`ops.transpose`, moved as integer bits for inference on oneDNN (`transpose_as_bits`)."""
        if not training and self.onednn_forms and traced_outside_xla():
            return transpose_as_bits(x, perm)
        return ops.transpose(x, perm)

    def call(self, hidden_states, mask_adder=None, training=None, query_positions=None):
        shape = ops.shape(hidden_states)
        batch_size, seq_length, width = shape[0], shape[1], hidden_states.shape[-1]
        # [batch_size * seq_length, H]: the original's reshape_to_matrix.
        matrix = ops.reshape(hidden_states, (-1, width))
        query_matrix, query_length = matrix, seq_length
        if query_positions is not None:
            # [batch_size * num_queries, H]
            query_matrix = ops.reshape(gather_indexes(hidden_states, query_positions), (-1, width))
            query_length = ops.shape(query_positions)[1]
        fused = self.fused_query_key_value(matrix, training)
        if fused is not None:
            query, key, value = self.split_fused_heads(fused, batch_size, seq_length)
            if query_positions is not None:
                # The queries at their positions: [batch, N, seq, D] -> [batch, N, queries, D]
                query = tf.gather(query, query_positions, axis=2, batch_dims=1)
        else:
            query = self._split_heads(self.query(query_matrix), batch_size, query_length, training)
            key = self._split_heads(self.key(matrix), batch_size, seq_length, training)
            value = self._split_heads(self.value(matrix), batch_size, seq_length, training)

        # [batch, N, queries, D]
        context, probs = self.attend(query, key, value, mask_adder, training=training)
        # [batch, N, queries, D] -> [batch, queries, N, D] -> [batch, queries, H]
        context = ops.reshape(self._transpose(context, (0, 2, 1, 3), training), (batch_size, query_length, width))
        return context, probs

    def fused_query_key_value(self, matrix, training=None):
        """Query, key and value of `matrix` [rows, H] as one product [rows, 3H], where that applies; else None.

        It applies for inference on oneDNN (`onednn_forms`, traced outside
        XLA) where the three kernels are constants of the graph being traced
        (an export's, `make_inference_function(freeze_kernels=True)`'s):
        grappler folds their concatenation into one constant, and one
        oneDNN product on [H, 3H] replaces three on [H, H], whose set-up
        dominates one request's (docs/BENCHMARKS.md, "Where one request's
        time goes"). In float32 only: in bfloat16 it measured no gain. Past
        `MAX_FUSED_KERNEL_BYTES` grappler would not fold the concatenation,
        so the three layers run as they are. (Packed variable kernels,
        `inference.packed_kernels`, give this method one of their own, on a
        variable holding the three kernels side by side.) Where only some
        positions' queries are wanted, the fused product still runs on every
        row and the queries are gathered after.

        Args:
            matrix: [rows, H].
            training: Fusion is for inference only.

        Returns:
            [rows, 3H] (query, key, value side by side), or None where the
            caller should run the three Dense layers.
        """
        if training or not self.onednn_forms or self.compute_dtype != "float32" or not traced_outside_xla():
            return None
        layers = (self.query, self.key, self.value)
        if any(layer.bias is None for layer in layers):
            return None
        kernels = [layer.kernel.value for layer in layers]
        if not all(_is_graph_constant(kernel) for kernel in kernels):
            return None
        if sum(kernel.shape.num_elements() * kernel.dtype.size for kernel in kernels) > MAX_FUSED_KERNEL_BYTES:
            return None
        dtype = self.compute_dtype
        # [H, 3H] and [3H]
        kernel = tf.cast(tf.concat(kernels, axis=1), dtype)
        bias = tf.cast(tf.concat([layer.bias.value for layer in layers], axis=0), dtype)
        # [rows, H] x [H, 3H] -> [rows, 3H]
        return tf.nn.bias_add(tf.matmul(tf.cast(matrix, dtype), kernel), bias)

    def split_fused_heads(self, fused, batch_size, seq_length):
        """`(query, key, value)`, each [batch, N, seq, D], from `fused_query_key_value`'s [batch * seq, 3H]."""
        heads, size = self.num_attention_heads, self.size_per_head
        # [batch * seq, 3H] -> [batch, seq, 3, N, D] -> [3, batch, N, seq, D]
        fused = ops.reshape(fused, (batch_size, seq_length, 3, heads, size))
        return tf.unstack(transpose_as_bits(fused, (2, 0, 3, 1, 4)), num=3, axis=0)

    def attend(self, query, key, value, mask_adder=None, training=None):
        """Scaled dot-product attention on per-head tensors.

        Args:
            query: [batch, N, queries, D].
            key, value: [batch, N, seq, D].
            mask_adder: [batch, 1, 1, seq] or None.
            training: Enables dropout on the probabilities.

        Returns:
            `(context, probs)`: [batch, N, queries, D] and [batch, N, queries, seq].
        """
        # The original scales the scores by 1/sqrt(D); scaling the queries
        # instead touches D values per row rather than seq_length, and for
        # D = 64 (every released BERT) the factor 1/8 is a power of two, so
        # the scores are bit-identical.
        query = query * ops.cast(1.0 / math.sqrt(self.size_per_head), query.dtype)
        # [batch, N, queries, seq]
        scores = ops.matmul(query, ops.transpose(key, (0, 1, 3, 2)))
        if mask_adder is not None:
            scores = scores + ops.cast(mask_adder, scores.dtype)
        # Softmax in float32 even under mixed precision: -10000 and exp() need
        # it. oneDNN's softmax takes bfloat16 and computes in float32 inside,
        # so for inference on its kernels the two casts around it (two passes
        # over [batch, N, queries, seq]) go.
        if not training and self.onednn_forms and scores.dtype == "bfloat16" and traced_outside_xla():
            probs = ops.softmax(scores, axis=-1)
        else:
            probs = ops.cast(ops.softmax(ops.cast(scores, "float32"), axis=-1), scores.dtype)
        dropped = self.dropout(probs, training=training)
        return ops.matmul(dropped, value), probs

    def compute_output_shape(self, hidden_states_shape, mask_adder_shape=None, query_positions_shape=None):
        batch, seq = hidden_states_shape[0], hidden_states_shape[1]
        queries = seq if query_positions_shape is None else query_positions_shape[1]
        return (
            (batch, queries, hidden_states_shape[-1]),
            (batch, self.num_attention_heads, queries, seq),
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            num_attention_heads=self.num_attention_heads,
            size_per_head=self.size_per_head,
            dropout_rate=self.dropout_rate,
            initializer_range=self.initializer_range,
        )
        return config
