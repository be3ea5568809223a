"""Each layer is serializable (get_config mirrors __init__) and computes what
the original block computes."""

import math

import keras
import numpy as np
import pytest

from keras_bert_impl.layers.activations import gelu, gelu_exact, get_activation
from keras_bert_impl.layers.attention import SelfAttention, attention_mask_adder
from keras_bert_impl.layers.embeddings import EmbeddingPostprocessor, WordEmbedding
from keras_bert_impl.layers.heads import MaskedLMHead, OutputProjection, gather_indexes
from keras_bert_impl.layers.pooler import Pooler
from keras_bert_impl.layers.transformer import TransformerEncoder, TransformerLayer
from keras_bert_impl.models.bert_model import BertModel
from tests.helpers import random_inputs, randomize, tiny_config


def test_gelu_forms_against_hand_values():
    x = np.array([-3.0, -1.0, 0.0, 0.5, 2.0], "float32")
    tanh_form = [0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3))) for v in x]
    erf_form = [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x]
    np.testing.assert_allclose(gelu(x), tanh_form, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(gelu_exact(x), erf_form, rtol=1e-6, atol=1e-7)
    assert abs(float(gelu(np.float32(-3.0))) - float(gelu_exact(np.float32(-3.0)))) > 1e-4
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        get_activation("swish")


def test_attention_mask_adder_is_the_originals():
    adder = np.asarray(attention_mask_adder(np.array([[1, 1, 0]])))
    assert adder.shape == (1, 1, 1, 3)
    np.testing.assert_array_equal(adder[0, 0, 0], [0.0, 0.0, -10000.0])


def test_gather_indexes_matches_numpy():
    x = np.arange(2 * 4 * 3, dtype="float32").reshape(2, 4, 3)
    positions = np.array([[3, 0], [1, 1]])
    np.testing.assert_array_equal(gather_indexes(x, positions), np.take_along_axis(x, positions[:, :, None], 1))


LAYERS = [
    (WordEmbedding(vocab_size=11, hidden_size=8), lambda: (np.array([[1, 2, 10]]),)),
    (
        EmbeddingPostprocessor(hidden_size=8, type_vocab_size=2, max_position_embeddings=5),
        lambda: (np.ones((1, 3, 8), "float32"), np.array([[0, 1, 1]])),
    ),
    (SelfAttention(num_attention_heads=2, size_per_head=4), lambda: (np.random.rand(2, 3, 8).astype("float32"),)),
    (TransformerLayer(8, 2, 16, hidden_act="gelu_exact"), lambda: (np.random.rand(2, 3, 8).astype("float32"),)),
    (TransformerEncoder(2, 8, 2, 16), lambda: (np.random.rand(2, 3, 8).astype("float32"), np.array([[1, 1, 0], [1, 1, 1]]))),
    (Pooler(hidden_size=8), lambda: (np.random.rand(2, 3, 8).astype("float32"),)),
    (OutputProjection(num_outputs=3), lambda: (np.random.rand(2, 8).astype("float32"),)),
]


@pytest.mark.parametrize("layer, make_inputs", LAYERS, ids=lambda v: type(v).__name__)
def test_get_config_round_trip(layer, make_inputs):
    inputs = make_inputs()
    expected = layer(*inputs)
    clone = type(layer).from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    clone(*inputs)
    clone.set_weights(layer.get_weights())
    keras.tree.map_structure(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), expected, clone(*inputs)
    )
    # Registered: the serialized form names our package.
    assert keras.saving.serialize_keras_object(layer)["registered_name"].startswith("keras_bert_impl>")


def test_masked_lm_head_is_tied_and_serializable_with_its_embedding():
    embedding = WordEmbedding(vocab_size=7, hidden_size=4)
    embedding.build((None, None))
    head = MaskedLMHead(embedding, hidden_act="gelu")
    logits = head(np.random.rand(1, 3, 4).astype("float32"), np.array([[0, 2]]))
    assert logits.shape == (1, 2, 7)
    assert [w.path for w in head.weights if "embeddings" in w.path] == []  # not its own weight
    # Rebuilt alone, it gets an embedding of the same shape, not owned by it:
    # with the same table (tied anew) and weights, the same logits.
    clone = MaskedLMHead.from_config(head.get_config())
    assert clone.get_config() == head.get_config() and clone.hidden_act == "gelu"
    assert clone.word_embedding is not embedding
    clone.word_embedding.set_weights(embedding.get_weights())
    positions = np.array([[0, 2]])
    hidden = np.random.rand(1, 3, 4).astype("float32")
    clone(hidden, positions)
    clone.set_weights(head.get_weights())
    np.testing.assert_allclose(clone(hidden, positions), head(hidden, positions), rtol=1e-6)
    assert len(clone.weights) == len(head.weights)  # the table is still not its own


def test_mixed_bfloat16_runs_close_to_float32():
    config = tiny_config()
    fp32 = BertModel(config)
    randomize(fp32, seed=1, scale=0.1)
    bf16 = BertModel(config, dtype="mixed_bfloat16")
    bf16.set_weights(fp32.get_weights())
    assert bf16.word_embedding.embeddings.dtype == "float32"  # variables stay fp32
    inputs = random_inputs(config)
    a = np.asarray(fp32(inputs)["pooled_output"])
    b = np.asarray(keras.ops.cast(bf16(inputs)["pooled_output"], "float32"))
    assert np.abs(a - b).max() < 0.05
    assert bf16(inputs)["sequence_output"].dtype == "bfloat16"


def test_encoder_output_positions_are_rows_of_the_full_output():
    encoder = TransformerEncoder(
        num_hidden_layers=2, hidden_size=8, num_attention_heads=2, intermediate_size=16
    )
    rng = np.random.default_rng(3)
    hidden = rng.normal(size=(3, 7, 8)).astype("float32")
    mask = np.ones((3, 7), "int32")
    mask[1, 4:] = 0
    positions = np.array([[0, 2, 2], [0, 5, 1], [0, 6, 3]], "int32")
    full_outputs, full_probs = encoder(hidden, mask)
    outputs, probs = encoder(hidden, mask, output_positions=positions)
    np.testing.assert_allclose(outputs[0], full_outputs[0], atol=1e-6)
    np.testing.assert_allclose(
        outputs[-1], np.take_along_axis(full_outputs[-1].numpy(), positions[:, :, None], 1), atol=1e-5
    )
    np.testing.assert_allclose(
        probs[-1], np.take_along_axis(full_probs[-1].numpy(), positions[:, None, :, None], 2), atol=1e-6
    )


def test_an_id_outside_the_tables_is_an_error():
    """Word ids: `tf.gather` (the original's lookup) refuses a negative one on
    a CPU; `ops.take` read the last embedding row instead, silently. Segment
    ids: the original's one-hot rows would be zero; ours name the fault."""
    import tensorflow as tf

    config = tiny_config()
    model = BertModel(config)
    for name, bad, message in (
        ("input_ids", -1, "indices"),
        ("segment_ids", -1, "segment_ids holds a negative id"),
        ("segment_ids", config.type_vocab_size, f"segment_ids holds an id >= type_vocab_size {config.type_vocab_size}"),
    ):
        inputs = random_inputs(config, batch=2, seq=5, seed=1)
        inputs[name][0, 1] = bad
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            model(inputs)


def test_token_type_gradient_is_dense_as_the_originals():
    """The original adds token types by a one-hot product, whose gradient is
    one dense [type_vocab_size, H] tensor: row t is the sum, over the
    positions of segment t, of the gradient at the embedding sum (which is the
    gradient at the word embeddings). Clipping by global norm measures that
    tensor; a gather's one-row-per-token IndexedSlices measured another norm."""
    import tensorflow as tf

    layer = EmbeddingPostprocessor(hidden_size=4, type_vocab_size=3, max_position_embeddings=8, dropout_rate=0.0)
    rng = np.random.default_rng(0)
    word = tf.constant(rng.normal(size=(2, 5, 4)), "float32")
    segments = np.array([[0, 0, 1, 1, 2], [0, 1, 1, 1, 0]], "int32")
    upstream = tf.constant(rng.normal(size=(2, 5, 4)), "float32")
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(word)
        loss = tf.reduce_sum(layer(word, segments) * upstream)
    table_gradient = tape.gradient(loss, layer.token_type_embeddings)
    at_sum = tape.gradient(loss, word).numpy()  # [2, 5, 4]
    expected = np.stack([at_sum[segments == t].sum(axis=0) for t in range(3)])  # [3, 4]
    assert isinstance(table_gradient, tf.Tensor) and not isinstance(table_gradient, tf.IndexedSlices)
    np.testing.assert_allclose(table_gradient.numpy(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(tf.linalg.global_norm([table_gradient])), np.linalg.norm(expected), rtol=1e-5)


def test_ids_and_positions_are_read_as_given():
    """Float ids are not rounded to a bfloat16/float16 compute dtype first
    (30001 read row 29952, as Keras' own Embedding avoids); a negative masked
    position is an error as in the original (`ops.take` read the last token of
    another example)."""
    import tensorflow as tf

    ids = np.array([[30001.0, 257.0, 5.0]])
    for policy in ("float32", "mixed_bfloat16", "mixed_float16"):
        layer = WordEmbedding(vocab_size=30522, hidden_size=4, dtype=policy)
        layer.build((None, None))
        expected = keras.ops.cast(keras.ops.take(layer.embeddings, [30001, 257, 5], axis=0), layer.compute_dtype)
        np.testing.assert_array_equal(np.asarray(layer(ids)[0], "float32"), np.asarray(expected, "float32"))
    x = np.arange(12, dtype="float32").reshape(2, 3, 2)
    with pytest.raises(tf.errors.InvalidArgumentError):
        gather_indexes(x, np.array([[-1], [0]]))
