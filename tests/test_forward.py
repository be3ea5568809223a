"""`inference.forward.apply_plan`: the one place a plan becomes the model that runs and its kernels."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.inference.constant_kernels import ConstantKernels
from keras_bert_impl.inference.encoder_layers import encoder_dense_layers
from keras_bert_impl.inference.forward import RebuildError, apply_plan
from keras_bert_impl.inference.int8 import Int8Kernels
from keras_bert_impl.inference.packed_kernels import PackedKernels
from keras_bert_impl.inference.plan import InferencePlan
from keras_bert_impl.models.bert_model import BertModel
from tests.helpers import randomize, tiny_config


@pytest.fixture(scope="module")
def model():
    bert = BertModel(tiny_config())
    randomize(bert, seed=4, scale=0.2)
    return bert


def rebuild_as(model):
    return lambda dtype: BertModel(model.bert_config, dtype=dtype)


def test_held_weights_are_copied_only_where_the_model_does_not_hold_them(model):
    same = apply_plan(model, InferencePlan("float32", held_weights=True), rebuild_as(model))
    assert same.model is model and same.kernels is None
    half = apply_plan(model, InferencePlan("bfloat16", held_weights=True), rebuild_as(model))
    assert half.model is not model and half.model.encoder.compute_dtype == "bfloat16"
    # The copy holds the weights rounded once; the source is left as it was.
    source, held = encoder_dense_layers(model)[0].kernel, encoder_dense_layers(half.model)[0].kernel
    assert (held.dtype, source.dtype) == ("bfloat16", "float32")
    rounded = tf.cast(tf.constant(source.numpy()), tf.bfloat16)
    np.testing.assert_array_equal(np.asarray(held.numpy(), np.float32), np.asarray(rounded.numpy(), np.float32))
    # A snapshot is a copy whatever the model holds: later training never reaches what runs.
    frozen = apply_plan(model, InferencePlan("float32", held_weights=True), rebuild_as(model), snapshot=True)
    assert frozen.model is not model
    np.testing.assert_array_equal(frozen.model.get_weights()[3], model.get_weights()[3])


def test_the_kernels_are_held_as_the_plan_says(model):
    kinds = {
        InferencePlan("float32", constant_kernels=True): ConstantKernels,
        InferencePlan("float32", packed_kernels=True): PackedKernels,
        InferencePlan("int8", held_weights=True, packed_kernels=True): Int8Kernels,
    }
    for plan, kind in kinds.items():
        planned = apply_plan(model, plan, rebuild_as(model))
        assert type(planned.kernels) is kind, plan
    int8 = apply_plan(model, InferencePlan("int8", held_weights=True, packed_kernels=True), rebuild_as(model))
    # The int8 kernels are variables of their own, saved in place of the float32 kernels they stand for.
    saved = {id(variable) for variable in int8.saved_variables()}
    assert all(id(variable) in saved for variable in int8.kernels.variables)
    assert not any(id(variable.value) in saved for variable in model.variables if int8.kernels.holds(variable))


def test_a_rebuilt_model_of_another_layout_is_refused(model):
    other = lambda dtype: BertModel(tiny_config(num_hidden_layers=1), dtype=dtype)  # noqa: E731
    with pytest.raises(RebuildError, match="cannot rebuild .* in bfloat16"):
        apply_plan(model, InferencePlan("bfloat16", held_weights=True), other)
