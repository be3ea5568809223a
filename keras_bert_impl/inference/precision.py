"""A model rebuilt to compute in float32 or bfloat16, with its weights as inference wants them.

Under Keras's `mixed_bfloat16` policy a layer keeps float32 variables and
rounds each to bfloat16 whenever it reads it: right for training (the
updates accumulate in float32), wasted work for inference, where every call
converts the whole model again (BERT-base: 110 M weights, the word embedding
table included). For inference the weights are held already rounded: every
layer but the LayerNorms (which compute in float32 from float32 weights
under mixed_bfloat16) gets the `bfloat16` policy, through a Keras
`DTypePolicyMap` keyed by layer path. The same values reach the same ops, so
the outputs are bit-identical to the mixed_bfloat16 model's, in half the
bytes (`tests/test_serving_precision.py`; speed: docs/BENCHMARKS.md).

Example:
>>> from keras_bert_impl.config import BertConfig
>>> from keras_bert_impl.models.bert_model import BertModel
>>> config = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
...                     num_attention_heads=2, intermediate_size=16)
>>> model = BertModel(config)
>>> held = BertModel(config, dtype=inference_dtype_policy(model, "bfloat16"))
>>> copy_weights(model, held)
>>> model_precision(held), holds_weights_for(held, "bfloat16"), held.encoder.compute_dtype
('bfloat16', True, 'bfloat16')
>>> sorted({v.dtype for v in held.weights})
['bfloat16', 'float32']
"""

import keras
import tensorflow as tf


def model_precision(model):
    """"float32" or "bfloat16" (or "float16"): what `model`'s encoder computes in.

    A model built with dtype "mixed_bfloat16" keeps float32 variables and
    computes in bfloat16; its word embedding layer says which.

    Args:
        model: A `BertModel`, or a task model that holds one as `model.bert`.

    Returns:
        The compute dtype of its `word_embedding` layer, as a string.
    """
    return getattr(model, "bert", model).word_embedding.compute_dtype


def held_weight_layers(model):
    """The layers of `model` (any depth) that hold their own weights rounded to the compute dtype for inference.

    Every layer that owns floating-point variables and reads them in its
    compute dtype: all but the LayerNorms.

    Args:
        model: A Keras model (a `BertModel` or a task model).

    Returns:
        A list of layers of `model`, nested ones included, each one that
        creates a floating-point variable itself, LayerNorms left out.
    """
    owners = {variable.path.rsplit("/", 1)[0] for variable in model.weights if "float" in variable.dtype}
    return [layer for layer in model._flatten_layers()
            if layer.path in owners and not isinstance(layer, keras.layers.LayerNormalization)]


def inference_dtype_policy(model, precision):
    """The dtype policy to build `model` again with, for inference in `precision`.

    Args:
        model: A model of the architecture to build; its layers' paths name
            the layers of the one built with the policy.
        precision: "float32", "bfloat16" (or "float16").

    Returns:
        "float32", or else a `keras.dtype_policies.DTypePolicyMap`:
        "mixed_<precision>" by default, "<precision>" (weights held rounded)
        for each of `held_weight_layers(model)`.
    """
    if precision == "float32":
        return "float32"
    policy = f"mixed_{precision}"
    held = keras.DTypePolicy(precision)
    return keras.dtype_policies.DTypePolicyMap(
        default_policy=policy, policy_map={layer.path: held for layer in held_weight_layers(model)})


def holds_weights_for(model, precision):
    """Whether `model` computes in `precision` with its weights held as `inference_dtype_policy` holds them.

    Args:
        model: A model that `model_precision` reads.
        precision: "float32", "bfloat16" (or "float16").

    Returns:
        True when `model_precision(model)` is `precision` and, unless that is
        "float32", every one of `held_weight_layers(model)` keeps its
        variables in `precision`; a mixed_bfloat16 model (float32 variables)
        gives False for "bfloat16".
    """
    if model_precision(model) != precision:
        return False
    return precision == "float32" or all(
        layer.variable_dtype == precision for layer in held_weight_layers(model))


def same_variable_layout(source, target):
    """Whether the two models have the same variables: paths and shapes, one to one.

    Args:
        source, target: Keras models (or layers); their variables' dtypes
            may differ.

    Returns:
        True when the sorted `(path, shape)` pairs of their `weights` are
        equal.
    """
    layout = lambda model: sorted((v.path, tuple(v.shape)) for v in model.weights)  # noqa: E731
    return layout(source) == layout(target)


def copy_weights(source, target):
    """Assigns each of `target`'s variables the value of `source`'s at the same path.

    Values are cast to the target's dtype (float32 to bfloat16 rounds to
    nearest even, as a mixed_bfloat16 layer rounds on each read).

    Args:
        source: The model to read the values from.
        target: The model whose variables are assigned, in place.

    Raises:
        ValueError: the two models' variables differ (see `same_variable_layout`).
    """
    if not same_variable_layout(source, target):
        raise ValueError(f"{target.name!r} does not have {source.name!r}'s variables (paths and shapes)")
    values = {variable.path: variable for variable in source.weights}
    for variable in target.weights:
        variable.assign(tf.cast(values[variable.path].value, variable.dtype))


def compute_precision(precision):
    """What a model exported in `precision` computes in outside its products: "int8" computes in float32.

    Example:
    >>> compute_precision("int8"), compute_precision("bfloat16")
    ('float32', 'bfloat16')
    """
    return "float32" if precision == "int8" else precision
