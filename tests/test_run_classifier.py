"""tools/run_classifier.py end to end on a tiny model: the original's output
files, values recomputed independently (tf-models' feature conversion,
scikit-learn / SciPy metrics), learnability, and one-line errors."""

import os
import random
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.checkpoints.original import load_original_checkpoint, save_original_checkpoint
from keras_bert_impl.errors import InputFileError
from keras_bert_impl.models.bert_model import BertModel
from keras_bert_impl.models.classifier import BertClassifier
from keras_bert_impl.training.run_settings import ChangedSettingsError
from tests.helpers import kill_9_mid_run, run_tool_here, tiny_config
from tools import run_classifier

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(REPO_ROOT, "tools", "run_classifier.py")

POSITIVE = ["great", "good", "excellent", "wonderful", "superb"]
NEGATIVE = ["bad", "awful", "terrible", "poor", "dull"]
FILLER = "the a movie film plot actor scene story was is very quite and".split()
MRPC_HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"


def sentence(rng, keywords, length=5):
    words = [rng.choice(FILLER) for _ in range(length)]
    words.insert(rng.randrange(length + 1), rng.choice(keywords))
    return " ".join(words)


def write_mrpc(directory, sizes, seed=0):
    """MRPC-layout files whose label says whether `#1 String` has a positive word."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for split, size in sizes.items():
        lines = [MRPC_HEADER if split != "test" else "index" + MRPC_HEADER[7:]]
        for i in range(size):
            label = rng.randrange(2)
            first = str(label) if split != "test" else str(i)
            lines.append(f"{first}\t{i}\t{i + 1}\t{sentence(rng, POSITIVE if label else NEGATIVE)}\t{sentence(rng, FILLER)}\n")
        (directory / f"{split}.tsv").write_text("".join(lines), encoding="utf-8")


@pytest.fixture(scope="module")
def release(tmp_path_factory, bert_vocab_file):
    """A small original-format release: freshly initialised weights, real vocab.

    One layer of width 64: narrower models (head size 4) often stay on the
    constant-prediction plateau in the few steps these tests take.
    """
    import keras

    directory = tmp_path_factory.mktemp("release")
    keras.utils.set_random_seed(0)
    config = tiny_config(
        vocab_size=30522, hidden_size=64, num_hidden_layers=1, num_attention_heads=4,
        intermediate_size=128, max_position_embeddings=64,
    )
    save_original_checkpoint(BertModel(config), str(directory / "bert_model.ckpt"))
    config.to_json_file(directory / "bert_config.json")
    (directory / "vocab.txt").write_bytes(bert_vocab_file.read_bytes())
    return directory


def flags(release_dir, data_dir, output_dir, **extra):
    values = {
        "task_name": "MRPC",
        "data_dir": data_dir,
        "vocab_file": release_dir / "vocab.txt",
        "bert_config_file": release_dir / "bert_config.json",
        "init_checkpoint": release_dir / "bert_model.ckpt",
        "output_dir": output_dir,
        "max_seq_length": 16,
        "train_batch_size": 8,
        "eval_batch_size": 8,
        "predict_batch_size": 4,
    }
    values.update(extra)
    return [f"--{key}={value}" for key, value in values.items() if value is not None]


def read_eval_results(path):
    return [tuple(line.split(" = ")) for line in path.read_text(encoding="utf-8").splitlines()]


def reference_logits(output_dir, task_name, data_dir, split, bert_vocab_file, batch_size, max_seq_length=16):
    """Logits of `output_dir/model.ckpt` on inputs that tf-models' original code
    builds, in batches of the tool's (so float32 sums round alike)."""
    from official.nlp.data import classifier_data_lib as lib
    from official.nlp.tools import tokenization

    from keras_bert_impl.config import BertConfig

    processor = {"mrpc": lib.MrpcProcessor, "sts-b": lib.StsBProcessor}[task_name]()
    lines = processor._read_tsv(os.path.join(data_dir, f"{split}.tsv"))[1:]
    columns = {"mrpc": (3, 4, 0), "sts-b": (7, 8, 9)}[task_name]
    examples = [
        lib.InputExample(str(i), line[columns[0]], line[columns[1]], "0" if split == "test" else line[columns[2]])
        for i, line in enumerate(lines)
    ]
    tokenizer = tokenization.FullTokenizer(str(bert_vocab_file), do_lower_case=True)
    label_list = ["0", "1"] if task_name == "mrpc" else None
    features = [lib.convert_single_example(i, e, label_list, max_seq_length, tokenizer) for i, e in enumerate(examples)]
    config = BertConfig.from_json_file(output_dir / "bert_config.json")
    model = BertClassifier(config, num_labels=2 if task_name == "mrpc" else 1)
    load_original_checkpoint(model, str(output_dir / "model.ckpt"))
    inputs = {
        key: np.array([getattr(f, key) for f in features], np.int32)
        for key in ("input_ids", "input_mask", "segment_ids")
    }
    labels = np.array([f.label_id for f in features])
    logits = [
        model.predict_on_batch({key: value[start : start + batch_size] for key, value in inputs.items()})
        for start in range(0, len(features), batch_size)
    ]
    return np.concatenate(logits).astype(np.float64), labels


def softmax(logits):
    exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return exp / exp.sum(axis=-1, keepdims=True)


@pytest.fixture(scope="module")
def mrpc_run(release, tmp_path_factory):
    """One MRPC run with --do_train --do_eval --do_predict: (data_dir, output_dir).

    The label says whether `#1 String` holds a positive word: trivially
    learnable, so the run also shows that fine-tuning learns. The original
    AdamW has no bias correction, so its first steps move each weight by
    several times the learning rate; a long warmup and 120 steps take every
    initialisation we tried (8 seeds) off the constant-prediction plateau,
    where with 80 steps one in eight, and with a 10% warmup one in five,
    stayed.
    """
    root = tmp_path_factory.mktemp("mrpc_run")
    data_dir, output_dir = root / "MRPC", root / "out"
    write_mrpc(data_dir, {"train": 320, "dev": 100, "test": 6})
    run_classifier.main(
        flags(release, data_dir, output_dir, train_batch_size=16, eval_batch_size=32, learning_rate=1e-3,
              warmup_proportion=0.5, num_train_epochs=6, save_checkpoints_steps=50)
        + ["--do_train", "--do_eval", "--do_predict"]
    )
    return data_dir, output_dir


def test_fine_tuned_model_is_written_as_a_release(release, mrpc_run):
    _, output_dir = mrpc_run
    reader = tf.train.load_checkpoint(str(output_dir / "model.ckpt"))
    shapes = reader.get_variable_to_shape_map()
    assert (shapes["output_weights"], shapes["output_bias"]) == ([2, 64], [2])
    # int(320 / 16 * 6) = 120 steps; a training checkpoint every 50.
    assert int(reader.get_tensor("global_step")) == 120
    assert "bert/encoder/layer_0/output/dense/kernel" in shapes
    for name in ("bert_config.json", "vocab.txt"):
        assert (output_dir / name).read_bytes() == (release / name).read_bytes()
    # Every 50 steps, and the last step (so a rerun of the finished run returns at once).
    steps = sorted(int(p.name.split("-")[1].split(".")[0]) for p in output_dir.glob("model.ckpt-*.index"))
    assert steps == [50, 100, 120]
    assert list(output_dir.glob("events.out.tfevents.*"))  # TensorBoard summaries
    assert not [p.name for p in output_dir.iterdir() if "partial" in p.name or p.name.startswith(".tmp")]


def test_eval_results_are_the_originals(mrpc_run, bert_vocab_file):
    from sklearn import metrics

    data_dir, output_dir = mrpc_run
    results = read_eval_results(output_dir / "eval_results.txt")
    assert [key for key, _ in results] == ["eval_accuracy", "eval_loss", "f1", "global_step", "loss"]
    values = dict(results)
    assert values["global_step"] == "120"
    assert all(str(np.float32(values[key])) == values[key] for key in ("eval_accuracy", "eval_loss", "f1", "loss"))
    logits, labels = reference_logits(output_dir, "mrpc", data_dir, "dev", bert_vocab_file, batch_size=32)
    predictions = logits.argmax(-1)
    assert float(values["eval_accuracy"]) == pytest.approx(metrics.accuracy_score(labels, predictions), abs=1e-6)
    assert float(values["f1"]) == pytest.approx(metrics.f1_score(labels, predictions), abs=1e-6)
    assert float(values["eval_loss"]) == pytest.approx(metrics.log_loss(labels, softmax(logits), labels=[0, 1]), rel=1e-4, abs=1e-6)
    # The Estimator's `loss`: the mean of per-batch means (batches of 32: 32, 32, 32, 4).
    batch_losses = [metrics.log_loss(labels[i : i + 32], softmax(logits[i : i + 32]), labels=[0, 1]) for i in range(0, 100, 32)]
    assert float(values["loss"]) == pytest.approx(np.mean(batch_losses), rel=1e-4, abs=1e-6)


def test_fine_tuning_learns_the_task(mrpc_run):
    values = dict(read_eval_results(mrpc_run[1] / "eval_results.txt"))
    assert float(values["eval_accuracy"]) >= 0.95, values
    assert float(values["eval_loss"]) < 0.05, values


def test_test_results_are_class_probabilities(mrpc_run, bert_vocab_file):
    data_dir, output_dir = mrpc_run
    rows = [line.split("\t") for line in (output_dir / "test_results.tsv").read_text(encoding="utf-8").splitlines()]
    logits, _ = reference_logits(output_dir, "mrpc", data_dir, "test", bert_vocab_file, batch_size=4)
    assert len(rows) == 6 and {len(row) for row in rows} == {2}
    assert all(str(np.float32(value)) == value for row in rows for value in row)  # the original's str(float32)
    np.testing.assert_allclose(np.array(rows, np.float64), softmax(logits), atol=1e-6)


def test_output_dir_serves_as_init_checkpoint(mrpc_run, tmp_path):
    """Evaluating the written release again, without training, gives the same file."""
    data_dir, output_dir = mrpc_run
    run_classifier.main(
        flags(output_dir, data_dir, tmp_path, init_checkpoint=output_dir / "model.ckpt", eval_batch_size=32)
        + ["--do_eval"]
    )
    assert (tmp_path / "eval_results.txt").read_text() == (output_dir / "eval_results.txt").read_text()


def test_rerun_of_a_finished_run_does_not_train_again(release, mrpc_run, capfd):
    """120 steps with checkpoints every 50: the last step is saved too, so the
    same command again resumes at step 120 and returns (no second curve)."""
    data_dir, output_dir = mrpc_run
    assert (output_dir / "model.ckpt-120.index").exists()
    events = sorted(p.name for p in output_dir.rglob("events.out.tfevents.*"))
    weights = tf.train.load_checkpoint(str(output_dir / "model.ckpt")).get_tensor("output_weights")
    leftover = output_dir / "model.ckpt-100.partial-999-0abc1234.data-00000-of-00001"  # a killed save's
    leftover.write_bytes(b"half a checkpoint")
    capfd.readouterr()
    run_classifier.main(
        flags(release, data_dir, output_dir, train_batch_size=16, learning_rate=1e-3,
              warmup_proportion=0.5, num_train_epochs=6, save_checkpoints_steps=50)
        + ["--do_train"]
    )
    captured = capfd.readouterr()
    assert "(step 120 of 120)" in captured.out + captured.err
    assert not leftover.exists()
    assert sorted(p.name for p in output_dir.rglob("events.out.tfevents.*")) == events
    np.testing.assert_array_equal(
        tf.train.load_checkpoint(str(output_dir / "model.ckpt")).get_tensor("output_weights"), weights)


def test_rerun_with_other_settings_is_refused(release, mrpc_run):
    """Another learning rate, or other training data, into a finished run's
    directory: refused before anything is written, naming the change, where
    the original would resume."""
    data_dir, output_dir = mrpc_run
    files = lambda: {p.name: p.read_bytes() for p in output_dir.iterdir() if p.is_file()}  # noqa: E731
    before = files()

    def rerun(data, learning_rate):
        run_classifier.main(
            flags(release, data, output_dir, train_batch_size=16, learning_rate=learning_rate,
                  warmup_proportion=0.5, num_train_epochs=6, save_checkpoints_steps=50)
            + ["--do_train"]
        )

    with pytest.raises(ChangedSettingsError, match=r"learning_rate 0\.001 \(now 0\.002\).*--allow_changed_settings"):
        rerun(data_dir, 2e-3)
    assert files() == before
    # The same count of examples, one text changed: the data's digest names it.
    changed = data_dir.parent / "MRPC_changed"
    shutil.copytree(data_dir, changed)
    lines = (changed / "train.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    fields = lines[1].split("\t")
    fields[3] = "an entirely different first sentence"
    lines[1] = "\t".join(fields)
    (changed / "train.tsv").write_text("".join(lines), encoding="utf-8")
    with pytest.raises(ChangedSettingsError, match=r"train_data_sha256 \"[0-9a-f]{64}\" \(now \"[0-9a-f]{64}\"\)"):
        rerun(changed, 1e-3)
    assert files() == before


def test_label_order_of_a_trained_classifier_is_kept_for_eval(release, tmp_path):
    """Labels given as pos,neg at training; an eval-only rerun inferring them
    from train.csv (sorted: neg,pos) swapped the classes: accuracy 1 became 0."""
    rng = random.Random(0)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    for split, count in (("train", 48), ("dev", 16)):
        rows = [(f"{rng.choice(['good', 'great', 'fine'])} movie", "pos") if k % 2 else
                (f"{rng.choice(['bad', 'awful', 'poor'])} movie", "neg") for k in range(count)]
        (data_dir / f"{split}.csv").write_text("text,label\n" + "".join(f"{t},{l}\n" for t, l in rows))
    output_dir = tmp_path / "out"
    common = dict(task_name="csv", text_a_column="text", label_column="label", max_seq_length=8, eval_batch_size=16)
    run_classifier.main(flags(release, data_dir, output_dir, labels="pos,neg", train_batch_size=8,
                              learning_rate=1e-3, num_train_epochs=4, **common) + ["--do_train", "--do_eval"])
    assert (output_dir / "label_list.txt").read_text() == "pos\nneg\n"
    trained = (output_dir / "eval_results.txt").read_text()
    (output_dir / "eval_results.txt").unlink()
    run_classifier.main(flags(release, data_dir, output_dir, **common) + ["--do_eval"])
    assert (output_dir / "eval_results.txt").read_text() == trained
    with pytest.raises(InputFileError, match=r"label_list.txt: the weights were trained with the labels pos,neg"):
        run_classifier.main(flags(release, data_dir, output_dir, labels="neg,pos", **common) + ["--do_eval"])


def test_sts_b_is_a_regression(release, tmp_path, bert_vocab_file):
    """Pearson and Spearman of the eval, on the tool's own predictions: the
    test split is the dev rows without scores, predicted at the eval batch
    size (so the very values the eval scored). The 16 steps leave the
    predictions within about 1e-4 of each other, where a difference of 1e-8
    (another computation's rounding, or a float32 read back as float64) moves
    Pearson by 1e-4 and can swap ranks, so the reference model checks the
    predictions (to 1e-5), not the correlations."""
    from scipy import stats

    rng = random.Random(3)
    data_dir, output_dir = tmp_path / "STS-B", tmp_path / "out"
    data_dir.mkdir()
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"
    rows = {}
    for split, size in (("train", 64), ("dev", 12)):
        rows[split] = []
        for i in range(size):
            positive = rng.randrange(2)
            score = f"{rng.uniform(3, 5) if positive else rng.uniform(0, 2):.3f}"
            first = sentence(rng, POSITIVE if positive else NEGATIVE)
            rows[split].append((f"{i}\tmain-captions\tMSRvid\t2012test\t{i:04d}\tnone\tnone\t{first}\t{sentence(rng, FILLER)}", score))
        lines = [header + "\tscore"] + [f"{row}\t{score}" for row, score in rows[split]]
        (data_dir / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    test_lines = [header] + [row for row, _ in rows["dev"]]
    (data_dir / "test.tsv").write_text("\n".join(test_lines) + "\n", encoding="utf-8")
    run_classifier.main(
        flags(release, data_dir, output_dir, task_name="STS-B", train_batch_size=16, learning_rate=1e-3,
              warmup_proportion=0.5, num_train_epochs=4, predict_batch_size=8)
        + ["--do_train", "--do_eval", "--do_predict"]
    )
    values = dict(read_eval_results(output_dir / "eval_results.txt"))
    assert list(values) == ["eval_loss", "global_step", "loss", "pearson", "spearman"]
    assert values["global_step"] == "16"
    lines = (output_dir / "test_results.tsv").read_text().splitlines()
    assert all(str(np.float32(line)) == line for line in lines)
    # The tool's float32 predictions for the dev rows, exactly (parsed as float64, "2.5152423" is another number).
    predictions = np.array(lines, np.float32).astype(np.float64)
    scores = np.array([float(score) for _, score in rows["dev"]])
    assert float(values["eval_loss"]) == pytest.approx(np.mean((predictions - scores) ** 2), rel=1e-5)
    assert float(values["pearson"]) == pytest.approx(stats.pearsonr(predictions, scores)[0], abs=1e-6)
    assert float(values["spearman"]) == pytest.approx(stats.spearmanr(predictions, scores)[0], abs=1e-6)
    reference, _ = reference_logits(output_dir, "sts-b", data_dir, "dev", bert_vocab_file, batch_size=8)
    np.testing.assert_allclose(predictions, reference[:, 0], atol=1e-5)


# ----------------------------------------------------------------------------
# Bad input: one line on stderr, non-zero exit.
# ----------------------------------------------------------------------------


def run_tool_process(args, code=None):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    command = [sys.executable, TOOL] if code is None else [sys.executable, "-c", code]
    return subprocess.run(command + [str(a) for a in args], capture_output=True, text=True, env=env, cwd=REPO_ROOT, check=False)


def classify_here(args, capfd):
    """The tool in this process (`tests.helpers.run_tool_here`)."""
    return run_tool_here(run_classifier.main, args, capfd, "run_classifier")


def assert_one_line_error(result, expected):
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0
    assert len(lines) == 1, result.stderr
    assert expected in lines[0]


@pytest.fixture(scope="module")
def mrpc_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("mrpc")
    write_mrpc(directory, {"train": 8, "dev": 4, "test": 2})
    return directory


TRAIN_AND_EVAL = ("--do_train", "--do_eval")


@pytest.mark.parametrize(
    "overrides, appended_line, do_flags, expected",
    [
        ({"task_name": "mrcp"}, None, TRAIN_AND_EVAL, "error: --task_name 'mrcp' is unknown; choose one of cola,"),
        ({"data_dir": "missing"}, None, TRAIN_AND_EVAL, "missing/train.tsv: data file not found"),
        ({}, ("train.tsv", "1\t2\t3\tonly four\n"), TRAIN_AND_EVAL, "train.tsv:10: 4 columns, expected 5 (as the header)"),
        ({}, ("dev.tsv", "2\t2\t3\ta\tb\n"), TRAIN_AND_EVAL, "dev.tsv:6: label '2' is not one of '0', '1' (task mrpc)"),
        ({"max_seq_length": 65}, None, TRAIN_AND_EVAL, "--max_seq_length 65 exceeds max_position_embeddings 64"),
        ({"train_batch_size": 0}, None, TRAIN_AND_EVAL, "--train_batch_size must be positive, got 0"),
        ({}, None, (), "at least one of --do_train, --do_eval or --do_predict must be true"),
        ({"text_a_column": "x"}, None, TRAIN_AND_EVAL, "--text_a_column applies to --task_name csv, tsv or jsonl only"),
    ],
    ids=["task", "missing_file", "columns", "label", "seq_length", "batch_size", "no_mode", "column_flag"],
)
def test_bad_input_is_one_line(release, tmp_path, capfd, overrides, appended_line, do_flags, expected):
    data_dir = tmp_path / "data"
    write_mrpc(data_dir, {"train": 8, "dev": 4, "test": 2})
    if appended_line:
        name, line = appended_line
        with open(data_dir / name, "a", encoding="utf-8") as f:
            f.write(line)
    overrides = dict(overrides)
    if "data_dir" in overrides:
        data_dir = tmp_path / overrides.pop("data_dir")
    result = classify_here(flags(release, data_dir, tmp_path / "out", **overrides) + list(do_flags), capfd)
    assert_one_line_error(result, expected)
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_checkpoint_of_another_size_is_one_line(release, mrpc_dir, tmp_path, capfd):
    other = tiny_config(vocab_size=30522, hidden_size=8, num_attention_heads=2, max_position_embeddings=64)
    save_original_checkpoint(BertModel(other), str(tmp_path / "other" / "bert_model.ckpt"))
    result = classify_here(
        flags(release, mrpc_dir, tmp_path / "out", init_checkpoint=tmp_path / "other" / "bert_model.ckpt") + ["--do_train"],
        capfd,
    )
    assert_one_line_error(result, "bert_model.ckpt: does not fit classifier: ")
    assert "checkpoint [64, 8] vs model [64, 64]" in result.stderr


def test_vocab_longer_than_vocab_size_is_one_line(release, mrpc_dir, tmp_path, capfd):
    """Refused before anything is written (was: a traceback after training began)."""
    other = tmp_path / "release"
    shutil.copytree(release, other)
    with open(other / "vocab.txt", "a", encoding="utf-8") as f:
        f.write("extra1\nextra2\n")
    result = classify_here(flags(other, mrpc_dir, tmp_path / "out") + ["--do_train"], capfd)
    assert_one_line_error(result, f"{other / 'vocab.txt'}: 30524 tokens (ids up to 30523), more than vocab_size 30522 of")
    assert not (tmp_path / "out").exists()


def test_batch_size_not_divisible_by_replicas_is_one_line(release, mrpc_dir, tmp_path):
    # Two replicas on this CPU-only machine: a MirroredStrategy over two logical CPUs, set before TensorFlow
    # starts, in a process of its own (its whole stderr one line, its exit code).
    code = (
        "import sys, tensorflow as tf\n"
        "cpu = tf.config.list_physical_devices('CPU')[0]\n"
        "tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)\n"
        "from keras_bert_impl.training import strategy\n"
        "strategy.get_strategy = lambda name, tpu_address=None: tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])\n"
        "from tools import run_classifier\n"
        "sys.argv[0] = 'run_classifier'\n"
        "run_classifier.console_main()\n"
    )
    result = run_tool_process(
        flags(release, mrpc_dir, tmp_path / "out", train_batch_size=7, strategy="mirrored") + ["--do_train"], code
    )
    assert_one_line_error(result, "run_classifier: error: --train_batch_size=7 is not divisible by the 2 replicas of the strategy")


def test_kill_9_then_rerun_finishes_the_same_fine_tuning(release, tmp_path, capfd):
    """A rerun after kill -9 resumes from the newest model.ckpt-N (weights,
    Adam slots, step, dropout RNG states, data position) and ends at the
    uninterrupted run's weights, with the classifier's dropout on."""
    import tensorflow as tf

    data_dir = tmp_path / "MRPC"
    write_mrpc(data_dir, {"train": 64, "dev": 16})
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")

    def command(output_dir):
        return [sys.executable, TOOL, "--do_train", "--do_eval", *flags(
            release, data_dir, output_dir, num_train_epochs=3, save_checkpoints_steps=4, learning_rate=1e-3)]

    # The uninterrupted run and the rerun in this process; the run killed in a process of its own.
    straight = classify_here(command(tmp_path / "straight")[2:], capfd)
    assert straight.returncode == 0, straight.stderr

    output_dir = kill_9_mid_run(command, [tmp_path / f"killed{n}" for n in range(3)], "model.ckpt-8.index",
                                "model.ckpt.index", env=env)

    resumed = classify_here(command(output_dir)[2:], capfd)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming from" in resumed.stderr and "of 24)" in resumed.stderr
    assert read_eval_results(output_dir / "eval_results.txt") == read_eval_results(tmp_path / "straight" / "eval_results.txt")
    ours = tf.train.load_checkpoint(str(output_dir / "model.ckpt"))
    reference = tf.train.load_checkpoint(str(tmp_path / "straight" / "model.ckpt"))
    assert int(ours.get_tensor("global_step")) == 24
    for name in reference.get_variable_to_shape_map():
        np.testing.assert_allclose(ours.get_tensor(name), reference.get_tensor(name), rtol=1e-4, atol=1e-5, err_msg=name)


def test_a_tpu_strategy_without_a_tpu_is_one_line():
    """Was: a bare ValueError traceback from the TPU resolver."""
    from keras_bert_impl.training.strategy import StrategyError, get_strategy

    with pytest.raises(StrategyError, match=r"^--strategy=tpu \(or --use_tpu\): no TPU to connect to with no --tpu_name"):
        get_strategy("tpu")
