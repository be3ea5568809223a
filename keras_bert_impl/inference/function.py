"""A `BertModel`'s forward pass for inference as a `tf.function`, built as an `InferencePlan` says."""

import tensorflow as tf

from keras_bert_impl.inference.constant_kernels import ConstantKernels, reading_as_constants
from keras_bert_impl.inference.padding_free import make_padding_free_function
from keras_bert_impl.inference.precision import copy_weights, inference_dtype_policy
from keras_bert_impl.layers.onednn_forms import onednn_forms_set_to


def snapshot(bert_model, dtype):
    """A copy of `bert_model` built with `dtype` that holds its weights as they are now.

    Args:
        bert_model: A `BertModel` (its type is called as `BertModel` is).
        dtype: The copy's dtype policy.
    """
    copy = type(bert_model)(
        bert_model.bert_config,
        output_all_encoder_layers=bert_model.output_all_encoder_layers,
        output_attention_probs=bert_model.output_attention_probs,
        dtype=dtype,
        name=bert_model.name,
    )
    copy_weights(bert_model, copy)
    return copy


def make_inference_function(bert_model, plan):
    """`bert_model(inputs, training=False)` as a `tf.function`, computed as `plan` says.

    Args:
        bert_model: A `BertModel`.
        plan: An `InferencePlan` for it (`plan.function_plan`).

    Returns:
        A function of the inputs dict returning the outputs dict; behind
        `with_id_checks` where XLA compiles it.
    """
    model = bert_model
    if plan.held_weights:
        # A copy: the function reads none of this model's weights later.
        model = snapshot(bert_model, inference_dtype_policy(bert_model, plan.precision))
    elif plan.frozen_kernels:
        # The kernels are held by `make_padding_free_function`; the rest is this copy's.
        model = snapshot(bert_model, bert_model.built_with_dtype)
    constants = ConstantKernels(model) if plan.constant_kernels else None
    if plan.padding_free:
        function = make_padding_free_function(
            model, jit_compile=plan.jit_compile, bucket_size=plan.bucket_size, freeze_kernels=plan.frozen_kernels,
            constant_kernels=constants, onednn_forms=plan.onednn_forms,
        )
    else:

        def call(inputs):
            with onednn_forms_set_to(model, plan.onednn_forms), reading_as_constants(constants):
                return model(inputs, training=False)

        # No autograph: nothing here needs it, and errors raised while tracing
        # (SequenceLengthError) then reach the caller as they are. Shapes are
        # left open after the second new one: a trace per request length
        # would grow without bound (and hold constant kernels again each time).
        function = tf.function(call, jit_compile=plan.jit_compile, autograph=False, reduce_retracing=True)
    return with_id_checks(function, bert_model.bert_config) if plan.jit_compile else function


def with_id_checks(function, config):
    """`function` of an inputs dict behind the id checks XLA leaves out.

    XLA drops `tf.debugging` assertions and clamps a gather's indices, so a
    compiled forward pass would read the wrong rows of the embedding tables
    for an id outside them; these checks run first, in a plain graph.

    Args:
        function: A function of `{"input_ids", "input_mask", "segment_ids"}`.
        config: The `BertConfig` whose `vocab_size` and `type_vocab_size` bound the ids.

    Example:
    >>> from keras_bert_impl.config import BertConfig
    >>> config = BertConfig(vocab_size=10, hidden_size=8, num_hidden_layers=1,
    ...                     num_attention_heads=2, intermediate_size=16)
    >>> checked = with_id_checks(lambda inputs: inputs["input_ids"] * 2, config)
    >>> checked({"input_ids": tf.constant([[3]]), "segment_ids": tf.constant([[0]])}).numpy().tolist()
    [[6]]
    """
    bounds = {"input_ids": ("vocab_size", config.vocab_size), "segment_ids": ("type_vocab_size", config.type_vocab_size)}

    @tf.function(autograph=False)
    def checked(inputs):
        checks = []
        for key, (name, size) in bounds.items():
            if key in inputs:
                ids = tf.cast(inputs[key], tf.int32)
                checks += [
                    tf.debugging.assert_non_negative(ids, message=f"{key} holds a negative id"),
                    tf.debugging.assert_less(ids, size, message=f"{key} holds an id >= {name} {size}"),
                ]
        with tf.control_dependencies(checks):
            inputs = {key: tf.identity(value) for key, value in inputs.items()}
        return function(inputs)

    return checked
