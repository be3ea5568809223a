"""SavedModel export: signatures served without any Python of ours, equal to
the in-memory Keras model; in-graph tokenization equal to FullTokenizer;
versioning, warmup, bad requests; the REST/gRPC client against a loopback
test fixture."""

import base64
import json
import os
import subprocess
import sys

import hypothesis
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import strategies as st

from keras_bert_impl.cli import run_tool
from keras_bert_impl.data.text_pairs import TextPairExample, convert_example_to_features, truncate_seq_pair
from keras_bert_impl.models.bert_model import BertModel
from keras_bert_impl.models.classifier import BertClassifier
from keras_bert_impl.models.pretraining import BertPretrainingModel
from keras_bert_impl.models.span_qa import BertSpanQA
from keras_bert_impl.models.token_classifier import BertTokenClassifier
from keras_bert_impl.serving.client import GrpcClient, RestClient, ServingError
from keras_bert_impl.serving.export import ExportError, ExportOptions, export_saved_model
from keras_bert_impl.serving.versions import next_version
from keras_bert_impl.tokenization.preprocessor import pack_inputs, truncated_pair_lengths
from keras_bert_impl.tokenization import FullTokenizer
from keras_bert_impl.tokenization.in_graph import InGraphTokenizer, build_tables
from tests.helpers import randomize, tiny_config
from tests.serving_fixture import LoopbackServingFixture

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEQ = 24
SENTENCES = [
    "The weather is lovely today.",
    "It's so sunny outside!",
    "Ünïcödé café, 東京 and ΟΔΥΣΣΕΥΣ.",
    "",
    "word " * 60,  # far longer than max_seq_length: truncated
]
PAIRS = ["What is the weather?", "", "Short.", "b " * 40, "x"]


@pytest.fixture(scope="module")
def tables():
    return build_tables()


@pytest.fixture(scope="module")
def tokenizers(bert_vocab_file, tables):
    python = FullTokenizer(str(bert_vocab_file), do_lower_case=True)
    vocab = [python.inv_vocab[i] for i in range(len(python.inv_vocab))]
    return python, InGraphTokenizer(vocab, do_lower_case=True, tables=tables)


@pytest.fixture(scope="module")
def traced_tokenize(tokenizers):
    """The in-graph tokenizer as one traced graph, as it runs when served."""
    return tf.function(tokenizers[1].tokenize, input_signature=[tf.TensorSpec([None], tf.string)])


def python_features(tokenizer, texts, texts_b=None):
    features = [
        convert_example_to_features(TextPairExample(i, a, texts_b[i] if texts_b else None), tokenizer, SEQ)
        for i, a in enumerate(texts)
    ]
    return {key: np.array([getattr(f, key) for f in features], "int32") for key in ("input_ids", "input_mask", "segment_ids")}


def probe(saved_model_dir, requests, flags=(), **environment):
    """Runs signatures in a fresh process without keras_bert_impl or Keras (`flags`: the tool's, such as TF
    Serving's thread flags; `environment`: variables to set)."""
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "tools", "predict_saved_model.py"), str(saved_model_dir), *flags],
        input=json.dumps(requests), capture_output=True, text=True, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **environment), cwd="/",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    payload = json.loads(result.stdout)
    assert payload["blocked_modules_loaded"] == []
    return payload["results"]


# The tool's module in a process of its own (its import blocks ours, Keras and the peers), its `predict` run on
# each SavedModel in turn: several models in one server process, as TF Serving holds them.
_PROBE_MANY = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("predict_saved_model", sys.argv[1])
tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tool)
jobs = json.load(sys.stdin)
json.dump([tool._finite_json(tool.predict(path, requests, **threads)) for path, requests, threads in jobs], sys.stdout,
          allow_nan=False)
"""


def probe_many(jobs, **environment):
    """`probe` of several SavedModels in one fresh process: {key: (saved_model_dir, requests)} -> {key: results}.

    One TensorFlow start-up for all of them (each `probe` costs one: ~5 s of the suite's CPU). A job may be
    `(saved_model_dir, requests, threads)`: its session's pools as the tool's thread flags set them
    (`{"intra_op_threads": N, "inter_op_threads": N}`; a negative inter-op count runs that session's ops in
    the thread that calls it, per session); the first session of the process sizes the pools.
    """
    result = subprocess.run(
        [sys.executable, "-c", _PROBE_MANY, os.path.join(REPO, "tools", "predict_saved_model.py")],
        input=json.dumps([(str(job[0]), job[1], job[2] if len(job) > 2 else {}) for job in jobs.values()]),
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **environment), cwd="/",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    payloads = json.loads(result.stdout)
    assert len(payloads) == len(jobs)
    assert all(payload["blocked_modules_loaded"] == [] for payload in payloads)
    return {key: payload["results"] for key, payload in zip(jobs, payloads)}


@pytest.fixture(scope="module")
def exports(tmp_path_factory, bert_vocab_file, tables):
    """One export per task from tiny random models (real vocab; one layer: what is served here is the model's
    outputs through each signature, whatever its depth, and a layer less is ~1 s less of each export's tracing)."""
    root = tmp_path_factory.mktemp("saved_models")
    config = tiny_config(vocab_size=30522, max_position_embeddings=64, num_hidden_layers=1)
    models = {
        "classifier": BertClassifier(config, num_labels=3),
        "regression": BertClassifier(config, num_labels=1),
        "embeddings": BertModel(config),
        "fill_mask": BertPretrainingModel(config),
        "span_qa": BertSpanQA(config),
        "token_tagging": BertTokenClassifier(config, num_labels=len(TAGS)),
    }
    labels = {"classifier": ["negative", "neutral", "positive"], "token_tagging": TAGS}
    paths = {}
    for seed, (task, model) in enumerate(models.items()):
        randomize(model, seed=seed, scale=0.1)
        paths[task] = export_saved_model(
            model, task, bert_vocab_file, root / task,
            ExportOptions(max_seq_length=SEQ, label_names=labels.get(task), tables=tables),
        )
    return root, models, paths


@pytest.fixture(scope="module")
def unskipped(tmp_path_factory, bert_vocab_file, tables, exports):
    """The classifier of `exports` exported again computing every position (`skip_padding=False`), elsewhere."""
    _, models, _ = exports
    return export_saved_model(
        models["classifier"], "classifier", bert_vocab_file, tmp_path_factory.mktemp("unskipped") / "classifier",
        ExportOptions(max_seq_length=SEQ, label_names=["negative", "neutral", "positive"], tables=tables,
                      skip_padding=False),
    )


QUESTIONS = ["Who wrote the play?", "Where is the tower?"]
CONTEXTS = ["The play was written by William Shakespeare in London.", "The Eiffel tower stands in Paris, France."]
INVALID_UTF8 = base64.b64encode(b"caf\xc3 ok \xff").decode("ascii")
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
FILL_MASK_TEXT = "The capital of France is [MASK] and of Italy [MASK]."


def padded_requests(python):
    """A padded batch by ids (unequal lengths: padding after the cut) and one text, for `skip_padding`'s test."""
    features = python_features(python, SENTENCES)
    return features, [{"signature": "serve_ids", "inputs": {key: value.tolist() for key, value in features.items()}},
                      {"signature": "serving_default", "inputs": {"text": SENTENCES[:1]}}]


@pytest.fixture(scope="module")
def probed(exports, unskipped, tokenizers):
    """All signature calls, in one fresh keras_bert_impl-free process (each export loaded as TF Serving loads
    it); under "skip_padding" and "every_position" the padded batch of `padded_requests` to the classifier's
    export and to `unskipped`."""
    _, _, paths = exports
    python, _ = tokenizers
    features = python_features(python, SENTENCES[:2])
    example = tf.train.Example(features=tf.train.Features(feature={
        name: tf.train.Feature(int64_list=tf.train.Int64List(value=features[key][0].tolist()))
        for name, key in (("input_word_ids", "input_ids"), ("input_mask", "input_mask"), ("input_type_ids", "segment_ids"))
    }))
    requests = {
        "classifier": [
            {"signature": "serving_default", "inputs": {"text": SENTENCES}},
            {"signature": "serve_text_pair", "inputs": {"text": SENTENCES, "text_b": PAIRS}},
            {"signature": "serving_default", "inputs": {"text": []}},
            {"signature": "serving_default", "inputs": {"text": {"b64": [base64.b64encode(b"").decode(), INVALID_UTF8]}}},
            {"signature": "serve_text_pair", "inputs": {"text": ["a", "b"], "text_b": ["c"]}},
            {"signature": "classify", "inputs": {"inputs": {"b64": [base64.b64encode(example.SerializeToString()).decode()]}}},
        ],
        "regression": [
            {"signature": "serve_ids", "inputs": {k: v.tolist() for k, v in features.items()}},
            {"signature": "serve_examples", "inputs": {"examples": {"b64": [base64.b64encode(example.SerializeToString()).decode()]}}},
            {"signature": "regress", "inputs": {"inputs": {"b64": [base64.b64encode(example.SerializeToString()).decode()]}}},
        ],
        "embeddings": [{"signature": "serving_default", "inputs": {"text": SENTENCES[:3]}}],
        "fill_mask": [{"signature": "serving_default", "inputs": {"text": [FILL_MASK_TEXT, "no mask here"]}}],
        "span_qa": [{"signature": "serve_text_pair", "inputs": {"text": QUESTIONS, "text_b": CONTEXTS}}],
        "token_tagging": [],
    }
    # Every export answers every signature on real sentences.
    for task in ("classifier", "regression", "embeddings", "span_qa", "token_tagging"):
        requests[task] = requests[task] + [
            {"signature": "serve_ids", "inputs": {k: v.tolist() for k, v in features.items()}},
            {"signature": "serve_examples", "inputs": {"examples": {"b64": [base64.b64encode(example.SerializeToString()).decode()]}}},
            {"signature": "serve_text_pair", "inputs": {"text": SENTENCES[:2], "text_b": PAIRS[:2]}},
            {"signature": "serving_default", "inputs": {"text": SENTENCES[:2]}},
        ]
    # The padded batch goes to the classifier's export after its other requests (one load of it, not two).
    padded = padded_requests(python)[1]
    requests["classifier"] = requests["classifier"] + padded
    jobs = {task: (paths[task], calls) for task, calls in requests.items()}
    jobs["every_position"] = (unskipped, padded)
    answers = probe_many(jobs)
    served = answers["classifier"]
    answers["classifier"], answers["skip_padding"] = served[:-len(padded)], served[-len(padded):]
    return answers


def test_classifier_signatures_match_keras_model_without_our_python(exports, tokenizers, probed):
    _, models, _ = exports
    python, _ = tokenizers
    model = models["classifier"]
    results = probed["classifier"]
    single = python_features(python, SENTENCES)
    expected = tf.nn.softmax(model(single)).numpy()
    np.testing.assert_allclose(results[0]["probabilities"], expected, atol=1e-5)
    assert results[0]["label_ids"] == expected.argmax(-1).tolist()
    assert results[0]["labels"] == [["negative", "neutral", "positive"][i] for i in expected.argmax(-1)]
    pair = python_features(python, SENTENCES, PAIRS)
    np.testing.assert_allclose(results[1]["probabilities"], tf.nn.softmax(model(pair)).numpy(), atol=1e-5)
    # TF Serving's classify signature: the label names per class, the probabilities as scores.
    assert results[5]["classes"] == [["negative", "neutral", "positive"]]
    np.testing.assert_allclose(results[5]["scores"], expected[:1], atol=1e-5)


def test_ids_and_examples_signatures(exports, tokenizers, probed):
    _, models, _ = exports
    python, _ = tokenizers
    results = probed["regression"]
    expected = models["regression"](python_features(python, SENTENCES[:2])).numpy()[:, 0]
    np.testing.assert_allclose(results[0]["predictions"], expected, atol=1e-5)
    np.testing.assert_allclose(results[1]["predictions"], expected[:1], atol=1e-5)
    np.testing.assert_allclose(results[2]["outputs"], expected[:1], atol=1e-5)  # the regress signature


def test_embeddings_and_fill_mask(exports, tokenizers, probed):
    _, models, _ = exports
    python, _ = tokenizers
    results = probed["embeddings"]
    features = python_features(python, SENTENCES[:3])
    outputs = models["embeddings"](features)
    np.testing.assert_allclose(results[0]["pooled_output"], outputs["pooled_output"], atol=1e-5)
    mask = features["input_mask"][:, :, None]
    mean = (np.asarray(outputs["sequence_output"]) * mask).sum(1) / mask.sum(1)
    np.testing.assert_allclose(results[0]["mean_pooled"], mean, atol=1e-5)

    results = probed["fill_mask"]
    assert results[0]["mask_count"] == [2, 0]
    tokens = ["[CLS]"] + python.tokenize("The capital of France is") + ["[MASK]"] + python.tokenize("and of Italy") + ["[MASK]"] + python.tokenize(".") + ["[SEP]"]
    ids = python.convert_tokens_to_ids(tokens)
    inputs = {
        "input_ids": np.array([ids + [0] * (SEQ - len(ids))], "int32"),
        "input_mask": np.array([[1] * len(ids) + [0] * (SEQ - len(ids))], "int32"),
        "segment_ids": np.zeros((1, SEQ), "int32"),
        "masked_lm_positions": np.array([[tokens.index("[MASK]"), len(tokens) - 3, 0, 0, 0, 0, 0, 0]], "int32"),
    }
    probabilities = tf.nn.softmax(models["fill_mask"](inputs)["masked_lm_logits"]).numpy()[0]
    top = np.argsort(-probabilities[0])[:5]
    assert results[0]["top_k_ids"][0][0] == top.tolist()
    assert results[0]["top_k_tokens"][0][0] == python.convert_ids_to_tokens(top.tolist())
    np.testing.assert_allclose(results[0]["top_k_scores"][0][0], probabilities[0][top], atol=1e-5)
    assert results[0]["top_k_ids"][1][0] == [-1] * 5  # the second text has no mask


def test_token_tagging_signatures(exports, tokenizers, probed):
    """A label per word piece from every input form, as the Keras model tags the same features."""
    _, models, _ = exports
    python, _ = tokenizers
    ids_call, examples_call, pair_call, text_call = probed["token_tagging"]
    for result, features in ((text_call, python_features(python, SENTENCES[:2])),
                             (pair_call, python_features(python, SENTENCES[:2], PAIRS[:2])),
                             (ids_call, python_features(python, SENTENCES[:2])),
                             (examples_call, {k: v[:1] for k, v in python_features(python, SENTENCES[:2]).items()})):
        expected = tf.nn.softmax(models["token_tagging"](features), axis=-1).numpy()  # [batch, SEQ, tags]
        # Every real token tagged as the Keras model tags it; every padding position blank
        # (0, -1, ""), whatever the other rows of the batch.
        real = features["input_mask"] == 1
        probabilities, label_ids = np.asarray(result["probabilities"]), np.asarray(result["label_ids"])
        labels = np.asarray(result["labels"]).astype(str)
        np.testing.assert_allclose(probabilities[real], expected[real], atol=1e-5)
        assert (label_ids[real] == expected[real].argmax(-1)).all()
        assert labels[real].tolist() == [TAGS[i] for i in expected[real].argmax(-1)]
        assert (probabilities[~real] == 0).all() and (label_ids[~real] == -1).all() and (labels[~real] == "").all()


def served_span_logits(logits, input_mask):
    """The Keras model's span logits as served: -10000 at every padding
    position (no answer starts or ends there)."""
    logits = np.array(logits, np.float32)
    logits[np.asarray(input_mask) == 0] = -10000.0
    return logits


def test_span_qa_best_answer(exports, tokenizers, probed):
    _, models, _ = exports
    python, _ = tokenizers
    features = python_features(python, QUESTIONS, CONTEXTS)
    outputs = models["span_qa"](features)
    result = probed["span_qa"][0]
    for key in ("start_logits", "end_logits"):
        np.testing.assert_allclose(result[key], served_span_logits(outputs[key], features["input_mask"]), atol=1e-5)
    for row in range(len(QUESTIONS)):
        # Best context span with start <= end < start + 30, by exhaustive search.
        start, end = np.asarray(outputs["start_logits"][row]), np.asarray(outputs["end_logits"][row])
        ids, segments = features["input_ids"][row], features["segment_ids"][row]
        context = [i for i in range(SEQ) if segments[i] == 1 and ids[i] != python.vocab["[SEP]"]]
        best = max(((start[i] + end[j], i, j) for i in context for j in context if i <= j < i + 30))
        assert (result["answer_start"][row], result["answer_end"][row]) == (best[1], best[2])
        tokens = python.convert_ids_to_tokens(ids[best[1] : best[2] + 1].tolist())
        assert result["answer_text"][row] == " ".join(tokens).replace(" ##", "")


def signature_defs(saved_model_dir):
    """The SavedModel's signatures as TF Serving reads them (its MetaGraph's `SignatureDef`s), without loading it:
    {name: SignatureDef}."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    return saved_model.meta_graphs[0].signature_def


def tensor_info_shape(info):
    """A `TensorInfo`'s shape as `TensorShape.as_list()` gives it (None where unknown)."""
    assert not info.tensor_shape.unknown_rank
    return [None if dim.size < 0 else dim.size for dim in info.tensor_shape.dim]


def test_span_logits_keep_the_request_length_in_the_signature(exports):
    _, _, paths = exports
    signatures = signature_defs(paths["span_qa"])
    for name in ("serving_default", "serve_text_pair", "serve_examples"):
        assert tensor_info_shape(signatures[name].outputs["start_logits"]) == [None, SEQ], name
    assert tensor_info_shape(signatures["serve_ids"].outputs["end_logits"]) == [None, None]


def test_every_signature_agrees_with_the_keras_model(exports, tokenizers, probed):
    _, models, _ = exports
    python, _ = tokenizers
    single = python_features(python, SENTENCES[:2])
    pair = python_features(python, SENTENCES[:2], PAIRS[:2])
    outputs = {
        "classifier": lambda x: {"probabilities": tf.nn.softmax(models["classifier"](x)).numpy()},
        "regression": lambda x: {"predictions": models["regression"](x).numpy()[:, 0]},
        "embeddings": lambda x: {"pooled_output": models["embeddings"](x)["pooled_output"].numpy()},
        "span_qa": lambda x: {k: served_span_logits(models["span_qa"](x)[k], x["input_mask"])
                              for k in ("start_logits", "end_logits")},
    }
    for task, compute in outputs.items():
        ids, examples, text_pair, text = probed[task][-4:]
        for result, inputs, rows in ((ids, single, 2), (examples, single, 1), (text_pair, pair, 2), (text, single, 2)):
            for key, value in compute({name: value[:rows] for name, value in inputs.items()}).items():
                np.testing.assert_allclose(result[key], value, atol=1e-5, err_msg=f"{task} {key}")


def test_export_tool_from_a_release(tmp_path, bert_vocab_file, capsys):
    from keras_bert_impl.checkpoints.original import save_original_checkpoint
    from tools import export_saved_model as export_tool

    # One layer: the tool's flags and what it writes and says are checked, whatever the model's depth.
    config = tiny_config(vocab_size=30522, max_position_embeddings=64, num_hidden_layers=1)
    model = BertClassifier(config, num_labels=2)
    save_original_checkpoint(model, str(tmp_path / "release" / "model.ckpt"))
    config.to_json_file(tmp_path / "release" / "bert_config.json")
    (tmp_path / "release" / "vocab.txt").write_bytes(bert_vocab_file.read_bytes())
    command = [sys.executable, "-m", "tools.export_saved_model", f"--model_dir={tmp_path}/release", "--task=classifier",
               "--label_names=no,yes", "--max_seq_length=16", f"--export_dir={tmp_path}/saved_models/tiny"]
    # The export through the tool's `main` in this process (the code its process runs after the parse); the
    # refusal below as its console script runs it (`run_tool`: its exit status and one line of stderr; a process
    # of its own was ~5 s of the suite's CPU, and tests/test_tools_cli.py runs the tools' processes).
    # --noverify: what is checked here is what the tool writes and says (the check as TF Serving loads a version,
    # ~2 s of CPU, is test_verification's; this file's `probed` serves its exports as TF Serving loads them).
    export_tool.main(command[3:] + ["--serving_base_path=/srv/models/", "--noverify"])
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith("/saved_models/tiny/1: it needs portable: "
                                                                      "stock TensorFlow ops, CPU and GPU")
    assert (tmp_path / "saved_models" / "tiny" / "1" / "saved_model.pb").exists()
    config = parse_models_config(tmp_path / "saved_models" / "models.config")
    assert [(c.name, c.base_path) for c in config.model_config_list.config] == [("tiny", "/srv/models/tiny")]
    code = run_tool(export_tool.main, command[3:] + ["--version=1"], prog="export_saved_model")
    lines = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and "version 1 already exists" in lines[-1] and len(lines) == 1, lines


def test_bad_requests_have_defined_results(probed):
    empty_batch, odd_texts, mismatched = probed["classifier"][2:5]
    assert empty_batch == {"probabilities": [], "label_ids": [], "labels": []}
    assert len(odd_texts["probabilities"]) == 2  # "" and invalid UTF-8: defined outputs
    assert "error" in mismatched  # text/text_b batch sizes differ: an error status


def test_saved_model_cli_lists_signatures(exports, capsys):
    """`saved_model_cli show --dir ... --all`: its own parser and `show` command, run in this process as its
    console script runs them (the SavedModel read from disk; a process of its own was a TensorFlow start-up,
    ~4 s of the suite's CPU, for a listing)."""
    from absl import flags
    from tensorflow.python.tools import saved_model_cli

    _, _, paths = exports
    capsys.readouterr()
    parsed = flags.FLAGS.is_parsed()
    try:
        args = saved_model_cli.create_parser().parse_args(["show", "--dir", paths["classifier"], "--all"])
        assert args.func is saved_model_cli.show
        args.func()
    finally:  # absl's global flags as they were: the CLI's two back to their defaults
        flags.FLAGS["dir"].unparse()
        flags.FLAGS["all"].unparse()
        if not parsed:
            flags.FLAGS.unparse_flags()
    stdout = capsys.readouterr().out
    for name in ("serving_default", "serve_text_pair", "serve_ids", "serve_examples", "classify"):
        assert f"signature_def['{name}']" in stdout
    # TF Serving's Classify runs only a signature of its method.
    classify = stdout.split("signature_def['classify']")[1].split("signature_def[")[0]
    assert "Method name is: tensorflow/serving/classify" in classify


def parse_models_config(path):
    """`models.config` as TF Serving's `ModelServerConfig` (text format)."""
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    with open(path, encoding="utf-8") as f:
        return text_format.Parse(f.read(), model_server_config_pb2.ModelServerConfig())


def test_versions_warmup_and_models_config(exports, bert_vocab_file, tables):
    root, models, paths = exports
    assert paths["classifier"].endswith(os.path.join("classifier", "1"))
    assert sorted(os.listdir(root / "classifier")) == ["1"]  # no temp dirs left
    # One models.config at the export base naming every model, sorted, at the container's /models.
    config = parse_models_config(root / "models.config")
    names = ["classifier", "embeddings", "fill_mask", "regression", "span_qa", "token_tagging"]
    assert [c.name for c in config.model_config_list.config] == names
    assert [c.base_path for c in config.model_config_list.config] == [f"/models/{name}" for name in names]
    assert {c.model_platform for c in config.model_config_list.config} == {"tensorflow"}
    assert sorted(os.listdir(root)) == sorted(names + ["models.config"])  # no partial config left
    with pytest.raises(ExportError, match="version 1 already exists"):
        export_saved_model(
            models["embeddings"], "embeddings", bert_vocab_file, root / "classifier",
            ExportOptions(version=1, max_seq_length=SEQ, tables=tables),
        )
    with pytest.raises(ExportError, match="version -1: a version is a non-negative integer"):
        export_saved_model(
            models["embeddings"], "embeddings", bert_vocab_file, root / "classifier",
            ExportOptions(version=-1, max_seq_length=SEQ, tables=tables),
        )  # TF Serving would load "-1"; nothing else here lists it
    os.makedirs(root / "embeddings" / "7")
    assert next_version(root / "embeddings") == 8

    from tensorflow_serving.apis import prediction_log_pb2

    warmup = os.path.join(paths["classifier"], "assets.extra", "tf_serving_warmup_requests")
    records = [prediction_log_pb2.PredictionLog.FromString(r.numpy()) for r in tf.data.TFRecordDataset(warmup)]
    request = records[0].predict_log.request
    assert request.model_spec.name == "classifier" and request.model_spec.signature_name == "serving_default"
    assert tf.make_ndarray(request.inputs["text"]).tolist() == [b"The weather is lovely today.", b"He drove to the stadium."]


def test_rest_and_grpc_clients_against_loopback_fixture(exports, tokenizers):
    _, models, paths = exports
    python, _ = tokenizers
    fixture = LoopbackServingFixture(paths["classifier"], "classifier")
    try:
        rest = RestClient(fixture.start_rest(), "classifier")
        expected = tf.nn.softmax(models["classifier"](python_features(python, SENTENCES[:2]))).numpy()
        rows = rest.predict_instances([{"text": s} for s in SENTENCES[:2]])
        np.testing.assert_allclose([r["probabilities"] for r in rows], expected, atol=1e-5)
        columns = rest.predict_inputs({"text": SENTENCES[:2]})
        np.testing.assert_allclose(columns["probabilities"], expected, atol=1e-5)
        with pytest.raises(ServingError, match="HTTP 404"):
            RestClient(rest.base_url, "other").predict_inputs({"text": ["x"]})

        grpc_client = GrpcClient(fixture.start_grpc(), "classifier")
        outputs = grpc_client.predict({"text": np.array(SENTENCES[:2], dtype=object)})
        np.testing.assert_allclose(outputs["probabilities"], expected, atol=1e-5)
        with pytest.raises(ServingError, match="INVALID_ARGUMENT"):
            grpc_client.predict({"text": np.array(["a"], dtype=object), "text_b": np.array(["b", "c"], dtype=object)}, "serve_text_pair")
        grpc_client.close()
    finally:
        fixture.stop()


def test_truncation_is_the_originals():
    a_lengths, b_lengths, max_totals = [], [], []
    expected_a, expected_b = [], []
    for la in range(0, 9):
        for lb in range(0, 9):
            for total in range(0, 12):
                a, b = list(range(la)), list(range(lb))
                truncate_seq_pair(a, b, total)
                a_lengths.append(la), b_lengths.append(lb), max_totals.append(total)
                expected_a.append(len(a)), expected_b.append(len(b))
    for total in set(max_totals):
        index = [i for i, t in enumerate(max_totals) if t == total]
        got_a, got_b = truncated_pair_lengths(
            tf.constant([a_lengths[i] for i in index]), tf.constant([b_lengths[i] for i in index]), total
        )
        assert got_a.numpy().tolist() == [expected_a[i] for i in index]
        assert got_b.numpy().tolist() == [expected_b[i] for i in index]


@pytest.mark.parametrize("cls_id, sep_id, pad_id", [(101, 102, 0), (0, 2, 1)])  # BERT's ids; RoBERTa's <s> </s> <pad>
def test_single_text_packing_is_the_originals(cls_id, sep_id, pad_id):
    """The dense single-text packing: the original's `[CLS] tokens[:max - 2] [SEP]` layout, padded."""
    rows = [list(range(10, 10 + length)) for length in range(0, 10)]
    ids = tf.ragged.constant(rows, dtype=tf.int32)
    for max_seq_length in range(2, 13):
        packed = pack_inputs(ids, None, max_seq_length, cls_id, sep_id, pad_id=pad_id)
        # The pair path (ragged ops) with empty second texts gives the single-text layout too.
        empty_b = tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int32), [0] * len(rows))
        as_pair = pack_inputs(ids, empty_b, max_seq_length, cls_id, sep_id, pad_id=pad_id)
        for name in ("input_ids", "input_mask", "segment_ids"):
            assert packed[name].shape.as_list() == [len(rows), max_seq_length]
            assert packed[name].numpy().tolist() == as_pair[name].numpy().tolist(), (name, max_seq_length)
        for row, got_ids, got_mask in zip(rows, packed["input_ids"].numpy(), packed["input_mask"].numpy()):
            tokens = [cls_id] + row[:max_seq_length - 2] + [sep_id]  # as convert_single_example
            assert got_ids.tolist() == tokens + [pad_id] * (max_seq_length - len(tokens))
            assert got_mask.tolist() == [1] * len(tokens) + [0] * (max_seq_length - len(tokens))
        assert not packed["segment_ids"].numpy().any()


@hypothesis.settings(max_examples=300, deadline=None, derandomize=True)
@hypothesis.given(st.lists(st.text(max_size=40), min_size=1, max_size=8))
def test_in_graph_tokenizer_equals_python_on_arbitrary_unicode(tokenizers, traced_tokenize, texts):
    python, _ = tokenizers
    got = traced_tokenize(tf.constant([t.encode("utf-8", "surrogatepass") for t in texts])).to_list()
    assert got == [python.convert_tokens_to_ids(python.tokenize(t.encode("utf-8", "surrogatepass"))) for t in texts]


@hypothesis.settings(max_examples=150, deadline=None, derandomize=True)
@hypothesis.given(st.lists(st.binary(max_size=30), min_size=1, max_size=6))
def test_in_graph_tokenizer_equals_python_on_arbitrary_bytes(tokenizers, traced_tokenize, blobs):
    python, _ = tokenizers
    got = traced_tokenize(tf.constant(blobs)).to_list()
    assert got == [python.convert_tokens_to_ids(python.tokenize(b)) for b in blobs]


def test_cased_in_graph_tokenizer(bert_vocab_file, tables):
    python = FullTokenizer(str(bert_vocab_file), do_lower_case=False)
    in_graph = InGraphTokenizer([python.inv_vocab[i] for i in range(len(python.inv_vocab))], do_lower_case=False, tables=tables)
    texts = ["Hello World", "ΣΟΦΟΣ straße", "Ünïcödé", "東京", "a\u2028b", "x" * 201]
    assert in_graph.tokenize(tf.constant(texts)).to_list() == [python.convert_tokens_to_ids(python.tokenize(t)) for t in texts]


def test_a_padded_batch_is_served_on_its_real_tokens(exports, unskipped, tokenizers, probed):
    """By default an export skips the padding a batch keeps after its cut
    (`skip_padding`, in the metadata; the same graph whatever machine
    writes it): one graph for every batch, with
    stock ops that TF Serving's loader runs, and answers as the export that
    computes every position and as the Keras model."""
    from tensorflow.core.protobuf import saved_model_pb2

    python, _ = tokenizers
    _, models, exported = exports
    model = models["classifier"]
    paths = {None: exported["classifier"], False: unskipped}  # the default, and skip_padding=False
    features = padded_requests(python)[0]  # unequal lengths: padding after the cut
    assert features["input_mask"].sum(axis=1).min() < features["input_mask"].sum(axis=1).max()
    answers = {None: probed["skip_padding"], False: probed["every_position"]}
    expected = tf.nn.softmax(model(features)).numpy()
    counts = {}
    op_kinds = {"gathers": ("GatherV2", "ResourceGather"), "products": ("MatMul", "BatchMatMulV2")}
    for skip, (ids_call, text_call) in answers.items():
        np.testing.assert_allclose(ids_call["probabilities"], expected, atol=1e-5)
        np.testing.assert_allclose(text_call["probabilities"][0], expected[0], atol=1e-5)
        with open(os.path.join(paths[skip], "assets.extra", "export_metadata.json")) as f:
            assert json.load(f)["skips_padding"] is (skip is None)
        saved = saved_model_pb2.SavedModel()
        with open(os.path.join(paths[skip], "saved_model.pb"), "rb") as f:
            saved.ParseFromString(f.read())
        nodes = [node for graph in saved.meta_graphs for function in graph.graph_def.library.function
                 for node in function.node_def]
        counts[skip] = {kind: sum(node.op in ops for node in nodes) for kind, ops in op_kinds.items()}
    # Skipping is row gathers more in the one graph every signature calls, not a second copy of the model.
    assert counts[None]["gathers"] > counts[False]["gathers"]
    assert counts[None]["products"] == counts[False]["products"]
