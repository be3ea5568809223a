"""`serving.verification`: an export checked as TF Serving loads it before its version is published."""

import os
import shutil

import numpy as np
import pytest

from keras_bert_impl.models.classifier import BertClassifier
from keras_bert_impl.serving import export as export_module
from keras_bert_impl.serving.export import ExportError, ExportOptions, export_saved_model
from keras_bert_impl.serving.session_model import SessionModel, SessionModelError
from keras_bert_impl.serving.verification import check_as_tf_serving, relative_difference
from tests.helpers import randomize, tiny_config

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "film", "is", "great", "dull", "a", "plot"]
SEQ = 16


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("".join(f"{token}\n" for token in VOCAB), encoding="utf-8")
    return path


def classifier(seed):
    # One layer: what is checked is the export as TF Serving loads it, whatever the model's depth.
    model = BertClassifier(tiny_config(vocab_size=len(VOCAB), max_position_embeddings=SEQ, num_hidden_layers=1),
                           num_labels=2)
    randomize(model, seed=seed, scale=0.3)
    return model


@pytest.fixture(scope="module")
def published(tmp_path_factory, vocab_file):
    """`classifier(1)` exported in float32 and verified, as `saved_models/sentiment/1`: `(the export base, the
    version directory, the lines the export logged)`. Read by the tests below; the one that publishes more
    versions works on a copy of the export base."""
    base = tmp_path_factory.mktemp("published") / "saved_models"
    said = []
    path = export_saved_model(classifier(1), "classifier", vocab_file, base / "sentiment",
                              ExportOptions(max_seq_length=SEQ, precision="float32", verify=True), log=said.append)
    return base, path, said


def test_relative_difference_against_hand_computed_values():
    assert relative_difference([3.0, 4.0], [4.0, 3.0]) == pytest.approx(np.sqrt(2) / 5)
    assert relative_difference([1.0, 2.0], [1.0, 2.0]) == 0.0
    assert relative_difference([0.0, 0.0], [0.0, 0.0]) == 0.0
    assert relative_difference([1e-9, 0.0], [0.0, 0.0]) == float("inf")
    assert np.isnan(relative_difference([np.nan, 1.0], [1.0, 1.0]))


@pytest.mark.parametrize("precision", ["float32", "int8"])
def test_a_verified_export_is_published_and_says_so(tmp_path, vocab_file, published, precision):
    if precision == "float32":
        _, path, said = published
    else:
        said = []
        path = export_saved_model(classifier(1), "classifier", vocab_file, tmp_path / "sentiment",
                                  ExportOptions(max_seq_length=SEQ, precision=precision, verify=True), log=said.append)
    assert os.path.basename(path) == "1" and os.path.isfile(os.path.join(path, "saved_model.pb"))
    (line,) = [line for line in said if line.startswith("loaded as TF Serving loads it: ")]
    assert line.startswith("loaded as TF Serving loads it: 1 warmup request answered as the model, ")
    agreement = line.split("answered as the model, ", 1)[1]
    largest = 0.0 if agreement == "identically" else float(agreement.rsplit(" ", 1)[1])
    assert largest < (1e-5 if precision == "float32" else 0.05), line


def test_answers_that_are_not_the_models_are_named(published):
    _, path, _ = published  # `classifier(1)`'s export (its verification changed none of its files)
    other = export_module.BertServingModule(
        classifier(2), "classifier", export_module.InGraphTokenizer(VOCAB, do_lower_case=True), SEQ,
        {"cls": 2, "sep": 3, "mask": 4}, labels_path=os.path.join(path, "assets", "labels.txt"))
    with pytest.raises(SessionModelError) as raised:  # another model's weights: its answers differ
        check_as_tf_serving(path, other.signatures())
    assert f"{path}: warmup request 0 (serving_default), output " in str(raised.value)
    assert "of the model's own answer apart (at most 0.05 expected): TF Serving would not compute what the model " \
        "does" in str(raised.value)


def test_a_version_tf_serving_would_refuse_is_not_published(tmp_path, vocab_file, published, monkeypatch):
    base = tmp_path / "saved_models"
    shutil.copytree(published[0], base)  # a base whose `sentiment` has a verified version 1, and its models.config
    first = base / "sentiment" / "1"
    assert (base / "models.config").is_file() and os.path.basename(published[1]) == "1"
    models_config = (base / "models.config").read_text()
    write_warmup = export_module.write_warmup_requests

    def and_cut_the_variables(path, *args, **kwargs):  # the staged version's variables cut short, as a full disk
        write_warmup(path, *args, **kwargs)
        version = os.path.dirname(os.path.dirname(path))
        (data,) = [name for name in os.listdir(os.path.join(version, "variables")) if ".data-" in name]
        os.truncate(os.path.join(version, "variables", data), 100)

    monkeypatch.setattr(export_module, "write_warmup_requests", and_cut_the_variables)
    with pytest.raises(ExportError) as raised:
        export_saved_model(classifier(1), "classifier", vocab_file, base / "sentiment",
                           ExportOptions(max_seq_length=SEQ, verify=True))
    message = str(raised.value)
    assert message.startswith(f"{base / 'sentiment'}: the new version is not published: the staged version: "
                              "TF Serving's loader fails on this version (")
    assert sorted(os.listdir(base / "sentiment")) == [os.path.basename(first)]  # no version 2, no staging left
    assert (base / "models.config").read_text() == models_config
    # Unverified, the same damage would have been published as version 2.
    monkeypatch.setattr(export_module, "write_warmup_requests", and_cut_the_variables)
    published = export_saved_model(classifier(1), "classifier", vocab_file, base / "sentiment",
                                   ExportOptions(max_seq_length=SEQ))
    assert os.path.basename(published) == "2"
    with pytest.raises(SessionModelError, match="TF Serving's loader fails on this version"):
        SessionModel(published)
