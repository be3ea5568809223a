"""Distillation of a multi-label classifier (`TextClassifier.distill`, `bert-distill` of a release with
`multi_label.json`).

References: the soft-target loss and its gradient written out in NumPy; the student's agreement with
its teacher's label decisions against the student before training and the majority baseline;
`eval_results.txt` against scikit-learn's F1 on the probabilities the tool writes; the student's
release read back by `TextClassifier.from_release`.
"""

import json
import random

import numpy as np
import pytest

from keras_bert_impl.config import BertConfig
from keras_bert_impl.models.distillation_losses import MultiLabelSoftTargetLoss
from keras_bert_impl.tasks.distillation import DistillationError
from keras_bert_impl.tasks.text_classifier import TextClassifier
from keras_bert_impl.tokenization.preprocessor import BertPreprocessor

LABELS = ("politics", "science", "sports")
THRESHOLDS = (0.5, 0.4, 0.6)
KEYWORDS = {"politics": "vote", "science": "theory", "sports": "goal"}
FILLER = ["the", "a", "news", "today", "report", "about"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(KEYWORDS.values()), *FILLER]


def topical_set(seed, count):
    """`(texts, 0/1 [count, 3])`: filler words and the keyword of each of the text's topics (each at 0.4)."""
    rng = random.Random(seed)
    texts, targets = [], []
    for _ in range(count):
        on = [rng.random() < 0.4 for _ in LABELS]
        words = [rng.choice(FILLER) for _ in range(rng.randint(2, 5))]
        for label, present in zip(LABELS, on):
            if present:
                words.insert(rng.randrange(len(words) + 1), KEYWORDS[label])
        texts.append(" ".join(words))
        targets.append(on)
    return texts, np.array(targets, np.float32)


@pytest.fixture(scope="module")
def teacher():
    """A 4-layer multi-label teacher, fine-tuned on `topical_set`, with its own thresholds."""
    import keras

    keras.utils.set_random_seed(0)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=4, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)
    model = TextClassifier(config, 3, BertPreprocessor(VOCAB, max_seq_length=12), learning_rate=2e-3, seed=1,
                           multi_label=True, label_names=LABELS, threshold=THRESHOLDS)
    model.compile()
    model.fit(*topical_set(1, 240), batch_size=16, epochs=6, verbose=0)
    return model


def agreement(a, b):
    return float(np.mean(np.asarray(a) == np.asarray(b)))


# -- the loss ---------------------------------------------------------------------


def test_the_soft_target_loss_is_the_binary_cross_entropy_of_the_sigmoids_at_t():
    import tensorflow as tf

    rng = np.random.default_rng(0)
    teacher, student = rng.normal(size=(5, 4)) * 3, rng.normal(size=(5, 4)) * 3
    t = 2.5
    p, q = 1 / (1 + np.exp(-teacher / t)), 1 / (1 + np.exp(-student / t))
    cross_entropy = -(p * np.log(q) + (1 - p) * np.log(1 - q))  # [5, 4]: per text, per label
    entropy = -(p * np.log(p) + (1 - p) * np.log(1 - p))  # the teacher's: no student in it
    expected = np.mean(t * t * np.mean(cross_entropy - entropy, axis=-1))
    loss = MultiLabelSoftTargetLoss(t)
    assert float(loss(teacher, student)) == pytest.approx(expected, rel=1e-5)
    assert float(loss(teacher, teacher)) == pytest.approx(0.0, abs=1e-6)
    # Its gradient is the cross-entropy's, T² (q - p) / T per logit, over the 5 x 4 entries averaged.
    logits = tf.Variable(student, dtype=tf.float32)
    with tf.GradientTape() as tape:
        value = loss(tf.constant(teacher, tf.float32), logits)
    np.testing.assert_allclose(tape.gradient(value, logits).numpy(), t * (q - p) / student.size, rtol=1e-4, atol=1e-7)
    # Not the softmax's: a shift of every label's logit changes each sigmoid.
    assert float(loss(teacher, teacher + 1.0)) > 0.01


# -- TextClassifier.distill -------------------------------------------------------


def test_the_student_learns_the_teachers_sigmoids_from_unlabelled_texts(teacher):
    """Soft targets only (no labels, no hidden states): whatever the student learns, it learns from the
    teacher's sigmoids. Its decisions at the teacher's thresholds agree with the teacher's far more than
    before training and than the majority decision per label (measured: 0.67 before, 0.99 after, majority 0.65)."""
    from keras_bert_impl.tasks.distillation import DistillationOptions, make_student

    dev = topical_set(2, 80)
    decisions = teacher.predict_labels(dev[0], verbose=0)
    majority = np.mean(np.maximum(decisions.mean(axis=0), 1 - decisions.mean(axis=0)))
    before = make_student(teacher, 1, DistillationOptions())
    assert before.multi_label and before.threshold == THRESHOLDS and before.label_names == LABELS
    start = agreement(before.predict_labels(dev[0], verbose=0), decisions)
    student = teacher.distill(None, unlabeled_texts=topical_set(3, 160)[0], num_hidden_layers=1, batch_size=16,
                              epochs=3, verbose=0, hard_weight=0, hidden_weight=0, validation_data=dev)
    history = student.history.history
    assert set(history) == {"loss", "val_loss", "val_accuracy"}
    assert history["loss"][-1] < 0.5 * history["loss"][0]
    after = agreement(student.predict_labels(dev[0], verbose=0), decisions)
    assert after >= 0.95 and after > start + 0.1 and after > majority + 0.2, (start, after, majority)
    # validation_data: the student's binary cross-entropy and per-label accuracy at 0.5 on the true labels.
    probabilities = student.predict(dev[0], verbose=0).astype(np.float64)
    assert history["val_accuracy"][-1] == pytest.approx(agreement(probabilities >= 0.5, dev[1] == 1), abs=1e-6)
    cross_entropy = -(dev[1] * np.log(probabilities) + (1 - dev[1]) * np.log(1 - probabilities))
    assert history["val_loss"][-1] == pytest.approx(cross_entropy.mean(), rel=1e-4)


def test_a_student_with_labels_is_a_multi_label_release_of_the_teachers_labels(teacher, tmp_path):
    texts, targets = topical_set(4, 64)
    student = teacher.distill(texts, targets.astype(int), num_hidden_layers=1, batch_size=16, epochs=1, verbose=0)
    assert {"soft_loss", "hard_loss", "hidden_loss"} <= set(student.history.history)
    student.save_release(str(tmp_path / "student"))
    assert json.loads((tmp_path / "student" / "multi_label.json").read_text()) == {
        "labels": list(LABELS), "thresholds": list(THRESHOLDS)}
    again = TextClassifier.from_release(str(tmp_path / "student"), max_seq_length=12)
    assert again.multi_label and again.label_names == LABELS and again.threshold == THRESHOLDS
    assert again.bert_config.num_hidden_layers == 1
    np.testing.assert_array_equal(again.predict_labels(texts, verbose=0), student.predict_labels(texts, verbose=0))


@pytest.mark.parametrize("labels, fragment", [
    ([[1, 0, 0], [0, 2, 1]], r"^labels row 1 is \[0 2 1\]: multi-label targets are 0/1 rows of the 3 labels$"),
    ([[1, 0, 0], [0, 0.5, 1]], r"^labels row 1 is \[0.  0.5 1. \]: multi-label targets are 0/1 rows"),
    ([0, 2], r"^labels of a multi-label teacher are 0/1 rows, of shape \[2, 3\] for 2 texts; got labels of "
             r"shape \[2\]$"),
    ([[1, 0], [0, 1]], r"^labels of a multi-label teacher are 0/1 rows, of shape \[2, 3\] .* shape \[2, 2\]$"),
])
def test_labels_that_are_not_0_1_rows_are_refused_before_training(teacher, labels, fragment):
    steps = int(teacher.optimizer.iterations.numpy())
    with pytest.raises(DistillationError, match=fragment):
        teacher.distill(["vote today", "goal news"], labels, num_hidden_layers=1)
    assert int(teacher.optimizer.iterations.numpy()) == steps


# -- bert-distill of a multi-label release ------------------------------------------


def write_splits(data_dir):
    """train/dev/test csv files (`text`, `labels` joined by `|`); test holds the dev texts. Returns dev."""
    data_dir.mkdir()
    for split, (seed, count) in {"train": (1, 160), "dev": (2, 80), "test": (2, 80)}.items():
        texts, targets = topical_set(seed, count)
        rows = ["text,labels"] + [f"{text},{'|'.join(np.array(LABELS)[row == 1])}" for text, row in zip(texts, targets)]
        (data_dir / f"{split}.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return topical_set(2, 80)


@pytest.fixture(scope="module")
def teacher_release(teacher, tmp_path_factory):
    """`(data_dir, release, dev)`: the teacher's release (`save_release`: label_list.txt, multi_label.json)."""
    root = tmp_path_factory.mktemp("multi_label_distill")
    teacher.save_release(str(root / "teacher"))
    return root / "data", root / "teacher", write_splits(root / "data")


def results(path):
    return dict(line.strip().split(" = ") for line in path.read_text().splitlines())


def test_bert_distill_makes_a_multi_label_student_release(teacher, teacher_release, tmp_path, capsys):
    from sklearn import metrics

    from keras_bert_impl.cli import run_tool
    from tools import distill

    data_dir, release, dev = teacher_release
    out = tmp_path / "student"
    argv = [f"--teacher_dir={release}", "--task_name=csv", f"--data_dir={data_dir}", "--label_delimiter=|",
            "--max_seq_length=12", "--train_batch_size=16", "--learning_rate=2e-3", "--num_train_epochs=2",
            "--do_eval", "--do_predict", f"--output_dir={out}"]
    distill.main(argv)
    assert json.loads((out / "multi_label.json").read_text()) == {"labels": list(LABELS),
                                                                 "thresholds": list(THRESHOLDS)}
    assert (out / "label_list.txt").read_text().split() == list(LABELS)
    assert BertConfig.from_json_file(str(out / "bert_config.json")).num_hidden_layers == 2
    assert json.loads((out / "training_settings.json").read_text())["multi_label"] is True

    # The teacher's eval: scikit-learn's F1 of the Python teacher's decisions at its thresholds.
    theirs = results(out / "teacher" / "eval_results.txt")
    decisions = teacher.predict_labels(dev[0], verbose=0)
    assert float(theirs["micro_f1"]) == pytest.approx(metrics.f1_score(dev[1], decisions, average="micro"), abs=1e-6)
    # The student's: the probabilities it wrote for the same texts, at the teacher's thresholds.
    ours = results(out / "eval_results.txt")
    probabilities = np.loadtxt(out / "test_results.tsv", ndmin=2)
    chosen = probabilities >= np.array(THRESHOLDS)
    assert [float(ours[f"{label}_threshold"]) for label in LABELS] == list(THRESHOLDS)
    for average in ("micro", "macro"):
        assert float(ours[f"{average}_f1"]) == pytest.approx(
            metrics.f1_score(dev[1], chosen, average=average, zero_division=0), abs=1e-6)
    assert agreement(chosen, decisions) >= 0.9
    assert ours["global_step"] == "20"  # 160 / 16 * 2 epochs

    # The student's release reads back multi-label, answering as the tool did.
    student = TextClassifier.from_release(str(out), max_seq_length=12)
    assert student.multi_label and student.label_names == LABELS and student.threshold == THRESHOLDS
    np.testing.assert_allclose(student.predict(dev[0], verbose=0), probabilities, atol=1e-5)

    # A rerun with another temperature is refused by name; the same command trains nothing more.
    capsys.readouterr()
    assert run_tool(distill.main, [*argv, "--temperature=3"], prog="distill") == 1
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("distill: error: ") and "temperature 2.0 (now 3.0)" in error, error
    distill.main(argv)
    assert results(out / "eval_results.txt") == ours


@pytest.mark.parametrize("case, fragment", [
    ("unknown_label", "train.csv:4: labels: label 'weather' is not one of politics, science, sports"),
    ("not_0_1", "train.csv:3: science: '2' is not 0 or 1"),
    ("other_columns", "the teacher's labels are politics,science,sports; the label columns are politics,sports: "
                      "give one 0/1 column per teacher label"),
    ("single_label_teacher", "--label_delimiter applies to a multi-label teacher only"),
    ("tfds_task", "a multi-label teacher's student reads csv, tsv or jsonl files; --task_name is mrpc"),
])
def test_bert_distill_bad_multi_label_input_is_one_line(teacher_release, tmp_path, capfd, case, fragment):
    from keras_bert_impl.cli import run_tool
    from tools import distill

    _, release, _ = teacher_release
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    flags = ["--label_delimiter=|"]
    if case == "unknown_label":
        (data_dir / "train.csv").write_text("text,labels\nvote today,politics\ngoal,sports\nrain,weather\n")
    elif case in ("not_0_1", "other_columns"):
        (data_dir / "train.csv").write_text("text,politics,science,sports\nvote,1,0,0\ntheory,0,2,0\n")
        flags = ["--label_columns=politics,science,sports" if case == "not_0_1" else "--label_columns=politics,sports"]
    elif case == "single_label_teacher":
        config = BertConfig(vocab_size=len(VOCAB), hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                            intermediate_size=16, max_position_embeddings=16)
        single = TextClassifier(config, 2, BertPreprocessor(VOCAB, max_seq_length=12), label_names=("neg", "pos"))
        single.save_release(str(tmp_path / "single"))
        release = tmp_path / "single"
    task = "mrpc" if case == "tfds_task" else "csv"
    argv = [f"--teacher_dir={release}", f"--task_name={task}", f"--data_dir={data_dir}", "--max_seq_length=12",
            f"--output_dir={tmp_path / 'out'}", *flags]
    capfd.readouterr()
    code, stderr = run_tool(distill.main, argv, prog="distill"), capfd.readouterr().err
    lines = stderr.strip().splitlines()
    assert code != 0 and len(lines) == 1 and fragment in lines[0], stderr
    assert not (tmp_path / "out").exists()


def test_a_multi_label_teacher_is_no_single_label_classifiers_teacher(teacher_release):
    """`ClassifierDistillation` (a softmax over the classes) refuses it by its `multi_label.json`."""
    import types

    from keras_bert_impl.errors import CheckpointError
    from keras_bert_impl.tasks.distillation import refuse_multi_label_teacher

    _, release, _ = teacher_release
    with pytest.raises(CheckpointError, match=r"multi_label.json: the teacher is a multi-label classifier"):
        refuse_multi_label_teacher(types.SimpleNamespace(init_checkpoint=str(release / "model.ckpt")))
