"""The losses of distillation: soft targets at a temperature, and the cosine distance of hidden states.

Example:
>>> import numpy as np
>>> float(SoftTargetLoss(temperature=2.0)(np.array([[1.0, 0.0]]), np.array([[1.0, 0.0]])))
0.0
"""

import keras


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
