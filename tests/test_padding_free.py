"""Padding-free inference equals BertModel at every real position."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.inference.padding_free import (
    drop_unused_padding,
    forward_on_rows,
    frozen_dense,
    frozen_kernels,
    make_padding_free_function,
    padding_free_forward,
    real_token_rows,
)
from keras_bert_impl.models.bert_model import BertModel
from tests.helpers import random_inputs, randomize, tiny_config, weight_casts_but_layer_norms


def _assert_equal_at_real_positions(fast, full, input_mask, atol):
    mask = np.asarray(input_mask).astype(bool)
    sequence = np.asarray(fast["sequence_output"], np.float32)
    np.testing.assert_allclose(sequence[mask], np.asarray(full["sequence_output"], np.float32)[mask], atol=atol)
    assert not sequence[~mask].any()
    np.testing.assert_allclose(np.asarray(fast["pooled_output"], np.float32),
                               np.asarray(full["pooled_output"], np.float32), atol=atol)


def _model_and_inputs(dtype=None):
    config = tiny_config(vocab_size=50, num_hidden_layers=2)
    model = BertModel(config, dtype=dtype)
    randomize(model, seed=4, scale=0.2)
    inputs = random_inputs(config, batch=4, seq=12, seed=9, pad=True)
    inputs["input_mask"][3, 1:] = 0  # a row with only [CLS]
    return model, inputs


@pytest.mark.parametrize("dtype, atol", [(None, 2e-5), ("mixed_bfloat16", 3e-2)])
def test_real_positions_equal_the_full_model(dtype, atol):
    model, inputs = _model_and_inputs(dtype)
    _assert_equal_at_real_positions(padding_free_forward(model, inputs), model(inputs), inputs["input_mask"], atol)


@pytest.fixture(scope="module")
def compiled_full():
    """`get(dtype)`: `(model, a copy of its inputs, its full forward compiled with XLA)`, the model and the
    function made once per dtype for the module (the tests leave the model unchanged)."""
    made = {}

    def get(dtype):
        if dtype not in made:
            model, inputs = _model_and_inputs(dtype)
            made[dtype] = model, inputs, model.make_inference_function(jit_compile=True)
        model, inputs, full = made[dtype]
        return model, {name: value.copy() for name, value in inputs.items()}, full
    return get


@pytest.mark.parametrize("dtype, atol", [(None, 2e-5), ("mixed_bfloat16", 1e-2)])
def test_compiled_buckets_equal_the_compiled_full_model(compiled_full, dtype, atol):
    # Both sides compiled with XLA: bfloat16 rounds where XLA's fusions put
    # the casts, so the reference is the full model under the same compiler.
    model, inputs, full = compiled_full(dtype)
    forward = model.make_inference_function(jit_compile=True, padding_free=True, bucket_size=5)
    _assert_equal_at_real_positions(forward(inputs), full(inputs), inputs["input_mask"], atol)
    # A second batch with another real-token count, through the same function.
    inputs["input_mask"][0, 2:] = 0
    _assert_equal_at_real_positions(forward(inputs), full(inputs), inputs["input_mask"], atol)


def test_a_mask_with_holes_and_an_empty_row():
    model, inputs = _model_and_inputs()
    inputs["input_mask"][0, [2, 5]] = 0  # padding in the middle of a row
    inputs["input_mask"][1] = 0  # no real token at all
    full = model(inputs)
    fast = make_padding_free_function(model, bucket_size=8)(inputs)
    real = inputs["input_mask"].astype(bool)
    np.testing.assert_allclose(np.asarray(fast["sequence_output"])[real],
                               np.asarray(full["sequence_output"])[real], atol=2e-5)
    assert not np.asarray(fast["sequence_output"])[~real].any()


def test_the_rows_are_found_on_the_host_and_the_layers_are_not():
    # The row count must reach the host before the compiled program is
    # chosen: the index ops that find it are pinned to the CPU, and the
    # layers are left wherever TensorFlow places them (the GPU, if any).
    model, inputs = _model_and_inputs()
    graph = make_padding_free_function(model, bucket_size=4).get_concrete_function(inputs).graph
    operations = graph.get_operations()
    where = [op for op in operations if op.type == "Where"]
    calls = [op for op in operations if op.type in ("PartitionedCall", "StatefulPartitionedCall")]
    assert where and all("CPU" in op.device for op in where)
    assert calls and not any(op.device for op in calls)


def test_rows_are_the_real_tokens_rounded_up_to_the_bucket():
    mask = np.array([[1, 0, 1, 1], [0, 0, 0, 0], [1, 1, 0, 0]])
    positions, rows = real_token_rows(mask, bucket_size=4)
    # Five real tokens at flat positions 0, 2, 3, 8, 9; three filler rows at position 0.
    assert positions.numpy().tolist() == [0, 2, 3, 8, 9, 0, 0, 0]
    assert rows.numpy().tolist() == [0, 0, 1, 2, 0, 0, 0, 0, 3, 4, 0, 0]
    assert real_token_rows(mask, bucket_size=1)[0].shape == (5,)
    # An all-padding batch still has one bucket of rows.
    assert real_token_rows(np.zeros((2, 3)), bucket_size=4)[0].numpy().tolist() == [0, 0, 0, 0]


def test_all_layer_outputs_are_refused():
    config = tiny_config()
    with pytest.raises(ValueError, match="last layer only"):
        BertModel(config, output_all_encoder_layers=True).make_inference_function(padding_free=True)


def test_all_layer_outputs_are_refused_eagerly_too():
    model = BertModel(tiny_config(), output_attention_probs=True)
    with pytest.raises(ValueError, match="last layer only"):
        padding_free_forward(model, random_inputs(tiny_config(), batch=2, seq=4, seed=0, pad=True))


def test_unused_padding_columns_change_no_real_output():
    model, inputs = _model_and_inputs()
    inputs["input_mask"][:, 9:] = 0  # no row reaches past position 8
    inputs["input_mask"][2, 4] = 0  # a hole inside the kept columns stays
    masked_lm_positions = np.array([[1], [2], [3], [0]])
    trimmed = drop_unused_padding({**inputs, "masked_lm_positions": masked_lm_positions})
    assert trimmed["input_ids"].shape == trimmed["segment_ids"].shape == (4, 9)
    np.testing.assert_array_equal(trimmed["input_mask"], inputs["input_mask"][:, :9])
    assert trimmed.pop("masked_lm_positions") is masked_lm_positions
    full = model(inputs)
    cut = model(trimmed)
    real = inputs["input_mask"][:, :9].astype(bool)
    np.testing.assert_allclose(np.asarray(cut["sequence_output"])[real],
                               np.asarray(full["sequence_output"])[:, :9][real], atol=2e-5)
    np.testing.assert_allclose(cut["pooled_output"], full["pooled_output"], atol=2e-5)
    # An all-padding batch keeps one column.
    assert drop_unused_padding({"input_mask": np.zeros((2, 5))})["input_mask"].shape == (2, 1)
    assert drop_unused_padding({"input_mask": np.zeros((0, 5))})["input_mask"].shape == (0, 1)



def test_masked_positions_past_the_used_columns_keep_their_columns():
    """The original reads a masked position in the padding as any other: cut
    there, row 0's position 4 read row 1's position 1 (a wrong logit, no error)."""
    from keras_bert_impl.models.pretraining import BertPretrainingModel

    config = tiny_config()
    model = BertPretrainingModel(config)
    randomize(model, seed=6, scale=0.2)
    inputs = random_inputs(config, batch=2, seq=6, seed=3, pad=False)
    inputs["input_mask"] = np.array([[1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0]], np.int32)
    inputs["masked_lm_positions"] = np.array([[1, 4], [1, 2]], np.int32)
    trimmed = {name: tf.convert_to_tensor(value) for name, value in drop_unused_padding(inputs).items()}
    assert trimmed["input_ids"].shape == (2, 5)
    np.testing.assert_allclose(model(trimmed)["masked_lm_logits"], model(inputs)["masked_lm_logits"], atol=2e-5)
    # Without positions past the real tokens, the cut is as before.
    inputs["masked_lm_positions"] = np.array([[1, 2], [0, 1]], np.int32)
    assert drop_unused_padding(inputs)["input_ids"].shape == (2, 3)


@pytest.mark.parametrize("dtype", [None, "mixed_bfloat16"])
@pytest.mark.parametrize("held_dtype", [None, "float32", "bfloat16"])
def test_frozen_kernels_hold_the_compute_dtype_values(dtype, held_dtype):
    model, _ = _model_and_inputs(dtype)
    if held_dtype == "bfloat16" and dtype is None:
        with pytest.raises(ValueError, match="cannot hold .*float32 kernel exactly"):
            frozen_kernels(model, held_dtype=held_dtype)
        return
    kernels = frozen_kernels(model, held_dtype=held_dtype)
    blocks = model.encoder.blocks
    layers = [layer for block in blocks for layer in (
        block.attention.query, block.attention.key, block.attention.value,
        block.attention_output, block.intermediate, block.output_dense)]
    assert sorted(kernels) == sorted(layer.path for layer in layers) and len(kernels) == 6 * len(blocks)
    # No GPU in these tests: by default the copies are float32.
    expected_dtype = held_dtype or "float32"
    compute = "bfloat16" if dtype else "float32"
    for layer in layers:
        kernel = kernels[layer.path]
        assert kernel.dtype == expected_dtype
        rounded = np.asarray(layer.kernel.numpy(), np.float32).astype(tf.bfloat16.as_numpy_dtype) \
            .astype(np.float32) if compute == "bfloat16" else layer.kernel.numpy()
        np.testing.assert_array_equal(np.asarray(kernel, np.float32), rounded)
    if dtype:  # bfloat16 rounding moved the values: the copies are not the float32 kernels.
        assert not np.array_equal(kernels[layers[0].path], layers[0].kernel.numpy())


@pytest.mark.parametrize("jit_compile", [True, False])
def test_frozen_kernels_in_float32_give_the_same_bits(jit_compile):
    # In float32 nothing is rounded: computing the Dense layers from the
    # copies (matmul, bias, activation) must be exactly what the layers do.
    model, inputs = _model_and_inputs()
    live = model.make_inference_function(jit_compile=jit_compile, padding_free=True, bucket_size=4)(inputs)
    frozen = model.make_inference_function(jit_compile=jit_compile, padding_free=True, bucket_size=4,
                                           freeze_kernels=True)(inputs)
    for name in ("sequence_output", "pooled_output"):
        if jit_compile:
            np.testing.assert_array_equal(frozen[name], live[name])
        else:  # The plain graph's fused MatMul+BiasAdd kernels may round the last bit differently.
            np.testing.assert_allclose(frozen[name], live[name], atol=2e-6)


@pytest.mark.parametrize("dtype", [None, "mixed_bfloat16"])
def test_plain_graph_frozen_padding_free_holds_the_weights_rounded(dtype):
    # Without XLA, freeze_kernels runs the padding-free forward on a copy of
    # the model holding its weights rounded once (inference.precision), its
    # Dense kernels graph constants (inference.constant_kernels): the live plain
    # graph's outputs up to another oneDNN kernel's summation order, and no
    # weight cast in the graph.
    model, inputs = _model_and_inputs(dtype)
    live = model.make_inference_function(jit_compile=False, padding_free=True)
    frozen = model.make_inference_function(jit_compile=False, padding_free=True, freeze_kernels=True)
    expected, got = live(inputs), frozen(inputs)
    tolerance = dict(atol=1e-5) if dtype is None else dict(atol=3e-2, rtol=4 * 2**-7)
    for name in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(np.asarray(got[name], np.float32), np.asarray(expected[name], np.float32),
                                   **tolerance)
    assert weight_casts_but_layer_norms(
        frozen.get_concrete_function({key: tf.constant(value) for key, value in inputs.items()})) == []


def _max_error(outputs, reference, input_mask):
    real = np.asarray(input_mask).astype(bool)
    sequence = np.asarray(outputs["sequence_output"], np.float32)[real]
    pooled = np.asarray(outputs["pooled_output"], np.float32)
    return max(np.abs(sequence - np.asarray(reference["sequence_output"])[real]).max(),
               np.abs(pooled - np.asarray(reference["pooled_output"])).max())


def test_frozen_kernels_under_mixed_bfloat16_are_as_accurate_as_the_full_model(compiled_full):
    # float32 copies are what a CPU multiplies, bfloat16 ones what a GPU
    # does. Either way the products see the same bfloat16 values, only
    # summed in another order: the outputs stay within bfloat16 rounding of
    # the compiled full model, and as close to float32 arithmetic on the same
    # weights as it is.
    model, inputs, full = compiled_full("mixed_bfloat16")
    reference, _ = _model_and_inputs()
    reference.set_weights(model.get_weights())
    reference = reference(inputs)
    full = full(inputs)
    full_error = _max_error(full, reference, inputs["input_mask"])
    assert 0 < full_error < 0.05
    made = model.make_inference_function(jit_compile=True, padding_free=True, bucket_size=4, freeze_kernels=True)
    made = made(inputs)
    for held_dtype in ("float32", "bfloat16"):
        dense = frozen_dense(frozen_kernels(model, held_dtype=held_dtype))
        forward = tf.function(lambda inputs, *rows: forward_on_rows(model, inputs, *rows, dense=dense),
                              jit_compile=True)
        for frozen in (forward(inputs, *real_token_rows(inputs["input_mask"], bucket_size=4)), made):
            _assert_equal_at_real_positions(frozen, full, inputs["input_mask"], atol=3e-2)
            assert _max_error(frozen, reference, inputs["input_mask"]) <= 1.25 * full_error, held_dtype


def test_a_frozen_function_keeps_the_kernels_it_was_made_with():
    model, inputs = _model_and_inputs()
    live = model.make_inference_function(padding_free=True, bucket_size=4)
    frozen = model.make_inference_function(padding_free=True, bucket_size=4, freeze_kernels=True)
    before = model(inputs)
    intermediate = model.encoder.blocks[0].intermediate
    intermediate.kernel.assign(intermediate.kernel * 2.0)
    # ... and every other weight too, not kernels only (biases, LayerNorms,
    # embeddings and the pooler were read live, mixing old and new weights).
    for weight in (intermediate.bias, model.pooler.dense.bias, model.word_embedding.embeddings):
        weight.assign(weight * 0.5)
    after = model(inputs)
    assert not np.allclose(after["pooled_output"], before["pooled_output"], atol=1e-3)
    _assert_equal_at_real_positions(live(inputs), after, inputs["input_mask"], atol=2e-5)
    _assert_equal_at_real_positions(frozen(inputs), before, inputs["input_mask"], atol=2e-5)


def test_an_empty_batch_gives_empty_outputs_on_every_path():
    """The filler rows pointed at flat position 0, which an empty batch lacks
    (was: a GatherV2 error on the padding-free and real-tokens paths)."""
    from keras_bert_impl.inference.padding_free import set_real_tokens_only

    model = BertModel(tiny_config())
    empty = {name: np.zeros((0, 4), np.int32) for name in ("input_ids", "input_mask", "segment_ids")}
    results = [padding_free_forward(model, empty)]
    results += [model.make_inference_function(padding_free=True, jit_compile=jit)(empty) for jit in (False, True)]
    set_real_tokens_only(model)
    results.append(model(empty))
    for outputs in results:
        assert tuple(outputs["sequence_output"].shape) == (0, 4, model.bert_config.hidden_size)
        assert tuple(outputs["pooled_output"].shape) == (0, model.bert_config.hidden_size)


@pytest.mark.parametrize("own_setting", [False, True])
def test_skipping_padding_runs_every_batch_on_its_real_tokens_in_one_graph(own_setting):
    """The serving graph (`call_skipping_padding`): a padded batch and one
    without padding both run on their real tokens (zeros at padded
    positions, the model's values at real ones, within rounding), in a graph
    with one path (each product once: no conditional holding the encoder
    twice); the model's own setting is left as it was."""
    from keras_bert_impl.inference.padding_free import call_skipping_padding, set_real_tokens_only

    model, padded = _model_and_inputs()
    full = {name: np.ones_like(value) if name == "input_mask" else value for name, value in padded.items()}
    set_real_tokens_only(model, own_setting)
    forward = tf.function(lambda inputs: call_skipping_padding(model, inputs), autograph=False)
    skipping, unpadded = forward(padded), forward(full)
    assert model.encoder.real_tokens_only is own_setting
    graph_def = forward.get_concrete_function(padded).graph.as_graph_def()
    nodes = list(graph_def.node) + [node for f in graph_def.library.function for node in f.node_def]
    products = sum(node.op in ("MatMul", "BatchMatMulV2") for node in nodes)
    layers = model.bert_config.num_hidden_layers
    # Six Dense and two attention products a layer, the token types (a one-hot product) and the pooler.
    assert products == layers * 8 + 2
    set_real_tokens_only(model, False)
    _assert_equal_at_real_positions(skipping, model(padded), padded["input_mask"], atol=2e-5)
    plain = tf.function(lambda inputs: model(inputs, training=False), autograph=False)(full)
    for name in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(unpadded[name], plain[name], atol=2e-5)
