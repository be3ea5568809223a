"""RoBERTa, ALBERT and DistilBERT from Hugging Face directories, against keras-hub.

Each test writes a tiny HF directory by hand (`tests/variants_fixture.py`),
converts it with `bert-convert-hf`, loads the release into our `BertModel`
and compares with keras-hub's backbone loaded from the same HF directory by
keras-hub's own Hugging Face loader (`Backbone.from_preset(hf_dir)`), and
the masked-LM logits with keras-hub's `MaskedLMHead` holding the HF head's
weights (the mapping written here from the HF names, not ours).
"""

import json

import keras_hub
import numpy as np
import pytest

from keras_bert_impl.checkpoints.hf import hf_to_original_name, load_hf_model
from keras_bert_impl.checkpoints.original import list_original_variables, load_original_checkpoint
from keras_bert_impl.checkpoints.sources import find_release
from keras_bert_impl.config import BertConfig
from keras_bert_impl.errors import ConfigError, SequenceLengthError
from keras_bert_impl.models.bert_model import BertModel
from keras_bert_impl.models.pretraining import BertPretrainingModel
from tests.variants_fixture import HF_CONFIGS, VOCAB, write_hf_directory
from tools.convert_hf_checkpoint import main as convert_main

BACKBONES = {
    "roberta": keras_hub.models.RobertaBackbone,
    "albert": keras_hub.models.AlbertBackbone,
    "distilbert": keras_hub.models.DistilBertBackbone,
}


def _batch(model_type, batch_size=2, seq_length=12, seed=1):
    rng = np.random.default_rng(seed)
    ids = rng.integers(3, VOCAB - 1, (batch_size, seq_length)).astype("int32")
    mask = np.ones((batch_size, seq_length), "int32")
    mask[1, seq_length - 3:] = 0  # padding at the end of the second row
    segments = np.zeros((batch_size, seq_length), "int32")
    if model_type == "albert":
        segments[:, seq_length // 2:] = 1
    if model_type == "roberta":
        ids[1, seq_length - 3:] = 1  # RoBERTa's <pad>
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def _keras_hub_inputs(model_type, batch):
    inputs = {"token_ids": batch["input_ids"], "padding_mask": batch["input_mask"]}
    if model_type == "albert":
        inputs["segment_ids"] = batch["segment_ids"]
    return inputs


def _keras_hub_sequence(backbone, model_type, batch):
    out = backbone(_keras_hub_inputs(model_type, batch), training=False)
    return out["sequence_output"] if isinstance(out, dict) else out


def _convert(hf_dir, release_dir):
    convert_main([f"--hf_model_dir={hf_dir}", f"--output_dir={release_dir}"])
    return find_release(release_dir)


def _our_model(files, pretraining):
    config = BertConfig.from_json_file(files.bert_config_file)
    model = BertPretrainingModel(config) if pretraining else BertModel(config)
    allow = ("bert/pooler/", "cls/seq_relationship/")
    report = load_original_checkpoint(model, files.checkpoint, allow_fresh=allow)
    return config, model, report


def _real_rows(a, b, mask):
    rows = mask.astype(bool)
    return np.max(np.abs(np.asarray(a)[rows] - np.asarray(b)[rows]))


@pytest.mark.parametrize("model_type", ["roberta", "albert", "distilbert"])
def test_sequence_output_equals_keras_hubs_from_the_same_hf_directory(tmp_path, model_type):
    hf_dir = tmp_path / "hf"
    write_hf_directory(hf_dir, model_type)
    files = _convert(hf_dir, tmp_path / "release")
    config, model, report = _our_model(files, pretraining=False)
    assert not report.missing or model_type == "roberta"  # RobertaForMaskedLM has no pooler
    assert config.model_type == model_type

    backbone = BACKBONES[model_type].from_preset(str(hf_dir))
    batch = _batch(model_type)
    theirs = _keras_hub_sequence(backbone, model_type, batch)
    ours = model(batch, training=False)["sequence_output"]
    assert _real_rows(ours, theirs, batch["input_mask"]) < 1e-5
    if model_type == "albert":
        pooled = backbone(_keras_hub_inputs(model_type, batch), training=False)["pooled_output"]
        assert np.max(np.abs(np.asarray(pooled) - np.asarray(model(batch)["pooled_output"]))) < 1e-5
    if model_type == "distilbert":
        assert "pooled_output" not in model.output


def _keras_hub_mlm_logits(model_type, backbone, tensors, sequence_output, positions):
    """keras-hub's `MaskedLMHead` (tied to the backbone's token embedding) with the HF head's weights."""
    from keras_hub.src.layers.modeling.masked_lm_head import MaskedLMHead
    from keras_hub.src.utils.keras_utils import gelu_approximate

    names = {
        "roberta": ("lm_head.dense", "lm_head.layer_norm", "lm_head.bias", "gelu", 1e-5),
        "albert": ("predictions.dense", "predictions.LayerNorm", "predictions.bias", gelu_approximate, 1e-12),
        "distilbert": ("vocab_transform", "vocab_layer_norm", "vocab_projector.bias", "gelu", 1e-12),
    }[model_type]
    dense, norm, bias, activation, epsilon = names
    head = MaskedLMHead(token_embedding=backbone.token_embedding, intermediate_activation=activation,
                        layer_norm_epsilon=epsilon, dtype="float32")
    head.build(sequence_output.shape, positions.shape)
    head._intermediate_dense.kernel.assign(tensors[f"{dense}.weight"].T)
    head._intermediate_dense.bias.assign(tensors[f"{dense}.bias"])
    head._intermediate_layer_norm.gamma.assign(tensors[f"{norm}.weight"])
    head._intermediate_layer_norm.beta.assign(tensors[f"{norm}.bias"])
    head._bias.assign(tensors[bias])
    return head(sequence_output, positions)


@pytest.mark.parametrize("model_type", ["roberta", "albert", "distilbert"])
def test_masked_lm_logits_equal_keras_hubs_head(tmp_path, model_type):
    hf_dir = tmp_path / "hf"
    tensors = write_hf_directory(hf_dir, model_type)
    files = _convert(hf_dir, tmp_path / "release")
    _, model, _ = _our_model(files, pretraining=True)
    backbone = BACKBONES[model_type].from_preset(str(hf_dir))
    batch = _batch(model_type)
    positions = np.array([[1, 4, 7], [0, 2, 8]], "int32")
    theirs = _keras_hub_mlm_logits(
        model_type, backbone, tensors, _keras_hub_sequence(backbone, model_type, batch), positions)
    ours = model({**batch, "masked_lm_positions": positions}, training=False)["masked_lm_logits"]
    assert np.max(np.abs(np.asarray(ours) - np.asarray(theirs))) < 1e-5
    if model_type == "albert":  # the sentence-order head, on keras-hub's pooled output
        pooled = np.asarray(backbone(_keras_hub_inputs(model_type, batch), training=False)["pooled_output"])
        sop = pooled @ tensors["sop_classifier.classifier.weight"].T + tensors["sop_classifier.classifier.bias"]
        ours_sop = model({**batch, "masked_lm_positions": positions}, training=False)["next_sentence_logits"]
        assert np.max(np.abs(np.asarray(ours_sop) - sop)) < 1e-5


def test_release_holds_the_variant_config_names_and_tokenizer_files(tmp_path):
    hf_dir = tmp_path / "hf"
    write_hf_directory(hf_dir, "roberta")
    files = _convert(hf_dir, tmp_path / "release")
    config = json.loads((tmp_path / "release" / "bert_config.json").read_text())
    assert config["model_type"] == "roberta" and config["position_offset"] == 2
    assert config["layer_norm_eps"] == 1e-5 and config["hidden_act"] == "gelu_exact"
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        assert (tmp_path / "release" / name).read_bytes() == (hf_dir / name).read_bytes()
    assert files.vocab_file.endswith("vocab.json")
    names = list_original_variables(files.checkpoint)
    assert names["bert/embeddings/position_embeddings"] == [34, 16]
    assert "cls/predictions/output_bias" in names and "bert/pooler/dense/kernel" not in names

    write_hf_directory(tmp_path / "albert", "albert")
    _convert(tmp_path / "albert", tmp_path / "albert_release")
    names = list_original_variables(str(tmp_path / "albert_release" / "bert_model.ckpt"))
    # google-research/albert's TF1 names.
    assert names["bert/encoder/embedding_hidden_mapping_in/kernel"] == [8, 16]
    assert names["bert/encoder/transformer/group_1/inner_group_1/ffn_1/intermediate/output/dense/kernel"] == [32, 16]
    assert names["bert/encoder/transformer/group_0/inner_group_0/LayerNorm_1/gamma"] == [16]
    assert names["cls/seq_relationship/output_weights"] == [2, 16]
    assert not any("layer_" in name for name in names)


def test_roberta_positions_start_after_the_padding_row_and_limit_the_length(tmp_path):
    hf_dir = tmp_path / "hf"
    write_hf_directory(hf_dir, "roberta")
    model = load_hf_model(hf_dir).model
    config = model.bert.bert_config
    assert config.max_sequence_length == 32
    batch = _batch("roberta", seq_length=32)
    model.bert(batch)  # 32 tokens: rows 2..33 of the table
    with pytest.raises(SequenceLengthError, match=r"position_offset \(34 - 2\) 32"):
        model.bert(_batch("roberta", seq_length=33))


def test_tied_decoder_that_differs_is_reported_and_prefixless_names_load(tmp_path):
    from safetensors.numpy import save_file

    hf_dir = tmp_path / "hf"
    tensors = write_hf_directory(hf_dir, "distilbert")
    # A base `DistilBertModel` saves without the prefix; an untied projector is not the word embeddings.
    base = {name.removeprefix("distilbert."): value for name, value in tensors.items()}
    base["vocab_projector.weight"] = np.zeros((VOCAB, 16), np.float32)
    save_file(base, str(hf_dir / "model.safetensors"))
    loaded = load_hf_model(hf_dir)
    assert loaded.unconverted == ("vocab_projector.weight (not tied to the word embeddings)",)
    assert hf_to_original_name("transformer.layer.1.ffn.lin2.weight", "distilbert") == (
        "bert/encoder/layer_1/output/dense/kernel", True)


def test_hf_config_errors_name_the_key(tmp_path):
    hf_dir = tmp_path / "hf"
    write_hf_directory(hf_dir, "albert")
    values = dict(HF_CONFIGS["albert"])
    del values["num_hidden_groups"]
    (hf_dir / "config.json").write_text(json.dumps(values))
    with pytest.raises(ConfigError, match="missing key.*num_hidden_groups"):
        load_hf_model(hf_dir)
    (hf_dir / "config.json").write_text(json.dumps(dict(HF_CONFIGS["albert"], model_type="xlnet")))
    with pytest.raises(ConfigError, match="model_type is 'xlnet'"):
        load_hf_model(hf_dir)


def _tanh_gelu(x):
    import tf_keras

    return tf_keras.activations.gelu(x, approximate=True)  # our "gelu", the original's tanh form


def test_albert_sharing_equals_tf_models_albert_encoder():
    """tf-models' `AlbertEncoder` with our ALBERT's weights computes our sequence and pooled output."""
    nlp = pytest.importorskip("official.nlp.modeling.networks")
    config = BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=4, num_attention_heads=4,
                        intermediate_size=32, hidden_act="gelu", hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0, max_position_embeddings=32, type_vocab_size=2,
                        model_type="albert", embedding_size=8, num_hidden_groups=1)
    ours = BertModel(config)
    rng = np.random.default_rng(3)
    for variable in ours.weights:
        variable.assign(rng.normal(0, 0.3, variable.shape).astype("float32"))
    theirs = nlp.AlbertEncoder(vocab_size=VOCAB, embedding_width=8, hidden_size=16, num_layers=4,
                               num_attention_heads=4, max_sequence_length=32, type_vocab_size=2,
                               intermediate_size=32, activation=_tanh_gelu,
                               dropout_rate=0.0, attention_dropout_rate=0.0)
    batch = _batch("albert")
    theirs([batch["input_ids"], batch["input_mask"], batch["segment_ids"]])  # builds its variables
    # tf-models' variables by role (its `AlbertEncoder`: one shared `transformer` layer).
    by_name = {variable.name: variable for variable in theirs.weights}
    assert len(ours.weights) == len(theirs.weights)
    b = ours

    def put(fragment, value):
        matches = [v for name, v in by_name.items() if name.startswith(fragment + ":") or f"/{fragment}:" in name]
        assert len(matches) == 1, (fragment, [name for name in by_name if fragment in name])
        matches[0].assign(np.reshape(value, matches[0].shape))

    block = b.encoder.blocks[0]
    put("word_embeddings/embeddings", b.word_embedding.embeddings)
    put("position_embedding/embeddings", b.embedding_postprocessor.position_embeddings)
    put("type_embeddings/embeddings", b.embedding_postprocessor.token_type_embeddings)
    put("embeddings/layer_norm/gamma", b.embedding_postprocessor.layer_norm.gamma)
    put("embeddings/layer_norm/beta", b.embedding_postprocessor.layer_norm.beta)
    put("embedding_projection/kernel", b.embedding_postprocessor.embedding_projection.kernel)
    put("embedding_projection/bias", b.embedding_postprocessor.embedding_projection.bias)
    for part in ("query", "key", "value"):
        dense = getattr(block.attention, part)
        put(f"self_attention/{part}/kernel", dense.kernel)
        put(f"self_attention/{part}/bias", dense.bias)
    put("self_attention/attention_output/kernel", block.attention_output.kernel)
    put("self_attention/attention_output/bias", block.attention_output.bias)
    put("self_attention_layer_norm/gamma", block.attention_layer_norm.gamma)
    put("self_attention_layer_norm/beta", block.attention_layer_norm.beta)
    put("transformer/intermediate/kernel", block.intermediate.kernel)
    put("transformer/intermediate/bias", block.intermediate.bias)
    put("transformer/output/kernel", block.output_dense.kernel)
    put("transformer/output/bias", block.output_dense.bias)
    put("output_layer_norm/gamma", block.output_layer_norm.gamma)
    put("output_layer_norm/beta", block.output_layer_norm.beta)
    put("pooler_transform/kernel", b.pooler.dense.kernel)
    put("pooler_transform/bias", b.pooler.dense.bias)

    out = theirs([batch["input_ids"], batch["input_mask"], batch["segment_ids"]])
    mine = ours(batch, training=False)
    theirs_sequence, theirs_pooled = (out["sequence_output"], out["pooled_output"]) if isinstance(out, dict) else out
    assert _real_rows(mine["sequence_output"], theirs_sequence, batch["input_mask"]) < 1e-5
    assert np.max(np.abs(np.asarray(mine["pooled_output"]) - np.asarray(theirs_pooled))) < 1e-5
