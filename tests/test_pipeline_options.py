"""Every `tf.data` iterator the package makes runs without tf.data's autotuning thread.

With tf.data's defaults each iterator starts a model thread, and releasing the
iterator can wait out that thread's sleep (up to 60 s; `data/pipeline_options.py`,
`benchmarks/bench_iterator_release.py`). The checks spy on `tf.data.Dataset.__iter__`
(which `for`, `iter` and Keras' `fit`/`evaluate`/`predict` all call) and read each
iterated pipeline's options: tf.data's default is `None` (autotuning on).
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.data.pipeline_options import array_batches, array_epochs, without_autotune_thread
from keras_bert_impl.data.pretraining_dataset import count_records, pretraining_dataset
from keras_bert_impl.tasks.masked_lm import NextSentencePredictor
from keras_bert_impl.tasks.text_classifier import TextClassifier
from keras_bert_impl.tasks.text_data import text_dataset
from keras_bert_impl.tasks.text_embedder import TextEmbedder
from keras_bert_impl.training.fine_tuning import FineTuningSettings, TrainingData, training_dataset
from keras_bert_impl.inference.array_prediction import predict_on_real_tokens
from tests.test_python_tasks import MAX_SEQ_LENGTH, write_tiny_release
from tests.test_run_pretraining import write_records


@pytest.fixture
def iterated(monkeypatch):
    """The `autotune.enabled` option of every dataset iterated while the test runs."""
    seen = []
    original = tf.data.Dataset.__iter__

    def spy(dataset):
        seen.append(dataset.options().autotune.enabled)
        return original(dataset)

    monkeypatch.setattr(tf.data.Dataset, "__iter__", spy)
    return seen


@pytest.fixture(scope="module")
def tiny_release(tmp_path_factory):
    return write_tiny_release(tmp_path_factory.mktemp("tiny_release"))


def test_without_autotune_thread_turns_autotuning_off_and_keeps_elements_and_a_callers_choice():
    dataset = tf.data.Dataset.range(5).map(lambda x: x * 3, num_parallel_calls=tf.data.AUTOTUNE).batch(2)
    assert dataset.options().autotune.enabled is None
    plain = without_autotune_thread(dataset)
    assert plain.options().autotune.enabled is False
    assert [b.tolist() for b in plain.as_numpy_iterator()] == [[0, 3], [6, 9], [12]]
    for choice in (True, False):
        options = tf.data.Options()
        options.autotune.enabled = choice
        assert without_autotune_thread(dataset.with_options(options)).options().autotune.enabled is choice


def test_array_batches_are_keras_batches_of_the_arrays():
    arrays = {"input_ids": np.arange(14).reshape(7, 2), "input_mask": np.ones((7, 2), np.int32)}
    batches = list(array_batches(arrays, 3).as_numpy_iterator())
    assert [len(b["input_ids"]) for b in batches] == [3, 3, 1]
    np.testing.assert_array_equal(np.concatenate([b["input_ids"] for b in batches]), arrays["input_ids"])


def test_array_epochs_draw_a_new_order_of_every_row_on_each_pass():
    tf.random.set_seed(3)
    arrays = ({"input_ids": np.arange(20).reshape(10, 2)}, np.arange(10.0), [np.arange(10), np.arange(10) * 2])
    dataset = array_epochs(arrays, 4)
    assert dataset.options().autotune.enabled is False
    assert dataset.element_spec[1].dtype == tf.float32  # float64 in Keras' floatx, as Keras' own fit casts it
    assert dataset.element_spec[2][1].dtype == tf.int64
    orders = []
    for _ in range(2):
        batches = list(dataset.as_numpy_iterator())
        assert [len(b[1]) for b in batches] == [4, 4, 2]
        order = np.concatenate([b[1] for b in batches]).astype(int)
        assert sorted(order) == list(range(10))
        for features, targets, (first, second) in batches:  # each row's parts stay together
            np.testing.assert_array_equal(features["input_ids"][:, 0], targets * 2)
            np.testing.assert_array_equal(second, first * 2)
        orders.append(order.tolist())
    assert orders[0] != orders[1] and orders[0] != list(range(10))
    in_order = [b[1].tolist() for b in array_epochs(arrays, 4, shuffle=False).as_numpy_iterator()]
    assert in_order == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_the_input_pipelines_start_no_autotuning_thread(tmp_path, iterated):
    records = tmp_path / "records.tfrecord"
    write_records(records, 12, vocab_size=50, seq=16, predictions=3)
    assert count_records([str(records)]) == 12
    for is_training in (True, False):
        next(iter(pretraining_dataset([str(records)], 4, 16, 3, is_training=is_training, seed=1)))

    inputs = {key: np.ones((6, 8), np.int32) for key in ("input_ids", "input_mask", "segment_ids")}
    data = TrainingData(inputs=inputs, targets=np.zeros(6, np.int32), num_examples=6, unit="training examples",
                        description="6 examples", source="-")
    next(iter(training_dataset(data, FineTuningSettings(train_batch_size=2, seed=0), cut_padding=False)))

    next(iter(text_dataset(["a b", "c"], np.array([0, 1]), batch_size=2)))
    next(iter(text_dataset(tf.data.Dataset.from_tensor_slices(["a b", "c"]), batch_size=2)))
    assert len(iterated) >= 6 and all(enabled is False for enabled in iterated), iterated


def test_the_task_models_predict_and_fit_without_autotuning_threads(tiny_release, iterated):
    texts = ["bert is a model.", "it rained.", "penguins are flightless birds."]
    classifier = TextClassifier.from_release(tiny_release, num_classes=2, max_seq_length=MAX_SEQ_LENGTH)
    # `predict_on_real_tokens` (the predictions without callbacks) slices NumPy arrays: no dataset at all.
    classifier.predict(texts)
    TextEmbedder.from_release(tiny_release, max_seq_length=MAX_SEQ_LENGTH).predict(texts, verbose=0)
    NextSentencePredictor.from_release(tiny_release, max_seq_length=MAX_SEQ_LENGTH).predict(
        texts, texts[::-1], verbose=0)
    assert iterated == []
    classifier.predict(texts, verbose=0, callbacks=[keras.callbacks.Callback()])  # Keras' predict on the token ids
    classifier.compile()
    classifier.fit(texts, [0, 1, 0], batch_size=3, epochs=2, verbose=0, validation_data=(texts, [0, 1, 0]))
    assert len(iterated) >= 5 and all(enabled is False for enabled in iterated), iterated


def test_predict_on_real_tokens_starts_no_dataset_iterator(tiny_release, iterated):
    model = TextEmbedder.from_release(tiny_release, max_seq_length=MAX_SEQ_LENGTH)
    inputs = {key: np.ones((5, MAX_SEQ_LENGTH), np.int32) for key in ("input_ids", "input_mask", "segment_ids")}
    assert predict_on_real_tokens(model, inputs, 2).shape == (5, model.bert_config.hidden_size)
    assert iterated == []
