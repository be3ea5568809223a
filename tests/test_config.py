"""BertConfig reads and writes the original bert_config.json and rejects bad ones."""

import json
import re

import pytest

from keras_bert_impl.config import BertConfig
from keras_bert_impl.errors import ConfigError

# google-research/bert's uncased_L-12_H-768_A-12/bert_config.json, verbatim.
BERT_BASE_JSON = """{
  "attention_probs_dropout_prob": 0.1,
  "hidden_act": "gelu",
  "hidden_dropout_prob": 0.1,
  "hidden_size": 768,
  "initializer_range": 0.02,
  "intermediate_size": 3072,
  "max_position_embeddings": 512,
  "num_attention_heads": 12,
  "num_hidden_layers": 12,
  "type_vocab_size": 2,
  "vocab_size": 30522
}
"""


def test_reads_and_writes_the_original_file(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text(BERT_BASE_JSON)
    config = BertConfig.from_json_file(path)
    assert config.hidden_size == 768 and config.type_vocab_size == 2 and config.size_per_head == 64
    out = tmp_path / "out.json"
    config.to_json_file(out)
    assert json.loads(out.read_text()) == json.loads(BERT_BASE_JSON)


def write(tmp_path, **changes):
    values = json.loads(BERT_BASE_JSON)
    for key, value in changes.items():
        if value is None:
            del values[key]
        else:
            values[key] = value
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(values))
    return path


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"num_attention_heads": 5}, "'hidden_size' (768) is not a multiple of 'num_attention_heads' (5)"),
        ({"hidden_size": 0}, "'hidden_size' must be a positive integer"),
        ({"num_hidden_layers": 2.5}, "'num_hidden_layers' must be a positive integer"),
        ({"hidden_dropout_prob": 1.0}, r"'hidden_dropout_prob' must be a probability in [0, 1)"),
        ({"attention_probs_dropout_prob": -0.1}, "'attention_probs_dropout_prob' must be a probability"),
        ({"hidden_act": "swishy"}, "'hidden_act' is 'swishy'; known activations are gelu, gelu_exact"),
        ({"vocab_size": None}, "missing key(s) vocab_size"),
        ({"type_vocab_size": None}, "missing key(s) type_vocab_size"),
        ({"hiden_size": 3}, "unknown key(s) hiden_size"),
        ({"initializer_range": 0}, "'initializer_range' must be a positive number"),
    ],
)
def test_bad_values_name_the_key_and_the_file(tmp_path, changes, message):
    path = write(tmp_path, **changes)
    with pytest.raises(ConfigError, match=re.escape(message)) as error:
        BertConfig.from_json_file(path)
    assert str(error.value).startswith(str(path))


def test_malformed_json_names_the_line(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text('{\n  "vocab_size": 10,\n  "hidden_size": ,\n}')
    with pytest.raises(ConfigError, match=rf"{path}:3: malformed JSON"):
        BertConfig.from_json_file(path)


def test_missing_file_and_non_object(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        BertConfig.from_json_file(tmp_path / "absent.json")
    path = tmp_path / "list.json"
    path.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="expected a JSON object"):
        BertConfig.from_json_file(path)


def test_direct_construction_validates():
    with pytest.raises(ConfigError, match="BertConfig: 'hidden_act'"):
        BertConfig(vocab_size=10, hidden_act="nope")


def test_original_compatible_replaces_only_the_exact_gelu():
    exact = BertConfig.from_dict(dict(json.loads(BERT_BASE_JSON), hidden_act="gelu_exact"))
    compatible = exact.original_compatible()
    assert compatible.hidden_act == "gelu"
    # Everything else, and the file's keys, stay those of the original release.
    assert compatible.to_json_string() == BERT_BASE_JSON
    for act in ("gelu", "relu", "tanh", "linear"):
        config = BertConfig(vocab_size=10, hidden_act=act)
        assert config.original_compatible() == config
