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
from keras_bert_impl.data.tfrecords import read_records
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
