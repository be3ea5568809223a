"""keras-hub presets by name (`kaggle://OWNER/MODEL/keras/VARIATION[/VERSION]`, `bert_tiny_en_uncased`), from a
loopback Kaggle stand-in on 127.0.0.1 (`tests/kaggle_fixture.py`) that kagglehub reaches through
`KAGGLE_API_ENVIRONMENT` and `HTTP_PROXY`.

The presets are tiny keras-hub models that the tests build and save with
keras-hub's `save_to_preset`; the oracle is that keras-hub model's own
output on the tokens keras-hub's own tokenizer gives.
"""

import json
import os
import re
import signal
import time

import numpy as np
import pytest

from keras_bert_impl.checkpoints.sources import (
    SourceError,
    find_release,
    list_cached_releases,
    remove_cached_release,
)
from keras_bert_impl.config import BertConfig
from tests.hub_fixture import wordpiece_vocab
from tests.kaggle_fixture import KaggleServer

TOLERANCE = 1e-4
TEXTS = ["the film was good", "a very bad film , not great", "the"]
HANDLE = "keras/bert/keras/tiny_bert_en_uncased"


@pytest.fixture
def kaggle(tmp_path, monkeypatch):
    """The stand-in in kagglehub's environment, a fresh cache, no Kaggle credentials or cache of the user's."""
    monkeypatch.setenv("KERAS_BERT_IMPL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("KAGGLEHUB_CACHE", str(tmp_path / "kagglehub_cache"))
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(tmp_path / "kaggle_config"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("KAGGLE_USERNAME", "KAGGLE_KEY", "KAGGLE_API_TOKEN", "HTTPS_PROXY", "https_proxy", "ALL_PROXY",
                 "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    server = KaggleServer()
    for name, value in server.environment().items():
        monkeypatch.setenv(name, value)
    yield server
    server.stop()


def _tiny_preset(directory, seed):
    """A keras-hub `BertBackbone` (weights away from their initial values) and tokenizer saved as a preset.

    Returns:
        `(backbone, tokenizer, {relative path: bytes})`.
    """
    import keras
    import keras_hub

    keras.utils.set_random_seed(seed)
    vocabulary = wordpiece_vocab().decode().split()
    backbone = keras_hub.models.BertBackbone(vocabulary_size=len(vocabulary), num_layers=2, num_heads=2,
                                             hidden_dim=16, intermediate_dim=24, dropout=0.0, max_sequence_length=32)
    rng = np.random.default_rng(seed)
    for variable in backbone.weights:  # not LayerNorm's ones and zeros
        variable.assign(rng.normal(0.5, 0.3, variable.shape))
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocabulary, lowercase=True)
    backbone.save_to_preset(str(directory))
    tokenizer.save_to_preset(str(directory))
    files = {path.relative_to(directory).as_posix(): path.read_bytes() for path in directory.rglob("*") if path.is_file()}
    return backbone, tokenizer, files


def _keras_hub_mean(backbone, tokenizer, embedder):
    """keras-hub's mean-pooled sequence output of TEXTS, on ids keras-hub's tokenizer gives (checked equal to
    ours), and our ids."""
    inputs = {key: np.asarray(value) for key, value in embedder.preprocessor(TEXTS).items()}
    mask = inputs["input_mask"].astype(bool)
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    for row, text in enumerate(TEXTS):
        theirs = [cls_id] + [int(i) for i in np.asarray(tokenizer(text))] + [sep_id]
        assert inputs["input_ids"][row][mask[row]].tolist() == theirs
    sequence = backbone({"token_ids": inputs["input_ids"], "segment_ids": inputs["segment_ids"],
                         "padding_mask": inputs["input_mask"]})["sequence_output"]
    weights = mask.astype(np.float64)[:, :, None]
    return (np.asarray(sequence, np.float64) * weights).sum(1) / weights.sum(1)


def test_a_kaggle_handle_equals_keras_hubs_model_then_loads_with_the_server_stopped(kaggle, tmp_path, capfd):
    from keras_bert_impl.tasks.text_embedder import TextEmbedder

    backbone, tokenizer, files = _tiny_preset(tmp_path / "preset", seed=2)
    kaggle.add(HANDLE, {"config.json": b"{}"}, version=1)  # an older one: not taken (not a preset this could load)
    kaggle.add(HANDLE, dict(files, **{"extra.py": b"import os\n"}), version=2)
    logged = []
    directory = find_release(f"kaggle://{HANDLE}", log=logged.append).checkpoint.rsplit(os.sep, 1)[0]
    assert directory == str(tmp_path / "cache" / "releases" / "kaggle" / "keras--bert--keras--tiny_bert_en_uncased"
                            / "2")  # the newest version
    assert any("fetching version 2 from Kaggle (http://localhost)" in line for line in logged)
    assert sorted(kaggle.downloads()) == sorted(["config.json"] + list(files) + ["extra.py"])
    out, err = capfd.readouterr()
    assert out == "" and err == ""  # kagglehub's lines (on stdout) and progress bars (stderr is no terminal) kept out

    embedder = TextEmbedder.from_release(f"kaggle://{HANDLE}", pooling="mean", max_seq_length=32)
    reference = _keras_hub_mean(backbone, tokenizer, embedder)
    online = embedder.predict(TEXTS, verbose=0)
    assert np.max(np.abs(online - reference)) < TOLERANCE
    assert TextEmbedder.from_release(f"kaggle://{HANDLE}/2", pooling="mean", max_seq_length=32) is not None
    assert len(kaggle.downloads("model.weights.h5")) == 1  # converted once: the later loads took the cache
    assert not (tmp_path / "kagglehub_cache").exists()  # nothing in kagglehub's own cache
    (cached,) = list_cached_releases()
    assert (cached.source, cached.revisions) == (f"kaggle://{HANDLE}/2", ("latest",))

    kaggle.stop()
    logged = []
    assert find_release(f"kaggle://{HANDLE}", log=logged.append).checkpoint.startswith(directory)
    assert len(logged) == 1 and re.fullmatch(rf"kaggle://{HANDLE}: cannot reach Kaggle \(http://localhost\): using the "
                                             "cached copy of version 2", logged[0])
    for source in (f"kaggle://{HANDLE}", f"kaggle://{HANDLE}/2"):
        offline = TextEmbedder.from_release(source, pooling="mean", max_seq_length=32).predict(TEXTS, verbose=0)
        np.testing.assert_array_equal(offline, online)
    assert remove_cached_release(f"kaggle://{HANDLE}/2") == [directory] and list_cached_releases() == []


def test_a_bare_preset_name_is_fetched_as_keras_hubs_registry_names_it(kaggle, tmp_path):
    import keras_hub

    from keras_bert_impl.tasks.text_embedder import TextEmbedder

    handle = keras_hub.models.BertBackbone.presets["bert_tiny_en_uncased"]["kaggle_handle"]
    owner_to_variation, version = handle.removeprefix("kaggle://").rsplit("/", 1)
    backbone, tokenizer, files = _tiny_preset(tmp_path / "preset", seed=3)
    kaggle.add(owner_to_variation, files, version=int(version))
    kaggle.add(owner_to_variation, {"config.json": b"{}"}, version=int(version) + 1)  # a newer one: not taken
    embedder = TextEmbedder.from_release("bert_tiny_en_uncased", pooling="mean", max_seq_length=32)
    assert np.max(np.abs(embedder.predict(TEXTS, verbose=0) - _keras_hub_mean(backbone, tokenizer, embedder))) < TOLERANCE
    assert [endpoint for endpoint, _ in kaggle.requests].count("GetModelInstance") == 0  # the registry's version
    (cached,) = list_cached_releases()
    assert cached.source == handle
    kaggle.stop()
    assert find_release("bert_tiny_en_uncased").checkpoint.startswith(cached.directory)  # no server needed
    assert remove_cached_release("bert_tiny_en_uncased") == [cached.directory]


def test_bad_kaggle_sources_are_one_line_each(kaggle, tmp_path):
    gpt2 = {"config.json": json.dumps({"module": "keras_hub.src.models.gpt2.gpt2_backbone",
                                       "class_name": "GPT2Backbone", "config": {}}).encode(),
            "model.weights.h5": b"h5", "metadata.json": b"{}"}
    kaggle.add("keras/gpt2/keras/gpt2_tiny_en", gpt2, version=1)
    kaggle.add("someone/bert/keras/not_a_preset", {"model.weights.h5": b"h5"}, version=1)
    cases = {
        "kaggle://keras/bert": r"^kaggle://keras/bert: not a Kaggle model handle; write "
                               r"kaggle://OWNER/MODEL/keras/VARIATION\[/VERSION\] \(VERSION a number from 1\)$",
        "kaggle://keras/bert/keras/x/0": r"^kaggle://keras/bert/keras/x/0: not a Kaggle model handle; .*$",
        "kaggle://keras/bert/pyTorch/x/1": r"^kaggle://keras/bert/pyTorch/x/1: a pyTorch model, not a keras-hub "
                                           r"preset; write kaggle://OWNER/MODEL/keras/VARIATION\[/VERSION\]$",
        "kaggle://keras/none/keras/nothing": r"^kaggle://keras/none/keras/nothing: no such model on Kaggle "
                                             r"\(http://localhost\)$",
        f"kaggle://{HANDLE}/9": rf"^kaggle://{HANDLE}/9: Kaggle \(http://localhost\) has no config\.json in it: no "
                                r"such model or version, or not a keras-hub preset$",
        "kaggle://someone/bert/keras/not_a_preset/1": r"^kaggle://someone/bert/keras/not_a_preset/1: Kaggle .* has no "
                                                      r"config\.json in it: .*$",
        "kaggle://keras/gpt2/keras/gpt2_tiny_en": r"^kaggle://keras/gpt2/keras/gpt2_tiny_en: a keras-hub preset of a "
                                                  r"'GPT2Backbone', not one we compute \(BertBackbone, RobertaBackbone, "
                                                  r"AlbertBackbone, DistilBertBackbone\)$",
        "bert_base_en_uncasd": r"^bert_base_en_uncasd: no such file or directory, and not one of keras-hub's BERT, "
                               r"RoBERTa, ALBERT or DistilBERT preset names; did you mean bert_base_en_uncased.*\?$",
        "gemma_2b_en": r"^gemma_2b_en: a keras-hub preset of gemma \(kaggle://keras/gemma/keras/gemma_2b_en/\d+\), "
                       r"not a model we compute \(keras-hub's BERT, RoBERTa, ALBERT and DistilBERT presets\)$",
    }
    for source, message in cases.items():
        with pytest.raises(SourceError, match=message):
            find_release(source)
    assert kaggle.downloads("model.weights.h5") == []  # refused on config.json alone
    assert not any(body.get("modelSlug") == "gemma" for _, body in kaggle.requests)  # refused by the registry
    assert list_cached_releases() == []
    kaggle.stop()
    with pytest.raises(SourceError, match=rf"^kaggle://{HANDLE}: cannot reach Kaggle \(http://localhost: ProxyError: "
                                          r".*\) and the cache \(.*\) holds no copy of it$"):
        find_release(f"kaggle://{HANDLE}")
    leftovers = list((tmp_path / "cache" / "releases" / "kaggle").rglob("*"))
    assert [path for path in leftovers if path.is_file() and not path.name.endswith(".lock")] == []


def test_a_download_killed_midway_leaves_nothing_complete_and_the_next_load_completes(kaggle, tmp_path):
    from tests.test_sources import _resolve_in_a_process

    _, _, files = _tiny_preset(tmp_path / "preset", seed=5)
    kaggle.add(HANDLE, files, version=1)
    kaggle.stalls["model.weights.h5"] = 60
    process = _resolve_in_a_process(f"kaggle://{HANDLE}")
    deadline = time.time() + 120
    while not kaggle.downloads("model.weights.h5") and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)  # the first half written
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert kaggle.downloads("model.weights.h5"), "the download never started"
    versions_dir = tmp_path / "cache" / "releases" / "kaggle" / "keras--bert--keras--tiny_bert_en_uncased"
    assert not (versions_dir / "1").exists() and list_cached_releases() == []
    del kaggle.stalls["model.weights.h5"]
    release = find_release(f"kaggle://{HANDLE}")
    assert release.checkpoint.startswith(str(versions_dir / "1"))
    assert sorted(os.listdir(versions_dir)) == ["1", "refs"]  # no download, conversion or probe left behind


def test_a_tool_prints_one_line_for_a_bad_kaggle_source(kaggle, tmp_path, capfd):
    """The tool in this process, as its console script runs it (`run_tool`)."""
    from keras_bert_impl.cli import run_tool
    from tools.export_saved_model import main as export_main

    capfd.readouterr()
    code = run_tool(export_main, ["--model_dir=kaggle://keras/none/keras/nothing/1", "--task=embeddings",
                                  f"--export_dir={tmp_path}/saved_models/none"], prog="export_saved_model")
    stderr = capfd.readouterr().err
    assert code != 0 and "Traceback" not in stderr
    assert re.fullmatch(r"export_saved_model\S*: error: kaggle://keras/none/keras/nothing/1: Kaggle "
                        r"\(http://localhost\) has no config\.json in it: no such model or version, or not a keras-hub "
                        r"preset", stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("model_type", ["roberta", "albert", "distilbert"])
def test_variant_presets_on_kaggle_and_on_the_hub_compute_keras_hubs_output(kaggle, tmp_path, monkeypatch, model_type):
    """RoBERTa, ALBERT and DistilBERT presets keras-hub made, by Kaggle handle and as an `hf://` repository (both
    through the variants' converter: the Hub's was refused as "a 'RobertaBackbone', not a BertBackbone" before)."""
    from tests.hub_fixture import HubServer
    from tests.test_variants_keras_hub import _batch, _keras_hub_made_preset, _ours, _sequence

    backbone, preset = _keras_hub_made_preset(tmp_path, model_type)
    files = {path.relative_to(preset).as_posix(): path.read_bytes() for path in preset.rglob("*") if path.is_file()}
    kaggle.add(f"keras/{model_type}/keras/tiny_{model_type}", files, version=1)
    hub = HubServer()
    try:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
        hub.add(f"keras/tiny-{model_type}-preset", files)
        ours, theirs = _batch(model_type)
        reference = _sequence(backbone(theirs))
        for source in (f"kaggle://keras/{model_type}/keras/tiny_{model_type}/1", f"hf://keras/tiny-{model_type}-preset"):
            release = find_release(source)
            assert BertConfig.from_json_file(release.bert_config_file).model_type == model_type
            model = _ours(os.path.dirname(release.checkpoint))
            assert np.max(np.abs(_sequence(model(ours)) - reference)) < 1e-5, source
    finally:
        hub.stop()
