"""Texts longer than max_seq_length (`tokenization.long_text`): the splitting against hand-computed
values, the TF ops against the Python lists, `TextClassifier`'s head+tail and pooled windows against an
independent float64 BERT (`tests/numpy_bert.py`) on the Python tokenizer's word pieces, the raw-text export
against `predict` on a 2,000-token text, `bert-run-classifier --long_text` end to end, and bad options as one line."""

import json
import random

import numpy as np
import pytest

from keras_bert_impl.tokenization.long_text import (
    LongTextOptions,
    default_head_tokens,
    head_tail,
    pool_window_logits,
    window_spans,
    windows,
)
from tests.helpers import randomize, tiny_config
from tests.numpy_bert import bert_forward, softmax

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "the", "plot", "was", "##s", "and",
         "great", "awful", "a", "it"]
WORDS = ["good", "bad", "film", "the", "plots", "was", "and", "great", "awful", "a", "it"]


# -- on lists, by hand ---------------------------------------------------------------------------------


def test_head_tail_keeps_sun_et_als_128_and_382_at_512():
    assert default_head_tokens(512) == 128
    ids = list(range(2000))
    kept = head_tail(ids, default_head_tokens(512), 510)
    assert kept == list(range(128)) + list(range(2000 - 382, 2000))
    assert head_tail(list(range(510)), 128, 510) == list(range(510))  # fits: whole
    assert head_tail(list(range(12)), 4, 6) == [0, 1, 2, 3, 10, 11]


def test_window_spans_by_hand():
    # 20 pieces, windows of 8 every 5: starts 0, 5, 10, 15? 10+8=18 < 20, so one more at 15 ending at 20.
    assert window_spans(20, 8, 5) == [(0, 8), (5, 13), (10, 18), (15, 20)]
    assert window_spans(8, 8, 5) == [(0, 8)]
    assert window_spans(9, 8, 8) == [(0, 8), (8, 9)]
    assert window_spans(9, 8, 1) == [(0, 8), (1, 9)]
    assert windows([1, 2, 3, 4, 5], 3, 2) == [[1, 2, 3], [3, 4, 5]]
    # Every piece is in some window, and no window is past the room.
    for length in range(0, 40):
        spans = window_spans(length, 6, 4)
        covered = {i for start, end in spans for i in range(start, end)}
        assert covered == set(range(length)) and all(end - start <= 6 for start, end in spans)


def test_pooling_by_hand():
    logits = [[1.0, 2.0], [3.0, -4.0], [0.5, 0.5], [-1.0, 7.0]]
    assert pool_window_logits(logits, [0, 0, 0, 1], 2).tolist() == [[1.5, -0.5], [-1.0, 7.0]]
    assert pool_window_logits(logits, [0, 0, 0, 1], 2, "max").tolist() == [[3.0, 2.0], [-1.0, 7.0]]
    with pytest.raises(ValueError, match="every one of the 3 texts"):
        pool_window_logits(logits, [0, 0, 0, 1], 3)


@pytest.mark.parametrize("options, message", [
    (LongTextOptions("windows", window_stride=0), "window_stride 0 must lie in [1, 14]"),
    (LongTextOptions("windows", window_stride=16), "window_stride 16 must lie in [1, 14]"),
    (LongTextOptions("windows", window_stride=15), "more than 14 skips word pieces"),
    (LongTextOptions("head_tail", head_tokens=-1), "head_tokens -1 must lie in [0, 14]"),
    (LongTextOptions("head_tail", head_tokens=15), "head_tokens 15 must lie in [0, 14]"),
    (LongTextOptions("slide"), "long_text 'slide' is not one of cut, head_tail, windows"),
    (LongTextOptions("windows", window_pooling="sum"), "window_pooling 'sum' is not one of mean, max"),
    (LongTextOptions("head_tail", window_stride=4), "window_stride applies with long_text=windows, not head_tail"),
    (LongTextOptions("cut", head_tokens=4), "head_tokens applies with long_text=head_tail, not cut"),
])
def test_bad_options_are_one_line(options, message):
    with pytest.raises(ValueError) as raised:
        options.resolved(16)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_defaults_and_limits_resolve():
    assert LongTextOptions("windows").resolved(16) == LongTextOptions("windows", window_stride=8, window_pooling="mean")
    assert LongTextOptions("head_tail").resolved(16) == LongTextOptions("head_tail", head_tokens=4)
    assert LongTextOptions("head_tail", head_tokens=0).resolved(16).head_tokens == 0  # tail only
    assert LongTextOptions("windows", window_stride=14).resolved(16).window_stride == 14  # windows end to end
    assert LongTextOptions().resolved(16) == LongTextOptions("cut")


# -- TF ops against the lists -------------------------------------------------------------------------


def test_graph_splitting_equals_the_lists():
    import tensorflow as tf

    from keras_bert_impl.tokenization.long_text import head_tail_ids, segment_pool, window_ids

    rng = np.random.default_rng(0)
    lengths = [0, 1, 6, 7, 13, 14, 15, 40, 2000]
    rows = [list(rng.integers(5, 100, n)) for n in lengths]
    ragged = tf.ragged.constant(rows, dtype=tf.int32)
    for head in (0, 3, 14):
        assert head_tail_ids(ragged, head, 14).to_list() == [head_tail(r, head, 14) for r in rows]
    for stride in (1, 5, 14):
        got, text_index = window_ids(ragged, 14, stride)
        expected = [(i, w) for i, r in enumerate(rows) for w in windows(r, 14, stride)]
        assert got.to_list() == [w for _, w in expected]
        assert text_index.numpy().tolist() == [i for i, _ in expected]
        logits = rng.normal(size=(len(expected), 3))
        for pooling in ("mean", "max"):
            np.testing.assert_allclose(segment_pool(tf.constant(logits), text_index, len(rows), pooling).numpy(),
                                       pool_window_logits(logits, text_index.numpy(), len(rows), pooling), atol=1e-6)


# -- TextClassifier against an independent BERT ------------------------------------------------------------


def long_texts(seed, count, words_each):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(n)) for n in ([words_each] * count)]


def classifier(long_text, max_seq_length=16, seed=1, **options):
    from keras_bert_impl.tasks.text_classifier import TextClassifier
    from keras_bert_impl.tokenization.preprocessor import BertPreprocessor

    # One encoder layer: what is read, pooled and exported does not depend on the layers, and each model's
    # tracing (most of these tests' time) grows with them.
    model = TextClassifier(tiny_config(vocab_size=len(VOCAB), max_position_embeddings=32, num_hidden_layers=1),
                           num_classes=3, preprocessor=BertPreprocessor(VOCAB, max_seq_length=max_seq_length),
                           long_text=long_text,
                           label_names=("neg", "mixed", "pos"), **options)
    randomize(model, seed=seed, scale=0.4)
    return model


@pytest.fixture(scope="module")
def cut_model():
    """A `classifier` that cuts, shared by the tests that compare a long-text model with it (each sets its
    weights to its own model's first): one model and one traced `predict` for all of them."""
    return classifier("cut")


def reference_logits(model, pieces_per_text, max_seq_length):
    """float64 logits of each text's rows of word pieces: `[CLS] piece.. [SEP]`, zero-padded, through
    `numpy_bert.bert_forward` and the head; `FullTokenizer` gave the pieces."""
    from keras_bert_impl.checkpoints.original import original_weights

    w = original_weights(model)
    ids = {token: i for i, token in enumerate(VOCAB)}
    out = []
    for rows in pieces_per_text:
        batch = np.zeros((len(rows), max_seq_length), np.int64)
        mask = np.zeros_like(batch)
        for r, row in enumerate(rows):
            tokens = ["[CLS]"] + row + ["[SEP]"]
            batch[r, :len(tokens)] = [ids[t] for t in tokens]
            mask[r, :len(tokens)] = 1
        _, pooled, _ = bert_forward(w, model.bert_config.to_dict(), batch, mask, np.zeros_like(batch))
        out.append(pooled @ np.asarray(w["output_weights"], np.float64).T + np.asarray(w["output_bias"], np.float64))
    return out


@pytest.mark.parametrize("long_text, options", [("head_tail", {}), ("head_tail", {"head_tokens": 0}),
                                                ("windows", {}), ("windows", {"window_stride": 5,
                                                                              "window_pooling": "max"})])
def test_predict_reads_long_texts_as_the_reference(cut_model, long_text, options):
    from keras_bert_impl.tokenization import FullTokenizer
    from keras_bert_impl.tokenization.long_text import long_text_pieces

    model = classifier(long_text, **options)
    texts = long_texts(2, 3, 60) + ["good film", ""]
    tokenizer = FullTokenizer.from_vocab({token: i for i, token in enumerate(VOCAB)}, do_lower_case=True)
    pieces = [long_text_pieces(tokenizer.tokenize(t), model.long_text, 16) for t in texts]
    if long_text == "windows":
        assert [len(p) for p in pieces[:3]] != [1, 1, 1]  # the long texts are several windows each
    logits = reference_logits(model, pieces, 16)
    pool = np.max if model.long_text.window_pooling == "max" else np.mean
    expected = softmax(np.stack([pool(rows, axis=0) for rows in logits]))
    np.testing.assert_allclose(model.predict(texts, verbose=0), expected, atol=2e-5)
    # A cut model reads the first 14 pieces only: other answers on the long texts.
    cut_model.set_weights(model.get_weights())
    assert np.abs(cut_model.predict(texts[:3], verbose=0) - expected[:3]).max() > 1e-3


def test_evaluate_scores_the_pooled_logits():
    model = classifier("windows")
    model.compile(optimizer="sgd")
    texts, labels = long_texts(3, 4, 50), np.array([0, 2, 1, 2])
    probabilities = model.predict(texts, verbose=0).astype(np.float64)
    loss, accuracy = model.evaluate(texts, labels, batch_size=3, verbose=0)
    assert loss == pytest.approx(-np.mean(np.log(probabilities[np.arange(4), labels])), rel=1e-5)
    assert accuracy == pytest.approx(np.mean(probabilities.argmax(1) == labels))
    result = model.evaluate(texts, labels, verbose=0, return_dict=True)
    assert set(result) == {"loss", "accuracy"}


def test_datasets_are_read_as_lists():
    import tensorflow as tf

    model = classifier("windows")
    model.compile(optimizer="sgd")
    texts, labels = long_texts(6, 5, 40), np.array([0, 1, 2, 1, 0])
    expected = model.predict(texts, verbose=0)
    dataset = tf.data.Dataset.from_tensor_slices((texts, labels))
    np.testing.assert_allclose(model.predict(dataset.batch(2), verbose=0), expected, atol=1e-6)
    assert model.evaluate(dataset.batch(2), verbose=0) == pytest.approx(
        model.evaluate(texts, labels, verbose=0), rel=1e-6)
    pairs = tf.data.Dataset.from_tensor_slices((texts, texts)).batch(2)
    with pytest.raises(ValueError, match="reads single texts"):
        model.predict(pairs, verbose=0)


def test_fit_trains_every_window_with_its_texts_label():
    model = classifier("windows", real_tokens_only=False)
    model.compile(optimizer="sgd")
    texts = long_texts(4, 6, 45)  # each 45+ pieces: 14 wide, stride 8 -> several windows each
    from keras_bert_impl.tokenization.long_text import long_text_inputs

    _, text_index = long_text_inputs(model.preprocessor, texts, model.long_text)
    num_windows = int(text_index.shape[0])
    assert num_windows > 3 * len(texts)
    model.fit(texts, [0, 1, 2, 0, 1, 2], batch_size=4, epochs=1, verbose=0)
    assert int(model.optimizer.iterations.numpy()) == num_windows // 4  # one pass over the windows
    with pytest.raises(ValueError, match="reads single texts"):
        model.predict((["a"], ["b"]), verbose=0)


def test_the_setting_travels_with_the_release_and_the_config(tmp_path):
    from keras_bert_impl.tasks.text_classifier import TextClassifier

    model = classifier("windows", window_stride=6, window_pooling="max")
    model.save_release(tmp_path / "release")
    recorded = json.loads((tmp_path / "release" / "long_text.json").read_text())
    assert recorded == {"long_text": "windows", "window_stride": 6, "window_pooling": "max"}
    again = TextClassifier.from_release(tmp_path / "release", max_seq_length=16)
    assert again.long_text == model.long_text
    texts = long_texts(5, 2, 40)
    np.testing.assert_allclose(again.predict(texts, verbose=0), model.predict(texts, verbose=0), atol=1e-6)
    assert TextClassifier.from_release(tmp_path / "release", max_seq_length=16, long_text="cut").long_text.mode == "cut"
    assert TextClassifier.from_release(tmp_path / "release", max_seq_length=16,
                                       window_pooling="mean").long_text.window_stride == 6  # the rest recorded
    copy = TextClassifier.from_config(model.get_config())
    assert copy.long_text == model.long_text
    # Saved again as cut, the record goes: a later reader cuts too.
    classifier("cut").save_release(tmp_path / "release")
    assert not (tmp_path / "release" / "long_text.json").exists()


# -- the export -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("long_text", ["head_tail", "windows"])
def test_export_answers_predict_for_a_2000_token_text(cut_model, tmp_path, long_text):
    """The raw-text SavedModel (loaded with tf.saved_model.load, verified as TF Serving loads it) splits the
    text in the graph and answers `predict`'s probabilities within 1e-4. head_tail: `model.export`; windows (max
    pooling): `export_checkpoint` (bert-export's) of the model's release, which takes the release's setting; a
    task that cuts refuses long_text. One export each (each costs its tracing)."""
    import tensorflow as tf

    from keras_bert_impl.serving.export import ExportOptions, export_checkpoint, read_export_metadata
    from keras_bert_impl.serving.versions import ExportError

    model = classifier(long_text) if long_text == "head_tail" else classifier(long_text, window_pooling="max")
    rng = random.Random(7)
    text = " ".join(rng.choice(WORDS) for _ in range(1900))
    texts = [text, "bad plot", "", long_texts(8, 1, 30)[0]]
    assert len(model.preprocessor.token_ids(tf.constant([text]))[0]) >= 2000
    probabilities = model.predict(texts, verbose=0)
    export_dir = tmp_path / "saved_models" / "reviews"
    if long_text == "head_tail":
        version = model.export(export_dir)
    else:
        release = tmp_path / "release"
        prefix = model.save_release(release)
        options = ExportOptions(max_seq_length=16, verify=True)
        version = export_checkpoint("classifier", str(release / "bert_config.json"), prefix,
                                    str(release / "vocab.txt"), str(export_dir), options, log=lambda message: None)
        with pytest.raises(ExportError, match="long_text=windows is for a classifier, regression or multi_label"):
            export_checkpoint("embeddings", str(release / "bert_config.json"), prefix, str(release / "vocab.txt"),
                              str(tmp_path / "saved" / "e"),
                              ExportOptions(max_seq_length=16, long_text=LongTextOptions("windows")), log=print)
    served = tf.saved_model.load(version).signatures["serving_default"](tf.constant(texts))
    np.testing.assert_allclose(served["probabilities"].numpy(), probabilities, atol=1e-4)
    assert served["labels"].numpy().tolist() == [("neg", "mixed", "pos")[i].encode() for i in probabilities.argmax(1)]
    assert read_export_metadata(version)["long_text"] == model.long_text.to_json()
    # A cut model of the same weights answers otherwise on the long text.
    cut_model.set_weights(model.get_weights())
    assert np.abs(cut_model.predict([text], verbose=0) - probabilities[:1]).max() > 1e-3


# -- bert-run-classifier --long_text -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_release(tmp_path_factory):
    import keras

    from keras_bert_impl.checkpoints.original import save_original_checkpoint
    from keras_bert_impl.models.bert_model import BertModel

    directory = tmp_path_factory.mktemp("release")
    keras.utils.set_random_seed(0)
    config = tiny_config(vocab_size=len(VOCAB), max_position_embeddings=32, num_hidden_layers=1)
    save_original_checkpoint(BertModel(config), str(directory / "bert_model.ckpt"))
    config.to_json_file(directory / "bert_config.json")
    (directory / "vocab.txt").write_text("".join(t + "\n" for t in VOCAB), encoding="utf-8")
    return directory


def write_reviews(directory, seed):
    """Reviews of 20-60 words whose label is which of 'great'/'awful' a word near the end says."""
    import csv

    rng = random.Random(seed)
    directory.mkdir()
    for split, count in (("train", 24), ("dev", 8), ("test", 8)):
        with open(directory / f"{split}.csv", "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["text", "label"])
            for _ in range(count):
                label = rng.choice(["pos", "neg"])
                words = [rng.choice(["the", "film", "plot", "was", "a", "and"]) for _ in range(rng.randint(20, 60))]
                words.insert(len(words) - 3, "great" if label == "pos" else "awful")
                writer.writerow([" ".join(words), label])


def tool_flags(release, data_dir, output_dir, *extra):
    return ["--task_name=csv", f"--data_dir={data_dir}", f"--vocab_file={release / 'vocab.txt'}",
            f"--bert_config_file={release / 'bert_config.json'}", f"--init_checkpoint={release / 'bert_model.ckpt'}",
            f"--output_dir={output_dir}", "--max_seq_length=16", "--train_batch_size=8", "--num_train_epochs=1",
            "--eval_batch_size=3", "--predict_batch_size=3", *extra]


def test_run_classifier_windows_records_pools_and_is_read_back(tiny_release, tmp_path):
    import csv

    from keras_bert_impl.tasks.text_classifier import TextClassifier
    from tools import run_classifier

    data_dir, output_dir = tmp_path / "reviews", tmp_path / "out"
    write_reviews(data_dir, 0)
    run_classifier.main(tool_flags(tiny_release, data_dir, output_dir, "--long_text=windows", "--window_stride=7",
                                   "--do_train", "--do_eval", "--do_predict"))
    assert json.loads((output_dir / "long_text.json").read_text()) == {
        "long_text": "windows", "window_stride": 7, "window_pooling": "mean"}
    settings = json.loads((output_dir / "training_settings.json").read_text())
    assert "long_text" in json.dumps(settings)
    # The tool's probabilities (FullTokenizer features, pooled in NumPy) are the Python API's
    # (in-graph tokenizer, the setting read from the release).
    with open(data_dir / "test.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    tool = np.loadtxt(output_dir / "test_results.tsv", ndmin=2)
    model = TextClassifier.from_release(output_dir, max_seq_length=16)
    assert model.long_text == LongTextOptions("windows", window_stride=7, window_pooling="mean")
    np.testing.assert_allclose(tool, model.predict([r["text"] for r in rows], verbose=0), atol=1e-4)
    values = dict(line.split(" = ") for line in (output_dir / "eval_results.txt").read_text().splitlines())
    # Evaluating again without training reads the recorded setting: the same results; cut, others.
    first = (output_dir / "eval_results.txt").read_text()
    run_classifier.main(tool_flags(tiny_release, data_dir, output_dir, "--do_eval"))
    assert (output_dir / "eval_results.txt").read_text() == first
    run_classifier.main(tool_flags(tiny_release, data_dir, output_dir, "--do_eval", "--long_text=cut"))
    cut = dict(line.split(" = ") for line in (output_dir / "eval_results.txt").read_text().splitlines())
    assert cut["eval_loss"] != values["eval_loss"]


@pytest.mark.parametrize("flags, message", [
    (["--long_text=windows", "--window_stride=0"], "--window_stride 0 must lie in [1, 14]"),
    (["--long_text=windows", "--window_stride=16"], "--window_stride 16 must lie in [1, 14]"),
    (["--long_text=head_tail", "--head_tokens=15"], "--head_tokens 15 must lie in [0, 14]"),
    (["--window_stride=4"], "--window_stride needs --long_text"),
    (["--long_text=head_tail", "--window_pooling=max"], "--window_pooling applies with --long_text=windows"),
    (["--long_text=slide"], "--long_text"),
    (["--long_text=windows", "--multi_label"], "--long_text applies to single-label classification and regression"),
])
def test_run_classifier_bad_long_text_flags_are_one_line(tiny_release, tmp_path, capsys, flags, message):
    from keras_bert_impl.cli import run_tool
    from tools import run_classifier

    code = run_tool(run_classifier.main, tool_flags(tiny_release, tmp_path, tmp_path / "out", "--do_train", *flags),
                    prog="run_classifier")
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and len(err.splitlines()) == 1, err


def test_run_classifier_refuses_pairs_with_windows(tiny_release, tmp_path, capsys):
    from keras_bert_impl.cli import run_tool
    from tools import run_classifier

    data_dir = tmp_path / "pairs"
    data_dir.mkdir()
    (data_dir / "train.csv").write_text("text,text_b,label\ngood film,bad plot,pos\nbad film,good,neg\n", encoding="utf-8")
    code = run_tool(run_classifier.main, tool_flags(tiny_release, data_dir, tmp_path / "out", "--do_train",
                                                    "--text_b_column=text_b", "--long_text=head_tail"),
                    prog="run_classifier")
    err = capsys.readouterr().err.strip()
    assert code == 1 and "--long_text=head_tail reads single texts, but example train-0 is a text pair" in err, err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "out" / "model.ckpt.index").exists()


def test_multi_label_and_regression_pool_their_windows_in_the_export_too(tmp_path):
    """Each label's sigmoid (and the regression score) of the pooled logits, in `predict` and in the graph."""
    import tensorflow as tf

    from keras_bert_impl.tasks.text_classifier import TextClassifier
    from keras_bert_impl.tokenization.preprocessor import BertPreprocessor

    texts = long_texts(11, 3, 50)
    for name, options in (("tags", {"num_classes": 3, "multi_label": True, "threshold": 0.4}),
                          ("score", {"num_classes": 1})):
        model = TextClassifier(tiny_config(vocab_size=len(VOCAB), max_position_embeddings=32, num_hidden_layers=1),
                               preprocessor=BertPreprocessor(VOCAB, max_seq_length=16), long_text="windows",
                               window_pooling="max", **options)
        randomize(model, seed=4, scale=0.4)
        inputs, text_index = model._long_text_arrays(tf.constant(texts))
        logits = np.asarray(model(inputs, training=False), np.float64)
        pooled = np.stack([logits[text_index == i].max(axis=0) for i in range(len(texts))])
        expected = 1 / (1 + np.exp(-pooled)) if model.multi_label else pooled[:, 0]
        np.testing.assert_allclose(model.predict(texts, verbose=0), expected, atol=1e-5)
        # verify=False: the pooled answers are what is checked here, on the texts that have windows (the check as
        # TF Serving loads a version, on short warmup texts, ~2 s of CPU an export: test_export_answers_...).
        version = model.export(tmp_path / name, verify=False)
        served = tf.saved_model.load(version).signatures["serving_default"](tf.constant(texts))
        key = "probabilities" if model.multi_label else "predictions"
        np.testing.assert_allclose(served[key].numpy(), expected, atol=1e-4)
        if model.multi_label:
            assert served["label_mask"].numpy().tolist() == (expected >= 0.4).tolist()
