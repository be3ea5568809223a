"""RoBERTa, ALBERT and DistilBERT converted from directories that `transformers`
itself wrote, against the outputs `transformers` computed (issue 37: "equal
transformers' to 1e-4").

The directory is made where torch is installed, by
`python3 tests/transformers_oracle.py --out DIR`; the one in
`tests/data/transformers_oracle` (0.9 MB) was written by transformers 5.17
on torch 2.11 (its manifest.json says so; its BERT `heads`, read by
`tests/test_hf_classifier_heads.py` and `tests/test_multiple_choice.py`,
by transformers 5.25 on torch 2.13), and
`KERAS_BERT_IMPL_TRANSFORMERS_ORACLE=DIR` names another.
Each model is converted with `bert-convert-hf`, loaded from the release into
our `BertPretrainingModel`, and its last layer and masked-LM logits (at every
real token) compared with transformers' float64 ones.
"""

import json
import os
import pathlib
import shutil

import numpy as np
import pytest

from keras_bert_impl.checkpoints.original import load_original_checkpoint
from keras_bert_impl.config import BertConfig
from keras_bert_impl.models.pretraining import BertPretrainingModel
from tools.convert_hf_checkpoint import main as convert_main

ORACLE = pathlib.Path(os.environ.get("KERAS_BERT_IMPL_TRANSFORMERS_ORACLE",
                                     pathlib.Path(__file__).parent / "data" / "transformers_oracle"))
TOLERANCE = 1e-4

pytestmark = pytest.mark.skipif(
    not (ORACLE / "manifest.json").is_file(),
    reason="KERAS_BERT_IMPL_TRANSFORMERS_ORACLE names no directory of tests/transformers_oracle.py",
)


def _manifest():
    return json.loads((ORACLE / "manifest.json").read_text()) if (ORACLE / "manifest.json").is_file() else {"models": {}}


def _with_tokenizer_files(name, tmp_path):
    """A copy of the oracle's directory with the tokenizer files a release needs
    (the oracle runs on ids and writes none; these play no part in the outputs)."""
    hf_dir = tmp_path / "hf"
    shutil.copytree(ORACLE / name, hf_dir)
    vocab_size = json.loads((hf_dir / "config.json").read_text())["vocab_size"]
    if name == "roberta":
        tokens = ["<s>", "<pad>", "</s>", "<unk>"] + [f"t{i}" for i in range(vocab_size - 5)] + ["<mask>"]
        (hf_dir / "vocab.json").write_text(json.dumps({token: i for i, token in enumerate(tokens)}))
        (hf_dir / "merges.txt").write_text("#version: 0.2\n")
    elif name == "albert":
        from tests.variants_fixture import _albert_spiece_model

        _albert_spiece_model(hf_dir / "spiece.model")
    else:
        tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(vocab_size - 5)]
        (hf_dir / "vocab.txt").write_text("".join(f"{token}\n" for token in tokens))
    return hf_dir


def _converted(name, tmp_path):
    release = tmp_path / "release"
    convert_main([f"--hf_model_dir={_with_tokenizer_files(name, tmp_path)}", f"--output_dir={release}"])
    config = BertConfig.from_json_file(str(release / "bert_config.json"))
    model = BertPretrainingModel(config)
    # *ForMaskedLM has no sentence head (and RoBERTa's and ALBERT's no pooler).
    load_original_checkpoint(model, str(release / "bert_model.ckpt"), allow_fresh=["bert/pooler/", "cls/seq_relationship/"])
    return config, model


@pytest.mark.parametrize("name", sorted(_manifest()["models"]) or ["roberta", "albert", "distilbert"])
def test_last_layer_and_masked_lm_logits_equal_transformers(name, tmp_path):
    entry = _manifest()["models"][name]
    config, model = _converted(name, tmp_path)
    assert config.model_type == name
    for batch in entry["batches"]:
        load = lambda key: np.load(ORACLE / name / f"{batch}_{key}.npy")  # noqa: E731
        input_ids = load("input_ids").astype("int32")
        input_mask = load("attention_mask").astype("int32")
        token_types = ORACLE / name / f"{batch}_token_type_ids.npy"
        segment_ids = np.load(token_types).astype("int32") if token_types.exists() else np.zeros_like(input_ids)
        rows, seq_length = input_ids.shape
        inputs = {
            "input_ids": input_ids,
            "input_mask": input_mask,
            "segment_ids": segment_ids,
            # Every position, so the head's logits cover the whole sequence.
            "masked_lm_positions": np.tile(np.arange(seq_length, dtype="int32"), (rows, 1)),
        }
        real = input_mask.astype(bool)
        encoder_inputs = {key: inputs[key] for key in ("input_ids", "input_mask", "segment_ids")}
        sequence_output = np.asarray(model.bert(encoder_inputs, training=False)["sequence_output"])
        logits = np.asarray(model(inputs, training=False)["masked_lm_logits"])
        hidden_difference = np.max(np.abs(sequence_output[real] - load("last_hidden_state")[real]))
        logits_difference = np.max(np.abs(logits[real] - load("logits")[real]))
        assert hidden_difference < TOLERANCE, (name, batch, hidden_difference)
        assert logits_difference < TOLERANCE, (name, batch, logits_difference)
