"""Faults in the sharded pretraining-data mode, through the tool as a user runs it.

A finished shard that was truncated, had a byte flipped, was deleted or lost
its manifest record is found on the rerun (size first, then SHA-256), named on
stderr with the reason, and written again with the very bytes of the first
run. A corpus smaller than `--num_shards` chunks is still spread over every
shard, and one with fewer documents than shards gets a warning.

The corpus and vocabulary are made here (a few dozen words), so the tests need
no downloaded asset and run in about a second each.
"""

import hashlib
import json
import os
import random

import pytest

from keras_bert_impl.cli import run_tool
from keras_bert_impl.data.pretraining_pipeline import Chunk, plan_chunks, shard_layout
from keras_bert_impl.data.tfrecord_files import read_records
from tools import create_pretraining_data

WORDS = (
    "the a cat dog bird fish man woman child house tree river road city town sun moon star "
    "sat ran saw ate found made took gave walked jumped slept read wrote sang "
    "big small red green old new quiet loud quick slow over under near far"
).split()
NUM_SHARDS = 4


@pytest.fixture()
def vocab_file(tmp_path):
    path = tmp_path / "vocab.txt"
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ","] + WORDS
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return path


def write_corpus(path, num_documents, seed=0):
    """`num_documents` documents of 3-7 sentences of 6-13 words; returns `path`."""
    rng = random.Random(seed)
    documents = []
    for _ in range(num_documents):
        sentences = [" ".join(rng.choices(WORDS, k=rng.randint(6, 13))) + "." for _ in range(rng.randint(3, 7))]
        documents.append("\n".join(sentences))
    path.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    return path


def run(argv, capsys):
    """`(exit code, stderr)` of the tool."""
    code = run_tool(create_pretraining_data.main, [str(a) for a in argv])
    return code, capsys.readouterr().err


def scalable_args(corpus, prefix, vocab_file, *more):
    return [
        f"--input_file={corpus}", f"--output_file={prefix}", f"--vocab_file={vocab_file}", "--scalable",
        f"--num_shards={NUM_SHARDS}", "--num_workers=1", "--chunk_mb=0.05", "--max_seq_length=64",
        "--max_predictions_per_seq=8", "--dupe_factor=1", "--random_seed=7", *more,
    ]


def shard_files(prefix):
    return [f"{prefix}-{k:05d}-of-{NUM_SHARDS:05d}" for k in range(NUM_SHARDS)]


# ----------------------------------------------------------------------------
# The manifest's size and checksum, verified on a rerun.
# ----------------------------------------------------------------------------


def test_manifest_records_each_shards_size_and_sha256(tmp_path, vocab_file, capsys):
    corpus = write_corpus(tmp_path / "corpus.txt", 190)
    prefix = tmp_path / "out" / "data"
    code, err = run(scalable_args(corpus, prefix, vocab_file), capsys)
    assert code == 0, err
    manifest = json.loads((tmp_path / "out" / "data.manifest.json").read_text())
    assert sorted(manifest["shards"]) == [os.path.basename(p) for p in shard_files(prefix)]
    for path in shard_files(prefix):
        entry = manifest["shards"][os.path.basename(path)]
        data = open(path, "rb").read()
        assert entry["size"] == len(data) > 1000
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
        assert entry["stats"]["instances"] == len(list(read_records(path)))


def truncate(path):
    os.truncate(path, 1000)


def flip_middle_byte(path):
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(path, "wb").write(bytes(data))


def forget_checksum(path):
    manifest_path = os.path.join(os.path.dirname(path), "data.manifest.json")
    manifest = json.loads(open(manifest_path).read())
    del manifest["shards"][os.path.basename(path)]["sha256"]
    open(manifest_path, "w").write(json.dumps(manifest))


FAULTS = {
    "truncated": (truncate, "size 1000 != recorded {size}"),
    "byte-flipped": (flip_middle_byte, "checksum mismatch (SHA-256)"),
    "deleted": (os.remove, "missing"),
    "unrecorded": (forget_checksum, "no size and checksum recorded"),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_damaged_shard_is_named_and_written_again(fault, tmp_path, vocab_file, capsys):
    damage, reason = FAULTS[fault]
    corpus = write_corpus(tmp_path / "corpus.txt", 190)
    prefix = tmp_path / "out" / "data"
    assert run(scalable_args(corpus, prefix, vocab_file), capsys)[0] == 0
    paths = shard_files(prefix)
    first = [open(p, "rb").read() for p in paths]
    damaged = paths[1]
    damage(damaged)
    for path in paths:
        if path != damaged:
            os.utime(path, (1, 1))

    code, err = run(scalable_args(corpus, prefix, vocab_file), capsys)
    assert code == 0, err
    message = f"create_pretraining_data: {damaged}: {reason.format(size=len(first[1]))}; writing it again"
    assert message in err.splitlines()
    assert "kept 3 finished shard(s)" in err and "wrote 1 file(s)" in err
    assert [open(p, "rb").read() for p in paths] == first
    assert [os.stat(p).st_mtime for p in paths if p != damaged] == [1, 1, 1]  # The sound ones not rewritten.
    assert not [name for name in os.listdir(tmp_path / "out") if "partial" in name]
    # The rewritten shard is recorded again: a third run keeps all four, silently.
    code, err = run(scalable_args(corpus, prefix, vocab_file), capsys)
    assert code == 0 and "kept 4 finished shard(s)" in err and "writing it again" not in err


def test_two_damaged_shards_in_one_rerun(tmp_path, vocab_file, capsys):
    corpus = write_corpus(tmp_path / "corpus.txt", 190)
    prefix = tmp_path / "out" / "data"
    assert run(scalable_args(corpus, prefix, vocab_file, "--gzip_compress"), capsys)[0] == 0
    paths = shard_files(prefix)
    first = [open(p, "rb").read() for p in paths]
    truncate(paths[0])
    flip_middle_byte(paths[3])
    code, err = run(scalable_args(corpus, prefix, vocab_file, "--gzip_compress"), capsys)
    assert code == 0
    assert f"{paths[0]}: size 1000 != recorded {len(first[0])}" in err
    assert f"{paths[3]}: checksum mismatch" in err
    assert "kept 2 finished shard(s)" in err
    assert [open(p, "rb").read() for p in paths] == first


# ----------------------------------------------------------------------------
# Small corpora: spread over every shard, or warned of.
# ----------------------------------------------------------------------------


def test_small_corpus_reaches_every_shard(tmp_path, vocab_file, capsys):
    # ~45 KB with 0.05 MB chunks: as a 1.8 MB corpus with the default 2 MB
    # chunks, one chunk, so before the fix all of it went to shard 0.
    corpus = write_corpus(tmp_path / "corpus.txt", 190)
    assert 0.8 < corpus.stat().st_size / (0.05 * 2**20) < 1.0
    prefix = tmp_path / "out" / "data"
    code, err = run(scalable_args(corpus, prefix, vocab_file), capsys)
    assert code == 0 and "warning" not in err
    counts = [len(list(read_records(p))) for p in shard_files(prefix)]
    assert min(counts) > 0.15 * sum(counts), counts
    assert "190 documents" in err  # Each document read once, by one shard.


def test_fewer_documents_than_shards_is_warned_of(tmp_path, vocab_file, capsys):
    corpus = write_corpus(tmp_path / "corpus.txt", 2)
    prefix = tmp_path / "out" / "data"
    code, err = run(scalable_args(corpus, prefix, vocab_file), capsys)
    assert code == 0
    counts = [len(list(read_records(p))) for p in shard_files(prefix)]
    assert sum(count > 0 for count in counts) == 2
    warning = [line for line in err.splitlines() if "warning" in line]
    assert len(warning) == 1
    assert "2 of 4 shards hold no instances" in warning[0] and "2 document(s)" in warning[0]


def test_plan_cuts_a_small_input_into_a_chunk_per_shard():
    # Pieces of 4,000 bytes would be 3 (round(2.5) + 1) for 4 shards: the
    # 4 pieces go to the larger file until its pieces are no larger than the other's.
    assert plan_chunks([("a", 10_000), ("b", 2_000)], 4_000, min_chunks=4) == [
        Chunk("a", 0, 3_333), Chunk("a", 3_333, 6_666), Chunk("a", 6_666, 10_000), Chunk("b", 0, 2_000),
    ]
    three = plan_chunks([("a", 900), ("b", 900), ("c", 900)], 10**6, min_chunks=4)
    assert [(c.path, c.end - c.start) for c in three] == [("a", 450), ("a", 450), ("b", 900), ("c", 900)]
    assert plan_chunks([("a", 3)], 100, min_chunks=4) == [Chunk("a", 0, 1), Chunk("a", 1, 2), Chunk("a", 2, 3)]
    # Enough chunks already: the layout is the one earlier runs made.
    enough = plan_chunks([("a", 10_000)], 2_000, min_chunks=4)
    assert enough == [Chunk("a", k, k + 2_000) for k in range(0, 10_000, 2_000)]
    tasks = shard_layout([("a", 1_800_000)], "out", 4, 2 << 20)
    assert [(path, [(c, chunk.start, chunk.end) for c, chunk in chunks]) for path, chunks in tasks] == [
        ("out-00000-of-00004", [(0, 0, 450_000)]),
        ("out-00001-of-00004", [(1, 450_000, 900_000)]),
        ("out-00002-of-00004", [(2, 900_000, 1_350_000)]),
        ("out-00003-of-00004", [(3, 1_350_000, 1_800_000)]),
    ]


# ----------------------------------------------------------------------------
# Concurrent runs, dead workers, killed plain runs, flags.
# ----------------------------------------------------------------------------


def test_second_run_into_the_same_output_is_refused_while_the_first_runs(tmp_path, vocab_file, capsys):
    """Two runs would mix their shards (and one deleted the other's unfinished
    files); the second is refused at once, naming the first, and writes nothing."""
    from keras_bert_impl.io import exclusive_output

    corpus = write_corpus(tmp_path / "corpus.txt", 40)
    prefix = tmp_path / "out" / "data"
    (tmp_path / "out").mkdir()
    for args in (scalable_args(corpus, prefix, vocab_file),
                 [f"--input_file={corpus}", f"--output_file={prefix}", f"--vocab_file={vocab_file}"]):
        with exclusive_output(str(prefix)):  # The first run, as far as the lock goes.
            code, err = run(args, capsys)
            assert os.listdir(tmp_path / "out") == [".data.lock"]  # Nothing else written.
        assert code == 1 and f"{prefix}: another run (pid {os.getpid()}) is writing it" in err, err
    code, err = run(scalable_args(corpus, prefix, vocab_file), capsys)  # The lock went with its holder.
    assert code == 0, err
    assert ".data.lock" not in os.listdir(tmp_path / "out")


def _children(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(child) for child in f.read().split()]


def _cmdline(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode(errors="replace")


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs Linux /proc to find the worker processes")
def test_a_killed_worker_stops_the_run_with_one_line_and_a_rerun_finishes_it(tmp_path, vocab_file):
    """multiprocessing.Pool waited forever for a dead worker's shard."""
    import signal
    import subprocess
    import sys
    import time

    corpus = write_corpus(tmp_path / "corpus.txt", 1500, seed=3)
    args = [sys.executable, "-m", "tools.create_pretraining_data",
            *scalable_args(corpus, tmp_path / "out" / "data", vocab_file)]
    args[args.index("--num_workers=1")] = "--num_workers=2"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    process = subprocess.Popen(args, cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    workers = []
    while not workers:
        assert process.poll() is None and time.time() < deadline, "no worker started"
        workers = [pid for pid in _children(process.pid)
                   if "multiprocessing" in _cmdline(pid) and "resource_tracker" not in _cmdline(pid)]
        time.sleep(0.05)
    os.kill(workers[0], signal.SIGKILL)
    _, stderr = process.communicate(timeout=120)
    lines = stderr.strip().splitlines()
    assert process.returncode == 1 and len(lines) == 1, stderr
    assert "a worker process died while writing it" in lines[0]

    rerun = subprocess.run(args, cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    straight = subprocess.run([a.replace(str(tmp_path / "out"), str(tmp_path / "straight")) for a in args],
                              cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert straight.returncode == 0, straight.stderr
    for path in shard_files(tmp_path / "out" / "data"):
        assert open(path, "rb").read() == open(path.replace(str(tmp_path / "out"), str(tmp_path / "straight")), "rb").read()
    assert not [name for name in os.listdir(tmp_path / "out") if "partial" in name or name.endswith(".lock")]


def test_plain_rerun_removes_a_killed_runs_partial_file(tmp_path, vocab_file, capsys):
    corpus = write_corpus(tmp_path / "corpus.txt", 20)
    output = tmp_path / "plain.tfrecord"
    leftover = tmp_path / "plain.tfrecord.partial-999999-0abc1234"  # as kill -9 leaves it
    leftover.write_bytes(b"half a file")
    code, err = run([f"--input_file={corpus}", f"--output_file={output}", f"--vocab_file={vocab_file}"], capsys)
    assert code == 0, err
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "plain.tfrecord", "vocab.txt"]


@pytest.mark.parametrize("flags, fragment", [
    (["--output_file={out}/a.tfrecord,{out}/./a.tfrecord"], "names {out}/./a.tfrecord twice"),
    (["--output_file=,"], "--output_file ',' names no file"),
    (["--output_file={out}/x", "--scalable", "--chunk_mb=nan"], "--chunk_mb must be a finite size"),
    (["--output_file={out}/x", "--scalable", "--chunk_mb=0.0000001"], "--chunk_mb must be a finite size of at least one byte"),
    # Named before any work (was: "File exists" once every instance was made).
    (["--output_file={out}/a.tfrecord,{corpus}/b.tfrecord"], "--output_file's directory {corpus}: is a file"),
    (["--output_file={corpus}/shards", "--scalable"], "--output_file's directory {corpus}: is a file"),
])
def test_output_and_chunk_flags_are_one_line(tmp_path, vocab_file, capsys, flags, fragment):
    corpus = write_corpus(tmp_path / "corpus.txt", 5)
    out = tmp_path / "out"
    flags = [f.format(out=out, corpus=corpus) for f in flags]
    code, err = run([f"--input_file={corpus}", f"--vocab_file={vocab_file}"] + flags, capsys)
    assert code in (1, 2) and len(err.strip().splitlines()) == 1 and fragment.format(out=out, corpus=corpus) in err, err
    assert not out.exists() or not os.listdir(out)


def test_shards_of_a_longer_prefix_are_not_taken_for_this_ones(tmp_path, vocab_file, capsys):
    """`wiki-2019-00000-of-00004` is a shard of the prefix `wiki-2019`, not of `wiki`."""
    corpus = write_corpus(tmp_path / "corpus.txt", 40)
    code, err = run(scalable_args(corpus, tmp_path / "wiki-2019", vocab_file), capsys)
    assert code == 0, err
    code, err = run(scalable_args(corpus, tmp_path / "wiki", vocab_file), capsys)
    assert code == 0, err
    for prefix in ("wiki", "wiki-2019"):
        assert all(os.path.exists(path) for path in shard_files(tmp_path / prefix))
    # Another --num_shards of the same prefix is still refused.
    code, err = run(scalable_args(corpus, tmp_path / "wiki", vocab_file, "--num_shards=2"), capsys)
    assert code == 1 and "wiki-00000-of-00004: 4 shard(s) of another --num_shards are there" in err, err


def test_a_run_stopped_by_bad_input_restarts_once_the_input_is_fixed(tmp_path, vocab_file, capsys):
    """The run stops at a line that is not UTF-8 with some shards finished.
    Their set is refused as training input; after the file is fixed, the
    rerun (other inputs, so another manifest) starts over instead of being
    refused, and writes the shards an uninterrupted run writes."""
    from keras_bert_impl.data.pretraining_dataset import check_pretraining_files
    from keras_bert_impl.errors import InputFileError

    corpus = write_corpus(tmp_path / "corpus.txt", 190)
    good = corpus.read_bytes()
    corpus.write_bytes(good + b"\nbad \xff line.\n")
    prefix = tmp_path / "out" / "data"
    code, err = run(scalable_args(corpus, prefix, vocab_file), capsys)
    assert code == 1 and "not valid UTF-8" in err, err
    finished = [path for path in shard_files(prefix) if os.path.exists(path)]
    assert 0 < len(finished) < NUM_SHARDS
    with pytest.raises(InputFileError, match=rf"the run writing its shards has not finished \({len(finished)} of {NUM_SHARDS} done"):
        check_pretraining_files(finished, 64, 8)

    corpus.write_bytes(good)
    code, err = run(scalable_args(corpus, prefix, vocab_file), capsys)
    assert code == 0, err
    assert f"an earlier run with other settings or inputs did not finish; removing its {len(finished)} shard(s)" in err
    code, err = run(scalable_args(corpus, tmp_path / "straight" / "data", vocab_file), capsys)
    assert code == 0, err
    for path in shard_files(prefix):
        assert open(path, "rb").read() == open(str(path).replace("/out/", "/straight/"), "rb").read()
    assert check_pretraining_files(shard_files(prefix), 64, 8) > 0  # A finished set reads.


def test_a_directory_as_input_is_named_as_such(tmp_path, vocab_file, capsys):
    (tmp_path / "texts").mkdir()
    write_corpus(tmp_path / "texts" / "a.txt", 5)
    code, err = run(scalable_args(tmp_path / "texts", tmp_path / "out" / "data", vocab_file), capsys)
    assert code == 1 and f"{tmp_path / 'texts'}: is a directory, not a text file" in err, err
