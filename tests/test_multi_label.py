"""Multi-label classification: the scores against scikit-learn, the loss against a
hand-computed value, the readers' one-line errors, and learning on a tiny
synthetic set through `TextClassifier(multi_label=True)` and
`bert-run-classifier --multi_label`; thresholds tuned per label against a
brute-force search with scikit-learn, recorded in the release and answered
with by the export."""

import csv
import json
import math
import random

import numpy as np
import pytest

from keras_bert_impl.data.multi_label import (
    DEFAULT_THRESHOLD_GRID,
    MultiLabelDataset,
    multi_hot,
    multi_label_scores,
    per_example_binary_cross_entropy,
    tune_thresholds,
)
from keras_bert_impl.errors import InputFileError
from tests.helpers import tiny_config
from tests.test_multiple_choice import release  # noqa: F401 (a fixture: a small release, the real vocab)
from tools import run_classifier

# The models built here have one encoder layer: what is tested (the loss, thresholds, the export's answers) does
# not depend on the layers, and each model's tracing (most of these tests' time) grows with them.

TOPICS = {
    "sports": ["football", "tennis", "goal", "match"],
    "politics": ["election", "senate", "vote", "minister"],
    "science": ["physics", "biology", "experiment", "theory"],
}
FILLER = "the a today news report about and with of new".split()


def topical_text(rng, topics):
    words = [rng.choice(FILLER) for _ in range(5)]
    for topic in topics:
        words.insert(rng.randrange(len(words) + 1), rng.choice(TOPICS[topic]))
    return " ".join(words)


def baselines(targets):
    """What knowing no text gives: micro-F1 of predicting every label, and the loss of the labels' base rates."""
    from sklearn import metrics

    targets = np.asarray(targets, np.float64)
    rates = np.clip(targets.mean(axis=0), 1e-6, 1 - 1e-6)
    base_loss = -np.mean(targets * np.log(rates) + (1 - targets) * np.log(1 - rates))
    return metrics.f1_score(targets, np.ones_like(targets), average="micro"), base_loss


def topical_set(rng, count):
    """Texts holding a word of each of their topics (none to all three): learnable label by label."""
    rows = []
    for _ in range(count):
        topics = sorted(t for t in TOPICS if rng.random() < 0.4)
        rows.append((topical_text(rng, topics), topics))
    return rows


# -- scores and loss -------------------------------------------------------------


def write_topic_splits(data_dir, rng, num_train, num_dev):
    """Writes `train.csv`/`dev.csv` (`text`, `labels` joined by `|`) and `test.csv` (the dev texts) of
    `topical_set`; returns `(train, dev)`."""
    data_dir.mkdir()
    train, dev = topical_set(rng, num_train), topical_set(rng, num_dev)
    write_csv(data_dir / "train.csv", ["text", "labels"], [[text, "|".join(topics)] for text, topics in train])
    write_csv(data_dir / "dev.csv", ["text", "labels"], [[text, "|".join(topics)] for text, topics in dev])
    write_csv(data_dir / "test.csv", ["text"], [[text] for text, _ in dev])
    return train, dev


def test_scores_equal_scikit_learn():
    from sklearn import metrics

    rng = np.random.default_rng(0)
    targets = rng.integers(0, 2, (50, 4))
    predictions = rng.integers(0, 2, (50, 4))
    predictions[:, 3] = 0  # a label never predicted: precision 0/0 -> 0, as zero_division=0
    targets[:, 2] = 0  # a label never true
    labels = ("a", "b", "c", "d")
    scores = multi_label_scores(targets, predictions, labels)
    for average in ("micro", "macro"):
        assert scores[f"{average}_f1"] == pytest.approx(
            metrics.f1_score(targets, predictions, average=average, zero_division=0), abs=1e-12)
    assert scores["micro_precision"] == pytest.approx(
        metrics.precision_score(targets, predictions, average="micro", zero_division=0), abs=1e-12)
    assert scores["micro_recall"] == pytest.approx(
        metrics.recall_score(targets, predictions, average="micro", zero_division=0), abs=1e-12)
    precision, recall, f1, support = metrics.precision_recall_fscore_support(targets, predictions, zero_division=0)
    for i, label in enumerate(labels):
        assert scores[f"{label}_precision"] == pytest.approx(precision[i], abs=1e-12)
        assert scores[f"{label}_recall"] == pytest.approx(recall[i], abs=1e-12)
        assert scores[f"{label}_f1"] == pytest.approx(f1[i], abs=1e-12)
        assert scores[f"{label}_support"] == support[i]
    assert scores["exact_match"] == pytest.approx(metrics.accuracy_score(targets, predictions), abs=1e-12)


def test_loss_is_the_mean_sigmoid_cross_entropy_by_hand():
    # Two labels, logits 2 and -1, the first true: (log(1 + e^-2) + log(1 + e^-1)) / 2.
    by_hand = (math.log(1 + math.exp(-2)) + math.log(1 + math.exp(-1))) / 2
    assert by_hand == pytest.approx(0.2200948, abs=1e-7)
    assert per_example_binary_cross_entropy([[2.0, -1.0]], [[1, 0]])[0] == pytest.approx(by_hand, rel=1e-12)
    # Stable far out, where a naive log(sigmoid) gives inf.
    assert per_example_binary_cross_entropy([[-800.0]], [[1]])[0] == pytest.approx(800.0)


def test_keras_loss_of_the_model_is_the_same_formula(tmp_path):
    from keras_bert_impl.tasks.text_classifier import TextClassifier
    from keras_bert_impl.tokenization.preprocessor import BertPreprocessor

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "goal", "vote", "theory", "news"]
    model = TextClassifier(tiny_config(vocab_size=len(vocab), num_hidden_layers=1), num_classes=3, multi_label=True,
                           preprocessor=BertPreprocessor(vocab, max_seq_length=8))
    model.compile(optimizer="sgd")
    texts = ["goal news", "vote theory", "news"]
    targets = np.array([[1, 0, 0], [0, 1, 1], [0, 0, 0]])
    logits = np.asarray(model(model.preprocessor(texts), training=False), np.float64)
    probabilities = 1 / (1 + np.exp(-logits))
    expected = -np.mean(targets * np.log(probabilities) + (1 - targets) * np.log(1 - probabilities))
    loss, _ = model.evaluate(texts, targets, batch_size=3, verbose=0)
    assert loss == pytest.approx(expected, rel=1e-5)
    np.testing.assert_allclose(model.predict(texts, verbose=0), probabilities, rtol=1e-5, atol=1e-6)
    assert model.predict_labels(texts, verbose=0).tolist() == (probabilities >= 0.5).tolist()
    with pytest.raises(ValueError, match=r"y 1 is \[0 2 1\]"):
        model.fit(texts, [[1, 0, 0], [0, 2, 1], [0, 0, 0]], batch_size=3)
    with pytest.raises(ValueError, match="shape"):
        model.fit(texts, [0, 1, 2], batch_size=3)


# -- reading ---------------------------------------------------------------------


def write_csv(path, header, rows):
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def test_delimited_names_and_zero_one_columns(tmp_path):
    write_csv(tmp_path / "train.csv", ["text", "labels"], [["a", "sports,politics"], ["b", ""], ["c", "science"]])
    dataset = MultiLabelDataset("csv")
    examples = dataset.read_examples(str(tmp_path), "train")
    assert [e.labels for e in examples] == [("sports", "politics"), (), ("science",)]
    write_csv(tmp_path / "dev.csv", ["comment", "toxic", "insult"], [["x", "1", "0"], ["y", "1", "1"]])
    columns = MultiLabelDataset("csv", text_a_column="comment", label_columns=("toxic", "insult"))
    examples = columns.read_examples(str(tmp_path), "dev")
    assert columns.labels == ("toxic", "insult")
    assert multi_hot(examples, columns.labels).tolist() == [[1, 0], [1, 1]]
    (tmp_path / "train.jsonl").write_text(json.dumps({"text": "t", "labels": ["a", "b"]}) + "\n", encoding="utf-8")
    assert MultiLabelDataset("jsonl").read_examples(str(tmp_path), "train")[0].labels == ("a", "b")


@pytest.mark.parametrize("dataset, header, row, message", [
    (MultiLabelDataset("csv", labels=("a", "b")), ["text", "labels"], ["t", "a,z"],
     ":3: labels: label 'z' is not one of a, b"),
    (MultiLabelDataset("csv", label_columns=("a", "b")), ["text", "a", "b"], ["t", "1", "2"], ":3: b: '2' is not 0 or 1"),
    (MultiLabelDataset("csv"), ["text", "labels"], ["t", "a,,b"], ":3: labels: an empty label name"),
    (MultiLabelDataset("csv"), ["text", "labels"], ["t", "a,a"], ":3: labels: a label repeated"),
])
def test_bad_rows_name_file_line_and_column(tmp_path, dataset, header, row, message):
    good = ["ok"] + ["0"] * (len(header) - 1) if dataset.label_columns else ["ok", "a"]
    write_csv(tmp_path / "train.csv", header, [good, row])
    with pytest.raises(InputFileError) as raised:
        dataset.read_examples(str(tmp_path), "train")
    assert f"{tmp_path / 'train.csv'}{message}" in str(raised.value)


def test_an_empty_label_set_is_refused():
    with pytest.raises(InputFileError, match="label list is empty"):
        MultiLabelDataset("csv", labels=())


# -- learning ----------------------------------------------------------------------


def test_text_classifier_learns_several_labels(release):
    from sklearn import metrics

    from keras_bert_impl.tasks.text_classifier import TextClassifier

    rng = random.Random(0)
    train, test = topical_set(rng, 240), topical_set(rng, 80)
    labels = tuple(TOPICS)

    def targets(rows):
        return np.array([[label in topics for label in labels] for _, topics in rows], np.float32)

    model = TextClassifier.from_release(str(release), num_classes=3, multi_label=True, max_seq_length=16,
                                        learning_rate=1e-3, warmup_proportion=0.1, seed=1)
    model.compile()
    model.fit([text for text, _ in train], targets(train), batch_size=16, epochs=12, verbose=0)
    predicted = model.predict_labels([text for text, _ in test], verbose=0)
    micro = metrics.f1_score(targets(test), predicted, average="micro")
    # A 1-layer model from random weights: sometimes it learns only how many topic words a text has (micro-F1
    # about 0.75), sometimes which (above 0.9); either is well above knowing nothing of the text.
    every_label, base_loss = baselines(targets(test))
    assert micro >= every_label + 0.1, (micro, every_label)
    probabilities = model.predict([text for text, _ in test], verbose=0)
    loss = -np.mean(targets(test) * np.log(probabilities + 1e-7) + (1 - targets(test)) * np.log(1 - probabilities + 1e-7))
    assert loss < base_loss - 0.1, (loss, base_loss)
    # Saved with its labels' mode: from_config gives the same probabilities.
    again = TextClassifier.from_config(model.get_config())
    again.set_weights(model.get_weights())
    assert again.multi_label and again.threshold == 0.5
    np.testing.assert_allclose(again.predict([test[0][0]], verbose=0), model.predict([test[0][0]], verbose=0),
                               atol=1e-6)


def test_run_classifier_multi_label_learns_and_scores(release, tmp_path):
    from sklearn import metrics

    data_dir, output_dir = tmp_path / "topics", tmp_path / "out"
    train, dev = write_topic_splits(data_dir, random.Random(1), 240, 80)
    run_classifier.main([
        "--task_name=csv", f"--data_dir={data_dir}", f"--vocab_file={release / 'vocab.txt'}",
        f"--bert_config_file={release / 'bert_config.json'}", f"--init_checkpoint={release / 'bert_model.ckpt'}",
        f"--output_dir={output_dir}", "--max_seq_length=16", "--train_batch_size=16", "--learning_rate=1e-3",
        "--warmup_proportion=0.1", "--num_train_epochs=12", "--multi_label", "--label_delimiter=|",
        "--do_train", "--do_eval", "--do_predict",
    ])
    values = dict(line.split(" = ") for line in (output_dir / "eval_results.txt").read_text().splitlines())
    assert (output_dir / "label_list.txt").read_text().split() == ["politics", "science", "sports"]
    # The test file is the dev texts: its probabilities, at 0.5, give eval_results' scores (scikit-learn's).
    probabilities = np.loadtxt(output_dir / "test_results.tsv", ndmin=2)
    assert probabilities.shape == (80, 3)
    labels = ("politics", "science", "sports")
    targets = np.array([[label in topics for label in labels] for _, topics in dev])
    predicted = probabilities >= 0.5
    every_label, base_loss = baselines(targets)
    assert float(values["micro_f1"]) >= every_label + 0.1 and float(values["eval_loss"]) < base_loss - 0.1, values
    assert float(values["micro_f1"]) == pytest.approx(metrics.f1_score(targets, predicted, average="micro"), abs=1e-6)
    assert float(values["macro_f1"]) == pytest.approx(metrics.f1_score(targets, predicted, average="macro"), abs=1e-6)
    assert float(values["sports_f1"]) == pytest.approx(metrics.f1_score(targets[:, 2], predicted[:, 2]), abs=1e-6)
    assert float(values["eval_loss"]) == pytest.approx(
        np.mean([metrics.log_loss(targets[:, i], probabilities[:, i], labels=[0, 1]) for i in range(3)]), rel=1e-3)


def test_run_classifier_multi_label_flags_are_checked(release, tmp_path):
    from keras_bert_impl.cli import FlagError

    base = ["--task_name=mrpc", f"--data_dir={tmp_path}", f"--vocab_file={release / 'vocab.txt'}",
            f"--bert_config_file={release / 'bert_config.json'}", f"--output_dir={tmp_path / 'out'}", "--do_train"]
    with pytest.raises(FlagError, match="--multi_label reads csv, tsv or jsonl"):
        run_classifier.main(base + ["--multi_label"])
    with pytest.raises(FlagError, match="--threshold applies with --multi_label only"):
        run_classifier.main(base + ["--threshold=0.3"])
    with pytest.raises(FlagError, match="--tune_threshold applies with --multi_label only"):
        run_classifier.main(base + ["--tune_threshold"])
    csv_task = [flag.replace("mrpc", "csv") for flag in base] + ["--multi_label", "--tune_threshold"]
    with pytest.raises(FlagError, match="^--tune_threshold chooses the thresholds on the dev set: it needs --do_eval$"):
        run_classifier.main(csv_task)
    with pytest.raises(FlagError, match="^--threshold and --tune_threshold both set the thresholds: give one$"):
        run_classifier.main(csv_task + ["--do_eval", "--threshold=0.3"])


def test_export_answers_predicts_probabilities_and_its_threshold(tmp_path):
    """The raw-text SavedModel of a multi-label classifier (verified as TF Serving loads it): each label's
    probability as `predict` gives it, and the labels at or over the model's threshold."""
    import tensorflow as tf

    from keras_bert_impl.tasks.text_classifier import TextClassifier
    from keras_bert_impl.tokenization.preprocessor import BertPreprocessor
    from tests.helpers import randomize

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "goal", "vote", "theory", "news", "today"]
    model = TextClassifier(tiny_config(vocab_size=len(vocab), num_hidden_layers=1), num_classes=3, multi_label=True,
                           threshold=(0.5, 0.3, 0.7), label_names=("sports", "politics", "science"),
                           preprocessor=BertPreprocessor(vocab, max_seq_length=10))
    randomize(model, seed=2, scale=0.4)
    texts = ["goal news today", "vote theory", "news", "theory theory goal vote today"]
    probabilities = model.predict(texts, verbose=0)
    version = model.export(tmp_path / "saved_models" / "tags")
    assert (tmp_path / "saved_models" / "tags" / version.split("/")[-1] / "assets" / "labels.txt").read_text().split() \
        == ["sports", "politics", "science"]
    served = tf.saved_model.load(version).signatures["serving_default"]
    outputs = served(tf.constant(texts))
    np.testing.assert_allclose(outputs["probabilities"].numpy(), probabilities, atol=1e-4)
    assert outputs["label_mask"].numpy().tolist() == (probabilities >= np.array([0.5, 0.3, 0.7])).tolist()


# -- thresholds tuned per label ------------------------------------------------------


def brute_force_thresholds(probabilities, targets, grid):
    """Each label's best threshold by scikit-learn's F1 at every grid value; of equal F1 the nearest 0.5,
    then the lower; a label without positives 0.5."""
    from sklearn import metrics

    chosen = []
    for label in range(targets.shape[1]):
        if not targets[:, label].any():
            chosen.append(0.5)
            continue
        scores = {t: metrics.f1_score(targets[:, label], probabilities[:, label] >= t, zero_division=0) for t in grid}
        best = max(scores.values())
        chosen.append(min((t for t, f1 in scores.items() if f1 == best), key=lambda t: (abs(t - 0.5), t)))
    return tuple(chosen)


@pytest.mark.parametrize("seed", range(4))
def test_tuned_thresholds_are_the_brute_force_best(seed):
    rng = np.random.default_rng(seed)
    targets = rng.integers(0, 2, (40, 5))
    targets[:, 4] = 0  # no positive in dev: keeps 0.5
    # Probabilities that lean to the truth, some on the grid's values themselves (ties at ">=").
    probabilities = np.clip(0.35 * targets + rng.uniform(0, 0.7, targets.shape), 0.01, 0.99)
    probabilities[:8] = rng.choice(DEFAULT_THRESHOLD_GRID, (8, 5))
    assert tune_thresholds(probabilities, targets) == brute_force_thresholds(probabilities, targets,
                                                                             DEFAULT_THRESHOLD_GRID)
    grid = (0.2, 0.45, 0.55, 0.8)  # 0.45 and 0.55 as near 0.5: a tie goes to the lower
    assert tune_thresholds(probabilities, targets, grid) == brute_force_thresholds(probabilities, targets, grid)


def test_tuned_threshold_ties_and_bad_input():
    # Label 0: every threshold up to 0.3 gives F1 1: the nearest 0.5 of them. Label 1: F1 the same at 0.45 and 0.55.
    probabilities = np.array([[0.3, 0.6], [0.3, 0.4], [0.1, 0.5]])
    targets = np.array([[1, 1], [1, 0], [0, 0]])
    assert tune_thresholds(probabilities, targets) == (0.3, 0.55)
    assert tune_thresholds(probabilities, targets, grid=(0.45, 0.55)) == (0.45, 0.55)  # label 0: F1 0.8 at both
    with pytest.raises(ValueError, match=r"probabilities \(3, 2\) and targets \(3, 3\)"):
        tune_thresholds(probabilities, np.zeros((3, 3)))
    with pytest.raises(ValueError, match=r"grid \[0.5, 1.0\]: the thresholds tried must be at least one, each in"):
        tune_thresholds(probabilities, targets, grid=(0.5, 1.0))


VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "goal", "vote", "theory", "news", "today", "match", "senate"]
TAG_NAMES = ("sports", "politics", "science")


def random_tagger():
    from keras_bert_impl.tasks.text_classifier import TextClassifier
    from keras_bert_impl.tokenization.preprocessor import BertPreprocessor
    from tests.helpers import randomize

    model = TextClassifier(tiny_config(vocab_size=len(VOCAB), num_hidden_layers=1), num_classes=3, multi_label=True,
                           label_names=TAG_NAMES, preprocessor=BertPreprocessor(VOCAB, max_seq_length=10))
    randomize(model, seed=2, scale=0.4)
    rng = random.Random(3)
    texts = [" ".join(rng.choice(VOCAB[4:]) for _ in range(rng.randint(1, 6))) for _ in range(24)]
    return model, texts


def test_tuned_thresholds_go_into_the_release_and_the_export(tmp_path, capsys):
    """`tune_threshold` sets the brute-force thresholds; `save_release` records them, `from_release` and
    `bert-export --model_dir` (verified as TF Serving loads it) answer with them."""
    import tensorflow as tf

    from keras_bert_impl.cli import run_tool
    from keras_bert_impl.serving.export import read_export_metadata
    from keras_bert_impl.tasks.text_classifier import TextClassifier
    from tools.export_saved_model import main as export_main

    model, texts = random_tagger()
    probabilities = model.predict(texts, verbose=0)
    # Each label's true set: the texts over a quantile of its own probabilities, so the best thresholds differ.
    targets = (probabilities >= np.diag(np.quantile(probabilities, [0.2, 0.5, 0.8], axis=0))).astype(int)
    tuned = model.tune_threshold(texts, targets, verbose=0)
    assert tuned == model.threshold == brute_force_thresholds(probabilities, targets, DEFAULT_THRESHOLD_GRID)
    masks = probabilities >= np.array(tuned, np.float32)
    assert (masks != (probabilities >= 0.5)).any()  # the thresholds change answers

    model.save_release(tmp_path / "release")
    assert json.loads((tmp_path / "release" / "multi_label.json").read_text()) == {
        "labels": list(TAG_NAMES), "thresholds": list(tuned)}
    again = TextClassifier.from_release(tmp_path / "release", max_seq_length=10)
    assert again.multi_label and again.threshold == tuned and again.label_names == TAG_NAMES
    np.testing.assert_array_equal(again.predict_labels(texts, verbose=0), masks)

    export_dir = tmp_path / "saved" / "tags"
    assert run_tool(export_main, [f"--model_dir={tmp_path / 'release'}", "--task=multi_label", "--max_seq_length=10",
                                  f"--export_dir={export_dir}"], prog="bert-export") == 0, capsys.readouterr().err
    assert read_export_metadata(str(export_dir / "1"))["thresholds"] == list(tuned)
    outputs = tf.saved_model.load(str(export_dir / "1")).signatures["serving_default"](tf.constant(texts))
    np.testing.assert_allclose(outputs["probabilities"].numpy(), probabilities, atol=1e-4)
    np.testing.assert_array_equal(outputs["label_mask"].numpy(), masks)


def test_a_bad_multi_label_record_is_one_line(tmp_path, capsys):
    from keras_bert_impl.cli import run_tool
    from keras_bert_impl.errors import CheckpointError
    from keras_bert_impl.tasks.text_classifier import TextClassifier
    from tools.export_saved_model import main as export_main

    model, _ = random_tagger()
    model.save_release(tmp_path / "release")
    record = tmp_path / "release" / "multi_label.json"
    record.write_text(json.dumps({"labels": list(TAG_NAMES), "thresholds": [0.5, 0.3]}))
    message = f"{record}: thresholds has 2 values for 3 labels: give one number, or one per label"
    with pytest.raises(CheckpointError) as raised:
        TextClassifier.from_release(tmp_path / "release", max_seq_length=10)
    assert str(raised.value) == message
    capsys.readouterr()
    assert run_tool(export_main, [f"--model_dir={tmp_path / 'release'}", "--task=multi_label", "--max_seq_length=10",
                                  f"--export_dir={tmp_path / 'saved' / 'tags'}"], prog="bert-export") == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"bert-export: error: {message}"
    record.write_text(json.dumps({"labels": ["sports", "politics", "maths"], "thresholds": [0.5, 0.3, 0.9]}))
    with pytest.raises(CheckpointError, match="labels sports,politics,maths are not those of .*label_list.txt: "
                                              "sports,politics,science"):
        TextClassifier.from_release(tmp_path / "release", max_seq_length=10)
    record.write_text(json.dumps({"labels": list(TAG_NAMES), "thresholds": [0.5, 1.0, 0.2]}))
    with pytest.raises(CheckpointError, match=r"thresholds: 1.0 is not in \(0, 1\)"):
        TextClassifier.from_release(tmp_path / "release", max_seq_length=10)


def test_run_classifier_tunes_thresholds_on_dev_and_the_export_uses_them(release, tmp_path, capsys):
    from sklearn import metrics

    from keras_bert_impl.cli import run_tool
    from keras_bert_impl.serving.export import read_export_metadata
    from tools.export_saved_model import main as export_main

    data_dir, output_dir = tmp_path / "topics", tmp_path / "out"
    train, dev = write_topic_splits(data_dir, random.Random(4), 96, 48)
    flags = ["--task_name=csv", f"--data_dir={data_dir}", f"--vocab_file={release / 'vocab.txt'}",
             f"--bert_config_file={release / 'bert_config.json'}", f"--init_checkpoint={release / 'bert_model.ckpt'}",
             f"--output_dir={output_dir}", "--max_seq_length=16", "--multi_label", "--label_delimiter=|"]
    run_classifier.main(flags + ["--train_batch_size=16", "--learning_rate=1e-3", "--num_train_epochs=4",
                                 "--do_train", "--do_eval", "--do_predict", "--tune_threshold"])
    labels = ("politics", "science", "sports")
    targets = np.array([[label in topics for label in labels] for _, topics in dev]).astype(int)
    probabilities = np.loadtxt(output_dir / "test_results.tsv", ndmin=2)  # the dev texts
    tuned = brute_force_thresholds(probabilities, targets, DEFAULT_THRESHOLD_GRID)
    values = dict(line.split(" = ") for line in (output_dir / "eval_results.txt").read_text().splitlines())
    assert tuple(float(values[f"{label}_threshold"]) for label in labels) == pytest.approx(tuned)
    assert float(values["micro_f1"]) == pytest.approx(
        metrics.f1_score(targets, probabilities >= np.array(tuned), average="micro"), abs=1e-6)
    assert json.loads((output_dir / "multi_label.json").read_text()) == {"labels": list(labels),
                                                                         "thresholds": pytest.approx(list(tuned))}
    # An evaluation-only rerun scores at the thresholds the release records.
    (output_dir / "eval_results.txt").unlink()
    run_classifier.main(flags + ["--do_eval"])
    again = dict(line.split(" = ") for line in (output_dir / "eval_results.txt").read_text().splitlines())
    assert again == values

    # --noverify: what is checked here is the thresholds the export takes (a multi-label bert-export verified as
    # TF Serving loads it: test_tuned_thresholds_go_into_the_release_and_the_export).
    export_dir = tmp_path / "saved" / "topics"
    assert run_tool(export_main, [f"--model_dir={output_dir}", "--task=multi_label", "--max_seq_length=16",
                                  f"--export_dir={export_dir}", "--noverify"], prog="bert-export") == 0, \
        capsys.readouterr().err
    assert read_export_metadata(str(export_dir / "1"))["thresholds"] == pytest.approx(list(tuned))
