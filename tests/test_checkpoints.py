"""Original-format checkpoints: loss-free round trips, readable by the
original's own restore mechanism and by tf-models-official's converter."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.checkpoints.name_map import original_variable_map
from keras_bert_impl.checkpoints.original import (
    list_original_variables,
    load_original_checkpoint,
    original_weights,
    save_original_checkpoint,
)
from keras_bert_impl.errors import CheckpointError
from keras_bert_impl.models.bert_model import BertModel
from keras_bert_impl.models.classifier import BertClassifier
from keras_bert_impl.models.pretraining import BertPretrainingModel
from tests.helpers import random_inputs, randomize, tiny_config


def original_names_and_shapes(config):
    """The variable list of an original pretraining checkpoint, written out
    from google-research/bert's modeling.py / run_pretraining.py scopes."""
    h, i, v = config.hidden_size, config.intermediate_size, config.vocab_size
    names = {
        "bert/embeddings/word_embeddings": (v, h),
        "bert/embeddings/token_type_embeddings": (config.type_vocab_size, h),
        "bert/embeddings/position_embeddings": (config.max_position_embeddings, h),
        "bert/embeddings/LayerNorm/gamma": (h,),
        "bert/embeddings/LayerNorm/beta": (h,),
        "bert/pooler/dense/kernel": (h, h),
        "bert/pooler/dense/bias": (h,),
        "cls/predictions/transform/dense/kernel": (h, h),
        "cls/predictions/transform/dense/bias": (h,),
        "cls/predictions/transform/LayerNorm/gamma": (h,),
        "cls/predictions/transform/LayerNorm/beta": (h,),
        "cls/predictions/output_bias": (v,),
        "cls/seq_relationship/output_weights": (2, h),
        "cls/seq_relationship/output_bias": (2,),
    }
    for n in range(config.num_hidden_layers):
        p = f"bert/encoder/layer_{n}/"
        for part in ("query", "key", "value"):
            names[p + f"attention/self/{part}/kernel"] = (h, h)
            names[p + f"attention/self/{part}/bias"] = (h,)
        names[p + "attention/output/dense/kernel"] = (h, h)
        names[p + "attention/output/dense/bias"] = (h,)
        names[p + "attention/output/LayerNorm/gamma"] = (h,)
        names[p + "attention/output/LayerNorm/beta"] = (h,)
        names[p + "intermediate/dense/kernel"] = (h, i)
        names[p + "intermediate/dense/bias"] = (i,)
        names[p + "output/dense/kernel"] = (i, h)
        names[p + "output/dense/bias"] = (h,)
        names[p + "output/LayerNorm/gamma"] = (h,)
        names[p + "output/LayerNorm/beta"] = (h,)
    return names


def write_tf1_checkpoint(prefix, names_and_shapes, seed=0, with_optimizer_slots=True):
    """Writes a checkpoint the way the original code does: TF1 variables in a
    graph, saved by tf.compat.v1.train.Saver (independent of our writer)."""
    rng = np.random.default_rng(seed)
    values = {}
    graph = tf.Graph()
    with graph.as_default():
        variables = []
        for name, shape in names_and_shapes.items():
            values[name] = rng.normal(0, 0.5, shape).astype(np.float32)
            variables.append(tf.compat.v1.get_variable(name, initializer=values[name]))
            if with_optimizer_slots:
                for slot in ("adam_m", "adam_v"):
                    variables.append(tf.compat.v1.get_variable(f"{name}/{slot}", initializer=np.zeros(shape, np.float32)))
        variables.append(tf.compat.v1.get_variable("global_step", initializer=np.int64(1000)))
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, prefix, write_meta_graph=False)
    return values


@pytest.fixture(scope="module")
def original_release(tmp_path_factory):
    config = tiny_config()
    directory = tmp_path_factory.mktemp("original")
    prefix = str(directory / "bert_model.ckpt")
    values = write_tf1_checkpoint(prefix, original_names_and_shapes(config))
    config.to_json_file(directory / "bert_config.json")
    return config, prefix, values


def test_original_checkpoint_round_trip_is_bit_identical(original_release, tmp_path):
    config, prefix, values = original_release
    model = BertPretrainingModel(config)
    report = load_original_checkpoint(model, prefix)
    assert sorted(report.loaded) == sorted(values)
    assert not report.missing and not report.unexpected and not report.mismatched

    out = save_original_checkpoint(model, str(tmp_path / "bert_model.ckpt"))
    reader = tf.train.load_checkpoint(out)
    written = reader.get_variable_to_shape_map()
    assert set(written) == set(values)
    dtypes = reader.get_variable_to_dtype_map()
    for name, value in values.items():
        got = reader.get_tensor(name)
        assert dtypes[name] == tf.float32
        assert got.shape == value.shape
        assert got.tobytes() == value.tobytes(), name


@pytest.mark.parametrize("dtype", [None, "bfloat16"])
def test_written_checkpoint_restores_with_the_originals_mechanism(tmp_path, dtype):
    """run_classifier/run_pretraining restore with init_from_checkpoint and an
    assignment map of identical names; do exactly that in a TF1 graph. A
    model built in bfloat16 is written in float32 too: TF1 refuses a
    bfloat16 tensor for a float variable."""
    config = tiny_config()
    model = BertPretrainingModel(config, dtype=dtype)
    randomize(model, seed=11)
    expected = {
        name: np.asarray(variable.numpy()).astype(np.float32)
        for name, variable in original_variable_map(model).items()
    }
    prefix = save_original_checkpoint(model, str(tmp_path / "bert_model.ckpt"), global_step=42)

    graph = tf.Graph()
    with graph.as_default():
        tf1_vars = {
            name: tf.compat.v1.get_variable(name, shape=shape, initializer=tf.compat.v1.zeros_initializer())
            for name, shape in original_names_and_shapes(config).items()
        }
        assignment_map = {name: name for name, _ in tf.train.list_variables(prefix) if name in tf1_vars}
        tf.compat.v1.train.init_from_checkpoint(prefix, assignment_map)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            restored = session.run(tf1_vars)
    assert set(restored) == set(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(restored[name], value, err_msg=name)
    assert tf.train.load_checkpoint(prefix).get_tensor("global_step") == 42


def test_tf_models_converter_reads_our_checkpoint(tmp_path):
    """tf-models-official's TF1->TF2 BERT converter is an independent reader of
    the original layout: its encoder, restored from our checkpoint, must give
    our numbers."""
    from official.legacy.bert import configs
    from official.nlp.tools import tf2_bert_encoder_checkpoint_converter as converter

    config = tiny_config()
    model = BertModel(config)
    randomize(model, seed=13)
    prefix = save_original_checkpoint(model, str(tmp_path / "ours" / "bert_model.ckpt"))
    config.to_json_file(tmp_path / "ours" / "bert_config.json")

    tf_models_config = configs.BertConfig.from_json_file(str(tmp_path / "ours" / "bert_config.json"))
    converted = str(tmp_path / "converted" / "ckpt")
    converter.convert_checkpoint(tf_models_config, converted, prefix, converted_model="encoder")
    encoder = converter._create_bert_model(tf_models_config)
    saved = tf.train.latest_checkpoint(str(tmp_path / "converted"))
    tf.train.Checkpoint(model=encoder).read(saved).assert_existing_objects_matched()

    inputs = random_inputs(config)
    sequence_output, pooled_output = encoder(
        [inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"]]
    )
    ours = model(inputs)
    np.testing.assert_allclose(ours["sequence_output"], sequence_output, atol=1e-5)
    np.testing.assert_allclose(ours["pooled_output"], pooled_output, atol=1e-5)


def test_checkpoint_of_another_size_is_refused_with_names(original_release):
    _, prefix, _ = original_release
    model = BertModel(tiny_config(hidden_size=8, num_attention_heads=2))
    before = [v.numpy().copy() for v in model.weights]
    with pytest.raises(CheckpointError) as error:
        load_original_checkpoint(model, prefix)
    message = str(error.value)
    assert prefix in message and "shape-mismatched" in message
    assert "bert/embeddings/word_embeddings: checkpoint [50, 16] vs model [50, 8]" in message
    assert "\n" not in message
    # Nothing was assigned.
    for variable, value in zip(model.weights, before):
        np.testing.assert_array_equal(variable.numpy(), value)


def test_partial_load_needs_explicit_permission(original_release):
    config, prefix, values = original_release
    classifier = BertClassifier(config, num_labels=3)
    with pytest.raises(CheckpointError, match="2 missing .*output_weights; output_bias"):
        load_original_checkpoint(classifier, prefix)
    report = load_original_checkpoint(classifier, prefix, allow_fresh=["output_weights", "output_bias"])
    assert report.fresh == ["output_weights", "output_bias"]
    assert "cls/predictions/output_bias" in report.unexpected
    np.testing.assert_array_equal(
        classifier.bert.word_embedding.embeddings.numpy(), values["bert/embeddings/word_embeddings"]
    )


def test_more_layers_in_model_than_checkpoint_is_missing(original_release):
    config, prefix, _ = original_release
    deeper = BertModel(tiny_config(num_hidden_layers=3))
    with pytest.raises(CheckpointError, match="missing .*bert/encoder/layer_2/"):
        load_original_checkpoint(deeper, prefix)


def test_missing_checkpoint_file(tmp_path):
    with pytest.raises(CheckpointError, match="checkpoint not found"):
        load_original_checkpoint(BertModel(tiny_config()), str(tmp_path / "nope.ckpt"))


def test_directory_with_checkpoint_state_file(tmp_path):
    model = BertModel(tiny_config())
    randomize(model, seed=2)
    save_original_checkpoint(model, str(tmp_path / "bert_model.ckpt"))
    other = BertModel(tiny_config())
    load_original_checkpoint(other, str(tmp_path))
    for a, b in zip(model.weights, other.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert "bert/pooler/dense/kernel" in list_original_variables(str(tmp_path / "bert_model.ckpt"))


def test_interrupted_write_leaves_no_complete_looking_files(tmp_path, monkeypatch):
    model = BertModel(tiny_config())

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(tf.raw_ops, "SaveV2", boom)
    with pytest.raises(OSError):
        save_original_checkpoint(model, str(tmp_path / "bert_model.ckpt"))
    assert os.listdir(tmp_path) == []


def test_interrupted_overwrite_never_pairs_new_data_with_the_old_index(tmp_path, monkeypatch):
    """Killed between its two renames over an existing checkpoint, a write
    leaves a prefix that reads as missing, not the new .data under the old .index."""
    from keras_bert_impl import filesystem

    prefix = str(tmp_path / "bert_model.ckpt")
    save_original_checkpoint(BertModel(tiny_config()), prefix)
    renames = []
    real_rename = filesystem.rename

    def rename_then_die(source, target, *args, **kwargs):
        if target.endswith(".index"):
            raise OSError("killed")
        renames.append(target)
        return real_rename(source, target, *args, **kwargs)

    monkeypatch.setattr(filesystem, "rename", rename_then_die)
    other = BertModel(tiny_config())
    randomize(other, seed=9)
    with pytest.raises(OSError, match="killed"):
        save_original_checkpoint(other, prefix)
    assert renames == [prefix + ".data-00000-of-00001"]  # the new data is in place ...
    assert not os.path.exists(prefix + ".index")  # ... and no index claims the checkpoint is whole
    with pytest.raises(CheckpointError):
        load_original_checkpoint(BertModel(tiny_config()), prefix)
    assert not [name for name in os.listdir(tmp_path) if ".partial-" in name]


def test_every_variable_is_mapped_once():
    model = BertPretrainingModel(tiny_config())
    mapped = original_variable_map(model)
    assert len({id(v) for v in mapped.values()}) == len(mapped) == len(model.weights)
    classifier = BertClassifier(tiny_config(), num_labels=2)
    assert len(original_variable_map(classifier)) == len(classifier.weights)


@pytest.mark.parametrize("model_fn", [
    lambda c: BertModel(c, output_all_encoder_layers=True),
    lambda c: BertPretrainingModel(c),
    lambda c: BertClassifier(c, num_labels=3),
])
def test_keras_native_save_load(model_fn, tmp_path):
    config = tiny_config()
    model = model_fn(config)
    randomize(model, seed=4)
    inputs = random_inputs(config)
    if isinstance(model, BertPretrainingModel):
        inputs["masked_lm_positions"] = np.array([[1, 2], [0, 3], [4, 5]], "int32")
    expected = keras.tree.map_structure(np.asarray, model(inputs))

    path = str(tmp_path / "model.keras")
    model.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    assert type(restored) is type(model)
    keras.tree.map_structure(np.testing.assert_array_equal, expected, restored(inputs))

    weights_path = str(tmp_path / "model.weights.h5")
    model.save_weights(weights_path)
    fresh = model_fn(config)
    fresh.load_weights(weights_path)
    keras.tree.map_structure(np.testing.assert_array_equal, expected, fresh(inputs))
