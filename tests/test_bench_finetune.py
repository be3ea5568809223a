"""The pure helpers of `benchmarks/bench_finetune.py`: timing, batch widths, tf-models' variable names."""

import numpy as np
import pytest

from tests.helpers import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_finetune")


def test_timed_intervals_leave_out_the_first_step(bench):
    # Step ends at wall 1, 3, 6 s and CPU 2, 5, 11 s: two intervals after the first.
    assert bench.timed_intervals([(1.0, 2.0), (3.0, 5.0), (6.0, 11.0)]) == [(2.0, 3.0), (3.0, 6.0)]
    assert bench.timed_intervals([(1.0, 2.0)]) == []


def test_mean_cut_width_rounds_each_batch_up(bench):
    # Batches of 2: longest rows 9 and 17 -> 16 and 24; the odd example left over is dropped.
    lengths = np.array([3, 9, 17, 1, 128])
    assert bench.mean_cut_width(lengths, batch_size=2) == 20.0


def test_padded_batches_follow_the_texts_in_order(bench):
    lengths = np.array([10, 20, 30, 40, 50, 60])
    assert bench.padded_batch_shapes(lengths, 0, 3, 2, 128) == [(128, 30), (128, 70), (128, 110)]


def test_cut_batches_are_as_wide_as_their_longest_row_rounded_up(bench):
    lengths = np.array([10, 20, 30, 41, 50, 60])
    # Batches 1 and 2 of 2: longest rows 41 and 60 -> 48 and 64 columns at buckets of 8.
    assert bench.cut_batch_widths(lengths, 1, 2, 2) == [(48, 71), (64, 110)]


def test_tf_models_cut_batches_are_cut_in_the_pipeline(bench):
    """The like-for-like peer's batches: the same ids, columns past the longest row (rounded up
    to 8) dropped, labels alongside."""
    peer = bench.TfModelsCut.__new__(bench.TfModelsCut)
    peer.batch_size = 2
    mask = np.zeros((3, 32), "int32")
    for row, length in enumerate([5, 11, 3]):
        mask[row, :length] = 1
    features = {"input_word_ids": mask * 7, "input_mask": mask, "input_type_ids": np.zeros_like(mask)}
    batches = list(peer.batches(features, np.array([0, 1, 0])))
    assert [tuple(x["input_mask"].shape) for x, _ in batches] == [(2, 16), (1, 8)]
    np.testing.assert_array_equal(batches[0][0]["input_word_ids"], features["input_word_ids"][:2, :16])
    assert [list(y.numpy()) for _, y in batches] == [[0, 1], [0]]


def test_measurement_rates(bench):
    m = bench.Measurement("x", train_intervals=[(2.0, 4.0), (2.0, 4.0)], timed_batches=[(64, 100), (32, 60)])
    assert m.train_rate(batch_size=8) == 4.0
    assert m.train_cpu_rate(batch_size=8) == 2.0
    assert m.mean_width() == 48.0
    assert m.real_token_share(batch_size=8, max_seq_length=128) == 160 / (2 * 8 * 128)


@pytest.mark.parametrize("name, original", [
    ("word_embeddings/embeddings:0", "bert/embeddings/word_embeddings"),
    ("embeddings/layer_norm/gamma:0", "bert/embeddings/LayerNorm/gamma"),
    ("pooler_transform/kernel:0", "bert/pooler/dense/kernel"),
    ("transformer/layer_3/self_attention/query/kernel:0", "bert/encoder/layer_3/attention/self/query/kernel"),
    ("transformer/layer_11/output_layer_norm/beta:0", "bert/encoder/layer_11/output/LayerNorm/beta"),
])
def test_tf_models_variable_names(bench, name, original):
    assert bench.original_name_of_tf_models_variable(name) == original


def test_unknown_tf_models_variable_is_refused(bench):
    with pytest.raises(KeyError, match="transformer/layer_0/adapter"):
        bench.original_name_of_tf_models_variable("transformer/layer_0/adapter/kernel:0")
