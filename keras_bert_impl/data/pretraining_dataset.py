"""Pretraining TFRecords read with `tf.data`, checked before they are trusted.

`pretraining_dataset` is the original `run_pretraining.input_fn_builder`:
files of either compression and feature names (`tfrecord_format`) batched
under the original names. Before a run builds a model or writes anything,
`check_pretraining_files` names a file that is not a TFRecord file, whose
first record has other feature lengths than the run expects, or (reading
every record once) that is truncated or corrupted; `reading_input_files`
names the files in what tf.data raises later.

RoBERTa's dynamic masking (`DynamicMasking`, `draw_masked_lm_predictions`):
records written unmasked (`create_pretraining_data --dynamic_masking`: no
`masked_lm_*` features) get their masks drawn in the pipeline, anew for
every batch, so each pass over the data masks other tokens.
"""

import contextlib
import dataclasses
import os
import random
import re

from keras_bert_impl import filesystem
from keras_bert_impl.data.pipeline_options import without_autotune_thread
from keras_bert_impl.data.tfrecord_files import GZIP, GZIP_MAGIC, check_shard_sets_finished
from keras_bert_impl.data.tfrecord_format import V2_FEATURE_NAMES
from keras_bert_impl.errors import InputFileError, VocabError


def _compression(path):
    """`GZIP` for a gzip file (by its magic bytes), else `""`.

    Raises:
        InputFileError: the file cannot be read.
    """
    import tensorflow as tf

    try:
        with tf.io.gfile.GFile(path, "rb") as reader:
            return GZIP if reader.read(2) == GZIP_MAGIC else ""
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
        first = next(iter(without_autotune_thread(tf.data.TFRecordDataset(path, compression_type=compression).take(1))),
                     None)
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


MASKED_LM_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")


def pretraining_features_spec(max_seq_length, max_predictions_per_seq, use_v2_feature_names=False, masked_lm=True):
    """The `tf.io.parse_example` spec of the original schema (without the
    `masked_lm_*` features for the unmasked records of dynamic masking)."""
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
    if not masked_lm:
        spec = {name: feature for name, feature in spec.items() if name not in MASKED_LM_FEATURES}
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


def check_pretraining_record(path, record, max_seq_length, max_predictions_per_seq, dynamic_masking=False):
    """Checks a file's first record against the original pretraining schema.

    Args:
        path: The file it came from (for the message).
        record: Its first record, a serialized `tf.train.Example`.
        max_seq_length, max_predictions_per_seq: The lengths expected.
        dynamic_masking: Expect unmasked records (no `masked_lm_*` features).

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
    has_masks = "masked_lm_positions" in features
    if dynamic_masking and has_masks:
        raise InputFileError(
            f"{path}: its records carry masks (masked_lm_positions), their input_ids masked already; "
            "--dynamic_masking reads records written unmasked (create_pretraining_data --dynamic_masking)"
        )
    has_ids = "input_ids" in features or V2_FEATURE_NAMES["input_ids"] in features
    if not dynamic_masking and not has_masks and has_ids and "next_sentence_labels" in features:
        raise InputFileError(
            f"{path}: its records are unmasked, written for dynamic masking (create_pretraining_data "
            "--dynamic_masking, no masked_lm_* features): pass --dynamic_masking to draw their masks"
        )
    spec = pretraining_features_spec(max_seq_length, max_predictions_per_seq, masked_lm=not dynamic_masking)
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

    for _ in without_autotune_thread(tf.data.TFRecordDataset(path, compression_type=compression).batch(_SCAN_BATCH)):
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
    counts = without_autotune_thread(counts)
    try:
        return sum(int(count) for count in counts)
    except tf.errors.DataLossError as error:
        raise damaged_files_error(files, error) from None


def check_pretraining_files(files, max_seq_length, max_predictions_per_seq, read_all_records=True,
                            dynamic_masking=False):
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
        dynamic_masking: Expect unmasked records (see `check_pretraining_record`).

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
        names.add(check_pretraining_record(path, first, max_seq_length, max_predictions_per_seq, dynamic_masking))
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


@dataclasses.dataclass(frozen=True)
class DynamicMasking:
    """RoBERTa's dynamic masking: what `draw_masked_lm_predictions` draws with.

    Attributes:
        max_predictions_per_seq: Prediction slots per sequence (most masks).
        masked_lm_prob: Fraction of each sequence's tokens to mask.
        vocab_size: Random replacements are drawn from ids [0, vocab_size).
        mask_id: The mask token's id ([MASK], <mask>).
        special_ids: Ids never masked ([CLS] [SEP] [PAD], <s> </s> <pad>).
        replacement_ids: None (WordPiece: every id below `vocab_size`, as
            the original draws from all of `vocab.txt`), or the ids a random
            replacement is drawn from, uniformly: a variant's vocabulary
            less its special tokens, as `create_pretraining_data` draws them.
    """

    max_predictions_per_seq: int
    masked_lm_prob: float
    vocab_size: int
    mask_id: int
    special_ids: tuple
    replacement_ids: tuple = None

    def __post_init__(self):
        if self.max_predictions_per_seq < 1:
            raise ValueError(f"max_predictions_per_seq must be positive, got {self.max_predictions_per_seq}")
        if not 0.0 < self.masked_lm_prob <= 1.0:
            raise ValueError(f"masked_lm_prob must lie in (0, 1], got {self.masked_lm_prob}")

    @classmethod
    def from_vocab_file(cls, vocab_file, vocab_size, max_predictions_per_seq, masked_lm_prob=0.15):
        """The special ids from the tokenizer file that the records were made with.

        Args:
            vocab_file: WordPiece `vocab.txt`, byte-level BPE `vocab.json`
                (with `merges.txt` beside it, as `create_pretraining_data`
                reads it) or SentencePiece `spiece.model` (any `*.model`).
            vocab_size: The model's (`BertConfig.vocab_size`).
            max_predictions_per_seq, masked_lm_prob: As the attributes.

        Raises:
            VocabError: the file is missing, unreadable or not of the kind
                its name says, lacks one of its family's special tokens, or
                (a variant's) has more tokens than the model's `vocab_size`.
        """
        from keras_bert_impl.data.pretraining_instances import InstanceVocab
        from keras_bert_impl.tokenization.from_files import (
            SPECIAL_TOKENS,
            WORDPIECE,
            read_vocab_file,
            token_ids,
        )

        files = read_vocab_file(vocab_file)
        tokens = SPECIAL_TOKENS[files["kind"]]
        try:
            cls_id, sep_id, pad_id, mask_id = token_ids(files, [tokens.cls, tokens.sep, tokens.pad, tokens.mask])
        except VocabError as error:
            raise VocabError(f"{vocab_file}: {error}") from None
        replacement_ids = None
        if files["kind"] != WORDPIECE:
            replacement_ids = InstanceVocab.from_tokenizer_files(files, vocab_file).word_ids
            if max(replacement_ids + (mask_id,)) >= vocab_size:
                raise VocabError(f"{vocab_file}: ids up to {max(replacement_ids + (mask_id,))}, but the model's "
                                 f"embeddings (vocab_size {vocab_size}) have rows for {vocab_size}")
        return cls(max_predictions_per_seq, masked_lm_prob, vocab_size, mask_id, (cls_id, sep_id, pad_id),
                   replacement_ids)


def draw_masked_lm_predictions(features, masking, seed):
    """Masks a batch of unmasked sequences, as the original's 80/10/10 rule.

    Per sequence, `min(max_predictions_per_seq, max(1, round(n *
    masked_lm_prob)))` positions (n: its tokens, special ones included, as
    the original counts them; fewer when it has fewer maskable tokens) are
    drawn uniformly among its tokens that are neither padding nor special;
    each is [MASK] 80% of the time, kept 10%, a uniformly random id 10%
    (below `vocab_size`, or one of `masking.replacement_ids`).
    The draws are stateless: the same `seed` gives the same masks.

    Args:
        features: Dict with int32 `input_ids` and `input_mask` [batch_size,
            seq_length] (others pass through).
        masking: `DynamicMasking`; `max_predictions_per_seq` at most seq_length.
        seed: int [2], the stateless random seed.

    Returns:
        `features` with `input_ids` masked and `masked_lm_positions`,
        `masked_lm_ids` (int32), `masked_lm_weights` (float32) [batch_size,
        max_predictions_per_seq]: positions ascending, then zeros of weight 0.
    """
    import tensorflow as tf

    input_ids = features["input_ids"]
    input_mask = features["input_mask"]
    seq_length = tf.shape(input_ids)[1]
    k = masking.max_predictions_per_seq
    position_seed, rule_seed, word_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 3))

    # [batch_size, seq_length]
    special = tf.reduce_any(input_ids[:, :, None] == tf.constant(masking.special_ids, tf.int32), axis=-1)
    maskable = (input_mask > 0) & ~special
    num_tokens = tf.cast(tf.reduce_sum(input_mask, axis=1), tf.float32)
    # [batch_size]; tf.round rounds half to even, as Python's round.
    num_to_predict = tf.minimum(k, tf.maximum(1, tf.cast(tf.round(num_tokens * masking.masked_lm_prob), tf.int32)))
    num_to_predict = tf.minimum(num_to_predict, tf.reduce_sum(tf.cast(maskable, tf.int32), axis=1))

    # The k maskable positions of highest random score: a uniform sample.
    scores = tf.random.stateless_uniform(tf.shape(input_ids), position_seed)
    scores = tf.where(maskable, scores, -1.0)
    _, chosen = tf.math.top_k(scores, k=k)  # [batch_size, k]
    valid = tf.range(k)[None, :] < num_to_predict[:, None]
    # Ascending, the unused slots (moved past the end) last, then zero.
    positions = tf.sort(tf.where(valid, chosen, seq_length), axis=1)
    positions = tf.where(valid, positions, 0)
    masked_lm_ids = tf.where(valid, tf.gather(input_ids, positions, batch_dims=1), 0)

    rule = tf.random.stateless_uniform(tf.shape(positions), rule_seed)
    if masking.replacement_ids is None:
        random_ids = tf.random.stateless_uniform(
            tf.shape(positions), word_seed, minval=0, maxval=masking.vocab_size, dtype=tf.int32
        )
    else:
        pool = tf.constant(masking.replacement_ids, tf.int32)
        random_ids = tf.gather(pool, tf.random.stateless_uniform(
            tf.shape(positions), word_seed, minval=0, maxval=len(masking.replacement_ids), dtype=tf.int32
        ))
    replacements = tf.where(rule < 0.8, masking.mask_id, tf.where(rule < 0.9, masked_lm_ids, random_ids))
    rows = tf.broadcast_to(tf.range(tf.shape(positions)[0])[:, None], tf.shape(positions))
    indices = tf.boolean_mask(tf.stack([rows, positions], axis=-1), valid)  # [num_masked, 2]
    masked_ids = tf.tensor_scatter_nd_update(input_ids, indices, tf.boolean_mask(replacements, valid))
    return {
        **features,
        "input_ids": masked_ids,
        "masked_lm_positions": positions,
        "masked_lm_ids": masked_lm_ids,
        "masked_lm_weights": tf.cast(valid, tf.float32),
    }


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
    dynamic_masking=None,
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
        dynamic_masking: A `DynamicMasking` for unmasked records: each
            batch's masks drawn by `draw_masked_lm_predictions` with the
            seed `[seed, batch index]` (the index counts from the first
            batch, so a run that skips batches to resume draws the masks it
            would have drawn).

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
    spec = pretraining_features_spec(
        max_seq_length, max_predictions_per_seq, name_kinds.pop(), masked_lm=dynamic_masking is None
    )
    if dynamic_masking is not None and not (
        dynamic_masking.max_predictions_per_seq == max_predictions_per_seq <= max_seq_length
    ):
        raise ValueError(
            f"dynamic masking's {dynamic_masking.max_predictions_per_seq} predictions per sequence must be "
            f"max_predictions_per_seq {max_predictions_per_seq}, at most max_seq_length {max_seq_length}"
        )
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
    if dynamic_masking is None:
        return without_autotune_thread(dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE))
    # Without a seed, one drawn here: each batch still gets its own masks.
    mask_seed = seed if seed is not None else random.SystemRandom().randrange(1 << 31)

    def decode_and_mask(index, serialized):
        stateless_seed = tf.stack([tf.constant(mask_seed, tf.int64), index])
        return draw_masked_lm_predictions(decode(serialized), dynamic_masking, stateless_seed)

    return without_autotune_thread(dataset.enumerate().map(decode_and_mask, num_parallel_calls=tf.data.AUTOTUNE))
