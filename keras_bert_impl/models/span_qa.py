"""Span question answering: the original `run_squad.create_model` head."""

import keras

from keras_bert_impl.layers.heads import OutputProjection
from keras_bert_impl.models.base import BertConfigModel, sequence_inputs
from keras_bert_impl.models.bert_model import BertModel, as_bert_config

_PACKAGE = "keras_bert_impl"


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertSpanQA(BertConfigModel):
    """BERT sequence output -> `cls/squad` projection -> start and end logits.

    Every token gets two logits, `x · output_weightsᵀ + output_bias` with the
    original's `cls/squad/output_weights` [2, H] and `cls/squad/output_bias`
    [2] (no dropout, as the original). The outputs are a dict of
    `start_logits` and `end_logits`, each [batch_size, seq_length].

    The original loss is the mean of the two softmax cross-entropies over all
    `seq_length` positions; compile with `span_qa_losses()`.

    Args:
        bert_config: A `BertConfig` (or its dict).
        dtype: Keras dtype policy.

    Example:
    >>> import numpy as np
    >>> from keras_bert_impl.config import BertConfig
    >>> config = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
    ...                     num_attention_heads=2, intermediate_size=16)
    >>> model = BertSpanQA(config)
    >>> outputs = model({"input_ids": np.ones((2, 5), "int32"),
    ...                  "input_mask": np.ones((2, 5), "int32"),
    ...                  "segment_ids": np.zeros((2, 5), "int32")})
    >>> tuple(outputs["start_logits"].shape), tuple(outputs["end_logits"].shape)
    ((2, 5), (2, 5))
    """

    def __init__(self, bert_config, dtype=None, name="span_qa", **kwargs):
        config = as_bert_config(bert_config)

        # === Layers ===
        bert = BertModel(config, dtype=dtype, name="bert")
        span_head = OutputProjection(2, initializer_range=0.02, dtype=dtype, name="squad")

        # === Functional model ===
        inputs = sequence_inputs("input_ids", "input_mask", "segment_ids")
        # [batch_size, seq_length, 2]
        logits = span_head(bert(inputs)["sequence_output"])
        outputs = {
            # [batch_size, seq_length] each
            "start_logits": logits[:, :, 0],
            "end_logits": logits[:, :, 1],
        }
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, name=name, **kwargs)

        # === Config ===
        self.bert_config = config
        self.bert = bert
        self.span_head = span_head




def span_qa_losses():
    """`(loss, loss_weights)` for `compile`: the original `(start_loss + end_loss) / 2`.

    Each loss is the batch mean of `-log_softmax(logits)[position]`, over all
    positions (padding included), as the original's `compute_loss`. Targets
    are `{"start_logits": start_positions, "end_logits": end_positions}`.

    Returns:
        `(loss, loss_weights)`: a dict of two
        `keras.losses.SparseCategoricalCrossentropy(from_logits=True)`, keyed
        by output name, each taking [batch_size] positions and [batch_size,
        seq_length] logits, and the dict of their weights, 0.5 each.

    Example:
    >>> import numpy as np
    >>> loss, loss_weights = span_qa_losses()
    >>> loss_weights
    {'start_logits': 0.5, 'end_logits': 0.5}
    >>> start = loss["start_logits"](np.array([2]), np.zeros((1, 4), "float32"))
    >>> end = loss["end_logits"](np.array([0]), np.array([[100.0, 0.0, 0.0, 0.0]], "float32"))
    >>> round(float(start), 4), round(float(end), 4)
    (1.3863, 0.0)
    >>> round(float(0.5 * start + 0.5 * end), 4)
    0.6931
    """
    loss = {
        key: keras.losses.SparseCategoricalCrossentropy(from_logits=True, name=f"{key}_loss")
        for key in ("start_logits", "end_logits")
    }
    return loss, {"start_logits": 0.5, "end_logits": 0.5}
