"""Where a training run continues, and the callbacks that let it continue.

Pretraining and every fine-tuning job train the same way: `model.fit` up to an
exact optimizer step count, `model.ckpt-<step>` every N steps, TensorBoard
scalars, and a rerun after an interruption (even kill -9) that continues from
the newest complete checkpoint, once its recorded settings are checked
(`training.run_settings`). This module holds those shared pieces, so that a
new job gets resuming by calling them rather than writing the sequence again.

Example:
>>> [type(c).__name__ for c in step_callbacks(10, "/tmp/run", 5, None, 5, chief=False)]
['StopOnNonFiniteLoss', 'StopAtStep', 'TrainingSummaries']
"""

from keras_bert_impl import filesystem
from keras_bert_impl.training.callbacks import StopAtStep, StopOnNonFiniteLoss, TrainingSummaries
from keras_bert_impl.training.checkpointing import (
    CHECKPOINT_PREFIX,
    TrainingCheckpoint,
    checkpoint_steps,
    remove_unfinished_checkpoints,
    restore_training_checkpoint,
)
from keras_bert_impl.training.run_settings import check_run_settings


def resume_training(model, optimizer, output_dir, settings=None, allow_changed_settings=False, chief=True,
                    log=print, setting_defaults=None):
    """Restores the newest complete `model.ckpt-<step>` of `output_dir`, if any.

    In order: what a killed writer left is removed (by the chief only: no
    other process writes there), the run's `settings` are checked against
    the recorded ones and recorded (`check_run_settings`), and the newest
    checkpoint's weights, Adam slots, step and dropout RNG states are
    restored into `model` and `optimizer`.

    Args:
        model: The model, built in its distribution strategy.
        optimizer: Its optimizer (built on the trainable variables here).
        output_dir: The run's output directory.
        settings: `{name: value}` of what decides the run's course, or None
            to skip the check (a run that does not train).
        allow_changed_settings: Resume with other settings on purpose.
        chief: Whether this process writes (multi-worker runs: the chief).
        log: `log(message)`.
        setting_defaults: The values of `settings` recorded only away from
            them (`run_settings.changed_settings`).

    Returns:
        `(step, prefix)`: the step restored and the checkpoint it came from,
        `(0, None)` for a fresh run.

    Raises:
        ChangedSettingsError: resuming with other settings, not allowed.
    """
    if chief:
        remove_unfinished_checkpoints(output_dir)
    existing = checkpoint_steps(output_dir)
    if settings is not None:
        check_run_settings(output_dir, settings, resuming=bool(existing), allow_changes=allow_changed_settings,
                           write=chief, log=log, defaults=setting_defaults)
    if not existing:
        return 0, None
    prefix = filesystem.join(output_dir, f"{CHECKPOINT_PREFIX}-{existing[-1]}")
    with model.distribute_strategy.scope():
        step = restore_training_checkpoint(model, optimizer, prefix)
    return step, prefix


def step_callbacks(num_train_steps, checkpoint_dir, save_checkpoints_steps, summary_dir, summary_steps, keep=5,
                   chief=True):
    """The callbacks of a run to `num_train_steps` that resumes.

    Args:
        num_train_steps: The optimizer step at which `fit` stops.
        checkpoint_dir: Where `model.ckpt-<step>` goes.
        save_checkpoints_steps: Steps between checkpoints.
        summary_dir: TensorBoard log directory (None: none).
        summary_steps: Steps between scalar summaries.
        keep: Numbered checkpoints kept (0: all).
        chief: Only the chief writes checkpoints and summaries; the other
            workers still compute the summarised metrics with it.

    Returns:
        `[StopOnNonFiniteLoss, StopAtStep, TrainingSummaries]`, plus
        `TrainingCheckpoint` on the chief: last, so that a step whose loss
        is not finite is never saved.
    """
    callbacks = [
        StopOnNonFiniteLoss(checkpoint_dir),
        StopAtStep(num_train_steps),
        TrainingSummaries(summary_dir if chief else None, summary_steps),
    ]
    if chief:
        callbacks.append(TrainingCheckpoint(checkpoint_dir, save_checkpoints_steps, keep=keep))
    return callbacks
