"""Text embeddings: BERT as a frozen feature extractor.

The `embeddings` task exports the pooled output (`bert/pooler`, the [CLS]
vector through the pooler's tanh layer, where the model has one) and the mean of the final layer over
the real tokens (what sentence-transformers' mean pooling computes).

Example:
>>> EMBEDDINGS.head_variables
()
"""

from keras_bert_impl.tasks.spec import EXPORTED_TASKS, TaskSpec


def _build_bert(config, num_labels=None, dtype=None):
    from keras_bert_impl.models.bert_model import BertModel

    return BertModel(config, dtype=dtype)


def mean_over_tokens(sequence_output, input_mask):
    """Mean of `sequence_output` [batch, seq, width] over the real tokens -> [batch, width]."""
    import tensorflow as tf

    mask = tf.cast(input_mask, sequence_output.dtype)[:, :, None]
    return tf.reduce_sum(sequence_output * mask, axis=1) / tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)


def embeddings_serving_outputs(serving, inputs, padded_length):
    """`pooled_output` (where the model has a pooler: DistilBERT and RoBERTa's
    masked-LM releases have none) and `mean_pooled`, float32 [batch, hidden_size]."""
    import tensorflow as tf

    outputs = serving.forward(inputs)
    sequence = tf.cast(outputs["sequence_output"], tf.float32)
    embeddings = {"mean_pooled": mean_over_tokens(sequence, inputs["input_mask"])}
    if "pooled_output" in outputs:
        embeddings["pooled_output"] = tf.cast(outputs["pooled_output"], tf.float32)
    return embeddings


EMBEDDINGS = TaskSpec(
    name="embeddings",
    description=EXPORTED_TASKS["embeddings"],
    build_model=_build_bert,
    serving_outputs=embeddings_serving_outputs,
)
