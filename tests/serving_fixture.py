"""A TEST FIXTURE, not a server: answers TF Serving's REST predict endpoint
and gRPC PredictionService.Predict on loopback by running a SavedModel's
signatures in-process, so that the client can be tested without the real
tensorflow_model_server binary (which cannot be installed here).

It mimics the documented request/response shapes of TF Serving's REST API
(row "instances" -> "predictions", columnar "inputs" -> "outputs",
`{"error": ...}` with HTTP 400) closely enough for client tests, nothing more.
As TF Serving does, it answers a bad request with the full message of the
error (an empty `instances` list, a failed assertion in the graph), and
never drops the connection.
"""

import http.server
import json
import re
import threading
import urllib.parse
from concurrent import futures

import numpy as np
import tensorflow as tf

_PREDICT_PATH = re.compile(r"^/v1/models/([^/:]+)(?:/versions/(\d+))?:predict$")


def _jsonable(array):
    if array.dtype.kind in ("S", "O"):
        return np.char.decode(array.astype(bytes), "utf-8").tolist()
    return array.tolist()


def error_message(error):
    """The whole message of `error`; for a TensorFlow error every line, not just "Graph execution error:"."""
    return getattr(error, "message", None) or str(error)


class LoopbackServingFixture:
    """REST + gRPC loopback endpoints backed by `tf.saved_model.load(path)`."""

    def __init__(self, saved_model_dir, model_name):
        self.model_name = model_name
        self.loaded = tf.saved_model.load(saved_model_dir)
        self._http = None
        self._grpc = None

    def run_signature(self, signature_name, inputs):
        function = self.loaded.signatures[signature_name]
        specs = function.structured_input_signature[1]
        tensors = {}
        for name, value in inputs.items():
            if name not in specs:
                raise ValueError(f"unknown input {name!r} for signature {signature_name}")
            tensors[name] = tf.constant(np.array(value, dtype=object if specs[name].dtype == tf.string else specs[name].dtype.as_numpy_dtype))
        return {name: tensor.numpy() for name, tensor in function(**tensors).items()}

    # -- REST ---------------------------------------------------------------

    def _handle_rest(self, path, body):
        match = _PREDICT_PATH.match(path)
        if not match or urllib.parse.unquote(match.group(1)) != self.model_name:
            return 404, {"error": f"Servable not found for request: {path}"}
        try:
            request = json.loads(body)
        except ValueError as e:
            return 400, {"error": f"JSON Parse error: {e}"}
        if not isinstance(request, dict):
            return 400, {"error": f"JSON Value: {body.decode('utf-8', 'replace')} Is not object"}
        signature = request.get("signature_name", "serving_default")
        if signature not in self.loaded.signatures:
            return 400, {"error": f'Serving signature name: "{signature}" not found in signature def'}
        if "instances" in request:
            instances = request["instances"]
            if not instances:  # TF Serving's words for it
                return 400, {"error": f"JSON Value: {body.decode('utf-8', 'replace')} No values in 'instances' array"}
            if not isinstance(instances[0], dict):
                name = next(iter(self.loaded.signatures[signature].structured_input_signature[1]))
                instances = [{name: value} for value in instances]
            inputs = {key: [row[key] for row in instances] for key in instances[0]}
            outputs = self.run_signature(signature, inputs)
            rows = [{name: _jsonable(np.asarray(value[i])) for name, value in outputs.items()} for i in range(len(instances))]
            return 200, {"predictions": rows}
        if "inputs" not in request:
            return 400, {"error": "Missing 'inputs' or 'instances' key"}
        outputs = self.run_signature(signature, request["inputs"])
        return 200, {"outputs": {name: _jsonable(value) for name, value in outputs.items()}}

    def start_rest(self):
        fixture = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server API)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    status, payload = fixture._handle_rest(self.path, body)
                except (ValueError, KeyError, TypeError, tf.errors.OpError) as e:
                    status, payload = 400, {"error": error_message(e)}
                except Exception as e:  # noqa: BLE001 (a server answers; it does not hang up)
                    status, payload = 500, {"error": error_message(e)}
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self._http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    # -- gRPC ---------------------------------------------------------------

    def start_grpc(self):
        import grpc
        from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

        fixture = self

        class Servicer(prediction_service_pb2_grpc.PredictionServiceServicer):
            def Predict(self, request, context):  # noqa: N802 (gRPC API)
                if request.model_spec.name != fixture.model_name:
                    context.abort(grpc.StatusCode.NOT_FOUND, f"Servable not found: {request.model_spec.name}")
                inputs = {name: tf.make_ndarray(proto) for name, proto in request.inputs.items()}
                try:
                    outputs = fixture.run_signature(request.model_spec.signature_name or "serving_default", inputs)
                except (ValueError, KeyError, TypeError, tf.errors.OpError) as e:
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, error_message(e))
                response = predict_pb2.PredictResponse()
                for name, value in outputs.items():
                    response.outputs[name].CopyFrom(tf.make_tensor_proto(value))
                return response

        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(Servicer(), self._grpc)
        port = self._grpc.add_insecure_port("127.0.0.1:0")
        self._grpc.start()
        return f"127.0.0.1:{port}"

    def stop(self):
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        if self._grpc is not None:
            self._grpc.stop(grace=None)
