"""Distillation of a fine-tuned TextClassifier into a shallower student.

References: DistilBERT's layer choice (every other layer of 12), the soft-target
loss and cosine distance written out in NumPy, the student's weights read back
from the checkpoints the two models write (not through our name map), and a
full-depth student, which must answer exactly as its teacher.
"""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.config import BertConfig
from keras_bert_impl.models.distillation_losses import CosineDistanceLoss, SoftTargetLoss
from keras_bert_impl.tasks.distillation import DistillationError, evenly_spaced_layers
from keras_bert_impl.tasks.text_classifier import TextClassifier
from keras_bert_impl.tokenization.preprocessor import BertPreprocessor

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "plot", "the", "a", "was"]


def sentiment(count, seed):
    """Texts of filler words with one "good" (label 1) or "bad" (label 0) somewhere."""
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for _ in range(count):
        label = int(rng.integers(2))
        words = list(rng.choice(["film", "plot", "the", "a", "was"], size=int(rng.integers(2, 6))))
        words.insert(int(rng.integers(len(words) + 1)), "good" if label else "bad")
        texts.append(" ".join(words))
        labels.append(label)
    return texts, np.array(labels)


@pytest.fixture(scope="module")
def teacher(classifier_release):
    """The release `bert-run-classifier` fine-tuned (`classifier_release`), loaded by `from_release` and compiled:
    one trained teacher for the Python API and the tool (a fit costs its tracing, ~12 s of CPU, more than its
    60 steps)."""
    _, release = classifier_release
    model = TextClassifier.from_release(str(release), num_classes=2, max_seq_length=10, learning_rate=2e-3, seed=1)
    model.compile()
    assert not model.load_report.fresh and model.label_names == ("neg", "pos")
    return model


def test_the_student_takes_every_other_layer_as_distilbert():
    assert evenly_spaced_layers(12, 6) == [0, 2, 4, 6, 8, 10]
    assert evenly_spaced_layers(6, 3) == [0, 2, 4]
    assert evenly_spaced_layers(4, 4) == [0, 1, 2, 3]
    for depth in (0, 5):
        with pytest.raises(DistillationError, match=r"num_hidden_layers must lie in \[1, 4\]"):
            evenly_spaced_layers(4, depth)


def test_the_losses_are_the_formulas():
    rng = np.random.default_rng(0)
    teacher, student = rng.normal(size=(5, 3)) * 3, rng.normal(size=(5, 3)) * 3
    t = 2.5

    def log_softmax(x):
        x = x - x.max(axis=-1, keepdims=True)
        return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))

    p = np.exp(log_softmax(teacher / t))
    expected = np.mean(t * t * np.sum(p * (log_softmax(teacher / t) - log_softmax(student / t)), axis=-1))
    assert float(SoftTargetLoss(t)(teacher, student)) == pytest.approx(expected, rel=1e-5)
    a, b = rng.normal(size=(4, 7)), rng.normal(size=(4, 7))
    cosine = np.sum(a * b, -1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
    assert float(CosineDistanceLoss()(a, b)) == pytest.approx(np.mean(1 - cosine), rel=1e-5)


def test_a_full_depth_student_starts_as_its_teacher(teacher):
    """Copied embeddings, layers, pooler and head: before any step, the same answers."""
    from keras_bert_impl.tasks.distillation import DistillationOptions, make_student

    student = make_student(teacher, 4, DistillationOptions())
    texts, _ = sentiment(20, seed=5)
    np.testing.assert_allclose(student.predict(texts, verbose=0), teacher.predict(texts, verbose=0), atol=1e-6)
    # The same classes, so the same names (its release and export answer with them).
    assert student.label_names == ("neg", "pos")
    teacher.label_names = None
    try:  # a teacher without names
        assert make_student(teacher, 2, DistillationOptions()).label_names is None
    finally:
        teacher.label_names = ("neg", "pos")


def test_the_student_learns_from_the_teacher_and_is_an_ordinary_release(teacher, tmp_path):
    train, dev = sentiment(240, seed=1), sentiment(80, seed=2)
    teacher_accuracy = teacher.evaluate(*dev, verbose=0, return_dict=True)["accuracy"]
    assert teacher_accuracy >= 0.9
    # Two epochs: the student answers the dev texts as well as its teacher after its first (measured: 1.0, 1.0).
    # One layer (of the teacher's 4): which layers a student takes is the test below; each layer costs tracing.
    student = teacher.distill(*train, num_hidden_layers=1, batch_size=16, epochs=2, verbose=0, validation_data=dev)
    assert student.bert_config.num_hidden_layers == 1 and student.num_classes == 2
    assert set(student.history.history) >= {"soft_loss", "hard_loss", "hidden_loss", "val_accuracy"}
    assert student.evaluate(*dev, verbose=0, return_dict=True)["accuracy"] >= 0.97 * teacher_accuracy

    # Its release: an original-layout checkpoint of its 1 layer, and its config.
    prefix = student.save_release(str(tmp_path / "student"))
    assert BertConfig.from_json_file(str(tmp_path / "student" / "bert_config.json")).num_hidden_layers == 1
    names = [name for name, _ in tf.train.list_variables(prefix)]
    assert "bert/encoder/layer_0/output/dense/kernel" in names and not any("layer_1/" in name for name in names)
    reloaded = TextClassifier.from_release(str(tmp_path / "student"), num_classes=2, max_seq_length=10)
    np.testing.assert_allclose(reloaded.predict(dev[0], verbose=0), student.predict(dev[0], verbose=0), atol=1e-5)


def test_the_students_layers_start_from_the_teachers_chosen_layers(teacher, tmp_path):
    from keras_bert_impl.tasks.distillation import DistillationOptions, make_student

    student = make_student(teacher, 2, DistillationOptions())
    theirs = tf.train.load_checkpoint(teacher.save_release(str(tmp_path / "teacher")))
    ours = tf.train.load_checkpoint(student.save_release(str(tmp_path / "student")))
    for student_layer, teacher_layer in ((0, 0), (1, 2)):
        name = "bert/encoder/layer_{}/attention/self/query/kernel"
        np.testing.assert_array_equal(ours.get_tensor(name.format(student_layer)),
                                      theirs.get_tensor(name.format(teacher_layer)))
    for name in ("bert/embeddings/word_embeddings", "bert/pooler/dense/kernel", "output_weights"):
        np.testing.assert_array_equal(ours.get_tensor(name), theirs.get_tensor(name))


def test_unlabelled_texts_alone_teach_the_student(teacher):
    dev = sentiment(80, seed=2)
    texts, _ = sentiment(240, seed=3)
    student = teacher.distill(None, unlabeled_texts=texts, num_hidden_layers=1, batch_size=16, epochs=2, verbose=0)
    assert "hard_loss" not in student.history.history
    teacher_accuracy = teacher.evaluate(*dev, verbose=0, return_dict=True)["accuracy"]
    assert student.evaluate(*dev, verbose=0, return_dict=True)["accuracy"] >= 0.97 * teacher_accuracy


@pytest.mark.parametrize("call, error, fragment", [
    (lambda t: t.distill(["good film"], [1], num_hidden_layers=5), DistillationError, r"\[1, 4\] .* got 5"),
    (lambda t: t.distill(["good film"], [1], num_hidden_layers=0), DistillationError, r"\[1, 4\] .* got 0"),
    (lambda t: t.distill([], None), DistillationError, "at least one text"),
    (lambda t: t.distill(["good film", 3], [1, 0]), TypeError, "text 1 is 3"),
    (lambda t: t.distill(["good film", "bad"], [1]), DistillationError, "one per text"),
    (lambda t: t.distill(["good film", "bad"], [1, 2]), DistillationError, r"class ids in \[0, 2\)"),
    (lambda t: t.distill(["good film", "bad"], [1.0, 0.5]), DistillationError, "class ids"),
    (lambda t: t.distill(["good film"], [1], temperature=float("nan")), DistillationError, "temperature"),
    # Were a bare numpy ValueError (concatenate) and TypeError ('float' object cannot be interpreted as an integer).
    (lambda t: t.distill(["good film", "bad"], [[1], [0]]), DistillationError,
     r"labels must be one per text, of shape \[2\] for 2 texts; got labels of shape \[2, 1\]"),
    (lambda t: t.distill(["good film"], [1], num_hidden_layers=1.5), DistillationError,
     "num_hidden_layers must be a whole number, got 1.5"),
])
def test_bad_input_is_refused_before_training(teacher, call, error, fragment):
    steps = int(teacher.optimizer.iterations.numpy())
    with pytest.raises(error, match=fragment):
        call(teacher)
    assert int(teacher.optimizer.iterations.numpy()) == steps


def test_a_teacher_with_a_fresh_head_is_refused(tmp_path):
    from keras_bert_impl.checkpoints.original import save_original_checkpoint
    from keras_bert_impl.models.bert_model import BertModel

    config = BertConfig(vocab_size=len(VOCAB), hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=16)
    config.to_json_file(str(tmp_path / "bert_config.json"))
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    save_original_checkpoint(BertModel(config), str(tmp_path / "bert_model.ckpt"))
    bare = TextClassifier.from_release(str(tmp_path), num_classes=2, max_seq_length=10)
    with pytest.raises(DistillationError, match="freshly initialised .* fine-tune it first"):
        bare.distill(["good film"], [1], num_hidden_layers=1)


# -- the tool: bert-distill on a run_classifier release ------------------------

@pytest.fixture(scope="module")
def classifier_release(tmp_path_factory):
    """A 4-layer release fine-tuned by run_classifier on a CSV sentiment set: (data_dir, release_dir)."""
    import keras

    from keras_bert_impl.checkpoints.original import save_original_checkpoint
    from keras_bert_impl.models.bert_model import BertModel
    from tools import run_classifier

    root = tmp_path_factory.mktemp("distill_tool")
    data_dir, base, release = root / "data", root / "base", root / "teacher"
    data_dir.mkdir(), base.mkdir()
    for split, (count, seed) in {"train": (240, 1), "dev": (80, 2), "test": (6, 4)}.items():
        texts, labels = sentiment(count, seed)
        rows = ["text,label"] + [f"{t},{'pos' if y else 'neg'}" for t, y in zip(texts, labels)]
        (data_dir / f"{split}.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (data_dir / "more.txt").write_text("\n".join(sentiment(120, seed=3)[0]) + "\n", encoding="utf-8")
    (base / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    keras.utils.set_random_seed(0)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=4, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)
    config.to_json_file(str(base / "bert_config.json"))
    save_original_checkpoint(BertModel(config), str(base / "bert_model.ckpt"))
    run_classifier.main([
        "--task_name=csv", f"--data_dir={data_dir}", f"--vocab_file={base}/vocab.txt",
        f"--bert_config_file={base}/bert_config.json", f"--init_checkpoint={base}/bert_model.ckpt",
        "--max_seq_length=10", "--train_batch_size=16", "--learning_rate=2e-3", "--num_train_epochs=4",
        "--do_train", "--do_eval", f"--output_dir={release}",
    ])
    return data_dir, release


def results(path):
    return dict(line.strip().split(" = ") for line in path.read_text().splitlines())


def test_bert_distill_writes_a_student_release_that_run_classifier_takes(classifier_release, tmp_path):
    from tools import distill, run_classifier

    data_dir, teacher = classifier_release
    out = tmp_path / "student"
    distill.main([f"--teacher_dir={teacher}", "--task_name=csv", f"--data_dir={data_dir}", "--max_seq_length=10",
                  f"--unlabeled_file={data_dir}/more.txt", "--num_hidden_layers=1", "--train_batch_size=16",
                  "--learning_rate=2e-3", "--num_train_epochs=2", "--do_eval", f"--output_dir={out}"])
    student, teacher_results = results(out / "eval_results.txt"), results(out / "teacher" / "eval_results.txt")
    assert teacher_results == results(teacher / "eval_results.txt")
    # (240 labelled + 120 unlabelled) / 16 * 2 epochs.
    assert student["global_step"] == "45"
    assert float(student["eval_accuracy"]) >= 0.97 * float(teacher_results["eval_accuracy"])
    assert BertConfig.from_json_file(str(out / "bert_config.json")).num_hidden_layers == 1
    assert (out / "label_list.txt").read_text() == (teacher / "label_list.txt").read_text()

    # The student is a release as any other: run_classifier's eval of it gives the same results.
    again = tmp_path / "again"
    run_classifier.main(["--task_name=csv", f"--data_dir={data_dir}", f"--vocab_file={out}/vocab.txt",
                         f"--bert_config_file={out}/bert_config.json", f"--init_checkpoint={out}/model.ckpt",
                         "--max_seq_length=10", "--do_eval", f"--output_dir={again}"])
    assert results(again / "eval_results.txt") == student

    # A finished run rerun trains nothing more.
    distill.main([f"--teacher_dir={teacher}", "--task_name=csv", f"--data_dir={data_dir}", "--max_seq_length=10",
                  f"--unlabeled_file={data_dir}/more.txt", "--num_hidden_layers=1", "--train_batch_size=16",
                  "--learning_rate=2e-3", "--num_train_epochs=2", "--do_eval", f"--output_dir={out}"])
    assert results(out / "eval_results.txt") == student


@pytest.mark.parametrize("extra, fragment", [
    (["--num_hidden_layers=5"], r"num_hidden_layers must lie in [1, 4] (the teacher has 4 layers); got 5"),
    (["--num_hidden_layers=0"], "--num_hidden_layers must be at least 1, got 0"),
    (["--vocab_file=v.txt"], "--vocab_file: the teacher's files come from --teacher_dir"),
    (["--temperature=0"], "--temperature must be a finite number above 0"),
    (["--unlabeled_file=/nonexistent/more.txt"], "/nonexistent/more.txt"),
])
def test_bert_distill_bad_input_is_one_line_before_any_output(classifier_release, tmp_path, capfd, extra, fragment):
    """The first case runs the script in a process of its own (its whole stderr one line, its exit code); the
    others run it in this process, as its console script does (`run_tool`)."""
    import subprocess
    import sys

    from keras_bert_impl.cli import run_tool
    from tools import distill

    data_dir, teacher = classifier_release
    argv = [f"--teacher_dir={teacher}", "--task_name=csv", f"--data_dir={data_dir}", "--max_seq_length=10",
            f"--output_dir={tmp_path / 'out'}", *extra]
    if extra == ["--num_hidden_layers=5"]:
        result = subprocess.run(
            [sys.executable, "tools/distill.py", *argv], capture_output=True, text=True, timeout=300,
            cwd=str(__import__("pathlib").Path(__file__).resolve().parent.parent),
        )
        code, stderr = result.returncode, result.stderr
    else:
        capfd.readouterr()
        code, stderr = run_tool(distill.main, argv, prog="distill"), capfd.readouterr().err
    lines = stderr.strip().splitlines()
    assert code != 0 and len(lines) == 1 and fragment in lines[0], stderr
    assert not (tmp_path / "out").exists()


def test_bert_distill_refuses_a_teacher_that_is_not_fine_tuned(classifier_release, tmp_path):
    from keras_bert_impl.errors import CheckpointError
    from tools import distill

    data_dir, teacher = classifier_release
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("vocab.txt", "bert_config.json", "model.ckpt.index", "model.ckpt.data-00000-of-00001"):
        (bare / name).write_bytes((teacher / name).read_bytes())
    with pytest.raises(CheckpointError, match="no label_list.txt, so not a fine-tuned classification model"):
        distill.main([f"--teacher_dir={bare}", "--task_name=csv", f"--data_dir={data_dir}", "--max_seq_length=10",
                      f"--output_dir={tmp_path / 'out'}"])
    assert not (tmp_path / "out").exists()
