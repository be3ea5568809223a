"""Pretraining data from text files to TFRecords, in two modes.

`write_original_order`: the original `create_pretraining_data.py`, example for
example (same documents, pairs, masks, order and round-robin over the output
files). It must hold the whole corpus's documents, as the original does, but
keeps the instances as encoded bytes in an unlinked temporary file instead of
Python objects, and needs no TensorFlow (but for a variant's tokenizer, which runs on it).

`write_sharded`: the same instance making, streamed. Each input file is cut
into chunks of about `chunk_bytes` at document boundaries (smaller ones when
that would leave shards without a chunk); a chunk is made into instances on its
own (random next sentences and duplicates come from the same chunk, and its
instances are shuffled together), with a generator seeded by the seed and the
chunk's index; chunk c goes to shard c mod num_shards (`shard_layout`, which
the Beam pipeline shares). Memory is bounded by one chunk per worker whatever
the corpus size; the output depends on the seed, the inputs and the shard
layout (chunk size, shard count), not on the number of workers.

Shards are written under temporary names and renamed when complete; a manifest
next to them records the settings and, per finished shard, its counts, byte
size and SHA-256. A rerun keeps the finished shards whose file still has that
size and checksum, and writes the others again (the same bytes).
"""

import array
import concurrent.futures
import dataclasses
import hashlib
import heapq
import json
import multiprocessing
import os
import queue
import random
import re
import tempfile
import time

from keras_bert_impl import filesystem
from keras_bert_impl.data.pretraining_instances import (
    InstanceVocab,
    ReadCounts,
    VariantLineTokenizer,
    add_documents,
    create_training_instances,
    read_lines,
    shuffle,
)
from keras_bert_impl.data.tfrecord_files import (
    MANIFEST_SUFFIX,
    AnyFileSystem,
    TFRecordFileWriter,
    is_data_file,
    manifest_progress,
)
from keras_bert_impl.data.tfrecord_format import ExampleEncoder
from keras_bert_impl.errors import BertError, InputFileError
from keras_bert_impl.io import remove_partials, write_text_atomically
from keras_bert_impl.tokenization import FullTokenizer


class OutputConflictError(BertError, ValueError):
    """The output location holds shards made with other settings."""


class WorkerDiedError(BertError, RuntimeError):
    """A worker process of the sharded mode died before finishing its shard."""


@dataclasses.dataclass(frozen=True)
class GenerationSettings:
    """Everything that decides the instances, except the inputs and the layout.

    Attributes:
        vocab: token -> id mapping (`load_vocab`); it travels to the workers.
        vocab_file: Where `vocab` came from, for messages.
        do_lower_case: Tokenizer casing (WordPiece, SentencePiece).
        options: `InstanceOptions`.
        random_seed: The original's `--random_seed`.
        compression: None or "GZIP".
        use_v2_feature_names: tf-models' `input_word_ids` / `input_type_ids`.
        skip_invalid_utf8: Skip (and count) undecodable lines instead of failing.
        tokenizer_files: None for WordPiece (`vocab`); for a variant's
            tokenizer, `tokenization.from_files.read_vocab_file`'s dict
            (RoBERTa's `vocab.json` + `merges.txt`, ALBERT's `spiece.model`),
            which travels to the workers in its place.
    """

    vocab: dict
    vocab_file: str
    do_lower_case: bool
    options: object
    random_seed: int = 12345
    compression: str = None
    use_v2_feature_names: bool = False
    skip_invalid_utf8: bool = False
    tokenizer_files: dict = None

    def fingerprint(self):
        """A JSON-able summary that changes whenever the output would."""
        if self.tokenizer_files is not None:
            tokens = json.dumps(self.tokenizer_files, sort_keys=True).encode("utf-8")
        else:
            tokens = "\n".join(self.vocab).encode("utf-8")
        return {
            "vocab_sha256": hashlib.sha256(tokens).hexdigest(),
            "do_lower_case": self.do_lower_case,
            "options": _options_fingerprint(self.options),
            "random_seed": self.random_seed,
            "compression": self.compression,
            "use_v2_feature_names": self.use_v2_feature_names,
            "skip_invalid_utf8": self.skip_invalid_utf8,
        }


# The variants' options, left out of a fingerprint at their defaults so that a
# manifest written before they existed still matches.
_VARIANT_OPTIONS = {
    "sentence_order_prediction": False,
    "full_sentences": False,
    "dynamic_masking": False,
    "ngram": 1,
    "favor_shorter_ngram": True,
}


def _options_fingerprint(options):
    values = dataclasses.asdict(options)
    for name, default in _VARIANT_OPTIONS.items():
        if values.get(name) == default:
            del values[name]
    return values


def example_encoder(settings, vocab=None):
    """The `ExampleEncoder` of `settings`: without masked-LM features for dynamic masking,
    padding with `vocab`'s pad id (an `InstanceVocab`; WordPiece's 0 without one)."""
    options = settings.options
    return ExampleEncoder(
        options.max_seq_length, options.max_predictions_per_seq, settings.use_v2_feature_names,
        masked_lm=not options.dynamic_masking, pad_id=vocab.pad_id if vocab is not None else 0,
    )


def instance_tokenizer(settings):
    """What turns `settings`' lines into ids, and the `InstanceVocab` of those ids.

    WordPiece: the original's `FullTokenizer`; a variant's files
    (`settings.tokenizer_files`): its Python tokenizer, as
    `VariantLineTokenizer`.

    Returns:
        `(tokenizer for add_documents, InstanceVocab)`.

    Raises:
        VocabError: the vocabulary lacks a special token, naming `settings.vocab_file`.
        ValueError: `settings.options` leave no room for a pair in this layout.
    """
    files = settings.tokenizer_files
    if files is None:
        vocab = InstanceVocab.from_vocab(settings.vocab, settings.vocab_file)
        tokenizer = FullTokenizer.from_vocab(settings.vocab, do_lower_case=settings.do_lower_case)
    else:
        from keras_bert_impl.tokenization.from_files import python_tokenizer

        vocab = InstanceVocab.from_tokenizer_files(files, settings.vocab_file)
        tokenizer = VariantLineTokenizer(python_tokenizer(files, do_lower_case=settings.do_lower_case))
    vocab.check_options(settings.options)
    return tokenizer, vocab


@dataclasses.dataclass
class PretrainingDataStats:
    """Counts for the end-of-run summary.

    Attributes:
        documents: Non-empty documents read.
        instances: Instances written.
        tokens: Real (unpadded) tokens in them, [CLS]/[SEP] included.
        masked: Masked-LM predictions in them.
        random_next: Instances of pair label 1 (B a random next sentence,
            or with sentence-order prediction, A and B swapped).
        skipped_lines: Lines skipped as invalid UTF-8.
    """

    documents: int = 0
    instances: int = 0
    tokens: int = 0
    masked: int = 0
    random_next: int = 0
    skipped_lines: int = 0

    def add_instance(self, instance):
        self.instances += 1
        self.tokens += len(instance.input_ids)
        self.masked += len(instance.masked_lm_positions)
        self.random_next += instance.is_random_next

    def __iadd__(self, other):
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))
        return self

    def summary(self):
        masked = self.masked / self.tokens if self.tokens else 0.0
        random_next = self.random_next / self.instances if self.instances else 0.0
        text = (
            f"{self.documents:,} documents, {self.instances:,} instances, {self.tokens:,} tokens, "
            f"{masked:.1%} of tokens masked, {random_next:.1%} random next"
        )
        if self.skipped_lines:
            text += f", {self.skipped_lines:,} invalid UTF-8 lines skipped"
        return text


def file_sha256(path, filesystem=AnyFileSystem):
    """Reads `path` once and returns `(size in bytes, hex SHA-256)`.

    SHA-256 rather than CRC32C: hashlib's is in C, while the only CRC32C at
    hand (tfrecord_format's numpy tables) is made for short records.

    Args:
        path: The file.
        filesystem: `AnyFileSystem`, or an object with its methods.
    """
    digest = hashlib.sha256()
    size = 0
    with filesystem.open(path) as f:
        while block := f.read(1 << 20):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


@dataclasses.dataclass(frozen=True)
class FinishedShard:
    """A finished shard as the manifest records it.

    Attributes:
        stats: `PretrainingDataStats` of its instances.
        size: The file's size in bytes.
        sha256: The file's hex SHA-256.
    """

    stats: PretrainingDataStats
    size: int
    sha256: str

    @classmethod
    def of_file(cls, path, stats, filesystem=AnyFileSystem):
        """The record of the complete file `path` holding instances counted in `stats`."""
        size, sha256 = file_sha256(path, filesystem)
        return cls(stats, size, sha256)

    def to_json(self):
        return {"stats": dataclasses.asdict(self.stats), "size": self.size, "sha256": self.sha256}

    @classmethod
    def from_json(cls, entry):
        """Inverse of `to_json`.

        Raises:
            KeyError, TypeError, ValueError: `entry` is not such a record.
        """
        return cls(PretrainingDataStats(**entry["stats"]), int(entry["size"]), str(entry["sha256"]))

    def problem(self, path):
        """Why the file at `path` is not this shard ("size 10 != recorded 12"), or None.

        The size is compared first, so that a truncated shard costs no read.
        """
        if not filesystem.isfile(path):
            return "missing"
        size = filesystem.getsize(path)
        if size != self.size:
            return f"size {size} != recorded {self.size}"
        if file_sha256(path)[1] != self.sha256:
            return "checksum mismatch (SHA-256)"
        return None


def empty_shards_warning(shard_stats):
    """A message naming the shards without instances, or None when there are none.

    Args:
        shard_stats: `{shard file name: PretrainingDataStats}` of every shard.
    """
    empty = sorted(name for name, stats in shard_stats.items() if not stats.instances)
    if not empty:
        return None
    documents = sum(stats.documents for stats in shard_stats.values())
    names = ", ".join(empty[:3]) + (f" and {len(empty) - 3} more" if len(empty) > 3 else "")
    return (
        f"warning: {len(empty)} of {len(shard_stats)} shards hold no instances ({names}): "
        f"the input has {documents:,} document(s) and a document is never split across shards; "
        "use fewer --num_shards"
    )


class Progress:
    """A one-line progress display on a stream: documents, instances, instances/s.

    Args:
        stream: Where to draw (e.g. `sys.stderr`), or None for no display.
        total_shards: Shown as "shards k/n" when given.
    """

    def __init__(self, stream=None, total_shards=None):
        self.stream = stream
        self.total_shards = total_shards
        self.shards_done = 0
        self.documents = 0
        self.instances = 0
        self._start = time.perf_counter()
        self._drawn = 0.0
        self._interactive = bool(stream) and stream.isatty()

    def update(self, documents=0, instances=0, shards=0):
        self.documents += documents
        self.instances += instances
        self.shards_done += shards
        now = time.perf_counter()
        # A terminal gets redrawn often; a log file a line every 30 s.
        if self.stream and now - self._drawn >= (0.5 if self._interactive else 30.0):
            self._drawn = now
            self._draw(end="\r" if self._interactive else "\n")

    def _draw(self, end):
        elapsed = max(time.perf_counter() - self._start, 1e-9)
        text = f"{self.documents:,} documents | {self.instances:,} instances | {self.instances / elapsed:,.0f} instances/s"
        if self.total_shards:
            filled = round(20 * self.shards_done / self.total_shards)
            text = f"[{'#' * filled}{'.' * (20 - filled)}] shards {self.shards_done}/{self.total_shards} | {text}"
        self.stream.write(text + end)
        self.stream.flush()

    def close(self):
        if self.stream:
            self._draw(end="\n")


# ----------------------------------------------------------------------------
# The original's order.
# ----------------------------------------------------------------------------


class _RecordSpill:
    """Encoded records appended to an unlinked temporary file, read back by index."""

    def __init__(self, directory):
        self._file = tempfile.TemporaryFile(dir=directory, prefix=".pretraining-spill-")
        self._offsets = array.array("q")
        self._lengths = array.array("q")
        self._size = 0
        self._pending = []

    def __len__(self):
        return len(self._offsets)

    def append(self, record):
        self._offsets.append(self._size)
        self._lengths.append(len(record))
        self._size += len(record)
        self._pending.append(record)
        if len(self._pending) >= 4096:
            self._flush()

    def _flush(self):
        self._file.write(b"".join(self._pending))
        self._pending = []

    def __getitem__(self, index):
        if self._pending:
            self._flush()
            self._file.flush()
        return os.pread(self._file.fileno(), self._lengths[index], self._offsets[index])

    def close(self):
        self._file.close()


def write_original_order(input_files, output_files, settings, progress=None):
    """Writes the original `create_pretraining_data.py`'s examples, in its order.

    Documents continue across input files (the original starts a new one only
    at a blank line), empty documents are dropped, the rest shuffled; instances
    are made `dupe_factor` times over, shuffled, and written round-robin to
    `output_files`.

    Args:
        input_files: Text files, one sentence per line, blank lines between documents.
        output_files: TFRecord files, written round-robin.
        settings: `GenerationSettings`.
        progress: Optional `Progress`.

    Returns:
        `PretrainingDataStats`.

    Raises:
        InputFileError: a missing or undecodable input, or no text at all.
        VocabError: the vocabulary lacks [UNK], [CLS], [SEP] or [MASK] (or
            a variant's special tokens).
    """
    tokenizer, vocab = instance_tokenizer(settings)
    progress = progress or Progress()
    counts = ReadCounts()
    documents = [[]]
    for path in input_files:
        before = len(documents)
        add_documents(documents, read_lines(path, settings.skip_invalid_utf8, counts), tokenizer)
        progress.update(documents=len(documents) - before)
    documents = [document for document in documents if document]
    if not documents:
        raise InputFileError(f"{', '.join(input_files)}: no text to make instances of (empty or blank lines only)")

    stats = PretrainingDataStats(documents=len(documents), skipped_lines=counts.skipped_lines)
    encoder = example_encoder(settings, vocab)
    rng = random.Random(settings.random_seed)
    filesystem.makedirs_for(output_files[0])
    # The spill is an unlinked local file: next to a local output, in the
    # system's temporary directory for a remote one.
    local_output = not filesystem.is_remote(output_files[0])
    spill = _RecordSpill(os.path.dirname(os.path.abspath(output_files[0])) if local_output else None)
    try:
        for instance in create_training_instances(documents, settings.options, vocab, rng):
            spill.append(encoder.encode(instance))
            stats.add_instance(instance)
            if stats.instances % 4096 == 0:
                progress.update(instances=4096)
        progress.update(instances=stats.instances % 4096)
        del documents
        # The original shuffles its instance list; shuffling their indexes
        # draws the same numbers (a shuffle's draws depend only on the length).
        order = array.array("q", range(len(spill)))
        shuffle(rng, order)
        writers = []
        try:
            for path in output_files:
                writers.append(TFRecordFileWriter(path, settings.compression))
            for position, index in enumerate(order):
                writers[position % len(writers)].write(spill[index])
            for writer in writers:  # Every file complete (a full disk shows here) ...
                writer.finish()
            for writer in writers:  # ... before any takes its name.
                writer.publish()
        except BaseException:
            for writer in writers:
                writer.abort()
            # Outputs already renamed go too: a run that failed leaves none of
            # its files beside an earlier run's (or missing) others.
            for writer in writers:
                if writer.published:
                    AnyFileSystem.delete(writer.path)
            raise
    finally:
        spill.close()
    return stats


# ----------------------------------------------------------------------------
# Streaming and sharded.
# ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Chunk:
    """Bytes [start, end) of `path`, widened to whole documents when read."""

    path: str
    start: int
    end: int


def plan_chunks(files_and_sizes, chunk_bytes, min_chunks=1):
    """Cuts each file into pieces of about `chunk_bytes` (at least one per non-empty file).

    A piece is a byte range; reading it widens it to whole documents
    (`read_lines`), so the cuts fall at document boundaries. When pieces of
    `chunk_bytes` would number fewer than `min_chunks` (a corpus smaller than
    about `min_chunks` x `chunk_bytes`), `min_chunks` smaller pieces are shared
    out over the files by size instead, so that each shard gets some input.

    Args:
        files_and_sizes: `(path, size in bytes)` pairs, in order.
        chunk_bytes: Target piece size.
        min_chunks: The fewest pieces wanted (the shard count); fewer only when
            the files hold fewer bytes.

    Returns:
        List of `Chunk`; its index is the chunk's identity (seed, shard).
    """
    files = [(path, size) for path, size in files_and_sizes if size > 0]
    pieces = [max(1, round(size / chunk_bytes)) for _, size in files]
    if sum(pieces) < min_chunks:
        pieces = _share_out([size for _, size in files], min_chunks)
    chunks = []
    for (path, size), count in zip(files, pieces):
        bounds = [size * k // count for k in range(count + 1)]
        chunks += [Chunk(path, start, end) for start, end in zip(bounds, bounds[1:])]
    return chunks


def _share_out(sizes, total):
    """Pieces per file, `total` in all (or one per byte if fewer): one each to
    start, then each next one to the file whose pieces are largest (the earlier
    file on a tie), so the pieces come out about equal."""
    pieces = [1] * len(sizes)
    # Heap of (-bytes per piece, file index): largest pieces first.
    heap = [(-size, index) for index, size in enumerate(sizes) if size > 1]
    heapq.heapify(heap)
    for _ in range(total - len(sizes)):
        if not heap:
            break
        _, index = heapq.heappop(heap)
        pieces[index] += 1
        if pieces[index] < sizes[index]:
            heapq.heappush(heap, (-sizes[index] / pieces[index], index))
    return pieces


def check_no_other_shards(output_prefix, paths, manifest, fingerprint):
    """Refuses an output prefix that holds shards this run would not replace.

    Shards of another `--num_shards` would stay beside the new ones and match
    the same `{prefix}*` glob; shards of this layout made with other settings
    or inputs (the manifest's `fingerprint` differs) would be mixed with new
    ones by a run that stops early.

    Args:
        output_prefix: The run's `--output_file`.
        paths: The shard paths this run writes.
        manifest: The manifest found there (a dict), or None.
        fingerprint: This run's settings, as its manifest records them.

    Raises:
        OutputConflictError: naming a shard in the way.
    """
    pattern = filesystem.escape_glob(output_prefix) + "-[0-9]*-of-[0-9]*"
    # The glob's `*` matches any text (`wiki-2019-00000-of-00002` for the
    # prefix `wiki`): only digits may follow the prefix's own name.
    shard_name = re.compile(re.escape(filesystem.basename(output_prefix)) + r"-\d+-of-\d+$")
    ours = set(paths)
    others = sorted(
        path for path in filesystem.glob(pattern)
        if shard_name.match(filesystem.basename(path)) and is_data_file(path) and path not in ours
    )
    if others:
        raise OutputConflictError(
            f"{others[0]}: {len(others)} shard(s) of another --num_shards are there; "
            "remove them or choose another --output_file"
        )
    if manifest is not None and manifest.get("settings") != fingerprint and any(map(filesystem.exists, paths)):
        raise OutputConflictError(
            f"{output_prefix + MANIFEST_SUFFIX}: the shards there were made with other settings or inputs; "
            "remove them or choose another --output_file"
        )


def shard_paths(output_prefix, num_shards):
    """`{prefix}-00000-of-00008` ... (TensorFlow's sharded-file naming)."""
    return [f"{output_prefix}-{index:05d}-of-{num_shards:05d}" for index in range(num_shards)]


class ShardWriter:
    """Makes and writes whole shards; one per worker process (or Beam worker).

    Args:
        settings: `GenerationSettings`.
        filesystem: `AnyFileSystem`, or an object with its methods.
    """

    def __init__(self, settings, filesystem=AnyFileSystem):
        self.settings = settings
        self.filesystem = filesystem
        self.tokenizer, self.vocab = instance_tokenizer(settings)
        self.encoder = example_encoder(settings, self.vocab)

    def write(self, path, indexed_chunks, on_chunk=None):
        """Writes the instances of `indexed_chunks` to `path` (complete or not at all).

        Args:
            path: The shard's file.
            indexed_chunks: `(chunk index, Chunk)` pairs, in order.
            on_chunk: Optional callable(documents, instances) after each chunk.

        Returns:
            `FinishedShard`: the shard's counts, and its size and checksum as
            read back from `path`.
        """
        stats = PretrainingDataStats()
        with TFRecordFileWriter(path, self.settings.compression, self.filesystem) as writer:
            for chunk_index, chunk in indexed_chunks:
                chunk_stats = self._write_chunk(writer, chunk_index, chunk)
                stats += chunk_stats
                if on_chunk:
                    on_chunk(chunk_stats.documents, chunk_stats.instances)
        return FinishedShard.of_file(path, stats, self.filesystem)

    def _write_chunk(self, writer, chunk_index, chunk):
        """Makes one chunk's instances, shuffles them together and writes them."""
        settings = self.settings
        counts = ReadCounts()
        lines = read_lines(
            chunk.path, settings.skip_invalid_utf8, counts, (chunk.start, chunk.end), self.filesystem.open
        )
        documents = add_documents([[]], lines, self.tokenizer)
        stats = PretrainingDataStats(
            documents=sum(1 for document in documents if document), skipped_lines=counts.skipped_lines
        )
        # A string seed is hashed with SHA-512: the same in every process and run.
        rng = random.Random(f"{settings.random_seed}:{chunk_index}")
        # One growing buffer rather than a bytes object per record: freed whole
        # after the chunk, so memory does not fragment from chunk to chunk.
        records, ends = bytearray(), array.array("q", [0])
        for instance in create_training_instances(documents, settings.options, self.vocab, rng):
            records += self.encoder.encode(instance)
            ends.append(len(records))
            stats.add_instance(instance)
        del documents
        order = array.array("q", range(len(ends) - 1))
        shuffle(rng, order)
        for index in order:
            writer.write(bytes(records[ends[index] : ends[index + 1]]))
        return stats


def shard_tasks(chunks, paths):
    """`(shard path, [(chunk index, Chunk), ...])` per shard: chunk c to shard c mod n."""
    return [(path, [(c, chunk) for c, chunk in enumerate(chunks) if c % len(paths) == shard]) for shard, path in enumerate(paths)]


def shard_layout(files_and_sizes, output_prefix, num_shards, chunk_bytes):
    """What each shard is made of, for `write_sharded` and the Beam pipeline alike.

    Args:
        files_and_sizes: `(path, size in bytes)` pairs, sorted.
        output_prefix: Shards are `{output_prefix}-00000-of-NNNNN` ...
        num_shards: Number of output files.
        chunk_bytes: Input bytes per chunk, at most.

    Returns:
        `(shard path, [(chunk index, Chunk), ...])` per shard, in shard order.
    """
    chunks = plan_chunks(files_and_sizes, chunk_bytes, min_chunks=num_shards)
    return shard_tasks(chunks, shard_paths(output_prefix, num_shards))


def layout_sha256(tasks):
    """A digest of a `shard_layout`, for the manifest: finished shards are kept
    only for the very layout (chunk bounds and indexes) that made them."""
    layout = [
        [filesystem.basename(path), [[c, chunk.path, chunk.start, chunk.end] for c, chunk in indexed_chunks]]
        for path, indexed_chunks in tasks
    ]
    return hashlib.sha256(json.dumps(layout).encode("utf-8")).hexdigest()


# Per-process state of a worker in the pool: its ShardWriter and progress queue.
_worker = {}


def _start_worker(settings, progress_queue):
    _worker["writer"] = ShardWriter(settings)
    _worker["queue"] = progress_queue


def _write_shard_in_worker(task):
    path, indexed_chunks = task
    report = lambda documents, instances: _worker["queue"].put((documents, instances))  # noqa: E731
    return path, _worker["writer"].write(path, indexed_chunks, report)


def sharded_fingerprint(settings, files_and_sizes, num_shards, chunk_bytes, tasks):
    """What a manifest records of the run that made its shards (both sharded
    modes): settings, inputs (path, size, mtime), layout. A rerun keeps
    finished shards only where it is the same."""
    return dict(
        settings.fingerprint(),
        inputs=[[path, size, int(filesystem.getmtime(path))] for path, size in files_and_sizes],
        num_shards=num_shards,
        chunk_bytes=chunk_bytes,
        layout_sha256=layout_sha256(tasks),
    )


def manifest_finished(manifest):
    """Whether a manifest records every shard of its run."""
    try:
        done, total = manifest_progress(manifest)
    except (KeyError, TypeError, ValueError):
        return False
    return done >= total


def _recorded_shard_paths(output_prefix, manifest):
    """The existing shard files of the layout a manifest's run wrote."""
    try:
        _, total = manifest_progress(manifest)
    except (KeyError, TypeError, ValueError):
        return []
    return [path for path in shard_paths(output_prefix, total) if filesystem.exists(path)]


def read_manifest(path):
    """The manifest at `path` (a dict), or None where there is none or it is unreadable."""
    try:
        with filesystem.open_file(path) as f:
            manifest = json.load(f)
    except FileNotFoundError:
        return None
    except (ValueError, OSError):
        return None  # Unreadable: treat every shard as unfinished.
    if not isinstance(manifest, dict) or not isinstance(manifest.get("shards"), dict):
        return None
    return manifest


def _check_finished_shards(paths, recorded, log):
    """The shards of `paths` that `recorded` (manifest entries) lists and whose
    files match their record; logs why each other listed one does not.

    Returns:
        `({file name: FinishedShard} kept, [paths to write again])`.
    """
    kept, rejected = {}, []
    for path in paths:
        name = filesystem.basename(path)
        if name not in recorded:
            continue
        try:
            shard = FinishedShard.from_json(recorded[name])
        except (KeyError, TypeError, ValueError):
            problem = "no size and checksum recorded"
        else:
            problem = shard.problem(path)
        if problem is None:
            kept[name] = shard
        else:
            log(f"{path}: {problem}; writing it again")
            rejected.append(path)
    return kept, rejected


def _write_manifest(path, manifest):
    write_text_atomically(path, json.dumps(manifest, indent=1, sort_keys=True))


def write_sharded(
    input_files,
    output_prefix,
    settings,
    num_shards,
    num_workers=1,
    chunk_bytes=2 << 20,
    progress_stream=None,
    log=print,
):
    """Streams `input_files` into `num_shards` TFRecord shards using `num_workers` processes.

    Shards already finished by an earlier run with the same settings, inputs
    and layout (recorded in `{output_prefix}.manifest.json`) are kept if their
    file still has the recorded size and SHA-256; a shard whose file is
    missing or differs is written again, with the same bytes, and `log` says
    which and why.

    Args:
        input_files: Text files (one sentence per line, blank lines between
            documents); read in sorted order, each once.
        output_prefix: Shards are `{output_prefix}-00000-of-NNNNN` ...
        settings: `GenerationSettings`.
        num_shards: Number of output files.
        num_workers: Processes making shards (1: this process).
        chunk_bytes: Input bytes per chunk (memory per worker grows with it).
        progress_stream: Where to draw progress (e.g. `sys.stderr`), or None.
        log: Callable(message) for shards written again and for shards left
            without instances (fewer documents than shards).

    Returns:
        `(stats, shard paths, number of shards kept from an earlier run)`.

    Raises:
        InputFileError: missing or undecodable input, or no input text.
        OutputConflictError: the output holds shards made with other settings.
    """
    files_and_sizes = []
    for path in sorted(set(input_files)):  # The same plan whatever order globs list them in.
        if filesystem.isdir(path):
            raise InputFileError(f"{path}: is a directory, not a text file (name its files, or a glob)")
        if not filesystem.isfile(path):
            raise InputFileError(f"{path}: input file not found")
        files_and_sizes.append((path, filesystem.getsize(path)))
    tasks = shard_layout(files_and_sizes, output_prefix, num_shards, chunk_bytes)
    if not any(indexed_chunks for _, indexed_chunks in tasks):
        raise InputFileError(f"{', '.join(input_files)}: input files are empty")
    instance_tokenizer(settings)  # Fail here, not in a worker.
    paths = [path for path, _ in tasks]
    filesystem.makedirs_for(output_prefix)

    manifest_path = output_prefix + MANIFEST_SUFFIX
    fingerprint = sharded_fingerprint(settings, files_and_sizes, num_shards, chunk_bytes, tasks)
    manifest = read_manifest(manifest_path)
    if manifest is not None and manifest.get("settings") != fingerprint and not manifest_finished(manifest):
        # An earlier run with other settings or inputs that did not finish
        # (say, stopped by a bad line now fixed): its shards are no dataset
        # anyone reads (`check_shard_sets_finished`), so this run starts over.
        earlier = _recorded_shard_paths(output_prefix, manifest)
        log(f"{manifest_path}: an earlier run with other settings or inputs did not finish; "
            f"removing its {len(earlier)} shard(s) and starting over")
        for path in earlier:
            AnyFileSystem.delete(path)
        AnyFileSystem.delete(manifest_path)
        manifest = None
    check_no_other_shards(output_prefix, paths, manifest, fingerprint)
    if manifest is not None and manifest.get("settings") != fingerprint:
        manifest = None
    manifest = manifest or {"settings": fingerprint, "shards": {}}
    kept, rejected = _check_finished_shards(paths, manifest["shards"], log)
    manifest["shards"] = {name: shard.to_json() for name, shard in kept.items()}
    _write_manifest(manifest_path, manifest)
    for path in rejected:  # Nothing damaged stays under a shard's name.
        AnyFileSystem.delete(path)

    stats = PretrainingDataStats()
    for shard in kept.values():
        stats += shard.stats
    progress = Progress(progress_stream, total_shards=num_shards)
    progress.update(shards=len(kept))
    pending = [task for task in tasks if filesystem.basename(task[0]) not in kept]

    def finished(path, shard):
        nonlocal stats
        stats += shard.stats
        manifest["shards"][filesystem.basename(path)] = shard.to_json()
        _write_manifest(manifest_path, manifest)
        progress.update(shards=1)

    try:
        for path, indexed_chunks in pending:
            if not indexed_chunks:  # Fewer input bytes than shards: nothing to make.
                TFRecordFileWriter(path, settings.compression).close()
                finished(path, FinishedShard.of_file(path, PretrainingDataStats()))
        pending = [task for task in pending if task[1]]
        if num_workers <= 1 or len(pending) <= 1:
            writer = ShardWriter(settings)
            for path, indexed_chunks in pending:
                finished(path, writer.write(path, indexed_chunks, lambda d, i: progress.update(d, i)))
        else:
            _run_pool(pending, settings, min(num_workers, len(pending)), progress, finished)
    finally:
        for path, _ in pending:
            remove_partials(path)  # Left by a killed worker.
        progress.close()
    if not stats.documents:
        for path in paths + [manifest_path]:
            AnyFileSystem.delete(path)
        raise InputFileError(f"{', '.join(input_files)}: no text to make instances of (blank lines only)")
    warning = empty_shards_warning(
        {name: FinishedShard.from_json(entry).stats for name, entry in manifest["shards"].items()}
    )
    if warning:
        log(warning)
    return stats, paths, len(kept)


def _run_pool(tasks, settings, num_workers, progress, finished):
    """Writes `tasks` in `num_workers` processes, calling `finished(path, shard)` as each ends.

    Raises:
        WorkerDiedError: a worker process died (killed, out of memory): the
            shards finished so far are kept, a rerun writes the others.
    """
    # Fresh interpreters: safe even if this process has started TensorFlow's threads.
    context = multiprocessing.get_context("spawn")
    progress_queue = context.Queue()
    # Unlike multiprocessing.Pool, which waits forever for the task of a
    # worker that died, the executor then fails every pending future.
    executor = concurrent.futures.ProcessPoolExecutor(
        num_workers, mp_context=context, initializer=_start_worker, initargs=(settings, progress_queue)
    )
    try:
        running = {executor.submit(_write_shard_in_worker, task): task[0] for task in tasks}
        while running:
            done, _ = concurrent.futures.wait(running, timeout=0.2, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                path = running.pop(future)
                try:
                    _, shard = future.result()
                except concurrent.futures.process.BrokenProcessPool:
                    raise WorkerDiedError(
                        f"{path}: a worker process died while writing it (killed, or out of memory?); "
                        "the shards finished so far are kept: run again to write the others"
                    ) from None
                finished(path, shard)
            while True:
                try:
                    documents, instances = progress_queue.get_nowait()
                except queue.Empty:
                    break
                progress.update(documents, instances)
    finally:
        # On an error, the other workers stop now rather than finish their shards.
        executor.shutdown(wait=False, cancel_futures=True)
        for process in list((getattr(executor, "_processes", None) or {}).values()):
            process.terminate()
        executor.shutdown(wait=True)
