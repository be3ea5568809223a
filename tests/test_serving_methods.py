"""TF Serving's layout and methods: the root `models.config`, the `classify`
and `regress` signatures run as tensorflow_model_server runs them (request
protos in, response protos built as classifier.cc / regressor.cc build them,
checked against the model's own predictions), the REST and gRPC clients'
classify/regress, and an export to `ram://` loaded back."""

import os
import uuid

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl import filesystem
from keras_bert_impl.models.classifier import BertClassifier
from keras_bert_impl.serving.client import GrpcClient, RestClient, ServingError
from keras_bert_impl.serving.export import ExportError, ExportOptions, export_saved_model
from keras_bert_impl.serving import tf_serving_files
from keras_bert_impl.serving.tf_serving_files import write_models_config
from keras_bert_impl.serving.versions import publish_version
from tests.helpers import randomize, tiny_config
from tests.serving_fixture import LoopbackServingFixture, read_signature_defs

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "weather", "is", "good", "bad", ".", "a", "film"]
SEQ = 12
LABELS = ["negative", "neutral", "positive"]
# [CLS] the weather is good . [SEP] / [CLS] a film [SEP] bad [SEP], as ids.
ID_ROWS = [[2, 5, 6, 7, 8, 10, 3], [2, 11, 12, 3, 9, 3]]
SEGMENT_ROWS = [[0] * 7, [0, 0, 0, 0, 1, 1]]


def padded(row, value=0):
    return row + [value] * (SEQ - len(row))


def id_features():
    """The requests as int32 [2, SEQ] `input_ids`, `input_mask`, `segment_ids`."""
    return {
        "input_ids": np.array([padded(r) for r in ID_ROWS], np.int32),
        "input_mask": np.array([padded([1] * len(r)) for r in ID_ROWS], np.int32),
        "segment_ids": np.array([padded(r) for r in SEGMENT_ROWS], np.int32),
    }


def feature_dicts():
    """The requests as tf-models feature dicts, one per example."""
    features = id_features()
    return [
        {"input_word_ids": features["input_ids"][i].tolist(), "input_mask": features["input_mask"][i].tolist(),
         "input_type_ids": features["segment_ids"][i].tolist()}
        for i in range(len(ID_ROWS))
    ]


def example(features):
    return tf.train.Example(features=tf.train.Features(feature={
        name: tf.train.Feature(int64_list=tf.train.Int64List(value=values)) for name, values in features.items()
    }))


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """A classifier (`sentiment`) and a regression (`similarity`) under one export base."""
    base = tmp_path_factory.mktemp("saved_models")
    (base / "vocab.txt").write_text("".join(f"{token}\n" for token in VOCAB), encoding="utf-8")
    # One encoder layer: what is tested is the serving layout and methods, not the layers.
    config = tiny_config(vocab_size=len(VOCAB), max_position_embeddings=SEQ, num_hidden_layers=1)
    models = {"sentiment": BertClassifier(config, num_labels=len(LABELS)), "similarity": BertClassifier(config, num_labels=1)}
    paths = {}
    for seed, (name, task) in enumerate((("sentiment", "classifier"), ("similarity", "regression"))):
        randomize(models[name], seed=seed + 5, scale=0.1)
        paths[name] = export_saved_model(
            models[name], task, base / "vocab.txt", base / name,
            ExportOptions(max_seq_length=SEQ, label_names=LABELS if task == "classifier" else None),
        )
    return base, models, paths


@pytest.fixture(scope="module")
def served(exports):
    """Each export loaded once as TF Serving loads it, shared by the request and client tests."""
    _, _, paths = exports
    fixtures = {name: LoopbackServingFixture(path, name) for name, path in paths.items()}
    yield fixtures
    for fixture in fixtures.values():
        fixture.stop()


# -- models.config ----------------------------------------------------------------


def parse_models_config(path):
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    with filesystem.open_file(path) as f:
        return text_format.Parse(f.read(), model_server_config_pb2.ModelServerConfig())


def test_one_models_config_at_the_export_base(exports):
    base, _, _ = exports
    config = parse_models_config(base / "models.config")
    assert [(c.name, c.base_path, c.model_platform) for c in config.model_config_list.config] == [
        ("sentiment", "/models/sentiment", "tensorflow"), ("similarity", "/models/similarity", "tensorflow"),
    ]
    assert sorted(os.listdir(base)) == ["models.config", "sentiment", "similarity", "vocab.txt"]


def test_models_config_lists_only_directories_with_versions(tmp_path):
    base = tmp_path / "saved_models"
    for path in ("zeta/3", "alpha/1", "alpha/12", "no_versions/.tmp-abc", "files_only", "beta/1"):
        (base / path).mkdir(parents=True)
    (base / "files_only" / "7").write_text("a file, not a version directory")
    (base / "notes.txt").write_text("")
    path = write_models_config(base, serving_base_path="gs://bucket/saved_models/")
    config = parse_models_config(path)
    assert [(c.name, c.base_path) for c in config.model_config_list.config] == [
        ("alpha", "gs://bucket/saved_models/alpha"), ("beta", "gs://bucket/saved_models/beta"),
        ("zeta", "gs://bucket/saved_models/zeta"),
    ]
    before = open(path, "rb").read()
    write_models_config(base, serving_base_path="gs://bucket/saved_models/")
    assert open(path, "rb").read() == before  # stable: the same models give the same bytes
    assert sorted(os.listdir(base)) == ["alpha", "beta", "files_only", "models.config", "no_versions", "notes.txt", "zeta"]


def test_models_config_written_by_someone_else_is_merged_into(tmp_path):
    """An entry of a model outside the directory (another path, a version policy) stays as
    written; the directory's models are added (was: the file rewritten with ours only)."""
    base = tmp_path / "saved_models"
    (base / "alpha" / "1").mkdir(parents=True)
    theirs = (
        'model_config_list {\n  config {\n    name: "other"\n    base_path: "/elsewhere/other"\n'
        '    model_platform: "tensorflow"\n    model_version_policy { specific { versions: 4 } }\n  }\n}\n'
    )
    (base / "models.config").write_text(theirs)
    config = parse_models_config(write_models_config(base, serving_base_path="/models"))
    entries = {c.name: c for c in config.model_config_list.config}
    assert sorted(entries) == ["alpha", "other"]
    assert entries["other"].base_path == "/elsewhere/other"
    assert list(entries["other"].model_version_policy.specific.versions) == [4]
    assert entries["alpha"].base_path == "/models/alpha"


def test_an_export_of_another_model_meanwhile_is_not_dropped_from_models_config(tmp_path, monkeypatch):
    """Two exports of different models under one base, the second publishing and writing
    models.config while the first is between reading the directory and writing the file:
    both models stay listed (was: the first's write, made from what it read before, named
    only its own model, so a TF Serving that polls the file unloaded the other)."""
    base = tmp_path / "saved_models"
    (base / "alpha" / "1").mkdir(parents=True)
    real_write = tf_serving_files.write_text_atomically
    interleaved = []

    def write_after_another_export(path, text):
        if not interleaved:  # the other export publishes beta/1 and writes its file first
            interleaved.append(text)
            (base / "beta" / "1").mkdir(parents=True)
            write_models_config(base, serving_base_path="/models")
        real_write(path, text)

    monkeypatch.setattr(tf_serving_files, "write_text_atomically", write_after_another_export)
    path = write_models_config(base, serving_base_path="/models")
    assert 'name: "beta"' not in interleaved[0]  # the fault happened: a stale file was written over beta's
    names = [c.name for c in parse_models_config(path).model_config_list.config]
    assert names == ["alpha", "beta"]
    assert sorted(os.listdir(base)) == ["alpha", "beta", "models.config"]  # no partial file left


def test_a_models_config_kept_stale_by_another_writer_is_an_error_naming_the_model(tmp_path, monkeypatch):
    base = tmp_path / "saved_models"
    for name in ("alpha", "beta"):
        (base / name / "1").mkdir(parents=True)
    real_write = tf_serving_files.write_text_atomically
    writes = []

    def another_writer_wins(path, text):  # a writer that lists alpha only writes after each of ours
        writes.append(text)
        real_write(path, tf_serving_files.models_config_text(["alpha"], "/models"))

    monkeypatch.setattr(tf_serving_files, "write_text_atomically", another_writer_wins)
    with pytest.raises(ExportError, match=r"models.config: still lacks \['beta'\] after 10 writes"):
        write_models_config(base, serving_base_path="/models")
    assert len(writes) == 10 and all('name: "beta"' in text for text in writes)


@pytest.mark.parametrize("content, fragment", [
    ("model_config_list { config { nme: 1 } }", "not a TF Serving model config in text format"),
    ("custom_model_config { }", "a custom_model_config, which an export cannot add its model to"),
])
def test_a_models_config_an_export_cannot_merge_into_is_refused_before_the_export(tmp_path, content, fragment):
    base = tmp_path / "saved_models"
    base.mkdir()
    (base / "models.config").write_text(content)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good"]) + "\n")
    model = BertClassifier(tiny_config(vocab_size=6, max_position_embeddings=8), num_labels=2)
    with pytest.raises(ExportError, match=fragment):
        export_saved_model(model, "classifier", str(vocab), base / "tiny", ExportOptions(max_seq_length=8))
    assert not (base / "tiny").exists() and (base / "models.config").read_text() == content


# -- classify and regress, as TF Serving runs them -----------------------------------


def test_method_names_and_signature_shapes(exports):
    _, _, paths = exports
    from tensorflow.core.framework import types_pb2

    classify = read_signature_defs(paths["sentiment"])["classify"]
    assert classify.method_name == "tensorflow/serving/classify"
    assert list(classify.inputs) == ["inputs"] and classify.inputs["inputs"].dtype == types_pb2.DT_STRING
    assert sorted(classify.outputs) == ["classes", "scores"]
    assert classify.outputs["classes"].dtype == types_pb2.DT_STRING
    assert classify.outputs["scores"].dtype == types_pb2.DT_FLOAT
    assert [d.size for d in classify.outputs["scores"].tensor_shape.dim] == [-1, len(LABELS)]

    signatures = read_signature_defs(paths["similarity"])
    regress = signatures["regress"]
    assert regress.method_name == "tensorflow/serving/regress"
    assert list(regress.inputs) == ["inputs"] and list(regress.outputs) == ["outputs"]
    assert regress.outputs["outputs"].dtype == types_pb2.DT_FLOAT
    assert [d.size for d in regress.outputs["outputs"].tensor_shape.dim] == [-1]
    # The predict signatures keep their method; a regression has no classify.
    assert signatures["serving_default"].method_name == "tensorflow/serving/predict" and "classify" not in signatures


def test_fingerprint_matches_the_rewritten_saved_model(exports):
    _, _, paths = exports
    from tensorflow.core.protobuf import fingerprint_pb2
    from tensorflow.python.saved_model.pywrap_saved_model import fingerprinting

    with open(os.path.join(paths["sentiment"], "fingerprint.pb"), "rb") as f:
        written = fingerprint_pb2.FingerprintDef.FromString(f.read())
    fresh = fingerprint_pb2.FingerprintDef.FromString(fingerprinting.CreateFingerprintDef(paths["sentiment"]))
    written.ClearField("uuid"), fresh.ClearField("uuid")  # random per fingerprint
    assert written == fresh and written.saved_model_checksum != 0


def test_classification_request_as_tf_serving_answers_it(exports, served):
    _, models, paths = exports
    from tensorflow_serving.apis import classification_pb2

    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "sentiment"
    request.model_spec.signature_name = "classify"
    for features in feature_dicts():
        request.input.example_list.examples.add().CopyFrom(example(features))
    fixture = served["sentiment"]
    response = fixture.classify(request)

    # The model's own predictions: the predict signature on the same ids, the label list in its assets.
    served = fixture.model.predict(id_features(), "serve_ids")
    with open(os.path.join(paths["sentiment"], "assets", "labels.txt"), encoding="utf-8") as f:
        labels = f.read().split()
    assert labels == LABELS
    assert len(response.result.classifications) == len(ID_ROWS)
    for row, classifications in enumerate(response.result.classifications):
        assert [c.label for c in classifications.classes] == labels
        np.testing.assert_allclose([c.score for c in classifications.classes], served["probabilities"][row], atol=1e-6)
    keras = tf.nn.softmax(models["sentiment"](id_features())).numpy()
    scores = [[c.score for c in cs.classes] for cs in response.result.classifications]
    np.testing.assert_allclose(scores, keras, atol=1e-5)

    # No signature name means serving_default, a predict signature: TF Serving refuses it, as any predict one.
    for name in ("", "serve_examples"):
        request.model_spec.signature_name = name
        with pytest.raises(ValueError, match="method_name to be tensorflow/serving/classify. Was: tensorflow/serving/predict"):
            fixture.classify(request)


def test_regression_request_as_tf_serving_answers_it(exports, served):
    _, models, paths = exports
    from tensorflow_serving.apis import regression_pb2

    request = regression_pb2.RegressionRequest()
    request.model_spec.name = "similarity"
    request.model_spec.signature_name = "regress"
    # The segment ids shared by both examples go in the context, which util.cc
    # prepends to each serialized example; the second example's own ids follow.
    features = feature_dicts()
    features[1]["input_type_ids"] = features[0]["input_type_ids"]
    request.input.example_list_with_context.context.CopyFrom(example({"input_type_ids": features[0]["input_type_ids"]}))
    for f in features:
        request.input.example_list_with_context.examples.add().CopyFrom(
            example({k: v for k, v in f.items() if k != "input_type_ids"})
        )
    fixture = served["similarity"]
    response = fixture.regress(request)

    inputs = id_features()
    inputs["segment_ids"][1] = 0
    served = fixture.model.predict(inputs, "serve_ids")["predictions"]
    values = [r.value for r in response.result.regressions]
    np.testing.assert_allclose(values, served, atol=1e-6)
    np.testing.assert_allclose(values, models["similarity"](inputs).numpy()[:, 0], atol=1e-5)

    request.model_spec.signature_name = "serve_examples"
    with pytest.raises(ValueError, match="method_name to be tensorflow/serving/regress"):
        fixture.regress(request)


def test_rest_and_grpc_classify_and_regress(exports, served):
    _, models, _ = exports
    expected_scores = tf.nn.softmax(models["sentiment"](id_features())).numpy()
    expected_values = models["similarity"](id_features()).numpy()[:, 0]
    for name in ("sentiment", "similarity"):
        fixture = served[name]  # its servers are stopped with the module's fixture
        rest = RestClient(fixture.start_rest(), name)
        grpc_client = GrpcClient(fixture.start_grpc(), name, timeout=30)
        if name == "sentiment":
            for client, examples in ((rest, feature_dicts()), (grpc_client, [example(f) for f in feature_dicts()])):
                results = client.classify(examples)
                assert [[label for label, _ in classes] for classes in results] == [LABELS, LABELS]
                np.testing.assert_allclose([[s for _, s in classes] for classes in results], expected_scores, atol=1e-5)
            with pytest.raises(ServingError, match="HTTP 400: .*method_name to be tensorflow/serving/regress"):
                rest.regress(feature_dicts(), signature_name="classify")
            with pytest.raises(ServingError, match="INVALID_ARGUMENT: .*tensorflow/serving/classify. Was: tensorflow/serving/predict"):
                grpc_client.classify(feature_dicts(), signature_name="")
        else:
            for client in (rest, grpc_client):
                np.testing.assert_allclose(client.regress(feature_dicts()), expected_values, atol=1e-5)
        assert rest.method_url("classify").endswith(f"/v1/models/{name}:classify")
        grpc_client.close()


# -- remote file systems ------------------------------------------------------------


def test_export_to_ram_and_load_back(exports):
    base, models, paths = exports
    remote_base = f"ram://serving-{uuid.uuid4().hex}/saved_models"
    try:
        path = export_saved_model(
            models["sentiment"], "classifier", base / "vocab.txt", f"{remote_base}/sentiment",
            ExportOptions(max_seq_length=SEQ, label_names=LABELS),
        )
        assert path == f"{remote_base}/sentiment/1"
        assert filesystem.listdir(f"{remote_base}/sentiment") == ["1"]  # nothing staged left behind
        assert filesystem.listdir(path) == ["assets", "assets.extra", "fingerprint.pb", "saved_model.pb", "variables"]
        assert read_signature_defs(path)["classify"].method_name == "tensorflow/serving/classify"
        config = parse_models_config(f"{remote_base}/models.config")
        assert [(c.name, c.base_path) for c in config.model_config_list.config] == [("sentiment", "/models/sentiment")]

        loaded = tf.saved_model.load(path)
        local = tf.saved_model.load(paths["sentiment"])
        texts = tf.constant(["the weather is good .", "a bad film"])
        np.testing.assert_allclose(
            loaded.signatures["serving_default"](text=texts)["probabilities"],
            local.signatures["serving_default"](text=texts)["probabilities"], atol=1e-6,
        )
        serialized = tf.constant([example(f).SerializeToString() for f in feature_dicts()])
        np.testing.assert_allclose(
            loaded.signatures["classify"](inputs=serialized)["scores"],
            tf.nn.softmax(models["sentiment"](id_features())).numpy(), atol=1e-5,
        )

        with pytest.raises(ExportError, match="version 1 already exists"):
            export_saved_model(
                models["sentiment"], "classifier", base / "vocab.txt", f"{remote_base}/sentiment",
                ExportOptions(max_seq_length=SEQ, label_names=LABELS, version=1),
            )
    finally:
        remove_ram_tree(remote_base)


def remove_ram_tree(path):
    """Deletes a `ram://` tree, best effort: TensorFlow's ram file system
    lists `assets.extra/` under `assets/` too, which its rmtree trips over."""
    try:
        filesystem.rmtree(path)
    except FileNotFoundError:
        pass


def test_publish_version_on_a_remote_file_system(tmp_path):
    staging = tmp_path / "staging"
    (staging / "variables").mkdir(parents=True)
    (staging / "saved_model.pb").write_bytes(b"graph")
    (staging / "variables" / "variables.index").write_bytes(b"index")
    export_dir = f"ram://publish-{uuid.uuid4().hex}/saved_models/tiny"
    copied = []
    real_copy = filesystem.copy

    def recording_copy(source, target, **options):
        copied.append(target)
        real_copy(source, target, **options)

    try:
        filesystem.makedirs(f"{export_dir}/1")
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(filesystem, "copy", recording_copy)
            assert publish_version(str(staging), export_dir) == f"{export_dir}/2"
        # saved_model.pb last: TF Serving takes a directory without it for an unfinished SavedModel.
        assert copied == [f"{export_dir}/2/variables/variables.index", f"{export_dir}/2/saved_model.pb"]
        with filesystem.open_file(f"{export_dir}/2/saved_model.pb", "rb") as f:
            assert f.read() == b"graph"
        with pytest.raises(ExportError, match="version 2 already exists"):
            publish_version(str(staging), export_dir, version=2)
    finally:
        remove_ram_tree(export_dir)
