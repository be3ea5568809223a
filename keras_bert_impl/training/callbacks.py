"""Keras callbacks the training tools share."""

import keras
import tensorflow as tf


def current_learning_rate(optimizer):
    """The learning rate the next update will use (schedules evaluated)."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    rate = inner._learning_rate
    if isinstance(rate, keras.optimizers.schedules.LearningRateSchedule):
        return float(rate(inner.iterations))
    return float(keras.ops.convert_to_numpy(rate))


class TrainingSummaries(keras.callbacks.Callback):
    """TensorBoard scalars (loss, metrics, learning rate) against the global step.

    Unlike `keras.callbacks.TensorBoard`, the x-axis is the optimizer's step,
    so a resumed run continues its curves instead of restarting them at 0.

    Args:
        log_dir: Event file directory (e.g. `--output_dir`).
        every_n_steps: Summary frequency in optimizer steps.
    """

    def __init__(self, log_dir, every_n_steps=100):
        super().__init__()
        self.log_dir = log_dir
        self.every_n_steps = every_n_steps
        self._writer = None

    def on_train_begin(self, logs=None):
        self._writer = tf.summary.create_file_writer(self.log_dir)

    def on_train_batch_end(self, batch, logs=None):
        optimizer = self.model.optimizer
        step = int(getattr(optimizer, "inner_optimizer", optimizer).iterations.numpy())
        if not logs or step % self.every_n_steps:
            return
        with self._writer.as_default(step=step):
            for key, value in logs.items():
                tf.summary.scalar(f"train/{key}", float(value))
            tf.summary.scalar("train/learning_rate", current_learning_rate(optimizer))

    def on_test_end(self, logs=None):
        if self._writer is None or not logs:
            return
        step = int(getattr(self.model.optimizer, "inner_optimizer", self.model.optimizer).iterations.numpy())
        with self._writer.as_default(step=step):
            for key, value in logs.items():
                tf.summary.scalar(f"eval/{key}", float(value))

    def on_train_end(self, logs=None):
        if self._writer is not None:
            self._writer.flush()


class StopAtStep(keras.callbacks.Callback):
    """Stops `fit` once the optimizer has made `last_step` updates."""

    def __init__(self, last_step):
        super().__init__()
        self.last_step = last_step

    def on_train_batch_end(self, batch, logs=None):
        optimizer = self.model.optimizer
        if int(getattr(optimizer, "inner_optimizer", optimizer).iterations.numpy()) >= self.last_step:
            self.model.stop_training = True
