"""keras-hub presets of RoBERTa, ALBERT and DistilBERT, both ways (`bert-convert-keras-hub`).

* release -> preset -> release gives back the same checkpoint tensors,
  `bert_config.json` and tokenizer files, and the preset loads in keras-hub
  (its backbone and masked-LM task computing what our model computes);
* a preset keras-hub made itself (random weights, `save_to_preset`) becomes
  a release whose model computes keras-hub's sequence output.
"""

import json

import keras_hub
import numpy as np
import pytest

from keras_bert_impl.checkpoints.keras_hub import read_checkpoint_tensors
from keras_bert_impl.checkpoints.original import load_original_checkpoint
from keras_bert_impl.checkpoints.release import TOKENIZER_FILES
from keras_bert_impl.checkpoints.sources import find_release
from keras_bert_impl.config import BertConfig
from keras_bert_impl.models.bert_model import BertModel
from tests.variants_fixture import VOCAB, write_hf_directory
from tools.convert_hf_checkpoint import main as convert_hf_main
from tools.convert_keras_hub import main as convert_keras_hub_main

MODEL_TYPES = ["roberta", "albert", "distilbert"]


def _release(tmp_path, model_type):
    write_hf_directory(tmp_path / "hf", model_type)
    convert_hf_main([f"--hf_model_dir={tmp_path / 'hf'}", f"--output_dir={tmp_path / 'release'}"])
    return find_release(tmp_path / "release")


def _ours(release_dir):
    files = find_release(release_dir)
    config = BertConfig.from_json_file(files.bert_config_file)
    model = BertModel(config)
    load_original_checkpoint(model, files.checkpoint, allow_fresh=("bert/pooler/",))
    return model


def _batch(model_type, seq_length=10):
    rng = np.random.default_rng(5)
    ids = rng.integers(5, VOCAB - 1, (2, seq_length)).astype("int32")
    segments = np.zeros_like(ids)
    if model_type == "albert":
        segments[:, seq_length // 2:] = 1
    ours = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": segments}
    theirs = {"token_ids": ids, "padding_mask": np.ones_like(ids)}
    if model_type == "albert":
        theirs["segment_ids"] = segments
    return ours, theirs


def _sequence(output):
    return np.asarray(output["sequence_output"] if isinstance(output, dict) else output)


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_release_to_preset_and_back_is_bit_identical_and_keras_hub_computes_it(tmp_path, model_type):
    files = _release(tmp_path, model_type)
    preset = tmp_path / "preset"
    convert_keras_hub_main(["--to_preset", f"--bert_config_file={files.bert_config_file}",
                            f"--init_checkpoint={files.checkpoint}", f"--vocab_file={files.vocab_file}",
                            f"--preset_dir={preset}"])
    assert json.loads((preset / "task.json").read_text())["class_name"].endswith("MaskedLM")

    # keras-hub loads it with its own code, and computes our sequence output.
    backbone_class = {"roberta": keras_hub.models.RobertaBackbone, "albert": keras_hub.models.AlbertBackbone,
                      "distilbert": keras_hub.models.DistilBertBackbone}[model_type]
    backbone = backbone_class.from_preset(str(preset))
    ours, theirs = _batch(model_type)
    model = _ours(tmp_path / "release")
    difference = np.max(np.abs(_sequence(model(ours)) - _sequence(backbone(theirs))))
    assert difference < 1e-5

    convert_keras_hub_main(["--from_preset", f"--preset_dir={preset}", f"--output_dir={tmp_path / 'again'}"])
    again = find_release(tmp_path / "again")
    before, after = read_checkpoint_tensors(files.checkpoint), read_checkpoint_tensors(again.checkpoint)
    assert sorted(before) == sorted(after)
    for name, value in before.items():
        np.testing.assert_array_equal(after[name], value, err_msg=name)
    assert (tmp_path / "again" / "bert_config.json").read_bytes() == (tmp_path / "release" / "bert_config.json").read_bytes()
    for name in TOKENIZER_FILES[model_type]:
        assert (tmp_path / "again" / name).read_bytes() == (tmp_path / "release" / name).read_bytes()


def _keras_hub_made_preset(tmp_path, model_type):
    """A backbone keras-hub builds and saves itself, with random weights and its tokenizer."""
    write_hf_directory(tmp_path / "hf", model_type)  # for the tokenizer files only
    hf = tmp_path / "hf"
    common = dict(vocabulary_size=VOCAB, num_layers=2, num_heads=4, hidden_dim=16, intermediate_dim=32,
                  max_sequence_length=24, dtype="float32")
    if model_type == "roberta":
        backbone = keras_hub.models.RobertaBackbone(**common)
        tokenizer = keras_hub.models.RobertaTokenizer(vocabulary=str(hf / "vocab.json"), merges=str(hf / "merges.txt"))
    elif model_type == "albert":
        backbone = keras_hub.models.AlbertBackbone(**common, embedding_dim=8, num_groups=1, num_inner_repetitions=2,
                                                   num_segments=2)
        tokenizer = keras_hub.models.AlbertTokenizer(proto=str(hf / "spiece.model"))
    else:
        backbone = keras_hub.models.DistilBertBackbone(**common)
        tokenizer = keras_hub.models.DistilBertTokenizer(vocabulary=str(hf / "vocab.txt"))
    rng = np.random.default_rng(7)
    for variable in backbone.weights:
        variable.assign(rng.normal(0, 0.3, variable.shape).astype("float32"))
    preset = tmp_path / "keras_hub_preset"
    backbone.save_to_preset(str(preset))
    tokenizer.save_to_preset(str(preset))
    return backbone, preset


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_keras_hub_made_preset_becomes_a_release_computing_the_same(tmp_path, model_type):
    backbone, preset = _keras_hub_made_preset(tmp_path, model_type)
    convert_keras_hub_main(["--from_preset", f"--preset_dir={preset}", f"--output_dir={tmp_path / 'release'}"])
    config = BertConfig.from_json_file(tmp_path / "release" / "bert_config.json")
    assert config.model_type == model_type
    assert config.max_sequence_length == 24
    ours, theirs = _batch(model_type)
    model = _ours(tmp_path / "release")
    assert np.max(np.abs(_sequence(model(ours)) - _sequence(backbone(theirs)))) < 1e-5
    for name in TOKENIZER_FILES[model_type]:
        assert (tmp_path / "release" / name).exists()
