"""Weights by name (`hf://ORG/NAME[@REVISION]`), from a loopback Hub on 127.0.0.1 (`tests/hub_fixture.py`).

The repositories are made here: RoBERTa, ALBERT and DistilBERT are the
directories that `transformers` itself wrote for `tests/test_transformers_oracle.py`
(with its float64 outputs: the oracle), BERT ones are written by hand and
checked against keras-hub's own Hugging Face loader. Every fault is injected:
the server answers 404 / 500, cuts a body short, flips its bytes or stalls
while the client is killed; a cached file is changed; two processes load
one source at once.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from keras_bert_impl.errors import CheckpointError
from keras_bert_impl.checkpoints.sources import (
    MANIFEST_FILE,
    SourceError,
    list_cached_releases,
    parse_hub_source,
    remove_cached_release,
)
from tests.helpers import run_tool_here
from tests.hub_fixture import HubServer, bert_repository, directory_files, safetensors_bytes, wordpiece_vocab
from tests.test_transformers_oracle import ORACLE, _with_tokenizer_files

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOLERANCE = 1e-4
TEXTS = ["the film was good", "a very bad film , not great", "the"]


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A loopback Hub in `HF_ENDPOINT`, a fresh cache in `KERAS_BERT_IMPL_CACHE`, nothing of the user's."""
    monkeypatch.setenv("KERAS_BERT_IMPL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    server = HubServer()
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    yield server
    server.stop()


def _releases_dir(tmp_path):
    return tmp_path / "cache" / "releases"


def _gets(hub, name):
    return [path for method, path in hub.requests if method == "GET" and path.endswith("/" + name)]


def _masked_mean(sequence, mask):
    mask = mask.astype(np.float64)[:, :, None]
    return (sequence.astype(np.float64) * mask).sum(1) / mask.sum(1)


def _oracle_batch(name, batch):
    load = lambda key: np.load(ORACLE / name / f"{batch}_{key}.npy")  # noqa: E731
    inputs = {"input_ids": load("input_ids").astype("int32"), "input_mask": load("attention_mask").astype("int32")}
    inputs["segment_ids"] = (load("token_type_ids") if name == "albert" else np.zeros_like(load("input_ids"))
                             ).astype("int32")
    return inputs, _masked_mean(load("last_hidden_state"), inputs["input_mask"])


@pytest.mark.skipif(not (ORACLE / "manifest.json").is_file(), reason="no transformers oracle directory")
@pytest.mark.parametrize("name", ["roberta", "albert", "distilbert"])
def test_text_embedder_from_the_hub_equals_transformers_then_loads_offline(hub, tmp_path, monkeypatch, name):
    from keras_bert_impl.tasks.text_embedder import TextEmbedder

    hub.add(f"oracle/{name}", directory_files(_with_tokenizer_files(name, tmp_path)))
    embedder = TextEmbedder.from_release(f"hf://oracle/{name}", pooling="mean", max_seq_length=64)
    for batch in ("short", "long"):
        inputs, reference = _oracle_batch(name, batch)
        assert np.max(np.abs(np.asarray(embedder(inputs)) - reference)) < TOLERANCE, batch
    assert _gets(hub, "pytorch_model.bin") == [] and len(_gets(hub, "model.safetensors")) == 1

    hub.stop()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    again = TextEmbedder.from_release(f"hf://oracle/{name}", pooling="mean", max_seq_length=64)
    inputs, reference = _oracle_batch(name, "long")
    assert np.max(np.abs(np.asarray(again(inputs)) - reference)) < TOLERANCE
    assert np.array_equal(again.predict(TEXTS, verbose=0), embedder.predict(TEXTS, verbose=0))


def _keras_hub_bert(files, tmp_path, tensors):
    """keras-hub's `BertBackbone` from the same files as a local HF directory (a pooler added where the
    repository has none: keras-hub's BERT loader requires one, and the sequence output never reads it)."""
    import keras_hub

    directory = tmp_path / "keras_hub_copy"
    directory.mkdir()
    for file_name, data in files.items():
        (directory / file_name).write_bytes(data)
    if "bert.pooler.dense.weight" not in tensors:
        rng = np.random.default_rng(9)
        pooler = {"bert.pooler.dense.weight": rng.normal(0, 0.2, (16, 16)).astype(np.float32),
                  "bert.pooler.dense.bias": np.zeros(16, np.float32)}
        (directory / "model.safetensors").write_bytes(safetensors_bytes({**tensors, **pooler}, tmp_path, "copy"))
    return keras_hub.models.BertBackbone.from_preset(str(directory))


def _keras_hub_mean(backbone, embedder, texts):
    inputs = {key: np.asarray(value) for key, value in embedder.preprocessor(texts).items()}
    out = backbone({"token_ids": inputs["input_ids"], "segment_ids": inputs["segment_ids"],
                    "padding_mask": inputs["input_mask"]}, training=False)
    return _masked_mean(np.asarray(out["sequence_output"]), inputs["input_mask"]), out


@pytest.mark.parametrize("architecture", ["BertModel", "BertForMaskedLM"])
def test_bert_from_the_hub_equals_keras_hubs_loader(hub, tmp_path, architecture):
    """A `BertForMaskedLM` has no pooler: mean pooling never reads it and loads; "pooled" says what is missing."""
    from keras_bert_impl.tasks.text_embedder import TextEmbedder

    masked_lm = architecture == "BertForMaskedLM"
    files, tensors = bert_repository(tmp_path, architecture=architecture, pooler=not masked_lm, masked_lm=masked_lm)
    hub.add("tiny/bert", files)
    embedder = TextEmbedder.from_release("hf://tiny/bert", pooling="mean", max_seq_length=64)
    reference, _ = _keras_hub_mean(_keras_hub_bert(files, tmp_path, tensors), embedder, TEXTS)
    assert np.max(np.abs(embedder.predict(TEXTS, verbose=0) - reference)) < TOLERANCE
    if masked_lm:
        assert sorted(embedder.load_report.fresh) == ["bert/pooler/dense/bias", "bert/pooler/dense/kernel"]
        with pytest.raises(CheckpointError, match=r"has no pooler \(bert/pooler/dense/kernel.*pooling "
                                                         r"'pooled' reads: take pooling 'mean' or 'cls'"):
            TextEmbedder.from_release("hf://tiny/bert", pooling="pooled", max_seq_length=64)
    else:
        assert not embedder.load_report.missing


def test_a_sequence_classifier_becomes_a_fine_tuned_classifier_with_its_labels(hub, tmp_path, caplog):
    from keras_bert_impl.tasks.text_classifier import TextClassifier

    files, tensors = bert_repository(tmp_path, labels=("negative", "positive", "neutral"))
    hub.add("tiny/bert-sentiment", files)
    classifier = TextClassifier.from_release("hf://tiny/bert-sentiment", max_seq_length=64)
    assert classifier.num_classes == 3 and tuple(classifier.label_names) == ("negative", "positive", "neutral")
    _, outputs = _keras_hub_mean(_keras_hub_bert(files, tmp_path, tensors), classifier, TEXTS)
    logits = np.asarray(outputs["pooled_output"]) @ tensors["classifier.weight"].T + tensors["classifier.bias"]
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    assert np.max(np.abs(classifier.predict(TEXTS, verbose=0) - probabilities)) < TOLERANCE


def test_a_classifier_on_a_release_without_pooler_starts_it_fresh_with_a_note(hub, tmp_path, caplog):
    from keras_bert_impl.tasks.text_classifier import TextClassifier

    files, _ = bert_repository(tmp_path, architecture="BertForMaskedLM", pooler=False, masked_lm=True)
    hub.add("tiny/bert-mlm", files)
    with caplog.at_level("WARNING", logger="keras_bert_impl"):
        classifier = TextClassifier.from_release("hf://tiny/bert-mlm", num_classes=2, max_seq_length=16)
    assert "bert/pooler/dense/kernel" in classifier.load_report.fresh
    assert "the release has no pooler (bert/pooler/dense/bias, bert/pooler/dense/kernel): it starts fresh" in caplog.text


# -- bad sources: one line each ---------------------------------------------


def test_bad_sources_are_one_line_each(hub, tmp_path, monkeypatch):
    from keras_bert_impl.checkpoints.sources import find_release

    files, _ = bert_repository(tmp_path)
    commit = hub.add("tiny/bert", files)
    pickles = {name: data for name, data in files.items() if name != "model.safetensors"}
    hub.add("tiny/bert-pickled", dict(pickles, **{"pytorch_model.bin": b"\x80\x02pickle", "tf_model.h5": b"h5"}))
    gpt2 = dict(files, **{"config.json": json.dumps({"model_type": "gpt2", "n_layer": 2}).encode()})
    hub.add("tiny/gpt2", gpt2)
    gpt2_preset = {"config.json": json.dumps({"module": "keras_hub.src.models.gpt2.gpt2_backbone",
                                              "class_name": "GPT2Backbone", "config": {}}).encode(),
                   "model.weights.h5": b"h5", "metadata.json": b"{}"}
    hub.add("keras/gpt2-preset", gpt2_preset)
    cases = {
        "hf://tiny/none": r"^hf://tiny/none: no repository tiny/none on http://127\.0\.0\.1:\d+ \(a private one needs HF_TOKEN\)$",
        "hf://tiny/bert@v9": r"^hf://tiny/bert@v9: tiny/bert has no revision 'v9' on http://127\.0\.0\.1:\d+$",
        "hf://tiny/bert-pickled": r"^hf://tiny/bert-pickled: has no model\.safetensors \(its weights: pytorch_model\.bin, "
                                  r"tf_model\.h5\); pickled weights such as pytorch_model\.bin are not loaded$",
        "hf://tiny/gpt2": r"^hf://tiny/gpt2: model_type 'gpt2' is not one we compute \(bert, roberta, albert, distilbert\)$",
        "hf://keras/gpt2-preset": r"^hf://keras/gpt2-preset: a keras-hub preset of a 'GPT2Backbone', not one we "
                                  r"compute \(BertBackbone, .*\)$",
        "hf://a/b/c": r"^hf://a/b/c: not a Hub repository id; write hf://ORG/NAME\[@REVISION\] or hf://NAME\[@REVISION\]$",
    }
    for source, message in cases.items():
        with pytest.raises(SourceError, match=message):
            find_release(source)
    assert _gets(hub, "pytorch_model.bin") == [] and _gets(hub, "model.safetensors") == []
    assert _gets(hub, "model.weights.h5") == []
    assert list_cached_releases() == []
    hub.stop()
    with pytest.raises(SourceError, match=r"^hf://tiny/bert: cannot reach http://127\.0\.0\.1:\d+ \(\w+: .*\) and the "
                                          r"cache \(.*\) holds no copy of it$"):
        find_release("hf://tiny/bert")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SourceError, match=rf"^hf://tiny/bert@{commit}: HF_HUB_OFFLINE is set and the cache .* holds no "
                                          "good copy of it; load it once online$"):
        find_release(f"hf://tiny/bert@{commit}")


def _run_here(main, argv, prog, capfd):
    """A tool in this process (`run_tool_here`): `(exit code, stderr)`."""
    result = run_tool_here(main, argv, capfd, prog)
    return result.returncode, result.stderr


def test_the_tools_print_one_line_for_a_bad_source(hub, tmp_path, capfd):
    from tools.export_saved_model import main as export_main

    code, stderr = _run_here(export_main, ["--model_dir=hf://tiny/none", "--task=embeddings",
                                           f"--export_dir={tmp_path}/saved_models/none"], "export_saved_model", capfd)
    assert code != 0 and "Traceback" not in stderr
    assert re.fullmatch(r"export_saved_model\S*: error: hf://tiny/none: no repository tiny/none on \S+ \(a private "
                        r"one needs HF_TOKEN\)", stderr.strip().splitlines()[-1])


# -- faults -------------------------------------------------------------------


def test_http_500_then_a_corrupt_body_leave_nothing_cached_and_a_rerun_fetches(hub, tmp_path):
    from keras_bert_impl.checkpoints.sources import find_release

    files, _ = bert_repository(tmp_path)
    commit = hub.add("tiny/bert", files)
    hub.faults["model.safetensors"] = ("status", 500)
    with pytest.raises(SourceError, match=r"^hf://tiny/bert: download from .* failed \(.*500.*\); nothing was cached$"):
        find_release("hf://tiny/bert")
    hub.faults["model.safetensors"] = ("corrupt",)
    with pytest.raises(SourceError, match=r"^hf://tiny/bert: the downloaded model\.safetensors has sha256 [0-9a-f]{64}, "
                                          r"not the [0-9a-f]{64} the Hub lists; nothing was cached"):
        find_release("hf://tiny/bert")
    assert list_cached_releases() == [] and not (_releases_dir(tmp_path) / "hf" / "tiny--bert" / commit).exists()
    del hub.faults["model.safetensors"]
    assert find_release("hf://tiny/bert").checkpoint.startswith(str(_releases_dir(tmp_path) / "hf" / "tiny--bert" / commit))


def test_a_body_cut_short_is_fetched_again(hub, tmp_path):
    import tensorflow as tf

    from keras_bert_impl.checkpoints.sources import find_release

    files, tensors = bert_repository(tmp_path)
    hub.add("tiny/bert", files)
    hub.faults["model.safetensors"] = ("truncate", 1)
    release = find_release("hf://tiny/bert")
    # The cut one, then another: huggingface_hub asks for the rest from the last 10 MB chunk it
    # wrote (`Range`), here from the start (the file is smaller).
    assert len(_gets(hub, "model.safetensors")) == 2
    converted = tf.train.load_checkpoint(release.checkpoint).get_tensor("bert/embeddings/word_embeddings")
    assert np.array_equal(converted, tensors["bert.embeddings.word_embeddings.weight"])


def test_a_changed_cached_file_is_found_and_fetched_again(hub, tmp_path, monkeypatch, capfd):
    from keras_bert_impl.checkpoints.sources import find_release

    files, _ = bert_repository(tmp_path)
    hub.add("tiny/bert", files)
    release = find_release("hf://tiny/bert")
    data = release.checkpoint + ".data-00000-of-00001"
    with open(data, "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0x01]))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SourceError, match="HF_HUB_OFFLINE is set and the cache .* holds no good copy of it"):
        find_release("hf://tiny/bert")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    again = find_release("hf://tiny/bert")
    assert again == release and len(_gets(hub, "model.safetensors")) == 2
    from keras_bert_impl.checkpoints.pip_assets import file_sha256

    assert "bert_model.ckpt.data-00000-of-00001 differ(s) from source_manifest.json" in capfd.readouterr().err
    with open(os.path.join(os.path.dirname(again.checkpoint), MANIFEST_FILE), encoding="utf-8") as f:
        manifest = json.load(f)
    assert manifest["files"]["bert_model.ckpt.data-00000-of-00001"] == file_sha256(data)


def _resolve_in_a_process(source):
    code = ("import sys; from keras_bert_impl.checkpoints.sources import find_release; "
            f"print('RELEASE', find_release({source!r}).checkpoint)")
    return subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3"))


def test_a_download_killed_midway_leaves_nothing_complete_and_the_next_load_completes(hub, tmp_path):
    from keras_bert_impl.checkpoints.sources import find_release

    files, _ = bert_repository(tmp_path)
    commit = hub.add("tiny/bert", files)
    hub.faults["model.safetensors"] = ("stall", 60)
    process = _resolve_in_a_process("hf://tiny/bert")
    deadline = time.time() + 120
    while not _gets(hub, "model.safetensors") and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)  # the first half written
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert _gets(hub, "model.safetensors"), "the download never started"
    repo_dir = _releases_dir(tmp_path) / "hf" / "tiny--bert"
    assert not (repo_dir / commit).exists() and list_cached_releases() == []
    del hub.faults["model.safetensors"]
    release = find_release("hf://tiny/bert")
    assert release.checkpoint.startswith(str(repo_dir / commit))
    assert sorted(os.listdir(repo_dir)) == [commit, "refs"]  # no download or conversion left behind


def test_two_processes_loading_one_source_end_with_one_copy(hub, tmp_path):
    files, _ = bert_repository(tmp_path)
    commit = hub.add("tiny/bert", files)
    processes = [_resolve_in_a_process("hf://tiny/bert") for _ in range(2)]
    outputs = [process.communicate(timeout=300) for process in processes]
    assert [process.returncode for process in processes] == [0, 0], [err for _, err in outputs]
    releases = {line for out, _ in outputs for line in out.splitlines() if line.startswith("RELEASE")}
    assert len(releases) == 1
    assert len(_gets(hub, "model.safetensors")) == 1  # one fetched, the other waited and took its copy
    assert [release.source for release in list_cached_releases()] == [f"hf://tiny/bert@{commit}"]


def test_sharded_safetensors_are_read_as_one(hub, tmp_path):
    import tensorflow as tf

    from keras_bert_impl.checkpoints.sources import find_release

    files, tensors = bert_repository(tmp_path)
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
              "model-00002-of-00002.safetensors": names[len(names) // 2:]}
    del files["model.safetensors"]
    for shard, shard_names in shards.items():
        files[shard] = safetensors_bytes({name: tensors[name] for name in shard_names}, tmp_path, shard)
    weight_map = {name: shard for shard, shard_names in shards.items() for name in shard_names}
    files["model.safetensors.index.json"] = json.dumps({"metadata": {}, "weight_map": weight_map}).encode()
    hub.add("tiny/bert-sharded", files)
    reader = tf.train.load_checkpoint(find_release("hf://tiny/bert-sharded").checkpoint)
    for hf_name, name in (("bert.encoder.layer.1.output.dense.weight", "bert/encoder/layer_1/output/dense/kernel"),
                          ("bert.embeddings.word_embeddings.weight", "bert/embeddings/word_embeddings")):
        expected = tensors[hf_name].T if name.endswith("kernel") else tensors[hf_name]
        assert np.array_equal(reader.get_tensor(name), expected), name


# -- the cache and the tools --------------------------------------------------


def test_bert_cache_lists_and_removes(hub, tmp_path, capfd):
    from keras_bert_impl.checkpoints.sources import find_release
    from tools.cache import main as cache_main

    files, _ = bert_repository(tmp_path)
    commit = hub.add("tiny/bert", files, refs=("main", "v1.0"))
    find_release("hf://tiny/bert@v1.0")
    (cached,) = list_cached_releases()
    assert cached.source == f"hf://tiny/bert@{commit}" and cached.revisions == ("v1.0",) and cached.size > 0
    capfd.readouterr()
    from keras_bert_impl.cli import run_tool

    assert run_tool(cache_main, ["list"], prog="cache") == 0
    listed = capfd.readouterr().out
    assert f"hf://tiny/bert@{commit}" in listed and "v1.0" in listed
    cache_main(["rm", "hf://tiny/bert"])
    assert list_cached_releases() == [] and remove_cached_release("hf://tiny/bert") == []
    assert parse_hub_source(cached.source).revision == commit


def _reviews(tmp_path, copies):
    """`data/{train,dev}.csv` (`text,label`) of four labelled reviews, each `copies` times."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    rows = [("the film was good", "pos"), ("a very bad film", "neg"), ("great and very good", "pos"), ("not good", "neg")]
    for split in ("train", "dev"):
        (data_dir / f"{split}.csv").write_text("text,label\n" + "".join(f"{t},{l}\n" for t, l in rows * copies))
    return data_dir


def test_bert_export_and_run_classifier_take_a_hub_id(hub, tmp_path, capfd):
    import tensorflow as tf

    from keras_bert_impl.tasks.text_embedder import TextEmbedder
    from tools.export_saved_model import main as export_main
    from tools.run_classifier import main as run_classifier_main

    files, _ = bert_repository(tmp_path)
    hub.add("tiny/bert", files)
    mlm_files, _ = bert_repository(tmp_path, seed=1, architecture="BertForMaskedLM", pooler=False, masked_lm=True)
    hub.add("tiny/bert-mlm", mlm_files)
    # --noverify: what is checked here is that the export takes a Hub id, by its answers below (the check as
    # TF Serving loads a version, ~2 s of CPU: tests/test_verification.py).
    code, stderr = _run_here(export_main, ["--model_dir=hf://tiny/bert", "--task=embeddings", "--precision=float32",
                                           "--max_seq_length=64", f"--export_dir={tmp_path}/saved_models/tiny",
                                           "--noverify"],
                             "export_saved_model", capfd)
    assert code == 0, stderr
    served = tf.saved_model.load(str(tmp_path / "saved_models" / "tiny" / "1")).signatures["serving_default"]
    mean = served(text=tf.constant(TEXTS))["mean_pooled"].numpy()
    embedder = TextEmbedder.from_release("hf://tiny/bert", pooling="mean", max_seq_length=64)
    assert np.max(np.abs(mean - embedder.predict(TEXTS, verbose=0))) < TOLERANCE

    data_dir = _reviews(tmp_path, copies=4)
    output_dir = tmp_path / "out"
    code, stderr = _run_here(
        run_classifier_main,
        ["--init_checkpoint=hf://tiny/bert-mlm", "--task_name=csv", f"--data_dir={data_dir}", "--text_a_column=text",
         "--label_column=label", f"--output_dir={output_dir}", "--max_seq_length=16", "--train_batch_size=8",
         "--num_train_epochs=1", "--learning_rate=1e-3", "--do_train", "--do_eval"],
        "run_classifier", capfd)
    assert code == 0, stderr
    assert (output_dir / "model.ckpt.index").exists() and "eval_accuracy" in (output_dir / "eval_results.txt").read_text()
    # The pooler that BertForMaskedLM lacks started fresh with the head, and the load report said so.
    assert re.search(r"bert_model\.ckpt: \d+ loaded, 4 missing \(e\.g\. [^)]*bert/pooler/dense/kernel", stderr)


def test_bert_extract_features_takes_a_hub_id_as_init_checkpoint(hub, tmp_path):
    from tools.extract_features import main as extract_features_main

    files, _ = bert_repository(tmp_path)
    hub.add("tiny/bert", files)
    (tmp_path / "in.txt").write_text("the film was good\na very bad film\n")
    extract_features_main([f"--input_file={tmp_path}/in.txt", f"--output_file={tmp_path}/out.jsonl",
                           "--init_checkpoint=hf://tiny/bert", "--layers=-1", "--max_seq_length=16"])
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [[token["token"] for token in line["features"]] for line in lines] == [
        ["[CLS]", "the", "film", "was", "good", "[SEP]"], ["[CLS]", "a", "very", "bad", "film", "[SEP]"]]


def test_progress_bars_are_drawn_only_on_a_terminal(monkeypatch):
    from huggingface_hub.utils import are_progress_bars_disabled, enable_progress_bars

    from keras_bert_impl.checkpoints.sources import _ProgressBars

    enable_progress_bars()
    for tty in (False, True):
        monkeypatch.setattr(sys.stderr, "isatty", lambda tty=tty: tty)
        with _ProgressBars():
            assert are_progress_bars_disabled() == (not tty)
        assert not are_progress_bars_disabled()  # as it was before


def test_a_keras_hub_preset_on_the_hub_converts_through_keras_hubs_loader(hub, tmp_path):
    """A keras-hub preset kept on the Hub (config.json names its backbone; model.weights.h5, assets/)."""
    import keras
    import keras_hub

    from keras_bert_impl.tasks.text_embedder import TextEmbedder

    keras.utils.set_random_seed(4)
    vocabulary = wordpiece_vocab().decode().split()
    backbone = keras_hub.models.BertBackbone(vocabulary_size=len(vocabulary), num_layers=2, num_heads=2,
                                             hidden_dim=16, intermediate_dim=24, dropout=0.0, max_sequence_length=32)
    for variable in backbone.weights:  # not LayerNorm's ones and zeros
        variable.assign(np.random.default_rng(len(variable.path)).normal(0.5, 0.3, variable.shape))
    preset = tmp_path / "preset"
    backbone.save_to_preset(str(preset))
    keras_hub.models.BertTokenizer(vocabulary=vocabulary, lowercase=True).save_to_preset(str(preset))
    files = {path.relative_to(preset).as_posix(): path.read_bytes() for path in preset.rglob("*") if path.is_file()}
    hub.add("keras/tiny-bert-preset", dict(files, **{"extra.py": b"import os\n"}))
    embedder = TextEmbedder.from_release("hf://keras/tiny-bert-preset", pooling="mean", max_seq_length=32)
    inputs = {key: np.asarray(value) for key, value in embedder.preprocessor(TEXTS).items()}
    sequence = backbone({"token_ids": inputs["input_ids"], "segment_ids": inputs["segment_ids"],
                         "padding_mask": inputs["input_mask"]})["sequence_output"]
    reference = _masked_mean(np.asarray(sequence), inputs["input_mask"])
    assert np.max(np.abs(embedder.predict(TEXTS, verbose=0) - reference)) < TOLERANCE
    assert _gets(hub, "extra.py") == []  # no code fetched


def test_bert_distill_takes_a_hub_classifier_as_its_teacher(hub, tmp_path):
    """A `*ForSequenceClassification` on the Hub is a fine-tuned teacher: its head and its labels."""
    from tools.distill import main as distill_main

    files, _ = bert_repository(tmp_path, labels=("neg", "pos"))
    hub.add("tiny/bert-sentiment", files)
    data_dir = _reviews(tmp_path, copies=2)
    output_dir = tmp_path / "student"
    distill_main(["--teacher_dir=hf://tiny/bert-sentiment", "--task_name=csv", f"--data_dir={data_dir}",
                  "--text_a_column=text", "--label_column=label", "--num_hidden_layers=1", "--max_seq_length=16",
                  "--train_batch_size=4", "--num_train_epochs=1", "--do_eval", f"--output_dir={output_dir}"])
    assert (output_dir / "label_list.txt").read_text() == "neg\npos\n"
    assert json.loads((output_dir / "bert_config.json").read_text())["num_hidden_layers"] == 1


def test_masked_lm_from_a_hub_bert_for_masked_lm_reads_its_head(hub, tmp_path):
    import tensorflow as tf

    from keras_bert_impl.tasks.masked_lm import MaskedLM

    files, tensors = bert_repository(tmp_path, architecture="BertForMaskedLM", pooler=False, masked_lm=True)
    hub.add("tiny/bert-mlm", files)
    model = MaskedLM.from_release("hf://tiny/bert-mlm", max_seq_length=16)
    assert sorted(model.load_report.missing) == ["bert/pooler/dense/bias", "bert/pooler/dense/kernel",
                                                 "cls/seq_relationship/output_bias", "cls/seq_relationship/output_weights"]
    from keras_bert_impl.checkpoints.sources import find_release

    checkpoint = tf.train.load_checkpoint(find_release("hf://tiny/bert-mlm").checkpoint)
    assert np.array_equal(checkpoint.get_tensor("cls/predictions/output_bias"), tensors["cls.predictions.bias"])
    assert len(_gets(hub, "model.safetensors")) == 1
