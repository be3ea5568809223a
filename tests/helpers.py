"""Small shared pieces for tests: tiny configs, random weights and inputs."""

import importlib.util
import json
import os
import pathlib
import platform
import subprocess
import sys

import numpy as np
import pytest

from keras_bert_impl.config import BertConfig


def tiny_config(**overrides):
    values = dict(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=32,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        max_position_embeddings=24,
        type_vocab_size=2,
        initializer_range=0.02,
    )
    values.update(overrides)
    return BertConfig(**values)


def randomize(model, seed=0, scale=0.3):
    """Gives every variable distinct, non-trivial values (gammas around 1)."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        shape = tuple(variable.shape)
        value = rng.normal(0.0, scale, shape)
        if variable.path.endswith("gamma"):
            value += 1.0
        variable.assign(value.astype(variable.dtype))


def random_inputs(config, batch=3, seq=10, seed=1, pad=True):
    """Random ids with a padded tail on some rows and two segments."""
    rng = np.random.default_rng(seed)
    input_ids = rng.integers(1, config.vocab_size, (batch, seq)).astype("int32")
    input_mask = np.ones((batch, seq), "int32")
    segment_ids = np.zeros((batch, seq), "int32")
    for row in range(batch):
        length = seq - (row * 2 if pad else 0)
        input_mask[row, length:] = 0
        input_ids[row, length:] = 0
        segment_ids[row, length // 2 : length] = 1
    return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}


BENCHMARKS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"

# The start of a `run_with_onednn_rewrites` program that profiles a tiny
# BertModel: `config`, a padded batch `inputs`, `profile_forward` and an empty
# dict `ran` for the program to fill and print as JSON.
TINY_MODEL_PROFILE = """
import json, sys
sys.path.insert(0, "benchmarks")
import numpy as np, tensorflow as tf
import bench_forward, profile_forward
from keras_bert_impl.config import BertConfig
from keras_bert_impl.models.bert_model import BertModel

config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
inputs = {k: tf.constant(v) for k, v in bench_forward.make_inputs(2, 12, np.random.default_rng(0)).items()}
inputs["input_ids"] = inputs["input_ids"] % 50
ran = {}
"""


def load_benchmark(name):
    """The module `benchmarks/<name>.py`, imported as scripts beside it import each other."""
    sys.path.insert(0, str(BENCHMARKS))  # Scripts import `bench_forward` from beside them.
    try:
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


def weight_casts(concrete_function):
    """The Cast ops that convert a variable as it is read, in a concrete
    function's graph and the functions it calls: what a mixed-precision layer
    does to each of its weights on every call."""
    graph = concrete_function.graph
    graphs = [graph] + [function.graph for function in graph._functions.values() if hasattr(function, "graph")]
    return [op for graph in graphs for op in graph.get_operations()
            if op.type == "Cast" and op.inputs[0].op.type == "ReadVariableOp"]


def weight_casts_but_layer_norms(concrete_function):
    """`weight_casts` less the LayerNorms': oneDNN's fused LayerNorm
    (`layers.layer_norm`) takes its [H] scale and offset in the input's
    dtype, converted on each call (2 x H values each, next to the [rows, H]
    tensors it normalises)."""
    return [op for op in weight_casts(concrete_function) if "LayerNorm" not in op.name]


# TensorFlow's oneDNN graph rewrites exist in its x86 builds.
X86_ONLY = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                              reason="TensorFlow's oneDNN graph rewrites are an x86 build's")


def run_tool_here(main, args, capfd, prog):
    """A tool's `main` run in this process as its console script runs it (`cli.run_tool`), for its exit code and
    output: a `subprocess.CompletedProcess` as a run in a fresh process gives, without its TensorFlow start-up
    (~3-5 s of CPU). For tests of what a tool computes, writes or says, not of the process boundary."""
    from keras_bert_impl.cli import run_tool

    capfd.readouterr()
    try:
        code = run_tool(main, [str(a) for a in args], prog=prog)
    except SystemExit as stop:  # absl's own flag errors
        code = stop.code
    captured = capfd.readouterr()
    return subprocess.CompletedProcess([prog, *args], code, stdout=captured.out, stderr=captured.err)


def run_python(code, timeout=300):
    """Runs Python `code` from the repository root in a fresh process (for
    what must happen before TensorFlow starts, or would change this process's
    TensorFlow state); returns its stdout lines, asserting it exited 0."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", code], cwd=BENCHMARKS.parent, env=env,
                            capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.splitlines()


def run_with_onednn_rewrites(code, setting):
    """Runs Python `code` from the repository root in a fresh process with
    `TF_ENABLE_ONEDNN_OPTS=setting` (read once, when TensorFlow loads) and
    returns the JSON its last stdout line holds."""
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS=setting, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", code], cwd=BENCHMARKS.parent, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def tiny_release_export_tool(tmp_path, vocab_file):
    """`run(*flags)`: `bert-export` (`python -m tools.export_saved_model`) in a fresh process, on a tiny
    classifier release written to `tmp_path/release` (with `vocab_file`), exporting to
    `tmp_path/saved_models/tiny`; returns the `subprocess.CompletedProcess`. The release has one layer: its
    tests are of the tool's flags and what it writes and says, whatever the model's depth."""
    from keras_bert_impl.checkpoints.original import save_original_checkpoint
    from keras_bert_impl.models.classifier import BertClassifier

    config = tiny_config(vocab_size=30522, max_position_embeddings=64, num_hidden_layers=1)
    save_original_checkpoint(BertClassifier(config, num_labels=2), str(tmp_path / "release" / "model.ckpt"))
    config.to_json_file(tmp_path / "release" / "bert_config.json")
    (tmp_path / "release" / "vocab.txt").write_bytes(pathlib.Path(vocab_file).read_bytes())
    command = [sys.executable, "-m", "tools.export_saved_model", f"--model_dir={tmp_path}/release", "--task=classifier",
               "--max_seq_length=16", f"--export_dir={tmp_path}/saved_models/tiny"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")

    def run(*flags):
        return subprocess.run(command + list(flags), capture_output=True, text=True, cwd=BENCHMARKS.parent, env=env)

    return run


def kill_9_mid_run(command, output_dirs, checkpoint, final, timeout=240, **popen_kwargs):
    """Runs `command(output_dir)` and kills it with SIGKILL once `output_dir / checkpoint` exists.

    A tiny run needs well under a second from that checkpoint to its end, so a
    test process held up for longer (a busy machine) kills a run that has
    finished: then it runs again in the next of `output_dirs`.

    Returns:
        The directory of a run killed before it wrote `final`.
    """
    import signal
    import time

    for output_dir in output_dirs:
        process = subprocess.Popen(command(output_dir), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   **popen_kwargs)
        deadline = time.time() + timeout
        while not (output_dir / checkpoint).exists():
            assert process.poll() is None and time.time() < deadline, "no checkpoint before the process ended"
            time.sleep(0.01)
        process.send_signal(signal.SIGKILL)
        process.wait()
        if not (output_dir / final).exists():
            return output_dir
    raise AssertionError(f"each of {len(output_dirs)} runs wrote {final} before it was killed")
