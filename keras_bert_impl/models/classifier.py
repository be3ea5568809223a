"""Sequence classifier: the original `run_classifier.create_model` head."""

import keras

from keras_bert_impl.layers.heads import OutputProjection
from keras_bert_impl.models.base import BertConfigModel, sequence_inputs
from keras_bert_impl.models.bert_model import BertModel, as_bert_config

_PACKAGE = "keras_bert_impl"


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertClassifier(BertConfigModel):
    """BERT pooled output -> dropout(0.1) -> `output_weights`/`output_bias` logits.

    The pooled output is the [CLS] state through the pooler's dense layer and
    its activation, `bert_config.pooler_act`: the original's tanh, ReLU for
    DistilBERT's `pre_classifier` (a converted
    `DistilBertForSequenceClassification`, docs/VARIANTS.md).

    The head's variables carry the original run_classifier names
    (`output_weights` [num_labels, H], `output_bias` [num_labels]), so a
    fine-tuned original checkpoint loads and ours writes back in that layout.
    Train it with `SparseCategoricalCrossentropy(from_logits=True)`, which is
    the original's mean per-example loss.

    Args:
        bert_config: A `BertConfig` (or its dict).
        num_labels: Number of classes.
        dropout_rate: Dropout on the pooled output (the original uses 0.1).
        dtype: Keras dtype policy.

    Example:
    >>> import numpy as np
    >>> from keras_bert_impl.config import BertConfig
    >>> config = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
    ...                     num_attention_heads=2, intermediate_size=16)
    >>> model = BertClassifier(config, num_labels=3)
    >>> model({"input_ids": np.ones((2, 4), "int32"),
    ...        "input_mask": np.ones((2, 4), "int32"),
    ...        "segment_ids": np.zeros((2, 4), "int32")}).shape
    TensorShape([2, 3])
    """

    def __init__(
        self, bert_config, num_labels, dropout_rate=0.1, dtype=None, name="classifier", **kwargs
    ):
        config = as_bert_config(bert_config)

        # === Layers ===
        bert = BertModel(config, dtype=dtype, name="bert")
        dropout = keras.layers.Dropout(dropout_rate, dtype=dtype, name="dropout")
        head = OutputProjection(
            num_labels, initializer_range=0.02, dtype=dtype, name="output"
        )

        # === Functional model ===
        inputs = sequence_inputs("input_ids", "input_mask", "segment_ids")
        pooled_output = bert(inputs)["pooled_output"]
        logits = head(dropout(pooled_output))
        super().__init__(inputs=inputs, outputs=logits, dtype=dtype, name=name, **kwargs)

        # === Config ===
        self.bert_config = config
        self.num_labels = num_labels
        self.dropout_rate = dropout_rate
        self.bert = bert
        self.head = head

    def get_config(self):
        return {
            **super().get_config(),
            "num_labels": self.num_labels,
            "dropout_rate": self.dropout_rate,
        }

