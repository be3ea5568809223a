"""training/run_settings.py: a resume with other settings is refused, naming
each change; the same settings, a fresh directory, or an allowed change
record what the run continues with."""

import json

import pytest

from keras_bert_impl.errors import CheckpointError
from keras_bert_impl.training.run_settings import (
    RUN_SETTINGS_FILE,
    ChangedSettingsError,
    changed_settings,
    check_run_settings,
)

SETTINGS = {"learning_rate": 5e-5, "num_train_steps": 100, "input_files": ("a", "b"), "seed": 1}


def recorded(directory):
    return json.loads((directory / RUN_SETTINGS_FILE).read_text())


def test_changes_are_named_with_old_and_new_values():
    new = dict(SETTINGS, learning_rate=2e-5, num_train_steps=200, input_files=["a", "b", "c"])
    del new["seed"]
    new["clip_norm"] = 1.0
    assert changed_settings(SETTINGS, new) == [
        "clip_norm not recorded (now 1.0)",
        'input_files ["a", "b"] (now ["a", "b", "c"])',
        "learning_rate 5e-05 (now 2e-05)",
        "num_train_steps 100 (now 200)",
        "seed 1 (now not given)",
    ]
    # A tuple reads back from JSON as a list: no change.
    assert changed_settings(SETTINGS, dict(SETTINGS, input_files=["a", "b"])) == []


def test_a_setting_recorded_only_away_from_its_default_reads_as_the_default_where_absent():
    defaults = {"optimizer": "adamw", "next_sentence_prediction": True}
    lamb = dict(SETTINGS, optimizer="lamb")
    assert changed_settings(lamb, SETTINGS, defaults) == ['optimizer "lamb" (now the default "adamw")']
    assert changed_settings(SETTINGS, lamb, defaults) == ['optimizer not recorded: the default "adamw" (now "lamb")']
    # Given as its default on one side and absent on the other: the same run.
    assert changed_settings(dict(SETTINGS, optimizer="adamw"), SETTINGS, defaults) == []
    # Without defaults, as before.
    assert changed_settings(lamb, SETTINGS) == ['optimizer "lamb" (now not given)']


def test_fresh_run_records_and_same_settings_resume(tmp_path):
    check_run_settings(str(tmp_path), SETTINGS, resuming=False, log=pytest.fail)
    assert recorded(tmp_path) == dict(SETTINGS, input_files=["a", "b"])
    written = (tmp_path / RUN_SETTINGS_FILE).stat().st_mtime_ns
    check_run_settings(str(tmp_path), SETTINGS, resuming=True, log=pytest.fail)
    assert (tmp_path / RUN_SETTINGS_FILE).stat().st_mtime_ns == written  # Not rewritten.


def test_resume_with_other_settings_is_refused_and_changes_nothing(tmp_path):
    check_run_settings(str(tmp_path), SETTINGS, resuming=False)
    before = (tmp_path / RUN_SETTINGS_FILE).read_bytes()
    with pytest.raises(ChangedSettingsError, match=r"learning_rate 5e-05 \(now 0\.0001\).*--allow_changed_settings"):
        check_run_settings(str(tmp_path), dict(SETTINGS, learning_rate=1e-4), resuming=True)
    assert (tmp_path / RUN_SETTINGS_FILE).read_bytes() == before


def test_allowed_change_is_logged_and_recorded(tmp_path):
    check_run_settings(str(tmp_path), SETTINGS, resuming=False)
    messages = []
    check_run_settings(str(tmp_path), dict(SETTINGS, num_train_steps=300), resuming=True, allow_changes=True,
                       log=messages.append)
    assert messages == [f"continuing {tmp_path} with changed settings: num_train_steps 100 (now 300)"]
    assert recorded(tmp_path)["num_train_steps"] == 300


def test_other_settings_without_checkpoints_start_over(tmp_path):
    """A run killed before its first checkpoint left only its settings: nothing to mix."""
    check_run_settings(str(tmp_path), SETTINGS, resuming=False)
    check_run_settings(str(tmp_path), dict(SETTINGS, seed=2), resuming=False, log=pytest.fail)
    assert recorded(tmp_path)["seed"] == 2


def test_checkpoints_of_an_unrecorded_run_resume_with_a_note(tmp_path):
    messages = []
    check_run_settings(str(tmp_path), SETTINGS, resuming=True, log=messages.append)
    assert messages and RUN_SETTINGS_FILE in messages[0]
    assert recorded(tmp_path)["seed"] == 1


def test_non_chief_reads_but_does_not_write(tmp_path):
    check_run_settings(str(tmp_path), SETTINGS, resuming=False, write=False)
    assert not (tmp_path / RUN_SETTINGS_FILE).exists()


@pytest.mark.parametrize("text", ["{not json", "[1, 2]"])
def test_damaged_settings_file_is_named(tmp_path, text):
    (tmp_path / RUN_SETTINGS_FILE).write_text(text)
    with pytest.raises(CheckpointError, match=RUN_SETTINGS_FILE):
        check_run_settings(str(tmp_path), SETTINGS, resuming=True)
