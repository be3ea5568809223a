"""run_pretraining under injected faults, and its seed.

Each fault is written into a real file (text instead of TFRecords, records of
another `max_seq_length`/`max_predictions_per_seq`, a truncated or bit-flipped
file); the tool must answer with one stderr line naming the file and what is
wrong, exit code 1, and, for what the checks find before the run, no output.
Two fresh runs with one `--seed` must write bit-identical checkpoints.

Most runs call the tool in-process (`run_tool`, as the console entry does);
one test runs it as a subprocess to see the whole of stderr.
"""

import gzip
import os
import struct
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.cli import run_tool
from tests.helpers import tiny_config
from tests.test_run_pretraining import PREDICTIONS, REPO, SEQ, write_records
from tools import run_pretraining as tool

VOCAB = 40


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A tiny config (dropout on) and one good file of 48 records."""
    root = tmp_path_factory.mktemp("faults")
    tiny_config(vocab_size=VOCAB, max_position_embeddings=2 * SEQ).to_json_file(root / "bert_config.json")
    write_records(root / "good.tfrecord", 48, VOCAB, seed=1)
    return root


def argv(root, input_file, output_dir, *extra, steps=2):
    return [
        f"--input_file={input_file}",
        f"--output_dir={output_dir}",
        f"--bert_config_file={root}/bert_config.json",
        "--train_batch_size=4", "--eval_batch_size=4",
        f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PREDICTIONS}",
        f"--num_train_steps={steps}", "--num_warmup_steps=1", "--learning_rate=1e-3",
        f"--save_checkpoints_steps={steps}", "--max_eval_steps=30", "--summary_steps=100",
        *extra,
    ]


def run_in_process(args, capsys):
    """`(exit code, stderr lines)` of the tool run as its console entry runs it."""
    capsys.readouterr()
    code = run_tool(tool.main, [str(a) for a in args], prog="run_pretraining")
    return code, capsys.readouterr().err.strip().splitlines()


def record_offsets(path):
    """Start offset of each record, read from the TFRecord framing with
    `struct` (8-byte little-endian length, 4-byte CRC, data, 4-byte CRC)."""
    data = path.read_bytes()
    offsets, position = [], 0
    while position < len(data):
        offsets.append(position)
        (length,) = struct.unpack_from("<Q", data, position)
        position += 8 + 4 + length + 4
    return offsets


@pytest.fixture(scope="module")
def truncated(root):
    """good.tfrecord cut 10 bytes into its last record's data, and where that record starts."""
    path = root / "truncated.tfrecord"
    path.write_bytes((root / "good.tfrecord").read_bytes())
    last = record_offsets(path)[-1]
    with open(path, "r+b") as f:
        f.truncate(last + 12 + 10)
    return path, last


# ----------------------------------------------------------------------------
# Found by the checks before the run: one line, exit 1, nothing written.
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["--do_train", "--do_eval"])
def test_a_file_that_is_not_a_tfrecord(root, tmp_path, capsys, mode):
    text = tmp_path / "corpus.tfrecord"
    text.write_text("This is a sentence of the corpus, not a TFRecord.\n" * 20)
    code, lines = run_in_process(argv(root, text, tmp_path / "out", mode), capsys)
    assert code == 1
    assert lines == [f"run_pretraining: error: {text}: not a TFRecord file (corrupted record at offset 0)"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "seq, predictions, expected",
    [
        (32, PREDICTIONS, f"feature input_ids has length 32, expected {SEQ} (--max_seq_length={SEQ})"),
        (SEQ, 5, f"feature masked_lm_positions has length 5, expected {PREDICTIONS} (--max_predictions_per_seq={PREDICTIONS})"),
        (32, 5, f"feature input_ids has length 32, expected {SEQ} (--max_seq_length={SEQ}); "
                f"feature masked_lm_positions has length 5, expected {PREDICTIONS} (--max_predictions_per_seq={PREDICTIONS})"),
    ],
)
def test_records_of_another_length_are_named_before_any_output(root, tmp_path, capsys, seq, predictions, expected):
    other = tmp_path / "other.tfrecord"
    write_records(other, 8, VOCAB, seed=3, seq=seq, predictions=predictions)
    # The good file first: every file is checked, not only the first one.
    code, lines = run_in_process(argv(root, f"{root}/good.tfrecord,{other}", tmp_path / "out", "--do_train", "--do_eval"), capsys)
    assert code == 1
    assert lines == [f"run_pretraining: error: {other}: {expected}"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("mode", ["--do_train", "--do_eval"])
def test_a_truncated_file_stops_the_run_before_it_starts(root, truncated, tmp_path, capsys, mode):
    """A 2-step training run would never reach the cut; the scan of every
    record finds it before anything is written."""
    path, last = truncated
    code, lines = run_in_process(argv(root, f"{root}/good.tfrecord,{path}", tmp_path / "out", mode), capsys)
    assert code == 1
    assert lines == [f"run_pretraining: error: {path}: truncated or corrupted record (truncated record at offset {last})"]
    assert not (tmp_path / "out").exists()


def test_a_truncated_gzip_file(root, tmp_path, capsys):
    """Gzip shards (--gzip_compress) are read through the inflater; the cut
    is reported at the record offset in the uncompressed stream."""
    path = tmp_path / "shard.tfrecord.gz"
    compressed = gzip.compress((root / "good.tfrecord").read_bytes())
    path.write_bytes(compressed[: len(compressed) - 40])
    code, lines = run_in_process(argv(root, path, tmp_path / "out", "--do_train"), capsys)
    assert code == 1 and len(lines) == 1
    prefix = f"run_pretraining: error: {path}: truncated or corrupted record (truncated record at offset "
    assert lines[0].startswith(prefix) and lines[0].endswith(")")
    # The deflate stream ends inside a record: one of the later ones.
    assert int(lines[0][len(prefix):-1]) in record_offsets(root / "good.tfrecord")[1:]
    assert not (tmp_path / "out").exists()


def test_a_flipped_byte_fails_its_crc(root, tmp_path, capsys):
    path = tmp_path / "flipped.tfrecord"
    data = bytearray((root / "good.tfrecord").read_bytes())
    tenth = record_offsets(root / "good.tfrecord")[10]
    data[tenth + 12 + 5] ^= 0xFF  # Inside the 10th record's data.
    path.write_bytes(bytes(data))
    code, lines = run_in_process(argv(root, path, tmp_path / "out", "--do_train"), capsys)
    assert code == 1
    # TensorFlow gives the offset of the part whose CRC failed: the data, after the 12-byte header.
    assert lines == [f"run_pretraining: error: {path}: truncated or corrupted record (corrupted record at offset {tenth + 12})"]
    assert not (tmp_path / "out").exists()


def test_an_empty_file_and_a_directory(root, tmp_path, capsys):
    (tmp_path / "empty.tfrecord").write_bytes(b"")
    (tmp_path / "shards.tfrecord").mkdir()
    code, lines = run_in_process(argv(root, tmp_path / "empty.tfrecord", tmp_path / "out", "--do_train"), capsys)
    assert (code, lines) == (1, [f"run_pretraining: error: {tmp_path}/empty.tfrecord: no records"])
    code, lines = run_in_process(argv(root, f"{tmp_path}/*.tfrecord", tmp_path / "out", "--do_train"), capsys)
    assert (code, lines) == (1, [f"run_pretraining: error: {tmp_path}/shards.tfrecord: is a directory, not a TFRecord file"])
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------
# Met while reading (the scan turned off, or records the first-record check
# cannot see): still one line naming the file, never a silent exit 0.
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["--do_train", "--do_eval"])
def test_truncation_met_while_reading(root, truncated, tmp_path, capsys, mode):
    path, last = truncated
    code, lines = run_in_process(argv(root, path, tmp_path / "out", mode, "--noscan_input_files"), capsys)
    assert code == 1
    assert lines[-1] == f"run_pretraining: error: {path}: truncated or corrupted record (truncated record at offset {last})"
    assert not any("Traceback" in line for line in lines)
    assert not list((tmp_path / "out").glob("model.ckpt-*")) and not (tmp_path / "out" / "eval_results.txt").exists()


def test_a_later_record_of_another_length(root, tmp_path, capsys):
    """Framing intact, first record right: the parse error of the 49th record
    is named with its feature's lengths."""
    path = tmp_path / "appended.tfrecord"
    write_records(tmp_path / "longer.tfrecord", 8, VOCAB, seed=4, seq=32)
    path.write_bytes((root / "good.tfrecord").read_bytes() + (tmp_path / "longer.tfrecord").read_bytes())
    code, lines = run_in_process(argv(root, path, tmp_path / "out", "--do_eval"), capsys)
    assert code == 1
    assert lines[-1].startswith(f"run_pretraining: error: {path}: a record's feature ")
    assert lines[-1].endswith(f" has length 32, expected {SEQ}")
    assert not (tmp_path / "out" / "eval_results.txt").exists()


# ----------------------------------------------------------------------------
# The whole of stderr, as a user sees it.
# ----------------------------------------------------------------------------


def test_stderr_is_one_line_without_traceback(root, tmp_path):
    other = tmp_path / "seq32.tfrecord"
    write_records(other, 8, VOCAB, seed=3, seq=32)
    result = subprocess.run(
        [sys.executable, "-m", "tools.run_pretraining", *argv(root, other, tmp_path / "out", "--do_train")],
        capture_output=True, text=True, cwd=REPO, timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"run_pretraining.py: error: {other}: feature input_ids has length 32, expected {SEQ} (--max_seq_length={SEQ})"
    ]
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------
# One seed: initial weights, dropout and data order.
# ----------------------------------------------------------------------------


def checkpoint_tensors(output_dir, step):
    reader = tf.train.load_checkpoint(str(output_dir / f"model.ckpt-{step}"))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def test_fresh_runs_with_one_seed_write_identical_checkpoints(root, tmp_path, capsys):
    """No init checkpoint and dropout 0.1: the initial weights, the dropout
    masks and the data order all come from --seed."""
    runs = {}
    for name, seed in (("first", 7), ("again", 7), ("other_seed", 8)):
        code, lines = run_in_process(argv(root, f"{root}/good.tfrecord", tmp_path / name, "--do_train", f"--seed={seed}", steps=6), capsys)
        assert code == 0, lines
        runs[name] = checkpoint_tensors(tmp_path / name, 6)
    first, again, other = runs["first"], runs["again"], runs["other_seed"]
    assert first.keys() == again.keys() == other.keys() and len(first) > 100
    for name in first:
        np.testing.assert_array_equal(again[name], first[name], err_msg=name)
    differing = [name for name in first if not np.array_equal(other[name], first[name])]
    assert set(first) - set(differing) == {"global_step"}
