"""Token classification (tagging, e.g. NER): one label per word piece."""

import keras

from keras_bert_impl.layers.heads import OutputProjection
from keras_bert_impl.models.base import BertConfigModel, sequence_inputs
from keras_bert_impl.models.bert_model import BertModel, as_bert_config

_PACKAGE = "keras_bert_impl"


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertTokenClassifier(BertConfigModel):
    """BERT sequence output -> dropout -> `output_weights`/`output_bias` logits per token.

    The head keeps run_classifier's unscoped names and layout
    (`output_weights` [num_labels, H], `output_bias` [num_labels]), as the
    TF1 BERT taggers built on it do, so their checkpoints load and ours can
    be read by them. Outputs [batch_size, seq_length, num_labels] logits.

    Train it with `token_classification_loss()` and per-token sample weights
    that are 1 on the positions carrying a label (a word's first piece) and 0
    elsewhere.

    Args:
        bert_config: A `BertConfig` (or its dict).
        num_labels: Number of tags.
        dropout_rate: Dropout on the sequence output.
        dtype: Keras dtype policy.

    Example:
    >>> import numpy as np
    >>> from keras_bert_impl.config import BertConfig
    >>> config = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
    ...                     num_attention_heads=2, intermediate_size=16)
    >>> model = BertTokenClassifier(config, num_labels=5)
    >>> model({"input_ids": np.ones((2, 4), "int32"),
    ...        "input_mask": np.ones((2, 4), "int32"),
    ...        "segment_ids": np.zeros((2, 4), "int32")}).shape
    TensorShape([2, 4, 5])
    """

    def __init__(
        self, bert_config, num_labels, dropout_rate=0.1, dtype=None, name="token_classifier", **kwargs
    ):
        config = as_bert_config(bert_config)

        # === Layers ===
        bert = BertModel(config, dtype=dtype, name="bert")
        dropout = keras.layers.Dropout(dropout_rate, dtype=dtype, name="dropout")
        token_head = OutputProjection(num_labels, initializer_range=0.02, dtype=dtype, name="output")

        # === Functional model ===
        inputs = sequence_inputs("input_ids", "input_mask", "segment_ids")
        sequence_output = bert(inputs)["sequence_output"]
        # [batch_size, seq_length, num_labels]
        logits = token_head(dropout(sequence_output))
        super().__init__(inputs=inputs, outputs=logits, dtype=dtype, name=name, **kwargs)

        # === Config ===
        self.bert_config = config
        self.num_labels = num_labels
        self.dropout_rate = dropout_rate
        self.bert = bert
        self.token_head = token_head

    def get_config(self):
        return {
            **super().get_config(),
            "num_labels": self.num_labels,
            "dropout_rate": self.dropout_rate,
        }



def token_classification_loss():
    """Cross-entropy averaged over the labelled positions (sum of weights), not all positions.

    Returns:
        A `keras.losses.SparseCategoricalCrossentropy(from_logits=True)` that
        takes [batch_size, seq_length] tag ids, [batch_size, seq_length,
        num_labels] logits and a [batch_size, seq_length] `sample_weight`,
        and returns `sum(weight * loss) / sum(weight)`.

    Example:
    >>> import numpy as np
    >>> logits = np.array([[[0.0, 0.0, 0.0], [100.0, 0.0, 0.0], [0.0, 0.0, 100.0]]], "float32")
    >>> loss = token_classification_loss()(np.array([[1, 2, 2]]), logits,
    ...                                    sample_weight=np.array([[1.0, 0.0, 1.0]]))
    >>> round(float(loss), 4)
    0.5493
    """
    return keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction="mean_with_sample_weight"
    )
