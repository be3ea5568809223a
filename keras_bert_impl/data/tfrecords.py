"""Pretraining TFRecords: the original feature schema, written without
TensorFlow, and read back with `tf.data` for training.

The original `write_instance_to_example_files` stores one `tf.train.Example`
per instance with int64 `input_ids`, `input_mask`, `segment_ids`
[max_seq_length], `masked_lm_positions`, `masked_lm_ids`
[max_predictions_per_seq], float `masked_lm_weights` [max_predictions_per_seq]
and int64 `next_sentence_labels` [1] (1 = B is a random next sentence), every
list zero-padded. tf-models can name `input_ids` / `segment_ids`
`input_word_ids` / `input_type_ids` instead ("v2" names).

Writing needs no TensorFlow (importing it costs seconds and ~750 MB per
process): examples are encoded as protobuf wire bytes directly, and the TFRecord
framing's CRC-32C is computed for batches of records with NumPy. Every file is
written under a temporary name and renamed only when complete.

Reading checks before it trusts: `check_pretraining_files` names a file that
is not a TFRecord file, whose first record has other feature lengths than the
run expects, or (reading every record once) that is truncated or corrupted;
`reading_input_files` names the files in what tf.data raises later.
"""

import contextlib
import glob
import gzip
import json
import os
import re

import numpy as np

from keras_bert_impl import filesystem
from keras_bert_impl.errors import InputFileError
from keras_bert_impl.io import PARTIAL_MARK, temporary_path

FEATURE_NAMES = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "masked_lm_positions",
    "masked_lm_ids",
    "masked_lm_weights",
    "next_sentence_labels",
)
# tf-models' `--use_v2_feature_names`: original name -> v2 name.
V2_FEATURE_NAMES = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}

GZIP = "GZIP"
_GZIP_MAGIC = b"\x1f\x8b"
_RECORDS_PER_BATCH = 512


# ----------------------------------------------------------------------------
# tf.train.Example wire format.
# ----------------------------------------------------------------------------


def _varint(value):
    """Protobuf base-128 varint of a non-negative int."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# Varints of small values are looked up: token ids and field lengths.
_VARINTS = [_varint(value) for value in range(1 << 15)]


def _field(tag, payload):
    """A length-delimited field: tag byte, varint length, payload."""
    length = len(payload)
    return tag + (_VARINTS[length] if length < len(_VARINTS) else _varint(length)) + payload


class ExampleEncoder:
    """Encodes `TrainingInstance`s as serialized `tf.train.Example`s, padded
    exactly as the original writer pads them.

    The bytes parse to the same features as the original's; only the order of
    the feature map's entries (which protobuf leaves unspecified) may differ.

    Args:
        max_seq_length: Length of `input_ids`, `input_mask`, `segment_ids`.
        max_predictions_per_seq: Length of the three masked-LM lists.
        use_v2_feature_names: Use tf-models' `input_word_ids` / `input_type_ids`.

    Example:
    >>> from keras_bert_impl.data.pretraining_instances import TrainingInstance
    >>> encoder = ExampleEncoder(max_seq_length=8, max_predictions_per_seq=2)
    >>> record = encoder.encode(TrainingInstance([101, 7, 102, 103, 102], 3, [1], [9], True))
    >>> type(record).__name__, record.count(b"input_mask"), record.count(b"next_sentence_labels")
    ('bytes', 1, 1)
    """

    def __init__(self, max_seq_length, max_predictions_per_seq, use_v2_feature_names=False):
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        self.use_v2_feature_names = use_v2_feature_names
        names = {name: name for name in FEATURE_NAMES}
        if use_v2_feature_names:
            names.update(V2_FEATURE_NAMES)
        self._keys = {name: names[name].encode() for name in FEATURE_NAMES}
        # {feature name: {payload length: the entry's bytes before the payload}}
        self._prefixes = {name: {} for name in FEATURE_NAMES}

    def _entry(self, name, payload):
        """One Features.feature map entry (field 1) {key: name, value: Feature}
        whose int64_list (Feature field 3) or float_list (field 2) is `payload`
        packed (list field 1)."""
        prefixes = self._prefixes[name]
        prefix = prefixes.get(len(payload))
        if prefix is None:
            list_tag = b"\x12" if name == "masked_lm_weights" else b"\x1a"
            values = _field(b"\x0a", payload)
            entry = _field(b"\x0a", self._keys[name]) + _field(b"\x12", _field(list_tag, values))
            prefix = prefixes[len(payload)] = _field(b"\x0a", entry)[: -len(payload)]
        return prefix + payload

    def encode(self, instance):
        """Serialized `tf.train.Example` bytes of one `TrainingInstance`."""
        length = len(instance.input_ids)
        pad = self.max_seq_length - length
        num_masked = len(instance.masked_lm_positions)
        pad_masked = self.max_predictions_per_seq - num_masked
        if pad < 0 or pad_masked < 0:
            raise ValueError(
                f"instance of {length} tokens and {num_masked} predictions exceeds max_seq_length "
                f"{self.max_seq_length} or max_predictions_per_seq {self.max_predictions_per_seq}"
            )
        segment_a = instance.segment_a_length
        entry = self._entry
        features = b"".join((
            entry("input_ids", _packed_varints(instance.input_ids) + b"\x00" * pad),
            entry("input_mask", b"\x01" * length + b"\x00" * pad),
            entry("segment_ids", b"\x00" * segment_a + b"\x01" * (length - segment_a) + b"\x00" * pad),
            entry("masked_lm_positions", _packed_varints(instance.masked_lm_positions) + b"\x00" * pad_masked),
            entry("masked_lm_ids", _packed_varints(instance.masked_lm_ids) + b"\x00" * pad_masked),
            # Little-endian float32 1.0 per prediction, then 0.0.
            entry("masked_lm_weights", b"\x00\x00\x80\x3f" * num_masked + b"\x00" * (4 * pad_masked)),
            entry("next_sentence_labels", b"\x01" if instance.is_random_next else b"\x00"),
        ))
        return _field(b"\x0a", features)  # Example.features (field 1)


def _packed_varints(values):
    """Concatenated varints of non-negative ints (a packed repeated int64)."""
    try:
        return b"".join([_VARINTS[value] for value in values])
    except IndexError:
        # Ids beyond the table (vocabularies over 32k tokens): extend it once.
        _VARINTS.extend(_varint(value) for value in range(len(_VARINTS), max(values) + 1))
        return b"".join([_VARINTS[value] for value in values])


# ----------------------------------------------------------------------------
# TFRecord framing: length, masked CRC-32C of it, data, masked CRC-32C of it.
# ----------------------------------------------------------------------------


def _crc32c_tables(max_length):
    """Per-byte CRC-32C (Castagnoli, reflected) tables for batch computation.

    CRC-32C is affine in the message bits. With the message right-aligned, the
    contribution of byte b at distance d from the end is `position[d, b]`
    (CRC of b followed by d zero bytes, zero initial register), and the
    initial/final XOR contribute `offset[length]` (the CRC of `length` zero
    bytes), so crc(m) = XOR_d position[d, m[-1-d]] ^ offset[len(m)].
    """
    byte_table = np.zeros(256, np.uint32)
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        byte_table[byte] = crc
    position = np.empty((max_length, 256), np.uint32)
    position[0] = byte_table
    for distance in range(1, max_length):
        previous = position[distance - 1]
        position[distance] = byte_table[previous & 0xFF] ^ (previous >> 8)
    offset = np.empty(max_length + 1, np.uint32)
    register = 0xFFFFFFFF
    for length in range(max_length + 1):
        offset[length] = register ^ 0xFFFFFFFF
        register = int(byte_table[register & 0xFF]) ^ (register >> 8)
    return position.reshape(-1), offset


# The tables grow to the longest record seen, up to this many bytes (8 MB of
# tables); longer records (only with very long sequences) take a slow path.
_MAX_TABLE_LENGTH = 8192
_crc_tables = {"max_length": 0, "position": None, "offset": None, "bytes": None}


def _crc32c_long(record):
    """CRC-32C of one record longer than the tables, a byte at a time."""
    table = _crc_tables["bytes"]
    crc = 0xFFFFFFFF
    for byte in record:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def crc32c(records):
    """CRC-32C of each of `records` (a list of bytes), as a uint32 array."""
    lengths = np.fromiter(map(len, records), np.int64, len(records))
    longest = int(lengths.max(initial=0))
    if longest > _crc_tables["max_length"] and _crc_tables["max_length"] < _MAX_TABLE_LENGTH:
        size = min(_MAX_TABLE_LENGTH, max(1024, 1 << (longest - 1).bit_length()))
        position, offset = _crc32c_tables(size)
        _crc_tables.update(max_length=size, position=position, offset=offset, bytes=position[:256].tolist())
    if longest > _crc_tables["max_length"]:
        long = lengths > _crc_tables["max_length"]
        crcs = np.zeros(len(records), np.uint32)
        crcs[~long] = crc32c([r for r, is_long in zip(records, long) if not is_long])
        crcs[long] = [_crc32c_long(r) for r, is_long in zip(records, long) if is_long]
        return crcs
    position, offset = _crc_tables["position"], _crc_tables["offset"]
    data = np.frombuffer(b"".join(records), np.uint8)
    ends = np.cumsum(lengths)
    # index of byte k = 256 * (distance from its record's end) + its value
    dtype = np.int32 if data.size < (1 << 23) else np.int64
    index = np.repeat((ends * 256 - 256).astype(dtype), lengths)
    index -= np.arange(0, data.size * 256, 256, dtype=dtype)
    index += data
    contributions = position.take(index)
    crcs = np.zeros(len(records), np.uint32)
    nonempty = lengths > 0
    if data.size:
        crcs[nonempty] = np.bitwise_xor.reduceat(contributions, (ends - lengths)[nonempty])
    return crcs ^ offset[lengths]


def masked_crc32c(records):
    """TFRecord's masked CRC-32C of each record: rotate right 15, add a constant."""
    crc = crc32c(records).astype(np.uint64)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def frame_records(records):
    """The TFRecord file bytes of `records` (uncompressed): per record its
    length (uint64), the length's masked CRC, the data and the data's masked CRC."""
    count = len(records)
    lengths = np.fromiter(map(len, records), "<u8", count).tobytes()
    lengths = [lengths[8 * i : 8 * i + 8] for i in range(count)]
    length_crcs = masked_crc32c(lengths).astype("<u4").tobytes()
    data_crcs = masked_crc32c(records).astype("<u4").tobytes()
    parts = []
    for i, (length, record) in enumerate(zip(lengths, records)):
        parts += (length, length_crcs[4 * i : 4 * i + 4], record, data_crcs[4 * i : 4 * i + 4])
    return b"".join(parts)


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
        compressed = raw.read(2) == _GZIP_MAGIC
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
# Reading for training.
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


def _compression(path):
    """`GZIP` for a gzip file (by its magic bytes), else `""`.

    Raises:
        InputFileError: the file cannot be read.
    """
    import tensorflow as tf

    try:
        with tf.io.gfile.GFile(path, "rb") as reader:
            return GZIP if reader.read(2) == _GZIP_MAGIC else ""
    except tf.errors.OpError as error:
        raise InputFileError(f"{path}: cannot be read ({error.message})") from None


# TensorFlow's DataLossError messages carry op names and graph nodes around
# the part a user needs: what is wrong, and where in the record stream.
_RECORD_DAMAGE = re.compile(r"(truncated|corrupted) record at (\d+)")
_GZIP_DAMAGE = re.compile(r"inflate\(\) failed[^\[\n]*")


def _damage_detail(error):
    """What a `tf.errors.DataLossError` says is wrong, without TensorFlow's op names."""
    message = getattr(error, "message", str(error))
    match = _RECORD_DAMAGE.search(message)
    if match:
        return f"{match.group(1)} record at offset {match.group(2)}"
    match = _GZIP_DAMAGE.search(message)
    return f"gzip stream: {match.group(0).strip()}" if match else "unreadable data"


def _first_record(path, compression):
    """The first record of a TFRecord file as bytes, or None for an empty file.

    Raises:
        InputFileError: the file is not a TFRecord file (or not of
            `compression`), or its first record is damaged.
    """
    import tensorflow as tf

    try:
        first = next(iter(tf.data.TFRecordDataset(path, compression_type=compression).take(1)), None)
    except tf.errors.DataLossError as error:
        detail = _damage_detail(error)
        # A bad header at offset 0: the file never was a TFRecord file.
        what = "not a TFRecord file" if detail == "corrupted record at offset 0" else "truncated or corrupted record"
        raise InputFileError(f"{path}: {what} ({detail})") from None
    return None if first is None else first.numpy()


def detect_record_format(path):
    """`(compression, use_v2_feature_names)` of a pretraining TFRecord file:
    gzip by its magic bytes, v2 names by its first record.

    Raises:
        InputFileError: the file is not a TFRecord file.
    """
    import tensorflow as tf

    compression = _compression(path)
    first = _first_record(path, compression)
    use_v2 = False
    if first is not None:
        names = tf.train.Example.FromString(first).features.feature
        use_v2 = V2_FEATURE_NAMES["input_ids"] in names
    return compression, use_v2


def pretraining_features_spec(max_seq_length, max_predictions_per_seq, use_v2_feature_names=False):
    """The `tf.io.parse_example` spec of the original schema."""
    import tensorflow as tf

    int64 = lambda length: tf.io.FixedLenFeature([length], tf.int64)  # noqa: E731
    spec = {
        "input_ids": int64(max_seq_length),
        "input_mask": int64(max_seq_length),
        "segment_ids": int64(max_seq_length),
        "masked_lm_positions": int64(max_predictions_per_seq),
        "masked_lm_ids": int64(max_predictions_per_seq),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": int64(1),
    }
    if use_v2_feature_names:
        spec = {V2_FEATURE_NAMES.get(name, name): feature for name, feature in spec.items()}
    return spec


# Which flag sets each feature's length, for messages about records of
# another shape.
_LENGTH_FLAGS = {
    "input_ids": "--max_seq_length",
    "input_mask": "--max_seq_length",
    "segment_ids": "--max_seq_length",
    "masked_lm_positions": "--max_predictions_per_seq",
    "masked_lm_ids": "--max_predictions_per_seq",
    "masked_lm_weights": "--max_predictions_per_seq",
    "next_sentence_labels": None,
}
# Records read per batch when scanning: large batches keep tf.data's
# per-element overhead small.
_SCAN_BATCH = 4096
# Damaged files named in one message; the rest are counted.
_MAX_FILES_NAMED = 5


def check_pretraining_record(path, record, max_seq_length, max_predictions_per_seq):
    """Checks a file's first record against the original pretraining schema.

    Args:
        path: The file it came from (for the message).
        record: Its first record, a serialized `tf.train.Example`.
        max_seq_length, max_predictions_per_seq: The lengths expected.

    Returns:
        True when the record uses the v2 feature names.

    Raises:
        InputFileError: naming the file and, for each length flag the
            record disagrees with, a feature with its expected and found
            length; or a feature that is missing or of the wrong type.
    """
    import tensorflow as tf
    from google.protobuf.message import DecodeError

    try:
        features = tf.train.Example.FromString(record).features.feature
    except DecodeError:
        raise InputFileError(f"{path}: its first record is not a tf.train.Example") from None
    use_v2 = V2_FEATURE_NAMES["input_ids"] in features
    spec = pretraining_features_spec(max_seq_length, max_predictions_per_seq)
    mismatches = {}
    for name, feature_spec in spec.items():
        stored_name = V2_FEATURE_NAMES.get(name, name) if use_v2 else name
        if stored_name not in features:
            raise InputFileError(
                f"{path}: its first record has no feature {stored_name} (a pretraining record has "
                f"{', '.join(spec)}; found {', '.join(sorted(features)) or 'none'})"
            )
        kind = "float_list" if feature_spec.dtype == tf.float32 else "int64_list"
        found_kind = features[stored_name].WhichOneof("kind")
        if found_kind != kind:
            raise InputFileError(f"{path}: feature {stored_name} is a {found_kind}, expected a {kind}")
        expected, found = feature_spec.shape[0], len(getattr(features[stored_name], kind).value)
        flag = _LENGTH_FLAGS[name]
        if found != expected and flag not in mismatches:
            setting = f" ({flag}={expected})" if flag else ""
            mismatches[flag] = f"feature {stored_name} has length {found}, expected {expected}{setting}"
    if mismatches:
        raise InputFileError(f"{path}: {'; '.join(mismatches.values())}")
    return use_v2


def _read_every_record(path, compression):
    """Reads all records of one file; TensorFlow checks framing and CRCs."""
    import tensorflow as tf

    for _ in tf.data.TFRecordDataset(path, compression_type=compression).batch(_SCAN_BATCH):
        pass


def damaged_files_error(files, error=None):
    """The `InputFileError` for a `DataLossError` met while reading `files`.

    tf.data's error does not say which file it was reading, so each file is
    read again to find the damaged ones.

    Args:
        files: The files that were being read.
        error: The `tf.errors.DataLossError`, for its detail should no file
            be damaged any more when read again.

    Returns:
        An `InputFileError` naming each damaged file and what is wrong at
        which offset.
    """
    import tensorflow as tf

    damaged = []
    for path in files:
        try:
            _read_every_record(path, _compression(path))
        except tf.errors.DataLossError as damage:
            damaged.append(f"{path}: truncated or corrupted record ({_damage_detail(damage)})")
    if not damaged:
        detail = _damage_detail(error) if error is not None else "unreadable data"
        damaged = [f"{_name_files(files)}: truncated or corrupted record ({detail})"]
    more = len(damaged) - _MAX_FILES_NAMED
    named = "; ".join(damaged[:_MAX_FILES_NAMED])
    return InputFileError(named + (f"; and {more} more damaged files" if more > 0 else ""))


def _name_files(files):
    """`a, b, c` for a few files; the first few and a count for many."""
    files = list(files)
    more = len(files) - _MAX_FILES_NAMED
    return ", ".join(files[:_MAX_FILES_NAMED]) + (f" and {more} more files" if more > 0 else "")


def count_records(files, compressions=None):
    """Reads every record of `files` once, several files at a time.

    TensorFlow checks each record's framing and both CRC-32Cs as it reads,
    so this finds truncated and corrupted files before a long run meets them.

    Args:
        files: TFRecord files.
        compressions: Each file's compression (`""` or `"GZIP"`); detected
            when not given.

    Returns:
        The number of records in all files.

    Raises:
        InputFileError: naming each truncated or corrupted file.
    """
    import tensorflow as tf

    files = list(files)
    if compressions is None:
        compressions = [_compression(path) for path in files]
    counts = tf.data.Dataset.from_tensor_slices((files, list(compressions))).interleave(
        lambda path, compression: tf.data.TFRecordDataset(path, compression_type=compression)
        .batch(_SCAN_BATCH)
        .map(tf.size),
        cycle_length=max(1, min(len(files), os.cpu_count() or 1)),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=False,
    )
    try:
        return sum(int(count) for count in counts)
    except tf.errors.DataLossError as error:
        raise damaged_files_error(files, error) from None


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


def check_pretraining_files(files, max_seq_length, max_predictions_per_seq, read_all_records=True):
    """Checks pretraining input files before a model is built or anything written.

    Shards of an unfinished generator run are refused
    (`check_shard_sets_finished`). Each file must exist and be a TFRecord
    file (plain or gzip) whose first
    record is a `tf.train.Example` with the seven original features (or their
    v2 names) at the lengths `max_seq_length` and `max_predictions_per_seq`
    give. With `read_all_records`, every record of every file is read once
    (`count_records`), which finds truncated and corrupted files.

    Args:
        files: The files (see `resolve_input_files`).
        max_seq_length, max_predictions_per_seq: As the run will read them.
        read_all_records: Read every record, not only the first of each file.

    Returns:
        The number of records in all files, or None without `read_all_records`.

    Raises:
        InputFileError: naming the file and what is wrong with it.
    """
    files = list(files)
    if not files:
        raise InputFileError("no input files")
    check_shard_sets_finished(files)
    compressions, names, empty = [], set(), []
    for path in files:
        if not filesystem.exists(path):
            raise InputFileError(f"{path}: no such input file")
        if filesystem.isdir(path):
            raise InputFileError(f"{path}: is a directory, not a TFRecord file")
        compressions.append(_compression(path))
        first = _first_record(path, compressions[-1])
        if first is None:
            empty.append(path)
            continue
        names.add(check_pretraining_record(path, first, max_seq_length, max_predictions_per_seq))
    if len(empty) == len(files):
        raise InputFileError(f"{_name_files(files)}: no records")
    if len(names) > 1:
        raise InputFileError(f"{_name_files(files)}: mix original and v2 feature names")
    return count_records(files, compressions) if read_all_records else None


# tf.io.parse_example's complaint about a feature of another length.
_PARSE_LENGTH = re.compile(
    r"Key: (\w+), Index: \d+\.\s+Number of \w+ values != expected\.\s+Values size: (\d+) but output shape: \[(\d+)\]"
)


@contextlib.contextmanager
def reading_input_files(files):
    """Names `files` in the errors tf.data raises while the block reads them.

    For the parts of a run that read records the checks did not (`fit` and
    `evaluate` on `pretraining_dataset`): a truncated or corrupted record, or
    a record whose features have other lengths than the first one's.

    Args:
        files: The input files the block reads.

    Raises:
        InputFileError: instead of `tf.errors.DataLossError`, or instead of
            the `tf.errors.InvalidArgumentError` of a record that does not
            parse; other errors pass unchanged.
    """
    import tensorflow as tf

    try:
        yield
    except tf.errors.DataLossError as error:
        raise damaged_files_error(files, error) from None
    except tf.errors.InvalidArgumentError as error:
        match = _PARSE_LENGTH.search(error.message)
        if match:
            key, found, expected = match.groups()
            raise InputFileError(
                f"{_name_files(files)}: a record's feature {key} has length {found}, expected {expected}"
            ) from None
        if "ParseExample" in error.message:
            raise InputFileError(f"{_name_files(files)}: a record does not parse as a pretraining example") from None
        raise


def pretraining_dataset(
    input_files,
    batch_size,
    max_seq_length,
    max_predictions_per_seq,
    is_training,
    seed=None,
    drop_remainder=True,
    repeat=True,
    num_cpu_threads=4,
):
    """The original `run_pretraining.input_fn_builder` as a `tf.data.Dataset`.

    Training: files shuffled (and repeated), read interleaved, records shuffled
    in a buffer of 100, as the original. Evaluation: files in order. Each
    file's compression (gzip or none) and feature names (original or v2) are
    detected; batches always use the original names, int64 cast to int32.

    Args:
        input_files: List of TFRecord files (see `resolve_input_files`).
        batch_size: Examples per batch.
        max_seq_length, max_predictions_per_seq: As the files were written.
        is_training: Shuffle files and records.
        seed: Shuffle seed (None: nondeterministic).
        drop_remainder: Drop a last partial batch (the original always does).
        repeat: Repeat endlessly (the original does, for training and eval).
        num_cpu_threads: Files read in parallel when training.

    Returns:
        `tf.data.Dataset` of dicts with the seven original feature names:
        int32 [batch, max_seq_length] / [batch, max_predictions_per_seq] /
        [batch, 1], and float32 `masked_lm_weights`.

    Raises:
        InputFileError: no files, a file that is not a TFRecord file, or
            files of different feature names.
    """
    import tensorflow as tf

    files = list(input_files)
    if not files:
        raise InputFileError("no input files for the pretraining dataset")
    formats = [detect_record_format(path) for path in files]
    name_kinds = {use_v2 for _, use_v2 in formats}
    if len(name_kinds) > 1:
        raise InputFileError(f"{_name_files(files)}: mix original and v2 feature names")
    spec = pretraining_features_spec(max_seq_length, max_predictions_per_seq, name_kinds.pop())
    renames = {v2: name for name, v2 in V2_FEATURE_NAMES.items()}

    def decode(serialized):
        parsed = tf.io.parse_example(serialized, spec)
        return {
            renames.get(name, name): tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
            for name, value in parsed.items()
        }

    compressions = [compression for compression, _ in formats]
    dataset = tf.data.Dataset.from_tensor_slices((files, compressions))
    if is_training:
        if repeat:
            dataset = dataset.repeat()
        # With a seed, a fixed order (no per-iteration reshuffle state): a
        # tf.distribute rewrite of the pipeline then yields the same batches,
        # and a resumed run can skip to its data position. The stream is
        # endless anyway, so reshuffling between iterations never applies.
        reshuffle = seed is None
        dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=reshuffle)
        dataset = dataset.interleave(
            lambda path, compression: tf.data.TFRecordDataset(path, compression_type=compression),
            cycle_length=min(num_cpu_threads, len(files)),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=seed is not None,
        )
        dataset = dataset.shuffle(100, seed=seed, reshuffle_each_iteration=reshuffle)
    else:
        dataset = dataset.flat_map(
            lambda path, compression: tf.data.TFRecordDataset(path, compression_type=compression)
        )
        if repeat:
            dataset = dataset.repeat()
    # Batch first, then parse the whole batch at once (faster than per record).
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    return dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
