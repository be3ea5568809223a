"""Padding-free inference equals BertModel at every real position."""

import numpy as np
import pytest

from keras_bert_impl.models.bert_model import BertModel
from keras_bert_impl.models.padding_free import (
    drop_unused_padding,
    make_padding_free_function,
    padding_free_forward,
    real_token_rows,
)
from tests.helpers import random_inputs, randomize, tiny_config


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


@pytest.mark.parametrize("dtype, atol", [(None, 2e-5), ("mixed_bfloat16", 1e-2)])
def test_compiled_buckets_equal_the_compiled_full_model(dtype, atol):
    # Both sides compiled with XLA: bfloat16 rounds where XLA's fusions put
    # the casts, so the reference is the full model under the same compiler.
    model, inputs = _model_and_inputs(dtype)
    full = model.make_inference_function(jit_compile=True)
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
