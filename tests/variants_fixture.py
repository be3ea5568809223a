"""Tiny Hugging Face directories of RoBERTa, ALBERT and DistilBERT, written by hand.

The tensor names and shapes are those `save_pretrained` writes for
`RobertaForMaskedLM`, `AlbertForPreTraining` and `DistilBertForMaskedLM`
(transformers' `modeling_roberta.py`, `modeling_albert.py`,
`modeling_distilbert.py`: `nn.Linear` weights are [out, in]), with random
values; the tied decoders are left out, as `save_pretrained` leaves them out.
Nothing here is shared with the converter under test: keras-hub's own
Hugging Face loader reads these directories as the oracle.
"""

import json

import numpy as np
from safetensors.numpy import save_file

VOCAB, HIDDEN, HEADS, INTERMEDIATE = 60, 16, 4, 32
ALBERT_EMBEDDING, ALBERT_LAYERS, ALBERT_GROUPS, ALBERT_INNER = 8, 4, 2, 2
ROBERTA_POSITIONS = 34  # 32 tokens after RoBERTa's two reserved rows
POSITIONS = 32


def _linear(rng, name, out_size, in_size, tensors):
    tensors[f"{name}.weight"] = rng.normal(0, 0.2, (out_size, in_size))
    tensors[f"{name}.bias"] = rng.normal(0, 0.1, (out_size,))


def _layer_norm(rng, name, size, tensors):
    tensors[f"{name}.weight"] = 1.0 + rng.normal(0, 0.1, (size,))
    tensors[f"{name}.bias"] = rng.normal(0, 0.1, (size,))


def _bert_layer(rng, prefix, tensors):
    for part in ("query", "key", "value"):
        _linear(rng, f"{prefix}.attention.self.{part}", HIDDEN, HIDDEN, tensors)
    _linear(rng, f"{prefix}.attention.output.dense", HIDDEN, HIDDEN, tensors)
    _layer_norm(rng, f"{prefix}.attention.output.LayerNorm", HIDDEN, tensors)
    _linear(rng, f"{prefix}.intermediate.dense", INTERMEDIATE, HIDDEN, tensors)
    _linear(rng, f"{prefix}.output.dense", HIDDEN, INTERMEDIATE, tensors)
    _layer_norm(rng, f"{prefix}.output.LayerNorm", HIDDEN, tensors)


def roberta_tensors(rng, num_layers=2):
    """`RobertaForMaskedLM`'s state dict (no pooler: `add_pooling_layer=False`)."""
    t = {
        "roberta.embeddings.word_embeddings.weight": rng.normal(0, 0.5, (VOCAB, HIDDEN)),
        "roberta.embeddings.position_embeddings.weight": rng.normal(0, 0.5, (ROBERTA_POSITIONS, HIDDEN)),
        # Zero in every fairseq-converted RoBERTa; keras-hub's backbone has no token types at all.
        "roberta.embeddings.token_type_embeddings.weight": np.zeros((1, HIDDEN)),
    }
    _layer_norm(rng, "roberta.embeddings.LayerNorm", HIDDEN, t)
    for index in range(num_layers):
        _bert_layer(rng, f"roberta.encoder.layer.{index}", t)
    _linear(rng, "lm_head.dense", HIDDEN, HIDDEN, t)
    _layer_norm(rng, "lm_head.layer_norm", HIDDEN, t)
    t["lm_head.bias"] = rng.normal(0, 0.1, (VOCAB,))
    return t


def albert_tensors(rng):
    """`AlbertForPreTraining`'s state dict: pooler, `predictions` and `sop_classifier`."""
    t = {
        "albert.embeddings.word_embeddings.weight": rng.normal(0, 0.5, (VOCAB, ALBERT_EMBEDDING)),
        "albert.embeddings.position_embeddings.weight": rng.normal(0, 0.5, (POSITIONS, ALBERT_EMBEDDING)),
        "albert.embeddings.token_type_embeddings.weight": rng.normal(0, 0.5, (2, ALBERT_EMBEDDING)),
    }
    _layer_norm(rng, "albert.embeddings.LayerNorm", ALBERT_EMBEDDING, t)
    _linear(rng, "albert.encoder.embedding_hidden_mapping_in", HIDDEN, ALBERT_EMBEDDING, t)
    for group in range(ALBERT_GROUPS):
        for inner in range(ALBERT_INNER):
            prefix = f"albert.encoder.albert_layer_groups.{group}.albert_layers.{inner}"
            for part in ("query", "key", "value", "dense"):
                _linear(rng, f"{prefix}.attention.{part}", HIDDEN, HIDDEN, t)
            _layer_norm(rng, f"{prefix}.attention.LayerNorm", HIDDEN, t)
            _linear(rng, f"{prefix}.ffn", INTERMEDIATE, HIDDEN, t)
            _linear(rng, f"{prefix}.ffn_output", HIDDEN, INTERMEDIATE, t)
            _layer_norm(rng, f"{prefix}.full_layer_layer_norm", HIDDEN, t)
    _linear(rng, "albert.pooler", HIDDEN, HIDDEN, t)
    _linear(rng, "predictions.dense", ALBERT_EMBEDDING, HIDDEN, t)
    _layer_norm(rng, "predictions.LayerNorm", ALBERT_EMBEDDING, t)
    t["predictions.bias"] = rng.normal(0, 0.1, (VOCAB,))
    _linear(rng, "sop_classifier.classifier", 2, HIDDEN, t)
    return t


def distilbert_tensors(rng, num_layers=2):
    """`DistilBertForMaskedLM`'s state dict."""
    t = {
        "distilbert.embeddings.word_embeddings.weight": rng.normal(0, 0.5, (VOCAB, HIDDEN)),
        "distilbert.embeddings.position_embeddings.weight": rng.normal(0, 0.5, (POSITIONS, HIDDEN)),
    }
    _layer_norm(rng, "distilbert.embeddings.LayerNorm", HIDDEN, t)
    for index in range(num_layers):
        prefix = f"distilbert.transformer.layer.{index}"
        for part in ("q_lin", "k_lin", "v_lin", "out_lin"):
            _linear(rng, f"{prefix}.attention.{part}", HIDDEN, HIDDEN, t)
        _layer_norm(rng, f"{prefix}.sa_layer_norm", HIDDEN, t)
        _linear(rng, f"{prefix}.ffn.lin1", INTERMEDIATE, HIDDEN, t)
        _linear(rng, f"{prefix}.ffn.lin2", HIDDEN, INTERMEDIATE, t)
        _layer_norm(rng, f"{prefix}.output_layer_norm", HIDDEN, t)
    _linear(rng, "vocab_transform", HIDDEN, HIDDEN, t)
    _layer_norm(rng, "vocab_layer_norm", HIDDEN, t)
    t["vocab_projector.bias"] = rng.normal(0, 0.1, (VOCAB,))
    return t


# The `config.json`s, with the keys transformers' configuration classes write.
HF_CONFIGS = {
    "roberta": {
        "architectures": ["RobertaForMaskedLM"], "model_type": "roberta", "vocab_size": VOCAB,
        "hidden_size": HIDDEN, "num_hidden_layers": 2, "num_attention_heads": HEADS,
        "intermediate_size": INTERMEDIATE, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1, "max_position_embeddings": ROBERTA_POSITIONS, "type_vocab_size": 1,
        "initializer_range": 0.02, "layer_norm_eps": 1e-5, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
        "position_embedding_type": "absolute",
    },
    "albert": {
        "architectures": ["AlbertForPreTraining"], "model_type": "albert", "vocab_size": VOCAB,
        "embedding_size": ALBERT_EMBEDDING, "hidden_size": HIDDEN, "num_hidden_layers": ALBERT_LAYERS,
        "num_hidden_groups": ALBERT_GROUPS, "inner_group_num": ALBERT_INNER, "num_attention_heads": HEADS,
        "intermediate_size": INTERMEDIATE, "hidden_act": "gelu_new", "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0, "max_position_embeddings": POSITIONS, "type_vocab_size": 2,
        "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 3,
    },
    "distilbert": {
        "architectures": ["DistilBertForMaskedLM"], "model_type": "distilbert", "vocab_size": VOCAB, "dim": HIDDEN,
        "n_layers": 2, "n_heads": HEADS, "hidden_dim": INTERMEDIATE, "activation": "gelu", "dropout": 0.1,
        "attention_dropout": 0.1, "max_position_embeddings": POSITIONS, "initializer_range": 0.02,
        "sinusoidal_pos_embds": False, "pad_token_id": 0,
    },
}
TENSORS = {"roberta": roberta_tensors, "albert": albert_tensors, "distilbert": distilbert_tensors}


def _roberta_tokenizer_files(directory):
    # A byte-level BPE vocabulary: the specials, then single characters.
    tokens = ["<s>", "<pad>", "</s>", "<unk>"] + [chr(ord("a") + i) for i in range(26)] + ["Ġ"]
    tokens += ["th", "the", "Ġt", "he", "Ġthe"]
    tokens += [f"x{i}" for i in range(VOCAB - len(tokens) - 1)] + ["<mask>"]
    (directory / "vocab.json").write_text(json.dumps({token: i for i, token in enumerate(tokens)}))
    (directory / "merges.txt").write_text("#version: 0.2\nt h\nth e\nĠ t\nh e\nĠt he\n")


def _albert_spiece_model(path):
    """A tiny SentencePiece unigram model with ALBERT's special pieces (`<pad>` 0, `<unk>` 1, [CLS] [SEP] [MASK])."""
    import io

    import sentencepiece as spm

    text = ["the quick brown fox jumps over the lazy dog", "a b c d e f g h i j k l m n o p",
            "lorem ipsum dolor sit amet", "hello world again and again"] * 20
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(text), model_writer=model, vocab_size=VOCAB - 8, model_type="unigram",
        pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, user_defined_symbols=["[CLS]", "[SEP]", "[MASK]"],
        hard_vocab_limit=False, minloglevel=2,
    )
    path.write_bytes(model.getvalue())


def write_hf_directory(directory, model_type, seed=0):
    """Writes `config.json`, `model.safetensors` (float32) and the tokenizer files of `model_type`.

    Returns:
        `{hf name: float32 array}` as written.
    """
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    tensors = {name: value.astype(np.float32) for name, value in TENSORS[model_type](rng).items()}
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    (directory / "config.json").write_text(json.dumps(HF_CONFIGS[model_type], indent=2))
    if model_type == "roberta":
        _roberta_tokenizer_files(directory)
    elif model_type == "albert":
        _albert_spiece_model(directory / "spiece.model")
    else:
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        tokens = specials + [f"w{i}" for i in range(VOCAB - len(specials))]
        (directory / "vocab.txt").write_text("".join(f"{token}\n" for token in tokens))
    (directory / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 32}))
    return tensors
