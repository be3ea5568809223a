"""BERT inference that skips padding: per-token work on real tokens only.

In a batch of unequal sentences padded to one length, every per-token
operation of a transformer layer (query/key/value, attention output, the
feed-forward pair, both LayerNorms) is wasted on the padded positions. Here
the real tokens are gathered into one [num_real_tokens, H] matrix that goes
through every layer; only the attention products, which need the
[batch, seq] layout, see a padded tensor (zeros at the padded positions).

The outputs at real positions are those of `BertModel`: a masked key gets
the original's -10000 added to its score, and exp(-10000) is exactly 0 in
float32 and bfloat16, so no real token ever reads a padded one. Padded
positions of `sequence_output` come out as zeros, where the original computes
values nobody should read.
"""

import tensorflow as tf

from keras_bert_impl.layers.attention import attention_mask_adder


def _attention_context(attention, hidden, real, padded_shape, mask_adder):
    """The layer's attention for the real tokens of a padded batch.

    Args:
        attention: The layer's `SelfAttention`.
        hidden: [num_real_tokens, H] the layer's input at the real tokens.
        real: [num_real_tokens, 1] flat positions of the real tokens.
        padded_shape: `(batch_size, seq_length)`.
        mask_adder: [batch_size, 1, 1, seq_length].

    Returns:
        [num_real_tokens, H] attention context of the real tokens.
    """
    batch_size, seq_length = padded_shape
    heads, size_per_head = attention.num_attention_heads, attention.size_per_head
    width = heads * size_per_head

    def to_heads(x):
        # [num_real_tokens, H] -> [batch * seq, H] (zeros at padding) -> [batch, N, seq, D]
        x = tf.scatter_nd(real, x, [batch_size * seq_length, width])
        x = tf.reshape(x, [batch_size, seq_length, heads, size_per_head])
        return tf.transpose(x, [0, 2, 1, 3])

    # [batch, N, seq, D]
    context, _ = attention.attend(
        to_heads(attention.query(hidden)), to_heads(attention.key(hidden)),
        to_heads(attention.value(hidden)), mask_adder, training=False,
    )
    # [batch, seq, N, D] -> [batch * seq, H] -> [num_real_tokens, H]
    context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [batch_size * seq_length, width])
    return tf.gather_nd(context, real)


def padding_free_forward(bert_model, inputs):
    """`bert_model(inputs, training=False)` with per-token work on real tokens only.

    Args:
        bert_model: A `BertModel`.
        inputs: Dict of `input_ids`, `input_mask`, `segment_ids` [batch, seq].

    Returns:
        Dict of `sequence_output` [batch, seq, H] (zeros at padded positions)
        and `pooled_output` [batch, H].

    Example:
    >>> import numpy as np
    >>> from keras_bert_impl.config import BertConfig
    >>> from keras_bert_impl.models.bert_model import BertModel
    >>> model = BertModel(BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
    ...                              num_attention_heads=2, intermediate_size=16))
    >>> inputs = {"input_ids": np.array([[2, 5, 7, 0]]), "input_mask": np.array([[1, 1, 1, 0]]),
    ...           "segment_ids": np.zeros((1, 4), "int32")}
    >>> fast, full = padding_free_forward(model, inputs), model(inputs)
    >>> bool(np.allclose(fast["sequence_output"][:, :3], full["sequence_output"][:, :3], atol=1e-5))
    True
    """
    input_ids = tf.convert_to_tensor(inputs["input_ids"])
    input_mask = tf.convert_to_tensor(inputs["input_mask"])
    batch_size, seq_length = tf.shape(input_ids)[0], tf.shape(input_ids)[1]
    hidden_size = bert_model.bert_config.hidden_size

    # [batch, seq, H]
    embedded = bert_model.word_embedding(input_ids)
    embedded = bert_model.embedding_postprocessor(embedded, inputs["segment_ids"], training=False)
    # [num_real_tokens, 1] flat positions of the real tokens.
    real = tf.where(tf.reshape(input_mask, [-1]) > 0)
    # [num_real_tokens, H]
    hidden = tf.gather_nd(tf.reshape(embedded, [-1, hidden_size]), real)
    # [batch, 1, 1, seq]
    mask_adder = attention_mask_adder(input_mask, bert_model.encoder.compute_dtype)

    for block in bert_model.encoder.blocks:
        context = _attention_context(block.attention, hidden, real, (batch_size, seq_length), mask_adder)
        # [num_real_tokens, H]
        hidden = block.after_attention(context, hidden, training=False)

    # [batch, seq, H], zeros at padding.
    sequence_output = tf.reshape(
        tf.scatter_nd(real, hidden, [batch_size * seq_length, hidden_size]),
        [batch_size, seq_length, hidden_size],
    )
    return {"sequence_output": sequence_output, "pooled_output": bert_model.pooler(sequence_output)}
