"""The original `optimization.py`: AdamW without bias correction, linear warmup
then linear decay to zero, global-norm clipping at 1.0, as Keras 3 objects;
and LAMB, the layer-wise adaptive AdamW that tf-models-official and the MLPerf
BERT reference offer for large batches."""

import re

import keras
import tensorflow as tf
from keras import ops

_PACKAGE = "keras_bert_impl"

# The original excludes variables whose name contains any of these.
EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")


def _path_matches(variable, patterns):
    """Whether one of the regular expressions `patterns` occurs in `variable`'s path."""
    path = getattr(variable, "path", variable.name)
    return any(re.search(p, path) for p in patterns)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """The original learning rate: `init_lr * step / warmup` while
    `step < num_warmup_steps`, then `init_lr * (1 - step / num_train_steps)`
    (polynomial decay of power 1 to 0, counted from step 0, as the original).

    Args:
        init_lr: Peak learning rate.
        num_train_steps: Step at which the rate reaches 0.
        num_warmup_steps: Steps of linear warmup (0 for none).

    Example:
    >>> schedule = WarmupLinearDecay(1e-4, num_train_steps=100, num_warmup_steps=10)
    >>> [round(float(schedule(s)), 8) for s in (0, 5, 10, 100)]
    [0.0, 5e-05, 9e-05, 0.0]
    """

    def __init__(self, init_lr, num_train_steps, num_warmup_steps=0):
        self.init_lr = init_lr
        self.num_train_steps = num_train_steps
        self.num_warmup_steps = num_warmup_steps

    def __call__(self, step):
        step = ops.cast(step, "float32")
        decay_steps = float(max(self.num_train_steps, 1))
        decayed = self.init_lr * (1.0 - ops.minimum(step, decay_steps) / decay_steps)
        if not self.num_warmup_steps:
            return decayed
        warmup = self.init_lr * step / float(self.num_warmup_steps)
        return ops.where(step < float(self.num_warmup_steps), warmup, decayed)

    def get_config(self):
        return {
            "init_lr": self.init_lr,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
        }


@keras.saving.register_keras_serializable(package=_PACKAGE)
class AdamWeightDecay(keras.optimizers.Optimizer):
    """The original `AdamWeightDecayOptimizer` as a Keras 3 optimizer.

    For each variable: `m = b1 m + (1-b1) g`, `v = b2 v + (1-b2) g²`,
    `update = m / (sqrt(v) + eps) + wd * param` (decay only where the
    variable's path matches none of `exclude_from_weight_decay`),
    `param -= lr * update`. No bias correction, as in the original. Gradients
    are clipped by global norm (`global_clipnorm`, 1.0 in the original) by
    the Keras base class, which also provides `gradient_accumulation_steps`
    and loss scaling for float16.

    Args:
        learning_rate: Float or schedule (e.g. `WarmupLinearDecay`).
        weight_decay_rate: 0.01 in the original.
        beta_1, beta_2, epsilon: 0.9, 0.999, 1e-6 in the original.
        exclude_from_weight_decay: Substrings of variable paths to not decay.
        global_clipnorm: 1.0 in the original.

    Example:
    >>> optimizer = AdamWeightDecay(WarmupLinearDecay(5e-5, 1000, 100))
    >>> optimizer.get_config()["weight_decay_rate"]
    0.01
    """

    def __init__(
        self,
        learning_rate=1e-4,
        weight_decay_rate=0.01,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        exclude_from_weight_decay=EXCLUDE_FROM_WEIGHT_DECAY,
        global_clipnorm=1.0,
        name="adam_weight_decay",
        **kwargs,
    ):
        super().__init__(
            learning_rate=learning_rate, global_clipnorm=global_clipnorm, name=name, **kwargs
        )
        self.weight_decay_rate = weight_decay_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.exclude_from_weight_decay_patterns = tuple(exclude_from_weight_decay or ())

    def decays(self, variable):
        """Whether `variable` gets weight decay (the original's `_do_use_weight_decay`)."""
        return bool(self.weight_decay_rate) and not _path_matches(variable, self.exclude_from_weight_decay_patterns)

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._m, self._v = self.add_optimizer_variables(var_list, ["adam_m", "adam_v"])

    def _gradient_and_moments(self, gradient, variable):
        """`gradient` dense in `variable`'s dtype, and the variable's `m` and `v` slots."""
        if isinstance(gradient, tf.IndexedSlices):
            # Embedding gradients arrive sparse; the original's dense Adam
            # arithmetic densifies them too (and LAMB's trust ratio needs
            # the whole update's norm, as tf-models').
            gradient = tf.convert_to_tensor(gradient)
        index = self._get_variable_index(variable)
        return ops.cast(gradient, variable.dtype), self._m[index], self._v[index]

    def update_step(self, gradient, variable, learning_rate):
        lr = ops.cast(learning_rate, variable.dtype)
        gradient, m, v = self._gradient_and_moments(gradient, variable)
        if self.decays(variable):
            # The original adds `wd * param` to the Adam update before
            # scaling by lr; taking `lr * wd * param` off first, from the
            # same param value, is the same update.
            self.assign_sub(variable, lr * self.weight_decay_rate * variable)
        # TensorFlow's fused Adam kernel computes `m = b1 m + (1-b1) g`,
        # `v = b2 v + (1-b2) g²`, `param -= lr' m / (sqrt(v) + eps)` with
        # `lr' = lr sqrt(1 - b2^t) / (1 - b1^t)`; powers of 0 make `lr' = lr`:
        # the original's update without bias correction, in one pass over
        # the variable instead of a dozen.
        zero = tf.zeros([], variable.dtype)
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle,
            m=m.handle,
            v=v.handle,
            beta1_power=zero,
            beta2_power=zero,
            lr=lr,
            beta1=tf.constant(self.beta_1, variable.dtype),
            beta2=tf.constant(self.beta_2, variable.dtype),
            epsilon=tf.constant(self.epsilon, variable.dtype),
            grad=gradient,
        )

    def _get_current_learning_rate(self):
        if isinstance(self._learning_rate, keras.optimizers.schedules.LearningRateSchedule):
            # Keras 3.15 evaluates schedules at the micro-batch count, so with
            # gradient accumulation warmup and decay would run that many
            # times too fast; `iterations` counts optimizer steps.
            return self._learning_rate(self.iterations)
        return super()._get_current_learning_rate()

    def _clip_gradients(self, grads):
        if self.global_clipnorm and self.global_clipnorm > 0 and not self.clipnorm:
            # The original's `tf.clip_by_global_norm`: one L2 reduction per
            # gradient, and IndexedSlices stay sparse.
            return tf.clip_by_global_norm(grads, self.global_clipnorm)[0]
        return super()._clip_gradients(grads)

    def get_config(self):
        config = super().get_config()
        config.update(
            weight_decay_rate=self.weight_decay_rate,
            beta_1=self.beta_1,
            beta_2=self.beta_2,
            epsilon=self.epsilon,
            exclude_from_weight_decay=list(self.exclude_from_weight_decay_patterns),
        )
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class Lamb(AdamWeightDecay):
    """LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning:
    Training BERT in 76 minutes"), as tf-models-official's
    `official.modeling.optimization.lamb.LAMB`: AdamW whose step is rescaled,
    variable by variable, by the trust ratio `||param|| / ||update||`.

    For each variable, at step `t` (counted from 1):
    `m = b1 m + (1-b1) g`, `v = b2 v + (1-b2) g²`,
    `update = (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + wd * param`
    (Adam's bias correction; the decay only where `decays(variable)`),
    `ratio = ||param|| / ||update||` (1 where either norm is 0, and 1 where the
    variable's path matches one of `exclude_from_layer_adaptation`),
    `param -= lr * ratio * update`. The moments are kept where AdamWeightDecay
    keeps them, so checkpoints have the same `adam_m`/`adam_v` layout.
    Clipping, gradient accumulation and loss scaling are AdamWeightDecay's.

    Args:
        learning_rate: Float or schedule (e.g. `WarmupLinearDecay`).
        weight_decay_rate, beta_1, beta_2, epsilon: As AdamWeightDecay's.
        exclude_from_weight_decay: Regular expressions searched in variable
            paths: those variables are not decayed.
        exclude_from_layer_adaptation: Likewise, for the trust ratio; None
            (the default, as tf-models') takes `exclude_from_weight_decay`.
        global_clipnorm: 1.0 as the original's AdamW.

    Example:
    >>> optimizer = Lamb(WarmupLinearDecay(1e-3, 1000, 100))
    >>> optimizer.get_config()["exclude_from_layer_adaptation"]
    ['LayerNorm', 'layer_norm', 'bias']
    """

    def __init__(
        self,
        learning_rate=1e-3,
        weight_decay_rate=0.01,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        exclude_from_weight_decay=EXCLUDE_FROM_WEIGHT_DECAY,
        exclude_from_layer_adaptation=None,
        global_clipnorm=1.0,
        name="lamb",
        **kwargs,
    ):
        super().__init__(
            learning_rate=learning_rate, weight_decay_rate=weight_decay_rate, beta_1=beta_1, beta_2=beta_2,
            epsilon=epsilon, exclude_from_weight_decay=exclude_from_weight_decay, global_clipnorm=global_clipnorm,
            name=name, **kwargs,
        )
        if exclude_from_layer_adaptation is None:
            exclude_from_layer_adaptation = self.exclude_from_weight_decay_patterns
        self.exclude_from_layer_adaptation_patterns = tuple(exclude_from_layer_adaptation)

    def adapts(self, variable):
        """Whether `variable`'s step is scaled by its trust ratio."""
        return not _path_matches(variable, self.exclude_from_layer_adaptation_patterns)

    def update_step(self, gradient, variable, learning_rate):
        lr = ops.cast(learning_rate, variable.dtype)
        gradient, m, v = self._gradient_and_moments(gradient, variable)
        step = ops.cast(self.iterations + 1, variable.dtype)
        beta_1 = ops.cast(self.beta_1, variable.dtype)
        beta_2 = ops.cast(self.beta_2, variable.dtype)
        self.assign(m, beta_1 * m + (1.0 - beta_1) * gradient)
        self.assign(v, beta_2 * v + (1.0 - beta_2) * ops.square(gradient))
        m_hat = m / (1.0 - ops.power(beta_1, step))
        v_hat = v / (1.0 - ops.power(beta_2, step))
        update = m_hat / (ops.sqrt(v_hat) + ops.cast(self.epsilon, variable.dtype))
        if self.decays(variable):
            update = update + ops.cast(self.weight_decay_rate, variable.dtype) * variable
        if self.adapts(variable):
            # [] the L2 norms of the whole variable and of its whole update.
            param_norm = ops.sqrt(ops.sum(ops.square(variable)))
            update_norm = ops.sqrt(ops.sum(ops.square(update)))
            ratio = ops.where(
                ops.logical_and(param_norm > 0.0, update_norm > 0.0),
                param_norm / update_norm,
                ops.ones_like(param_norm),
            )
            update = ratio * update
        self.assign_sub(variable, lr * update)

    def get_config(self):
        config = super().get_config()
        config["exclude_from_layer_adaptation"] = list(self.exclude_from_layer_adaptation_patterns)
        return config


# `create_optimizer`'s `optimizer_type` values (tf-models' names).
OPTIMIZERS = {"adamw": AdamWeightDecay, "lamb": Lamb}


def create_optimizer(init_lr, num_train_steps, num_warmup_steps, optimizer_type="adamw", **kwargs):
    """The original `create_optimizer`: AdamW + warmup/linear decay + clipping;
    or LAMB on the same schedule (`optimizer_type="lamb"`, as tf-models').

    Args:
        init_lr: Peak learning rate (`--learning_rate`).
        num_train_steps: Total optimizer steps.
        num_warmup_steps: Warmup steps.
        optimizer_type: A key of `OPTIMIZERS`: `"adamw"` (the original's) or `"lamb"`.
        **kwargs: Passed to the optimizer (e.g. `gradient_accumulation_steps`).

    Raises:
        ValueError: an unknown `optimizer_type`.

    Example:
    >>> type(create_optimizer(1e-3, 100, 10, optimizer_type="lamb")).__name__
    'Lamb'
    """
    if optimizer_type not in OPTIMIZERS:
        raise ValueError(f"optimizer_type {optimizer_type!r} is unknown; choose one of {', '.join(OPTIMIZERS)}")
    return OPTIMIZERS[optimizer_type](
        WarmupLinearDecay(init_lr, num_train_steps, num_warmup_steps), **kwargs
    )


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class StepCountingLossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """Keras' dynamic loss scaling, with a step skipped for overflow counted as a step.

    Keras 3's `LossScaleOptimizer` halves its scale and skips the update when
    a gradient is not finite, without advancing the inner optimizer's step
    (tf.keras 2 advanced it). Our training loops read the step as the
    number of batches consumed: an uncounted skip made a run end short of
    `num_train_steps` and a resumed run skip too few batches. Here the skip
    advances the step, so step and data position stay one. Under gradient
    accumulation a skipped micro-batch counts as one micro-batch and adds
    nothing to the window; where it ends a window, that optimizer step is
    skipped as a whole and its accumulated gradients dropped (Keras would
    carry them into the next window's update).

    Under a strategy with more than one replica, a gradient that is not
    finite on any replica skips the step on all of them. (Keras 3.15 decides
    on the first replica's gradients, before they are summed: an overflow on
    another replica reached the update, and its NaN stayed in the weights.)

    Args:
        inner_optimizer: The optimizer whose updates are scaled.
        **kwargs: As `keras.optimizers.LossScaleOptimizer`.

    Example:
    >>> optimizer = StepCountingLossScaleOptimizer(keras.optimizers.SGD(0.1))
    >>> variable = keras.Variable([1.0])
    >>> optimizer.apply([keras.ops.convert_to_tensor([float("inf")])], [variable])
    >>> int(optimizer.iterations.numpy()), float(optimizer.dynamic_scale.numpy()), float(variable.numpy()[0])
    (1, 16384.0, 1.0)
    """

    def _tf_apply(self, grads, trainable_variables=None):
        context = tf.distribute.get_replica_context()
        if context is None or context.num_replicas_in_sync == 1:
            return super()._tf_apply(grads, trainable_variables)
        # [] float32: how many replicas hold a non-finite gradient, the same on every replica.
        non_finite = context.all_reduce(
            tf.distribute.ReduceOp.SUM, tf.cast(ops.logical_not(self.check_finite(grads)), "float32")
        )
        finite = ops.equal(non_finite, 0.0)
        if tf.__internal__.distribute.strategy_supports_no_merge_call():
            ops.cond(
                finite,
                lambda: self._stateful_handle_finite_grads(grads, trainable_variables),
                self._stateful_handle_non_finite_grads,
            )
            return None

        def apply_or_skip(distribution, finite, grads, trainable_variables):
            # In a cross-replica context, as Keras': the finite branch's update calls `merge_call`.
            def apply():
                distribution.extended.call_for_each_replica(
                    self._stateful_handle_finite_grads, args=(grads, trainable_variables)
                )

            ops.cond(distribution.experimental_local_results(finite)[0], apply, self._stateful_handle_non_finite_grads)

        context.merge_call(apply_or_skip, args=(finite, grads, trainable_variables))
        return None

    def _stateful_handle_non_finite_grads(self):
        super()._stateful_handle_non_finite_grads()
        inner = self.inner_optimizer
        steps = inner.gradient_accumulation_steps
        if steps:
            ends_window = (inner._iterations + 1) % steps == 0
            for accumulated in inner._accumulated_gradients:
                accumulated.assign(keras.ops.where(ends_window, keras.ops.zeros_like(accumulated), accumulated))
        inner._iterations.assign_add(1)
