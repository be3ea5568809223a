"""TensorFlow Datasets as fine-tuning input, read only where already prepared.

SQuAD v1.1/v2.0 and CoNLL-2003 are prepared here offline by TFDS's own
builders from small files written by the test (the download manager hands
those files over), and a text classification dataset by a builder of our
own from CSV files. Read through TFDS, each gives the same examples as the
files read directly (as a set: TFDS stores examples in key-hash order), the
official SQuAD evaluation gives the same scores, and each tool trains,
evaluates and predicts from TFDS as it does from the files.
"""

import csv
import dataclasses
import json
import re
from unittest import mock

import numpy as np
import pytest
import tensorflow_datasets as tfds
from etils import epath

from keras_bert_impl.checkpoints.original import save_original_checkpoint
from keras_bert_impl.cli import run_tool
from keras_bert_impl.data import conll, squad, squad_metrics
from keras_bert_impl.data.classification_datasets import get_dataset, read_examples
from keras_bert_impl.data.classification_examples import with_labels
from keras_bert_impl.data.tfds_inputs import split_names
from keras_bert_impl.data.tfds_text import with_dataset_labels
from keras_bert_impl.errors import InputFileError
from keras_bert_impl.models.bert_model import BertModel
from keras_bert_impl.tokenization import BasicTokenizer, FullTokenizer
from tests.helpers import tiny_config
from tests.test_pipeline_options import iterated  # noqa: F401 (a fixture)
from tools import run_classifier, run_ner, run_squad

# ----------------------------------------------------------------------------
# Source files.
# ----------------------------------------------------------------------------


def qa(qas_id, question, context, *answers, impossible=None, plausible=()):
    """A SQuAD question; each answer text is located in `context` (or given as `(text, start)`)."""

    def answer(value):
        text, start = value if isinstance(value, tuple) else (value, context.index(value))
        return {"text": text, "answer_start": start}

    entry = {"id": qas_id, "question": question, "answers": [answer(a) for a in answers]}
    if impossible is not None:
        entry["is_impossible"] = impossible
        if plausible:
            entry["plausible_answers"] = [answer(a) for a in plausible]
    return entry


ADA = "Ada Lovelace wrote the first program in 1843 for the Analytical Engine."
HOPPER = "Grace Hopper built the first compiler (A-0) in 1952, long before COBOL."
WEB = "Tim Berners-Lee  proposed the World Wide Web\u00a0in 1989 at CERN."
TURING = "Alan Turing described the Turing machine in 1936."


def squad_files(version_2):
    """`{split: data}` of a tiny SQuAD: several paragraphs per article, a
    question whose answer_start is off (skipped in training, as the original
    does), dev questions with several answers, v2.0 unanswerable ones."""
    v2 = (lambda impossible: {"impossible": impossible}) if version_2 else (lambda impossible: {})
    train = [
        {"title": "Computing", "paragraphs": [
            {"context": ADA, "qas": [
                qa("t1", "Who wrote the first program?", ADA, "Ada Lovelace", **v2(False)),
                qa("t2", "When was it written?", ADA, "1843", **v2(False)),
                qa("t3", "Which engine?", ADA, ("Analytical Engine", 3), **v2(False)),  # misplaced: skipped
            ]},
            {"context": HOPPER, "qas": [
                qa("t4", "What did Grace Hopper build?", HOPPER, "the first compiler", **v2(False)),
                qa("t5", "When?", HOPPER, "1952", **v2(False)),
            ]},
        ]},
        {"title": "Web", "paragraphs": [
            {"context": WEB, "qas": [qa("t6", "Where was the web proposed?", WEB, "CERN", **v2(False))]},
        ]},
    ]
    dev = [
        {"title": "Computing", "paragraphs": [
            {"context": TURING, "qas": [
                qa("d1", "Who described the machine?", TURING, "Alan Turing", "Turing", **v2(False)),
                qa("d2", "In which year?", TURING, "1936", "in 1936", **v2(False)),
            ]},
        ]},
        {"title": "Web", "paragraphs": [
            {"context": WEB, "qas": [qa("d3", "Who proposed the web?", WEB, "Tim Berners-Lee", **v2(False))]},
        ]},
    ]
    if version_2:
        train[1]["paragraphs"][0]["qas"].append(
            qa("t7", "Who closed CERN?", WEB, impossible=True, plausible=["Tim Berners-Lee"])
        )
        dev[0]["paragraphs"][0]["qas"].append(qa("d4", "Who built the machine?", TURING, impossible=True))
    return {"train": train, "dev": dev}


CONLL_FILES = {
    "train.txt": """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

-DOCSTART- -X- -X- O

BRUSSELS NNP B-NP B-LOC
1996-08-22 CD I-NP O

Ada NNP B-NP B-PER
Lovelace NNP I-NP I-PER
visited VBD B-VP O
London NNP B-NP B-LOC
and CC O O
Paris NNP B-NP B-LOC
with IN B-PP O
the DT B-NP O
Royal NNP I-NP B-ORG
Society NNP I-NP I-ORG
. . O O

""",
    "valid.txt": """-DOCSTART- -X- -X- O

Grace NNP B-NP B-PER
Hopper NNP I-NP I-PER
joined VBD B-VP O
the DT B-NP O
Navy NNP I-NP B-ORG
. . O O

Kyoto NNP B-NP B-LOC
welcomed VBD B-VP O
Turing NNP B-NP B-PER

""",
    "test.txt": """-DOCSTART- -X- -X- O

London NNP B-NP B-LOC
calling VBG B-VP O

Zürich NNP B-NP B-LOC
met VBD B-VP O
Peter NNP B-NP B-PER
""",
}
# conll2003's `ner` ClassLabel: what the tagger's label ids mean.
NER_TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]

REVIEW_LABELS = ("positive", "negative")  # ClassLabel order, deliberately not sorted
REVIEW_COLUMNS = ("sentence", "other", "label", "stars", "score")
REVIEWS = {
    "train": [
        ("a great film", "the plot was fine", "positive", 5, 0.9),
        ("an awful movie", 'it was "dull", really', "negative", 1, 0.1),
        ("superb acting", "café scenes", "positive", 4, 0.75),
        ("poor story", "the actor tried", "negative", 2, 0.3),
        ("wonderful, simply", "a film", "positive", 5, 0.95),
        ("terrible plot", "movie, film", "negative", 1, 0.05),
        ("good scenes", "the story", "positive", 4, 0.8),
        ("bad actor", "a scene", "negative", 2, 0.2),
    ],
    "dev": [
        ("great story", "the movie", "positive", 5, 0.85),
        ("dull film", "a plot", "negative", 1, 0.15),
        ("excellent", "scenes", "positive", 4, 0.7),
        ("awful", "the actor", "negative", 2, 0.25),
    ],
    "test": [
        ("good film", "a story", "positive", 4, 0.6),
        ("poor acting", "the film", "negative", 2, 0.4),
        ("superb", "plot", "positive", 5, 1.0),
    ],
}


class TinyReviews(tfds.core.GeneratorBasedBuilder):
    """Text pairs with a class, stars and a score, from `<split>.csv` in the manual directory."""

    VERSION = tfds.core.Version("1.0.0")
    MANUAL_DOWNLOAD_INSTRUCTIONS = "The test writes train.csv, dev.csv and test.csv."

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            features=tfds.features.FeaturesDict({
                "sentence": tfds.features.Text(),
                "other": tfds.features.Text(),
                "label": tfds.features.ClassLabel(names=REVIEW_LABELS),
                "stars": np.int64,
                "score": np.float32,
            }),
        )

    def _split_generators(self, dl_manager):
        files = {"train": "train.csv", "validation": "dev.csv", "test": "test.csv"}
        return {split: self._generate_examples(dl_manager.manual_dir / name) for split, name in files.items()}

    def _generate_examples(self, path):
        with open(path, newline="", encoding="utf-8") as f:
            for index, row in enumerate(csv.DictReader(f)):
                yield index, {**row, "stars": int(row["stars"]), "score": float(row["score"])}


# ----------------------------------------------------------------------------
# Fixtures: the files, the prepared TFDS directory, a tiny release.
# ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """Directory with `squad-v1.1-{train,dev}.json`, `squad-v2.0-*.json`, the
    CoNLL files and the review CSV files."""
    root = tmp_path_factory.mktemp("sources")
    for version in ("v1.1", "v2.0"):
        for split, data in squad_files(version == "v2.0").items():
            text = json.dumps({"version": version, "data": data})
            (root / f"squad-{version}-{split}.json").write_text(text, encoding="utf-8")
    for name, content in CONLL_FILES.items():
        (root / name).write_text(content, encoding="utf-8")
    for split, rows in REVIEWS.items():
        with open(root / f"{split}.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(REVIEW_COLUMNS)
            writer.writerows(rows)
    return root


@pytest.fixture(scope="module")
def tfds_dir(sources, tmp_path_factory):
    """A TFDS data directory with squad/v1.1, squad/v2.0, conll2003 and
    tiny_reviews prepared from `sources`, with downloads made impossible."""
    tfds.disable_progress_bar()
    directory = tmp_path_factory.mktemp("tensorflow_datasets")
    offline = tfds.download.DownloadConfig(try_download_gcs=False, manual_dir=str(sources))

    def squad_download(version):
        files = {split: str(sources / f"squad-{version}-{split}.json") for split in ("train", "dev")}
        return lambda self, urls: files

    manager = tfds.download.DownloadManager
    for version in ("v1.1", "v2.0"):
        with mock.patch.object(manager, "download_and_extract", squad_download(version)):
            tfds.builder(f"squad/{version}", data_dir=str(directory)).download_and_prepare(download_config=offline)
    with mock.patch.object(manager, "download_and_extract", lambda self, url: epath.Path(sources)):
        tfds.builder("conll2003", data_dir=str(directory)).download_and_prepare(download_config=offline)
    with mock.patch.object(manager, "download_and_extract", side_effect=AssertionError("no download")):
        TinyReviews(data_dir=str(directory)).download_and_prepare(download_config=offline)
    return directory


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """A tiny original-format release whose vocabulary holds every word of the sources."""
    directory = tmp_path_factory.mktemp("release")
    texts = [json.dumps(squad_files(True)), *CONLL_FILES.values(), json.dumps(REVIEWS, ensure_ascii=False)]
    words = sorted({w for text in texts for w in BasicTokenizer(do_lower_case=True).tokenize(text)})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = tiny_config(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1, intermediate_size=64,
                         max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    config.to_json_file(directory / "bert_config.json")
    save_original_checkpoint(BertModel(config), str(directory / "bert_model.ckpt"))
    return directory


def release_flags(release, output_dir, **extra):
    values = {
        "vocab_file": release / "vocab.txt",
        "bert_config_file": release / "bert_config.json",
        "init_checkpoint": release / "bert_model.ckpt",
        "output_dir": output_dir,
    }
    values.update(extra)
    return [f"--{key}={value}" for key, value in values.items()]


def read_results(path):
    return dict(line.rstrip("\n").split(" = ") for line in open(path, encoding="utf-8"))


# ----------------------------------------------------------------------------
# The same examples as the files.
# ----------------------------------------------------------------------------


def by_id(examples):
    return sorted(examples, key=lambda e: e.qas_id)


@pytest.mark.parametrize("version", ["v1.1", "v2.0"])
def test_squad_from_tfds_equals_the_json_files(version, sources, tfds_dir, release):
    version_2 = version == "v2.0"
    tokenizer = FullTokenizer(str(release / "vocab.txt"))
    for split, tfds_split, is_training in (("train", "train", True), ("dev", "validation", False)):
        path = str(sources / f"squad-{version}-{split}.json")
        tfds_data = squad.load_tfds_squad(f"squad/{version}", tfds_dir, tfds_split)
        from_json, skipped_json = squad.read_squad_examples(path, is_training, version_2)
        from_tfds, skipped_tfds = squad.read_squad_examples("tfds", is_training, version_2, data=tfds_data)
        assert by_id(from_tfds) == by_id(from_json)
        assert skipped_tfds == skipped_json == (["t3"] if is_training else [])
        assert any(e.is_impossible for e in from_json) == (version_2 and is_training)
        features = [
            list(squad.convert_examples_to_features(by_id(examples), tokenizer, 20, 4, 8, is_training))
            for examples in (from_json, from_tfds)
        ]
        assert len(features[0]) > len(from_json)  # contexts span several windows
        assert features[0] == features[1]

        # The official evaluation reads the rebuilt structure as the file's.
        json_data = squad.load_squad_json(path)
        predictions = {e.qas_id: " ".join(e.doc_tokens[:2]) for e in from_json}
        predictions.update({"d1": "Alan Turing", "d4": ""})
        evaluate = squad_metrics.evaluate_v2 if version_2 else squad_metrics.evaluate_v1
        assert evaluate(tfds_data, predictions) == evaluate(json_data, predictions)
        articles = {a["title"]: {p["context"] for p in a["paragraphs"]} for a in json_data}
        assert {a["title"]: {p["context"] for p in a["paragraphs"]} for a in tfds_data} == articles


def test_tfds_splits_are_read_without_an_autotuning_thread(tfds_dir, iterated):
    assert conll.read_tfds_conll("conll2003", tfds_dir, "train")
    assert iterated and all(enabled is False for enabled in iterated), iterated


def test_conll_from_tfds_equals_the_files(sources, tfds_dir):
    assert conll.tfds_label_names("conll2003", tfds_dir) == tuple(NER_TAGS)
    for name, split in (("train.txt", "train"), ("valid.txt", "dev"), ("test.txt", "test")):
        from_file = conll.read_conll(str(sources / name))
        from_tfds = conll.read_tfds_conll("conll2003", tfds_dir, split)

        def sentences(read):
            return sorted((s.words, s.labels, s.columns) for s in read)

        # TFDS stores an empty record for the blank line ending a file; it is no sentence.
        assert sentences(from_tfds) == sentences(from_file)
        assert all(s.source.startswith(f"conll2003[{split}] sentence ") for s in from_tfds)
    # A label outside the model's names the TFDS sentence and word.
    sentence = next(s for s in conll.read_tfds_conll("conll2003", tfds_dir, "train") if "B-MISC" in s.labels)
    with pytest.raises(InputFileError, match=rf"^{re.escape(sentence.source)} word 3: label 'B-MISC' is not one of"):
        conll.convert_sentences_to_features([sentence], _Pieces(), 16, {"O": 0, "B-ORG": 1}, "unused")


class _Pieces:
    """A tokenizer stand-in: one piece per word."""

    def tokenize(self, word):
        return [word]

    def convert_tokens_to_ids(self, tokens):
        return list(range(len(tokens)))


def review_triples(examples):
    return sorted((e.text_a, e.text_b, e.label) for e in examples)


def test_classifier_from_tfds_equals_the_csv_files(sources, tfds_dir):
    # The ClassLabel's names, in its order, are the label list.
    dataset = with_dataset_labels(
        get_dataset("tiny_reviews", text_a_feature="sentence", text_b_feature="other"), tfds_dir
    )
    assert dataset.labels == REVIEW_LABELS and not dataset.is_regression
    csv_dataset = get_dataset("csv", text_a_column="sentence", text_b_column="other")
    for split in ("train", "dev", "test"):
        from_csv = read_examples(csv_dataset, sources, split)
        from_tfds = read_examples(dataset, tfds_dir, split)
        if split == "test":  # unlabeled: the placeholder, the first label of each dataset's list
            assert {e.label for e in from_tfds} == {"positive"} and {e.label for e in from_csv} == {None}
            from_tfds = [dataclasses.replace(e, label=None) for e in from_tfds]
        assert review_triples(from_tfds) == review_triples(from_csv)
        assert [e.guid for e in from_tfds] == [f"{dict(dataset.split_names)[split]}-{i}" for i in range(len(from_csv))]

    # An integer label feature: labels inferred from train, as from the CSV's column.
    stars = with_dataset_labels(get_dataset("tiny_reviews", text_a_feature="sentence", label_feature="stars"), tfds_dir)
    assert stars.labels is None
    train = read_examples(stars, tfds_dir, "train")
    stars = with_labels(stars, train)
    csv_stars = get_dataset("csv", text_a_column="sentence", label_column="stars")
    csv_train = read_examples(csv_stars, sources, "train")
    assert stars.labels == with_labels(csv_stars, csv_train).labels == ("1", "2", "4", "5")
    assert review_triples(read_examples(stars, tfds_dir, "dev")) == review_triples(
        read_examples(with_labels(csv_stars, csv_train), sources, "dev")
    )

    # A float label feature: a regression, the targets as TFDS stores them (float32).
    score = with_dataset_labels(get_dataset("tiny_reviews", text_a_feature="sentence", label_feature="score"), tfds_dir)
    assert score.is_regression
    assert sorted(e.label for e in read_examples(score, tfds_dir, "train")) == sorted(
        float(np.float32(row[4])) for row in REVIEWS["train"]
    )

    # Split expressions pick slices, as TFDS does.
    sliced = get_dataset(
        "tiny_reviews", text_a_feature="sentence", labels=REVIEW_LABELS, splits={"train": "train[:3]+validation"}
    )
    assert len(read_examples(sliced, tfds_dir, "train")) == 3 + len(REVIEWS["dev"])
    assert split_names("train[:3]+validation") == ["train", "validation"]


# ----------------------------------------------------------------------------
# The tools, from TFDS and from the files.
# ----------------------------------------------------------------------------


def test_run_squad_from_tfds_predicts_and_evaluates_as_from_json(release, sources, tfds_dir, tmp_path):
    output_dir = tmp_path / "out"
    shape = ["--max_seq_length=40", "--doc_stride=12", "--max_query_length=12", "--n_best_size=3"]
    run_squad.main(release_flags(release, output_dir) + shape + [
        "--tfds_name=squad/v1.1", f"--data_dir={tfds_dir}", "--do_train", "--do_predict",
        "--train_batch_size=2", "--num_train_epochs=1", "--learning_rate=1e-3",
    ])
    from_tfds = read_results(output_dir / "eval_results.txt")
    predictions = json.loads((output_dir / "predictions.json").read_text(encoding="utf-8"))
    assert from_tfds["global_step"] == "2"  # int(5 usable questions / 2 * 1 epoch), t3 skipped
    assert set(predictions) == {"d1", "d2", "d3"}

    # The same model predicting the JSON file: the same answers, the same official scores.
    run_squad.main(release_flags(release, output_dir, init_checkpoint="") + shape + [
        f"--predict_file={sources / 'squad-v1.1-dev.json'}", "--do_predict",
    ])
    assert json.loads((output_dir / "predictions.json").read_text(encoding="utf-8")) == predictions
    assert read_results(output_dir / "eval_results.txt") == from_tfds


def prediction_blocks(path):
    """The sentences of a predictions file, each a tuple of lines, sorted."""
    blocks = path.read_text(encoding="utf-8").split("\n\n")
    return sorted(tuple(block.splitlines()) for block in blocks if block.strip())


def test_run_ner_from_tfds_evaluates_and_predicts_as_from_files(release, sources, tfds_dir, tmp_path):
    output_dir = tmp_path / "out"
    run_ner.main(release_flags(release, output_dir) + [
        "--tfds_name=conll2003", f"--data_dir={tfds_dir}", "--do_train", "--do_eval", "--do_predict",
        "--max_seq_length=8", "--train_batch_size=4", "--num_train_epochs=1", "--eval_batch_size=3",
    ])
    assert (output_dir / "label_list.txt").read_text(encoding="utf-8") == "".join(f"{t}\n" for t in NER_TAGS)
    from_tfds = read_results(output_dir / "eval_results.txt")
    blocks = {name: prediction_blocks(output_dir / name) for name in ("eval_predictions.txt", "test_predictions.txt")}
    # Every word line of the file comes back with its columns and one label.
    test_lines = sorted(line for line in CONLL_FILES["test.txt"].splitlines() if line and "DOCSTART" not in line)
    assert sorted(line.rsplit(" ", 1)[0] for b in blocks["test_predictions.txt"] for line in b) == test_lines

    run_ner.main(release_flags(release, output_dir, init_checkpoint="") + [
        f"--eval_file={sources / 'valid.txt'}", f"--predict_file={sources / 'test.txt'}", "--do_eval",
        "--do_predict", "--max_seq_length=8", "--eval_batch_size=3",
    ])
    from_files = read_results(output_dir / "eval_results.txt")
    assert float(from_files.pop("eval_loss")) == pytest.approx(float(from_tfds.pop("eval_loss")), rel=1e-5)
    assert from_files == from_tfds
    assert {name: prediction_blocks(output_dir / name) for name in blocks} == blocks


def test_run_classifier_from_tfds_evaluates_and_predicts_as_from_csv(release, sources, tfds_dir, tmp_path):
    output_dir = tmp_path / "out"
    sizes = ["--max_seq_length=16", "--eval_batch_size=4", "--predict_batch_size=2"]
    run_classifier.main(release_flags(release, output_dir) + sizes + [
        "--task_name=tiny_reviews", f"--data_dir={tfds_dir}", "--tfds_text_feature=sentence",
        "--tfds_text_b_feature=other", "--do_train", "--do_eval", "--do_predict",
        "--train_batch_size=4", "--num_train_epochs=1",
    ])
    from_tfds = read_results(output_dir / "eval_results.txt")
    assert from_tfds["global_step"] == "2"
    tfds_rows = (output_dir / "test_results.tsv").read_text().splitlines()
    tfds_texts = [e.text_a for e in read_examples(
        get_dataset("tiny_reviews", text_a_feature="sentence", labels=REVIEW_LABELS), tfds_dir, "test")]

    # The CSV files with the ClassLabel's label order, on the same model.
    run_classifier.main(release_flags(release, output_dir, init_checkpoint="") + sizes + [
        "--task_name=csv", f"--data_dir={sources}", "--text_a_column=sentence", "--text_b_column=other",
        "--labels=positive,negative", "--do_eval", "--do_predict",
    ])
    from_csv = read_results(output_dir / "eval_results.txt")
    for key in ("eval_loss", "loss"):
        assert float(from_csv.pop(key)) == pytest.approx(float(from_tfds.pop(key)), rel=1e-5)
    assert from_csv == from_tfds
    csv_rows = (output_dir / "test_results.tsv").read_text().splitlines()
    # test_results.tsv follows each source's order: TFDS's stored one, the CSV file's.
    by_text = dict(zip([row[0] for row in REVIEWS["test"]], csv_rows))
    for text, row in zip(tfds_texts, tfds_rows, strict=True):
        expected = [float(p) for p in by_text[text].split("\t")]
        assert [float(p) for p in row.split("\t")] == pytest.approx(expected, rel=1e-5)


# ----------------------------------------------------------------------------
# Never downloading; errors as one line; --help.
# ----------------------------------------------------------------------------


# Sequence shapes that fit the tiny release (the tools' defaults are longer).
SHAPES = {
    run_squad: ["--max_seq_length=48", "--max_query_length=12"],
    run_ner: ["--max_seq_length=48"],
    run_classifier: ["--max_seq_length=48"],
}


def tool_error(capsys, tool, argv):
    """`(exit code, the one stderr line)` of `tool` run on `argv`."""
    code = run_tool(tool.main, SHAPES[tool] + argv, prog="tool")
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return code, lines[0]


@pytest.mark.parametrize("tool, name, extra", [
    (run_squad, "squad/v1.1", ["--do_predict"]),
    (run_squad, "squad/v2.0", ["--do_train", "--version_2_with_negative"]),
    (run_ner, "conll2003", ["--do_eval"]),
    (run_classifier, "glue/mrpc", ["--do_eval"]),
])
def test_unprepared_dataset_is_one_line_and_nothing_is_downloaded(tool, name, extra, release, tmp_path, capsys):
    empty = tmp_path / "tfds"
    empty.mkdir()
    source = [f"--task_name={name}"] if tool is run_classifier else [f"--tfds_name={name}"]
    argv = release_flags(release, tmp_path / "out") + source + [f"--data_dir={empty}", *extra]
    code, line = tool_error(capsys, tool, argv)
    assert code == 1
    assert line == (
        f"tool: error: {empty}: TFDS dataset {name} is not prepared there (this tool never downloads; "
        f"prepare it with `tfds build {name} --data_dir {empty}`)"
    )
    assert not any(empty.iterdir())


def test_bad_tfds_input_is_one_line(release, tfds_dir, tmp_path, capsys):
    data = f"--data_dir={tfds_dir}"
    reviews = ["--task_name=tiny_reviews", data, "--do_eval"]
    cases = [  # (tool, flags, exit code, the message after "tool: error: ")
        (run_squad, ["--tfds_name=squad/v1.1", data, "--do_predict", "--predict_split=test"], 1,
         f"{tfds_dir}/squad/v1.1/3.0.0: TFDS dataset squad/v1.1 has no split 'test' (it has 'train', 'validation')"),
        (run_ner, ["--tfds_name=conll2003", data, "--do_eval", "--eval_split=validation"], 1,
         f"{tfds_dir}/conll2003/conll2003/1.0.0: TFDS dataset conll2003 has no split 'validation' "
         "(it has 'train', 'dev', 'test')"),
        (run_classifier, reviews + ["--tfds_text_feature=review"], 1,
         f"{tfds_dir}/tiny_reviews/1.0.0: TFDS dataset tiny_reviews has no feature 'review' "
         "(it has 'sentence', 'other', 'label', 'stars', 'score')"),
        (run_classifier, reviews + ["--tfds_text_feature=stars"], 1,
         f"{tfds_dir}/tiny_reviews/1.0.0: feature 'stars' of TFDS dataset tiny_reviews is not one text per example"),
        (run_classifier, ["--task_name=no_such_data", data, "--tfds_text_feature=text", "--do_eval"], 1,
         f"{tfds_dir}: no TFDS dataset no_such_data there or installed (Dataset no_such_data not found.); "
         f"prepare it with `tfds build no_such_data --data_dir {tfds_dir}`"),
        (run_squad, ["--tfds_name=squad/v1.1", data, "--do_predict", "--predict_file=x.json"], 2,
         "--predict_file and --tfds_name both name the questions; give one (see --help)"),
        (run_squad, ["--tfds_name=squad/v1.1", "--do_predict"], 2, "missing required flag(s): --data_dir (see --help)"),
        (run_ner, ["--train_file=x.txt", "--do_train", "--train_split=dev"], 2,
         "--train_split applies with --tfds_name only (see --help)"),
        (run_classifier, ["--task_name=mrpc", data, "--eval_split=dev", "--do_eval"], 2,
         "--eval_split applies to TFDS tasks only (glue/<name> or --tfds_text_feature) (see --help)"),
        (run_classifier, ["--task_name=glue/mrpc", data, "--tfds_label_feature=x", "--do_eval"], 2,
         "--tfds_label_feature needs --tfds_text_feature (see --help)"),
    ]
    flags = release_flags(release, tmp_path / "out")
    for tool, argv, expected_code, expected in cases:
        assert tool_error(capsys, tool, flags + argv) == (expected_code, f"tool: error: {expected}"), argv


@pytest.mark.parametrize("tool, listed", [
    (run_squad, ["tfds_name", "data_dir", "train_split", "predict_split"]),
    (run_ner, ["tfds_name", "data_dir", "train_split", "eval_split", "predict_split"]),
    (run_classifier, ["tfds_text_feature", "tfds_text_b_feature", "tfds_label_feature", "train_split", "eval_split",
                      "predict_split"]),
])
def test_help_documents_the_tfds_flags(tool, listed, capsys):
    with pytest.raises(SystemExit) as exit_info:
        tool.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "TensorFlow Datasets" in out.split("flags:")[0]
    for flag in listed:
        assert f"--{flag}: " in out, flag
