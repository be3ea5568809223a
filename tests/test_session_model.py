"""`serving.session_model.SessionModel`: an export run in-process as TF Serving runs it, against TF2's loader of the
same export and the Keras model it came from."""

import os
import resource
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.data.text_pairs import TextPairExample, convert_example_to_features
from keras_bert_impl.models.classifier import BertClassifier
from keras_bert_impl.serving.export import ExportOptions, export_saved_model
from keras_bert_impl.serving.session_model import WARMUP_FILE, SessionModel, SessionModelError, warmup_requests
from keras_bert_impl.tokenization import FullTokenizer
from tests.helpers import randomize, tiny_config

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEQ = 16
TEXTS = ["The weather is lovely today.", "A dull, lifeless film.", ""]
LABELS = ["negative", "positive"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory, bert_vocab_file):
    # One layer: nothing here is about layers (the export traces the model once per signature).
    model = BertClassifier(tiny_config(vocab_size=30522, max_position_embeddings=32, num_hidden_layers=1), num_labels=2)
    randomize(model, seed=3, scale=0.1)
    path = export_saved_model(model, "classifier", bert_vocab_file, tmp_path_factory.mktemp("saved_models") / "sst",
                              ExportOptions(max_seq_length=SEQ, label_names=LABELS))
    return model, str(path)


def ids_of(texts, vocab_file):
    tokenizer = FullTokenizer(str(vocab_file), do_lower_case=True)
    features = [convert_example_to_features(TextPairExample(i, text, None), tokenizer, SEQ)
                for i, text in enumerate(texts)]
    return {key: np.array([getattr(f, key) for f in features], "int32") for key in ("input_ids", "input_mask", "segment_ids")}


def voluntary_switches(call, times):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
    for _ in range(times):
        call()
    return resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - before


def test_answers_as_the_model_and_as_tf2s_loader(exported, bert_vocab_file):
    model, path = exported
    ids = ids_of(TEXTS, bert_vocab_file)
    logits = model(ids, training=False)
    logits = (logits["logits"] if isinstance(logits, dict) else logits).numpy()
    loaded = tf.saved_model.load(path)
    with SessionModel(path) as served:
        assert {"serving_default", "serve_ids"} <= set(served.signature_defs)
        assert served.input_names("serve_ids") == ["input_ids", "input_mask", "segment_ids"]
        by_ids = served.callable("serve_ids")(**ids)
        by_text = served.predict({"text": TEXTS})
    expected = tf.nn.softmax(logits).numpy()
    np.testing.assert_allclose(by_ids["probabilities"], expected, atol=2e-6)  # the Keras model, Python tokenizer
    np.testing.assert_allclose(by_text["probabilities"], expected, atol=2e-6)  # the in-graph tokenizer
    tf2 = loaded.signatures["serving_default"](tf.constant(TEXTS))
    assert set(by_text) == set(tf2)
    for name, value in tf2.items():
        if value.dtype == tf.string:
            assert by_text[name].tolist() == value.numpy().tolist()
        else:
            np.testing.assert_allclose(by_text[name], value.numpy(), atol=2e-6)
    assert [label.decode() for label in by_text["labels"]] == [LABELS[i] for i in expected.argmax(-1)]


def test_each_call_runs_in_the_calling_thread_with_a_negative_inter_op_count(exported, bert_vocab_file):
    _, path = exported
    ids = ids_of(TEXTS[:1], bert_vocab_file)
    pooled = SessionModel(path).callable("serve_ids")
    caller = SessionModel(path, inter_op_threads=-1).callable("serve_ids")
    for _ in range(3):
        pooled(**ids), caller(**ids)
    assert voluntary_switches(lambda: pooled(**ids), 50) >= 50  # the check can fail: the pool hands each run over
    assert voluntary_switches(lambda: caller(**ids), 50) < 10


def test_requests_from_several_threads_at_once_are_answered_as_alone(exported, bert_vocab_file):
    # TF Serving answers concurrent requests on one Session; online, each in the thread that received it.
    _, path = exported
    serve_ids = SessionModel(path, inter_op_threads=-1).callable("serve_ids")
    requests = [ids_of([text], bert_vocab_file) for text in TEXTS + ["Another one, a little longer than the rest."]]
    alone = [serve_ids(**request)["probabilities"] for request in requests]
    answers = [[] for _ in requests]

    def send(index):
        for _ in range(20):
            answers[index].append(serve_ids(**requests[index])["probabilities"])

    threads = [threading.Thread(target=send, args=(index,)) for index in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for expected, got in zip(alone, answers):
        assert len(got) == 20
        for answer in got:
            np.testing.assert_array_equal(answer, expected)


def test_warmup_requests_replay_and_a_failing_one_is_named(exported, tmp_path):
    _, path = exported
    requests = warmup_requests(path)
    assert [name for name, _ in requests] == ["serving_default"] * len(requests) and requests
    with SessionModel(path) as served:
        assert served.replay_warmup() == len(requests)
    # The same export with a warmup request whose text is a number: TF Serving would refuse the version.
    from tensorflow_serving.apis import prediction_log_pb2

    broken = tmp_path / "1"
    shutil.copytree(path, broken)
    log = prediction_log_pb2.PredictionLog()
    log.predict_log.request.model_spec.signature_name = "serve_ids"
    log.predict_log.request.inputs["input_ids"].CopyFrom(tf.make_tensor_proto(np.ones([1, 4], np.int32)))
    with tf.io.TFRecordWriter(str(broken / WARMUP_FILE)) as writer:
        writer.write(log.SerializeToString())
    with SessionModel(broken) as served, pytest.raises(SessionModelError) as raised:
        served.replay_warmup()
    assert "warmup request 0 (serve_ids) fails" in str(raised.value)
    assert "missing ['input_mask', 'segment_ids']" in str(raised.value)


def test_bad_calls_are_named_and_change_no_value(exported):
    _, path = exported
    ids = {"input_ids": [[101, 2023, 102]], "input_mask": [[1, 1, 1]], "segment_ids": [[0, 0, 0]]}
    with SessionModel(path) as served:
        serve_ids = served.callable("serve_ids")
        assert serve_ids(**ids)["probabilities"].shape == (1, 2)  # lists are taken
        with pytest.raises(SessionModelError, match=r"no signature 'predict'; the export has \[.*'serve_ids'"):
            served.callable("predict")
        with pytest.raises(SessionModelError, match=r"missing \['segment_ids'\]"):
            serve_ids(input_ids=ids["input_ids"], input_mask=ids["input_mask"])
        with pytest.raises(SessionModelError, match=r"no input \['token_ids'\]"):
            serve_ids(**ids, token_ids=ids["input_ids"])
        with pytest.raises(SessionModelError, match="input 'input_ids': float64 values for a int32 input"):
            serve_ids(**dict(ids, input_ids=[[101.0, 2023.5, 102.0]]))
        with pytest.raises(SessionModelError, match=r"input 'input_ids': a value outside int32"):
            serve_ids(**dict(ids, input_ids=[[101, 2**40, 102]]))

    model_dir = os.path.dirname(path)  # TF Serving's --model_base_path, not a version
    with pytest.raises(SessionModelError, match=r"sst: a model directory holding version\(s\) 1, not a SavedModel; "
                                                r"give one version, e.g. .*/sst/1 \(the one TF Serving serves\)"):
        SessionModel(model_dir)


# A fresh process's first load, quiet or not as its TF_CPP_MIN_LOG_LEVEL asks (between "before" and "after" on its
# stderr), made with one intra-op thread: its first device, so that count holds without a warning; then the loads
# whose count the process can or cannot honour (the warning on stdout). One process per log level (a TensorFlow
# start-up each, ~4 s of CPU) for both checks.
_PROBE = """
import sys, warnings
import tensorflow as tf
from keras_bert_impl.serving.session_model import SessionModel
warnings.simplefilter("error")
print("before", file=sys.stderr, flush=True)
with SessionModel(sys.argv[1], intra_op_threads=1) as model:  # the process' first device: its count holds, no warning
    model.replay_warmup()
print("after", file=sys.stderr, flush=True)
assert tf.config.threading.get_intra_op_parallelism_threads() == 1
SessionModel(sys.argv[1], intra_op_threads=1)
tf.constant(1.0) + 1.0  # the eager context, sized as the sessions
SessionModel(sys.argv[1])  # no count given: the process' own, no warning
try:
    SessionModel(sys.argv[1], intra_op_threads=2)
except RuntimeWarning as warning:
    print(warning)
"""


@pytest.fixture(scope="module")
def probe(exported):
    """`probe(level)`: `_PROBE` run on the export in a fresh process with `TF_CPP_MIN_LOG_LEVEL=level` (once per
    level), its `subprocess.CompletedProcess`."""
    _, path = exported
    runs = {}

    def run(level):
        if level not in runs:
            runs[level] = subprocess.run([sys.executable, "-c", _PROBE, path], capture_output=True, text=True,
                                         timeout=300, cwd=REPO, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL=level))
        return runs[level]

    return run


def test_an_intra_op_count_the_process_cannot_honour_is_warned_of(probe):
    result = probe("3")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("intra_op_threads=2 is not honoured: this process made its intra-op pool at "
                                    "its first op, with 1 threads"), result.stdout


@pytest.mark.parametrize("level", ["3", "0"])
def test_a_quiet_process_gets_no_native_log_lines_from_the_load(probe, level):
    """Was: "WARNING: All log messages before absl::InitializeLog() ..." and "I0000 ... MLIR V1 optimization pass is
    not enabled" on stderr of every `bert-export` (its check) under TF_CPP_MIN_LOG_LEVEL=3."""
    result = probe(level)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stderr.splitlines()
    assert "before" in lines and "after" in lines  # stderr is given back after the load
    during = lines[lines.index("before") + 1:lines.index("after")]
    if level == "3":
        assert during == []
    else:  # INFO asked for: the native lines stay (so the quiet case above is the load's doing)
        assert any("MLIR V1 optimization pass" in line for line in during), lines
