"""The optimizer and schedule against a NumPy transcription of the original
`optimization.py` (AdamWeightDecayOptimizer, polynomial decay + warmup,
clip_by_global_norm)."""

import re

import keras
import numpy as np
import pytest

from keras_bert_impl.training.optimization import AdamWeightDecay, WarmupLinearDecay, create_optimizer


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
