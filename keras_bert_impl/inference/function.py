"""A `BertModel`'s forward pass for inference as a `tf.function`, built as an `InferencePlan` says."""

import tensorflow as tf

from keras_bert_impl.inference.calling_thread import SessionFunction
from keras_bert_impl.inference.forward import apply_plan
from keras_bert_impl.inference.int8 import calibrate
from keras_bert_impl.inference.padding_free import make_padding_free_function
from keras_bert_impl.layers.graph_checks import check, ids_in_range


def rebuilt(bert_model, dtype):
    """A new `BertModel` of `bert_model`'s layout, built with `dtype` (`apply_plan` copies the weights into it).

    Args:
        bert_model: A `BertModel` (its type is called as `BertModel` is).
        dtype: The copy's dtype policy.
    """
    return type(bert_model)(
        bert_model.bert_config,
        output_all_encoder_layers=bert_model.output_all_encoder_layers,
        output_attention_probs=bert_model.output_attention_probs,
        dtype=dtype,
        name=bert_model.name,
    )


def make_inference_function(bert_model, plan, calibration_inputs=None):
    """`bert_model(inputs, training=False)` as a `tf.function`, computed as `plan` says.

    Args:
        bert_model: A `BertModel`.
        plan: An `InferencePlan` for it (`plan.function_plan`).
        calibration_inputs: For an int8 plan: batches of inputs on which the
            int8 products' input ranges are fixed and smoothed
            (`int8.calibrate`, its defaults); None: ranges per batch.

    Returns:
        A function of the inputs dict returning the outputs dict; behind
        `with_id_checks` where XLA compiles it; a `SessionFunction`
        (NumPy outputs) where the plan runs it in the calling thread.
    """
    calibration = None
    if calibration_inputs is not None:
        calibration = lambda model: calibrate(model, calibration_inputs)  # noqa: E731  (on the copy that runs)
    # Held weights: a copy, so that the function reads none of this model's weights later.
    planned = apply_plan(bert_model, plan, rebuild=lambda dtype: rebuilt(bert_model, dtype), snapshot=True,
                         calibration=calibration)
    model = planned.model
    if plan.padding_free:
        function = make_padding_free_function(
            model, jit_compile=plan.jit_compile, bucket_size=plan.bucket_size, freeze_kernels=plan.frozen_kernels,
            kernels=planned.kernels, onednn_forms=plan.onednn_forms,
        )
    else:

        def call(inputs):
            with planned.tracing():
                return model(inputs, training=False)

        # No autograph: nothing here needs it, and errors raised while tracing
        # then reach the caller as they are. Traced once, with every dimension
        # open (`AnyShapeFunction` below): a trace per request shape would
        # grow without bound (and hold constant kernels again each time).
        function = tf.function(call, jit_compile=plan.jit_compile, autograph=False, reduce_retracing=True)
    if plan.calling_thread:
        # Traced once here, every dimension open, and handed to a Session with the weights as they are now.
        spec = {name: tf.TensorSpec([None, None], tensor.dtype) for name, tensor in bert_model.input.items()}
        return SessionFunction(function, spec)
    if not plan.jit_compile:
        return AnyShapeFunction(function)
    max_length = bert_model.bert_config.max_sequence_length
    if not plan.padding_free and plan.bucket_size > 1:
        function = with_length_buckets(function, plan.bucket_size, max_length)
    # XLA compiles per shape (per bucket) whatever the trace.
    return AnyShapeFunction(with_id_checks(function, bert_model.bert_config, max_length))


class AnyShapeFunction:
    """A `tf.function` of a dict of tensors, traced once per input structure, for inputs of any shape.

    The first call with new input names, dtypes or ranks traces the function
    with every dimension left open, as an export's signatures are; later
    calls of any batch size and length run that one trace. With
    `reduce_retracing` alone a function traces up to three graphs (the first
    shapes, then the length left open, then the batch size too), and a graph
    that holds the Dense kernels as constants holds them again in each: a
    float32 BERT-base function grew to 12.3 GB over three batch shapes,
    against 6.0 GB traced once (docs/BENCHMARKS.md, "Memory that holds").
    A function compiled with XLA still compiles a program per input shape.

    Anything else of the `tf.function` (`get_concrete_function`,
    `experimental_get_tracing_count`, ...) is reached through this object.

    Args:
        function: A `tf.function` of one dict of arrays or tensors.

    Example:
    >>> total = AnyShapeFunction(tf.function(lambda inputs: tf.reduce_sum(inputs["x"])))
    >>> [int(total({"x": tf.ones(shape, tf.int32)})) for shape in ((1, 3), (2, 5), (4, 1))]
    [3, 10, 4]
    >>> total.experimental_get_tracing_count()
    1
    """

    def __init__(self, function):
        self._function = function
        self._structures = set()

    def __call__(self, inputs):
        if isinstance(inputs, dict) and all(hasattr(value, "shape") and hasattr(value, "dtype")
                                            for value in inputs.values()):
            # Cheap on every call (a request's hot path); the specs are built once per structure.
            structure = tuple((name, str(value.dtype), len(value.shape)) for name, value in inputs.items())
            if structure not in self._structures:
                # Later calls of this structure dispatch to the most general trace: this one.
                self._function.get_concrete_function(
                    {name: tf.TensorSpec([None] * len(value.shape), tf.as_dtype(value.dtype))
                     for name, value in inputs.items()})
                self._structures.add(structure)
        return self._function(inputs)

    def __getattr__(self, name):
        if name.startswith("_"):  # not set yet (a copy being made): no lookup through itself
            raise AttributeError(name)
        return getattr(self._function, name)


def with_id_checks(function, config, max_length=None):
    """`function` of an inputs dict behind the id and length checks XLA leaves out.

    XLA drops `tf.debugging` assertions and clamps a gather's indices, so a
    compiled forward pass would read the wrong rows of the embedding tables
    for an id outside them; these checks run first, in a plain graph. The
    checks are traced with shapes left open after the second new one, so a
    sequence too long is caught here at run time.

    Args:
        function: A function of `{"input_ids", "input_mask", "segment_ids"}`.
        config: The `BertConfig` whose `vocab_size` and `type_vocab_size` bound the ids.
        max_length: The longest sequence the position table takes; None: not checked.

    Example:
    >>> from keras_bert_impl.config import BertConfig
    >>> config = BertConfig(vocab_size=10, hidden_size=8, num_hidden_layers=1,
    ...                     num_attention_heads=2, intermediate_size=16)
    >>> checked = with_id_checks(lambda inputs: inputs["input_ids"] * 2, config)
    >>> checked({"input_ids": tf.constant([[3]]), "segment_ids": tf.constant([[0]])}).numpy().tolist()
    [[6]]
    """
    bounds = {"input_ids": ("vocab_size", config.vocab_size), "segment_ids": ("type_vocab_size", config.type_vocab_size)}

    @tf.function(autograph=False, reduce_retracing=True)
    def checked(inputs):
        checks = []
        if max_length is not None:
            length = tf.shape(inputs["input_ids"])[1]
            checks.append(check(length <= max_length, f"sequence length exceeds max_position_embeddings {max_length}",
                                "sequence length:", length))
        for key, (name, size) in bounds.items():
            if key in inputs:
                checks += ids_in_range(tf.cast(inputs[key], tf.int32), size, f"{key} holds a negative id",
                                       f"{key} holds an id >= {name} {size}")
        with tf.control_dependencies(checks):
            inputs = {key: tf.identity(value) for key, value in inputs.items()}
        return function(inputs)

    return checked


def with_length_buckets(function, bucket_size, max_length):
    """`function` on inputs padded to a multiple of `bucket_size` columns, its outputs cut back.

    XLA compiles one program per input shape; padded to a bucket, requests
    of any length meet at most `max_length / bucket_size` programs per batch
    size. The added columns are masked (`input_mask` 0), and a masked key
    adds exactly nothing to a real token's attention (exp(-10000) is 0), so
    the real positions come out as without them.

    Args:
        function: A function of `{"input_ids", "input_mask", "segment_ids"}`
            [batch, seq] returning `BertModel`'s outputs dict.
        bucket_size: Columns are padded up to a multiple of this...
        max_length: ... or to this, the longest the position table takes,
            where that is less (a longer input is left as it is, for the
            model to refuse).

    Example:
    >>> def forward(inputs):
    ...     return {"sequence_output": tf.cast(inputs["input_ids"], tf.float32)[:, :, None] * tf.ones([1, 1, 2]),
    ...             "pooled_output": tf.cast(tf.shape(inputs["input_ids"])[1:], tf.float32)}
    >>> bucketed = with_length_buckets(forward, 4, max_length=512)
    >>> outputs = bucketed({"input_ids": tf.constant([[5, 6, 7]]), "input_mask": tf.ones([1, 3], tf.int32)})
    >>> outputs["sequence_output"].shape.as_list(), outputs["pooled_output"].numpy().tolist()
    ([1, 3, 2], [4.0])
    """

    def padded(inputs):
        # [batch, seq] -> [batch, bucketed seq], the new columns masked.
        length = tf.shape(inputs["input_ids"])[1]
        extra = tf.maximum(tf.minimum((-length) % bucket_size, max_length - length), 0)
        return {key: tf.pad(value, [[0, 0], [0, extra]]) for key, value in inputs.items()}, length

    def cut(outputs, length):
        outputs = dict(outputs)
        # [batch, bucketed seq, H] -> [batch, seq, H]
        for key in ("sequence_output",):
            outputs[key] = outputs[key][:, :length]
        if "encoder_outputs" in outputs:
            outputs["encoder_outputs"] = [layer[:, :length] for layer in outputs["encoder_outputs"]]
        if "attention_probs" in outputs:
            # [batch, heads, bucketed seq, bucketed seq] -> [batch, heads, seq, seq]
            outputs["attention_probs"] = [probs[:, :, :length, :length] for probs in outputs["attention_probs"]]
        return outputs

    @tf.function(autograph=False, reduce_retracing=True)
    def bucketed(inputs):
        inputs, length = padded(inputs)
        return cut(function(inputs), length)

    return bucketed
