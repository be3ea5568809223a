"""Fine-tuning on real tokens equals the full-width computation; epochs and curves as asked."""

import gc
import glob
import os
import warnings
import weakref

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.models.classifier import BertClassifier
from keras_bert_impl.models.token_classifier import BertTokenClassifier, token_classification_loss
from keras_bert_impl.training.callbacks import TrainingSummaries
from keras_bert_impl.training.fine_tuning import (
    FineTuningSettings,
    compute_on_real_tokens,
    epoch_layout,
    fit_for_steps,
    on_real_tokens,
)
from keras_bert_impl.training.optimization import create_optimizer
from keras_bert_impl.inference.array_prediction import predict_on_real_tokens
from keras_bert_impl.training.real_tokens import cut_batch, cut_padding
from tests.helpers import randomize, tiny_config
from tests.test_pipeline_options import iterated  # noqa: F401  (a fixture)

SEQ = 24
# The tests of how arrays reach a model (pipelines, batches, Keras' own answers): one encoder layer, as each
# model's tracing (most of their time) grows with the layers.
PIPELINE_LAYERS = 1


def _examples(num, seed, max_length=11):
    """Token inputs with natural-looking lengths: every batch ends well before SEQ."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, max_length + 1, num)
    positions = np.arange(SEQ)[None, :]
    input_mask = (positions < lengths[:, None]).astype(np.int32)
    input_ids = rng.integers(1, 50, (num, SEQ)).astype(np.int32) * input_mask
    segment_ids = ((positions >= lengths[:, None] // 2) & (input_mask > 0)).astype(np.int32)
    return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}


def test_cut_batch_cuts_token_tensors_after_the_longest_row_rounded_to_the_bucket():
    features = _examples(5, seed=0)
    tags = features["input_ids"] % 3
    labels = np.arange(5)
    longest = int(features["input_mask"].sum(axis=1).max())
    for bucket in (1, 4, 8):
        x, cut_tags, cut_labels = cut_batch((features, tags, labels), bucket)
        width = min(SEQ, -(-longest // bucket) * bucket)
        assert x["input_ids"].shape == (5, width) and cut_tags.shape == (5, width)
        np.testing.assert_array_equal(x["input_mask"], features["input_mask"][:, :width])
        np.testing.assert_array_equal(cut_tags, tags[:, :width])
        np.testing.assert_array_equal(cut_labels, labels)
        # Nothing real was cut.
        assert int(np.asarray(x["input_mask"]).sum()) == int(features["input_mask"].sum())


def test_cut_padding_keeps_the_batches_and_their_order():
    features = _examples(40, seed=1)

    def batches():  # Each pipeline is iterated once, as fit iterates its dataset.
        return tf.data.Dataset.from_tensor_slices(features).shuffle(40, seed=3).batch(8)

    full, cut = list(batches()), list(cut_padding(batches(), bucket_size=1))
    assert len(full) == len(cut) == 5
    for a, b in zip(full, cut):
        width = b["input_ids"].shape[1]
        assert width == int(a["input_mask"].numpy().sum(axis=1).max()) < SEQ
        np.testing.assert_array_equal(a["input_ids"][:, :width], b["input_ids"])
        assert not a["input_mask"][:, width:].numpy().any()


def _train(make_model, loss, targets_of, real_tokens_only, steps=4, weighted=False):
    keras.utils.set_random_seed(7)
    model = make_model()
    randomize(model, seed=3, scale=0.2)
    model.compile(optimizer=create_optimizer(1e-2, steps, 1), loss=loss,
                  weighted_metrics=[] if weighted else None)
    features = _examples(32, seed=5)
    dataset = tf.data.Dataset.from_tensor_slices((features, *targets_of(features))).shuffle(32, seed=1).batch(
        8, drop_remainder=True)
    settings = FineTuningSettings(real_tokens_only=real_tokens_only)
    dataset = on_real_tokens(dataset, settings, SEQ)
    # On a CPU the encoder also runs padding-free: both means are under test.
    assert compute_on_real_tokens(model, settings) == real_tokens_only
    widths = [int(batch[0]["input_ids"].shape[1]) for batch in dataset]
    history = model.fit(dataset, epochs=1, steps_per_epoch=steps, verbose=0, shuffle=False)
    return model, history.history["loss"][0], widths


def _assert_same_training(make_model, loss, targets_of, weighted=False):
    full, full_loss, full_widths = _train(make_model, loss, targets_of, False, weighted=weighted)
    cut, cut_loss, cut_widths = _train(make_model, loss, targets_of, True, weighted=weighted)
    assert set(full_widths) == {SEQ} and max(cut_widths) < SEQ  # the cut really happened
    np.testing.assert_allclose(cut_loss, full_loss, rtol=1e-5)
    for a, b in zip(full.weights, cut.weights):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), atol=1e-5, err_msg=a.path)
    return full


def test_classifier_training_on_real_tokens_equals_full_width():
    config = tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, max_position_embeddings=SEQ)
    full = _assert_same_training(
        lambda: BertClassifier(config, num_labels=3, dropout_rate=0.0),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        lambda features: (features["input_ids"][:, 1] % 3,),
    )
    # The steps moved the weights far beyond that tolerance.
    keras.utils.set_random_seed(7)
    untrained = BertClassifier(config, num_labels=3, dropout_rate=0.0)
    randomize(untrained, seed=3, scale=0.2)
    moved = max(float(np.abs(np.asarray(a) - np.asarray(b)).max()) for a, b in zip(full.weights, untrained.weights))
    assert moved > 1e-3


def test_tagger_training_on_real_tokens_equals_full_width():
    # Per-token labels and weights are cut with the inputs; the loss is the
    # mean over labelled pieces, which padding never holds.
    config = tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, max_position_embeddings=SEQ)
    _assert_same_training(
        lambda: BertTokenClassifier(config, num_labels=4, dropout_rate=0.0),
        token_classification_loss(),
        lambda features: (features["input_ids"] % 4, features["input_mask"].astype(np.float32)),
        weighted=True,
    )


def test_prediction_on_real_tokens_equals_full_width_at_real_positions():
    config = tiny_config(max_position_embeddings=SEQ)
    model = BertTokenClassifier(config, num_labels=4)
    randomize(model, seed=2, scale=0.2)
    features = _examples(13, seed=9)
    full = model.predict(features, batch_size=4, verbose=0)
    assert compute_on_real_tokens(model, FineTuningSettings())
    cut = predict_on_real_tokens(model, features, batch_size=4, bucket_size=1)
    assert cut.shape == full.shape
    real = features["input_mask"].astype(bool)
    np.testing.assert_allclose(cut[real], full[real], atol=1e-5)
    # After each batch's longest row (bucket 1): zeros.
    for start in range(0, 13, 4):
        width = int(features["input_mask"][start:start + 4].sum(axis=1).max())
        assert not cut[start:start + 4, width:].any()
        assert cut[start:start + 4, width - 1].any()


@pytest.mark.parametrize("steps, epochs, expected", [(63, 2.0, (2, 32)), (93, 3.0, (3, 31)), (15, 0.5, (1, 15)),
                                                      (3, 5.0, (3, 1))])
def test_epoch_layout_shows_the_epochs_asked_for(steps, epochs, expected):
    shown, per_epoch = epoch_layout(steps, epochs)
    assert (shown, per_epoch) == expected
    assert (shown - 1) * per_epoch < steps <= shown * per_epoch


def _event_scalars(log_dir, tag):
    values = {}
    for path in glob.glob(os.path.join(log_dir, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag == tag:
                    values[event.step] = float(tf.make_ndarray(value.tensor))
    return values


def test_fit_for_steps_shows_two_epochs_and_summaries_do_not_jump(tmp_path, capfd, monkeypatch):
    # A model that does not learn (learning rate 0): each batch's loss is
    # known in advance, so every curve point can be checked. It has no
    # original-layout weights: the checkpoints are recorded, not written.
    from keras_bert_impl.training import checkpointing

    saved = []
    monkeypatch.setattr(checkpointing, "save_training_checkpoint",
                        lambda model, optimizer, directory, keep=5: saved.append(int(optimizer.iterations.numpy())))
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(10, 3)).astype(np.float32), rng.integers(0, 2, 10)
    per_example = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)(y, model(x)).numpy()
    batch_losses = [per_example[i:i + 2].mean() for i in range(0, 10, 2)]
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(2).repeat()
    # 5 batches per pass, 2.2 passes: 11 steps, shown as 3 epochs of 4 (then 3).
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step = fit_for_steps(model, dataset, 11, 2.2, str(tmp_path), save_checkpoints_steps=100, log=lambda m: None)
    assert step == 11
    assert saved == [11]  # the last step, though not a multiple of save_checkpoints_steps
    out = capfd.readouterr().out
    assert "Epoch 3/3" in out and "Epoch 4/" not in out
    assert not [w for w in caught if "shuffle" in str(w.message)]
    # every_n_steps = max(1, min(100, 100, 11 // 20)) = 1: each point is that step's batch loss,
    # not a running mean since the start of its epoch.
    logged = _event_scalars(str(tmp_path), "train/loss")
    expected = {s: batch_losses[(s - 1) % 5] for s in range(1, 12)}
    assert sorted(logged) == sorted(expected)
    for s, value in logged.items():
        assert value == pytest.approx(expected[s], rel=1e-5), s


def test_summaries_average_over_the_window_across_an_epoch_boundary(tmp_path):
    keras.utils.set_random_seed(2)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(6, 3)).astype(np.float32), rng.integers(0, 2, 6)
    per_example = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)(y, model(x)).numpy()
    batch_losses = [per_example[i:i + 2].mean() for i in range(0, 6, 2)]
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(2).repeat()
    # Epochs of 3 steps, a point every 2 steps: step 4's window holds step 3 (epoch 1) and step 4 (epoch 2).
    model.fit(dataset, epochs=2, steps_per_epoch=3, verbose=0, callbacks=[TrainingSummaries(str(tmp_path), 2)])
    logged = _event_scalars(str(tmp_path), "train/loss")
    losses = batch_losses * 2
    assert sorted(logged) == [2, 4, 6]
    for s in (2, 4, 6):
        assert logged[s] == pytest.approx((losses[s - 2] + losses[s - 1]) / 2, rel=1e-5), s


def test_summaries_write_each_step_once_under_gradient_accumulation(tmp_path):
    """Two micro-batches per optimizer step: each point is written once, by
    the micro-batch that completes its step, and averages that step's two."""
    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(0.0, gradient_accumulation_steps=2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(16, 3)).astype(np.float32), rng.integers(0, 2, 16)
    per_example = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)(y, model(x)).numpy()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(2)  # 8 micro-batches: optimizer steps 1..4
    model.fit(dataset, epochs=1, verbose=0, callbacks=[TrainingSummaries(str(tmp_path), 1)])
    steps = [event.step for path in glob.glob(os.path.join(str(tmp_path), "events.out.tfevents.*"))
             for event in tf.compat.v1.train.summary_iterator(path)
             for value in event.summary.value if value.tag == "train/loss"]
    assert sorted(steps) == [1, 2, 3, 4]  # no step 0, no step twice
    logged = _event_scalars(str(tmp_path), "train/loss")
    for s in (1, 2, 3, 4):  # step s: micro-batches 2s-1 and 2s, examples 4(s-1) .. 4s-1
        assert logged[s] == pytest.approx(per_example[4 * (s - 1):4 * s].mean(), rel=1e-5), s


def test_prediction_keeps_a_classifier_output_as_wide_as_the_cut():
    # 8 classes, and batches cut to 8 columns: the logits are not per token.
    config = tiny_config(max_position_embeddings=SEQ)
    model = BertClassifier(config, num_labels=8)
    randomize(model, seed=5, scale=0.2)
    features = _examples(6, seed=2, max_length=7)
    full = model.predict(features, batch_size=3, verbose=0)
    cut = predict_on_real_tokens(model, features, batch_size=3, bucket_size=8)
    assert cut.shape == full.shape == (6, 8)
    np.testing.assert_allclose(cut, full, atol=1e-5)


def test_prediction_pads_back_every_sequence_axis_and_only_those():
    """Attention probabilities [batch, heads, seq, seq] come back at the full
    width on both sequence axes (they failed to concatenate), masked-LM
    logits [batch, positions, vocab] as they are (they were padded to the
    width), and nothing is padded without cutting."""
    from keras_bert_impl.models.bert_model import BertModel
    from keras_bert_impl.models.pretraining import BertPretrainingModel

    config = tiny_config(max_position_embeddings=SEQ, num_hidden_layers=PIPELINE_LAYERS)
    features = _examples(9, seed=4)
    encoder = BertModel(config, output_attention_probs=True)
    randomize(encoder, seed=1, scale=0.2)
    full = encoder.predict(features, batch_size=4, verbose=0)
    cut = predict_on_real_tokens(encoder, features, batch_size=4, bucket_size=1)
    real = features["input_mask"].astype(bool)
    for layer, probs in enumerate(cut["attention_probs"]):
        assert probs.shape == full["attention_probs"][layer].shape == (9, config.num_attention_heads, SEQ, SEQ)
        pairs = real[:, None, :, None] & real[:, None, None, :]
        np.testing.assert_allclose(probs[np.broadcast_to(pairs, probs.shape)],
                                   full["attention_probs"][layer][np.broadcast_to(pairs, probs.shape)], atol=1e-5)

    pretraining = BertPretrainingModel(config)
    randomize(pretraining, seed=2, scale=0.2)
    with_positions = dict(features, masked_lm_positions=np.tile(np.array([[1, 0, 1]], np.int32), (9, 1)))
    expected = pretraining.predict(with_positions, batch_size=4, verbose=0)["masked_lm_logits"]
    for cut_batches in (True, False):
        got = predict_on_real_tokens(pretraining, with_positions, batch_size=4, cut=cut_batches)["masked_lm_logits"]
        assert got.shape == expected.shape == (9, 3, config.vocab_size)
        np.testing.assert_allclose(got, expected, atol=1e-5)


def test_prediction_traces_once_per_model_sees_new_weights_and_lets_the_model_go():
    # An evaluation after each epoch calls predict_on_real_tokens with the same
    # model again: it must not trace again, must read the weights as they are
    # now, and must not keep the model alive once the caller drops it.
    config = tiny_config(max_position_embeddings=SEQ)
    model = BertClassifier(config, num_labels=3)
    randomize(model, seed=3, scale=0.2)
    traces = []
    call = model.call
    model.call = lambda *args, **kwargs: (traces.append(1), call(*args, **kwargs))[1]
    predict_on_real_tokens(model, _examples(8, seed=4), batch_size=4, bucket_size=1)
    assert len(traces) == 1
    features = _examples(9, seed=5, max_length=20)  # Other widths, a short last batch.
    randomize(model, seed=6, scale=0.2)
    again = predict_on_real_tokens(model, features, batch_size=4, bucket_size=1)
    assert len(traces) == 1
    np.testing.assert_allclose(again, model.predict(features, batch_size=4, verbose=0), atol=1e-5)

    model_ref = weakref.ref(model)
    del model, call
    gc.collect()
    assert model_ref() is None


def test_real_tokens_only_keeps_xla_off_and_is_decided_where_a_model_is_loaded(tmp_path, monkeypatch):
    """The real-token row count changes per batch, which XLA cannot compile. Was:
    no layer said so, so Keras' jit_compile="auto" chose XLA on a GPU and `fit`
    failed ("must be a compile-time constant"); and a TextClassifier saved on a
    CPU turned it back on when loaded on a GPU, where a new one has it off."""
    from keras.src.trainers.trainer import model_supports_jit  # what jit_compile="auto" consults

    from keras_bert_impl.inference.padding_free import set_real_tokens_only
    from keras_bert_impl.tasks.text_classifier import TextClassifier
    from keras_bert_impl.tokenization.preprocessor import BertPreprocessor

    model = BertClassifier(tiny_config(), num_labels=2)
    assert model_supports_jit(model)
    set_real_tokens_only(model)
    assert not model_supports_jit(model)
    model.save(tmp_path / "classifier.keras")
    assert not model_supports_jit(keras.saving.load_model(tmp_path / "classifier.keras"))
    set_real_tokens_only(model, False)
    assert model_supports_jit(model)

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + [f"w{i}" for i in range(46)]
    on_cpu = TextClassifier(tiny_config(), 2, BertPreprocessor(vocab, max_seq_length=8))
    assert on_cpu.bert.encoder.real_tokens_only  # this CPU machine
    on_cpu.save(tmp_path / "text.keras")
    visible = tf.config.list_logical_devices
    monkeypatch.setattr(tf.config, "list_logical_devices",
                        lambda kind=None: ["/GPU:0"] if kind == "GPU" else visible(kind))
    on_gpu = keras.saving.load_model(tmp_path / "text.keras")
    assert not on_gpu.bert.encoder.real_tokens_only and model_supports_jit(on_gpu)


def test_cut_length_is_used_lengths_in_numpy():
    # `predict_on_real_tokens` cuts NumPy batches by `cut_length`; the training pipelines by `used_length`.
    from keras_bert_impl.inference.padding_free import used_length
    from keras_bert_impl.inference.array_prediction import cut_length

    rng = np.random.default_rng(7)
    masks = [np.zeros((3, 5), np.int32), np.ones((1, 1), np.int32), np.ones((2, 9), np.int32)]
    for _ in range(40):
        lengths = rng.integers(0, 13, rng.integers(1, 5))
        masks.append((np.arange(12)[None, :] < lengths[:, None]).astype(np.int32))
    masks.append(np.array([[1, 0, 1, 0, 0, 0]]))  # a hole: the last real position counts
    for mask in masks:
        for bucket_size in (1, 3, 8, 16):
            assert cut_length(mask, bucket_size) == int(used_length(mask, bucket_size)), (mask, bucket_size)


def test_evaluate_of_a_dict_of_arrays_is_keras_evaluate_without_the_autotuning_thread(iterated):
    """Our models' `evaluate` of a dict of arrays (with labels, and sample weights) batches them in a pipeline
    without tf.data's autotuning thread: Keras' own loss and metrics over the same batches (a short last one
    included). `steps`, a dataset, or sample weights without labels go to Keras as they are."""
    config = tiny_config(max_position_embeddings=SEQ, num_hidden_layers=PIPELINE_LAYERS)
    x = _examples(9, seed=5)
    labels = np.array([0, 1, 2, 1, 0, 2, 2, 1, 0])
    weights = np.linspace(0.5, 2.0, 9).astype("float32")
    model = BertClassifier(config, num_labels=3)
    randomize(model, seed=6, scale=0.2)
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=[keras.metrics.SparseCategoricalAccuracy()])
    for extra in ({}, {"sample_weight": weights}):
        ours = model.evaluate(x, labels, batch_size=4, verbose=0, return_dict=True, **extra)
        assert iterated and all(enabled is False for enabled in iterated), iterated
        iterated.clear()
        keras_own = keras.Model.evaluate(model, x, labels, batch_size=4, verbose=0, return_dict=True, **extra)
        assert None in iterated  # Keras' own array pipeline: tf.data's default options, autotuning on
        iterated.clear()
        assert ours.keys() == keras_own.keys()
        for name in ours:
            np.testing.assert_allclose(ours[name], keras_own[name], rtol=1e-6, err_msg=name)
    # The weights change the loss: the test would see them dropped.
    assert not np.isclose(model.evaluate(x, labels, batch_size=4, verbose=0, return_dict=True)["loss"],
                          model.evaluate(x, labels, batch_size=4, verbose=0, return_dict=True,
                                         sample_weight=weights)["loss"])
    iterated.clear()
    keras_calls = [lambda: model.evaluate(x, labels, verbose=0, steps=1),
                   lambda: model.evaluate(tf.data.Dataset.from_tensor_slices((x, labels)).batch(4), verbose=0),
                   lambda: model.evaluate(x, None, verbose=0, sample_weight=weights)]
    for call in keras_calls[:2]:
        call()
        assert None in iterated
        iterated.clear()
    with pytest.raises(ValueError, match="None values not supported"):  # Keras' own answer to weights alone
        keras_calls[2]()


def _twin_classifiers():
    """Two classifiers with the same weights and no dropout, compiled alike (plain SGD: each step is one
    gradient, so a step taken on other rows, or rows counted twice, shows in the weights)."""
    config = tiny_config(max_position_embeddings=SEQ, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                         num_hidden_layers=PIPELINE_LAYERS)
    models = [BertClassifier(config, num_labels=3, dropout_rate=0.0) for _ in range(2)]
    randomize(models[0], seed=7, scale=0.2)
    models[1].set_weights(models[0].get_weights())
    for model in models:
        model.compile(optimizer=keras.optimizers.SGD(0.5),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=[keras.metrics.SparseCategoricalAccuracy()])
    return models


def _assert_trained_as_keras_does(ours, keras_own, history, keras_history):
    assert history.keys() == keras_history.keys()
    for name in history:
        np.testing.assert_allclose(history[name], keras_history[name], rtol=2e-5, err_msg=name)
    for mine, theirs in zip(ours.weights, keras_own.weights):
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-4, atol=1e-6, err_msg=mine.path)


def test_fit_of_a_dict_of_arrays_is_keras_fit_without_the_autotuning_thread(iterated):
    """Our models' `fit` of a dict of arrays batches them in a pipeline without tf.data's autotuning thread
    (whose release at each epoch's end can stall training): Keras' own `fit` on the same arrays, step for step
    (a short last batch, sample and class weights, the last rows held out by `validation_split` or given as
    validation arrays), checked by the history and the weights of a twin model trained by Keras itself."""
    x = _examples(11, seed=8)
    labels = np.array([0, 1, 2, 1, 0, 2, 2, 1, 0, 1, 2])
    weights = np.linspace(0.5, 2.0, 11).astype("float32")
    validation = (_examples(5, seed=9), np.array([2, 1, 0, 0, 1]))
    runs = ({"sample_weight": weights, "validation_split": 0.25},  # 8 rows: batches of 4, 4; 3 held out
            {"class_weight": {0: 2.0, 1: 0.5, 2: 1.0}, "validation_data": validation},
            {"validation_data": validation + (np.linspace(1.0, 2.0, 5),), "validation_batch_size": 2})
    # One pair of twins for every run, each run from the same weights: a model's train step is traced once, not
    # once a run (the optimizer, plain SGD, keeps no state a run could hand the next).
    twins = _twin_classifiers()
    initial = twins[0].get_weights()

    def reset_twins():
        for model in twins:
            model.set_weights(initial)
        return twins

    for options in runs:
        ours, keras_own = reset_twins()
        history = ours.fit(x, labels, batch_size=4, epochs=2, shuffle=False, verbose=0, **options).history
        assert len(iterated) >= 3 and all(enabled is False for enabled in iterated), (options, iterated)
        iterated.clear()
        keras_history = keras.Model.fit(keras_own, x, labels, batch_size=4, epochs=2, shuffle=False, verbose=0,
                                        **options).history
        assert None in iterated  # Keras' own array pipeline: tf.data's default options, autotuning on
        iterated.clear()
        assert "val_loss" in history
        _assert_trained_as_keras_does(ours, keras_own, history, keras_history)

    # Shuffled: one batch holds every row, so the order cannot change the step, but a row lost or counted twice
    # would.
    ours, keras_own = reset_twins()
    history = ours.fit(x, labels, batch_size=16, epochs=3, verbose=0).history
    _assert_trained_as_keras_does(ours, keras_own, history,
                          keras.Model.fit(keras_own, x, labels, batch_size=16, epochs=3, verbose=0).history)
    iterated.clear()

    with pytest.raises(ValueError, match=r"validation_split=0.95 of 11 examples leaves 0 for training and 11 "):
        ours.fit(x, labels, validation_split=0.95, verbose=0)
    ours.fit(x, labels, batch_size=4, steps_per_epoch=2, verbose=0)  # steps asked for: Keras' own fit
    assert None in iterated


def test_predict_of_a_dict_of_arrays_is_keras_predict_without_a_dataset(iterated):
    """Our models' `predict` of a dict of arrays runs one traced function over NumPy batches: Keras' own
    `predict`'s outputs (every output, every position, a short last batch), and no `tf.data` iterator.
    Callbacks, `steps`, a dataset or a distribution strategy go to Keras' `predict`."""
    from keras_bert_impl.models.bert_model import BertModel
    from keras_bert_impl.models.pretraining import BertPretrainingModel

    config = tiny_config(max_position_embeddings=SEQ, num_hidden_layers=PIPELINE_LAYERS)
    features = _examples(9, seed=4)
    with_positions = dict(features, masked_lm_positions=np.tile(np.array([[1, 0, 1]], np.int32), (9, 1)))
    models = [(BertModel(config, output_attention_probs=True), features),
              (BertPretrainingModel(config), with_positions), (BertClassifier(config, num_labels=3), features)]
    for seed, (model, x) in enumerate(models):
        randomize(model, seed=seed, scale=0.2)
        ours = model.predict(x, batch_size=4, verbose=0)
        assert iterated == []
        keras_own = keras.Model.predict(model, x, batch_size=4, verbose=0)
        assert iterated  # Keras' own pipeline, as the spy sees it
        iterated.clear()
        tf.nest.assert_same_structure(ours, keras_own)
        for got, expected in zip(tf.nest.flatten(ours), tf.nest.flatten(keras_own)):
            assert got.shape == expected.shape and got.dtype == expected.dtype
            np.testing.assert_allclose(got, expected, atol=1e-6)
        tensors = {key: tf.constant(value) for key, value in x.items()}
        np.testing.assert_allclose(tf.nest.flatten(model.predict(tensors, verbose=0))[0],
                                   tf.nest.flatten(keras_own)[0], atol=1e-6)
        assert iterated == []

    model, x = models[-1]
    keras_calls = [lambda: model.predict(x, verbose=0, callbacks=[keras.callbacks.Callback()]),
                   lambda: model.predict(x, verbose=0, steps=1),
                   lambda: model.predict(tf.data.Dataset.from_tensor_slices(x).batch(4), verbose=0)]
    for call in keras_calls:
        call()
        assert iterated
        iterated.clear()
    with tf.distribute.OneDeviceStrategy("/cpu:0").scope():
        model.predict(x, verbose=0)
    assert iterated
