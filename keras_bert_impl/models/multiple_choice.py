"""Multiple choice (SWAG): each (context, choice) pair scored by one unit on the pooled output.

The recipe of the BERT paper's SWAG experiment, as Hugging Face's
`BertForMultipleChoice` computes it: the [CLS] pooled output of every pair,
dropout, one logit from `output_weights` [1, H] / `output_bias` [1] (the
run_classifier head's names and layout), and a softmax over a question's
choices.
"""

import keras
from keras import ops

from keras_bert_impl.layers.heads import OutputProjection
from keras_bert_impl.models.base import BertConfigModel
from keras_bert_impl.models.bert_model import BertModel, as_bert_config

_PACKAGE = "keras_bert_impl"
CHOICE_INPUTS = ("input_ids", "input_mask", "segment_ids")


@keras.saving.register_keras_serializable(package=_PACKAGE)
class ChoiceRows(keras.layers.Layer):
    """[batch_size, num_choices, seq_length] -> [batch_size * num_choices, seq_length]: one row per pair.

    Example:
    >>> ChoiceRows()(keras.ops.ones((2, 4, 5), "int32")).shape
    TensorShape([8, 5])
    """

    def call(self, inputs):
        return ops.reshape(inputs, (-1, ops.shape(inputs)[-1]))

    def compute_output_shape(self, inputs_shape):
        rows = None if None in inputs_shape[:2] else inputs_shape[0] * inputs_shape[1]
        return (rows, inputs_shape[-1])


@keras.saving.register_keras_serializable(package=_PACKAGE)
class ChoiceLogits(keras.layers.Layer):
    """[batch_size * num_choices, 1] pair scores -> [batch_size, num_choices] logits.

    Example:
    >>> ChoiceLogits()(keras.ops.ones((8, 1)), keras.ops.ones((2, 4, 5))).shape
    TensorShape([2, 4])
    """

    def call(self, pair_logits, input_ids):
        return ops.reshape(pair_logits, ops.shape(input_ids)[:2])

    def compute_output_shape(self, pair_logits_shape, input_ids_shape):
        return tuple(input_ids_shape[:2])


@keras.saving.register_keras_serializable(package=_PACKAGE)
class ChoiceStates(keras.layers.Layer):
    """[batch_size * num_choices, H] pair states -> [batch_size, num_choices, H].

    Example:
    >>> ChoiceStates()(keras.ops.ones((8, 6)), keras.ops.ones((2, 4, 5))).shape
    TensorShape([2, 4, 6])
    """

    def call(self, pair_states, input_ids):
        return ops.reshape(pair_states, (ops.shape(input_ids)[0], ops.shape(input_ids)[1], pair_states.shape[-1]))

    def compute_output_shape(self, pair_states_shape, input_ids_shape):
        return tuple(input_ids_shape[:2]) + (pair_states_shape[-1],)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertMultipleChoice(BertConfigModel):
    """BERT over every (context, choice) pair -> pooled output -> dropout -> one logit per choice.

    Inputs are `input_ids`, `input_mask`, `segment_ids` of shape
    [batch_size, num_choices, seq_length] (each row `[CLS] context [SEP]
    choice [SEP]`); the output is logits [batch_size, num_choices], trained
    with `SparseCategoricalCrossentropy(from_logits=True)` against the right
    choice's index. The head is `output_weights` [1, H] and `output_bias`
    [1], as run_classifier names its head (a one-label classifier's layout:
    Hugging Face's `classifier.weight` [1, H] maps to it).

    Args:
        bert_config: A `BertConfig` (or its dict); it needs a pooler.
        dropout_rate: Dropout on the pooled output (the original's 0.1).
        dtype: Keras dtype policy.

    Example:
    >>> import numpy as np
    >>> from keras_bert_impl.config import BertConfig
    >>> config = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
    ...                     num_attention_heads=2, intermediate_size=16)
    >>> model = BertMultipleChoice(config)
    >>> model({"input_ids": np.ones((2, 3, 4), "int32"),
    ...        "input_mask": np.ones((2, 3, 4), "int32"),
    ...        "segment_ids": np.zeros((2, 3, 4), "int32")}).shape
    TensorShape([2, 3])
    """

    def __init__(self, bert_config, dropout_rate=0.1, dtype=None, name="multiple_choice", **kwargs):
        config = as_bert_config(bert_config)

        # === Layers ===
        bert = BertModel(config, dtype=dtype, name="bert")
        rows = ChoiceRows(name="choice_rows")
        dropout = keras.layers.Dropout(dropout_rate, dtype=dtype, name="dropout")
        head = OutputProjection(1, initializer_range=0.02, dtype=dtype, name="output")
        choice_logits = ChoiceLogits(name="choice_logits")

        # === Functional model ===
        inputs = {name: keras.Input(shape=(None, None), dtype="int32", name=name) for name in CHOICE_INPUTS}
        # [batch_size * num_choices, seq_length] each
        pair_inputs = {name: rows(value) for name, value in inputs.items()}
        pooled_output = bert(pair_inputs)["pooled_output"]  # [batch_size * num_choices, H]
        pair_logits = head(dropout(pooled_output))  # [batch_size * num_choices, 1]
        logits = choice_logits(pair_logits, inputs["input_ids"])  # [batch_size, num_choices]
        super().__init__(inputs=inputs, outputs=logits, dtype=dtype, name=name, **kwargs)

        # === Config ===
        self.bert_config = config
        self.dropout_rate = dropout_rate
        self.bert = bert
        self.head = head

    def get_config(self):
        return {**super().get_config(), "dropout_rate": self.dropout_rate}


def choice_distillation_outputs(model):
    """A functional model on `model`'s own layers (its weights): the choices' `logits` [batch_size, num_choices]
    and each pair's last-layer [CLS] state, the pooler's input, as `cls_state` [batch_size, num_choices, H].

    What a multiple-choice student learns from its teacher
    (`tasks.multiple_choice.MultipleChoiceDistillation`); dropout on the
    pooled output as the model has it, so training this model trains
    `model`.

    Args:
        model: A `BertMultipleChoice`.
    """
    inputs = {name: keras.Input(shape=(None, None), dtype="int32", name=name) for name in CHOICE_INPUTS}
    rows = model.get_layer("choice_rows")
    encoded = model.bert({name: rows(value) for name, value in inputs.items()})
    pair_logits = model.head(model.get_layer("dropout")(encoded["pooled_output"]))  # [batch_size * num_choices, 1]
    cls_state = encoded["sequence_output"][:, 0]  # [batch_size * num_choices, H]
    return keras.Model(inputs, {
        "logits": model.get_layer("choice_logits")(pair_logits, inputs["input_ids"]),  # [batch_size, num_choices]
        "cls_state": ChoiceStates(name="choice_states")(cls_state, inputs["input_ids"]),  # [b, num_choices, H]
    })
