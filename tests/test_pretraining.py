"""Pretraining heads, losses and metrics against NumPy transcriptions of the
original run_pretraining.py (get_masked_lm_output, get_next_sentence_output,
metric_fn)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.checkpoints.original import original_weights
from keras_bert_impl.models.pretraining import BertPretrainingModel, split_pretraining_features
from keras_bert_impl.models.pretraining_losses import masked_lm_loss, next_sentence_loss
from tests.helpers import random_inputs, randomize, tiny_config
from tests.numpy_bert import bert_forward, mlm_logits, nsp_logits, pretraining_losses


def pretraining_batch(config, batch=6, seq=12, predictions=4, seed=7, pad=False):
    rng = np.random.default_rng(seed)
    features = random_inputs(config, batch=batch, seq=seq, seed=seed, pad=pad)
    features["masked_lm_positions"] = rng.integers(0, seq, (batch, predictions)).astype("int32")
    features["masked_lm_ids"] = rng.integers(0, config.vocab_size, (batch, predictions)).astype("int32")
    weights = np.ones((batch, predictions), "float32")
    weights[::2, -2:] = 0.0  # padded prediction slots, as the data generator writes them
    features["masked_lm_positions"][weights == 0] = 0
    features["masked_lm_ids"][weights == 0] = 0
    features["masked_lm_weights"] = weights
    features["next_sentence_labels"] = rng.integers(0, 2, (batch, 1)).astype("int32")
    return features


@pytest.fixture(scope="module")
def model_and_batch():
    config = tiny_config(vocab_size=40)
    model = BertPretrainingModel(config)
    randomize(model, seed=21, scale=0.2)
    return config, model, pretraining_batch(config)


def reference(config, model, f):
    w = original_weights(model)
    layers, pooled, _ = bert_forward(w, config.to_dict(), f["input_ids"], f["input_mask"], f["segment_ids"])
    mlm = mlm_logits(w, config.to_dict(), layers[-1], f["masked_lm_positions"])
    nsp = nsp_logits(w, pooled)
    return mlm, nsp


@pytest.mark.parametrize("pad", [False, True])
def test_head_logits_match_reference(model_and_batch, pad):
    # With padded rows, the last layer (computed only at [CLS] and the masked
    # positions) still attends with the original's -10000 mask.
    config, model, f = model_and_batch
    if pad:
        f = pretraining_batch(config, pad=True, seed=11)
    x, _ = split_pretraining_features(f)
    out = model(x)
    ref_mlm, ref_nsp = reference(config, model, f)
    np.testing.assert_allclose(out["masked_lm_logits"], ref_mlm, atol=1e-4)
    np.testing.assert_allclose(out["next_sentence_logits"], ref_nsp, atol=1e-5)


def test_gradients_equal_the_full_last_layer(model_and_batch):
    """The pretraining model computes its last layer only at [CLS] and the
    masked positions; the loss and every weight's gradient must equal those
    of the whole BERT (all rows of every layer) followed by the same heads."""
    config, model, _ = model_and_batch
    f = pretraining_batch(config, pad=True, seed=5)
    x, y = split_pretraining_features({k: tf.constant(v) for k, v in f.items()})

    def full_logits():
        encoded = model.bert({k: x[k] for k in ("input_ids", "input_mask", "segment_ids")})
        mlm = model.masked_lm_head(encoded["sequence_output"], x["masked_lm_positions"])
        return {"masked_lm_logits": mlm, "next_sentence_logits": model.next_sentence_head(encoded["pooled_output"])}

    losses, gradients = [], []
    for logits_fn in (lambda: model(x), full_logits):
        with tf.GradientTape() as tape:
            loss = model.compute_loss(x, y, logits_fn())
        losses.append(float(loss))
        gradients.append([tf.convert_to_tensor(g) for g in tape.gradient(loss, model.trainable_variables)])
    assert losses[0] == pytest.approx(losses[1], rel=1e-6)
    for variable, restricted, full in zip(model.trainable_variables, *gradients):
        np.testing.assert_allclose(restricted, full, rtol=1e-4, atol=1e-6, err_msg=variable.path)


def test_loss_functions_match_original_formulas():
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 2, (3, 5, 11)).astype("float32")
    ids = rng.integers(0, 11, (3, 5))
    weights = (rng.random((3, 5)) > 0.3).astype("float32")
    nsp = rng.normal(0, 2, (3, 2)).astype("float32")
    labels = np.array([0, 1, 1])
    ref = pretraining_losses(logits.astype(np.float64), ids, weights, nsp.astype(np.float64), labels)
    mlm, _ = masked_lm_loss(logits, ids, weights)
    nsp_loss, _ = next_sentence_loss(nsp, labels)
    # `loss` uses the original's +1e-5 in the denominator.
    np.testing.assert_allclose(float(mlm) + float(nsp_loss), ref["loss"], rtol=1e-6)
    # Hand check of the epsilon: all-zero weights give 0, not NaN.
    zero, _ = masked_lm_loss(logits, ids, np.zeros_like(weights))
    assert float(zero) == 0.0


def test_evaluate_accumulates_metrics_like_metric_fn(model_and_batch):
    config, model, f = model_and_batch
    model.compile(optimizer="sgd")
    dataset = tf.data.Dataset.from_tensor_slices(f).batch(2).map(split_pretraining_features)
    results = model.evaluate(dataset, return_dict=True, verbose=0)

    ref_mlm, ref_nsp = reference(config, model, f)
    ref = pretraining_losses(ref_mlm, f["masked_lm_ids"], f["masked_lm_weights"], ref_nsp, f["next_sentence_labels"])
    # Metrics are over all evaluated examples, weighted by masked_lm_weights.
    for key in ("masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy", "next_sentence_loss"):
        np.testing.assert_allclose(results[key], ref[key], rtol=1e-4, atol=1e-5, err_msg=key)
    # Keras' `loss` is the mean of per-batch losses; compute that from the reference.
    batch_losses = []
    for start in range(0, len(f["input_ids"]), 2):
        part = slice(start, start + 2)
        r = pretraining_losses(
            ref_mlm[part], f["masked_lm_ids"][part], f["masked_lm_weights"][part], ref_nsp[part], f["next_sentence_labels"][part]
        )
        batch_losses.append(r["loss"])
    np.testing.assert_allclose(results["loss"], np.mean(batch_losses), rtol=1e-4)


def test_fit_reduces_loss_and_trains_tied_embeddings():
    # Seeded: the initial weights (and so whether the last of 12 masked
    # tokens is learnt in 30 epochs) would otherwise follow the tests before.
    keras.utils.set_random_seed(0)
    config = tiny_config(vocab_size=30, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertPretrainingModel(config)
    f = pretraining_batch(config, batch=8, seed=3)
    x, y = split_pretraining_features(f)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    embeddings_before = model.bert.word_embedding.embeddings.numpy().copy()
    history = model.fit(x, y, batch_size=8, epochs=30, verbose=0).history
    assert history["loss"][-1] < 0.5 * history["loss"][0]
    assert history["masked_lm_accuracy"][-1] > 0.9
    # The MLM decoder is the embedding table: the same variable, trained.
    assert model.masked_lm_head.word_embedding.embeddings is model.bert.word_embedding.embeddings
    assert not np.allclose(model.bert.word_embedding.embeddings.numpy(), embeddings_before)
    # ... and counted once among the trainable weights.
    assert len(model.trainable_weights) == len({id(v) for v in model.trainable_weights})
