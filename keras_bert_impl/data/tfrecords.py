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
"""

import glob
import gzip
import os

import numpy as np

from keras_bert_impl.errors import InputFileError
from keras_bert_impl.io import temporary_path

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


class LocalFileSystem:
    """The filesystem operations the writers and readers need, for local paths.

    A remote filesystem (e.g. Beam's `FileSystems`, for gs://) offers the same
    five methods.
    """

    @staticmethod
    def open(path):
        return open(path, "rb")

    @staticmethod
    def create(path):
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        return open(path, "wb")

    @staticmethod
    def rename(source, destination):
        os.replace(source, destination)

    @staticmethod
    def delete(path):
        if os.path.exists(path):
            os.remove(path)

    @staticmethod
    def exists(path):
        return os.path.exists(path)


class TFRecordFileWriter:
    """Writes records to a TFRecord file, under a temporary name until `close()`.

    On an exception inside `with`, or on `abort()`, the temporary file is
    removed and nothing appears under `path`.

    Args:
        path: Final file name.
        compression: None, or "GZIP".
        filesystem: `LocalFileSystem` or an equivalent for remote paths.

    Example:
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "a.tfrecord")
    >>> with TFRecordFileWriter(path) as writer:
    ...     writer.write(b"hello")
    >>> list(read_records(path))
    [b'hello']
    """

    def __init__(self, path, compression=None, filesystem=LocalFileSystem):
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
        self.flush()
        if self._file is not self._raw:
            self._file.close()
        self._raw.close()
        self._filesystem.rename(self._temporary, self.path)

    def abort(self):
        """Removes the temporary file; `path` is left as it was."""
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


def read_records(path, filesystem=LocalFileSystem):
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


def resolve_input_files(patterns):
    """Files named by a comma list of paths and globs, in the original's order.

    Like the original (`tf.gfile.Glob` per pattern), matches keep the
    directory's listing order. Remote patterns (gs://...) go through
    `tf.io.gfile`.

    Raises:
        InputFileError: a pattern matches nothing.
    """
    files = []
    for pattern in (p.strip() for p in str(patterns).split(",")):
        if not pattern:
            continue
        if "://" in pattern:
            import tensorflow as tf  # Only remote patterns pay for TensorFlow.

            matches = tf.io.gfile.glob(pattern)
        elif any(char in pattern for char in "*?["):
            matches = glob.glob(pattern)
        else:
            matches = [pattern] if os.path.exists(pattern) else []
        if not matches:
            raise InputFileError(f"{pattern}: no such input file")
        files += matches
    if not files:
        raise InputFileError(f"no input files in {patterns!r}")
    return files


def detect_record_format(path):
    """`(compression, use_v2_feature_names)` of a pretraining TFRecord file:
    gzip by its magic bytes, v2 names by its first record.
    """
    import tensorflow as tf

    with tf.io.gfile.GFile(path, "rb") as reader:
        compression = GZIP if reader.read(2) == _GZIP_MAGIC else ""
    first = next(iter(tf.data.TFRecordDataset(path, compression_type=compression).take(1)), None)
    use_v2 = False
    if first is not None:
        names = tf.train.Example.FromString(first.numpy()).features.feature
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
        InputFileError: no files, or files of different feature names.
    """
    import tensorflow as tf

    files = list(input_files)
    if not files:
        raise InputFileError("no input files for the pretraining dataset")
    formats = [detect_record_format(path) for path in files]
    name_kinds = {use_v2 for _, use_v2 in formats}
    if len(name_kinds) > 1:
        raise InputFileError(f"{', '.join(files)}: mix original and v2 feature names")
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
