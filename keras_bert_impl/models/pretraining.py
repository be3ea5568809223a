"""The pretraining model: BERT with the original `cls/predictions` and
`cls/seq_relationship` heads, trained on MLM + NSP with `model.fit`."""

import keras
import tensorflow as tf
from keras import ops

from keras_bert_impl.layers.heads import MaskedLMHead, OutputProjection
from keras_bert_impl.models.base import BertConfigModel, sequence_inputs
from keras_bert_impl.models.bert_model import BertModel, as_bert_config
from keras_bert_impl.models.pretraining_losses import masked_lm_loss, next_sentence_loss

_PACKAGE = "keras_bert_impl"

PRETRAINING_INPUTS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
PRETRAINING_LABELS = ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")


def split_pretraining_features(features):
    """Splits a parsed pretraining TFRecord into Keras `(x, y)`.

    Args:
        features: Dict with the original schema's seven keys (others are
            left out): `input_ids`, `input_mask`, `segment_ids` [batch_size,
            seq_length], `masked_lm_positions`, `masked_lm_ids`,
            `masked_lm_weights` [batch_size, max_predictions_per_seq] and
            `next_sentence_labels` [batch_size, 1].

    Returns:
        `(x, y)`: the dict of the four model inputs and the dict of the three
        labels that `compute_loss` reads, values as given.

    Example:
    >>> import numpy as np
    >>> names = ["input_ids", "input_mask", "segment_ids", "masked_lm_positions",
    ...          "masked_lm_ids", "masked_lm_weights", "next_sentence_labels"]
    >>> features = {name: np.zeros((2, 4), "int32") for name in names}
    >>> x, y = split_pretraining_features(features)
    >>> list(x)
    ['input_ids', 'input_mask', 'segment_ids', 'masked_lm_positions']
    >>> list(y)
    ['masked_lm_ids', 'masked_lm_weights', 'next_sentence_labels']
    >>> x["input_ids"] is features["input_ids"]
    True
    """
    x = {key: features[key] for key in PRETRAINING_INPUTS}
    y = {key: features[key] for key in PRETRAINING_LABELS}
    return x, y


def top_class(logits):
    """int32 argmax over the last axis (the original's `tf.argmax`).

    TensorFlow's own op: `keras.ops.argmax` adds a sign-bit pass over the
    whole [batch, predictions, vocab] tensor to order -0.0 before 0.0
    (what it costs: docs/BENCHMARKS.md, pretraining steps).

    Args:
        logits: [..., num_classes], e.g. [batch_size, max_predictions_per_seq,
            vocab_size] or [batch_size, 2].

    Returns:
        [...] int32 class ids.
    """
    return tf.argmax(logits, axis=-1, output_type=tf.int32)


def _scale_for_replicas(loss):
    # Keras sums replica gradients, so each replica's loss is divided by the
    # replica count, as the built-in losses do.
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    return loss / replicas if replicas > 1 else loss


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertPretrainingModel(BertConfigModel):
    """BERT + masked-LM and next-sentence heads, with the original losses.

    Inputs: `input_ids`, `input_mask`, `segment_ids` [batch, seq] and
    `masked_lm_positions` [batch, max_predictions_per_seq]. Outputs:
    `masked_lm_logits` [batch, max_predictions, vocab] and
    `next_sentence_logits` [batch, 2].

    `fit`/`evaluate` take `y` = dict of `masked_lm_ids`, `masked_lm_weights`
    and `next_sentence_labels` (see `split_pretraining_features`); the loss is
    the original's `masked_lm_loss + next_sentence_loss`, and the metrics are
    those of the original `metric_fn`: `masked_lm_accuracy` and
    `masked_lm_loss` (weighted by `masked_lm_weights`), `next_sentence_accuracy`
    and `next_sentence_loss`, accumulated over every evaluated example.

    The last transformer layer is computed only at [CLS] and the masked
    positions, the only rows the heads read (same weights and values as the
    full `BertModel`; `self.bert` is that full model, sharing the layers).

    The variants' heads are these two (docs/VARIANTS.md): ALBERT's
    sentence-order head is the next-sentence head's shape on the pooler
    (`cls/seq_relationship`, labels 0 = in order, 1 = swapped), and each
    variant's masked-LM head is `MaskedLMHead` under its config. A config
    without a pooler (DistilBERT) has no sentence head: the model outputs
    `masked_lm_logits` only, and the loss is the masked-LM loss; so does
    `next_sentence=False` for a config with one (RoBERTa's recipe: no NSP).

    Args:
        bert_config: A `BertConfig` (or its dict).
        dtype: Keras dtype policy.
        next_sentence: Whether the model has the sentence head (when the
            config has a pooler) and trains it on `next_sentence_labels`.

    Example:
    >>> import numpy as np
    >>> from keras_bert_impl.config import BertConfig
    >>> config = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
    ...                     num_attention_heads=2, intermediate_size=16)
    >>> model = BertPretrainingModel(config)
    >>> out = model({"input_ids": np.ones((2, 6), "int32"),
    ...              "input_mask": np.ones((2, 6), "int32"),
    ...              "segment_ids": np.zeros((2, 6), "int32"),
    ...              "masked_lm_positions": np.ones((2, 3), "int32")})
    >>> tuple(out["masked_lm_logits"].shape), tuple(out["next_sentence_logits"].shape)
    ((2, 3, 30), (2, 2))
    """

    def __init__(self, bert_config, dtype=None, name="bert_pretraining", next_sentence=True, **kwargs):
        config = as_bert_config(bert_config)

        # === Layers ===
        bert = BertModel(config, dtype=dtype, name="bert")
        masked_lm_head = MaskedLMHead(
            bert.word_embedding,
            hidden_act=config.masked_lm_act,
            initializer_range=config.initializer_range,
            layer_norm_epsilon=config.layer_norm_eps,
            dtype=dtype,
            name="predictions",
        )
        next_sentence_head = None
        if config.use_pooler and next_sentence:
            next_sentence_head = OutputProjection(
                2,
                initializer_range=config.initializer_range,
                dtype=dtype,
                name="seq_relationship",
            )

        # === Functional model ===
        inputs = sequence_inputs("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
        # BERT's own layers, run here so that the last transformer layer
        # computes only the rows the heads read: [CLS] for the next-sentence
        # head and the masked positions for the MLM head (the other rows of
        # the last layer feed nothing in this model). Same weights, same
        # values: each row of a layer's output depends on all keys and
        # values of the layer below, but on no other row of its own layer.
        embedded = bert.word_embedding(inputs["input_ids"])
        # [batch_size, seq_length, H]
        embedded = bert.embedding_postprocessor(embedded, inputs["segment_ids"])
        masked_lm_positions = inputs["masked_lm_positions"]
        # [batch_size, 1 + max_predictions_per_seq]: [CLS] first.
        output_positions = ops.concatenate(
            [ops.zeros_like(masked_lm_positions[:, :1]), masked_lm_positions], axis=1
        )
        all_outputs, _ = bert.encoder(
            embedded, inputs["input_mask"], output_positions=output_positions
        )
        # [batch_size, 1 + max_predictions_per_seq, H]
        selected = all_outputs[-1]
        outputs = {
            # [batch_size, max_predictions_per_seq, vocab_size]
            "masked_lm_logits": masked_lm_head(selected[:, 1:]),
        }
        if next_sentence_head is not None:
            # The pooler reads row 0: [CLS].
            outputs["next_sentence_logits"] = next_sentence_head(bert.pooler(selected))
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, name=name, **kwargs)

        # === Config ===
        self.bert_config = config
        self.next_sentence = next_sentence
        self.bert = bert
        self.masked_lm_head = masked_lm_head
        if next_sentence_head is not None:  # (absent, not None: the name map asks hasattr)
            self.next_sentence_head = next_sentence_head
        self.masked_lm_accuracy = keras.metrics.Mean(name="masked_lm_accuracy")
        self.masked_lm_mean_loss = keras.metrics.Mean(name="masked_lm_loss")
        self.next_sentence_accuracy = keras.metrics.Mean(name="next_sentence_accuracy")
        self.next_sentence_mean_loss = keras.metrics.Mean(name="next_sentence_loss")

    def get_config(self):
        config = super().get_config()
        if not self.next_sentence:  # Left out at the default: older configs stay as they were.
            config["next_sentence"] = False
        return config

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        mlm_logits = y_pred["masked_lm_logits"]
        weights = ops.cast(y["masked_lm_weights"], "float32")
        mlm_loss, mlm_per_example = masked_lm_loss(
            mlm_logits, y["masked_lm_ids"], weights
        )
        mlm_correct = ops.cast(
            top_class(mlm_logits) == ops.cast(y["masked_lm_ids"], "int32"), "float32"
        )
        self.masked_lm_accuracy.update_state(mlm_correct, sample_weight=weights)
        self.masked_lm_mean_loss.update_state(mlm_per_example, sample_weight=weights)
        total = mlm_loss

        if "next_sentence_logits" in y_pred:
            nsp_logits = y_pred["next_sentence_logits"]
            nsp_labels = ops.reshape(y["next_sentence_labels"], (-1,))
            nsp_loss, nsp_per_example = next_sentence_loss(nsp_logits, nsp_labels)
            nsp_correct = ops.cast(top_class(nsp_logits) == ops.cast(nsp_labels, "int32"), "float32")
            self.next_sentence_accuracy.update_state(nsp_correct)
            self.next_sentence_mean_loss.update_state(nsp_per_example)
            total = total + nsp_loss
        if self.losses:
            total = total + ops.sum(self.losses)
        return _scale_for_replicas(total)


