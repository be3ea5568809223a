"""`pack_inputs` (pairs and single texts) against a plain-Python reference of the original layout.

The reference works on lists of ints as google-research/bert's `convert_single_example` does: the
pair cut one token at a time from the longer side (`_truncate_seq_pair`, from `b` on a tie),
`[CLS] a [SEP] b [SEP]`, the second [SEP] only if any of `b` is left, padded to max_seq_length;
RoBERTa's variant puts two separators between the texts and gives every token segment 0.
Checked eagerly and traced with a `[None]`-ragged signature (as the export signatures and
`dataset.map` trace it), over random ragged batches, empty texts and an empty batch.
"""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.tokenization.preprocessor import pack_inputs

CLS, SEP = 101, 102
# (pad_id, separators_between, second_segment_id): BERT's layout, RoBERTa's.
LAYOUTS = [(0, 1, 1), (1, 2, 0)]
MAX_SEQ_LENGTHS = [2, 3, 4, 5, 7, 12]


def reference_pack(a, b, max_seq_length, pad_id, separators_between, second_segment_id):
    """One row's (input_ids, input_mask, segment_ids) as lists, the original's way."""
    a, b = list(a), list(b)
    if b:
        budget = max(max_seq_length - 2 - separators_between, 0)
        while len(a) + len(b) > budget:
            if len(a) > len(b):
                a.pop()
            else:
                b.pop()
    else:
        a = a[:max(max_seq_length - 2, 0)]
    tokens, segments = [CLS] + a, [0] * (1 + len(a))
    if b:
        tokens += [SEP] * separators_between + b + [SEP]
        segments += [0] * separators_between + [second_segment_id] * (len(b) + 1)
    else:
        tokens.append(SEP)
        segments.append(0)
    padding = max_seq_length - len(tokens)
    assert padding >= 0
    return tokens + [pad_id] * padding, [1] * len(tokens) + [0] * padding, segments + [0] * padding


def random_rows(rng, count, first_id):
    # Lengths 0..14, many short ones and empties, so that every truncation case comes up.
    lengths = rng.choice([0, 0, 1, 2, 3, 4, 5, 6, 8, 10, 14], size=count)
    return [list(range(first_id, first_id + n)) for n in lengths]


def ragged(rows, row_splits_dtype):
    return tf.RaggedTensor.from_row_lengths(
        tf.constant([i for row in rows for i in row], tf.int32, shape=[sum(map(len, rows))]),
        tf.constant([len(row) for row in rows], row_splits_dtype),
    )


def batches():
    rng = np.random.default_rng(20261207)
    yield [], []  # An empty batch.
    yield [[], []], [[], []]  # Empty texts only.
    for _ in range(12):
        count = int(rng.integers(1, 9))
        yield random_rows(rng, count, 1000), random_rows(rng, count, 5000)


@pytest.mark.parametrize("pad_id, separators_between, second_segment_id", LAYOUTS)
@pytest.mark.parametrize("max_seq_length", MAX_SEQ_LENGTHS)
def test_pair_packing_equals_the_original_layout(max_seq_length, pad_id, separators_between, second_segment_id):
    layout = dict(pad_id=pad_id, separators_between=separators_between, second_segment_id=second_segment_id)
    spec = tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1, row_splits_dtype=tf.int64)
    traced = tf.function(lambda a, b: pack_inputs(a, b, max_seq_length, CLS, SEP, **layout),
                         input_signature=[spec, spec])
    for index, (rows_a, rows_b) in enumerate(batches()):
        expected = [reference_pack(a, b, max_seq_length, **layout) for a, b in zip(rows_a, rows_b)]
        # Eagerly with int32 row splits, traced with int64 (the tokenizer's).
        for name, packed in [
            ("eager", pack_inputs(ragged(rows_a, tf.int32), ragged(rows_b, tf.int32), max_seq_length, CLS, SEP,
                                  **layout)),
            ("traced", traced(ragged(rows_a, tf.int64), ragged(rows_b, tf.int64))),
        ]:
            for column, key in enumerate(("input_ids", "input_mask", "segment_ids")):
                assert packed[key].dtype == tf.int32
                assert packed[key].shape.as_list() == [len(rows_a), max_seq_length]
                assert packed[key].numpy().tolist() == [row[column] for row in expected], (name, index, key)


@pytest.mark.parametrize("pad_id", [0, 1])
def test_single_text_packing_equals_the_original_layout(pad_id):
    rng = np.random.default_rng(7)
    rows = random_rows(rng, 40, 1000) + [[]]
    spec = tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1)
    for max_seq_length in MAX_SEQ_LENGTHS:
        traced = tf.function(lambda a: pack_inputs(a, None, max_seq_length, CLS, SEP, pad_id=pad_id),
                             input_signature=[spec])
        for rows_here in (rows, []):
            expected = [reference_pack(a, [], max_seq_length, pad_id, 1, 1) for a in rows_here]
            packed = traced(ragged(rows_here, tf.int64))
            for column, key in enumerate(("input_ids", "input_mask", "segment_ids")):
                assert packed[key].numpy().reshape(-1, max_seq_length).tolist() == [row[column] for row in expected]
