"""BertModel against independent implementations given the same weights:
a NumPy transcription of the original formulas, tf-models-official's
BertEncoder and keras-hub's BertBackbone."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.checkpoints.keras_hub import keras_hub_weights
from keras_bert_impl.checkpoints.original import original_weights
from keras_bert_impl.errors import SequenceLengthError
from keras_bert_impl.models.bert_model import BertModel
from tests.helpers import random_inputs, randomize, tiny_config, weight_casts_but_layer_norms
from tests.numpy_bert import bert_forward

TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def model_and_weights():
    config = tiny_config()
    model = BertModel(config, output_all_encoder_layers=True, output_attention_probs=True)
    randomize(model, seed=3)
    return config, model, original_weights(model)


@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_exact", "relu"])
def test_matches_numpy_reference(hidden_act):
    config = tiny_config(hidden_act=hidden_act)
    model = BertModel(config, output_all_encoder_layers=True, output_attention_probs=True)
    randomize(model, seed=5)
    inputs = random_inputs(config)
    outputs = model(inputs)
    ref_layers, ref_pooled, ref_probs = bert_forward(
        original_weights(model), config.to_dict(), **inputs
    )
    for ours, ref in zip(outputs["encoder_outputs"], ref_layers):
        np.testing.assert_allclose(ours, ref, atol=TOLERANCE)
    for ours, ref in zip(outputs["attention_probs"], ref_probs):
        np.testing.assert_allclose(ours, ref, atol=TOLERANCE)
    np.testing.assert_allclose(outputs["pooled_output"], ref_pooled, atol=TOLERANCE)
    np.testing.assert_allclose(outputs["sequence_output"], ref_layers[-1], atol=TOLERANCE)
    # Padded keys get (almost) no attention, exactly as with the -10000 adder.
    assert np.asarray(outputs["attention_probs"][0])[2, :, :, -4:].max() < 1e-3


def _tf_models_encoder(config):
    from official.modeling import activations
    from official.nlp.modeling import networks

    return networks.BertEncoder(
        vocab_size=config.vocab_size,
        hidden_size=config.hidden_size,
        num_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        max_sequence_length=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size,
        inner_dim=config.intermediate_size,
        inner_activation=activations.gelu,  # tf-models' gelu is the tanh form
        output_dropout=config.hidden_dropout_prob,
        attention_dropout=config.attention_probs_dropout_prob,
        dict_outputs=True,
    )


def tf_models_weights(w, config):
    """Our original-named weights -> tf-models BertEncoder variable names."""
    n, d = config.num_attention_heads, config.size_per_head
    h = config.hidden_size
    mapped = {
        "word_embeddings/embeddings": w["bert/embeddings/word_embeddings"],
        "position_embedding/embeddings": w["bert/embeddings/position_embeddings"],
        "type_embeddings/embeddings": w["bert/embeddings/token_type_embeddings"],
        "embeddings/layer_norm/gamma": w["bert/embeddings/LayerNorm/gamma"],
        "embeddings/layer_norm/beta": w["bert/embeddings/LayerNorm/beta"],
        "pooler_transform/kernel": w["bert/pooler/dense/kernel"],
        "pooler_transform/bias": w["bert/pooler/dense/bias"],
    }
    for i in range(config.num_hidden_layers):
        src, dst = f"bert/encoder/layer_{i}/", f"transformer/layer_{i}/"
        for part in ("query", "key", "value"):
            mapped[dst + f"self_attention/{part}/kernel"] = w[src + f"attention/self/{part}/kernel"].reshape(h, n, d)
            mapped[dst + f"self_attention/{part}/bias"] = w[src + f"attention/self/{part}/bias"].reshape(n, d)
        mapped[dst + "self_attention/attention_output/kernel"] = w[src + "attention/output/dense/kernel"].reshape(n, d, h)
        mapped[dst + "self_attention/attention_output/bias"] = w[src + "attention/output/dense/bias"]
        mapped[dst + "self_attention_layer_norm/gamma"] = w[src + "attention/output/LayerNorm/gamma"]
        mapped[dst + "self_attention_layer_norm/beta"] = w[src + "attention/output/LayerNorm/beta"]
        mapped[dst + "intermediate/kernel"] = w[src + "intermediate/dense/kernel"]
        mapped[dst + "intermediate/bias"] = w[src + "intermediate/dense/bias"]
        mapped[dst + "output/kernel"] = w[src + "output/dense/kernel"]
        mapped[dst + "output/bias"] = w[src + "output/dense/bias"]
        mapped[dst + "output_layer_norm/gamma"] = w[src + "output/LayerNorm/gamma"]
        mapped[dst + "output_layer_norm/beta"] = w[src + "output/LayerNorm/beta"]
    return mapped


def test_matches_tf_models_bert_encoder(model_and_weights):
    config, model, w = model_and_weights
    encoder = _tf_models_encoder(config)
    mapped = tf_models_weights(w, config)
    assert len(mapped) == len(encoder.weights)
    for variable in encoder.weights:
        variable.assign(mapped[variable.name.split(":")[0]])
    inputs = random_inputs(config)
    theirs = encoder(
        {
            "input_word_ids": inputs["input_ids"],
            "input_mask": inputs["input_mask"],
            "input_type_ids": inputs["segment_ids"],
        }
    )
    ours = model(inputs)
    np.testing.assert_allclose(ours["sequence_output"], theirs["sequence_output"], atol=TOLERANCE)
    np.testing.assert_allclose(ours["pooled_output"], theirs["pooled_output"], atol=TOLERANCE)
    for mine, other in zip(ours["encoder_outputs"], theirs["encoder_outputs"]):
        np.testing.assert_allclose(mine, other, atol=TOLERANCE)


def test_matches_keras_hub_bert_backbone(model_and_weights):
    import keras_hub

    config, model, w = model_and_weights
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size,
        num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads,
        hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size,
    )
    mapped = keras_hub_weights(w, config)  # the library's map, which the converter uses
    assert len(mapped) == len(backbone.weights)
    for variable in backbone.weights:
        variable.assign(mapped[variable.path])
    inputs = random_inputs(config)
    theirs = backbone(
        {
            "token_ids": inputs["input_ids"],
            "segment_ids": inputs["segment_ids"],
            "padding_mask": inputs["input_mask"],
        }
    )
    ours = model(inputs)
    # keras-hub zeroes padded positions' attention exactly (-inf mask) where
    # the original adds -10000; unpadded positions agree to fp32 precision.
    real = inputs["input_mask"].astype(bool)
    np.testing.assert_allclose(
        np.asarray(ours["sequence_output"])[real], np.asarray(theirs["sequence_output"])[real], atol=TOLERANCE
    )
    np.testing.assert_allclose(ours["pooled_output"], theirs["pooled_output"], atol=TOLERANCE)


@pytest.mark.parametrize("jit_compile", [True, False])
def test_inference_function_matches_numpy_reference(jit_compile):
    config = tiny_config()
    model = BertModel(config)
    randomize(model, seed=7)
    inputs = random_inputs(config)
    forward = model.make_inference_function(jit_compile=jit_compile)
    outputs = forward(inputs)
    ref_layers, ref_pooled, _ = bert_forward(original_weights(model), config.to_dict(), **inputs)
    np.testing.assert_allclose(outputs["sequence_output"], ref_layers[-1], atol=TOLERANCE)
    np.testing.assert_allclose(outputs["pooled_output"], ref_pooled, atol=TOLERANCE)
    too_long = random_inputs(config, batch=1, seq=config.max_position_embeddings + 1)
    # Refused when traced (a first shape) or, once the function's shapes are
    # left open (from the second new shape on), when run.
    with pytest.raises((SequenceLengthError, tf.errors.InvalidArgumentError), match="exceeds max_position_embeddings"):
        forward(too_long)


@pytest.mark.parametrize("dtype", [None, "mixed_bfloat16", "mixed_float16"])
def test_frozen_inference_function_holds_the_weights_of_its_making(dtype):
    # freeze_kernels without padding_free: a copy holding the weights as
    # they are now, rounded once (under mixed_bfloat16 every weight but the
    # LayerNorms' as bfloat16), its Dense kernels graph constants: the model's
    # own outputs up to the summation order of another oneDNN kernel (float32
    # rounding; a few roundings of the reduced precision), and later changes
    # to the model's weights ignored.
    import tensorflow as tf

    config = tiny_config()
    model = BertModel(config, output_all_encoder_layers=True, dtype=dtype)
    randomize(model, seed=7)
    inputs = random_inputs(config, pad=True)
    live = model.make_inference_function(jit_compile=False)
    frozen = model.make_inference_function(jit_compile=False, freeze_kernels=True)
    expected, got = live(inputs), frozen(inputs)
    assert sorted(got) == sorted(expected) == ["encoder_outputs", "pooled_output", "sequence_output"]
    tolerance = {None: dict(atol=1e-5), "mixed_bfloat16": dict(atol=3e-2, rtol=4 * 2**-7),
                 "mixed_float16": dict(atol=4e-3, rtol=4 * 2**-10)}[dtype]
    for value, reference in zip(tf.nest.flatten(got), tf.nest.flatten(expected)):
        assert value.dtype == reference.dtype
        np.testing.assert_allclose(np.asarray(value, "float32"), np.asarray(reference, "float32"), **tolerance)
    # The conversions are gone from the graph: no weight is read and cast.
    assert weight_casts_but_layer_norms(frozen.get_concrete_function(inputs)) == []
    for weight in (model.pooler.dense.kernel, model.pooler.dense.bias):
        weight.assign(np.zeros(weight.shape, "float32"))
    assert np.abs(np.asarray(live(inputs)["pooled_output"], "float32")).max() == 0.0  # tanh(0)
    np.testing.assert_allclose(np.asarray(frozen(inputs)["pooled_output"], "float32"),
                               np.asarray(expected["pooled_output"], "float32"), **tolerance)


def test_sequence_longer_than_max_positions_is_a_clear_error():
    config = tiny_config(max_position_embeddings=8)
    model = BertModel(config)
    inputs = random_inputs(config, batch=1, seq=9)
    with pytest.raises(SequenceLengthError, match="9 exceeds max_position_embeddings 8"):
        model(inputs)


def test_inference_is_deterministic_and_training_uses_dropout(model_and_weights):
    config, model, _ = model_and_weights
    inputs = random_inputs(config)
    a = model(inputs)["sequence_output"]
    b = model(inputs)["sequence_output"]
    np.testing.assert_array_equal(a, b)
    c = model(inputs, training=True)["sequence_output"]
    assert np.abs(np.asarray(a) - np.asarray(c)).max() > 1e-3


@pytest.mark.parametrize("padding_free", [False, True])
def test_compiled_inference_checks_ids_that_xla_would_not(padding_free):
    """XLA drops assertions and clamps gather indices: an id outside the
    embedding tables gave finite outputs from the wrong rows (the eager model
    and the plain graph refuse it)."""
    import tensorflow as tf

    config = tiny_config()
    forward = BertModel(config).make_inference_function(jit_compile=True, padding_free=padding_free)
    inputs = random_inputs(config, batch=2, seq=6)
    assert np.isfinite(forward(inputs)["pooled_output"].numpy()).all()
    for key, bad, message in (
        ("input_ids", config.vocab_size, f"input_ids holds an id >= vocab_size {config.vocab_size}"),
        ("input_ids", -3, "input_ids holds a negative id"),
        ("segment_ids", config.type_vocab_size, f"segment_ids holds an id >= type_vocab_size {config.type_vocab_size}"),
    ):
        broken = {name: value.copy() for name, value in inputs.items()}
        broken[key][1, 2] = bad
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            forward(broken)


@pytest.mark.parametrize("dtype, accelerator, onednn_rewrites, xla", [
    ("float32", True, None, True),        # a GPU or TPU: XLA
    ("bfloat16", True, None, True),
    ("float32", False, False, True),      # AVX2 CPU, rewrites off: XLA fused 10 % faster
    ("float32", False, True, False),      # rewrites on: oneDNN's products, XLA gained nothing
    ("bfloat16", False, True, False),     # AVX-512 bf16 / AMX: XLA has no bf16 products (0.56x)
    ("bfloat16", False, False, False),    # emulated bfloat16 either way: the plain graph
])
def test_xla_is_chosen_where_it_pays_for_inference(dtype, accelerator, onednn_rewrites, xla):
    from keras_bert_impl.inference import plan

    assert plan.xla_pays_for_inference(dtype, accelerator=accelerator, onednn_rewrites=onednn_rewrites) is xla


@pytest.mark.parametrize("onednn_rewrites", [True, False])
def test_inference_function_compiles_by_the_machine(monkeypatch, onednn_rewrites):
    """`jit_compile="auto"`: on this CPU (no accelerator in CI) the float32
    model is compiled only with the oneDNN rewrites off. An id outside the
    vocabulary tells which function ran: the XLA path's own check names
    `vocab_size`, the plain graph's embedding lookup names the index."""
    import tensorflow as tf

    from keras_bert_impl import hardware

    if tf.config.list_logical_devices("GPU"):
        pytest.skip("the CPU's choice; an accelerator always compiles")
    monkeypatch.setattr(hardware, "onednn_graph_rewrites", lambda: onednn_rewrites)
    config = tiny_config()
    model = BertModel(config)
    forward = model.make_inference_function()
    inputs = random_inputs(config, batch=2, seq=6)
    np.testing.assert_allclose(forward(inputs)["pooled_output"], model(inputs)["pooled_output"], atol=TOLERANCE)
    inputs["input_ids"][0, 1] = config.vocab_size
    compiled = not onednn_rewrites
    message = "holds an id >= vocab_size" if compiled else r"indices\[.*\] = \d+ is not in"
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        forward(inputs)
