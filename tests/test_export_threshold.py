"""`bert-export --threshold`: a multi-label export's `label_mask` at the thresholds given, in place of the
release's, checked against NumPy on the export's own probabilities; its one-line refusals."""

import json

import numpy as np
import pytest

from tests.test_multi_label import random_tagger


@pytest.fixture(scope="module")
def tagger_release(tmp_path_factory):
    """`(release, texts, probabilities)`: a multi-label release recording thresholds (0.5, 0.3, 0.7)."""
    model, texts = random_tagger()
    model.threshold = (0.5, 0.3, 0.7)
    release = tmp_path_factory.mktemp("tagger") / "release"
    model.save_release(str(release))
    return release, texts, model.predict(texts, verbose=0)


def test_the_thresholds_given_decide_the_label_mask(tagger_release, tmp_path, capsys):
    import tensorflow as tf

    from keras_bert_impl.cli import run_tool
    from keras_bert_impl.serving.export import read_export_metadata
    from tools.export_saved_model import main as export_main

    release, texts, probabilities = tagger_release
    assert json.loads((release / "multi_label.json").read_text())["thresholds"] == [0.5, 0.3, 0.7]
    # Per label, each between two of the probabilities, so that each label's mask has both answers.
    given = tuple(float(np.round(np.median(probabilities[:, i]), 4)) for i in range(3))
    assert all(0 < (probabilities[:, i] >= given[i]).mean() < 1 for i in range(3))
    export_dir = tmp_path / "saved" / "tags"
    flags = [f"--model_dir={release}", "--task=multi_label", "--max_seq_length=10", f"--export_dir={export_dir}"]
    assert run_tool(export_main, [*flags, "--threshold=" + ",".join(map(str, given)), "--noverify"],
                    prog="bert-export") == 0, capsys.readouterr().err
    assert read_export_metadata(str(export_dir / "1"))["thresholds"] == list(given)
    outputs = tf.saved_model.load(str(export_dir / "1")).signatures["serving_default"](tf.constant(texts))
    served = outputs["probabilities"].numpy()
    np.testing.assert_allclose(served, probabilities, atol=1e-4)
    mask = outputs["label_mask"].numpy()
    np.testing.assert_array_equal(mask, served >= np.array(given, np.float32))
    assert (mask != (served >= np.array([0.5, 0.3, 0.7], np.float32))).any()  # not the release's

    # One number: every label's threshold.
    assert run_tool(export_main, [*flags, "--threshold=0.45", "--noverify"], prog="bert-export") == 0
    assert read_export_metadata(str(export_dir / "2"))["thresholds"] == [0.45, 0.45, 0.45]
    outputs = tf.saved_model.load(str(export_dir / "2")).signatures["serving_default"](tf.constant(texts))
    np.testing.assert_array_equal(outputs["label_mask"].numpy(), outputs["probabilities"].numpy() >= np.float32(0.45))


@pytest.mark.parametrize("extra, code, fragment", [
    (["--threshold=0.5,0.3"], 1, "threshold has 2 values for 3 labels: give one number, or one per label"),
    (["--threshold=0.5,high,0.2"], 2, "--threshold=0.5,high,0.2: give one number, or one per label, comma-separated"),
    (["--threshold=0.5,1.0,0.2"], 2, "--threshold=0.5,1.0,0.2: each threshold is a probability in (0, 1)"),
    (["--threshold=0.5", "--task=classifier"], 2,
     "--threshold is for --task=multi_label (a sigmoid per label), not --task=classifier"),
])
def test_a_bad_threshold_is_one_line(tagger_release, tmp_path, capsys, extra, code, fragment):
    from keras_bert_impl.cli import run_tool
    from tools.export_saved_model import main as export_main

    release, _, _ = tagger_release
    export_dir = tmp_path / "saved" / "tags"
    flags = [f"--model_dir={release}", "--task=multi_label", "--max_seq_length=10", f"--export_dir={export_dir}"]
    capsys.readouterr()
    assert run_tool(export_main, [*flags, *extra], prog="bert-export") == code
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("bert-export: error: ") and fragment in error, error
    assert not (export_dir / "1").exists()
