"""`.keras` model files where the tools take an original checkpoint: a saved
`TextClassifier` exports to a SavedModel that predicts as it does; a user's
own model around `BertModel` starts `run_classifier` from its encoder; bad
files (a `Lambda` refused by safe_mode, corrupt, no BertModel, another
config, vocabulary or casing) are one line on stderr."""

import dataclasses
import os
import subprocess
import sys
import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl import BertPreprocessor, TextClassifier
from keras_bert_impl.checkpoints.keras_file import read_keras_file
from keras_bert_impl.checkpoints.original import load_original_checkpoint
from keras_bert_impl.cli import run_tool
from keras_bert_impl.models.bert_model import BertModel
from keras_bert_impl.models.classifier import BertClassifier
from keras_bert_impl.tasks.classifier import CLASSIFIER
from keras_bert_impl.training.fine_tuning import load_initial_weights
from tests.helpers import randomize, tiny_config
from tools import export_saved_model, run_classifier

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "plot", "not", ".", "the"]
# One encoder layer: the tests are about files, and the tools trace (and the export verifies) per layer.
CONFIG = tiny_config(vocab_size=len(VOCAB), num_hidden_layers=1)
TEXTS = ["good film .", "the plot is not good", "bad", "Film, film; FILM!"]


def write_release(directory, config=CONFIG, vocab=VOCAB):
    """`bert_config.json` and `vocab.txt`: the files the tools take beside `--init_checkpoint`."""
    directory.mkdir(parents=True, exist_ok=True)
    config.to_json_file(directory / "bert_config.json")
    (directory / "vocab.txt").write_text("".join(f"{token}\n" for token in vocab), encoding="utf-8")
    return directory


def users_model(head_layer=None):
    """A model as a user writes one: their own inputs, our `BertModel`, their own head."""
    inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
              for name in ("input_ids", "input_mask", "segment_ids")}
    encoder = BertModel(CONFIG, name="encoder")
    features = keras.layers.Dropout(0.1)(encoder(inputs)["pooled_output"])
    logits = keras.layers.Dense(2, name="my_head")(features)
    if head_layer is not None:
        logits = head_layer(logits)
    return keras.Model(inputs, logits, name="users_model"), encoder


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The saved `.keras` files and a release of the same config and vocabulary."""
    root = tmp_path_factory.mktemp("keras_files")
    keras.utils.set_random_seed(0)
    classifier = TextClassifier(CONFIG, num_classes=3, preprocessor=BertPreprocessor(VOCAB, max_seq_length=12))
    randomize(classifier, seed=3, scale=0.1)
    classifier.save(root / "classifier.keras")
    users, encoder = users_model()
    randomize(users, seed=4, scale=0.1)
    users.save(root / "users.keras")
    unsafe, _ = users_model(keras.layers.Lambda(lambda logits: logits * 2.0))
    unsafe.save(root / "lambda.keras")
    plain = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    plain.save(root / "no_bert.keras")
    (root / "corrupt.keras").write_bytes(b"PK\x03\x04 not really a zip archive")
    with zipfile.ZipFile(root / "users.keras") as saved, zipfile.ZipFile(root / "broken_weights.keras", "w") as broken:
        for name in saved.namelist():  # the same archive, its weights cut short
            broken.writestr(name, saved.read(name)[:100] if name.endswith(".h5") else saved.read(name))
    return {
        "root": root,
        "release": write_release(root / "release"),
        "classifier": classifier,
        "encoder_weights": [variable.numpy() for variable in encoder.weights],
    }


def run(tool, argv, capsys):
    """Runs a tool in-process; returns `(exit code, stderr lines)`."""
    capsys.readouterr()
    code = run_tool(tool.main, argv, prog=tool.__name__.split(".")[-1])
    return code, capsys.readouterr().err.strip().splitlines()


def release_flags(release):
    return [f"--bert_config_file={release / 'bert_config.json'}", f"--vocab_file={release / 'vocab.txt'}"]


def test_saved_text_classifier_exports_with_its_predictions(files):
    # A process of its own: the tool has imported none of the Python task
    # models, whose classes the file names. --noverify: what is checked here
    # is that the file's classifier is what gets exported, by its predictions
    # below; the tool's verification (the export served as TF Serving loads
    # it, about a sixth of the tool's time) has its own tests (test_verification).
    root = files["root"]
    command = [sys.executable, "-m", "tools.export_saved_model", *release_flags(files["release"]),
               f"--init_checkpoint={root / 'classifier.keras'}", "--task=classifier", "--num_labels=3",
               "--max_seq_length=12", f"--export_dir={root / 'saved_models' / 'sentiment'}", "--version=1",
               "--precision=float32", "--noverify"]  # compared with the float32 model at 1e-5, on any CPU
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    served = tf.saved_model.load(str(root / "saved_models" / "sentiment" / "1")).signatures["serving_default"]
    probabilities = served(text=tf.constant(TEXTS))["probabilities"].numpy()
    expected = files["classifier"].predict(TEXTS, verbose=0)
    assert not np.allclose(expected, 1 / 3, atol=1e-3)  # randomized weights: no near-uniform head to hide behind
    np.testing.assert_allclose(probabilities, expected, atol=1e-5)


def test_users_own_model_starts_run_classifier_from_its_encoder(files, tmp_path, capsys):
    path = files["root"] / "users.keras"
    keras_file = read_keras_file(path)
    assert keras_file.bert_config == CONFIG and keras_file.vocabularies == ()
    assert {"my_head/kernel", "my_head/bias"} <= set(keras_file.tensors)  # theirs: reported, never loaded

    # Before training: the encoder is the file's, variable by variable (in
    # the order both BertModels create them); our fresh head stays as built.
    keras.utils.set_random_seed(1)
    model = BertClassifier(CONFIG, num_labels=2)
    fresh_head = [variable.numpy() for variable in model.head.weights]
    messages = []
    load_initial_weights(model, str(path), CLASSIFIER.head_variables, log=messages.append)
    assert len(model.bert.weights) == len(files["encoder_weights"])
    for variable, saved in zip(model.bert.weights, files["encoder_weights"]):
        np.testing.assert_array_equal(variable.numpy(), saved, err_msg=variable.path)
    for variable, initial in zip(model.head.weights, fresh_head):
        np.testing.assert_array_equal(variable.numpy(), initial)
    assert "2 unexpected (e.g. my_head/bias; my_head/kernel)" in messages[0]

    # The tool: two steps at a learning rate too small to move a weight by
    # 1e-6, so the release it writes still holds the file's encoder.
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.csv").write_text(
        "text,label\n" + "".join(f"{text},{i % 2}\n" for i, text in enumerate(["good film", "bad plot"] * 4)),
        encoding="utf-8",
    )
    code, lines = run(run_classifier, release_flags(files["release"]) + [
        "--task_name=csv", f"--data_dir={data}", "--do_train", f"--init_checkpoint={path}",
        f"--output_dir={tmp_path / 'out'}", "--max_seq_length=12", "--train_batch_size=4",
        "--num_train_epochs=1", "--learning_rate=1e-9",
    ], capsys)
    assert code == 0, lines
    assert any(f"{path}: 23 loaded, 2 missing" in line for line in lines)
    trained = BertModel(CONFIG)
    load_original_checkpoint(trained, tmp_path / "out" / "model.ckpt")
    for variable, saved in zip(trained.weights, files["encoder_weights"]):
        np.testing.assert_allclose(variable.numpy(), saved, atol=1e-6, err_msg=variable.path)


def test_our_head_in_a_users_model_is_read_under_the_classifier_names(tmp_path):
    from keras_bert_impl.layers.heads import OutputProjection

    model, _ = users_model(OutputProjection(3, name="their_output"))
    randomize(model, seed=5)
    model.save(tmp_path / "with_our_head.keras")
    tensors = read_keras_file(tmp_path / "with_our_head.keras").tensors
    head = model.get_layer("their_output")
    np.testing.assert_array_equal(tensors["output_weights"], head.output_weights.numpy())  # [num_labels, H]: 3 x 2
    np.testing.assert_array_equal(tensors["output_bias"], head.output_bias.numpy())
    assert sorted(name for name in tensors if not name.startswith("bert/")) == [
        "my_head/bias", "my_head/kernel", "output_bias", "output_weights",
    ]


def test_file_without_a_fine_tuned_head_is_refused_for_prediction(files, tmp_path, capsys):
    path = files["root"] / "users.keras"
    (tmp_path / "test.csv").write_text("text\ngood film\n", encoding="utf-8")
    code, lines = run(run_classifier, release_flags(files["release"]) + [
        "--task_name=csv", f"--data_dir={tmp_path}", "--labels=a,b", "--do_predict", f"--init_checkpoint={path}",
        f"--output_dir={tmp_path / 'out'}", "--max_seq_length=12",
    ], capsys)
    assert code == 1
    assert lines[-1] == (f"run_classifier: error: {path}: has no output_weights or output_bias, so it is not "
                         "fine-tuned for classification (add --do_train to fine-tune it)")


@pytest.mark.parametrize("tool", [export_saved_model, run_classifier], ids=["export", "run_classifier"])
@pytest.mark.parametrize("name, reason", [
    ("lambda.keras", "refused in safe_mode: Requested the deserialization of a `Lambda` layer"),
    ("corrupt.keras", "not a .keras model file (not a zip archive)"),
    ("broken_weights.keras", "not a loadable Keras model file ("),  # then h5py's reason
    ("no_bert.keras", "holds no BertModel"),
    ("missing.keras", ".keras model file not found"),
], ids=["lambda", "corrupt", "broken_weights", "no_bert", "missing"])
def test_bad_keras_files_are_one_line(files, tmp_path, capsys, tool, name, reason):
    path = files["root"] / name
    if tool is export_saved_model:
        extra = ["--task=classifier", f"--export_dir={tmp_path / 'export'}"]
    else:
        extra = ["--task_name=csv", f"--data_dir={tmp_path}", "--do_predict", f"--output_dir={tmp_path / 'out'}"]
    code, lines = run(tool, release_flags(files["release"]) + [
        f"--init_checkpoint={path}", "--max_seq_length=12", *extra,
    ], capsys)
    assert code == 1
    errors = [line for line in lines if ": error: " in line]
    assert len(errors) == 1 and errors[0].startswith(f"{tool.__name__.split('.')[-1]}: error: {path}: {reason}")
    assert not any("Traceback" in line for line in lines)
    assert not os.path.exists(tmp_path / "export")


@pytest.mark.parametrize("release_of, flag, message", [
    (lambda root: write_release(root, config=dataclasses.replace(CONFIG, intermediate_size=24)),
     "--do_lower_case", "its BertConfig differs from {release}/bert_config.json (intermediate_size 32 vs 24)"),
    (lambda root: write_release(root, vocab=VOCAB + ["plots"]), "--do_lower_case",
     "its preprocessor's vocabulary has 12 tokens, {release}/vocab.txt has 13"),
    (write_release, "--nodo_lower_case", "its preprocessor has do_lower_case=True; pass --do_lower_case=True"),
], ids=["config", "vocab", "casing"])
def test_keras_file_of_another_release_is_refused(files, tmp_path, capsys, release_of, flag, message):
    release = release_of(tmp_path / "release")
    path = files["root"] / "classifier.keras"
    code, lines = run(export_saved_model, release_flags(release) + [
        f"--init_checkpoint={path}", "--task=classifier", "--num_labels=3", "--max_seq_length=12", flag,
        f"--export_dir={tmp_path / 'export'}",
    ], capsys)
    assert code == 1
    assert lines[-1] == f"export_saved_model: error: {path}: " + message.format(release=release)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "held_bfloat16"])
def test_a_models_dtype_policy_survives_config_and_keras_file(tmp_path, policy):
    """Keras's functional model keeps no policy of its own: ours keep the one
    their layers were built with, so a reloaded model computes as it did."""
    config = tiny_config()
    model = BertClassifier(config, num_labels=2)
    randomize(model, seed=4, scale=0.2)
    if policy == "held_bfloat16":  # the per-layer map that bfloat16 exports build with
        from keras_bert_impl.inference.precision import copy_weights, inference_dtype_policy

        built = BertClassifier(config, num_labels=2, dtype=inference_dtype_policy(model, "bfloat16"))
        copy_weights(model, built)
    else:
        built = BertClassifier(config, num_labels=2, dtype=policy)
        built.set_weights(model.get_weights())
    inputs = {"input_ids": np.array([[2, 7, 9, 3, 0]], "int32"), "input_mask": np.array([[1, 1, 1, 1, 0]], "int32"),
              "segment_ids": np.zeros((1, 5), "int32")}
    layout = lambda m: [(v.path, v.dtype) for v in m.weights]  # noqa: E731

    rebuilt = BertClassifier.from_config(built.get_config())
    built.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    for other in (rebuilt, loaded):
        assert other.bert.encoder.compute_dtype == "bfloat16"
        assert layout(other) == layout(built)
    np.testing.assert_array_equal(loaded(inputs).numpy(), built(inputs).numpy())
    # None: the global policy at build time is what is kept.
    assert BertModel(config).get_config()["dtype"]["config"]["name"] == "float32"


@pytest.mark.parametrize("partly", [False, True])
def test_a_frozen_encoder_stays_frozen_in_config_and_keras_file(tmp_path, partly):
    """A head-only fine-tune (encoder frozen after construction) resumes head-only."""
    model = BertClassifier(tiny_config(), num_labels=2)
    model.bert.trainable = False
    if partly:  # the embeddings and pooler frozen, the transformer layers not
        model.bert.encoder.trainable = True
    trainable = sorted(v.path for v in model.trainable_weights)
    assert (trainable == ["output/output_bias", "output/output_weights"]) != partly
    assert trainable and len(trainable) < len(model.weights)
    model.save(tmp_path / "model.keras")
    for other in (BertClassifier.from_config(model.get_config()), keras.saving.load_model(tmp_path / "model.keras")):
        assert sorted(v.path for v in other.trainable_weights) == trainable
        assert other.get_config() == model.get_config()


def test_real_tokens_only_set_after_construction_is_kept(tmp_path):
    """`set_real_tokens_only` on a functional model: the rebuilt and the
    loaded model compute on real tokens too (was: back to full width)."""
    from keras_bert_impl.layers.transformer import TransformerEncoder
    from keras_bert_impl.inference.padding_free import set_real_tokens_only

    def encoders(model):
        return [layer.real_tokens_only for layer in model._flatten_layers() if isinstance(layer, TransformerEncoder)]

    model = BertClassifier(tiny_config(), num_labels=2)
    assert encoders(model) == [False]
    assert BertClassifier.from_config(model.get_config()).get_config() == model.get_config()
    assert set_real_tokens_only(model) == 1
    model.save(tmp_path / "model.keras")
    for other in (BertClassifier.from_config(model.get_config()), keras.saving.load_model(tmp_path / "model.keras")):
        assert encoders(other) == [True]
        assert other.get_config() == model.get_config()
