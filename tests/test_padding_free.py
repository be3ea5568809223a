"""Padding-free inference equals BertModel at every real position."""

import numpy as np
import pytest

from keras_bert_impl.models.bert_model import BertModel
from keras_bert_impl.models.padding_free import padding_free_forward
from tests.helpers import random_inputs, randomize, tiny_config


@pytest.mark.parametrize("dtype, atol", [(None, 2e-5), ("mixed_bfloat16", 3e-2)])
def test_real_positions_equal_the_full_model(dtype, atol):
    config = tiny_config(vocab_size=50, num_hidden_layers=2)
    model = BertModel(config, dtype=dtype)
    randomize(model, seed=4, scale=0.2)
    inputs = random_inputs(config, batch=4, seq=12, seed=9, pad=True)
    inputs["input_mask"][3, 1:] = 0  # a row with only [CLS]
    full = model(inputs)
    fast = padding_free_forward(model, inputs)
    mask = inputs["input_mask"].astype(bool)
    sequence = np.asarray(fast["sequence_output"], np.float32)
    np.testing.assert_allclose(sequence[mask], np.asarray(full["sequence_output"], np.float32)[mask], atol=atol)
    assert not sequence[~mask].any()
    np.testing.assert_allclose(np.asarray(fast["pooled_output"], np.float32),
                               np.asarray(full["pooled_output"], np.float32), atol=atol)
