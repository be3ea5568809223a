"""TFRecord files: written under a temporary name, read back, found by pattern.

`TFRecordFileWriter` frames records (`tfrecord_format.frame_records`) into a
file under a temporary name, renamed only when complete, so a killed writer
never leaves a finished-looking file; `read_records` reads them back. Both
take the file operations as an object (`AnyFileSystem`: any path that
`keras_bert_impl.filesystem` opens), and neither imports TensorFlow for a
local path.

The sharded generator keeps a manifest beside its shards
(`{output_prefix}.manifest.json`); `resolve_input_files` skips it and the
temporary files of unfinished shards, and `check_shard_sets_finished` refuses
the shards of a run that has not finished.
"""

import glob
import gzip
import json
import os
import re

from keras_bert_impl import filesystem
from keras_bert_impl.data.tfrecord_format import frame_records
from keras_bert_impl.errors import InputFileError
from keras_bert_impl.io import PARTIAL_MARK, temporary_path

GZIP = "GZIP"
# The first bytes of a gzip file.
GZIP_MAGIC = b"\x1f\x8b"
_RECORDS_PER_BATCH = 512


class AnyFileSystem:
    """The five file operations the writers and readers need, on any path.

    Through `keras_bert_impl.filesystem`: local paths with the standard
    library (a worker writing local shards never imports TensorFlow), `gs://`,
    `s3://`, `hdfs://`, `ram://` through `tf.io.gfile`. Another object with
    the same five methods can be injected where a test needs one.
    """

    @staticmethod
    def open(path):
        return filesystem.open_file(path, "rb")

    @staticmethod
    def create(path):
        directory = filesystem.dirname(path)
        if directory:
            filesystem.makedirs(directory)
        return filesystem.open_file(path, "wb")

    @staticmethod
    def rename(source, destination):
        filesystem.rename(source, destination)

    @staticmethod
    def delete(path):
        filesystem.remove(path, missing_ok=True)

    @staticmethod
    def exists(path):
        return filesystem.exists(path)


class TFRecordFileWriter:
    """Writes records to a TFRecord file, under a temporary name until `close()`.

    On an exception inside `with`, or on `abort()`, the temporary file is
    removed and nothing appears under `path`.

    Args:
        path: Final file name.
        compression: None, or "GZIP".
        filesystem: `AnyFileSystem`, or an object with its methods.

    Example:
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "a.tfrecord")
    >>> with TFRecordFileWriter(path) as writer:
    ...     writer.write(b"hello")
    >>> list(read_records(path))
    [b'hello']
    """

    def __init__(self, path, compression=None, filesystem=AnyFileSystem):
        if compression not in (None, "", GZIP):
            raise ValueError(f"compression must be None or {GZIP!r}, got {compression!r}")
        self.path = path
        self.records_written = 0
        self._filesystem = filesystem
        self._temporary = temporary_path(path)
        self._raw = filesystem.create(self._temporary)
        # mtime=0 and no name in the header: the same records give the same bytes.
        self._file = (
            gzip.GzipFile(filename="", mode="wb", fileobj=self._raw, mtime=0) if compression == GZIP else self._raw
        )
        self._pending = []
        self.published = False

    def write(self, record):
        self._pending.append(record)
        if len(self._pending) >= _RECORDS_PER_BATCH:
            self.flush()

    def flush(self):
        if self._pending:
            self._file.write(frame_records(self._pending))
            self.records_written += len(self._pending)
            self._pending = []

    def close(self):
        """Writes what is pending and gives the file its final name."""
        self.finish()
        self.publish()

    def finish(self):
        """Writes what is pending and closes the file, still under its temporary name."""
        self.flush()
        if self._file is not self._raw:
            self._file.close()
        self._raw.close()

    def publish(self):
        """Gives the finished file its final name (several writers can finish all, then publish all)."""
        self._filesystem.rename(self._temporary, self.path)
        self.published = True

    def abort(self):
        """Removes the temporary file; `path` is left as it was (after `publish`, nothing is left to remove)."""
        if self.published:
            return
        try:
            self._raw.close()
        finally:
            self._filesystem.delete(self._temporary)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is None:
            self.close()
        else:
            self.abort()


def read_records(path, filesystem=AnyFileSystem):
    """Records of a TFRecord file (plain or gzip), without TensorFlow or CRC checks.

    Raises:
        InputFileError: the file ends inside a record.
    """
    with filesystem.open(path) as raw:
        compressed = raw.read(2) == GZIP_MAGIC
        raw.seek(0)
        reader = gzip.GzipFile(fileobj=raw, mode="rb") if compressed else raw
        while True:
            header = reader.read(12)
            if not header:
                return
            length = int.from_bytes(header[:8], "little")
            data = reader.read(length + 4)
            if len(header) < 12 or len(data) < length + 4:
                raise InputFileError(f"{path}: truncated TFRecord file")
            yield data[:length]


# ----------------------------------------------------------------------------
# Input files, and the sharded generator's manifests.
# ----------------------------------------------------------------------------


# The sharded generator's record of finished shards, `{output_prefix}.manifest.json`.
MANIFEST_SUFFIX = ".manifest.json"


def is_data_file(path):
    """False for the generator's own files: a manifest, or a shard still being written."""
    return not path.endswith(MANIFEST_SUFFIX) and PARTIAL_MARK not in filesystem.basename(path)


def resolve_input_files(patterns):
    """Files named by a comma list of paths and globs, in the original's order.

    Like the original (`tf.gfile.Glob` per pattern), matches keep the
    directory's listing order. Remote patterns (gs://...) go through
    `tf.io.gfile`. A glob skips the generator's manifest and the temporary
    files of unfinished shards (`is_data_file`), so `data/train.tfrecord*`
    names the shards of `--output_file=data/train.tfrecord`; a path named
    as it is is taken as it is.

    Raises:
        InputFileError: a pattern matches nothing.
    """
    files = []
    for pattern in (p.strip() for p in str(patterns).split(",")):
        if not pattern:
            continue
        if "://" in pattern:
            import tensorflow as tf  # Only remote patterns pay for TensorFlow.

            matches = [path for path in tf.io.gfile.glob(pattern) if is_data_file(path)]
        elif any(char in pattern for char in "*?["):
            matches = [path for path in glob.glob(pattern) if is_data_file(path)]
        else:
            matches = [pattern] if os.path.exists(pattern) else []
        if not matches:
            raise InputFileError(f"{pattern}: no such input file")
        files += matches
    if not files:
        raise InputFileError(f"no input files in {patterns!r}")
    return files


# A shard's name, `{prefix}-00003-of-00016`.
_SHARD_NAME = re.compile(r"^(?P<prefix>.+)-\d+-of-(?P<count>\d+)$")


def manifest_progress(manifest):
    """`(shards done, shards in the run)` of a sharded run's manifest.

    Raises:
        KeyError, TypeError, ValueError: not a manifest of that form.
    """
    return len(manifest["shards"]), int(manifest["settings"]["num_shards"])


def check_shard_sets_finished(files):
    """Refuses shards whose generator run has not finished.

    `--scalable` keeps each shard it finishes under its final name (a rerun
    keeps it), and its manifest records which are done. Where a manifest
    beside a shard lists fewer shards than its run makes, the set is not a
    dataset yet: the run is going on, or failed and waits for a rerun.

    Args:
        files: Input file paths; those named like shards are checked.

    Raises:
        InputFileError: naming a shard, the manifest and how many are done.
    """
    checked = set()
    for path in files:
        match = _SHARD_NAME.match(filesystem.basename(path))
        if not match:
            continue
        manifest_path = filesystem.join(filesystem.dirname(path), match["prefix"]) + MANIFEST_SUFFIX
        if manifest_path in checked:
            continue
        checked.add(manifest_path)
        try:
            with filesystem.open_file(manifest_path) as f:
                manifest = json.load(f)
            done, total = manifest_progress(manifest)
        except FileNotFoundError:
            continue  # Shards from elsewhere.
        except (OSError, ValueError, KeyError, TypeError):
            raise InputFileError(f"{path}: its manifest {manifest_path} cannot be read; rerun "
                                 "bert-create-pretraining-data with the same flags") from None
        if done < total:
            raise InputFileError(
                f"{path}: the run writing its shards has not finished ({done} of {total} done, "
                f"{manifest_path}); let it end, or rerun bert-create-pretraining-data with the same flags"
            )
