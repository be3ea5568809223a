"""Bad values given to the Python task models and their exports: one clear error, before any step.

Each case did something else before (issue 38): trained on it silently, failed
after an optimizer step as a TensorFlow traceback, aborted the interpreter in
oneDNN, or wrote a labels file that shifts the classes.
"""

import numpy as np
import pytest

from keras_bert_impl.config import BertConfig
from keras_bert_impl.errors import InputFileError
from keras_bert_impl.serving.versions import ExportError
from keras_bert_impl.tasks.masked_lm import MaskedLM
from keras_bert_impl.tasks.text_classifier import TextClassifier
from keras_bert_impl.tokenization.preprocessor import BertPreprocessor

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film"]
CONFIG = BertConfig(vocab_size=len(VOCAB), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=16, max_position_embeddings=16)
TEXTS = ["good film", "bad film", "good", "bad"]


@pytest.fixture(scope="module")
def classifier():
    model = TextClassifier(CONFIG, 2, BertPreprocessor(VOCAB, max_seq_length=8))
    model.compile()
    return model


def steps(model):
    optimizer = getattr(model, "optimizer", None)
    return int(optimizer.iterations.numpy()) if optimizer is not None and optimizer.built else 0


@pytest.mark.parametrize("call, fragment", [
    (lambda m: m.fit(TEXTS, [0, 1, 0.5, 1], batch_size=2, verbose=0), r"y 2 is 0.5, not a class id in \[0, 2\)"),
    (lambda m: m.fit(TEXTS, [0, 1, 5, 1], batch_size=2, verbose=0), r"y 2 is 5, not a class id in \[0, 2\)"),
    (lambda m: m.fit(TEXTS, [0, -1, 0, 1], batch_size=2, verbose=0), r"y 1 is -1, not a class id"),
    (lambda m: m.fit(TEXTS, [0, 1, 0, 1], sample_weight=[1, np.nan, 1, 1], batch_size=2, verbose=0),
     "sample_weight 1 is nan: NaN or infinite values"),
    (lambda m: m.fit(TEXTS, [0, 1, 0, 1], batch_size=0, verbose=0), "batch_size must be a whole number of at least 1, got 0"),
    (lambda m: m.fit(TEXTS, [0, 1, 0, 1], epochs=0, verbose=0), "epochs must be a whole number of at least 1, got 0"),
    (lambda m: m.predict(TEXTS, batch_size=0), "batch_size must be a whole number of at least 1, got 0"),
    (lambda m: m.evaluate(TEXTS, [0, 1, 0, 1], batch_size=-2), "batch_size must be a whole number"),
])
def test_bad_values_in_fit_and_predict_are_refused_before_a_step(classifier, call, fragment):
    before = steps(classifier)
    with pytest.raises(ValueError, match=fragment):
        call(classifier)
    assert steps(classifier) == before


def test_nan_regression_targets_are_refused():
    model = TextClassifier(CONFIG, 1, BertPreprocessor(VOCAB, max_seq_length=8))
    model.compile()
    with pytest.raises(ValueError, match=r"y 3 is inf: NaN or infinite"):
        model.fit(TEXTS, [0.1, 0.2, 0.3, np.inf], batch_size=2, verbose=0)
    assert steps(model) == 0


@pytest.mark.parametrize("texts, kind", [({"a": 1}, "dict"), ({"good film"}, "set"), ((t for t in TEXTS), "generator")])
def test_texts_without_an_order_are_named(classifier, texts, kind):
    with pytest.raises(TypeError, match=f"texts must be a list of strings .*; got a {kind}"):
        classifier.predict(texts)


def test_zero_classes_are_refused_instead_of_aborting():
    with pytest.raises(ValueError, match="num_classes must be a whole number of at least 1, got 0"):
        TextClassifier(CONFIG, 0, BertPreprocessor(VOCAB, max_seq_length=8))


def test_masked_lm_top_k_must_be_positive():
    model = MaskedLM(CONFIG, BertPreprocessor(VOCAB, max_seq_length=8, masks_in_text=True))
    for top_k in (-1, 0, 2.5):
        with pytest.raises(ValueError, match="top_k must be a whole number of at least 1"):
            model.predict(["good [MASK]"], top_k=top_k)
    assert len(model.predict(["good [MASK]"], top_k=2)[0][0]) == 2


@pytest.mark.parametrize("options, fragment", [
    ({"version": 2.5}, "version 2.5: a version is a non-negative integer"),
    ({"label_names": ["bad\nworse", "good"]}, r"label name 'bad\\nworse': a label name is one line"),
    ({"label_names": ["neg", ""]}, "label name '': a label name is one line of text, not empty"),
])
def test_export_refuses_versions_and_label_names_it_cannot_write_back(classifier, tmp_path, options, fragment):
    with pytest.raises(ExportError, match=fragment):
        classifier.export(str(tmp_path / "sentiment"), **options)
    assert not any(p.name.isdigit() for p in (tmp_path / "sentiment").glob("*"))


def test_a_training_label_with_a_line_break_is_named_with_its_line(tmp_path):
    from keras_bert_impl.data.classification_datasets import get_dataset, read_examples
    from keras_bert_impl.data.classification_examples import with_labels

    (tmp_path / "train.csv").write_text('text,label\ngood film,pos\nbad film,"neg\nworse"\n', encoding="utf-8")
    dataset = get_dataset("csv")
    with pytest.raises(InputFileError, match=r"train.csv:3: label 'neg\\nworse' holds a line break"):
        with_labels(dataset, read_examples(dataset, str(tmp_path), "train"))


def test_an_empty_vocabulary_is_named(tmp_path):
    from keras_bert_impl.errors import VocabError

    (tmp_path / "vocab.txt").write_text("")
    with pytest.raises(VocabError, match=r"vocab.txt: empty; a vocabulary holds one token a line"):
        BertPreprocessor(str(tmp_path / "vocab.txt"))  # was: max() arg is an empty sequence
