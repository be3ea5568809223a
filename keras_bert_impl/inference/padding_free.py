"""BERT inference that skips padding: per-token work on real tokens only.

In a batch of unequal sentences padded to one length, every per-token
operation of a transformer layer (query/key/value, attention output, the
feed-forward pair, both LayerNorms) is wasted on the padded positions. Here
the real tokens are gathered into one [rows, H] matrix that goes through
every layer; only the attention products, which need the [batch, seq]
layout, see a padded tensor.

The outputs at real positions are those of `BertModel`: a masked key gets
the original's -10000 added to its score, and exp(-10000) is exactly 0 in
float32 and bfloat16, so no real token ever reads a padded one. Padded
positions of `sequence_output` come out as zeros, where the original computes
values nobody should read.

The number of real tokens changes from batch to batch, and XLA compiles one
program per shape. `bucket_size` rounds the row count up to a multiple of
itself (the extra rows are computed and dropped), so a compiled program
serves every batch whose real-token count falls in its bucket: at most
`ceil(batch * seq / bucket_size)` programs for one padded shape.

Under a mixed precision policy each Dense layer casts its float32 kernel to
the compute dtype on every call. `frozen_kernels` does that rounding once,
for functions that serve fixed weights (see `make_padding_free_function`).
"""

import contextlib

import tensorflow as tf

from keras_bert_impl.inference.constant_kernels import reading_as_constants
from keras_bert_impl.layers.attention import attention_mask_adder
from keras_bert_impl.layers.onednn_forms import onednn_forms_set_to
from keras_bert_impl.layers.token_rows import real_token_rows, rows_to_padded
from keras_bert_impl.layers.transformer import TransformerEncoder

_SEQUENCE_INPUTS = ("input_ids", "input_mask", "segment_ids")


def forward_on_rows(bert_model, inputs, token_positions, row_of_position, dense=None):
    """The padding-free forward pass, given the rows from `real_token_rows`.

    Every shape here follows from the inputs' shapes and the row count, so
    XLA can compile it (once per row count).

    Args:
        bert_model: A `BertModel`.
        inputs: Dict of `input_ids`, `input_mask`, `segment_ids` [batch, seq].
        token_positions, row_of_position: From `real_token_rows(input_mask)`.
        dense: Optional `dense(layer, x)` computing the encoder's Dense
            layers in place of `layer(x)` (see `frozen_dense`).

    Returns:
        Dict of `sequence_output` [batch, seq, H] (zeros at padded positions)
        and `pooled_output` [batch, H] (where the model has a pooler).
    """
    input_ids = tf.convert_to_tensor(inputs["input_ids"])
    input_mask = tf.convert_to_tensor(inputs["input_mask"])
    batch_size, seq_length = tf.shape(input_ids)[0], tf.shape(input_ids)[1]
    hidden_size = bert_model.bert_config.hidden_size

    # [batch, seq, H]
    embedded = bert_model.word_embedding(input_ids)
    embedded = bert_model.embedding_postprocessor(embedded, inputs["segment_ids"], training=False)
    # [rows, H]
    hidden = tf.gather(tf.reshape(embedded, [-1, hidden_size]), token_positions)
    # [batch, 1, 1, seq]
    mask_adder = attention_mask_adder(input_mask, bert_model.encoder.compute_dtype)

    for block in bert_model.encoder.blocks:
        # [rows, H]
        hidden, _ = block.call_on_rows(
            hidden, token_positions, row_of_position, (batch_size, seq_length), mask_adder, training=False, dense=dense
        )
    # [batch, seq, H], zeros at padding.
    sequence_output = rows_to_padded(hidden, row_of_position, input_mask)
    outputs = {"sequence_output": sequence_output}
    if bert_model.pooler is not None:  # none in a config without one (DistilBERT)
        outputs["pooled_output"] = bert_model.pooler(sequence_output)
    return outputs


def frozen_kernels(bert_model, held_dtype=None):
    """The encoder's Dense kernels, rounded to the compute dtype once.

    Under a mixed precision policy every Dense layer casts its float32 kernel
    to the compute dtype on each call: all 85 M encoder weights of BERT-base
    per forward pass. XLA on a CPU then widens the bfloat16 operands back to
    float32 for its matrix products (a CPU without bfloat16 units multiplies
    in float32), so a float32 copy of the rounded values feeds those
    products with no conversion at all. The products still see exactly the
    compute dtype's values, and accumulate in float32 as before.

    Args:
        bert_model: A `BertModel`.
        held_dtype: dtype of the copies: the compute dtype or float32 (both
            hold the rounded values exactly). None: float32 when TensorFlow
            sees no GPU, else the compute dtype (a GPU multiplies bfloat16
            natively).

    Returns:
        Dict of each Dense layer's `path` to its kernel [in, out]: the
        kernel rounded to the layer's compute dtype, held as `held_dtype`.

    Example:
    >>> import numpy as np
    >>> from keras_bert_impl.config import BertConfig
    >>> from keras_bert_impl.models.bert_model import BertModel
    >>> model = BertModel(BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
    ...                              num_attention_heads=2, intermediate_size=16), dtype="mixed_bfloat16")
    >>> kernels = frozen_kernels(model, held_dtype="float32")
    >>> len(kernels), kernels["encoder/layer_0/intermediate_dense"].dtype.name
    (6, 'float32')
    """
    if held_dtype is None:
        held_dtype = "float32" if not tf.config.list_logical_devices("GPU") else None
    kernels = {}
    for layer in _encoder_dense_layers(bert_model):
        held = tf.as_dtype(held_dtype or layer.compute_dtype)
        if held not in (tf.float32, tf.as_dtype(layer.compute_dtype)):
            raise ValueError(
                f"held_dtype {held.name} cannot hold {layer.path}'s {layer.compute_dtype} kernel exactly: "
                f"use {layer.compute_dtype} or float32"
            )
        # A read of the variable, not the variable: later assignments
        # leave it as it is.
        rounded = tf.cast(layer.kernel.value.read_value(), layer.compute_dtype)
        kernels[layer.path] = tf.cast(rounded, held)
    return kernels


def frozen_dense(kernels):
    """`dense(layer, x)`: a Dense layer's output computed with its kernel from `kernels`.

    Equals `layer(x)` with the layer's kernel rounded as in `kernels`: the
    product of the compute dtype's values in the held dtype, its result in
    the compute dtype, then the layer's bias and activation as the layer
    applies them.

    Args:
        kernels: From `frozen_kernels`.

    Returns:
        A function of `(layer, x)`, x [rows, in], returning [rows, out].
    """

    def dense(layer, x):
        kernel = kernels[layer.path]
        with tf.name_scope(layer.name):  # as the layer names its ops: profiles stay readable
            # [rows, in] x [in, out] -> [rows, out]
            outputs = tf.cast(tf.matmul(tf.cast(x, kernel.dtype), kernel), layer.compute_dtype)
            if layer.bias is not None:
                outputs = outputs + tf.cast(layer.bias.value, layer.compute_dtype)
            return layer.activation(outputs)

    return dense


def _encoder_dense_layers(bert_model):
    """Every Dense layer of the encoder: query, key, value and the three after attention, per block."""
    for block in bert_model.encoder.blocks:
        attention = block.attention
        yield from (attention.query, attention.key, attention.value,
                    block.attention_output, block.intermediate, block.output_dense)


def _require_last_layer_only(bert_model):
    """Padding-free inference computes the last layer's outputs only: refuses a model asked for more."""
    if bert_model.output_all_encoder_layers or bert_model.output_attention_probs:
        raise ValueError(
            "padding-free inference gives the last layer only; build the BertModel without "
            "output_all_encoder_layers and output_attention_probs"
        )


def padding_free_forward(bert_model, inputs, bucket_size=1):
    """`bert_model(inputs, training=False)` with per-token work on real tokens only.

    Args:
        bert_model: A `BertModel`.
        inputs: Dict of `input_ids`, `input_mask`, `segment_ids` [batch, seq].
        bucket_size: See `real_token_rows`; 1 computes exactly the real tokens.

    Returns:
        Dict of `sequence_output` [batch, seq, H] (zeros at padded positions)
        and `pooled_output` [batch, H].

    Example:
    >>> import numpy as np
    >>> from keras_bert_impl.config import BertConfig
    >>> from keras_bert_impl.models.bert_model import BertModel
    >>> model = BertModel(BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
    ...                              num_attention_heads=2, intermediate_size=16))
    >>> inputs = {"input_ids": np.array([[2, 5, 7, 0]]), "input_mask": np.array([[1, 1, 1, 0]]),
    ...           "segment_ids": np.zeros((1, 4), "int32")}
    >>> fast, full = padding_free_forward(model, inputs), model(inputs)
    >>> bool(np.allclose(fast["sequence_output"][:, :3], full["sequence_output"][:, :3], atol=1e-5))
    True
    """
    _require_last_layer_only(bert_model)
    token_positions, row_of_position = real_token_rows(inputs["input_mask"], bucket_size)
    return forward_on_rows(bert_model, inputs, token_positions, row_of_position)


def make_padding_free_function(bert_model, jit_compile=True, bucket_size=16, freeze_kernels=False,
                               kernels=None, onednn_forms=None):
    """`padding_free_forward` as a `tf.function`, with the layers compiled by XLA.

    The rows are found in a plain graph; the layers run in a function
    compiled with XLA, which TensorFlow compiles once per row count (a
    multiple of `bucket_size`) and then reuses. A larger bucket means fewer
    compilations and more filler rows computed: for batches of 8 x 128,
    `bucket_size=16` allows at most 64 programs and computes half a bucket
    of filler rows per batch on average.

    Args:
        bert_model: A `BertModel` (without `output_all_encoder_layers` or
            `output_attention_probs`: only the last layer comes out).
        jit_compile: Compile the layers with XLA; False runs a plain graph.
        bucket_size: See `real_token_rows`. Only with `jit_compile`: a plain
            graph reuses nothing across row counts, so it computes exactly
            the real tokens.
        freeze_kernels: Take the encoder's Dense kernels now, rounded to
            the compute dtype once (`frozen_kernels`), instead of reading
            and casting them on every call. Under `mixed_bfloat16` on a CPU
            this removes the conversion of every weight from each call
            (docs/BENCHMARKS.md); in float32 it changes nothing but the
            snapshot. The function then computes with the kernels as they
            are now: make a new one after the weights change (training,
            loading a checkpoint). The copies take memory as the kernels
            do (as float32 on a CPU; sizes: docs/BENCHMARKS.md).
        kernels: How `bert_model`'s Dense kernels are held, for a plain
            graph (`forward.PlannedModel.kernels`): a
            `constant_kernels.ConstantKernels` (read as constants of the
            layers' graph, traced with shapes left open after the second new
            one, as each trace holds them again), a
            `packed_kernels.PackedKernels` or an `int8.Int8Kernels`.
        onednn_forms: Trace the LayerNorms and softmax in the forms oneDNN
            runs as one kernel (`layers.onednn_forms`); None: as the model's
            layers are set.

    Returns:
        A function of the inputs dict returning `sequence_output` (zeros at
        padded positions) and `pooled_output`.

    Example:
    >>> import numpy as np
    >>> from keras_bert_impl.config import BertConfig
    >>> from keras_bert_impl.models.bert_model import BertModel
    >>> model = BertModel(BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
    ...                              num_attention_heads=2, intermediate_size=16))
    >>> forward = make_padding_free_function(model, bucket_size=4)
    >>> inputs = {"input_ids": np.array([[2, 5, 7, 0]]), "input_mask": np.array([[1, 1, 1, 0]]),
    ...           "segment_ids": np.zeros((1, 4), "int32")}
    >>> fast, full = forward(inputs), model(inputs)
    >>> bool(np.allclose(fast["pooled_output"], full["pooled_output"], atol=1e-5))
    True
    """
    _require_last_layer_only(bert_model)
    dense = frozen_dense(frozen_kernels(bert_model)) if freeze_kernels else None


    def on_rows(inputs, token_positions, row_of_position):
        forms = contextlib.nullcontext() if onednn_forms is None else onednn_forms_set_to(bert_model, onednn_forms)
        # The constants are made here, in the graph that holds the products.
        with forms, reading_as_constants(kernels):
            return forward_on_rows(bert_model, inputs, token_positions, row_of_position, dense=dense)

    layers = tf.function(on_rows, jit_compile=jit_compile, autograph=False,
                         reduce_retracing=kernels is not None)
    bucket_size = bucket_size if jit_compile else 1

    # Shapes left open after the second new one: each trace of this function
    # is a graph of its own, which inlines `layers` and so holds its constant
    # kernels (and oneDNN's packed copies of them) again, per input shape.
    @tf.function(autograph=False, reduce_retracing=True)
    def forward(inputs):
        # The row count must reach the host before the compiled program is
        # chosen. Found on the host, the few small index ops cost no
        # accelerator launches and no wait on its stream (what finding them
        # on a GPU cost: docs/BENCHMARKS.md).
        with tf.device("/CPU:0"):
            token_positions, row_of_position = real_token_rows(inputs["input_mask"], bucket_size)
        return layers(inputs, token_positions, row_of_position)

    return forward


def drop_unused_padding(inputs):
    """Cuts the padding columns that no row of the batch reaches.

    Requests padded to a fixed `max_seq_length` often all end well before
    it (one short sentence: nearly all of it). Every model here takes any
    sequence length, and its outputs at real positions do not depend on how
    much padding follows, so the columns after the longest row's last real
    token can go before the model runs; at least one column is kept.

    Args:
        inputs: Dict with `input_mask` [batch, seq] (which positions are
            real) and any of `input_ids`, `segment_ids` [batch, seq]; other
            entries pass through as they are. `masked_lm_positions`, if
            given, keep the columns they read. A multiple-choice batch's
            [batch, num_choices, seq] is cut the same way, on its last axis.

    Returns:
        The dict with `input_ids`, `input_mask` and `segment_ids` cut to
        [batch, used_length] ([batch, num_choices, used_length]).

    Example:
    >>> inputs = {"input_ids": [[5, 6, 0, 0], [7, 0, 0, 0]], "input_mask": [[1, 1, 0, 0], [1, 0, 0, 0]]}
    >>> drop_unused_padding(inputs)["input_ids"].numpy().tolist()
    [[5, 6], [7, 0]]
    """
    # One past the last real position of any row (at least 1, also for an empty batch).
    length = used_length(inputs["input_mask"])
    if "masked_lm_positions" in inputs:
        # A position read past the cut (the original reads padded positions
        # too) keeps its column: cut, it would read another row's token.
        positions = tf.reshape(tf.cast(inputs["masked_lm_positions"], length.dtype), [-1])
        last = tf.reduce_max(tf.concat([positions, [-1]], axis=0))  # -1: no positions
        width = tf.shape(tf.convert_to_tensor(inputs["input_mask"]), out_type=length.dtype)[-1]
        length = tf.minimum(tf.maximum(length, last + 1), width)
    return {
        name: tf.convert_to_tensor(value)[..., :length] if name in _SEQUENCE_INPUTS else value
        for name, value in inputs.items()
    }


def used_length(input_mask, bucket_size=1):
    """One past the last real position of any row, rounded up to a multiple of `bucket_size`.

    Never more than the padded width, and at least 1 (also for a batch
    with no real token).

    Args:
        input_mask: [batch, seq] ([batch, num_choices, seq]) 1 for real
            tokens, 0 for padding.
        bucket_size: Round up to a multiple of this, so that a compiler sees
            at most `ceil(seq / bucket_size)` shapes.

    Returns:
        int32 scalar.

    Example:
    >>> int(used_length([[1, 1, 1, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0]], bucket_size=2))
    4
    """
    input_mask = tf.convert_to_tensor(input_mask)
    seq_length = tf.shape(input_mask)[-1]
    # Each position's count from 1, broadcast over every axis but the last.
    last = tf.reduce_max(tf.where(input_mask > 0, tf.range(1, seq_length + 1), 1))
    rounded = (tf.maximum(last, 1) + bucket_size - 1) // bucket_size * bucket_size
    return tf.minimum(rounded, tf.maximum(seq_length, 1))


def set_real_tokens_only(model, enabled=True):
    """Turns `real_tokens_only` on or off in every `TransformerEncoder` of `model`.

    With it on, training and evaluation compute every per-token operation
    on the real tokens only; the results at real positions, and so every
    loss over real tokens (classification from [CLS], tagging weighted by
    the labelled pieces), equal the padded computation's within float
    rounding. Set it before `compile`/`fit`: Keras traces its functions on
    first use.

    Args:
        model: A Keras model holding `BertModel`s (or a `TransformerEncoder`).
        enabled: On or off.

    Returns:
        The number of encoders changed.

    Example:
    >>> from keras_bert_impl.config import BertConfig
    >>> from keras_bert_impl.models.classifier import BertClassifier
    >>> model = BertClassifier(BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
    ...                                   num_attention_heads=2, intermediate_size=16), num_labels=2)
    >>> set_real_tokens_only(model)
    1
    """
    encoders = _encoders(model)
    for encoder in encoders:
        encoder.real_tokens_only = enabled
    return len(encoders)


def _encoders(model):
    """Every `TransformerEncoder` in `model` (itself included)."""
    layers = [model] + list(model._flatten_layers(include_self=False, recursive=True))
    return [layer for layer in layers if isinstance(layer, TransformerEncoder)]


@contextlib.contextmanager
def real_tokens_only_set_to(model, enabled):
    """Within the block, every `TransformerEncoder` of `model` has `real_tokens_only` = `enabled`.

    Each encoder gets its own setting back afterwards. For tracing a graph
    on the real-token path (`call_skipping_padding`) or on every position
    without changing the model.

    Args:
        model: As for `set_real_tokens_only`.
        enabled: On or off within the block.
    """
    encoders = _encoders(model)
    before = [encoder.real_tokens_only for encoder in encoders]
    for encoder in encoders:
        encoder.real_tokens_only = enabled
    try:
        yield
    finally:
        for encoder, setting in zip(encoders, before):
            encoder.real_tokens_only = setting


def call_skipping_padding(model, inputs, kernels=None):
    """`model(inputs, training=False)` with the per-token work on real tokens only, as one graph.

    Every batch takes the real-token path (`real_tokens_only`), with padding
    or without: a single request cut to its length pays its row gathers,
    which measured nothing there (7.01 against 7.03 ms for one text of 20
    tokens, MiniLM's shape, docs/BENCHMARKS.md), while a graph holding a
    second, padded path (a `tf.cond`) held every constant kernel twice. The
    outputs at real positions are the model's within float rounding; padded
    positions of a sequence output are zeros. The model's own setting is
    left as it was.

    Args:
        model: A Keras model holding `BertModel`s, called with `inputs`.
        inputs: Its inputs dict, with an `input_mask` [batch, seq].
        kernels: How `model`'s Dense kernels are held (`forward.PlannedModel.kernels`):
            None (its variables), constants, packed or int8 kernels.

    Returns:
        The model's outputs.

    Example:
    >>> from keras_bert_impl.config import BertConfig
    >>> from keras_bert_impl.models.bert_model import BertModel
    >>> model = BertModel(BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
    ...                              num_attention_heads=2, intermediate_size=16))
    >>> inputs = {"input_ids": [[5, 6, 7], [8, 9, 0]], "input_mask": [[1, 1, 1], [1, 1, 0]],
    ...           "segment_ids": [[0, 0, 0], [0, 0, 0]]}
    >>> inputs = {name: tf.constant(value) for name, value in inputs.items()}
    >>> outputs = tf.function(lambda x: call_skipping_padding(model, x))(inputs)
    >>> float(tf.reduce_max(tf.abs(outputs["sequence_output"][1, 2])))  # a padded position
    0.0
    """

    with real_tokens_only_set_to(model, True), reading_as_constants(kernels):
        return model(inputs, training=False)
