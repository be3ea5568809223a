"""An inference function's memory holds as requests of ever new lengths arrive (issue 36, item 3).

Each trace of a `tf.function` is a graph of its own; one that holds the Dense
kernels as constants holds them (and oneDNN's packed copies) again, so a
function traced per request shape grew by its kernels' size per new length
(MiniLM: ~250 MiB per length, 1 GB -> 4.6 GB after 16 lengths). Every path
of `make_inference_function` must trace a bounded number of times and keep
resident memory flat.
"""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.inference.constant_kernels import dense_kernel_bytes
from keras_bert_impl.models.bert_model import BertModel
from tests.helpers import randomize, tiny_config

LENGTHS = range(5, 29)  # 24 new lengths after the first two


def _resident_mib():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


def _one_text(length, batch_size=1):
    return {"input_ids": tf.fill((batch_size, length), 7), "input_mask": tf.ones((batch_size, length), tf.int32),
            "segment_ids": tf.zeros((batch_size, length), tf.int32)}


@pytest.fixture(scope="module")
def model():
    # Kernels of ~12 MiB: a copy per trace shows as hundreds of MiB over the lengths.
    config = tiny_config(vocab_size=100, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                         intermediate_size=1024, max_position_embeddings=64)
    model = BertModel(config)
    randomize(model, seed=3, scale=0.05)
    return model


@pytest.mark.parametrize("options", [
    dict(freeze_kernels=True),
    dict(padding_free=True, freeze_kernels=True),
    dict(padding_free=True),
    dict(),
    dict(jit_compile=True),
    dict(padding_free=True, calling_thread=True),
], ids=["frozen", "padding-free frozen", "padding-free", "plain", "XLA", "calling thread"])
def test_many_request_lengths_trace_a_bounded_number_of_times_and_memory_holds(model, options):
    kernel_mib = dense_kernel_bytes(model) / 2**20
    forward = model.make_inference_function(**{"jit_compile": False, **options})
    first, second = LENGTHS[0], LENGTHS[1]
    reference = model(_one_text(first), training=False)["pooled_output"]
    np.testing.assert_allclose(forward(_one_text(first))["pooled_output"], reference, atol=2e-5)
    forward(_one_text(second))
    before = _resident_mib()
    for length in LENGTHS[2:]:
        # Batch sizes 1-3 too, but for XLA, which compiles a program per batch size and bucket.
        forward(_one_text(length, batch_size=1 if options.get("jit_compile") else 1 + length % 3))
    grown = _resident_mib() - before
    # The defect traced once per length (26 traces); every path now traces
    # once, with every dimension open (`function.AnyShapeFunction`;
    # reduce_retracing alone took three, the batch size counting too), and
    # XLA's compiles per bucket of lengths. The calling thread's Session runs
    # the one graph it was given (traced once when made).
    if not options.get("calling_thread"):
        assert forward.experimental_get_tracing_count() == 1
    # Far below one kernel copy per length (24 x 12 MiB), with room for the allocator.
    assert grown < 4 * kernel_mib, f"resident memory grew {grown:.0f} MiB over {len(LENGTHS) - 2} lengths"
    last = _one_text(LENGTHS[-1])
    np.testing.assert_allclose(forward(last)["pooled_output"], model(last, training=False)["pooled_output"],
                               atol=2e-5)


def test_xla_buckets_of_sequence_lengths_give_the_model_outputs_up_to_the_position_table():
    # max_position_embeddings 24, buckets of 16: 3 -> 16 columns, 17 and 23 -> 24 (not 32).
    config = tiny_config(max_position_embeddings=24)
    model = BertModel(config)
    randomize(model, seed=5, scale=0.2)
    forward = model.make_inference_function(jit_compile=True, bucket_size=16)
    for length in (3, 17, 23, 24):
        inputs = _one_text(length)
        inputs["input_mask"] = tf.concat([tf.ones((1, length - 1), tf.int32), tf.zeros((1, 1), tf.int32)], axis=1)
        outputs, expected = forward(inputs), model(inputs, training=False)
        assert outputs["sequence_output"].shape == (1, length, config.hidden_size)
        np.testing.assert_allclose(outputs["sequence_output"][:, :-1], expected["sequence_output"][:, :-1], atol=2e-5)
        np.testing.assert_allclose(outputs["pooled_output"], expected["pooled_output"], atol=2e-5)
