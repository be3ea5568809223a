"""The settings a training run was started with, kept beside its checkpoints.

A rerun into the same `--output_dir` resumes from the newest checkpoint
there. With the settings it was started with, that is what the user wants;
with others (another learning rate, step count, batch size or data), the
run would silently continue on a mix of the two, and its results would
look as if they came from the new command. So a run writes the settings
that decide its course to `training_settings.json` and a resume compares
them: a difference is refused, naming each setting, unless the caller
allows it (the original's two-phase pretraining, 128 tokens then 512,
continues its checkpoints on purpose).

Example:
>>> changed_settings({"learning_rate": 5e-05, "seed": 1}, {"learning_rate": 2e-05, "seed": 1})
['learning_rate 5e-05 (now 2e-05)']
"""

import json

from keras_bert_impl import filesystem
from keras_bert_impl.errors import CheckpointError
from keras_bert_impl.io import write_text_atomically

RUN_SETTINGS_FILE = "training_settings.json"


class ChangedSettingsError(CheckpointError):
    """A resume with settings other than those its checkpoints were trained with."""


def _normalized(settings):
    """`settings` as they read back from JSON (tuples become lists)."""
    return json.loads(json.dumps(settings, sort_keys=True))


def changed_settings(recorded, current, defaults=None):
    """`"name old (now new)"` for each setting that differs, sorted by name.

    Args:
        recorded: The settings the run was started with.
        current: This run's.
        defaults: `{name: value}` of the settings a run records only where
            they differ from this value (a recipe's switch added after runs
            were recorded without it): on a side without it, the setting is
            that value, and named as the default.

    Returns:
        A list of strings; empty when they agree.

    Example:
    >>> changed_settings({"optimizer": "lamb"}, {}, defaults={"optimizer": "adamw"})
    ['optimizer "lamb" (now the default "adamw")']
    """
    recorded, current = _normalized(recorded), _normalized(current)
    defaults = _normalized(defaults or {})
    missing = object()
    changes = []
    for name in sorted(set(recorded) | set(current)):
        old, new = recorded.get(name, missing), current.get(name, missing)
        if (defaults.get(name, missing) if old is missing else old) == (
                defaults.get(name, missing) if new is missing else new):
            continue
        if old is missing:
            old = f"not recorded: the default {json.dumps(defaults[name])}" if name in defaults else "not recorded"
        else:
            old = json.dumps(old)
        if new is missing:
            new = f"the default {json.dumps(defaults[name])}" if name in defaults else "not given"
        else:
            new = json.dumps(new)
        changes.append(f"{name} {old} (now {new})")
    return changes


def read_run_settings(directory):
    """The settings recorded in `directory`, or None where there are none.

    Raises:
        CheckpointError: the file is not a JSON object (named).
    """
    path = filesystem.join(directory, RUN_SETTINGS_FILE)
    if not filesystem.exists(path):
        return None
    with filesystem.open_file(path) as f:
        text = f.read()
    try:
        settings = json.loads(text)
    except json.JSONDecodeError as error:
        raise CheckpointError(f"{path}: not JSON ({error}); remove it to resume without the check") from None
    if not isinstance(settings, dict):
        raise CheckpointError(f"{path}: not a JSON object; remove it to resume without the check")
    return settings


def check_run_settings(directory, settings, resuming, allow_changes=False, flag="--allow_changed_settings",
                       write=True, log=print, defaults=None):
    """Refuses to resume with other settings; records this run's.

    Call it before restoring a checkpoint and before training.

    Args:
        directory: The run's output directory.
        settings: `{name: JSON value}` of what decides the run's course
            (learning rate, step counts, batch size, data, seed...).
        resuming: Whether `directory` holds a checkpoint the run will
            continue from. Without one, the settings are simply recorded.
        allow_changes: Resume with the new settings anyway (and record them).
        flag: The option that sets `allow_changes`, named in the error.
        write: Record the settings (False on a multi-worker run's
            non-chief workers: the chief writes).
        log: `log(message)`.
        defaults: The values of settings recorded only away from them
            (`changed_settings`).

    Raises:
        ChangedSettingsError: resuming with other settings, not allowed; the
            message lists each difference.
    """
    recorded = read_run_settings(directory)
    if resuming and recorded is None:
        log(f"{directory} holds checkpoints but no {RUN_SETTINGS_FILE}: resuming without checking the settings")
    elif resuming:
        changes = changed_settings(recorded, settings, defaults)
        if changes and not allow_changes:
            raise ChangedSettingsError(
                f"{directory}: its checkpoints were trained with other settings: {'; '.join(changes)}. "
                f"Resuming would continue them under the new ones. Use another output directory, "
                f"or pass {flag} to continue with the new settings on purpose."
            )
        if changes:
            log(f"continuing {directory} with changed settings: {'; '.join(changes)}")
    if write and recorded != _normalized(settings):
        write_text_atomically(
            filesystem.join(directory, RUN_SETTINGS_FILE), json.dumps(settings, indent=2, sort_keys=True) + "\n"
        )
