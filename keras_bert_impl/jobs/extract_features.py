"""Per-token hidden states of chosen encoder layers as JSON lines, as the
original extract_features.py writes them (`tools/extract_features.py`,
console `bert-extract-features`).

One JSON object per input line (`text_a` or `text_a ||| text_b`):

    {"linex_index": 0, "features": [{"token": "[CLS]", "layers": [
        {"index": -1, "values": [0.123456, ...]}, ...]}, ...]}

Example:
>>> parse_layers("-1,-2", num_layers=4)
[-1, -2]
>>> parse_layers("-1,7", num_layers=4)
Traceback (most recent call last):
...
keras_bert_impl.cli.FlagError: --layers '-1,7': indexes must lie in [-4, 3] for a 4-layer model
"""

import collections
import json
import sys

from keras_bert_impl.cli import FlagError


def parse_layers(text, num_layers):
    """The `--layers` comma list as integers, each a valid index of `num_layers`.

    Raises:
        FlagError: not integers, none, or an index out of range.
    """
    try:
        layers = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise FlagError(f"--layers must be a comma list of integers, got {text!r}") from None
    bad = [i for i in layers if not -num_layers <= i < num_layers]
    if not layers or bad:
        raise FlagError(f"--layers {text!r}: indexes must lie in [{-num_layers}, {num_layers - 1}] for a {num_layers}-layer model")
    return layers


def feature_record(features, layer_outputs, layer_indexes):
    """The original's JSON object for one example.

    Args:
        features: `InputFeatures` of the example.
        layer_outputs: One [seq_length, H] array per entry of `layer_indexes`.
        layer_indexes: As given by `--layers`.
    """
    tokens = []
    for position, token in enumerate(features.tokens):
        layers = [
            collections.OrderedDict(index=index, values=[round(float(x), 6) for x in output[position]])
            for index, output in zip(layer_indexes, layer_outputs)
        ]
        tokens.append(collections.OrderedDict(token=token, layers=layers))
    return collections.OrderedDict(linex_index=features.unique_id, features=tokens)


def extract_features(
    *,
    input_file,
    output_file,
    bert_config_file,
    init_checkpoint,
    vocab_file,
    layers="-1,-2,-3,-4",
    max_seq_length=128,
    do_lower_case=True,
    batch_size=32,
    precision="float32",
):
    """Writes `output_file` (atomically), one JSON line per line of `input_file`.

    `precision` "float32" (the default) gives the original's values;
    "bfloat16" computes in bfloat16 with the weights held rounded
    (`inference.precision`): values within bfloat16 rounding of those, faster
    only on a CPU with Intel AMX or AMD's AVX-512 bf16, or a GPU;
    "auto" picks by the CPU (`inference.plan.default_precision`). How the
    model runs is `inference.plan.features_plan`.

    Returns:
        The number of examples written.

    Raises:
        ConfigError, FlagError, InputFileError, VocabError, CheckpointError:
            bad flags or files, before anything is written.
    """
    import numpy as np
    import tensorflow as tf

    from keras_bert_impl import filesystem
    from keras_bert_impl.checkpoints.original import load_original_checkpoint
    from keras_bert_impl.config import BertConfig
    from keras_bert_impl.data.text_pairs import convert_example_to_features, read_text_pair_examples
    from keras_bert_impl.io import atomic_output, check_max_seq_length
    from keras_bert_impl.inference.forward import apply_plan
    from keras_bert_impl.inference.function import AnyShapeFunction
    from keras_bert_impl.inference.padding_free import set_real_tokens_only
    from keras_bert_impl.inference.plan import features_plan
    from keras_bert_impl.models.bert_model import BertModel
    from keras_bert_impl.tokenization import (
        FullTokenizer,
        check_special_tokens,
        check_vocab_fits,
        validate_case_matches_checkpoint,
    )

    try:
        plan = features_plan(precision)
    except ValueError as error:
        raise FlagError(f"--precision: {error}") from None
    config = BertConfig.from_json_file(bert_config_file)
    check_max_seq_length(max_seq_length, config, bert_config_file)
    if max_seq_length < 3:
        raise FlagError("--max_seq_length must be at least 3")
    layer_indexes = parse_layers(layers, config.num_hidden_layers)
    validate_case_matches_checkpoint(do_lower_case, init_checkpoint)
    tokenizer = FullTokenizer(vocab_file, do_lower_case=do_lower_case)
    check_special_tokens(tokenizer.vocab, vocab_file)
    check_vocab_fits(tokenizer.vocab, vocab_file, config.vocab_size, bert_config_file)
    examples = read_text_pair_examples(input_file)
    features = [convert_example_to_features(e, tokenizer, max_seq_length) for e in examples]

    model = BertModel(config, output_all_encoder_layers=True)
    load_original_checkpoint(model, init_checkpoint)
    # The weights held in bfloat16 where the plan says so; on a CPU oneDNN
    # packs the Dense kernels once (inference.packed_kernels, or
    # inference.constant_kernels where its products do not run the graph).
    planned = apply_plan(model, plan, rebuild=lambda dtype: BertModel(config, output_all_encoder_layers=True,
                                                                      dtype=dtype))
    model = planned.model
    # On a CPU the per-token work of the padding is skipped: the records
    # hold real tokens only, whose values are the same within rounding.
    set_real_tokens_only(model, plan.padding_free)

    # One trace for every batch, the last one's shape too: each trace holds
    # the constants again.
    def outputs_of(inputs):
        with planned.tracing():
            return model(inputs, training=False)["encoder_outputs"]

    encoder_outputs = AnyShapeFunction(tf.function(outputs_of, autograph=False))

    filesystem.makedirs_for(output_file)
    with atomic_output(output_file) as partial, filesystem.open_file(partial, "w") as writer:
        for start in range(0, len(features), batch_size):
            batch = features[start : start + batch_size]
            inputs = {
                key: np.array([getattr(f, key) for f in batch], "int32")
                for key in ("input_ids", "input_mask", "segment_ids")
            }
            all_layers = [layer.numpy() for layer in encoder_outputs(inputs)]
            for row, feature in enumerate(batch):
                outputs = [np.asarray(all_layers[i][row], "float32") for i in layer_indexes]
                writer.write(json.dumps(feature_record(feature, outputs, layer_indexes)) + "\n")
    print(f"extract_features: wrote {len(features)} examples to {output_file}", file=sys.stderr)
    return len(features)
