"""The losses of distillation (soft targets at a temperature: a softmax's, or a sigmoid per label for a
multi-label model; the cosine distance of hidden states),
and the trainer that computes them against a teacher running beside the student.

Example:
>>> import numpy as np
>>> float(SoftTargetLoss(temperature=2.0)(np.array([[1.0, 0.0]]), np.array([[1.0, 0.0]])))
0.0
"""

import keras
import tensorflow as tf

from keras_bert_impl.models.base import refuse_training_with_frozen_weights


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class SoftTargetLoss(keras.losses.Loss):
    """T² · KL(teacher ‖ student) of the class distributions at temperature T.

    `y_true` are the teacher's logits, `y_pred` the student's. For a
    regression (one output) it is the squared error to the teacher's score.

    Example:
    >>> import numpy as np
    >>> loss = SoftTargetLoss(temperature=2.0)
    >>> float(loss(np.array([[1.0, 0.0]]), np.array([[1.0, 0.0]])))
    0.0
    """

    def __init__(self, temperature=2.0, name="soft_target_loss", **kwargs):
        super().__init__(name=name, **kwargs)
        self.temperature = float(temperature)

    def call(self, y_true, y_pred):
        y_true = keras.ops.cast(y_true, "float32")
        y_pred = keras.ops.cast(y_pred, "float32")
        if y_pred.shape[-1] == 1:
            return keras.ops.mean(keras.ops.square(y_true - y_pred), axis=-1)
        t = self.temperature
        teacher = keras.ops.log_softmax(y_true / t, axis=-1)
        student = keras.ops.log_softmax(y_pred / t, axis=-1)
        return t * t * keras.ops.sum(keras.ops.exp(teacher) * (teacher - student), axis=-1)

    def get_config(self):
        return {**super().get_config(), "temperature": self.temperature}


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class MultiLabelSoftTargetLoss(keras.losses.Loss):
    """T² · the binary KL divergence of each label's sigmoid at temperature T, averaged over the labels.

    The multi-label form of `SoftTargetLoss`: each label is its own
    two-class distribution, `p = sigmoid(z_teacher / T)` against
    `q = sigmoid(z_student / T)`. Per label, the binary cross-entropy
    `-p log q - (1 - p) log(1 - q)` less the teacher's own entropy (a
    constant of the targets: the same gradients, and 0 where the student
    agrees, as `SoftTargetLoss`'s KL divergence); the mean over the labels,
    as the multi-label hard loss (`keras.losses.BinaryCrossentropy`) takes
    it; times T², as `SoftTargetLoss`. Written on the logits, with
    `softplus`: `BCE(p, q) = softplus(b) - p b` for `b = z_student / T`.

    `y_true` are the teacher's logits, `y_pred` the student's, labels on
    the last axis.

    Example:
    >>> import numpy as np
    >>> float(MultiLabelSoftTargetLoss(temperature=2.0)(np.array([[3.0, -1.0]]), np.array([[3.0, -1.0]])))
    0.0
    """

    def __init__(self, temperature=2.0, name="multi_label_soft_target_loss", **kwargs):
        super().__init__(name=name, **kwargs)
        self.temperature = float(temperature)

    def call(self, y_true, y_pred):
        t = self.temperature
        teacher = keras.ops.cast(y_true, "float32") / t  # [..., num_labels]
        student = keras.ops.cast(y_pred, "float32") / t
        p = keras.ops.sigmoid(teacher)
        cross_entropy = keras.ops.softplus(student) - p * student
        teacher_entropy = keras.ops.softplus(teacher) - p * teacher
        return t * t * keras.ops.mean(cross_entropy - teacher_entropy, axis=-1)

    def get_config(self):
        return {**super().get_config(), "temperature": self.temperature}


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class CosineDistanceLoss(keras.losses.Loss):
    """1 - cosine similarity of the last axis: 0 when the directions agree.

    Example:
    >>> import numpy as np
    >>> round(float(CosineDistanceLoss()(np.array([[1.0, 0.0]]), np.array([[0.0, 2.0]]))), 6)
    1.0
    """

    def __init__(self, name="cosine_distance", **kwargs):
        super().__init__(name=name, **kwargs)

    def call(self, y_true, y_pred):
        y_true = keras.ops.cast(y_true, "float32")
        y_pred = keras.ops.cast(y_pred, "float32")
        dot = keras.ops.sum(y_true * y_pred, axis=-1)
        norms = keras.ops.norm(y_true, axis=-1) * keras.ops.norm(y_pred, axis=-1)
        return 1.0 - dot / keras.ops.maximum(norms, 1e-12)


class DistillationTrainer(keras.Model):
    """A student trained against a frozen teacher that runs beside it, step by step.

    For targets too large to compute once before training (a hidden state
    per token, a vocabulary of logits per masked position), the teacher
    runs in inference mode (no dropout, no gradient) on each batch, and the
    loss is, weighted:

    * `soft`: `SoftTargetLoss` of the teacher's and the student's `soft`
      logits at `temperature`, over their last axis;
    * `hard`: cross-entropy of the student's `soft` logits and the labels
      `y["hard"]` (class ids on the same leading axes);
    * `hidden`: `CosineDistanceLoss` of each pair of `hidden` states
      (student, teacher), over the real tokens (`input_mask`), averaged
      over the pairs.

    `sample_weight` is a dict that may weigh `soft` and `hard` (per token
    for tagging, per masked position for the masked LM); a term without
    one is a plain mean. Each term's mean is reported as `<term>_loss`.

    Args:
        student: A functional model: the inputs -> `{"soft": logits
            [batch, ..., num_classes], "hidden": [states [batch, seq, H], ...]}`.
        teacher: The same for the teacher, with as many `hidden` states;
            frozen here.
        weights: `{term: weight}` of the terms to train on.
        temperature: Of the soft targets.

    Example:
    >>> import numpy as np
    >>> ids = {name: keras.Input((None,), dtype="int32", name=name) for name in ("input_ids", "input_mask")}
    >>> def net(seed):
    ...     states = keras.layers.Embedding(10, 4, embeddings_initializer=keras.initializers.RandomNormal(seed=seed))(
    ...         ids["input_ids"])  # [batch, seq, 4]
    ...     return keras.Model(ids, {"soft": keras.layers.Dense(3)(states), "hidden": [states]})
    >>> trainer = DistillationTrainer(net(0), net(1), {"soft": 1.0, "hidden": 1.0})
    >>> trainer.compile(optimizer="sgd")
    >>> x = {"input_ids": np.array([[1, 2, 0]]), "input_mask": np.array([[1, 1, 0]])}
    >>> sorted(trainer.evaluate(x, {}, verbose=0, return_dict=True))
    ['hidden_loss', 'loss', 'soft_loss']
    """

    def __init__(self, student, teacher, weights, temperature=2.0, **kwargs):
        super().__init__(**kwargs)
        teacher.trainable = False
        self.student = student
        self.teacher = teacher
        self.weights_of_terms = dict(weights)
        self.temperature = float(temperature)
        self.soft_loss = SoftTargetLoss(temperature, reduction="mean_with_sample_weight")
        self.hard_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                                    reduction="mean_with_sample_weight")
        self.hidden_loss = CosineDistanceLoss(reduction="mean_with_sample_weight")
        self.term_means = {term: keras.metrics.Mean(f"{term}_loss") for term in self.weights_of_terms}

    def call(self, inputs, training=False):
        return self.student(inputs, training=training)

    def make_train_function(self, force=False):
        refuse_training_with_frozen_weights()  # as `BertConfigModel` does
        return super().make_train_function(force)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        teacher = self.teacher(x, training=False)
        sample_weight = sample_weight or {}
        terms = {}
        if "soft" in self.weights_of_terms:
            terms["soft"] = self.soft_loss(teacher["soft"], y_pred["soft"], sample_weight.get("soft"))
        if "hard" in self.weights_of_terms:
            terms["hard"] = self.hard_loss(y["hard"], y_pred["soft"], sample_weight.get("hard"))
        if "hidden" in self.weights_of_terms:
            mask = keras.ops.cast(x["input_mask"], "float32")  # [batch, seq]
            pairs = list(zip(y_pred["hidden"], teacher["hidden"]))
            terms["hidden"] = sum(self.hidden_loss(t, s, mask) for s, t in pairs) / len(pairs)
        total = 0.0
        for term, value in terms.items():
            self.term_means[term].update_state(value)
            total = total + self.weights_of_terms[term] * value
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        return total / replicas if replicas > 1 else total  # Keras sums the replicas' gradients.
