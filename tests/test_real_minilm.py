"""The real all-MiniLM-L6-v2 (HF safetensors, exact GELU) through every load
path, checked against independent computations."""

import dataclasses
import numpy as np
import pytest

from keras_bert_impl.checkpoints.hf import bert_config_from_hf, convert_hf_to_original, load_hf_checkpoint
from keras_bert_impl.checkpoints.original import load_original_checkpoint, original_weights
from keras_bert_impl.config import BertConfig
from keras_bert_impl.models.bert_model import BertModel
from keras_bert_impl.tokenization import FullTokenizer
from tests.numpy_bert import bert_forward

SENTENCES = [
    ("A man is eating food.", None),
    ("A man is eating a piece of bread.", None),
    ("The new movie is awesome for its cinematography.", None),
    ("How old are you?", "What is your age?"),
]


@pytest.fixture(scope="module")
def minilm(minilm_dir):
    config = bert_config_from_hf(minilm_dir / "config.json")
    model = BertModel(config, output_all_encoder_layers=True)
    load_hf_checkpoint(model, minilm_dir)
    return config, model


def encode(vocab_file, pairs, max_seq_length=24):
    """The original run_classifier layout: [CLS] a [SEP] (b [SEP]), zero-padded."""
    tokenizer = FullTokenizer(str(vocab_file), do_lower_case=True)
    batch = {key: np.zeros((len(pairs), max_seq_length), "int32") for key in ("input_ids", "input_mask", "segment_ids")}
    for row, (a, b) in enumerate(pairs):
        tokens = ["[CLS]"] + tokenizer.tokenize(a) + ["[SEP]"]
        segments = [0] * len(tokens)
        if b:
            extra = tokenizer.tokenize(b) + ["[SEP]"]
            tokens += extra
            segments += [1] * len(extra)
        ids = tokenizer.convert_tokens_to_ids(tokens)
        batch["input_ids"][row, : len(ids)] = ids
        batch["input_mask"][row, : len(ids)] = 1
        batch["segment_ids"][row, : len(ids)] = segments
    return batch


def test_config_says_exact_gelu(minilm):
    config, _ = minilm
    assert config.hidden_act == "gelu_exact"
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (6, 384, 12)


def test_matches_numpy_reference_on_real_sentences(minilm, minilm_dir):
    config, model = minilm
    inputs = encode(minilm_dir / "vocab.txt", SENTENCES)
    ours = model(inputs)
    layers, pooled, _ = bert_forward(original_weights(model), config.to_dict(), **inputs)
    real = inputs["input_mask"].astype(bool)
    for mine, ref in zip(ours["encoder_outputs"], layers):
        np.testing.assert_allclose(np.asarray(mine)[real], ref[real], atol=2e-5)
    np.testing.assert_allclose(ours["pooled_output"], pooled, atol=2e-5)


def test_sentence_embeddings_match_published_similarities(minilm, minilm_dir):
    """all-MiniLM-L6-v2 is a sentence encoder (mean pooling + L2 norm). The
    sentence-transformers quickstart prints these cosine similarities for its
    three example sentences with this model: [[1, 0.6660, 0.1046],
    [0.6660, 1, 0.1411], [0.1046, 0.1411, 1]]. A misplaced weight or the
    wrong GELU would not reproduce them to 4 decimals."""
    _, model = minilm
    sentences = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    inputs = encode(minilm_dir / "vocab.txt", [(s, None) for s in sentences])
    sequence = np.asarray(model(inputs)["sequence_output"], np.float64)
    mask = inputs["input_mask"][:, :, None]
    embeddings = (sequence * mask).sum(1) / mask.sum(1)
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
    similarity = embeddings @ embeddings.T
    published = np.array([[1.0, 0.6660, 0.1046], [0.6660, 1.0, 0.1411], [0.1046, 0.1411, 1.0]])
    np.testing.assert_allclose(similarity, published, atol=6e-5)


def test_hf_and_original_checkpoint_paths_agree(minilm, minilm_dir, tmp_path):
    config, model = minilm
    converted_config, prefix = convert_hf_to_original(minilm_dir, tmp_path)
    assert converted_config == config
    assert BertConfig.from_json_file(tmp_path / "bert_config.json") == config
    assert (tmp_path / "vocab.txt").read_bytes() == (minilm_dir / "vocab.txt").read_bytes()

    via_original = BertModel(BertConfig.from_json_file(tmp_path / "bert_config.json"), output_all_encoder_layers=True)
    report = load_original_checkpoint(via_original, prefix)
    assert len(report.loaded) == len(via_original.weights)
    for a, b in zip(model.weights, via_original.weights):
        assert a.numpy().tobytes() == b.numpy().tobytes(), a.path
    inputs = encode(minilm_dir / "vocab.txt", SENTENCES)
    np.testing.assert_array_equal(model(inputs)["sequence_output"], via_original(inputs)["sequence_output"])


def test_keras_hub_loads_the_same_weights(minilm, minilm_dir):
    """keras-hub reads the same safetensors (its own converter). Its BERT
    always uses the tanh GELU, so compare with our model set to `gelu`."""
    import keras_hub

    config, model = minilm
    tanh_model = BertModel(dataclasses.replace(config, hidden_act="gelu"))
    load_hf_checkpoint(tanh_model, minilm_dir)
    backbone = keras_hub.models.BertBackbone.from_preset(str(minilm_dir))
    inputs = encode(minilm_dir / "vocab.txt", SENTENCES)
    theirs = backbone({"token_ids": inputs["input_ids"], "segment_ids": inputs["segment_ids"], "padding_mask": inputs["input_mask"]})
    ours = tanh_model(inputs)
    real = inputs["input_mask"].astype(bool)
    np.testing.assert_allclose(np.asarray(ours["sequence_output"])[real], np.asarray(theirs["sequence_output"])[real], atol=1e-5)
    np.testing.assert_allclose(ours["pooled_output"], theirs["pooled_output"], atol=1e-5)
    # The exact-GELU model (what the weights were trained with) differs visibly.
    exact = np.asarray(model(inputs)["sequence_output"])[real]
    assert np.abs(exact - np.asarray(theirs["sequence_output"])[real]).max() > 1e-4
