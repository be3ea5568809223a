"""Releases <-> keras-hub presets (`checkpoints/keras_hub.py`, `tools/convert_keras_hub.py`).

keras-hub loads what we write with its own `from_preset` and computes what
our model computes (checked against our model and the NumPy reference, not
only that loading works); a release that goes to a preset and back comes
back bit-identical; a preset keras-hub made becomes a release our model
reads with keras-hub's outputs.
"""

import json
import os
import re
import shutil

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.checkpoints.keras_hub import keras_hub_variable_map, keras_hub_weights, to_keras_hub_layout
from keras_bert_impl.checkpoints.original import load_original_checkpoint, original_weights
from keras_bert_impl.checkpoints.release import write_release
from keras_bert_impl.cli import EXIT_BAD_FLAG, EXIT_BAD_INPUT, run_tool
from keras_bert_impl.config import BertConfig
from keras_bert_impl.errors import CheckpointError
from keras_bert_impl.models.bert_model import BertModel
from keras_bert_impl.models.pretraining import BertPretrainingModel
from keras_bert_impl.tokenization import FullTokenizer
from tests.helpers import random_inputs, randomize, tiny_config
from tests.numpy_bert import bert_forward, gelu_erf, layer_norm
from tools.convert_keras_hub import main as tool_main


TOLERANCE = 1e-5
# 60 tokens: what keras-hub's BertTokenizer needs, words for a sentence, fillers.
VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cafe", "is", "open", "bert", "model", "##s",
    "##ing", "read", ",", ".", "!", "a", "an", "and",
] + [f"word{i}" for i in range(40)]
GELU_MESSAGE = re.compile(
    r"hidden_act gelu_exact: .* by up to ([0-9.e+-]+) \(max abs difference on a fixed batch of 2x16"
)


def _release(directory, hidden_act="gelu", heads=True, seed=3):
    """A tiny release with random weights: `(config, release directory, prefix)`."""
    config = tiny_config(vocab_size=len(VOCAB), hidden_act=hidden_act)
    model = BertPretrainingModel(config) if heads else BertModel(config)
    randomize(model, seed=seed)
    prefix = write_release(model, directory, config, VOCAB, global_step=11)
    return config, str(directory), prefix


def _to_preset_flags(release, preset_dir):
    return [
        "--to_preset", f"--bert_config_file={release}/bert_config.json", f"--init_checkpoint={release}/model.ckpt",
        f"--vocab_file={release}/vocab.txt", f"--preset_dir={preset_dir}",
    ]


def _ours(config, prefix):
    model = BertModel(config)
    load_original_checkpoint(model, prefix)
    return model


def _keras_hub_inputs(inputs):
    return {
        "token_ids": inputs["input_ids"], "segment_ids": inputs["segment_ids"], "padding_mask": inputs["input_mask"],
    }


def assert_same_at_real_tokens(ours, theirs, inputs):
    # keras-hub zeroes padded keys' attention exactly where the original adds
    # -10000: rows of real tokens agree, padded rows do not.
    real = inputs["input_mask"].astype(bool)
    np.testing.assert_allclose(
        np.asarray(ours["sequence_output"])[real], np.asarray(theirs["sequence_output"])[real], atol=TOLERANCE
    )
    np.testing.assert_allclose(ours["pooled_output"], theirs["pooled_output"], atol=TOLERANCE)


@pytest.fixture(scope="module")
def tanh_preset(tmp_path_factory):
    """A release with both pretraining heads, converted by the tool: `(config, prefix, preset_dir, stderr)`."""
    root = tmp_path_factory.mktemp("tanh")
    config, release, prefix = _release(root / "release")
    preset_dir = str(root / "preset")
    assert run_tool(tool_main, _to_preset_flags(release, preset_dir)) == 0
    return config, prefix, preset_dir


def test_variable_map_names_every_variable_of_both_models():
    config = tiny_config(vocab_size=len(VOCAB))
    names = keras_hub_variable_map(config.num_hidden_layers, masked_lm=True)
    ours = BertPretrainingModel(config)
    next_sentence = {"cls/seq_relationship/output_weights", "cls/seq_relationship/output_bias"}
    assert set(names) == set(original_weights(ours)) - next_sentence
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=2, num_heads=4, hidden_dim=16, intermediate_dim=32,
        max_sequence_length=config.max_position_embeddings,
    )
    theirs = {variable.path: tuple(variable.shape) for variable in keras_hub.models.BertMaskedLM(backbone).weights}
    assert sorted(path for path, _ in names.values()) == sorted(theirs)
    for name, (path, head_axes) in names.items():
        shape = original_weights(ours)[name].shape
        assert to_keras_hub_layout(np.zeros(shape), head_axes, config.num_attention_heads).shape == theirs[path], name


def test_preset_loads_in_keras_hub_and_computes_what_we_compute(tanh_preset):
    config, prefix, preset_dir = tanh_preset
    ours = _ours(config, prefix)
    inputs = random_inputs(config)
    backbone = keras_hub.models.BertBackbone.from_preset(preset_dir)
    assert_same_at_real_tokens(ours(inputs), backbone(_keras_hub_inputs(inputs)), inputs)
    assert backbone.max_sequence_length == config.max_position_embeddings
    assert backbone.num_segments == config.type_vocab_size

    # The classifier gets the same encoder and a fresh head, and tokenizes this text as FullTokenizer
    # does (not all text: docs/FINDINGS.md, "TF Text's BertTokenizer is not the original tokenizer").
    classifier = keras_hub.models.BertTextClassifier.from_preset(preset_dir, num_classes=3)
    for mine, theirs in zip(backbone.weights, classifier.backbone.weights):
        np.testing.assert_array_equal(mine, theirs)
    text = "The CAFÉ is open, reading models!"
    tokenizer = FullTokenizer(os.path.join(os.path.dirname(prefix), "vocab.txt"), do_lower_case=True)
    expected = tokenizer.convert_tokens_to_ids(["[CLS]"] + tokenizer.tokenize(text) + ["[SEP]"])
    token_ids = np.asarray(classifier.preprocessor([text])["token_ids"])[0]
    assert token_ids[: len(expected)].tolist() == expected
    assert keras_hub.models.BertTokenizer.from_preset(preset_dir).get_vocabulary() == VOCAB


def test_release_without_heads_is_a_backbone_preset(tmp_path):
    config, release, prefix = _release(tmp_path / "release", heads=False)
    preset_dir = tmp_path / "preset"
    assert run_tool(tool_main, _to_preset_flags(release, preset_dir)) == 0
    assert not (preset_dir / "task.json").exists()
    tokenizer = keras_hub.models.BertTokenizer.from_preset(str(preset_dir))
    assert tokenizer.get_vocabulary() == VOCAB and tokenizer.lowercase
    inputs = random_inputs(config)
    backbone = keras_hub.models.BertBackbone.from_preset(str(preset_dir))
    assert_same_at_real_tokens(_ours(config, prefix)(inputs), backbone(_keras_hub_inputs(inputs)), inputs)
    # A classifier from the preset pads to the backbone's 24 positions (keras-hub's default 512
    # failed on the first predict), and computes on the same encoder as ours.
    classifier = keras_hub.models.BertTextClassifier.from_preset(str(preset_dir), num_classes=2)
    assert classifier.preprocessor.sequence_length == config.max_position_embeddings == 24
    assert classifier.predict(["the cafe is open"], verbose=0).shape == (1, 2)


def test_masked_lm_head_loads_with_keras_hubs_formula(tanh_preset):
    config, prefix, preset_dir = tanh_preset
    masked_lm = keras_hub.models.BertMaskedLM.from_preset(preset_dir)
    inputs = random_inputs(config, pad=False)
    positions = np.array([[1, 4, 7]] * 3, "int32")
    theirs = np.asarray(masked_lm({**_keras_hub_inputs(inputs), "mask_positions": positions}))

    # Independent reference: keras-hub's head is the exact GELU and LayerNorm epsilon 1e-5.
    ours_model = BertPretrainingModel(config)
    load_original_checkpoint(ours_model, prefix)
    w = {name: np.asarray(value, np.float64) for name, value in original_weights(ours_model).items()}
    layers, _, _ = bert_forward(w, config.to_dict(), **inputs)
    gathered = np.take_along_axis(layers[-1], positions[:, :, None], axis=1)
    # [batch_size, num_masks, H]
    hidden = gathered @ w["cls/predictions/transform/dense/kernel"] + w["cls/predictions/transform/dense/bias"]
    hidden = gelu_erf(hidden)
    hidden = layer_norm(
        hidden, w["cls/predictions/transform/LayerNorm/gamma"], w["cls/predictions/transform/LayerNorm/beta"], eps=1e-5
    )
    reference = hidden @ w["bert/embeddings/word_embeddings"].T + w["cls/predictions/output_bias"]
    np.testing.assert_allclose(theirs, reference, atol=TOLERANCE)

    # Ours (tanh GELU, 1e-12) is close but not equal: the difference the tool reports.
    ours = np.asarray(ours_model({**inputs, "masked_lm_positions": positions})["masked_lm_logits"])
    assert 1e-6 < np.abs(ours - theirs).max() < 1e-2


def test_round_trip_is_bit_identical_and_exact_gelu_is_measured(tmp_path, capsys):
    config, release, prefix = _release(tmp_path / "release", hidden_act="gelu_exact", seed=8)
    # The original's own formatting (keys unsorted, no final newline) must survive too.
    with open(os.path.join(release, "bert_config.json"), "w") as f:
        f.write(json.dumps(dict(reversed(config.to_dict().items())), indent=2))
    preset_dir, again = tmp_path / "preset", tmp_path / "again"
    assert run_tool(tool_main, _to_preset_flags(release, preset_dir)) == 0
    to_preset_stderr = capsys.readouterr().err
    assert run_tool(tool_main, ["--from_preset", f"--preset_dir={preset_dir}", f"--output_dir={again}"]) == 0
    from_preset_stderr = capsys.readouterr().err

    reader, back = (tf.train.load_checkpoint(str(p)) for p in (prefix, again / "bert_model.ckpt"))
    names = reader.get_variable_to_shape_map()
    assert names == back.get_variable_to_shape_map()
    assert {"global_step", "cls/seq_relationship/output_weights", "cls/predictions/output_bias"} <= set(names)
    for name in names:
        a, b = reader.get_tensor(name), back.get_tensor(name)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), name
    for filename in ("bert_config.json", "vocab.txt"):
        with open(os.path.join(release, filename), "rb") as f, open(again / filename, "rb") as g:
            assert f.read() == g.read(), filename

    # A masked-LM preset keeps BertMaskedLM's preprocessor: other tasks must be told the length.
    assert f"give them a preprocessor of sequence_length={config.max_position_embeddings}" in to_preset_stderr
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor.from_preset(
        str(preset_dir), sequence_length=config.max_position_embeddings)
    classifier = keras_hub.models.BertTextClassifier.from_preset(str(preset_dir), num_classes=2,
                                                                 preprocessor=preprocessor)
    assert classifier.predict(["the cafe is open"], verbose=0).shape == (1, 2)
    # keras-hub runs the tanh GELU: the tool says so, with a measured size.
    for stderr in (to_preset_stderr, from_preset_stderr):
        match = GELU_MESSAGE.search(stderr)
        assert match, stderr
        assert 1e-5 < float(match.group(1)) < 1e-1
    backbone = keras_hub.models.BertBackbone.from_preset(str(preset_dir))
    inputs = random_inputs(config)
    theirs = backbone(_keras_hub_inputs(inputs))
    exact = _ours(config, prefix)(inputs)["sequence_output"]
    real = inputs["input_mask"].astype(bool)
    assert np.abs(np.asarray(exact)[real] - np.asarray(theirs["sequence_output"])[real]).max() > 1e-5
    tanh = _ours(BertConfig.from_dict({**config.to_dict(), "hidden_act": "gelu"}), prefix)
    assert_same_at_real_tokens(tanh(inputs), theirs, inputs)


def test_preset_made_by_keras_hub_becomes_a_release(tmp_path, capsys):
    keras.utils.set_random_seed(4)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(VOCAB), num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=24,
        dropout=0.2, max_sequence_length=20, num_segments=3,
    )
    for variable in backbone.weights:  # LayerNorm's ones and zeros would hide a swapped gamma/beta
        variable.assign(np.random.default_rng(len(variable.path)).normal(1.0, 0.3, variable.shape))
    preset_dir, release = str(tmp_path / "preset"), tmp_path / "release"
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=VOCAB, lowercase=False)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=20)
    keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=preprocessor).save_to_preset(preset_dir)
    assert run_tool(tool_main, ["--from_preset", f"--preset_dir={preset_dir}", f"--output_dir={release}"]) == 0
    stderr = capsys.readouterr().err
    assert "use --do_lower_case=False" in stderr and "gelu_exact" not in stderr
    assert "task.json holds a BertTextClassifier" in stderr and "strip_accents" not in stderr

    config = BertConfig.from_json_file(release / "bert_config.json")
    assert config == BertConfig(
        vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=24,
        hidden_act="gelu", hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.2, max_position_embeddings=20,
        type_vocab_size=3, initializer_range=0.02,
    )
    assert (release / "vocab.txt").read_text() == "".join(f"{token}\n" for token in VOCAB)
    inputs = random_inputs(config)
    inputs["segment_ids"][0, :3] = 2
    ours = _ours(config, release / "bert_model.ckpt")
    assert_same_at_real_tokens(ours(inputs), backbone(_keras_hub_inputs(inputs)), inputs)


def test_mapping_refuses_weights_it_lacks():
    config = tiny_config(vocab_size=len(VOCAB))
    weights = original_weights(BertModel(config))
    del weights["bert/encoder/layer_1/output/dense/bias"]
    with pytest.raises(CheckpointError, match="release.ckpt: has no bert/encoder/layer_1/output/dense/bias"):
        keras_hub_weights(weights, config, source="release.ckpt")


@pytest.mark.parametrize(
    "flags, code, fragment",
    [
        (["--preset_dir=p"], EXIT_BAD_FLAG, "give exactly one of --to_preset or --from_preset"),
        (["--to_preset", "--from_preset", "--preset_dir=p"], EXIT_BAD_FLAG, "give exactly one of"),
        (["--to_preset", "--preset_dir=p"], EXIT_BAD_FLAG, "--bert_config_file, --init_checkpoint, --vocab_file"),
        (["--from_preset", "--preset_dir=p"], EXIT_BAD_FLAG, "missing required flag(s): --output_dir"),
    ],
)
def test_bad_flags_are_one_line(flags, code, fragment, capsys):
    assert run_tool(tool_main, flags, prog="convert_keras_hub") == code
    stderr = capsys.readouterr().err.strip().splitlines()
    assert len(stderr) == 1 and fragment in stderr[0], stderr


def test_bad_inputs_are_one_line_and_write_nothing(tmp_path, capsys):
    _, release, _ = _release(tmp_path / "release", heads=False)
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "task.json").write_text("{}")
    assert run_tool(tool_main, _to_preset_flags(release, occupied)) == EXIT_BAD_INPUT
    assert "not empty" in capsys.readouterr().err
    assert os.listdir(occupied) == ["task.json"]

    tiny_config(vocab_size=len(VOCAB), hidden_act="relu").to_json_file(os.path.join(release, "bert_config.json"))
    assert run_tool(tool_main, _to_preset_flags(release, tmp_path / "relu")) == EXIT_BAD_INPUT
    assert "'hidden_act' 'relu' has no keras-hub equivalent" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "relu")

    not_a_preset = ["--from_preset", f"--preset_dir={release}", f"--output_dir={tmp_path / 'out'}"]
    assert run_tool(tool_main, not_a_preset) == EXIT_BAD_INPUT
    assert "not a keras-hub preset (it has no config.json)" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "out")


def test_a_damaged_preset_is_one_line_with_keras_hubs_reason(tmp_path, capsys):
    """A `model.weights.h5` cut short was an h5py traceback; a weight of
    another shape kept only "A total of 2 objects could not be loaded"."""
    _, release, _ = _release(tmp_path / "release", heads=False)
    preset_dir = tmp_path / "preset"
    assert run_tool(tool_main, _to_preset_flags(release, preset_dir)) == 0
    capsys.readouterr()
    shaped = tmp_path / "shaped"
    shutil.copytree(preset_dir, shaped)
    shutil.rmtree(shaped / "original")  # else our own check names the mismatch first
    config_path = shaped / "config.json"
    config = json.loads(config_path.read_text())
    config["config"]["intermediate_dim"] += 16
    config_path.write_text(json.dumps(config))
    weights = preset_dir / "model.weights.h5"
    weights.write_bytes(weights.read_bytes()[:3000])
    for preset, reason in ((preset_dir, "OSError: Unable to synchronously open file (truncated file"),
                           (shaped, "variable.shape=(16, 48), Received: value.shape=(16, 32)")):
        flags = ["--from_preset", f"--preset_dir={preset}", f"--output_dir={tmp_path / 'out'}"]
        assert run_tool(tool_main, flags) == EXIT_BAD_INPUT
        stderr = capsys.readouterr().err.strip().splitlines()
        assert len(stderr) == 1 and f"{preset}: keras-hub cannot load the preset (" in stderr[0], stderr
        assert reason in stderr[0], stderr
        assert not os.path.exists(tmp_path / "out")
