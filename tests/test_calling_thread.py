"""`make_inference_function(calling_thread=True)`: the forward pass in a Session whose ops run in the calling thread."""

import re
import resource
import threading

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.checkpoints.original import original_weights
from keras_bert_impl.inference.calling_thread import SessionFunction
from keras_bert_impl.models.bert_model import BertModel
from tests.helpers import X86_ONLY, random_inputs, randomize, tiny_config
from tests.numpy_bert import bert_forward


@pytest.fixture(scope="module")
def model():
    # One encoder layer: the Session and its thread are tested here, not the layers.
    bert = BertModel(tiny_config(hidden_size=32, intermediate_size=64, num_hidden_layers=1))
    randomize(bert, seed=11, scale=0.2)
    return bert


def reference(model, inputs):
    """The float64 forward pass of `tests/numpy_bert.py` (no code shared with ours): last layer, pooled."""
    layers, pooled, _ = bert_forward(original_weights(model), model.bert_config.to_dict(), **inputs)
    return layers[-1], pooled


def voluntary_switches(call, times):
    """This process' voluntary context switches (every thread's) over `times` calls of `call`."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
    for _ in range(times):
        call()
    return resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - before


@pytest.mark.parametrize("padding_free", [False, True])
def test_answers_as_the_model_at_any_shape_with_its_weights_taken_when_made(model, padding_free):
    forward = model.make_inference_function(padding_free=padding_free, calling_thread=True)
    shapes = [(3, 10), (1, 4), (2, 17)]
    for batch, seq in shapes:  # one graph, every dimension open
        inputs = random_inputs(model.bert_config, batch=batch, seq=seq, seed=seq)
        outputs = forward(inputs)
        assert isinstance(outputs["sequence_output"], np.ndarray)
        sequence, pooled = reference(model, inputs)
        mask = inputs["input_mask"].astype(bool)
        np.testing.assert_allclose(outputs["sequence_output"][mask], sequence[mask], atol=2e-5)
        np.testing.assert_allclose(outputs["pooled_output"], pooled, atol=2e-5)
    inputs = random_inputs(model.bert_config, batch=2, seq=8, seed=3)
    before = forward(inputs)["sequence_output"]
    saved = [variable.numpy() for variable in model.weights]
    randomize(model, seed=12, scale=0.2)
    try:
        assert np.abs(model(inputs)["sequence_output"].numpy() - before).max() > 1e-2
        np.testing.assert_array_equal(forward(inputs)["sequence_output"], before)  # the Session's own copy
    finally:
        for variable, value in zip(model.weights, saved):
            variable.assign(value)


@X86_ONLY
def test_int8_in_the_calling_thread_answers_as_the_int8_function(model):
    inputs = random_inputs(model.bert_config, batch=3, seq=10, seed=4)
    mask = inputs["input_mask"].astype(bool)
    calibration = [random_inputs(model.bert_config, batch=4, seq=12, seed=seed) for seed in (5, 6)]
    for options in ({}, {"calibration_inputs": calibration}):
        function = model.make_inference_function(precision="int8", padding_free=True, **options)
        forward = model.make_inference_function(precision="int8", padding_free=True, calling_thread=True, **options)
        got = forward(inputs)["sequence_output"][mask]
        expected = function(inputs)["sequence_output"].numpy()[mask]
        # TensorFlow's function runtime folds the quantization's float arithmetic in another order than a
        # Session's: a code may land one step apart, nothing more (float32 is 1e-6 apart, above).
        cosine = np.sum(got * expected, -1) / (np.linalg.norm(got, axis=-1) * np.linalg.norm(expected, axis=-1))
        assert cosine.min() > 0.999
        sequence, _ = reference(model, inputs)
        assert np.abs(got - sequence[mask]).max() > 1e-4  # int8, not float32


def test_each_request_runs_in_the_thread_that_sent_it(model):
    # No hand-off to another thread: a request that waited on one would switch context at least once.
    inputs = random_inputs(model.bert_config, batch=1, seq=9, seed=2, pad=False)
    forward = model.make_inference_function(padding_free=True, calling_thread=True)
    through_pool = model.make_inference_function(padding_free=True, freeze_kernels=True)
    for _ in range(3):
        forward(inputs), through_pool(inputs)
    assert voluntary_switches(lambda: through_pool(inputs)["sequence_output"].numpy(), 50) >= 50  # the check can fail
    assert voluntary_switches(lambda: forward(inputs), 50) < 10
    # Requests from several threads at once: each answered, as alone.
    requests = [random_inputs(model.bert_config, batch=1, seq=seq, seed=seq, pad=False) for seq in (5, 9, 13, 17)]
    alone = [forward(request)["pooled_output"] for request in requests]
    answers = [None] * len(requests)

    def send(index):
        for _ in range(20):
            answers[index] = forward(requests[index])["pooled_output"]

    threads = [threading.Thread(target=send, args=(index,)) for index in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for got, expected in zip(answers, alone):
        np.testing.assert_array_equal(got, expected)


def test_refusals_name_the_cause(model):
    with pytest.raises(ValueError, match="not XLA"):
        model.make_inference_function(calling_thread=True, jit_compile=True)
    forward = model.make_inference_function(calling_thread=True)
    inputs = random_inputs(model.bert_config, batch=1, seq=4, seed=1)
    with pytest.raises(ValueError, match="segment_ids missing"):
        forward({name: value for name, value in inputs.items() if name != "segment_ids"})
    with pytest.raises(TypeError, match=re.escape("inputs['input_ids']: integers expected, not float32")):
        forward({**inputs, "input_ids": inputs["input_ids"].astype("float32")})
    with pytest.raises(ValueError, match=re.escape("inputs['input_ids']: a value outside int32")):
        forward({**inputs, "input_ids": inputs["input_ids"].astype("int64") + 2**32})  # was: wrapped to valid ids
    with pytest.raises(tf.errors.InvalidArgumentError):  # an id past the vocabulary, as the model's own gather says
        forward({**inputs, "input_ids": np.full_like(inputs["input_ids"], model.bert_config.vocab_size + 5)})


def test_a_captured_tensor_becomes_a_constant_of_the_session():
    offset = tf.constant([[10.0, 20.0]])  # captured by value, not a variable
    add = tf.function(lambda inputs: {"y": inputs["x"] + offset})
    run = SessionFunction(add, {"x": tf.TensorSpec([None, 2], tf.float32)})
    np.testing.assert_array_equal(run({"x": np.ones((3, 2), "float32")})["y"], np.ones((3, 2)) + [[10.0, 20.0]])


def test_bfloat16_in_the_calling_thread_answers_as_the_bfloat16_function():
    # A mixed_bfloat16 model's weights held in bfloat16 (`freeze_kernels`), in the Session as in the function.
    model = BertModel(tiny_config(hidden_size=32, intermediate_size=64, num_hidden_layers=1), dtype="mixed_bfloat16")
    randomize(model, seed=11, scale=0.2)
    inputs = random_inputs(model.bert_config, batch=3, seq=10, seed=4)
    mask = inputs["input_mask"].astype(bool)
    function = model.make_inference_function(padding_free=True, freeze_kernels=True)
    forward = model.make_inference_function(padding_free=True, calling_thread=True)
    got = forward(inputs)["sequence_output"]
    assert got.dtype == np.dtype(tf.bfloat16.as_numpy_dtype)
    got, expected = got.astype("float32")[mask], np.asarray(function(inputs)["sequence_output"], "float32")[mask]
    sequence, _ = reference(model, inputs)
    # Rounded in another order here and there (as int8 above), and so as far from float64 as the function.
    error, function_error = np.abs(got - sequence[mask]).max(), np.abs(expected - sequence[mask]).max()
    assert 1e-3 < error < 2 * function_error  # bfloat16, not float32
    cosine = np.sum(got * expected, -1) / (np.linalg.norm(got, axis=-1) * np.linalg.norm(expected, axis=-1))
    assert cosine.min() > 0.999
