"""bert-distill beyond the classifier: span-QA and tagging students of run_squad / run_ner
releases, a general-purpose student of a release on raw text, and bad input.

References: the task tools themselves (run_squad / run_ner predict from the
student's release and from the teacher's, compared with what distill wrote),
and NumPy's cosine distance and masked-LM KL divergence, computed here from
the encoders' outputs, for the general student.
"""

import json

import numpy as np
import pytest

from keras_bert_impl.checkpoints.original import list_original_variables, save_original_checkpoint
from keras_bert_impl.config import BertConfig
from keras_bert_impl.models.bert_model import BertModel
from keras_bert_impl.models.pretraining import BertPretrainingModel
from tests.helpers import randomize, tiny_config
from tests.test_ner import CITIES, PEOPLE, generated_conll
from tests.test_ner import FILLER as NER_FILLER
from tests.test_run_squad import generated_squad, vocab_words, write_squad
from tools import distill, run_ner, run_squad


def results(path):
    return dict(line.strip().split(" = ") for line in open(path, encoding="utf-8"))


def same_tagging_results(a, b):
    """Equal, but `eval_loss` to float rounding (the padding cut differs with the batch)."""
    a, b = dict(a), dict(b)
    return float(a.pop("eval_loss")) == pytest.approx(float(b.pop("eval_loss")), rel=1e-5) and a == b


def two_layer_release(directory, vocab, model_class=BertModel, max_position_embeddings=64, scale=None):
    """A 2-layer release of random weights (with the heads of `model_class`); with `scale`, weights of that
    spread, so that its layers' outputs differ as a trained model's do."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = tiny_config(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=64, max_position_embeddings=max_position_embeddings)
    config.to_json_file(directory / "bert_config.json")
    model = model_class(config)
    if scale:
        randomize(model, seed=3, scale=scale)
    save_original_checkpoint(model, str(directory / "bert_model.ckpt"))
    return directory


def release_flags(directory, checkpoint="bert_model.ckpt"):
    return [f"--vocab_file={directory}/vocab.txt", f"--bert_config_file={directory}/bert_config.json",
            f"--init_checkpoint={directory}/{checkpoint}"]


# -- span QA -------------------------------------------------------------------

SQUAD_SHAPE = ["--max_seq_length=48", "--doc_stride=16", "--max_query_length=12", "--max_answer_length=8",
               "--n_best_size=5"]


@pytest.fixture(scope="module")
def squad_teacher(tmp_path_factory):
    """A 2-layer run_squad release trained on generated questions: (train file, dev file, release)."""
    root = tmp_path_factory.mktemp("squad_distill")
    base = two_layer_release(root / "base", vocab_words())
    train = write_squad(root / "train.json", generated_squad(240, seed=1))
    dev = write_squad(root / "dev.json", generated_squad(60, seed=2))
    run_squad.main([*release_flags(base), *SQUAD_SHAPE, "--do_train", f"--train_file={train}", "--do_predict",
                    f"--predict_file={dev}", "--train_batch_size=16", "--learning_rate=2e-3",
                    "--num_train_epochs=8", f"--output_dir={root / 'teacher'}"])
    return train, dev, root / "teacher"


def test_a_span_qa_student_answers_as_well_and_run_squad_takes_it(squad_teacher, tmp_path):
    train, dev, teacher = squad_teacher
    out = tmp_path / "student"
    distill.main(["--task=squad", f"--teacher_dir={teacher}", *SQUAD_SHAPE, f"--train_file={train}",
                  "--do_predict", f"--predict_file={dev}", "--num_hidden_layers=1", "--train_batch_size=16",
                  "--learning_rate=2e-3", "--num_train_epochs=4", f"--output_dir={out}"])
    teacher_results, student = results(teacher / "eval_results.txt"), results(out / "eval_results.txt")
    assert float(teacher_results["exact_match"]) >= 80.0, teacher_results
    assert float(student["exact_match"]) >= 0.97 * float(teacher_results["exact_match"]), (student, teacher_results)
    # The teacher's own predictions, beside the student's, are those run_squad made.
    assert results(out / "teacher" / "eval_results.txt") == teacher_results
    assert (json.loads((out / "teacher" / "predictions.json").read_text())
            == json.loads((teacher / "predictions.json").read_text()))
    # The student is a run_squad release: 1 layer, the cls/squad head; run_squad predicts the same answers.
    assert BertConfig.from_json_file(str(out / "bert_config.json")).num_hidden_layers == 1
    names = list_original_variables(str(out / "model.ckpt"))
    assert "cls/squad/output_weights" in names and not any("layer_1/" in name for name in names)
    again = tmp_path / "again"
    run_squad.main([*release_flags(out, "model.ckpt"), *SQUAD_SHAPE, "--do_predict", f"--predict_file={dev}",
                    f"--output_dir={again}"])
    assert (json.loads((again / "predictions.json").read_text())
            == json.loads((out / "predictions.json").read_text()))


# -- token tagging ---------------------------------------------------------------

@pytest.fixture(scope="module")
def ner_teacher(tmp_path_factory):
    """A 2-layer run_ner release: (train file, dev file, release)."""
    root = tmp_path_factory.mktemp("ner_distill")
    words = {w.lower() for w in NER_FILLER + CITIES} | {p.lower() for pair in PEOPLE for p in pair}
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "-"] + sorted(words | {"berners", "lee", "zurich"})
    base = two_layer_release(root / "base", vocab, max_position_embeddings=32)
    train, dev = generated_conll(root / "train.txt", 200, seed=1), generated_conll(root / "dev.txt", 40, seed=2)
    run_ner.main([*release_flags(base), "--max_seq_length=12", "--do_train", f"--train_file={train}", "--do_eval",
                  f"--eval_file={dev}", "--train_batch_size=16", "--learning_rate=3e-3", "--num_train_epochs=4",
                  f"--output_dir={root / 'teacher'}"])
    return train, dev, root / "teacher"


def test_a_tagging_student_tags_as_well_and_run_ner_takes_it(ner_teacher, tmp_path):
    train, dev, teacher = ner_teacher
    out = tmp_path / "student"
    distill.main(["--task=ner", f"--teacher_dir={teacher}", "--max_seq_length=12", f"--train_file={train}",
                  "--do_eval", f"--eval_file={dev}", "--num_hidden_layers=1", "--train_batch_size=16",
                  "--learning_rate=3e-3", "--num_train_epochs=3", f"--output_dir={out}"])
    teacher_results, student = results(teacher / "eval_results.txt"), results(out / "eval_results.txt")
    assert float(teacher_results["f1"]) >= 0.9, teacher_results
    assert float(student["f1"]) >= 0.97 * float(teacher_results["f1"]), (student, teacher_results)
    assert same_tagging_results(results(out / "teacher" / "eval_results.txt"), teacher_results)
    assert (out / "label_list.txt").read_text() == (teacher / "label_list.txt").read_text()
    # run_ner evaluates the student's release as distill did.
    again = tmp_path / "again"
    run_ner.main([*release_flags(out, "model.ckpt"), "--max_seq_length=12", "--do_eval", f"--eval_file={dev}",
                  f"--output_dir={again}"])
    assert same_tagging_results(results(again / "eval_results.txt"), student)


# -- general distillation on raw text ---------------------------------------------

WORDS = "the a river city old new green small market bridge morning rain sun road house walked saw".split()
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def raw_text(path, num_documents, seed):
    """Documents of short sentences, one per line, a blank line between documents."""
    rng = np.random.default_rng(seed)
    documents = ["\n".join(" ".join(rng.choice(WORDS, size=int(rng.integers(3, 9))))
                           for _ in range(int(rng.integers(2, 6)))) for _ in range(num_documents)]
    path.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    return path


def numpy_objective(teacher_dir, student_dir, texts):
    """Mean cosine distance of each student layer's states to its matched teacher layer's (real tokens),
    and the mean KL divergence of the masked-LM distributions where both have the head (else None)."""
    from keras_bert_impl.tasks.distillation import matched_teacher_layers
    from keras_bert_impl.tasks.masked_lm import MaskedLM

    from keras_bert_impl.checkpoints.original import load_original_checkpoint
    from keras_bert_impl.checkpoints.sources import find_release
    from keras_bert_impl.tasks.text_data import text_tensor
    from keras_bert_impl.tokenization.preprocessor import BertPreprocessor

    def run(directory):
        config = BertConfig.from_json_file(str(directory / "bert_config.json"))
        model = BertModel(config, output_all_encoder_layers=True)
        load_original_checkpoint(model, find_release(directory).checkpoint)
        vocab = (directory / "vocab.txt").read_text().split()
        inputs = {key: value.numpy() for key, value in BertPreprocessor(vocab, max_seq_length=12)(
            text_tensor(texts)).items()}
        states = [np.asarray(s, np.float64) for s in model(inputs)["encoder_outputs"]]
        logits = None
        if "cls/predictions/output_bias" in list_original_variables(find_release(directory).checkpoint):
            masked = MaskedLM.from_release(str(directory), max_seq_length=12)
            positions = np.tile(np.arange(1, 5, dtype=np.int32), (len(texts), 1))  # [n, 4]
            logits = np.asarray(masked({**inputs, "masked_lm_positions": positions})["masked_lm_logits"], np.float64)
        return states, logits, np.asarray(inputs["input_mask"], bool)

    teacher_states, teacher_logits, mask = run(teacher_dir)
    student_states, student_logits, _ = run(student_dir)
    pairs = zip(student_states, [teacher_states[i] for i in matched_teacher_layers(len(teacher_states),
                                                                                   len(student_states))])
    distances = []
    for s, t in pairs:
        cosine = (s * t).sum(-1) / (np.linalg.norm(s, axis=-1) * np.linalg.norm(t, axis=-1))
        distances.append((1 - cosine)[mask].mean())
    kl = None
    if teacher_logits is not None and student_logits is not None:
        p = np.exp(teacher_logits - teacher_logits.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        log_q = student_logits - student_logits.max(-1, keepdims=True)
        log_q -= np.log(np.exp(log_q).sum(-1, keepdims=True))
        kl = float((p * (np.log(p) - log_q)).sum(-1).mean())
    return float(np.mean(distances)), kl


@pytest.mark.parametrize("teacher_model", [BertPretrainingModel, BertModel], ids=["with_cls_predictions", "encoder"])
def test_a_general_student_moves_toward_its_teacher_after_an_interrupted_run(tmp_path, teacher_model, monkeypatch,
                                                                             capsys):
    """The student's run killed between its last step and the release: no release, and the same command finishes
    it. The finished student rerun with another temperature, loss weight or depth: refused, naming it (was:
    "resuming (step 8 of 8)", exit 0, nothing applied); the same command resumes as before. Its layers' states
    (and masked-LM distributions) then lie nearer the teacher's than where it started. One run of each teacher
    for both (each run costs its tracing; the rerun of a finished run trains nothing)."""
    from keras_bert_impl.checkpoints.sources import find_release
    from keras_bert_impl.cli import run_tool
    from keras_bert_impl.errors import CheckpointError
    from keras_bert_impl.jobs import run_fine_tuning
    from keras_bert_impl.tasks.distillation import evenly_spaced_layers, initialise_from_teacher

    vocab = SPECIALS + WORDS
    teacher = two_layer_release(tmp_path / "teacher", vocab, model_class=teacher_model, scale=0.3)
    corpus = raw_text(tmp_path / "corpus.txt", 60, seed=1)
    held_out = [line for line in raw_text(tmp_path / "held_out.txt", 10, seed=2).read_text().splitlines() if line]

    # Where the student starts: the teacher's layer 0 as its only layer.
    start = tmp_path / "start"
    config = BertConfig.from_json_file(str(teacher / "bert_config.json"))
    from keras_bert_impl.checkpoints.original import load_original_checkpoint
    from keras_bert_impl.checkpoints.release import write_release

    teacher_net, student_net = teacher_model(config), teacher_model(BertConfig(**{**config.to_dict(),
                                                                                  "num_hidden_layers": 1}))
    load_original_checkpoint(teacher_net, str(teacher / "bert_model.ckpt"))
    initialise_from_teacher(student_net, teacher_net, evenly_spaced_layers(2, 1))
    write_release(student_net, start, student_net.bert_config, vocab)

    out = tmp_path / "student"
    argv = ["--task=general", f"--teacher_dir={teacher}", f"--input_file={corpus}", "--max_seq_length=24",
            "--max_predictions_per_seq=4", "--dupe_factor=2", "--num_hidden_layers=1",
            "--train_batch_size=8", "--learning_rate=1e-3", "--num_train_epochs=3", f"--output_dir={out}"]
    trained = run_fine_tuning.fine_tune

    def killed_after_training(*args, **kwargs):
        trained(*args, **kwargs)
        raise KeyboardInterrupt  # As a kill between the last step and the release.

    monkeypatch.setattr(run_fine_tuning, "fine_tune", killed_after_training)
    with pytest.raises(KeyboardInterrupt):
        distill.main(argv)
    assert list(out.glob("model.ckpt-*.index"))
    with pytest.raises(CheckpointError, match="not a release, it has no bert_config.json"):
        find_release(out)
    monkeypatch.setattr(run_fine_tuning, "fine_tune", trained)
    distill.main(argv)
    assert find_release(out).checkpoint == str(out / "model.ckpt")

    recorded = json.loads((out / "training_settings.json").read_text())
    assert {name: recorded[name] for name in ("temperature", "student_num_hidden_layers", "soft_weight")} == {
        "temperature": 2.0, "student_num_hidden_layers": 1, "soft_weight": 1.0}
    for changed, fragment in [("--temperature=5", "temperature 2.0 (now 5.0)"),
                              ("--hidden_weight=0.5", "hidden_weight 1.0 (now 0.5)"),
                              ("--num_hidden_layers=2", "student_num_hidden_layers 1 (now 2)")]:
        capsys.readouterr()
        assert run_tool(distill.main, [*argv, changed], prog="distill") == 1
        error = capsys.readouterr().err.strip().splitlines()[-1]  # after the progress lines
        assert error.startswith("distill: error: ") and fragment in error and "allow_changed_settings" in error
    assert run_tool(distill.main, argv, prog="distill") == 0

    assert BertConfig.from_json_file(str(out / "bert_config.json")).num_hidden_layers == 1
    names = list_original_variables(str(out / "model.ckpt"))
    assert ("cls/predictions/output_bias" in names) == (teacher_model is BertPretrainingModel)
    before, after = numpy_objective(teacher, start, held_out), numpy_objective(teacher, out, held_out)
    assert after[0] < 0.6 * before[0], (before, after)
    if teacher_model is BertPretrainingModel:
        assert after[1] < 0.6 * before[1], (before, after)
    # A release the task tools start from: a classifier loads it with a fresh head.
    from keras_bert_impl.tasks.text_classifier import TextClassifier

    classifier = TextClassifier.from_release(str(out), num_classes=2, max_seq_length=12)
    assert classifier.bert_config.num_hidden_layers == 1


def _files(directory):
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir()) if path.is_file()}


def test_the_teachers_own_directory_or_another_release_is_refused_before_any_work(tmp_path, capsys):
    """`--output_dir` the teacher's directory (by its name, or through a link to it), or a directory holding
    another release: one line, and every file there as it was (was: the teacher's config replaced by the
    student's, exit 0)."""
    import os

    from keras_bert_impl.cli import run_tool

    teacher = two_layer_release(tmp_path / "teacher", SPECIALS + WORDS)
    other = two_layer_release(tmp_path / "other", SPECIALS + WORDS)
    os.symlink(teacher, tmp_path / "link")
    corpus = raw_text(tmp_path / "corpus.txt", 6, seed=1)
    before = {directory: _files(directory) for directory in (teacher, other)}
    for output_dir, fragment in [(teacher, "the teacher's own directory"),
                                 (tmp_path / "link", "the teacher's own directory"),
                                 (tmp_path / "link" / ".." / "teacher", "the teacher's own directory"),
                                 (other, "holds another release")]:
        argv = ["--task=general", f"--teacher_dir={teacher}", f"--input_file={corpus}", "--max_seq_length=24",
                "--max_predictions_per_seq=4", "--num_hidden_layers=1", "--train_batch_size=8",
                f"--output_dir={output_dir}"]
        capsys.readouterr()
        assert run_tool(distill.main, argv, prog="distill") == 1
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and fragment in lines[0], lines
        assert {directory: _files(directory) for directory in (teacher, other)} == before


# -- bad input: one line, before any output ----------------------------------------

@pytest.fixture(scope="module")
def classifier_teacher(tmp_path_factory):
    """A 4-layer classifier release (fresh weights, labels neg and pos), the teacher of every bad input below
    (none changes it: each is refused before any output)."""
    from keras_bert_impl.models.classifier import BertClassifier
    from tests.test_distillation import VOCAB

    teacher = tmp_path_factory.mktemp("bad_input") / "classifier"
    teacher.mkdir()
    (teacher / "vocab.txt").write_text("\n".join(VOCAB + ["berners", "lee"]) + "\n", encoding="utf-8")
    config = tiny_config(vocab_size=len(VOCAB) + 2, hidden_size=8, num_hidden_layers=4, num_attention_heads=2,
                         intermediate_size=16, max_position_embeddings=32)
    config.to_json_file(teacher / "bert_config.json")
    save_original_checkpoint(BertClassifier(config, num_labels=2), str(teacher / "model.ckpt"))
    (teacher / "label_list.txt").write_text("neg\npos\n", encoding="utf-8")
    return teacher


@pytest.mark.parametrize("task, extra, fragment", [
    ("squad", ["--train_file=t.json", "--max_query_length=8"], "has no cls/squad/output_weights or cls/squad/output_bias, so it is not a "
                                       "model fine-tuned for SQuAD"),
    ("ner", ["--train_file={train}"], "is not one of the model's labels (neg, pos)"),
    ("general", ["--input_file={empty}"], "no text in it"),
    ("general", ["--input_file={corpus}", "--num_hidden_layers=5"], "num_hidden_layers must lie in [1, 4]"),
    ("general", ["--input_file={corpus}", "--num_hidden_layers=0"], "--num_hidden_layers must be at least 1"),
    ("general", ["--input_file={corpus}", "--doc_stride=8"], "--doc_stride does not apply to --task=general"),
    ("general", ["--input_file={corpus}", "--do_eval"], "--do_eval does not apply to --task=general"),
    ("squad", ["--train_file=t.json", "--max_query_length=8", "--do_eval"], "--do_eval does not apply to --task=squad"),
    ("general", ["--input_file={latin1}"], "not valid UTF-8"),
    ("tagging", [], "--task must be one of classifier, squad, ner, multiple_choice, general, got 'tagging'"),
    ("multiple_choice", ["--train_file={train}"], "output_weights has 2 rows, a classifier's head; a "
                                                  "multiple-choice teacher scores each choice with one"),
    ("multiple_choice", ["--train_file={train}", "--doc_stride=8"], "--doc_stride does not apply to "
                                                                    "--task=multiple_choice"),
])
def test_bad_input_is_one_line_before_any_output(classifier_teacher, tmp_path, capsys, task, extra, fragment):
    """A classifier release as the teacher of another task (multiple choice's among them), a student of no or
    too many layers, no
    text, text that is not UTF-8, flags of another task: one line on stderr, no output directory."""
    from keras_bert_impl.cli import run_tool

    teacher = classifier_teacher
    files = {"train": generated_conll(tmp_path / "train.txt", 4, seed=1), "empty": tmp_path / "empty.txt",
             "corpus": raw_text(tmp_path / "corpus.txt", 3, seed=1), "latin1": tmp_path / "latin1.txt"}
    files["empty"].write_text("\n\n", encoding="utf-8")
    files["latin1"].write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    argv = [f"--task={task}", f"--teacher_dir={teacher}", "--max_seq_length=24", f"--output_dir={tmp_path / 'out'}",
            *[flag.format(**files) for flag in extra]]
    capsys.readouterr()
    assert run_tool(distill.main, argv, prog="distill") != 0
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], lines
    assert not (tmp_path / "out").exists()


# -- the benchmark's own pieces -----------------------------------------------------

def test_the_benchmark_times_teacher_and_student_in_turn_and_reads_the_tweets(tmp_path):
    from tests.helpers import load_benchmark

    bench = load_benchmark("bench_distill")
    calls = []

    class Model:
        def __init__(self, name):
            self.name = name

        def predict(self, texts, batch_size, verbose):
            calls.append((self.name, len(texts)))

    times = bench.interleaved_predict({"teacher": Model("teacher"), "student": Model("student")}, ["a"] * 100, 3)
    assert [len(t) for t in times.values()] == [3, 3]
    # A warm-up call each, then the rounds in alternating order over the whole block.
    assert calls == [("teacher", 64), ("student", 64), ("teacher", 100), ("student", 100), ("student", 100),
                     ("teacher", 100), ("teacher", 100), ("student", 100)]
    path = tmp_path / "tweets.csv"
    path.write_bytes("sentiment,confidence,text\nnegative,0.7,caf\xe9 crash\npositive,0.9,nice ride\n"
                     "neutral,0.5,caf\xe9 crash\nunknown,0.1,what\n".encode("latin-1"))
    assert bench.self_driving_tweets(path) == [("caf\xe9 crash", "negative"), ("nice ride", "positive")]
