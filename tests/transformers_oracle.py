#!/usr/bin/env python3
"""Tiny RoBERTa, ALBERT and DistilBERT masked-LM models and two tiny BERT task
heads, with their outputs, from Hugging Face `transformers` itself: the oracle
of `tests/test_transformers_oracle.py`, `tests/test_hf_classifier_heads.py`
and `tests/test_multiple_choice.py`.

Run where torch and transformers are installed (no TensorFlow, no network,
no tokenizer files needed):

    python3 tests/transformers_oracle.py --out DIR

For each variant it builds `RobertaForMaskedLM`, `AlbertForMaskedLM` (four
layers sharing two groups) or `DistilBertForMaskedLM` from a small config and
a fixed seed, gives every parameter a distinct random value (LayerNorm gains
around 1), writes it with `save_pretrained` (`config.json`,
`model.safetensors`), and runs it in float64 on fixed token ids: a short
batch and a long one that fills the position table, each with a row padded
at the end. Written beside the model, per batch NAME:
`NAME_input_ids.npy`, `NAME_attention_mask.npy`, `NAME_token_type_ids.npy`
(ALBERT only), `NAME_last_hidden_state.npy` [batch, seq, hidden] and
`NAME_logits.npy` [batch, seq, vocab] (float32). `DIR/manifest.json` records
the versions and the files under `models`.

The BERT heads (`manifest.json`'s `heads`, each entry with its own torch and
transformers versions, as they may be recorded later than the models) are
BERT encoders of the same tiny sizes (exact GELU, `hidden_act="gelu"`), each
from its own seed and with distinct random parameters, saved the same way
and run in float64 on fixed ids with one padded row and two segments:

- `bert_multiple_choice`: `BertForMultipleChoice` (`classifier` [1, hidden]
  on the pooler) on `choices_input_ids.npy`, `choices_attention_mask.npy`,
  `choices_token_type_ids.npy` [batch=2, num_choices=3, seq=12];
  `choices_logits.npy` [2, 3].
- `bert_multi_label`: `BertForSequenceClassification` with
  `problem_type="multi_label_classification"` and three labels named in
  `id2label` (`MULTI_LABELS`), on `tags_input_ids.npy`,
  `tags_attention_mask.npy`, `tags_token_type_ids.npy` [batch=3, seq=12];
  `tags_logits.npy` [3, 3] (a sigmoid of each is a label's probability).

`--heads_only` writes only the heads (to merge into a recorded directory
whose models a newer transformers would not write byte for byte). The whole
directory is under 2 MB.

Depends on torch, transformers and numpy only.
"""

import argparse
import json
import os

import numpy as np
import torch
import transformers

VOCAB, HIDDEN, LAYERS, HEADS, INTERMEDIATE = 100, 32, 2, 4, 64
POSITIONS = 64  # the longest input; RoBERTa's table has 2 rows more
SEED = 20240537
MULTI_LABELS = ("toxic", "obscene", "insult")


def _configs():
    """`(name, model class, config)` per variant; dropout is off in eval mode anyway."""
    return [
        ("roberta", transformers.RobertaForMaskedLM, transformers.RobertaConfig(
            vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
            intermediate_size=INTERMEDIATE, hidden_act="gelu", max_position_embeddings=POSITIONS + 2,
            type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2)),
        ("albert", transformers.AlbertForMaskedLM, transformers.AlbertConfig(
            vocab_size=VOCAB, embedding_size=16, hidden_size=HIDDEN, num_hidden_layers=4, num_hidden_groups=2,
            inner_group_num=1, num_attention_heads=HEADS, intermediate_size=INTERMEDIATE, hidden_act="gelu_new",
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0,
            max_position_embeddings=POSITIONS, type_vocab_size=2, layer_norm_eps=1e-12,
            pad_token_id=0, bos_token_id=2, eos_token_id=3)),
        ("distilbert", transformers.DistilBertForMaskedLM, transformers.DistilBertConfig(
            vocab_size=VOCAB, dim=HIDDEN, n_layers=LAYERS, n_heads=HEADS, hidden_dim=INTERMEDIATE,
            activation="gelu", max_position_embeddings=POSITIONS, sinusoidal_pos_embds=False, pad_token_id=0)),
    ]


def _batches(name, rng):
    """`{batch name: {input name: int64 array}}`: real tokens first, padding at the end of one row.

    Ids start at 5, so no real token is a pad, bos or eos id (RoBERTa's
    position ids count the non-pad tokens; left-aligned rows read the same rows).
    """
    pad = 1 if name == "roberta" else 0
    batches = {}
    for batch_name, (rows, seq_length, short_length) in {"short": (3, 12, 7), "long": (2, POSITIONS, 41)}.items():
        input_ids = rng.integers(5, VOCAB, (rows, seq_length))
        attention_mask = np.ones((rows, seq_length), np.int64)
        attention_mask[1, short_length:] = 0
        input_ids[1, short_length:] = pad
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if name == "albert":
            token_type_ids = np.zeros((rows, seq_length), np.int64)
            token_type_ids[:, seq_length // 2:] = 1
            token_type_ids[1, short_length:] = 0
            inputs["token_type_ids"] = token_type_ids
        batches[batch_name] = inputs
    return batches


def _randomize(model, generator):
    """Distinct values in every parameter (tied ones once): LayerNorm gains ~1, the rest ~N(0, 0.2)."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            value = torch.randn(parameter.shape, generator=generator, dtype=torch.float32) * 0.2
            if "LayerNorm.weight" in name or "layer_norm.weight" in name:
                value += 1.0
            parameter.copy_(value)


def _bert_config(**changes):
    """A tiny `BertConfig` of the variants' sizes: exact GELU, two segments."""
    return transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        intermediate_size=INTERMEDIATE, hidden_act="gelu", max_position_embeddings=POSITIONS, type_vocab_size=2,
        layer_norm_eps=1e-12, pad_token_id=0, **changes)


def _head_configs():
    """`(name, model class, config, batch name, input shape)` per BERT head."""
    return [
        ("bert_multiple_choice", transformers.BertForMultipleChoice, _bert_config(), "choices", (2, 3, 12)),
        ("bert_multi_label", transformers.BertForSequenceClassification, _bert_config(
            problem_type="multi_label_classification", id2label=dict(enumerate(MULTI_LABELS)),
            label2id={label: i for i, label in enumerate(MULTI_LABELS)}), "tags", (3, 12)),
    ]


def _head_inputs(shape, rng):
    """int64 `{input_ids, attention_mask, token_type_ids}` of `shape` ([..., seq]): [CLS] a [SEP] b [SEP]
    per row (ids from 5), the second row of the flattened batch padded after 7 tokens."""
    rows, seq_length = int(np.prod(shape[:-1])), shape[-1]
    input_ids = rng.integers(5, VOCAB, (rows, seq_length))
    input_ids[:, 0] = 2  # [CLS]
    input_ids[:, 5] = 3  # [SEP] after the first segment
    input_ids[:, -1] = 3
    token_type_ids = np.zeros((rows, seq_length), np.int64)
    token_type_ids[:, 6:] = 1
    attention_mask = np.ones((rows, seq_length), np.int64)
    input_ids[1, 6] = 3
    input_ids[1, 7:] = 0
    attention_mask[1, 7:] = 0
    token_type_ids[1, 7:] = 0
    return {key: value.reshape(shape) for key, value in
            {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}.items()}


def _saved_random_model(model_class, config, seed, directory):
    """A `model_class` of random weights (seeded), saved to `directory` in float32; returned in float64, eval mode."""
    torch.manual_seed(seed)
    model = model_class(config)
    _randomize(model, torch.Generator().manual_seed(seed))
    model.eval()
    model.save_pretrained(directory)  # config.json + model.safetensors (float32)
    return model.double()


def write_heads(out_dir):
    """Writes each BERT head's directory and outputs under `out_dir`; returns the manifest's `heads`."""
    heads = {}
    for index, (name, model_class, config, batch_name, shape) in enumerate(_head_configs(), start=len(_configs())):
        directory = os.path.join(out_dir, name)
        model = _saved_random_model(model_class, config, SEED + index, directory)
        inputs = _head_inputs(shape, np.random.default_rng(SEED + index))
        with torch.no_grad():
            output = model(**{key: torch.from_numpy(value) for key, value in inputs.items()}, return_dict=True)
        arrays = dict(inputs, logits=output.logits.numpy().astype(np.float32))
        files = []
        for key, value in arrays.items():
            filename = f"{batch_name}_{key}.npy"
            np.save(os.path.join(directory, filename), value)
            files.append(filename)
        heads[name] = {"class": model_class.__name__, "batches": [batch_name], "files": sorted(files),
                       "seed": SEED + index, "torch": torch.__version__, "transformers": transformers.__version__,
                       "numpy": np.__version__}
    return heads


def write_oracle(out_dir, heads_only=False):
    """Writes each variant's and head's directory and outputs under `out_dir`; returns the manifest.

    With `heads_only`, only the heads' directories, and `manifest.json`'s
    `heads` merged into the one `out_dir` holds (its `models` kept as they are).
    """
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "manifest.json")
    if heads_only:
        with open(path, encoding="utf-8") as reader:
            manifest = json.load(reader)
        manifest["heads"] = write_heads(out_dir)
        _write_manifest(manifest, path)
        return manifest
    manifest = {"torch": torch.__version__, "transformers": transformers.__version__, "numpy": np.__version__,
                "seed": SEED, "models": {}}
    for index, (name, model_class, config) in enumerate(_configs()):
        directory = os.path.join(out_dir, name)
        model = _saved_random_model(model_class, config, SEED + index, directory)
        files = []
        for batch_name, inputs in _batches(name, np.random.default_rng(SEED + index)).items():
            with torch.no_grad():
                output = model(**{key: torch.from_numpy(value) for key, value in inputs.items()},
                               output_hidden_states=True, return_dict=True)
            arrays = dict(inputs)
            arrays["last_hidden_state"] = output.hidden_states[-1].numpy().astype(np.float32)
            arrays["logits"] = output.logits.numpy().astype(np.float32)
            for key, value in arrays.items():
                filename = f"{batch_name}_{key}.npy"
                np.save(os.path.join(directory, filename), value)
                files.append(filename)
        manifest["models"][name] = {"class": model_class.__name__, "batches": ["short", "long"],
                                    "files": sorted(files)}
    manifest["heads"] = write_heads(out_dir)
    _write_manifest(manifest, path)
    return manifest


def _write_manifest(manifest, path):
    with open(path, "w", encoding="utf-8") as writer:
        json.dump(manifest, writer, indent=2, sort_keys=True)
        writer.write("\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="Directory to write the models and their outputs to.")
    parser.add_argument("--heads_only", action="store_true",
                        help="Write only the BERT heads and merge them into DIR/manifest.json.")
    args = parser.parse_args()
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    manifest = write_oracle(args.out, heads_only=args.heads_only)
    total = sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(args.out) for name in names)
    written = ([] if args.heads_only else list(manifest["models"])) + list(manifest["heads"])
    print(f"transformers {transformers.__version__}, torch {torch.__version__}: "
          f"wrote {', '.join(written)} to {args.out} ({total / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
