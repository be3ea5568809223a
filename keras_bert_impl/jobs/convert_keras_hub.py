"""A release as a keras-hub preset, and a keras-hub BERT preset as a release
(`tools/convert_keras_hub.py`, console `bert-convert-keras-hub`).

Where keras-hub computes something other than the release (the tanh GELU
for a `gelu_exact` model, its masked-LM head's exact GELU and LayerNorm
epsilon), stderr says so with the measured max abs difference.

Example:
>>> convert_keras_hub(preset_dir="preset/")  # no direction given
Traceback (most recent call last):
...
ValueError: give exactly one of to_preset or from_preset
"""

import time

from keras_bert_impl.training.fine_tuning import log_to_stderr

_log = log_to_stderr("convert_keras_hub")


def _report_differences(conversion):
    """The stderr lines for what keras-hub computes differently, with the measured size."""
    config, differences = conversion.config, conversion.differences
    batch = "x".join(str(size) for size in conversion.probe_shape)
    if config.hidden_act == "gelu_exact":
        _log(
            f"hidden_act gelu_exact: keras-hub's BertBackbone computes the tanh GELU, so its sequence_output "
            f"differs from this model's by up to {differences['sequence_output']:.3g} (max abs difference on a "
            f"fixed batch of {batch} random token ids)"
        )
    if "masked_lm_logits" in differences:
        _log(
            f"keras-hub's BertMaskedLM head computes the exact GELU and LayerNorm epsilon 1e-5 where "
            f"cls/predictions uses hidden_act {config.hidden_act} and 1e-12: its logits differ from this "
            f"model's by up to {differences['masked_lm_logits']:.3g} (max abs difference on the same batch)"
        )
    for note in conversion.notes:
        _log(note)


def _examples(names, count=3):
    return ", ".join(names[:count]) + (", ..." if len(names) > count else "")


def convert_keras_hub(to_preset=False, from_preset=False, preset_dir=None, bert_config_file=None,
                      init_checkpoint=None, vocab_file=None, do_lower_case=True, output_dir=None):
    """Converts between a release and a keras-hub preset, in the direction asked.

    Args:
        to_preset: Write the release (`bert_config_file`, `init_checkpoint`,
            `vocab_file`, `do_lower_case`) as the preset `preset_dir`.
        from_preset: Write the preset `preset_dir` as a release in `output_dir`.
        preset_dir: The keras-hub preset directory (new or empty for `to_preset`).
        bert_config_file, init_checkpoint, vocab_file, do_lower_case: The
            release, as the original scripts' flags name it.
        output_dir: Where the release goes (`from_preset`).

    Returns:
        The `checkpoints.keras_hub.Conversion`.

    Raises:
        ConfigError, VocabError, CheckpointError, OutputPathError: bad input;
            nothing that looks finished is written then.
    """
    if bool(to_preset) == bool(from_preset):
        raise ValueError("give exactly one of to_preset or from_preset")
    from keras_bert_impl.checkpoints.keras_hub import ORIGINAL_DIR
    from keras_bert_impl.checkpoints.keras_hub_variants import preset_to_release, release_to_preset

    start = time.perf_counter()
    if to_preset:
        conversion = release_to_preset(bert_config_file, init_checkpoint, vocab_file, preset_dir, do_lower_case)
        _report_differences(conversion)
        config = conversion.config
        heads = "BertMaskedLM (cls/predictions)" if conversion.masked_lm else "no masked-LM head"
        _log(
            f"wrote preset {conversion.path}: BertBackbone ({config.num_hidden_layers} layers, hidden "
            f"{config.hidden_size}), BertTokenizer (lowercase={do_lower_case}), {heads}"
        )
        if conversion.extra_variables:
            _log(
                f"kept {len(conversion.extra_variables)} variable(s) keras-hub has no place for "
                f"({_examples(conversion.extra_variables)}) in {ORIGINAL_DIR}/, which --from_preset gives back"
            )
    else:
        conversion = preset_to_release(preset_dir, output_dir)
        _report_differences(conversion)
        _log(
            f"wrote {conversion.path} ({'with' if conversion.masked_lm else 'without'} cls/predictions), "
            f"vocab.txt and bert_config.json (from {conversion.config_source}, hidden_act "
            f"{conversion.config.hidden_act}); for its tokenizer's casing use "
            f"--do_lower_case={conversion.do_lower_case}"
        )
    _log(f"done in {time.perf_counter() - start:.1f}s")
    return conversion
