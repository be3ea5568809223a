"""One original `layer_N` block and the `transformer_model` stack."""

import keras
import tensorflow as tf
from keras import ops

from keras_bert_impl.layers.activations import get_activation
from keras_bert_impl.layers.attention import SelfAttention, attention_mask_adder
from keras_bert_impl.layers.embeddings import LAYER_NORM_EPSILON, truncated_normal
from keras_bert_impl.layers.gather import gather_indexes
from keras_bert_impl.layers.layer_norm import LayerNorm
from keras_bert_impl.layers.token_rows import real_token_rows, rows_to_padded

_PACKAGE = "keras_bert_impl"


@keras.saving.register_keras_serializable(package=_PACKAGE)
class TransformerLayer(keras.layers.Layer):
    """A post-LayerNorm transformer block with the original's sub-scopes.

    `attention/self` (query/key/value), `attention/output` (dense, dropout,
    residual, LayerNorm), `intermediate` (dense + activation) and `output`
    (dense, dropout, residual, LayerNorm), computed on the [batch*seq, H]
    matrix as the original does.

    Args:
        hidden_size: `H`.
        num_attention_heads: `N`; must divide `H`.
        intermediate_size: Feed-forward width.
        hidden_act: Activation name (see `activations.get_activation`).
        hidden_dropout_prob: Dropout on sub-layer outputs.
        attention_probs_dropout_prob: Dropout on attention probabilities.
        initializer_range: Stddev of the truncated-normal initializer.
        layer_norm_epsilon: Epsilon of both LayerNorms (the original's 1e-12;
            RoBERTa's 1e-5).

    Call args:
        hidden_states: [batch_size, seq_length, H].
        mask_adder: [batch_size, 1, 1, seq_length] additive mask or None.
        query_positions: Optional [batch_size, num_queries]: compute the
            output only at these positions (see `SelfAttention`).

    Returns:
        `(layer_output, attention_probs)`; `layer_output` is
        [batch_size, seq_length, H], or [batch_size, num_queries, H] with
        `query_positions`.

    Example:
    >>> layer = TransformerLayer(hidden_size=8, num_attention_heads=2,
    ...                          intermediate_size=16)
    >>> output, probs = layer(keras.ops.ones((1, 3, 8)))
    >>> tuple(output.shape)
    (1, 3, 8)
    """

    def __init__(
        self,
        hidden_size,
        num_attention_heads,
        intermediate_size,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        initializer_range=0.02,
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon

        policy = self.dtype_policy
        initializer = truncated_normal(initializer_range)
        self.attention = SelfAttention(
            num_attention_heads,
            hidden_size // num_attention_heads,
            dropout_rate=attention_probs_dropout_prob,
            initializer_range=initializer_range,
            dtype=policy,
            name="self",
        )
        self.attention_output = keras.layers.Dense(
            hidden_size,
            kernel_initializer=initializer,
            dtype=policy,
            name="attention_output_dense",
        )
        self.attention_layer_norm = LayerNorm(
            epsilon=layer_norm_epsilon, dtype=policy, name="attention_output_LayerNorm"
        )
        self.intermediate = keras.layers.Dense(
            intermediate_size,
            activation=get_activation(hidden_act),
            kernel_initializer=initializer,
            dtype=policy,
            name="intermediate_dense",
        )
        self.output_dense = keras.layers.Dense(
            hidden_size, kernel_initializer=initializer, dtype=policy, name="output_dense"
        )
        self.output_layer_norm = LayerNorm(
            epsilon=layer_norm_epsilon, dtype=policy, name="output_LayerNorm"
        )
        self.dropout = keras.layers.Dropout(hidden_dropout_prob, dtype=policy)

    def build(self, hidden_states_shape, mask_adder_shape=None):
        matrix_shape = (None, self.hidden_size)
        self.attention.build(hidden_states_shape)
        self.attention_output.build(matrix_shape)
        self.attention_layer_norm.build(matrix_shape)
        self.intermediate.build(matrix_shape)
        self.output_dense.build((None, self.intermediate_size))
        self.output_layer_norm.build(matrix_shape)

    def call(self, hidden_states, mask_adder=None, training=None, query_positions=None):
        shape = ops.shape(hidden_states)
        residual = hidden_states
        if query_positions is not None:
            # [batch_size, num_queries, H]: the rows this layer outputs.
            residual = gather_indexes(hidden_states, query_positions)
            shape = (shape[0], ops.shape(query_positions)[1], self.hidden_size)
        # [batch_size * rows, H], rows = seq_length or num_queries
        matrix = ops.reshape(residual, (-1, self.hidden_size))
        context, probs = self.attention(
            hidden_states, mask_adder, training=training, query_positions=query_positions
        )
        context = ops.reshape(context, (-1, self.hidden_size))
        layer_output = self.after_attention(context, matrix, training=training)
        return ops.reshape(layer_output, shape), probs

    def call_on_rows(self, rows, token_positions, row_of_position, padded_shape, mask_adder,
                     training=None, dense=None):
        """The layer on the real tokens of a padded batch, as a [rows, H] matrix.

        Query, key, value and everything after attention run on the rows;
        only the attention products see the [batch, N, seq, seq] layout, and
        a masked key gets the original's -10000, whose exp() is exactly 0 in
        float32 and bfloat16, so each real row equals the padded layer's.

        Args:
            rows: [rows, H] the layer's input at the real tokens.
            token_positions, row_of_position: From `real_token_rows`.
            padded_shape: `(batch_size, seq_length)` of the padded batch.
            mask_adder: [batch_size, 1, 1, seq_length].
            training: Enables dropout.
            dense: Optional `dense(layer, x)` in place of `layer(x)` for the
                six Dense sub-layers (see `inference.padding_free.frozen_dense`).

        Returns:
            `(layer_output, attention_probs)`: [rows, H] and
            [batch_size, N, seq_length, seq_length].
        """
        fused = None if dense else self.attention.fused_query_key_value(rows, training)
        dense = dense or (lambda layer, x: layer(x))
        attention = self.attention
        batch_size, seq_length = padded_shape
        heads, size_per_head = attention.num_attention_heads, attention.size_per_head

        # `tf.gather` rather than `ops.take`: the row maps never hold a negative
        # index, and `ops.take`'s wrap-around of one costs four ops a call.
        def to_heads(x):
            # [rows, H] -> [batch * seq, H] -> [batch, seq, N, D] -> [batch, N, seq, D]
            x = ops.reshape(tf.gather(x, row_of_position), (batch_size, seq_length, heads, size_per_head))
            return attention._transpose(x, (0, 2, 1, 3), training)

        if fused is not None:
            # [rows, 3H] -> [batch * seq, 3H] -> 3 x [batch, N, seq, D]
            query_key_value = attention.split_fused_heads(tf.gather(fused, row_of_position), batch_size,
                                                          seq_length)
        else:
            query_key_value = [to_heads(dense(layer, rows))
                               for layer in (attention.query, attention.key, attention.value)]
        # [batch, N, seq, D]
        context, probs = attention.attend(*query_key_value, mask_adder, training=training)
        # [batch, N, seq, D] -> [batch, seq, N, D] -> [batch * seq, H] -> [rows, H]
        context = ops.reshape(attention._transpose(context, (0, 2, 1, 3), training), (-1, heads * size_per_head))
        context = tf.gather(context, token_positions)
        return self.after_attention(context, rows, training=training, dense=dense), probs

    def after_attention(self, context, residual, training=None, dense=None):
        """`attention/output`, `intermediate` and `output` on [rows, H] matrices.

        Args:
            context: [rows, H] attention context.
            residual: [rows, H] the layer's input at the same rows.
            training: Enables dropout.
            dense: Optional `dense(layer, x)` computing each of the three
                Dense sub-layers in place of `layer(x)` (padding-free
                inference passes one that reads frozen kernels).

        Returns:
            [rows, H] layer output.
        """
        dense = dense or (lambda layer, x: layer(x))
        attention_output = self.dropout(dense(self.attention_output, context), training=training)
        attention_output = self.attention_layer_norm(attention_output + residual)
        # [rows, intermediate_size]
        intermediate = dense(self.intermediate, attention_output)
        # [rows, H]
        layer_output = self.dropout(dense(self.output_dense, intermediate), training=training)
        return self.output_layer_norm(layer_output + attention_output)

    def compute_output_shape(self, hidden_states_shape, mask_adder_shape=None, query_positions_shape=None):
        return self.attention.compute_output_shape(hidden_states_shape, None, query_positions_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            num_attention_heads=self.num_attention_heads,
            intermediate_size=self.intermediate_size,
            hidden_act=self.hidden_act,
            hidden_dropout_prob=self.hidden_dropout_prob,
            attention_probs_dropout_prob=self.attention_probs_dropout_prob,
            initializer_range=self.initializer_range,
            layer_norm_epsilon=self.layer_norm_epsilon,
        )
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class TransformerEncoder(keras.layers.Layer):
    """The original `transformer_model`: `num_hidden_layers` blocks (`layer_N`).

    With `num_hidden_groups`, ALBERT's `transformer_model` instead: the
    weights are `num_hidden_groups` groups of `inner_group_num` blocks
    (`layer_groups[G][J]`, ALBERT's `transformer/group_G/inner_group_J`), and
    layer `i` runs group `int(i / num_hidden_layers * num_hidden_groups)`,
    its blocks one after another. `blocks` is then the sequence of blocks as
    they run, `num_hidden_layers * inner_group_num` of them, one object
    repeated wherever its weights are shared; everything that walks
    `blocks` (this layer's `call`, padding-free inference) runs ALBERT as it
    runs BERT.

    Args:
        num_hidden_layers: Number of `TransformerLayer`s.
        num_hidden_groups: ALBERT's number of weight groups, or None for
            one block of its own per layer (the original).
        inner_group_num: ALBERT's blocks per group.
        (the remaining args are those of `TransformerLayer`)

        real_tokens_only: Run every per-token operation on the real tokens
            only (`TransformerLayer.call_on_rows`), for training and
            evaluation on batches with padding. Real positions come out as
            in the padded computation (within float rounding); padded
            positions come out as zeros, where the padded computation gives
            values that a loss over real tokens never reads. Also settable
            on a built model (`inference.padding_free.set_real_tokens_only`).
            Ignored with `output_positions` or without `input_mask`.

    Call args:
        hidden_states: [batch_size, seq_length, H] embeddings output.
        input_mask: [batch_size, seq_length], 1 for real tokens, 0 for padding
            (or None: attend everywhere).
        output_positions: Optional [batch_size, num_outputs]: the last layer
            computes only these positions, all a pretraining loss reads
            ([CLS] and the masked tokens); the other layers are unchanged.

    Returns:
        `(all_layer_outputs, all_attention_probs)`: lists with one
        [batch_size, seq_length, H] and one [batch, N, seq, seq] tensor per
        block run (per layer but in ALBERT with `inner_group_num` > 1, as
        ALBERT's `all_layer_outputs`; the last [batch_size, num_outputs, H] and
        [batch, N, num_outputs, seq] with `output_positions`).

    Example:
    >>> encoder = TransformerEncoder(num_hidden_layers=2, hidden_size=8,
    ...                              num_attention_heads=2, intermediate_size=16)
    >>> outputs, probs = encoder(keras.ops.ones((1, 3, 8)))
    >>> len(outputs), tuple(outputs[-1].shape)
    (2, (1, 3, 8))
    >>> albert = TransformerEncoder(num_hidden_layers=4, hidden_size=8, num_attention_heads=2,
    ...                             intermediate_size=16, num_hidden_groups=1)
    >>> outputs, _ = albert(keras.ops.ones((1, 3, 8)))
    >>> len(outputs), len(albert.blocks), len(albert.trainable_weights)
    (4, 4, 16)
    """

    def __init__(
        self,
        num_hidden_layers,
        hidden_size,
        num_attention_heads,
        intermediate_size,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        initializer_range=0.02,
        real_tokens_only=False,
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        num_hidden_groups=None,
        inner_group_num=1,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.real_tokens_only = real_tokens_only  # (a property: it also sets `supports_jit`)
        self.num_hidden_layers = num_hidden_layers
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon
        self.num_hidden_groups = num_hidden_groups
        self.inner_group_num = inner_group_num

        def block(name):
            return TransformerLayer(
                hidden_size,
                num_attention_heads,
                intermediate_size,
                hidden_act=hidden_act,
                hidden_dropout_prob=hidden_dropout_prob,
                attention_probs_dropout_prob=attention_probs_dropout_prob,
                initializer_range=initializer_range,
                layer_norm_epsilon=layer_norm_epsilon,
                dtype=self.dtype_policy,
                name=name,
            )

        if num_hidden_groups is None:
            self.layer_groups = None
            self.blocks = [block(f"layer_{i}") for i in range(num_hidden_layers)]
        else:
            # Owned here, once; `blocks` below refers to them again (Keras
            # tracks each weight once, however often it is referred to).
            self.layer_groups = [
                [block(f"group_{g}_inner_group_{j}") for j in range(inner_group_num)]
                for g in range(num_hidden_groups)
            ]
            # ALBERT's own arithmetic (a float quotient, truncated).
            self.blocks = [
                layer
                for i in range(num_hidden_layers)
                for layer in self.layer_groups[int(i / num_hidden_layers * num_hidden_groups)]
            ]

    def build(self, hidden_states_shape, input_mask_shape=None):
        for block in self.blocks:
            if not block.built:
                block.build(hidden_states_shape)

    @property
    def real_tokens_only(self):
        return self._real_tokens_only

    @real_tokens_only.setter
    def real_tokens_only(self, enabled):
        # The real-token row count changes from batch to batch, which XLA cannot
        # compile: Keras' `jit_compile="auto"` (XLA on a GPU) then leaves XLA off.
        self._real_tokens_only = bool(enabled)
        self.supports_jit = not enabled

    def call(self, hidden_states, input_mask=None, training=None, output_positions=None):
        mask_adder = None
        if input_mask is not None:
            # [batch_size, 1, 1, seq_length]
            mask_adder = attention_mask_adder(input_mask, self.compute_dtype)
            if self.real_tokens_only and output_positions is None:
                return self._call_on_real_tokens(hidden_states, input_mask, mask_adder, training)
        all_outputs, all_probs = [], []
        for index, block in enumerate(self.blocks):
            last = index == len(self.blocks) - 1
            hidden_states, probs = block(
                hidden_states, mask_adder, training=training,
                query_positions=output_positions if last else None,
            )
            all_outputs.append(hidden_states)
            all_probs.append(probs)
        return all_outputs, all_probs

    def _call_on_real_tokens(self, hidden_states, input_mask, mask_adder, training):
        """`call` with the per-token work on real tokens only (see `real_tokens_only`)."""
        shape = ops.shape(hidden_states)
        token_positions, row_of_position = real_token_rows(input_mask)
        # [batch * seq, H] -> [rows, H]
        rows = tf.gather(ops.reshape(hidden_states, (-1, self.hidden_size)), token_positions)
        all_outputs, all_probs = [], []
        for block in self.blocks:
            rows, probs = block.call_on_rows(
                rows, token_positions, row_of_position, (shape[0], shape[1]), mask_adder, training=training
            )
            # [batch, seq, H], zeros at padding.
            all_outputs.append(rows_to_padded(rows, row_of_position, input_mask))
            all_probs.append(probs)
        return all_outputs, all_probs

    def compute_output_shape(self, hidden_states_shape, input_mask_shape=None, output_positions_shape=None):
        batch, seq = hidden_states_shape[0], hidden_states_shape[1]
        probs = (batch, self.num_attention_heads, seq, seq)
        n = len(self.blocks)
        outputs, all_probs = [tuple(hidden_states_shape)] * n, [probs] * n
        if n and output_positions_shape is not None:
            queries = output_positions_shape[1]
            outputs[-1] = (batch, queries, hidden_states_shape[-1])
            all_probs[-1] = (batch, self.num_attention_heads, queries, seq)
        return outputs, all_probs

    def get_config(self):
        config = super().get_config()
        config.update(
            num_hidden_layers=self.num_hidden_layers,
            hidden_size=self.hidden_size,
            num_attention_heads=self.num_attention_heads,
            intermediate_size=self.intermediate_size,
            hidden_act=self.hidden_act,
            hidden_dropout_prob=self.hidden_dropout_prob,
            attention_probs_dropout_prob=self.attention_probs_dropout_prob,
            initializer_range=self.initializer_range,
            real_tokens_only=self.real_tokens_only,
            layer_norm_epsilon=self.layer_norm_epsilon,
            num_hidden_groups=self.num_hidden_groups,
            inner_group_num=self.inner_group_num,
        )
        return config
