"""Records of a prepared TFDS dataset that cannot be read as they claim: each
is an `InputFileError` naming the dataset, split, record and feature, where
they were silently mislabelled or a bare Python error."""

import numpy as np
import pytest
import tensorflow_datasets as tfds

from keras_bert_impl.data import conll, squad
from keras_bert_impl.data.classification_datasets import read_examples
from keras_bert_impl.data.tfds_text import TfdsGlueDataset
from keras_bert_impl.errors import InputFileError


class BadNer(tfds.core.GeneratorBasedBuilder):
    """A tagged sentence whose second word has class id -1 (no label)."""

    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict({
            "tokens": tfds.features.Sequence(tfds.features.Text()),
            "ner": tfds.features.Sequence(tfds.features.ClassLabel(names=["O", "B-PER", "I-PER"])),
        }))

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples()}

    def _generate_examples(self):
        yield 0, {"tokens": ["John", "runs"], "ner": [1, -1]}


class BadGlue(tfds.core.GeneratorBasedBuilder):
    """GLUE-like rows: validation row idx 1 has class id -1, train row idx 1 is not UTF-8."""

    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict({
            "idx": np.int32, "sentence": tfds.features.Text(), "label": tfds.features.ClassLabel(num_classes=2),
        }))

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples(b"caf\xe9 film"), "validation": self._generate_examples("fine", -1),
                "test": self._generate_examples("hidden", -1)}

    def _generate_examples(self, second, second_label=0):
        yield 0, {"idx": 0, "sentence": "good film", "label": 1}
        yield 1, {"idx": 1, "sentence": second, "label": second_label}


class BadQa(tfds.core.GeneratorBasedBuilder):
    """SQuAD's features, but `answers` a plain list of texts."""

    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict({
            "id": tfds.features.Text(), "context": tfds.features.Text(), "question": tfds.features.Text(),
            "answers": tfds.features.Sequence(tfds.features.Text()),
        }))

    def _split_generators(self, dl_manager):
        return {"validation": self._generate_examples()}

    def _generate_examples(self):
        yield 0, {"id": "q1", "context": "hello world", "question": "who?", "answers": ["world"]}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("tfds"))
    for builder in (BadNer, BadGlue, BadQa):
        builder(data_dir=directory).download_and_prepare()
    return directory


def test_conll_class_id_minus_one_is_named_not_read_as_the_last_label(data_dir):
    with pytest.raises(InputFileError, match=r"^bad_ner\[train\] sentence 0 word 1 ner: class id -1 is not one of the 3 labels$"):
        conll.read_tfds_conll("bad_ner", data_dir, "train")


def test_glue_dev_row_without_label_is_named_test_rows_get_the_placeholder(data_dir):
    dataset = TfdsGlueDataset("bad_glue", ("0", "1"), "sentence")
    with pytest.raises(InputFileError, match=r"^bad_glue\[validation\] idx 1: no label \(class id -1\)$"):
        read_examples(dataset, data_dir, "dev")
    test = read_examples(dataset, data_dir, "test")
    assert [(e.text_a, e.label) for e in test] == [("good film", "0"), ("hidden", "0")]


def test_text_that_is_not_utf8_names_record_and_feature(data_dir):
    dataset = TfdsGlueDataset("bad_glue", ("0", "1"), "sentence")
    with pytest.raises(InputFileError, match=r"^bad_glue\[train\] idx 1 sentence: not valid UTF-8 \(byte 3\)$"):
        read_examples(dataset, data_dir, "train")


def test_squad_answers_of_another_structure_are_named(data_dir):
    with pytest.raises(InputFileError, match=r"^bad_qa\[validation\] record 0 answers: not SQuAD's answers"):
        squad.load_tfds_squad("bad_qa", data_dir, "validation")
