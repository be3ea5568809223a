"""Faults and bad input around serving: concurrent exports, misbehaving
servers under the REST and gRPC clients, ids outside the vocabulary, the
test fixture's error answers, and output paths the export tool cannot use.

Every server here listens on 127.0.0.1 on an ephemeral port.
"""

import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent import futures

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.checkpoints.original import load_original_checkpoint, save_original_checkpoint
from keras_bert_impl.cli import run_tool
from keras_bert_impl.errors import CheckpointError, OutputPathError
from keras_bert_impl.io import check_output_dir
from keras_bert_impl.models.bert_model import BertModel
from keras_bert_impl.models.classifier import BertClassifier
from keras_bert_impl.serving import versions
from keras_bert_impl.serving.client import GrpcClient, RestClient, ServingError, tensor_proto_to_array
from keras_bert_impl.serving.export import ExportError, ExportOptions, export_saved_model
from keras_bert_impl.serving.session_model import SessionModel, SessionModelError
from keras_bert_impl.serving.versions import publish_version
from tests.helpers import randomize, run_tool_here, tiny_config
from tests.serving_fixture import LoopbackServingFixture

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "weather", "is", "good", "bad", ".", "a", "film"]
SEQ = 12


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """A tiny classifier release written by our tools: config, vocab, checkpoint (one layer: nothing here is
    about layers, and each export traces the model)."""
    directory = tmp_path_factory.mktemp("release")
    config = tiny_config(vocab_size=len(VOCAB), max_position_embeddings=SEQ, num_hidden_layers=1)
    model = BertClassifier(config, num_labels=2)
    randomize(model, seed=3, scale=0.1)
    save_original_checkpoint(model, str(directory / "model.ckpt"))
    config.to_json_file(directory / "bert_config.json")
    (directory / "vocab.txt").write_text("".join(f"{token}\n" for token in VOCAB), encoding="utf-8")
    return directory, config, model


@pytest.fixture(scope="module")
def exported(release, tmp_path_factory):
    """The release's classifier exported in-process: `(version_dir, loaded)`."""
    directory, _, model = release
    path = export_saved_model(
        model, "classifier", directory / "vocab.txt", tmp_path_factory.mktemp("saved_models") / "tiny",
        ExportOptions(max_seq_length=SEQ),
    )
    return path, tf.saved_model.load(path)


# -- 4: concurrent exports ------------------------------------------------------


def test_concurrent_exports_get_one_complete_version_each(release, tmp_path, capfd):
    """Three exports of one model at once: two processes of their own and this one (the tool as its console script
    runs it), which starts once a process is staging its SavedModel (or has ended), so that the three overlap as
    three processes started together would. Each gets a version of its own, complete."""
    from tools.export_saved_model import main as export_main

    directory, _, _ = release
    export_dir = tmp_path / "saved_models" / "tiny"
    # --noverify: what is raced for here is the publishing of versions; the check as TF Serving loads a version
    # (~2 s of CPU in each process) has tests/test_verification.py, and each version is loaded below.
    command = [sys.executable, "-m", "tools.export_saved_model", f"--model_dir={directory}", "--task=classifier",
               f"--max_seq_length={SEQ}", f"--export_dir={export_dir}", "--noverify"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    processes = [subprocess.Popen(command, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    deadline = time.time() + 300
    while not (export_dir.is_dir() and any(name.startswith(".tmp-") for name in os.listdir(export_dir))):
        if any(p.poll() is not None for p in processes) or time.time() > deadline:
            break
        time.sleep(0.01)
    here = run_tool_here(export_main, command[3:], capfd, "export_saved_model")
    results = [(p.wait(timeout=300), p.stderr.read()) for p in processes] + [(here.returncode, here.stderr)]
    for process in processes:
        process.stderr.close()
    assert [code for code, _ in results] == [0, 0, 0], [err for _, err in results]
    # Each last line: "wrote <version dir>: it needs <what the export needs to run>".
    written = sorted(err.strip().splitlines()[-1].split("wrote ")[-1].split(": it needs ")[0] for _, err in results)
    assert written == [str(export_dir / v) for v in ("1", "2", "3")]
    assert sorted(os.listdir(export_dir)) == ["1", "2", "3"]  # no temp dirs left
    # models.config, rewritten by each export, names the model once; no partial file is left beside it.
    assert sorted(os.listdir(export_dir.parent)) == ["models.config", "tiny"]
    assert (export_dir.parent / "models.config").read_text().count('name: "tiny"') == 1
    text = tf.constant(["the weather is good ."])
    probabilities = [
        tf.saved_model.load(str(export_dir / v)).signatures["serving_default"](text=text)["probabilities"].numpy()
        for v in ("1", "2", "3")
    ]
    for other in probabilities[1:]:  # the same checkpoint: the same answer from each version
        np.testing.assert_array_equal(other, probabilities[0])


def test_an_export_killed_mid_way_leaves_a_staging_directory_the_next_export_removes(release, tmp_path):
    """kill -9 while the SavedModel is being staged: the next export clears the dead
    process's staging directory, and leaves a live one's and other hidden entries alone."""
    directory, _, model = release
    export_dir = tmp_path / "saved_models" / "tiny"
    # The export under test stops (as if killed) right after staging its SavedModel.
    code = (
        "import time, tensorflow as tf\n"
        "save = tf.saved_model.save\n"
        "def stalled(*args, **kwargs):\n"
        "    save(*args, **kwargs)\n"
        "    print('staged', flush=True)\n"
        "    time.sleep(300)\n"
        "tf.saved_model.save = stalled\n"
        "from tools import export_saved_model\n"
        f"export_saved_model.main(['--model_dir={directory}', '--task=classifier', '--max_seq_length={SEQ}', "
        f"'--export_dir={export_dir}'])\n"
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    process = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "staged"
    finally:
        process.kill()  # SIGKILL: no clean-up runs
        process.wait()
        process.stdout.close()
    left = [name for name in os.listdir(export_dir) if name.startswith(".tmp-")]
    assert len(left) == 1 and f"-{process.pid}-" in left[0]
    live = export_dir / versions.staging_name()  # this process's: alive
    live.mkdir()
    (export_dir / ".tmp-other").mkdir()

    path = export_saved_model(model, "classifier", directory / "vocab.txt", export_dir, ExportOptions(max_seq_length=SEQ))
    assert path == str(export_dir / "1")
    assert sorted(os.listdir(export_dir)) == sorted(["1", live.name, ".tmp-other"])


def test_publish_version_moves_past_a_version_taken_meanwhile(tmp_path, monkeypatch):
    export_dir = tmp_path / "tiny"
    (export_dir / "1").mkdir(parents=True)
    (export_dir / "1" / "saved_model.pb").write_bytes(b"the racer's export")
    staging = export_dir / ".tmp-ours"
    staging.mkdir()
    (staging / "saved_model.pb").write_bytes(b"ours")
    # As if another export took version 1 between our choice and our rename.
    monkeypatch.setattr(versions, "next_version", lambda _: 1)
    assert publish_version(str(staging), str(export_dir)) == str(export_dir / "2")
    assert (export_dir / "1" / "saved_model.pb").read_bytes() == b"the racer's export"
    assert (export_dir / "2" / "saved_model.pb").read_bytes() == b"ours"
    assert not staging.exists()

    staging.mkdir()
    (staging / "saved_model.pb").write_bytes(b"late")
    with pytest.raises(ExportError, match="version 2 already exists"):
        publish_version(str(staging), str(export_dir), version=2)
    assert (export_dir / "2" / "saved_model.pb").read_bytes() == b"ours"


def test_remote_copy_that_fails_part_way_leaves_no_version(tmp_path, monkeypatch):
    """On a remote base path (ram:// here) a version is a copy: one that fails
    part way is removed, so TF Serving never sees a version without its
    saved_model.pb and a retry of the same --version is not refused."""
    from keras_bert_impl import filesystem

    staging = tmp_path / "staging"
    (staging / "variables").mkdir(parents=True)
    (staging / "variables" / "variables.index").write_bytes(b"index")
    (staging / "variables" / "variables.data-00000-of-00001").write_bytes(b"data")
    (staging / "saved_model.pb").write_bytes(b"graph")
    export_dir = "ram://publish-fails/saved_models/tiny"
    real_copy, copies = filesystem.copy, []

    def copy_then_quota(source, target, *args, **kwargs):
        if copies:
            raise OSError("quota exceeded")
        copies.append(target)
        return real_copy(source, target, *args, **kwargs)

    monkeypatch.setattr(filesystem, "copy", copy_then_quota)
    with pytest.raises(OSError, match="quota exceeded"):
        publish_version(str(staging), export_dir, version=3)
    assert copies and not filesystem.exists(f"{export_dir}/3")
    monkeypatch.setattr(filesystem, "copy", real_copy)
    assert publish_version(str(staging), export_dir, version=3) == f"{export_dir}/3"
    with filesystem.open_file(f"{export_dir}/3/saved_model.pb", "rb") as f:
        assert f.read() == b"graph"


# -- 6: REST client against a misbehaving server --------------------------------


class MisbehavingServer:
    """An HTTP server on loopback whose answer the model name in the URL picks."""

    def __init__(self):
        self.requests = []  # (path, model name) per request
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server API)
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                name = self.path.split("/v1/models/")[-1].split(":")[0]
                server.requests.append((self.path, name))
                getattr(server, name.replace("-", "_"), server.ok)(self)

            def log_message(self, *args):
                pass

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"

    def count(self, name):
        return sum(1 for _, n in self.requests if n == name)

    @staticmethod
    def send(handler, status, body, length=None):
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        if length is not False:
            handler.send_header("Content-Length", str(len(body) if length is None else length))
        handler.end_headers()
        handler.wfile.write(body)

    def ok(self, handler):
        self.send(handler, 200, b'{"predictions": [{"probabilities": [0.25, 0.75]}]}')

    def not_json(self, handler):
        self.send(handler, 200, b"<html>502 Bad Gateway</html>")

    def cut_short(self, handler):  # promises more bytes than it sends, then hangs up
        self.send(handler, 200, b'{"predictions": [{"probab', length=200)

    def truncated_json(self, handler):  # no Content-Length: the body ends where the connection does
        self.send(handler, 200, b'{"predictions": [{"probab', length=False)

    def no_predictions(self, handler):
        self.send(handler, 200, b'{"outputs": {"probabilities": [[0.25, 0.75]]}}')

    def too_few_predictions(self, handler):
        self.send(handler, 200, b'{"predictions": []}')

    def hang_up(self, handler):
        handler.close_connection = True  # no status line at all

    def slow(self, handler):
        time.sleep(1.0)
        self.ok(handler)

    def trickle(self, handler):  # each byte within the socket timeout, the whole answer far past it
        body = b'{"predictions": [{"probabilities": [0.25, 0.75]}]}'
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        for byte in body:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(0.1)

    @staticmethod
    def drip(handler, data, pause=0.1):
        for byte in data:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(pause)

    def drip_headers(self, handler):  # the status line and headers a byte at a time, for 10 s
        handler.close_connection = True
        self.drip(handler, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Padding: " + b"x" * 100)

    def continue_flood(self, handler):  # `100 Continue` without end (each one in time)
        handler.close_connection = True
        for _ in range(200):
            handler.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            handler.wfile.flush()
            time.sleep(0.05)

    def redirect_to_trickle(self, handler):  # 307 to the trickling answer, same POST
        handler.send_response(307)
        handler.send_header("Location", handler.path.replace("redirect_to_trickle", "trickle"))
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    def drip_error(self, handler):  # a 500 whose body comes a byte at a time
        body = b'{"error": "' + b"e" * 100 + b'"}'
        handler.send_response(500)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        self.drip(handler, body)

    def large(self, handler):  # 2 MB, over a client limit of 1 MB, declared and not
        self.send(handler, 200, b'{"predictions": ["' + b"x" * (2 << 20) + b'"]}')

    def large_undeclared(self, handler):
        self.send(handler, 200, b'{"predictions": ["' + b"x" * (2 << 20) + b'"]}', length=False)

    def deeply_nested(self, handler):  # valid JSON nested past Python's recursion limit
        self.send(handler, 200, b"[" * 200_000 + b"]" * 200_000)

    def deeply_nested_error(self, handler):
        self.send(handler, 500, b'{"error": ' + b"[" * 200_000 + b"]" * 200_000 + b"}")

    def huge_error(self, handler):  # a JSON error body of 8 MB
        self.send(handler, 400, b'{"error": "' + b"e" * (8 << 20) + b'"}')

    def one_row(self, handler):  # one row whatever the batch
        self.send(handler, 200, b'{"outputs": {"probabilities": [[0.25, 0.75]]}}')

    def unavailable_once(self, handler):
        if self.count("unavailable_once") == 1:
            self.send(handler, 503, b'{"error": "Servable not available yet"}')
        else:
            self.ok(handler)

    def always_unavailable(self, handler):
        self.send(handler, 503, b'{"error": "overloaded"}')

    def stop(self):
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def misbehaving():
    server = MisbehavingServer()
    yield server
    server.stop()


def closed_port():
    """A loopback port that nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


INSTANCES = [{"text": "the weather is good ."}]


@pytest.mark.parametrize("name, fragment", [
    ("not_json", "response is not JSON"),
    ("cut_short", "connection failed: IncompleteRead"),
    ("truncated_json", "response is not JSON"),
    ("no_predictions", "response has no 'predictions'"),
    ("too_few_predictions", "0 predictions for 1 instances"),
    ("hang_up", "connection failed: RemoteDisconnected"),
    ("slow", "no answer within 0.3 s"),
    ("trickle", "no answer within 0.3 s"),
    ("deeply_nested", "response is not JSON"),
    ("deeply_nested_error", "HTTP 500: "),
])
def test_rest_client_turns_every_bad_answer_into_a_serving_error(misbehaving, name, fragment):
    client = RestClient(misbehaving.url, name, timeout=0.3)
    with pytest.raises(ServingError, match=fragment) as raised:
        client.predict_instances(INSTANCES)
    assert not raised.value.unavailable  # nothing here is worth a retry
    assert client.url in str(raised.value)


def test_rest_client_caps_a_huge_json_error_in_its_message(misbehaving):
    """Was: the whole 8 MB `error` in the exception's message (non-JSON bodies were already cut at 500)."""
    with pytest.raises(ServingError) as raised:
        RestClient(misbehaving.url, "huge_error", timeout=30).predict_instances(INSTANCES)
    message = str(raised.value)
    assert len(message) < 4500 and message.endswith(f"... ({(8 << 20) - 4000} more characters)"), message[-200:]
    assert "HTTP 400: eeee" in message


def test_rest_client_gives_up_on_a_trickling_answer_at_its_timeout(misbehaving):
    """Each byte came within the socket timeout: the call took as long as the
    server liked (5 s here) instead of the timeout."""
    start = time.monotonic()
    with pytest.raises(ServingError, match="no answer within 0.5 s"):
        RestClient(misbehaving.url, "trickle", timeout=0.5).predict_instances(INSTANCES)
    assert time.monotonic() - start < 1.5


@pytest.mark.parametrize("name", ["drip_headers", "continue_flood", "redirect_to_trickle", "drip_error", "slow"])
def test_rest_client_timeout_bounds_the_whole_call(misbehaving, name):
    """Headers a byte at a time, endless `100 Continue`, a redirect to a slow answer,
    an error body dripped: each held the call as long as the server liked (50-200 s)."""
    start = time.monotonic()
    with pytest.raises(ServingError, match="no answer within 0.5 s"):
        RestClient(misbehaving.url, name, timeout=0.5).predict_instances(INSTANCES)
    assert time.monotonic() - start < 1.5


@pytest.mark.parametrize("name", ["large", "large_undeclared"])
def test_rest_client_caps_the_answer_body(misbehaving, name):
    with pytest.raises(ServingError, match="over the client's limit of 1048576"):
        RestClient(misbehaving.url, name, max_response_bytes=1 << 20).predict_instances(INSTANCES)
    assert RestClient(misbehaving.url, name, timeout=10).predict_instances(INSTANCES)[0].startswith("xxx")


def test_rest_client_follows_a_redirect_that_keeps_the_post(misbehaving):
    # 307 to the trickling answer, given time: the answer arrives, the POST repeated there.
    answer = RestClient(misbehaving.url, "redirect_to_trickle", timeout=20).predict_instances(INSTANCES)
    assert answer == [{"probabilities": [0.25, 0.75]}] and misbehaving.count("trickle") == 1


def test_a_grpc_tensor_declaring_a_huge_shape_is_a_serving_error_not_a_memory_error():
    from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2

    proto = tensor_pb2.TensorProto(
        dtype=types_pb2.DT_FLOAT, float_val=[0.5],
        tensor_shape=tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=s)
                                                            for s in (1, 200000, 100000)]))
    assert len(proto.SerializeToString()) < 40
    with pytest.raises(ServingError, match=r"shape \[1, 200000, 100000\] \(80000000000 bytes of float32\) is over"):
        tensor_proto_to_array("probabilities", proto)
    proto.ClearField("float_val")
    proto.tensor_content = b"\0" * 12
    proto.tensor_shape.dim[1].size, proto.tensor_shape.dim[2].size = 2, 2
    with pytest.raises(ServingError, match=r"12 bytes of values for shape \[1, 2, 2\] \(16 bytes\)"):
        tensor_proto_to_array("probabilities", proto)


def test_rest_client_rejects_outputs_without_a_row_per_example(misbehaving):
    client = RestClient(misbehaving.url, "one_row")
    assert client.predict_inputs({"text": ["a"]}) == {"probabilities": [[0.25, 0.75]]}
    with pytest.raises(ServingError, match="output 'probabilities' has 1 rows for 3 examples"):
        client.predict_inputs({"text": ["a", "b", "c"]})


def test_rest_client_retries_unavailable_only_when_asked(misbehaving):
    with pytest.raises(ServingError, match="HTTP 503: Servable not available yet") as raised:
        RestClient(misbehaving.url, "unavailable_once").predict_instances(INSTANCES)
    assert raised.value.code == "HTTP 503" and raised.value.unavailable
    assert misbehaving.count("unavailable_once") == 1

    misbehaving.requests.clear()
    retrying = RestClient(misbehaving.url, "unavailable_once", retries=2, backoff=0.01)
    assert retrying.predict_instances(INSTANCES) == [{"probabilities": [0.25, 0.75]}]
    assert misbehaving.count("unavailable_once") == 2

    with pytest.raises(ServingError, match="HTTP 503: overloaded"):
        RestClient(misbehaving.url, "always_unavailable", retries=2, backoff=0.01).predict_instances(INSTANCES)
    assert misbehaving.count("always_unavailable") == 3  # bounded: 1 + 2 retries


def test_rest_client_on_a_closed_port():
    url = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(ServingError, match="cannot connect") as raised:
        RestClient(url, "tiny", timeout=2).predict_inputs({"text": ["a"]})
    assert raised.value.unavailable and isinstance(raised.value.__cause__, OSError)
    start = time.monotonic()
    with pytest.raises(ServingError, match="cannot connect"):
        RestClient(url, "tiny", timeout=2, retries=2, backoff=0.05).predict_inputs({"text": ["a"]})
    assert time.monotonic() - start >= 0.05 + 0.1  # waited before each retry


def test_rest_client_quotes_the_model_name(misbehaving):
    client = RestClient(misbehaving.url, "my model/v2?x", version=3)
    assert client.predict_instances(INSTANCES) == [{"probabilities": [0.25, 0.75]}]
    assert misbehaving.requests[-1][0] == "/v1/models/my%20model%2Fv2%3Fx/versions/3:predict"


# -- 6: gRPC client ---------------------------------------------------------------


def test_tensor_without_values_is_an_error():
    from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2

    shape = tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=2)])
    empty = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=shape)
    with pytest.raises(ServingError, match=r"'probabilities': dtype float32 and shape \[2\] but no values"):
        tensor_proto_to_array("probabilities", empty)
    three = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=shape, float_val=[1, 2, 3])
    with pytest.raises(ServingError, match=r"3 values for shape \[2\]"):
        tensor_proto_to_array("probabilities", three)
    # TensorFlow's own encodings decode: one value for all, packed bytes, an empty batch.
    splat = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=shape, float_val=[0.5])
    np.testing.assert_array_equal(tensor_proto_to_array("p", splat), [0.5, 0.5])
    packed = tf.make_tensor_proto(np.array([[0.25, 0.75]], np.float32))
    np.testing.assert_array_equal(tensor_proto_to_array("p", packed), [[0.25, 0.75]])
    assert tensor_proto_to_array("p", tf.make_tensor_proto(np.zeros((0, 2), np.float32))).shape == (0, 2)
    strings = tf.make_tensor_proto(np.array([b"yes", b"no"], dtype=object))
    assert tensor_proto_to_array("labels", strings).tolist() == [b"yes", b"no"]


@pytest.fixture
def fake_grpc():
    """A PredictionService on loopback: UNAVAILABLE on every first call of
    model "flaky", an output without values for model "hollow"."""
    import grpc
    from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    calls = []

    class Servicer(prediction_service_pb2_grpc.PredictionServiceServicer):
        def Predict(self, request, context):  # noqa: N802 (gRPC API)
            calls.append(request.model_spec.name)
            response = predict_pb2.PredictResponse()
            if request.model_spec.name == "flaky" and calls.count("flaky") == 1:
                context.abort(grpc.StatusCode.UNAVAILABLE, "model is loading")
            if request.model_spec.name == "hollow":
                shape = tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=1)])
                response.outputs["probabilities"].CopyFrom(
                    tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=shape)
                )
            else:
                response.outputs["probabilities"].CopyFrom(tf.make_tensor_proto(np.array([[0.25, 0.75]], np.float32)))
            return response

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(Servicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}", calls
    server.stop(grace=None)


def test_tensor_with_values_in_another_dtypes_field_or_an_unknown_dtype_is_an_error():
    """`make_ndarray` reads only the dtype's own field: values elsewhere came
    back as zeros; an unknown dtype was a bare TypeError."""
    from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2

    shape = tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=3)])
    misplaced = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=shape, string_val=[b"1", b"2", b"3"])
    with pytest.raises(ServingError, match=r"'scores': dtype float32 and shape \[3\] but no values"):
        tensor_proto_to_array("scores", misplaced)
    unknown = tensor_pb2.TensorProto(dtype=999, tensor_shape=shape, float_val=[1, 2, 3])
    with pytest.raises(ServingError, match="'scores': unknown dtype 999"):
        tensor_proto_to_array("scores", unknown)
    ints = tensor_pb2.TensorProto(dtype=types_pb2.DT_INT32, tensor_shape=shape, int_val=[1, 2, 3])
    assert tensor_proto_to_array("ids", ints).tolist() == [1, 2, 3]


def test_grpc_client_retries_unavailable_and_rejects_hollow_outputs(fake_grpc):
    target, calls = fake_grpc
    inputs = {"text": np.array(["the weather is good ."], dtype=object)}
    client = GrpcClient(target, "flaky", timeout=5)
    with pytest.raises(ServingError, match="gRPC UNAVAILABLE: model is loading") as raised:
        client.predict(inputs)
    assert raised.value.code == "UNAVAILABLE" and raised.value.unavailable
    client.close()

    calls.clear()
    retrying = GrpcClient(target, "flaky", timeout=5, retries=2, backoff=0.01)
    np.testing.assert_array_equal(retrying.predict(inputs)["probabilities"], [[0.25, 0.75]])
    assert calls == ["flaky", "flaky"]
    retrying.close()

    hollow = GrpcClient(target, "hollow", timeout=5)
    with pytest.raises(ServingError, match="dtype float32 and shape \\[1\\] but no values"):
        hollow.predict(inputs)
    hollow.close()

    # One row of probabilities for three texts.
    client = GrpcClient(target, "one_row", timeout=5)
    with pytest.raises(ServingError, match="output 'probabilities' has 1 rows for 3 examples"):
        client.predict({"text": np.array(["a", "b", "c"], dtype=object)})
    client.close()


def test_grpc_client_on_a_closed_port():
    client = GrpcClient(f"127.0.0.1:{closed_port()}", "tiny", timeout=5)
    with pytest.raises(ServingError, match="gRPC UNAVAILABLE") as raised:
        client.predict({"text": np.array(["a"], dtype=object)})
    assert raised.value.unavailable
    client.close()


# -- 7 and 8: ids outside the vocabulary; the fixture's error answers --------------


def ids_request(input_ids, segment_ids=None):
    input_ids = np.array(input_ids, np.int32)
    segment_ids = np.zeros_like(input_ids) if segment_ids is None else np.array(segment_ids, np.int32)
    return {"input_ids": input_ids, "input_mask": np.ones_like(input_ids), "segment_ids": segment_ids}


@pytest.mark.parametrize("input_ids, segment_ids, fragment", [
    ([[2, -1, 3]], None, f"input_ids must lie in [0, {len(VOCAB)})"),
    ([[2, 999999, 3]], None, f"input_ids must lie in [0, {len(VOCAB)})"),
    ([[2, 5, 3]], [[0, 2, 0]], "segment_ids must lie in [0, 2)"),
    ([[2, 5, 3]], [[0, -1, 0]], "segment_ids must lie in [0, 2)"),
])
def test_serve_ids_rejects_ids_outside_the_tables(exported, input_ids, segment_ids, fragment):
    _, loaded = exported
    serve_ids = loaded.signatures["serve_ids"]
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        serve_ids(**{k: tf.constant(v) for k, v in ids_request(input_ids, segment_ids).items()})
    assert fragment in raised.value.message


@pytest.mark.parametrize("mask, fragment", [
    ([[1, 1, 1]], "input_mask must have the shape of input_ids"),  # narrower: would cut the ids silently
    ([[1, 2, 1, 0]], "input_mask must lie in [0, 2)"),  # 2 would add +10000 to a score
    ([[1, -1, 1, 0]], "input_mask must lie in [0, 2)"),
    # [CLS] masked: one fixed answer whatever the ids (left padding, or no real token).
    ([[0, 1, 1, 1]], "input_mask must be 1 at position 0 ([CLS])"),
    ([[0, 0, 0, 0]], "input_mask must be 1 at position 0 ([CLS])"),
    ([[1, 0, 1, 0]], "hold its 1s before its 0s"),
])
def test_serve_ids_rejects_a_mask_that_does_not_fit(exported, mask, fragment):
    _, loaded = exported
    request = {k: tf.constant(v) for k, v in ids_request([[2, 5, 6, 3]], None).items()}
    request["input_mask"] = tf.constant(mask)
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        loaded.signatures["serve_ids"](**request)
    assert fragment in raised.value.message


def test_ids_at_the_edges_of_the_range_are_served(exported, release):
    _, loaded = exported
    _, config, model = release
    inputs = ids_request([[2, 0, len(VOCAB) - 1, 3]], [[0, 0, 1, 1]])
    served = loaded.signatures["serve_ids"](**{k: tf.constant(v) for k, v in inputs.items()})["probabilities"]
    np.testing.assert_allclose(served, tf.nn.softmax(model(inputs)).numpy(), atol=1e-5)


def test_serve_examples_rejects_ids_outside_the_vocabulary(exported):
    _, loaded = exported
    ids = [2, 5, -7] + [0] * (SEQ - 3)
    feature = {
        "input_word_ids": ids, "input_mask": [1, 1, 1] + [0] * (SEQ - 3), "input_type_ids": [0] * SEQ,
    }
    example = tf.train.Example(features=tf.train.Features(feature={
        name: tf.train.Feature(int64_list=tf.train.Int64List(value=value)) for name, value in feature.items()
    }))
    with pytest.raises(tf.errors.InvalidArgumentError, match=rf"input_ids must lie in \[0, {len(VOCAB)}\)"):
        loaded.signatures["serve_examples"](examples=tf.constant([example.SerializeToString()]))


def test_fixture_answers_bad_requests_with_the_full_message(exported):
    path, _ = exported
    fixture = LoopbackServingFixture(path, "tiny")
    try:
        rest = RestClient(fixture.start_rest(), "tiny")
        with pytest.raises(ServingError, match="HTTP 400: .*No values in 'instances' array"):
            rest.predict_instances([])
        bad_ids = {k: v.tolist() for k, v in ids_request([[2, -1, 3]]).items()}
        with pytest.raises(ServingError, match=rf"HTTP 400: (.|\n)*input_ids must lie in \[0, {len(VOCAB)}\)"):
            rest.predict_inputs(bad_ids, "serve_ids")
        neither = urllib.request.Request(rest.url, data=b'{"signature_name": "serve_ids"}')
        with pytest.raises(urllib.error.HTTPError) as raised:
            urllib.request.urlopen(neither, timeout=30)
        assert raised.value.code == 400
        assert json.loads(raised.value.read()) == {"error": "Missing 'inputs' or 'instances' key"}

        grpc_client = GrpcClient(fixture.start_grpc(), "tiny", timeout=30)
        with pytest.raises(ServingError, match=rf"INVALID_ARGUMENT: (.|\n)*input_ids must lie in \[0, {len(VOCAB)}\)") as raised:
            grpc_client.predict(ids_request([[2, 999999, 3]]), "serve_ids")
        assert raised.value.code == "INVALID_ARGUMENT" and not raised.value.unavailable
        grpc_client.close()
    finally:
        fixture.stop()


# The serve_ids request whose in-graph assertion fails: the whole TensorFlow message is its answer.
WHOLE_ERROR_REQUEST = {"signature": "serve_ids",
                       "inputs": {k: v.tolist() for k, v in ids_request([[2, -1, 3]]).items()}}
GOOD_REQUEST = {"signature": "serving_default", "inputs": {"text": ["good"]}}


def bad_requests():
    """`[(request, a fragment of the error it is answered with)]`."""
    ids = {k: v.tolist() for k, v in ids_request([[2, 5, 3]]).items()}
    return [
        ({"signature": "serve_ids", "inputs": dict(ids, input_ids=[])}, "Cannot feed value of shape (0,)"),
        ({"signature": "serve_ids", "inputs": dict(ids, input_ids=[[2, 5, 3], [2]])},
         "input 'input_ids': lists of uneven length"),
        ({"signature": "serve_ids", "inputs": dict(ids, input_ids=[[2, 5.7, 3]])},
         "input 'input_ids' takes integers; it holds a floating-point number"),
        ({"signature": "serve_ids", "inputs": dict(ids, input_ids=[["2", "5", "3"]])},
         "input 'input_ids' takes integers; it holds text"),
        ({"signature": "serving_default", "inputs": {"text": [5]}}, "input 'text' takes strings"),
        ({"signature": "serve_examples", "inputs": {"examples": {"b64": ["not base64!"]}}},
         "input 'examples': not base64"),
        ({"signature": "serving_default", "inputs": ["good"]},
         'not {"signature": name, "inputs": {name: values}}'),
        ({"signature": "serving_default", "inputs": {"txt": ["good"]}},
         "signature 'serving_default' has no input 'txt'; its inputs are ['text']"),
        (WHOLE_ERROR_REQUEST, f"input_ids must lie in [0, {len(VOCAB)})"),
    ]


def damaged_copies(path, root):
    """`{damage: directory}`: copies of an export's version with its variables cut short, flipped or gone."""
    copies = {}
    for damage in ("truncated_variables", "flipped_variables", "no_variables", "no_graph"):
        copy = root / damage
        shutil.copytree(path, copy)
        (data,) = (copy / "variables").glob("variables.data-*")
        if damage == "truncated_variables":
            os.truncate(data, data.stat().st_size // 2)
        elif damage == "flipped_variables":  # the bytes of the first tensor, its checksum left as it was
            with open(data, "r+b") as f:
                head = f.read(64)
                f.seek(0)
                f.write(bytes(b ^ 0xFF for b in head))
        elif damage == "no_variables":
            shutil.rmtree(copy / "variables")
        else:
            os.remove(copy / "saved_model.pb")
        copies[damage] = copy
    return copies


@pytest.fixture(scope="module")
def damaged(exported, tmp_path_factory):
    """`damaged_copies` of the export."""
    path, _ = exported
    return damaged_copies(path, tmp_path_factory.mktemp("damaged"))


@pytest.fixture(scope="module")
def failing_warmup(exported, tmp_path_factory):
    """A copy of the export whose warmup file holds a request its signature fails on (`text` [2, 1], not [2])."""
    from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

    path, _ = exported
    copy = tmp_path_factory.mktemp("failing_warmup") / "1"
    shutil.copytree(path, copy)
    request = predict_pb2.PredictRequest()
    request.model_spec.signature_name = "serving_default"
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(np.array([b"fine", b"too"], dtype=object)[:, None]))
    with tf.io.TFRecordWriter(str(copy / "assets.extra" / "tf_serving_warmup_requests")) as writer:
        writer.write(prediction_log_pb2.PredictionLog(
            predict_log=prediction_log_pb2.PredictLog(request=request)).SerializeToString())
    return copy


# The tool's `main` on each job in turn, in one process of its own (importing the tool blocks keras_bert_impl's
# import there): per job its exit code and what reached file descriptors 1 and 2 (TensorFlow's native writes
# too), its standard input the job's. As a process per job would show them, for one TensorFlow start-up (each
# was ~5 s of the suite's CPU). Then, in the same process, what its `_finite_json` makes of non-finite floats.
_TOOL_RUNS = """
import importlib.util, io, json, os, sys, tempfile
spec = importlib.util.spec_from_file_location("predict_saved_model", sys.argv[1])
tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tool)
jobs = json.load(sys.stdin)
answers, stdout = [], os.dup(1)
for argv, stdin in jobs:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        saved = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1), os.dup2(err.fileno(), 2)
        sys.stdin = io.StringIO(stdin)
        try:
            code = tool.main(argv)
        finally:
            sys.stdout.flush(), sys.stderr.flush()
            os.dup2(saved[0], 1), os.dup2(saved[1], 2)
            os.close(saved[0]), os.close(saved[1])
        out.seek(0), err.seek(0)
        answers.append([code, out.read().decode(), err.read().decode()])
finite = json.dumps(tool._finite_json({"score": [float("inf"), float("-inf"), float("nan"), 0.5]}), allow_nan=False)
os.write(stdout, json.dumps({"answers": answers, "finite_json": finite}).encode())
"""


@pytest.fixture(scope="module")
def tool_runs(exported, damaged, failing_warmup):
    """`{job: subprocess.CompletedProcess}`: tools/predict_saved_model.py on each job of `TOOL_JOBS` (its
    SavedModel directory, its standard input), in one process of its own (`_TOOL_RUNS`)."""
    path, _ = exported
    directories = {"export": path, "model": os.path.dirname(path), "truncated_variables": damaged["truncated_variables"],
                   "failing_warmup": failing_warmup}
    jobs = {name: ([str(directories[directory])], stdin) for name, (directory, stdin) in TOOL_JOBS.items()}
    result = subprocess.run(
        [sys.executable, "-c", _TOOL_RUNS, os.path.join(REPO, "tools", "predict_saved_model.py")],
        input=json.dumps(list(jobs.values())), capture_output=True, text=True, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), cwd="/",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    ran = json.loads(result.stdout)
    answers = ran["answers"]
    assert len(answers) == len(jobs)
    runs = {name: subprocess.CompletedProcess(argv, code, stdout, stderr)
            for (name, (argv, _)), (code, stdout, stderr) in zip(jobs.items(), answers)}
    runs["finite_json"] = ran["finite_json"]
    return runs


# `{job: (directory, standard input)}` for `tool_runs`: the directory one of the export's version ("export"), its
# model directory ("model"), a damaged copy ("truncated_variables") or `failing_warmup`.
MISSING_REQUESTS = {
    "model_directory": (False, "[]", "predict_saved_model: error: {model}: a model directory holding version(s) 1, "
                                     "not a SavedModel; give one version, e.g. {model}/1 (the one TF Serving serves)"),
    "no_requests": (True, "", "ValueError: standard input holds no requests: give a JSON list of"),
    "not_json": (True, '[{"signature": "serving_default",\n', "ValueError: standard input is not JSON: Expecting "
                                                                "property name enclosed in double quotes: line 2 column 1"),
}
MALFORMED_REQUESTS = {
    "dict_requests": ({"signature": "serve_ids"}, "ValueError: the requests are a JSON dict, not a list"),
}
TOOL_JOBS = {
    "bad_requests": ("export", json.dumps([GOOD_REQUEST] + [request for request, _ in bad_requests()] + [GOOD_REQUEST])),
    "truncated_variables": ("truncated_variables", "[]"),
    "nested_too_deeply": ("export", "[" * 100_000 + "]" * 100_000),
    "failing_warmup": ("failing_warmup", "[]"),
    **{name: ("export" if version else "model", stdin) for name, (version, stdin, _) in MISSING_REQUESTS.items()},
    **{name: ("export", json.dumps(requests)) for name, (requests, _) in MALFORMED_REQUESTS.items()},
}


@pytest.fixture(scope="module")
def tool_answers_bad_requests(tool_runs):
    """`(requests, results)`: the bad requests between two good ones, answered by one run of the tool."""
    result = tool_runs["bad_requests"]
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(TOOL_JOBS["bad_requests"][1]), json.loads(result.stdout)["results"]


def test_predict_saved_model_tool_reports_the_whole_error(tool_answers_bad_requests):
    # Its request is one of the bad requests the tool answered in one run (a TensorFlow start-up of its own each
    # was ~5 s of the suite's CPU).
    requests, results = tool_answers_bad_requests
    (index,) = [i for i, request in enumerate(requests) if request == WHOLE_ERROR_REQUEST]
    assert f"input_ids must lie in [0, {len(VOCAB)})" in results[index]["error"]


def test_a_damaged_export_is_refused_by_name(exported, damaged, tool_runs):
    """Was (tools/predict_saved_model.py): one line, `OutOfRangeError: Graph execution error:`, no reason."""
    path, _ = exported
    for damage in ("truncated_variables", "flipped_variables", "no_variables"):
        with pytest.raises(SessionModelError) as raised:
            SessionModel(damaged[damage])
        message = str(raised.value)
        assert message.startswith(f"{damaged[damage]}: TF Serving's loader fails on this version (")
        assert "Graph execution error" not in message and message.endswith("export it again")
    with pytest.raises(OSError, match=f"SavedModel file does not exist at: {damaged['no_graph']}"):
        SessionModel(damaged["no_graph"])
    with SessionModel(path) as intact:  # the original still loads
        assert intact.replay_warmup() >= 1
    result = tool_runs["truncated_variables"]
    assert result.returncode == 1 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("predict_saved_model: error: ") and "Graph execution error" not in line, line


def test_predict_saved_model_tool_answers_each_bad_request_with_its_own_error(tool_answers_bad_requests):
    """Empty or ragged ids, float ids, a number as text, text as ids, bad base64, a malformed request, an unknown
    input: each answered `{"error": "request N: ..."}` naming it, and the good requests around them answered
    (was: the run ended with exit 1 at the first, naming no request; float ids [[101.7]] truncated to 101)."""
    requests, results = tool_answers_bad_requests
    assert len(results) == len(requests)
    assert results[0] == results[-1] and "probabilities" in results[0]
    for index, (_, fragment) in enumerate(bad_requests(), start=1):
        error = results[index]["error"]
        assert error.startswith(f"request {index}: ") and fragment in error, (index, error)


def test_predict_saved_model_tool_refuses_json_nested_too_deeply(tool_runs):
    """Was: a 23-line RecursionError traceback."""
    result = tool_runs["nested_too_deeply"]
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and lines == [
        "predict_saved_model: error: ValueError: standard input is not JSON this tool reads: nested too deeply"], lines


@pytest.mark.parametrize("job", MALFORMED_REQUESTS)
def test_predict_saved_model_tool_names_a_malformed_request(tool_runs, job):
    """Was: a bare AttributeError traceback (a malformed request among others: its own error, above)."""
    _, fragment = MALFORMED_REQUESTS[job]
    result = tool_runs[job]
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and fragment in lines[0], result.stderr[-2000:]


@pytest.mark.parametrize("job", MISSING_REQUESTS)
def test_predict_saved_model_tool_names_a_model_directory_and_missing_requests(exported, tool_runs, job):
    """Was: TensorFlow's `SavedModel file does not exist at: .../{saved_model.pbtxt|saved_model.pb}` for a model's
    base path, and `JSONDecodeError: Expecting value: line 1 column 1 (char 0)` for no requests."""
    path, _ = exported
    version, _, fragment = MISSING_REQUESTS[job]
    result = tool_runs[job]
    lines = result.stderr.strip().splitlines()
    assert result.returncode == (1 if version else 2) and len(lines) == 1, result.stderr[-2000:]
    assert fragment.format(model=os.path.dirname(path)) in lines[0]


def test_predict_saved_model_tool_refuses_an_export_whose_warmup_fails(tool_runs):
    """TF Serving replays `assets.extra/tf_serving_warmup_requests` before it
    serves a version, and a failing request fails the load: so does the tool
    that stands in for it (an export whose weights TF Serving could not
    restore failed exactly so)."""
    result = tool_runs["failing_warmup"]
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith("predict_saved_model: error: ValueError: warmup request 0 (serving_default) fails, "
                               "so TF Serving would not load this version: "), lines


def test_predict_saved_model_tool_writes_strict_json(tool_runs):
    # In the tool's process (`_TOOL_RUNS`): importing the tool blocks keras_bert_impl's import there.
    assert tool_runs["finite_json"] == '{"score": ["Infinity", "-Infinity", "NaN", 0.5]}'


# -- 9: messages that name the flag and say what to do -----------------------------


def export_tool(argv, capsys):
    from tools.export_saved_model import main

    code = run_tool(main, argv, prog="export_saved_model")
    lines = capsys.readouterr().err.strip().splitlines()
    return code, lines


def test_export_dir_that_is_a_file_or_lies_under_one(release, tmp_path, capsys):
    directory, _, _ = release
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a directory\n")
    flags = [f"--model_dir={directory}", "--task=classifier", f"--max_seq_length={SEQ}"]
    for export_dir, fragment in (
        (a_file, f"--export_dir {a_file}: is a file, not a directory"),
        (a_file / "models" / "tiny", f"--export_dir {a_file / 'models' / 'tiny'}: {a_file} is a file, not a directory"),
    ):
        code, lines = export_tool(flags + [f"--export_dir={export_dir}"], capsys)
        assert code == 1 and len(lines) == 1 and fragment in lines[0], lines
    assert a_file.read_text() == "not a directory\n"


def test_check_output_dir_accepts_new_and_existing_directories(tmp_path):
    check_output_dir(tmp_path, "--export_dir")
    check_output_dir(tmp_path / "new" / "deeper", "--export_dir")
    # A remote path (ram:// here: no network) is checked as itself only.
    check_output_dir("ram://check-output-dir/saved_models/tiny", "--export_dir")
    with pytest.raises(OutputPathError, match="--output_dir"):
        (tmp_path / "f").write_text("")
        check_output_dir(tmp_path / "f" / "x", "--output_dir")


def test_shape_mismatch_is_explained_without_python_parameters(release, tmp_path, capsys):
    directory, _, _ = release
    code, lines = export_tool([
        f"--model_dir={directory}", "--task=classifier", "--num_labels=3", f"--max_seq_length={SEQ}",
        f"--export_dir={tmp_path / 'tiny'}",
    ], capsys)
    assert code == 1 and len(lines) == 1, lines
    assert "output_weights: checkpoint [2, 16] vs model [3, 16]" in lines[0]
    assert "the checkpoint is for a model of another shape" in lines[0]
    assert "allow_fresh" not in lines[0]  # no flag of that name: nothing a command-line user can pass
    assert not (tmp_path / "tiny").exists()


def test_an_export_takes_the_label_names_its_release_records(release, tmp_path, capsys):
    """Was: a fine-tuned release's `label_list.txt` ignored, so its export answered labels "0" and "1"
    unless `--label_names` repeated them."""
    directory, _, _ = release
    copy = tmp_path / "release"
    shutil.copytree(directory, copy)
    (copy / "label_list.txt").write_text("neg\npos\n")
    # --noverify: the label names are what is checked here (the check as TF Serving loads a version, ~2 s of CPU
    # an export: tests/test_verification.py).
    flags = [f"--model_dir={copy}", "--task=classifier", f"--max_seq_length={SEQ}", f"--export_dir={tmp_path / 'tiny'}",
             "--noverify"]
    code, lines = export_tool(flags, capsys)
    assert code == 0 and f"export_saved_model: label names from {copy / 'label_list.txt'}: neg, pos" in lines, lines
    assert (tmp_path / "tiny" / "1" / "assets" / "labels.txt").read_text().split() == ["neg", "pos"]
    code, lines = export_tool(flags + ["--label_names=bad,good"], capsys)  # the flag wins
    assert code == 0 and not any("label names from" in line for line in lines), lines
    assert (tmp_path / "tiny" / "2" / "assets" / "labels.txt").read_text().split() == ["bad", "good"]


def test_missing_variables_name_the_python_parameter(release, tmp_path):
    _, config, _ = release
    prefix = str(tmp_path / "encoder.ckpt")
    save_original_checkpoint(BertModel(config), prefix)
    with pytest.raises(CheckpointError) as raised:
        load_original_checkpoint(BertClassifier(config, num_labels=2), prefix)
    message = str(raised.value)
    assert "2 missing (e.g. " in message and "output_weights" in message and "output_bias" in message
    assert "a Python caller may leave them freshly initialised by naming them in allow_fresh" in message
    assert "Pass allow_fresh" not in message


def test_a_full_disk_during_an_export_is_one_line_and_publishes_nothing(release, tmp_path, capsys, monkeypatch):
    """TensorFlow's write error for a full disk, injected while the SavedModel is staged:
    one line (was a 47-line traceback), no version directory and no staging left."""
    directory, _, _ = release

    def full_disk(module, path, signatures=None, **kwargs):
        raise tf.errors.ResourceExhaustedError(None, None, f"{path}/variables/variables.data-00000-of-00001: "
                                               "No space left on device")

    monkeypatch.setattr(tf.saved_model, "save", full_disk)
    export_dir = tmp_path / "saved_models" / "tiny"
    code, lines = export_tool([f"--model_dir={directory}", "--task=classifier", f"--max_seq_length={SEQ}",
                               f"--export_dir={export_dir}"], capsys)
    errors = [line for line in lines if ": error: " in line]
    assert code == 1 and len(errors) == 1 and errors[0].endswith("No space left on device"), lines
    assert os.listdir(export_dir) == []
