"""The optimizer and schedule against a NumPy transcription of the original
`optimization.py` (AdamWeightDecayOptimizer, polynomial decay + warmup,
clip_by_global_norm); LAMB against a NumPy transcription of the paper's
formulas and against tf-models-official's `LAMB`."""

import re

import keras
import numpy as np
import pytest

from keras_bert_impl.training.optimization import AdamWeightDecay, Lamb, WarmupLinearDecay, create_optimizer


def original_learning_rate(step, init_lr, num_train_steps, num_warmup_steps):
    lr = init_lr * (1.0 - min(step, num_train_steps) / num_train_steps)  # polynomial_decay, power 1
    if num_warmup_steps and step < num_warmup_steps:
        lr = init_lr * step / num_warmup_steps
    return lr


def original_adamw_steps(params, names, grads_per_step, init_lr, num_train_steps, num_warmup_steps):
    params = {k: v.astype(np.float64) for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(v) for k, v in params.items()}
    for step, grads in enumerate(grads_per_step):
        global_norm = np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in grads.values()))
        scale = 1.0 / max(global_norm, 1.0)
        lr = original_learning_rate(step, init_lr, num_train_steps, num_warmup_steps)
        for name in params:
            g = grads[name] * scale
            m[name] = 0.9 * m[name] + 0.1 * g
            v[name] = 0.999 * v[name] + 0.001 * g * g
            update = m[name] / (np.sqrt(v[name]) + 1e-6)
            if not any(re.search(p, names[name]) for p in ("LayerNorm", "layer_norm", "bias")):
                update += 0.01 * params[name]
            params[name] = params[name] - lr * update
    return params


@pytest.mark.parametrize("steps, warmup", [(6, 3), (5, 0)])
def test_schedule_matches_original(steps, warmup):
    schedule = WarmupLinearDecay(2e-3, num_train_steps=steps, num_warmup_steps=warmup)
    for step in range(steps + 2):
        np.testing.assert_allclose(float(schedule(step)), original_learning_rate(step, 2e-3, steps, warmup), rtol=1e-6, atol=1e-12)


def test_updates_match_numpy_original_for_several_steps():
    rng = np.random.default_rng(0)
    layer_norm = keras.layers.LayerNormalization(name="output_LayerNorm")
    dense = keras.layers.Dense(3, name="dense")
    model = keras.Sequential([keras.Input((4,)), dense, layer_norm])
    variables = {v.path: v for v in model.trainable_variables}
    for v in variables.values():
        v.assign(rng.normal(size=v.shape).astype("float32"))
    initial = {k: v.numpy() for k, v in variables.items()}
    # Large gradients so that clipping at global norm 1.0 is exercised.
    grads = [{k: rng.normal(0, 2.0, v.shape).astype("float32") for k, v in initial.items()} for _ in range(6)]

    optimizer = create_optimizer(0.05, num_train_steps=6, num_warmup_steps=2)
    for step_grads in grads:
        optimizer.apply_gradients([(step_grads[k], variables[k]) for k in variables])
    expected = original_adamw_steps(initial, {k: k for k in initial}, grads, 0.05, 6, 2)
    for name, variable in variables.items():
        np.testing.assert_allclose(variable.numpy(), expected[name], rtol=1e-5, atol=1e-6, err_msg=name)
    # Decay applied to kernels only, as the original's name rule says.
    assert optimizer.decays(dense.kernel) and not optimizer.decays(dense.bias)
    assert not optimizer.decays(layer_norm.gamma) and not optimizer.decays(layer_norm.beta)


def test_first_step_with_warmup_has_zero_learning_rate():
    variable = keras.Variable(np.ones(3, "float32"), name="kernel")
    optimizer = create_optimizer(0.1, num_train_steps=10, num_warmup_steps=5)
    optimizer.apply_gradients([(np.ones(3, "float32"), variable)])
    np.testing.assert_array_equal(variable.numpy(), np.ones(3))


def test_serializable():
    optimizer = create_optimizer(3e-5, 100, 10, gradient_accumulation_steps=2)
    clone = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert isinstance(clone, AdamWeightDecay)
    assert clone.gradient_accumulation_steps == 2
    assert isinstance(clone._learning_rate, WarmupLinearDecay)
    assert clone._learning_rate.get_config() == {"init_lr": 3e-5, "num_train_steps": 100, "num_warmup_steps": 10}
    assert clone.get_config()["exclude_from_weight_decay"] == ["LayerNorm", "layer_norm", "bias"]


def test_a_step_skipped_for_overflow_is_counted_as_a_step():
    """float16 under fit: with a loss scale that overflows every gradient, no
    weight moves and the scale halves each step, but each batch still
    advances the step (Keras 3's own LossScaleOptimizer leaves it at 0, so a
    run would end short and a resume would re-read batches)."""
    from keras_bert_impl.models.classifier import BertClassifier
    from keras_bert_impl.training.optimization import StepCountingLossScaleOptimizer, create_optimizer
    from tests.helpers import tiny_config

    inputs = {"input_ids": np.ones((6, 8), "int32"), "input_mask": np.ones((6, 8), "int32"),
              "segment_ids": np.zeros((6, 8), "int32")}
    labels = np.array([0, 1, 0, 1, 0, 1])
    steps = {}
    for name, wrapper in (("counting", StepCountingLossScaleOptimizer), ("keras", keras.optimizers.LossScaleOptimizer)):
        keras.utils.set_random_seed(0)
        model = BertClassifier(tiny_config(), num_labels=2, dtype="mixed_float16")
        optimizer = wrapper(create_optimizer(1e-3, 10, 0), initial_scale=2.0**60)
        model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        before = [w.numpy().copy() for w in model.trainable_weights]
        model.fit(inputs, labels, batch_size=2, epochs=1, verbose=0)  # 3 batches
        assert all((w.numpy() == b).all() for w, b in zip(model.trainable_weights, before))  # every update skipped
        assert float(optimizer.dynamic_scale.numpy()) == 2.0**57
        steps[name] = int(optimizer.iterations.numpy())
    assert steps == {"counting": 3, "keras": 0}


@pytest.mark.parametrize("overflowing, expected_update", [
    # Micro-batch 2 ends the first window: that step is skipped and its
    # accumulated gradient dropped; the second window applies the mean of
    # micro-batches 3 and 4 (unscaled by the halved scale 0.5: times 2).
    (1, (2 * 3.0 + 2 * 4.0) / 2),
    # Micro-batch 1 is inside the first window: it adds nothing, the window
    # applies (g2 / 2) under the halved scale; the second window as above.
    (0, 2 * 2.0 / 2 + (2 * 3.0 + 2 * 4.0) / 2),
])
def test_overflow_under_gradient_accumulation(overflowing, expected_update):
    """Two micro-batches per step, one of four overflowing: four micro-batches
    are two steps, and no update carries a skipped window's gradients (with
    Keras's accounting the next update summed three micro-batches)."""
    from keras_bert_impl.training.optimization import StepCountingLossScaleOptimizer

    variable = keras.Variable([0.0])
    optimizer = StepCountingLossScaleOptimizer(
        keras.optimizers.SGD(1.0, gradient_accumulation_steps=2), initial_scale=1.0, dynamic_growth_steps=1000
    )
    gradients = [1.0, 2.0, 3.0, 4.0]
    gradients[overflowing] = float("inf")
    for gradient in gradients:
        optimizer.apply([keras.ops.convert_to_tensor([gradient])], [variable])
    assert int(optimizer.iterations.numpy()) == 2
    assert float(optimizer.dynamic_scale.numpy()) == 0.5
    np.testing.assert_allclose(variable.numpy(), [-expected_update])


def test_overflow_on_any_replica_skips_the_step_on_all():
    """MirroredStrategy over 2 logical CPUs, a non-finite gradient on one
    replica: no weight moves, the scale halves, the step counts. Keras 3.15
    read replica 0's gradients only, so an overflow on replica 1 put NaN in the
    weights for good. In a child process: logical devices are set before
    TensorFlow starts."""
    from tests.helpers import run_python

    code = (
        "import tensorflow as tf\n"
        "cpu = tf.config.list_physical_devices('CPU')[0]\n"
        "tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)\n"
        "import keras, numpy as np\n"
        "from keras_bert_impl.training.optimization import StepCountingLossScaleOptimizer\n"
        "for bad in (None, 0, 1):\n"
        "    strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])\n"
        "    with strategy.scope():\n"
        "        variable = keras.Variable(np.ones(2, 'float32'))\n"
        "        optimizer = StepCountingLossScaleOptimizer(keras.optimizers.SGD(0.5), initial_scale=1.0)\n"
        "        optimizer.build([variable])\n"
        "    @tf.function\n"
        "    def step():\n"
        "        def on_replica():\n"
        "            replica = tf.distribute.get_replica_context().replica_id_in_sync_group\n"
        "            fault = tf.constant([np.inf, 1.0]) if bad is not None else tf.constant([1.0, 1.0])\n"
        "            gradient = tf.where(tf.equal(replica, bad if bad is not None else -1), fault, tf.constant([1.0, 3.0]))\n"
        "            optimizer.apply_gradients([(gradient, variable)])\n"
        "        strategy.run(on_replica)\n"
        "    step()\n"
        "    print(bad, variable.numpy().tolist(), float(optimizer.dynamic_scale.numpy()), int(optimizer.iterations.numpy()))\n"
    )
    # Finite on both: the summed gradient [2, 6] times 0.5 (Keras sums replicas' gradients of loss / replicas).
    assert run_python(code) == [
        "None [0.0, -2.0] 1.0 1",
        "0 [1.0, 1.0] 0.5 1",
        "1 [1.0, 1.0] 0.5 1",
    ]


def numpy_lamb_steps(params, grads_per_step, learning_rates, decayed, adapted, weight_decay_rate=0.01,
                     clip_norm=None, first_step=1):
    """LAMB (You et al. 2019, Algorithm 2, with Adam's bias correction and
    decoupled weight decay, as tf-models-official), in float64.

    Args:
        params: `{name: array}` initial values.
        grads_per_step: `[{name: gradient}]`, one dict per step.
        learning_rates: The learning rate of each step.
        decayed, adapted: Names that get weight decay / the trust ratio.
        clip_norm: Clip each step's gradients to this global norm (None: no clipping).
        first_step: `t` of the first step.
    """
    params = {k: v.astype(np.float64) for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(v) for k, v in params.items()}
    for t, (grads, lr) in enumerate(zip(grads_per_step, learning_rates), first_step):
        scale = 1.0
        if clip_norm:
            scale = clip_norm / max(np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in grads.values())), clip_norm)
        for name in params:
            g = grads[name].astype(np.float64) * scale
            m[name] = 0.9 * m[name] + 0.1 * g
            v[name] = 0.999 * v[name] + 0.001 * g * g
            r = (m[name] / (1 - 0.9**t)) / (np.sqrt(v[name] / (1 - 0.999**t)) + 1e-6)
            if name in decayed:
                r = r + weight_decay_rate * params[name]
            ratio = 1.0
            if name in adapted:
                param_norm, update_norm = np.linalg.norm(params[name]), np.linalg.norm(r)
                ratio = param_norm / update_norm if param_norm > 0 and update_norm > 0 else 1.0
            params[name] = params[name] - lr * ratio * r
    return params


def lamb_variables(seed=0):
    """A dense layer, a LayerNorm and an all-zero kernel: `{path below the model: variable}`."""
    rng = np.random.default_rng(seed)
    model = keras.Sequential([
        keras.Input((4,)),
        keras.layers.Dense(3, name="dense"),
        keras.layers.LayerNormalization(name="output_LayerNorm"),
        keras.layers.Dense(2, use_bias=False, kernel_initializer="zeros", name="pooler"),
    ])
    variables = {v.path.split("/", 1)[1]: v for v in model.trainable_variables}
    for path, variable in variables.items():
        if path != "pooler/kernel":  # The zero variable: ||param|| = 0, trust ratio 1.
            variable.assign(rng.normal(size=variable.shape).astype("float32"))
    return variables


def lamb_gradients(variables, steps, scale, seed=1):
    rng = np.random.default_rng(seed)
    return [{k: rng.normal(0, scale, v.shape).astype("float32") for k, v in variables.items()} for _ in range(steps)]


def test_lamb_updates_match_numpy_formulas_for_several_steps():
    """Schedule with warmup, clipping at global norm 1.0 exercised, a bias
    and a LayerNorm excluded from decay and trust ratio, a zero kernel."""
    variables = lamb_variables()
    initial = {k: v.numpy() for k, v in variables.items()}
    grads = lamb_gradients(variables, 6, scale=2.0)

    optimizer = create_optimizer(0.05, num_train_steps=6, num_warmup_steps=2, optimizer_type="lamb")
    assert isinstance(optimizer, Lamb)
    for step_grads in grads:
        optimizer.apply_gradients([(step_grads[k], variables[k]) for k in variables])
    kernels = {"dense/kernel", "pooler/kernel"}
    assert {k for k, v in variables.items() if optimizer.decays(v)} == kernels
    assert {k for k, v in variables.items() if optimizer.adapts(v)} == kernels
    lrs = [original_learning_rate(step, 0.05, 6, 2) for step in range(6)]
    expected = numpy_lamb_steps(initial, grads, lrs, decayed=kernels, adapted=kernels, clip_norm=1.0)
    for name, variable in variables.items():
        np.testing.assert_allclose(variable.numpy(), expected[name], rtol=1e-6, atol=1e-6, err_msg=name)
    # The trust ratio changed the kernel's step: plain AdamW (ratio 1) lands elsewhere.
    adamw = numpy_lamb_steps(initial, grads, lrs, decayed=kernels, adapted=set(), clip_norm=1.0)
    assert np.abs(adamw["dense/kernel"] - expected["dense/kernel"]).max() > 1e-3


def test_lamb_layer_adaptation_exclusions_are_their_own():
    """Without weight decay nothing decays, but the trust ratio still
    applies by the exclusion patterns (tf-models' rule); an empty list of
    exclusions adapts every variable, the LayerNorm and bias included."""
    variables = lamb_variables(seed=2)
    initial = {k: v.numpy() for k, v in variables.items()}
    grads = lamb_gradients(variables, 3, scale=0.1, seed=3)
    optimizer = Lamb(0.01, weight_decay_rate=0.0, exclude_from_layer_adaptation=[], global_clipnorm=None)
    for step_grads in grads:
        optimizer.apply_gradients([(step_grads[k], variables[k]) for k in variables])
    expected = numpy_lamb_steps(initial, grads, [0.01] * 3, decayed=set(), adapted=set(initial), weight_decay_rate=0.0)
    for name, variable in variables.items():
        np.testing.assert_allclose(variable.numpy(), expected[name], rtol=1e-6, atol=1e-6, err_msg=name)


def test_lamb_matches_tf_models_official():
    """tf-models-official's LAMB (a tf_keras legacy optimizer, so on plain
    tf.Variables of the same names), same values and gradients, 5 steps."""
    import tensorflow as tf

    from official.modeling.optimization.lamb import LAMB

    variables = lamb_variables(seed=4)
    theirs = {k: tf.Variable(v.numpy(), name=k) for k, v in variables.items()}
    grads = lamb_gradients(variables, 5, scale=0.5, seed=5)
    exclude = ["LayerNorm", "layer_norm", "bias"]
    reference = LAMB(learning_rate=0.02, weight_decay_rate=0.01, epsilon=1e-6, exclude_from_weight_decay=exclude)
    optimizer = create_optimizer(0.02, 100, 0, optimizer_type="lamb", global_clipnorm=None)
    optimizer._learning_rate = 0.02  # tf-models' LAMB without a schedule: constant rate.
    for step_grads in grads:
        reference.apply_gradients([(tf.constant(step_grads[k]), theirs[k]) for k in theirs])
        optimizer.apply_gradients([(step_grads[k], variables[k]) for k in variables])
    for name, variable in variables.items():
        np.testing.assert_allclose(variable.numpy(), theirs[name].numpy(), rtol=1e-6, atol=1e-6, err_msg=name)
    assert not np.allclose(variables["dense/kernel"].numpy(), lamb_variables(seed=4)["dense/kernel"].numpy())


def test_lamb_serializable():
    optimizer = create_optimizer(2e-3, 100, 10, optimizer_type="lamb", gradient_accumulation_steps=2,
                                 exclude_from_layer_adaptation=["LayerNorm"], beta_2=0.98)
    clone = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert isinstance(clone, Lamb)
    assert clone.get_config() == optimizer.get_config()
    assert clone.get_config()["exclude_from_layer_adaptation"] == ["LayerNorm"]
    assert clone.get_config()["exclude_from_weight_decay"] == ["LayerNorm", "layer_norm", "bias"]
    assert clone.beta_2 == 0.98 and clone.gradient_accumulation_steps == 2
    assert clone._learning_rate.get_config() == {"init_lr": 2e-3, "num_train_steps": 100, "num_warmup_steps": 10}
    assert Lamb.from_config(optimizer.get_config()).get_config() == optimizer.get_config()


def test_unknown_optimizer_type():
    with pytest.raises(ValueError, match="optimizer_type 'sgd' is unknown; choose one of adamw, lamb"):
        create_optimizer(1e-3, 10, 1, optimizer_type="sgd")


def test_lamb_under_mirrored_strategy_with_loss_scaling():
    """MirroredStrategy (one CPU device) and float16's loss scaling around
    LAMB: gradients scaled by 8 are unscaled before the update, which is the
    NumPy formulas' (step count, bias correction and trust ratio included)."""
    import tensorflow as tf

    from keras_bert_impl.training.optimization import StepCountingLossScaleOptimizer

    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        variables = lamb_variables(seed=6)
        optimizer = StepCountingLossScaleOptimizer(
            Lamb(0.03, global_clipnorm=None), initial_scale=8.0, dynamic_growth_steps=1000
        )
        optimizer.build(list(variables.values()))
    initial = {k: v.numpy() for k, v in variables.items()}
    grads = lamb_gradients(variables, 4, scale=0.3, seed=7)

    @tf.function
    def step(scaled):
        strategy.run(lambda: optimizer.apply_gradients([(scaled[k], variables[k]) for k in variables]))

    for step_grads in grads:
        step({k: tf.constant(g * 8.0) for k, g in step_grads.items()})
    assert int(optimizer.iterations.numpy()) == 4 and float(optimizer.dynamic_scale.numpy()) == 8.0
    kernels = {"dense/kernel", "pooler/kernel"}
    expected = numpy_lamb_steps(initial, grads, [0.03] * 4, decayed=kernels, adapted=kernels)
    for name, variable in variables.items():
        np.testing.assert_allclose(variable.numpy(), expected[name], rtol=1e-6, atol=1e-6, err_msg=name)
