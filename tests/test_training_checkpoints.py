"""Training checkpoints in the original run_pretraining layout resume exactly."""

import numpy as np
import tensorflow as tf

from keras_bert_impl.models.pretraining import BertPretrainingModel, split_pretraining_features
from keras_bert_impl.training.checkpointing import (
    TrainingCheckpoint,
    checkpoint_steps,
    restore_training_checkpoint,
    save_training_checkpoint,
)
from keras_bert_impl.training.optimization import create_optimizer
from tests.helpers import tiny_config
from tests.test_pretraining import pretraining_batch


def make(config):
    model = BertPretrainingModel(config)
    model.compile(optimizer=create_optimizer(1e-2, num_train_steps=20, num_warmup_steps=2))
    return model


def test_resume_continues_where_it_stopped(tmp_path):
    config = tiny_config(vocab_size=30, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    x, y = split_pretraining_features(pretraining_batch(config, batch=4, seed=5))
    reference = make(config)
    reference.fit(x, y, batch_size=2, epochs=2, shuffle=False, verbose=0)  # 4 steps
    prefix = save_training_checkpoint(reference, reference.optimizer, str(tmp_path))
    assert prefix.endswith("model.ckpt-4")

    names = dict(tf.train.list_variables(prefix))
    assert names["global_step"] == []
    assert names["bert/encoder/layer_0/attention/self/query/kernel/adam_m"] == [16, 16]
    assert "cls/predictions/output_bias/adam_v" in names

    resumed = make(config)
    assert restore_training_checkpoint(resumed, resumed.optimizer, prefix) == 4
    reference.fit(x, y, batch_size=2, epochs=1, shuffle=False, verbose=0)
    resumed.fit(x, y, batch_size=2, epochs=1, shuffle=False, verbose=0)
    assert int(resumed.optimizer.iterations.numpy()) == 6
    for a, b in zip(reference.weights, resumed.weights):
        # Equal up to float32 summation order in multi-threaded kernels.
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, err_msg=a.path)


def test_callback_saves_every_n_steps_and_keeps_the_last(tmp_path):
    config = tiny_config(vocab_size=30)
    x, y = split_pretraining_features(pretraining_batch(config, batch=8, seed=1))
    model = make(config)
    model.fit(x, y, batch_size=1, epochs=1, verbose=0, callbacks=[TrainingCheckpoint(str(tmp_path), every_n_steps=2, keep=2)])
    assert checkpoint_steps(str(tmp_path)) == [6, 8]
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-8")
