"""tools/run_pretraining.py: trains with model.fit on original-schema
TFRecords, writes the original outputs, resumes after kill -9, and runs under
MirroredStrategy (2 logical CPUs) and a 2-process MultiWorkerMirroredStrategy.

The tool runs in this process (`run_tool(run_pretraining.main, ...)`, as its
console script runs it) wherever the test is not about a process of its own:
a run killed with kill -9, two logical CPUs (set before TensorFlow starts) and
the two workers stay separate processes.
"""

import json
import os
import shutil
import socket
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.checkpoints.original import save_original_checkpoint
from keras_bert_impl.config import BertConfig
from keras_bert_impl.cli import run_tool
from keras_bert_impl.models.pretraining import BertPretrainingModel
from keras_bert_impl.training.checkpointing import restore_training_checkpoint
from keras_bert_impl.training.optimization import create_optimizer
from keras_bert_impl.training.strategy import weights_digest
from tests.helpers import kill_9_mid_run, tiny_config
from tools import run_pretraining

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEQ, PREDICTIONS = 16, 3


def write_records(path, count, vocab_size, seed=0, seq=SEQ, predictions=PREDICTIONS):
    """Original-schema pretraining examples, written with tf.train.Example directly.

    Args:
        path: The TFRecord file.
        count: Examples.
        vocab_size: Token ids are drawn below this.
        seed: Seed of the examples.
        seq, predictions: The `max_seq_length` and `max_predictions_per_seq`
            the features are padded to.
    """
    rng = np.random.default_rng(seed)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(count):
            length = int(rng.integers(max(8, predictions + 1), seq + 1))
            ids = np.zeros(seq, np.int64)
            ids[:length] = rng.integers(5, vocab_size, length)
            mask = (np.arange(seq) < length).astype(np.int64)
            segments = ((np.arange(seq) >= length // 2) & (mask == 1)).astype(np.int64)
            positions = np.sort(rng.choice(np.arange(1, length), predictions, replace=False)).astype(np.int64)
            labels = ids[positions].copy()
            weights = np.ones(predictions, np.float32)
            # No padded prediction slots: with them, per-replica MLM
            # normalisation (as on the original's TPU cores) legitimately
            # differs from one device, and the mirrored test compares the two.
            ids[positions[weights > 0]] = 4  # [MASK]
            int_feature = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=list(v)))  # noqa: E731
            feature = {
                "input_ids": int_feature(ids),
                "input_mask": int_feature(mask),
                "segment_ids": int_feature(segments),
                "masked_lm_positions": int_feature(positions),
                "masked_lm_ids": int_feature(labels),
                "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(value=list(weights))),
                "next_sentence_labels": int_feature([int(rng.integers(0, 2))]),
            }
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """`(root, config)`: the records, and a 1-layer model (`bert_config.json`, `init/`) in `root`; a 2-layer one in
    `root / "two_layers"` for the LAMB run. One layer wherever nothing is about the layers: each run (in this
    process or its own) traces its train step. LAMB's fall of the loss on these noise labels is thin (measured at
    1 layer: 0.047 and 0.008 in two runs, against the 0.01 asserted), so it keeps 2."""
    root = tmp_path_factory.mktemp("pretraining")
    (root / "two_layers").mkdir()
    for directory, layers in ((root, 1), (root / "two_layers", 2)):
        config = tiny_config(vocab_size=40, num_hidden_layers=layers, hidden_dropout_prob=0.0,
                             attention_probs_dropout_prob=0.0, max_position_embeddings=SEQ)
        config.to_json_file(directory / "bert_config.json")
        save_original_checkpoint(BertPretrainingModel(config), str(directory / "init" / "bert_model.ckpt"))
    write_records(root / "a.tfrecord", 48, config.vocab_size, seed=1)
    write_records(root / "b.tfrecord", 48, config.vocab_size, seed=2)
    return root, BertConfig.from_json_file(str(root / "bert_config.json"))


def flags(root, output_dir, *extra, steps=12, save=4, model=None):
    """The tool's flags: the records in `root`, the model (`bert_config.json`, `init/`) in `model` (default `root`)."""
    model = model or root
    return [
        f"--input_file={root}/a.tfrecord,{root}/b*.tfrecord",
        f"--output_dir={output_dir}",
        f"--bert_config_file={model}/bert_config.json",
        f"--init_checkpoint={model}/init/bert_model.ckpt",
        "--do_train", "--do_eval",
        "--train_batch_size=4", "--eval_batch_size=4",
        f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PREDICTIONS}",
        f"--num_train_steps={steps}", "--num_warmup_steps=2", "--learning_rate=1e-3",
        f"--save_checkpoints_steps={save}", "--max_eval_steps=5", "--summary_steps=2",
        *extra,
    ]


def command(root, output_dir, *extra, steps=12, save=4):
    """The tool's command line, for a process of its own."""
    return [sys.executable, "-m", "tools.run_pretraining", *flags(root, output_dir, *extra, steps=steps, save=save)]


def run(args, **kwargs):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **kwargs.pop("env", {}))
    return subprocess.run(args, capture_output=True, text=True, cwd=REPO, env=env, timeout=300, **kwargs)


def run_here(argv, capfd):
    """The tool in this process, as its console script runs it: `(exit code, stderr)`."""
    capfd.readouterr()
    code = run_tool(run_pretraining.main, argv, prog="run_pretraining")
    return code, capfd.readouterr().err


def train_here(argv):
    """The tool in this process, for a fixture: its run must succeed."""
    assert run_tool(run_pretraining.main, argv, prog="run_pretraining") == 0


def read_results(path):
    return dict(line.split(" = ") for line in path.read_text().splitlines())


def final_weights(output_dir, step):
    """Every variable of `model.ckpt-<step>` (step None: the initial `bert_model.ckpt`) by name."""
    checkpoint = f"model.ckpt-{step}" if step is not None else "bert_model.ckpt"
    reader = tf.train.load_checkpoint(str(output_dir / checkpoint))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


@pytest.fixture(scope="module")
def uninterrupted(setup):
    root, _ = setup
    output_dir = root / "straight"
    train_here(flags(root, output_dir))
    return output_dir


def test_outputs_like_the_original(uninterrupted):
    results = read_results(uninterrupted / "eval_results.txt")
    assert sorted(results) == sorted(
        ["global_step", "loss", "masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy", "next_sentence_loss"]
    )
    assert results["global_step"] == "12"
    assert 0 < float(results["masked_lm_loss"]) < np.log(40) + 1
    assert sorted(os.listdir(uninterrupted)).count("model.ckpt-12.index") == 1
    names = dict(tf.train.list_variables(str(uninterrupted / "model.ckpt-12")))
    assert names["bert/embeddings/word_embeddings"] == [40, 16]
    assert "bert/embeddings/word_embeddings/adam_m" in names
    # TensorBoard event files with the learning rate.
    events = [f for f in os.listdir(uninterrupted / "train") if f.startswith("events")]
    assert events


def test_kill_9_then_rerun_finishes_the_same_run(setup, uninterrupted, tmp_path, capfd):
    root, _ = setup
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    output_dir = kill_9_mid_run(lambda directory: command(root, directory),
                                [tmp_path / f"killed{n}" for n in range(3)], "model.ckpt-4.index",
                                "model.ckpt-12.index", cwd=REPO, env=env)

    code, stderr = run_here(flags(root, output_dir), capfd)
    assert code == 0, stderr
    assert "resuming from" in stderr
    assert read_results(output_dir / "eval_results.txt")["global_step"] == "12"
    resumed, straight = final_weights(output_dir, 12), final_weights(uninterrupted, 12)
    assert resumed.keys() == straight.keys()
    for name in straight:
        np.testing.assert_allclose(resumed[name], straight[name], rtol=1e-4, atol=1e-5, err_msg=name)


def test_rerun_with_other_settings_is_refused_unless_allowed(setup, uninterrupted, tmp_path, capfd):
    """The original's Estimator would silently continue a finished 12-step run
    under a new learning rate and step count; we name the changes and change
    nothing, and continue only when told to (the two-phase 128/512 recipe)."""
    root, _ = setup
    output_dir = tmp_path / "changed"
    shutil.copytree(uninterrupted, output_dir)
    files = lambda: {p.name: p.read_bytes() for p in output_dir.iterdir() if p.is_file()}  # noqa: E731
    before = files()
    code, stderr = run_here(flags(root, output_dir, "--learning_rate=2e-3", steps=16), capfd)
    assert code == 1
    error = stderr.strip().splitlines()[-1]
    assert "learning_rate 0.001 (now 0.002)" in error and "num_train_steps 12 (now 16)" in error, error
    assert "--allow_changed_settings" in error
    assert files() == before

    code, stderr = run_here(flags(root, output_dir, "--allow_changed_settings", steps=16), capfd)
    assert code == 0, stderr
    assert "changed settings: num_train_steps 12 (now 16)" in stderr
    assert read_results(output_dir / "eval_results.txt")["global_step"] == "16"
    assert json.loads((output_dir / "training_settings.json").read_text())["num_train_steps"] == 16


@pytest.fixture(scope="module")
def lamb_run(setup):
    """12 LAMB steps of the 2-layer model under MirroredStrategy (one CPU), at a LAMB learning rate."""
    root, _ = setup
    output_dir = root / "lamb"
    train_here(flags(root, output_dir, "--optimizer=lamb", "--learning_rate=3e-2", "--strategy=mirrored",
                     model=root / "two_layers"))
    return output_dir


def test_lamb_pretraining_lowers_the_loss(setup, lamb_run):
    """The initial weights evaluated on the same batches (measured: masked-LM
    loss 3.690 -> 3.667, near log(40); the tokens are uniform noise) against
    the LAMB run's; the optimizer is recorded in the run's settings."""
    root, _ = setup
    initial = root / "initial_eval"
    train_here([arg for arg in flags(root, initial, model=root / "two_layers") if arg != "--do_train"])
    before, after = read_results(initial / "eval_results.txt"), read_results(lamb_run / "eval_results.txt")
    assert before["global_step"] == "0" and after["global_step"] == "12"
    assert float(after["masked_lm_loss"]) < float(before["masked_lm_loss"]) - 0.01
    assert float(after["loss"]) < float(before["loss"])
    assert json.loads((lamb_run / "training_settings.json").read_text())["optimizer"] == "lamb"
    # The moments are in the original layout, beside the weights, as AdamW's.
    assert "bert/embeddings/word_embeddings/adam_v" in dict(tf.train.list_variables(str(lamb_run / "model.ckpt-12")))


def test_resume_with_another_optimizer_is_refused(setup, uninterrupted, lamb_run, tmp_path, capfd):
    """AdamW's moments continued under LAMB (or the reverse) would pass for a
    run of either: refused by name, nothing written."""
    root, _ = setup
    cases = (
        (uninterrupted, ["--optimizer=lamb"], root, 'optimizer not recorded: the default "adamw" (now "lamb")'),
        (lamb_run, ["--optimizer=adamw", "--learning_rate=3e-2", "--strategy=mirrored"], root / "two_layers",
         'optimizer "lamb" (now the default "adamw")'),
    )
    for source, extra, model, fragment in cases:
        output_dir = tmp_path / source.name
        shutil.copytree(source, output_dir)
        before = {p.name: p.read_bytes() for p in output_dir.iterdir() if p.is_file()}
        code, stderr = run_here(flags(root, output_dir, *extra, model=model), capfd)
        assert code == 1
        error = stderr.strip().splitlines()[-1]
        assert fragment in error and "--allow_changed_settings" in error, error
        assert "learning_rate" not in error, error  # Only the optimizer changed.
        assert {p.name: p.read_bytes() for p in output_dir.iterdir() if p.is_file()} == before


@pytest.fixture(scope="module")
def unclipped(setup):
    """6 steps without clipping on one device, a checkpoint every 3: the reference of the mirrored and the
    accumulated runs (the weights at step 6 do not depend on where the checkpoints were)."""
    root, _ = setup
    output_dir = root / "unclipped"
    train_here(flags(root, output_dir, "--clip_norm=0", steps=6, save=3))
    assert read_results(output_dir / "eval_results.txt")["global_step"] == "6"
    return final_weights(output_dir, 6)


# The two runs on two logical CPUs (set before TensorFlow starts) in one process of their own, in turn: per run
# its exit code and what reached file descriptor 2 (TensorFlow's native writes too), the first run's from the
# process's start (its imports included), as a process per run would show them, for one TensorFlow start-up (each
# was ~4 s of CPU). The second run splits the CPU as the first did: the same split again is no change.
_TWO_CPU_RUNS = """
import json, os, sys, tempfile
answers = []
for argv in json.loads(sys.argv[1]):
    with tempfile.TemporaryFile() as err:
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        try:
            from keras_bert_impl.cli import run_tool
            from tools import run_pretraining
            code = run_tool(run_pretraining.main, argv, prog="run_pretraining")
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        answers.append([code, err.read().decode()])
with open(sys.argv[2], "w") as f:
    json.dump(answers, f)
"""
TWO_CPU_BAD_FLAGS = ["--train_batch_size=3", "--strategy=mirrored", "--num_cpu_devices=2"]


@pytest.fixture(scope="module")
def two_cpu_runs(setup, tmp_path_factory):
    """`({run: subprocess.CompletedProcess}, directory)`: in `_TWO_CPU_RUNS`'s process, "bad_batch" (flags
    `TWO_CPU_BAD_FLAGS`, refused) then "mirrored" (6 steps without clipping under MirroredStrategy, into
    `directory / "mirrored"`)."""
    root, _ = setup
    directory = tmp_path_factory.mktemp("two_cpus")
    runs = {
        "bad_batch": flags(root, directory / "out", *TWO_CPU_BAD_FLAGS),
        "mirrored": flags(root, directory / "mirrored", "--clip_norm=0", "--strategy=mirrored", "--num_cpu_devices=2",
                          steps=6, save=6),
    }
    result = run([sys.executable, "-c", _TWO_CPU_RUNS, json.dumps(list(runs.values())), str(directory / "runs.json")])
    assert result.returncode == 0, result.stderr[-3000:]
    answers = json.loads((directory / "runs.json").read_text())
    assert len(answers) == len(runs)
    return {name: subprocess.CompletedProcess(argv, code, "", stderr)
            for (name, argv), (code, stderr) in zip(runs.items(), answers)}, directory


def test_mirrored_on_two_logical_cpus_matches_one_device(unclipped, two_cpu_runs):
    """Same global batches, gradients summed over replicas: the same training
    as one device. Clipping is off here because Keras (like the original on
    TPU cores) clips each replica's gradient before the all-reduce. Two
    logical CPUs are set before TensorFlow starts: a process of its own."""
    runs, directory = two_cpu_runs
    assert runs["mirrored"].returncode == 0, runs["mirrored"].stderr
    mirrored = final_weights(directory / "mirrored", 6)
    for name in unclipped:
        np.testing.assert_allclose(mirrored[name], unclipped[name], rtol=1e-4, atol=1e-5, err_msg=name)


def free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_two_process_multi_worker_mirrored(setup, tmp_path):
    root, config = setup
    ports = [free_port(), free_port()]
    cluster = {"worker": [f"localhost:{p}" for p in ports]}
    output_dir = tmp_path / "multi"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    processes = []
    for index in range(2):
        worker_env = dict(env, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}))
        processes.append(subprocess.Popen(
            command(root, output_dir, "--strategy=multi_worker_mirrored", steps=4, save=2),
            cwd=REPO, env=worker_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        ))
    outputs = [p.communicate(timeout=300) for p in processes]
    for process, (_, stderr) in zip(processes, outputs):
        assert process.returncode == 0, stderr
    assert read_results(output_dir / "eval_results.txt")["global_step"] == "4"
    assert (output_dir / "model.ckpt-4.index").exists()
    # Synchronous all-reduce training leaves both workers with the same
    # weights and Adam slots (each prints their digest); only the chief
    # writes, and its weights moved away from the initial checkpoint.
    digests = [
        [line.rsplit(" ", 1)[1] for line in stderr.splitlines() if "weights and optimizer digest" in line]
        for _, stderr in outputs
    ]
    assert len(digests[0]) == 1 and digests[0] == digests[1], digests
    assert sorted(p.name for p in output_dir.iterdir() if p.is_dir()) == ["train"]  # No worker directories.
    chief = final_weights(output_dir, 4)
    initial = tf.train.load_checkpoint(str(root / "init" / "bert_model.ckpt"))
    assert not np.allclose(chief["bert/embeddings/word_embeddings"], initial.get_tensor("bert/embeddings/word_embeddings"))
    # The digest is that of the state the chief saved, restored here.
    model = BertPretrainingModel(config)
    optimizer = create_optimizer(1e-3, 4, 2, global_clipnorm=1.0)
    optimizer.build(model.trainable_variables)
    restore_training_checkpoint(model, optimizer, str(output_dir / "model.ckpt-4"))
    assert weights_digest([*model.weights, *optimizer.variables]) == digests[0][0]


@pytest.mark.parametrize(
    "extra, fragment",
    [
        # Two logical CPUs are set before TensorFlow starts: a process of its own (its whole stderr one line),
        # `two_cpu_runs`'s.
        (TWO_CPU_BAD_FLAGS, "--train_batch_size=3 is not divisible by the 2 replicas"),
        (["--strategy=warp"], "--strategy 'warp' is unknown"),
        (["--max_seq_length=64"], "--max_seq_length 64 exceeds max_position_embeddings 16"),
    ],
)
def test_bad_flags_are_one_line_errors(setup, tmp_path, capfd, request, extra, fragment):
    root, _ = setup
    if extra is TWO_CPU_BAD_FLAGS:
        result = request.getfixturevalue("two_cpu_runs")[0]["bad_batch"]
        code, stderr = result.returncode, result.stderr
    else:
        code, stderr = run_here(flags(root, tmp_path / "out", *extra), capfd)
    assert code != 0
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], stderr


def test_init_checkpoint_of_another_size(setup, tmp_path, capfd):
    root, _ = setup
    other = BertPretrainingModel(tiny_config(vocab_size=40, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                             max_position_embeddings=SEQ))
    save_original_checkpoint(other, str(tmp_path / "other" / "bert_model.ckpt"))
    args = [a if not a.startswith("--init_checkpoint") else f"--init_checkpoint={tmp_path}/other/bert_model.ckpt" for a in flags(root, tmp_path / "out")]
    code, stderr = run_here(args, capfd)
    lines = stderr.strip().splitlines()
    assert code != 0 and len(lines) == 1
    assert "shape-mismatched" in lines[0] and "bert/embeddings/word_embeddings: checkpoint [40, 8] vs model [40, 16]" in lines[0]


def test_gradient_accumulation_equals_one_big_batch_and_resumes(setup, unclipped, tmp_path, capfd):
    """Two micro-batches of 2 make the same optimizer steps as batches of 4
    (every example has all its prediction slots, so the per-micro-batch MLM
    means average to the batch mean); a rerun with the last checkpoint
    removed resumes mid-run from model.ckpt-3 and ends at the same weights."""
    root, _ = setup
    accumulated = tmp_path / "accumulated"
    code, stderr = run_here(flags(root, accumulated, "--clip_norm=0", "--gradient_accumulation_steps=2", steps=6, save=3),
                            capfd)
    assert code == 0, stderr
    assert read_results(accumulated / "eval_results.txt")["global_step"] == "6"
    runs = {"one": unclipped, "accumulated": final_weights(accumulated, 6)}
    for name in runs["one"]:
        np.testing.assert_allclose(runs["accumulated"][name], runs["one"][name], rtol=1e-4, atol=1e-5, err_msg=name)

    for path in accumulated.glob("model.ckpt-6.*"):
        path.unlink()
    code, stderr = run_here(flags(root, accumulated, "--clip_norm=0", "--gradient_accumulation_steps=2", steps=6, save=3),
                            capfd)
    assert code == 0, stderr
    assert "resuming from" in stderr and "(step 3)" in stderr
    resumed = final_weights(accumulated, 6)
    for name in runs["one"]:
        np.testing.assert_allclose(resumed[name], runs["accumulated"][name], rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("extra", [
    ["--mixed_precision=bfloat16", "--jit_compile"],
    ["--mixed_precision=float16"],
])
def test_mixed_precision_and_xla_train_like_float32(setup, uninterrupted, tmp_path, capfd, extra):
    """Mixed precision keeps float32 weights in the original layout (and the
    loss scale, for float16) and makes the float32 run's updates: the labels
    here are noise, so the losses alone could not tell a run that never
    updates (all steps skipped, gradients never unscaled) from one that does."""
    root, _ = setup
    output_dir = tmp_path / "mixed"
    code, stderr = run_here(flags(root, output_dir, *extra), capfd)
    assert code == 0, stderr
    results, reference = read_results(output_dir / "eval_results.txt"), read_results(uninterrupted / "eval_results.txt")
    assert results["global_step"] == "12"
    for key in ("masked_lm_loss", "next_sentence_loss"):
        assert float(results[key]) == pytest.approx(float(reference[key]), rel=0.05), key
    # All weights' change from the initial checkpoint, as one vector: within
    # 10 % of the float32 run's (measured: 0.9 % bf16 + XLA, 0.2 % float16),
    # where a run that skipped its updates is 100 % off.
    initial = final_weights(root / "init", None)
    names = sorted(initial)
    runs = {"float32": final_weights(uninterrupted, 12), "mixed": final_weights(output_dir, 12)}
    update = {key: np.concatenate([(weights[name] - initial[name]).ravel() for name in names])
              for key, weights in runs.items()}
    assert np.linalg.norm(update["float32"]) > 0.1
    assert np.linalg.norm(update["mixed"] - update["float32"]) < 0.1 * np.linalg.norm(update["float32"])
    variables = dict(tf.train.list_variables(str(output_dir / "model.ckpt-12")))
    reader = tf.train.load_checkpoint(str(output_dir / "model.ckpt-12"))
    assert reader.get_variable_to_dtype_map()["bert/encoder/layer_0/attention/self/query/kernel"] == tf.float32
    assert ("loss_scale/dynamic_scale" in variables) == ("--mixed_precision=float16" in extra)


@pytest.mark.parametrize(
    "task, cluster, chief",
    [
        ({"type": "worker", "index": 0}, {"worker": ["a", "b"]}, True),
        ({"type": "worker", "index": 1}, {"worker": ["a", "b"]}, False),
        # With a chief task in the cluster, worker 0 is not the chief.
        ({"type": "worker", "index": 0}, {"chief": ["c"], "worker": ["a", "b"]}, False),
        ({"type": "chief", "index": 0}, {"chief": ["c"], "worker": ["a", "b"]}, True),
        ({"type": "evaluator", "index": 0}, {"chief": ["c"], "evaluator": ["e"]}, False),
    ],
)
def test_only_the_chief_writes(monkeypatch, task, cluster, chief):
    from keras_bert_impl.jobs.run_pretraining import is_chief

    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": task}))
    assert is_chief() is chief
