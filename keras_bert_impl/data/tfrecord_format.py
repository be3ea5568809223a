"""The original pretraining TFRecords' bytes, made without TensorFlow.

The original `write_instance_to_example_files` stores one `tf.train.Example`
per instance with int64 `input_ids`, `input_mask`, `segment_ids`
[max_seq_length], `masked_lm_positions`, `masked_lm_ids`
[max_predictions_per_seq], float `masked_lm_weights` [max_predictions_per_seq]
and int64 `next_sentence_labels` [1] (1 = B is a random next sentence), every
list zero-padded. Records for dynamic masking (RoBERTa's recipe: masks drawn
by the input pipeline, `pretraining_dataset.draw_masked_lm_predictions`)
leave out the three `masked_lm_*` features and hold the unmasked `input_ids`.
tf-models can name `input_ids` / `segment_ids`
`input_word_ids` / `input_type_ids` instead ("v2" names).

Writing needs no TensorFlow (what importing it would cost each worker
process: docs/BENCHMARKS.md, "Why the writers do without TensorFlow"):
`ExampleEncoder` writes the protobuf wire bytes directly, and
`frame_records` adds the TFRecord framing, its CRC-32Cs computed for batches
of records with NumPy. `tfrecord_files` writes the framed bytes to files.
"""

import numpy as np

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
        masked_lm: Write the `masked_lm_*` features; False for the unmasked
            records of dynamic masking.
        pad_id: What `input_ids` are padded with (the original's 0; a
            variant's `<pad>`, RoBERTa's 1).

    Example:
    >>> from keras_bert_impl.data.pretraining_instances import TrainingInstance
    >>> encoder = ExampleEncoder(max_seq_length=8, max_predictions_per_seq=2)
    >>> record = encoder.encode(TrainingInstance([101, 7, 102, 103, 102], 3, [1], [9], True))
    >>> type(record).__name__, record.count(b"input_mask"), record.count(b"next_sentence_labels")
    ('bytes', 1, 1)
    """

    def __init__(self, max_seq_length, max_predictions_per_seq, use_v2_feature_names=False, masked_lm=True, pad_id=0):
        self.max_seq_length = max_seq_length
        self._pad_id = _packed_varints([pad_id])
        self.max_predictions_per_seq = max_predictions_per_seq
        self.use_v2_feature_names = use_v2_feature_names
        self.masked_lm = masked_lm
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
        features = [
            entry("input_ids", _packed_varints(instance.input_ids) + self._pad_id * pad),
            entry("input_mask", b"\x01" * length + b"\x00" * pad),
            entry("segment_ids", b"\x00" * segment_a + b"\x01" * (length - segment_a) + b"\x00" * pad),
        ]
        if self.masked_lm:
            features += (
                entry("masked_lm_positions", _packed_varints(instance.masked_lm_positions) + b"\x00" * pad_masked),
                entry("masked_lm_ids", _packed_varints(instance.masked_lm_ids) + b"\x00" * pad_masked),
                # Little-endian float32 1.0 per prediction, then 0.0.
                entry("masked_lm_weights", b"\x00\x00\x80\x3f" * num_masked + b"\x00" * (4 * pad_masked)),
            )
        features.append(entry("next_sentence_labels", b"\x01" if instance.is_random_next else b"\x00"))
        features = b"".join(features)
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
