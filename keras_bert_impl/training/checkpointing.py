"""Resumable training checkpoints in the original `run_pretraining` layout.

The original's `model.ckpt-<step>` holds every weight under its original name,
the Adam slots as `<name>/adam_m` and `<name>/adam_v`, and `global_step`. We
write exactly that (plus the float16 loss-scale state when there is one), so a
checkpoint is both a training state we resume from after a crash and an
original-format checkpoint any BERT tool can read.
"""

import re

import keras
import numpy as np
import tensorflow as tf

from keras_bert_impl import filesystem
from keras_bert_impl.checkpoints.name_map import original_variable_map
from keras_bert_impl.checkpoints.original import (
    assign_original_weights,
    open_checkpoint,
    write_checkpoint_state,
    write_checkpoint_tensors,
)
from keras_bert_impl.errors import CheckpointError, TrainingDivergedError
from keras_bert_impl.io import PARTIAL_MARK

CHECKPOINT_PREFIX = "model.ckpt"
# Not an original name: the dropout layers' RNG states, [num_layers, 2], so
# that a resumed run draws the dropout masks the uninterrupted one would.
DROPOUT_SEED_STATES = "keras/dropout_seed_generator_states"
_STEP = re.compile(r"model\.ckpt-(\d+)\.index$")


def _adam(optimizer):
    """The AdamWeightDecay inside an optional LossScaleOptimizer."""
    return getattr(optimizer, "inner_optimizer", optimizer)


def dropout_seed_states(model):
    """The model's dropout RNG state variables, in layer order."""
    return [v for v in model.non_trainable_variables if v.path.endswith("seed_generator_state")]


def training_state_tensors(model, optimizer):
    """`{original name: array}` of weights, Adam slots and `global_step`."""
    adam = _adam(optimizer)
    tensors = {}
    for name, variable in original_variable_map(model).items():
        tensors[name] = variable.numpy()
        if adam.built and variable.trainable:
            index = adam._get_variable_index(variable)
            tensors[f"{name}/adam_m"] = adam._m[index].numpy()
            tensors[f"{name}/adam_v"] = adam._v[index].numpy()
    tensors["global_step"] = np.asarray(int(adam.iterations.numpy()), np.int64)
    seeds = dropout_seed_states(model)
    if seeds:
        tensors[DROPOUT_SEED_STATES] = np.stack([np.asarray(v.numpy()) for v in seeds])
    if adam is not optimizer:
        tensors["loss_scale/dynamic_scale"] = optimizer.dynamic_scale.numpy()
        tensors["loss_scale/step_counter"] = optimizer.step_counter.numpy()
    return tensors


def checkpoint_steps(directory):
    """Steps of the complete `model.ckpt-<step>` checkpoints in `directory`, ascending."""
    if not filesystem.isdir(directory):
        return []
    steps = []
    for path in filesystem.glob(filesystem.join(filesystem.escape_glob(directory), "model.ckpt-*.index")):
        match = _STEP.search(filesystem.basename(path))
        if match:
            steps.append(int(match.group(1)))
    return sorted(steps)


def check_finite_weights(tensors, step, directory):
    """Refuses to save weights that hold NaN or infinity: a diverged run's
    checkpoint would resume, and be released, as if it were fine.

    Args:
        tensors: `training_state_tensors(...)` (the model's weights are checked).
        step: Their global step, in the message.
        directory: The run's output directory, in the message.

    Raises:
        TrainingDivergedError: naming the first such weight.
    """
    for name in sorted(original_weight_names(tensors)):
        if not np.all(np.isfinite(tensors[name])):
            raise TrainingDivergedError(
                f"{directory}: at step {step} the weight {name} holds NaN or infinite values; not saved "
                "(the checkpoints before it are kept). Lower the learning rate, or check the targets and "
                "sample weights for NaN or infinite values"
            )


def original_weight_names(tensors):
    """The names in `tensors` that are model weights (not Adam slots, step, RNG or loss-scale state)."""
    return {name for name in tensors if not name.endswith(("/adam_m", "/adam_v")) and name != "global_step"
            and name != DROPOUT_SEED_STATES and not name.startswith("loss_scale/")}


def save_training_checkpoint(model, optimizer, directory, keep=5):
    """Writes `directory/model.ckpt-<global_step>` atomically, keeps the last `keep`.

    Args:
        model, optimizer: What the checkpoint holds (weights, Adam slots, step).
        directory: The run's output directory.
        keep: How many numbered checkpoints to keep, newest first; 0 keeps all.

    Returns:
        The checkpoint prefix written.

    Raises:
        ValueError: a negative `keep` (it would delete the checkpoint just written).
    """
    if keep < 0:
        raise ValueError(f"keep must be >= 0, got {keep}")
    tensors = training_state_tensors(model, optimizer)
    step = int(tensors["global_step"])
    check_finite_weights(tensors, step, directory)
    prefix = write_checkpoint_tensors(tensors, filesystem.join(directory, f"{CHECKPOINT_PREFIX}-{step}"))
    steps = checkpoint_steps(directory)
    for old in steps[:-keep] if keep else []:
        for path in filesystem.glob(filesystem.join(filesystem.escape_glob(directory), f"{CHECKPOINT_PREFIX}-{old}.*")):
            filesystem.remove(path, missing_ok=True)
    write_checkpoint_state(directory, [f"{CHECKPOINT_PREFIX}-{s}" for s in checkpoint_steps(directory)])
    return prefix


def remove_unfinished_checkpoints(directory):
    """Deletes what a killed writer left of `directory/model.ckpt-*`
    (temporary `.partial-*` files; resuming never reads them).

    Call it only where no other process writes checkpoints to `directory`.
    """
    pattern = filesystem.join(filesystem.escape_glob(directory), f"{CHECKPOINT_PREFIX}*{PARTIAL_MARK}*")
    for path in filesystem.glob(pattern):
        filesystem.remove(path, missing_ok=True)


def restore_training_checkpoint(model, optimizer, prefix):
    """Restores weights, Adam slots, step, dropout RNG states (and loss scale).

    The optimizer is built on the model's trainable variables first. A
    checkpoint without slots (e.g. a released `bert_model.ckpt`) restores the
    weights and leaves the optimizer fresh at step 0.

    Returns:
        The restored global step.
    """
    _, reader = open_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    assign_original_weights(model, reader.get_tensor, shapes, source=prefix)
    adam = _adam(optimizer)
    if not adam.built:
        optimizer.build(model.trainable_variables)
    step = int(reader.get_tensor("global_step")) if "global_step" in shapes else 0
    for name, variable in original_variable_map(model).items():
        if not variable.trainable:
            continue
        index = adam._get_variable_index(variable)
        for slot, store in (("adam_m", adam._m), ("adam_v", adam._v)):
            key = f"{name}/{slot}"
            if key in shapes:
                store[index].assign(reader.get_tensor(key))
            elif step:
                raise CheckpointError(f"{prefix}: has global_step {step} but no {key}")
    # With gradient accumulation Keras counts micro-batches and reports
    # `iterations` as their number divided by the accumulation steps.
    adam._iterations.assign(step * (adam.gradient_accumulation_steps or 1))
    seeds = dropout_seed_states(model)
    if DROPOUT_SEED_STATES in shapes and list(shapes[DROPOUT_SEED_STATES]) == [len(seeds), 2]:
        for variable, state in zip(seeds, reader.get_tensor(DROPOUT_SEED_STATES)):
            variable.assign(state.astype(variable.dtype))
    if adam is not optimizer and "loss_scale/dynamic_scale" in shapes:
        optimizer.dynamic_scale.assign(reader.get_tensor("loss_scale/dynamic_scale"))
        optimizer.step_counter.assign(reader.get_tensor("loss_scale/step_counter"))
    return step


class TrainingCheckpoint(keras.callbacks.Callback):
    """Saves a training checkpoint every `every_n_steps` optimizer steps.

    Args:
        directory: The `--output_dir`.
        every_n_steps: `--save_checkpoints_steps`.
        keep: How many recent checkpoints to keep.
    """

    def __init__(self, directory, every_n_steps, keep=5):
        super().__init__()
        self.directory = directory
        self.every_n_steps = every_n_steps
        self.keep = keep

    def on_train_batch_end(self, batch, logs=None):
        step = int(_adam(self.model.optimizer).iterations.numpy())
        if step and step % self.every_n_steps == 0 and step not in checkpoint_steps(self.directory):
            save_training_checkpoint(self.model, self.model.optimizer, self.directory, self.keep)
