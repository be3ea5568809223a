"""Keras callbacks the training tools share."""

import math

import keras
import tensorflow as tf

from keras_bert_impl.errors import TrainingDivergedError


def global_step(optimizer):
    """The optimizer's update count, inside an optional `LossScaleOptimizer` (an int)."""
    return int(getattr(optimizer, "inner_optimizer", optimizer).iterations.numpy())


def current_learning_rate(optimizer):
    """The learning rate the next update will use (schedules evaluated)."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    rate = inner._learning_rate
    if isinstance(rate, keras.optimizers.schedules.LearningRateSchedule):
        return float(rate(inner.iterations))
    return float(keras.ops.convert_to_numpy(rate))


def _mean_metrics(metrics):
    """`{name: metric}` of the metrics that keep a `total` and a `count` (Keras means)."""
    found = {}
    for metric in metrics:
        inner = getattr(metric, "metrics", None)
        if inner:
            found.update(_mean_metrics(inner))
        elif {v.name for v in metric.variables} >= {"total", "count"}:
            found[metric.name] = metric
    return found


def _total_and_count(metric):
    """A mean metric's `(total, count)`, summed over replicas under a strategy.

    Under a `MirroredStrategy` the variables are sync-on-read: their `.value`
    is one per replica and NumPy cannot take it, while `numpy()` reads the
    aggregate.
    """
    values = {v.name: float(v.numpy()) for v in metric.variables}
    return values["total"], values["count"]


class TrainingSummaries(keras.callbacks.Callback):
    """TensorBoard scalars (loss, metrics, learning rate) against the global step.

    Unlike `keras.callbacks.TensorBoard`, the x-axis is the optimizer's step,
    so a resumed run continues its curves instead of restarting them at 0.
    Each point is the mean over the steps since the previous point (for the
    loss and every mean metric, read from the metrics' totals and counts):
    Keras' own logs are running means since the start of the epoch, which
    jump when an epoch begins.

    Args:
        log_dir: Event file directory (e.g. `--output_dir`). None writes
            nothing but still reads the metrics, as a multi-worker run's
            other workers must: under `MultiWorkerMirroredStrategy` reading
            a metric is a collective that every worker joins.
        every_n_steps: Summary frequency in optimizer steps.
    """

    def __init__(self, log_dir, every_n_steps=100):
        super().__init__()
        self.log_dir = log_dir
        self.every_n_steps = every_n_steps
        self._writer = None
        self._last = {}  # name: (total, count) after the previous batch
        self._window = {}  # name: (total, count) since the previous point
        self._written_step = None

    def on_train_begin(self, logs=None):
        self._writer = (
            tf.summary.create_file_writer(self.log_dir) if self.log_dir is not None else tf.summary.create_noop_writer()
        )
        self._last, self._window = {}, {}
        # The step already written (a resumed run's restored one, 0 at the
        # start): with gradient accumulation several micro-batches end at one
        # step, and only the first of them may write it.
        self._written_step = global_step(self.model.optimizer)

    def _accumulate(self):
        """Adds this batch's share of each mean metric to the window."""
        for name, metric in _mean_metrics(self.model.metrics).items():
            total, count = _total_and_count(metric)
            last_total, last_count = self._last.get(name, (0.0, 0.0))
            if count < last_count:  # reset at the start of an epoch
                last_total, last_count = 0.0, 0.0
            window_total, window_count = self._window.get(name, (0.0, 0.0))
            self._window[name] = (window_total + total - last_total, window_count + count - last_count)
            self._last[name] = (total, count)

    def on_train_batch_end(self, batch, logs=None):
        self._accumulate()
        optimizer = self.model.optimizer
        step = global_step(optimizer)
        if not logs or step == self._written_step or step % self.every_n_steps:
            return
        self._written_step = step
        values = {key: float(value) for key, value in logs.items()}
        for name, (total, count) in self._window.items():
            if count > 0 and name in values:
                values[name] = total / count
        self._window = {}
        with self._writer.as_default(step=step):
            for key, value in values.items():
                tf.summary.scalar(f"train/{key}", value)
            tf.summary.scalar("train/learning_rate", current_learning_rate(optimizer))

    def on_test_end(self, logs=None):
        if self._writer is None or not logs:
            return
        with self._writer.as_default(step=global_step(self.model.optimizer)):
            for key, value in logs.items():
                tf.summary.scalar(f"eval/{key}", float(value))

    def on_train_end(self, logs=None):
        if self._writer is not None:
            self._writer.flush()


class StopOnNonFiniteLoss(keras.callbacks.Callback):
    """Ends `fit` with `TrainingDivergedError` at the first step whose loss is NaN or infinite.

    Placed before the checkpoint callback, so the step's weights (already
    updated from that loss's gradients) are never saved: the checkpoints
    written before it stay the newest, and the job writes no release.

    Args:
        checkpoint_dir: The run's checkpoints, named in the error (None: not named).
    """

    def __init__(self, checkpoint_dir=None):
        super().__init__()
        self.checkpoint_dir = checkpoint_dir

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is None or math.isfinite(float(loss)):
            return
        kept = f"; the checkpoints in {self.checkpoint_dir} before it are kept" if self.checkpoint_dir else ""
        raise TrainingDivergedError(
            f"training stopped at step {global_step(self.model.optimizer)}: the loss is {float(loss)}{kept}. "
            "Lower the learning rate, or check the targets and sample weights for NaN or infinite values"
        )


class StopAtStep(keras.callbacks.Callback):
    """Stops `fit` once the optimizer has made `last_step` updates."""

    def __init__(self, last_step):
        super().__init__()
        self.last_step = last_step

    def on_train_batch_end(self, batch, logs=None):
        if global_step(self.model.optimizer) >= self.last_step:
            self.model.stop_training = True
