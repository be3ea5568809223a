"""A TEST FIXTURE, not a server: answers TF Serving's REST predict, classify
and regress endpoints and gRPC PredictionService.Predict, Classify and Regress
on loopback by running a SavedModel's signatures in-process, so that the
client can be tested without the real tensorflow_model_server binary (which
cannot be installed here).

It mimics the documented request/response shapes of TF Serving's REST API
(row "instances" -> "predictions", columnar "inputs" -> "outputs",
"examples" -> "results", `{"error": ...}` with HTTP 400) closely enough for
client tests, nothing more. As TF Serving does, it answers a bad request with
the full message of the error (an empty `instances` list, a failed assertion
in the graph), and never drops the connection.

Classify and Regress follow tensorflow_serving/servables/tensorflow/
classifier.cc and regressor.cc (`GetClassificationSignatureDef`,
`PreProcessClassification`, `PostProcessClassificationResult` and their
regression twins): the signature is `model_spec.signature_name`, else
`serving_default`; its method_name must be the method's; it has the one
input `inputs`, fed the serialized examples (context bytes prepended for
`example_list_with_context`, as util.cc does); the outputs are checked for
key, rank, dtype and batch size with TF Serving's messages.
"""

import base64
import http.server
import json
import re
import threading
import urllib.parse
from concurrent import futures

import numpy as np
import tensorflow as tf

from keras_bert_impl.serving.session_model import SessionModel

_METHOD_PATH = re.compile(r"^/v1/models/([^/:]+)(?:/versions/(\d+))?:(predict|classify|regress)$")

CLASSIFY_METHOD_NAME = "tensorflow/serving/classify"  # tensorflow/cc/saved_model/signature_constants.h
REGRESS_METHOD_NAME = "tensorflow/serving/regress"


def _jsonable(array):
    if array.dtype.kind in ("S", "O"):
        return np.char.decode(array.astype(bytes), "utf-8").tolist()
    return array.tolist()


def error_message(error):
    """The whole message of `error`; for a TensorFlow error every line, not just "Graph execution error:"."""
    return getattr(error, "message", None) or str(error)


def read_signature_defs(saved_model_dir):
    """The SignatureDefs of `saved_model.pb`, by key (what TF Serving reads; `tf.saved_model.load` drops method_name)."""
    from tensorflow.core.protobuf import saved_model_pb2

    with tf.io.gfile.GFile(f"{saved_model_dir.rstrip('/')}/saved_model.pb", "rb") as f:
        return dict(saved_model_pb2.SavedModel.FromString(f.read()).meta_graphs[0].signature_def)


def example_from_json(features):
    """A REST example (`{name: value or list}`) as a `tf.train.Example`, as
    TF Serving's json_tensor.cc reads it: whole numbers int64, other numbers
    float, strings and `{"b64": ...}` bytes."""
    example = tf.train.Example()
    for name, value in features.items():
        values = value if isinstance(value, list) else [value]
        feature = example.features.feature[name]
        if all(isinstance(v, int) for v in values):
            feature.int64_list.value.extend(values)
        elif all(isinstance(v, (int, float)) for v in values):
            feature.float_list.value.extend(values)
        else:
            feature.bytes_list.value.extend(
                base64.b64decode(v["b64"]) if isinstance(v, dict) else v.encode("utf-8") for v in values
            )
    return example


def serialized_examples(input_proto):
    """util.cc's InputToSerializedExampleTensor: the examples of an `Input` proto, serialized."""
    kind = input_proto.WhichOneof("kind")
    if kind == "example_list":
        return [e.SerializeToString() for e in input_proto.example_list.examples]
    if kind == "example_list_with_context":
        context = input_proto.example_list_with_context.context.SerializeToString()
        return [context + e.SerializeToString() for e in input_proto.example_list_with_context.examples]
    if kind is None:
        return []
    raise ValueError(f"Input with kind {kind} not supported.")


class LoopbackServingFixture:
    """REST + gRPC loopback endpoints backed by the export loaded as TF Serving loads it (`SessionModel`)."""

    def __init__(self, saved_model_dir, model_name):
        self.model_name = model_name
        self.model = SessionModel(saved_model_dir)
        self.signature_defs = self.model.signature_defs
        self._http = None
        self._grpc = None

    # -- Classify and Regress, as classifier.cc and regressor.cc -----------------

    def _run_examples_signature(self, model_spec, input_proto, method_name, kind):
        """(signature, outputs by key, number of examples) for a Classify/Regress request."""
        name = model_spec.signature_name or "serving_default"
        if name not in self.signature_defs:
            raise ValueError(f"No signature was found with the name: {name}")
        signature = self.signature_defs[name]
        if signature.method_name != method_name:
            raise ValueError(f"Expected {kind} signature method_name to be {method_name}. Was: {signature.method_name}")
        if len(signature.inputs) != 1:
            raise ValueError("Expected one input Tensor.")
        if "inputs" not in signature.inputs:
            raise ValueError(f"No {kind} inputs found in SignatureDef: {signature}")
        examples = serialized_examples(input_proto)
        if not examples:
            raise ValueError(f"{kind} request input is empty.")
        return signature, self.model.predict({"inputs": examples}, name), len(examples)

    def classify(self, request):
        """A `ClassificationResponse` for a `ClassificationRequest`, built as classifier.cc does."""
        from tensorflow_serving.apis import classification_pb2

        signature, outputs, num_examples = self._run_examples_signature(
            request.model_spec, request.input, CLASSIFY_METHOD_NAME, "classification"
        )
        if len(signature.outputs) not in (1, 2):
            raise ValueError(f"Expected one or two output Tensors, found {len(signature.outputs)}")
        if "classes" not in signature.outputs and "scores" not in signature.outputs:
            raise ValueError('Expected classification signature outputs to contain at least one of "classes" or "scores".')
        classes, scores = outputs.get("classes"), outputs.get("scores")
        for key, value, dtype_name in (("classes", classes, "DT_STRING"), ("scores", scores, "DT_FLOAT")):
            if value is None:
                continue
            if value.ndim != 2:
                raise ValueError(f"Expected Tensor shape: [batch_size num_classes] but got {list(value.shape)}")
            wrong_dtype = value.dtype != np.float32 if key == "scores" else value.dtype.kind not in ("S", "O")
            if wrong_dtype:
                raise ValueError(f"Expected {key} Tensor of {dtype_name}. Got: {value.dtype}")
            if value.shape[0] != num_examples:
                raise ValueError(f"Expected {key} output batch size of {num_examples}. Got: {value.shape[0]}")
        if classes is not None and scores is not None and classes.shape[1] != scores.shape[1]:
            raise ValueError(f"Tensors class and score should match in dim_size(1). Got {classes.shape[1]} vs. {scores.shape[1]}")
        num_classes = (classes if classes is not None else scores).shape[1]
        response = classification_pb2.ClassificationResponse()
        response.model_spec.name = request.model_spec.name
        response.model_spec.signature_name = request.model_spec.signature_name
        for i in range(num_examples):
            classifications = response.result.classifications.add()
            for c in range(num_classes):
                cls = classifications.classes.add()
                if classes is not None:
                    cls.label = classes[i, c].decode("utf-8")
                if scores is not None:
                    cls.score = scores[i, c]
        return response

    def regress(self, request):
        """A `RegressionResponse` for a `RegressionRequest`, built as regressor.cc does."""
        from tensorflow_serving.apis import regression_pb2

        signature, outputs, num_examples = self._run_examples_signature(
            request.model_spec, request.input, REGRESS_METHOD_NAME, "regression"
        )
        if len(signature.outputs) != 1:
            raise ValueError("Expected one output Tensor.")
        if "outputs" not in signature.outputs:
            raise ValueError(f"No regression outputs found in SignatureDef: {signature}")
        value = outputs["outputs"]
        if not (value.ndim == 1 or (value.ndim == 2 and value.shape[1] == 1)):
            raise ValueError(f"Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but got {list(value.shape)}")
        if value.shape[0] != num_examples:
            raise ValueError(f"Input batch size did not match output batch size: {num_examples} vs. {value.shape[0]}")
        if value.dtype != np.float32:
            raise ValueError(f"Expected output Tensor of DT_FLOAT.  Got: {value.dtype}")
        response = regression_pb2.RegressionResponse()
        response.model_spec.name = request.model_spec.name
        response.model_spec.signature_name = request.model_spec.signature_name
        for v in value.reshape(-1):
            response.result.regressions.add().value = v
        return response

    def run_signature(self, signature_name, inputs):
        return self.model.predict(inputs, signature_name)

    # -- REST ---------------------------------------------------------------

    def _handle_rest(self, path, body):
        match = _METHOD_PATH.match(path)
        if not match or urllib.parse.unquote(match.group(1)) != self.model_name:
            return 404, {"error": f"Servable not found for request: {path}"}
        try:
            request = json.loads(body)
        except ValueError as e:
            return 400, {"error": f"JSON Parse error: {e}"}
        if not isinstance(request, dict):
            return 400, {"error": f"JSON Value: {body.decode('utf-8', 'replace')} Is not object"}
        if match.group(3) != "predict":
            return self._handle_rest_examples(match.group(3), request)
        signature = request.get("signature_name", "serving_default")
        if signature not in self.signature_defs:
            return 400, {"error": f'Serving signature name: "{signature}" not found in signature def'}
        if "instances" in request:
            instances = request["instances"]
            if not instances:  # TF Serving's words for it
                return 400, {"error": f"JSON Value: {body.decode('utf-8', 'replace')} No values in 'instances' array"}
            if not isinstance(instances[0], dict):
                name = self.model.input_names(signature)[0]
                instances = [{name: value} for value in instances]
            inputs = {key: [row[key] for row in instances] for key in instances[0]}
            outputs = self.run_signature(signature, inputs)
            rows = [{name: _jsonable(np.asarray(value[i])) for name, value in outputs.items()} for i in range(len(instances))]
            if len(outputs) == 1:  # TF Serving's rows are bare values then (json_tensor.cc: elements_are_objects)
                rows = [next(iter(row.values())) for row in rows]
            return 200, {"predictions": rows}
        if "inputs" not in request:
            return 400, {"error": "Missing 'inputs' or 'instances' key"}
        outputs = self.run_signature(signature, request["inputs"])
        if len(outputs) == 1:  # and the columnar "outputs" the bare value
            return 200, {"outputs": _jsonable(next(iter(outputs.values())))}
        return 200, {"outputs": {name: _jsonable(value) for name, value in outputs.items()}}

    def _handle_rest_examples(self, method, request):
        from tensorflow_serving.apis import classification_pb2, regression_pb2

        proto = (classification_pb2.ClassificationRequest if method == "classify" else regression_pb2.RegressionRequest)()
        proto.model_spec.name = self.model_name
        proto.model_spec.signature_name = request.get("signature_name", "")
        if "context" in request:
            proto.input.example_list_with_context.context.CopyFrom(example_from_json(request["context"]))
            examples = proto.input.example_list_with_context.examples
        else:
            examples = proto.input.example_list.examples
        for features in request.get("examples", []):
            examples.add().CopyFrom(example_from_json(features))
        if method == "classify":
            result = self.classify(proto).result
            return 200, {"results": [[[c.label, c.score] for c in cs.classes] for cs in result.classifications]}
        return 200, {"results": [r.value for r in self.regress(proto).result.regressions]}

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

            def _examples_method(self, method, request, context):
                if request.model_spec.name != fixture.model_name:
                    context.abort(grpc.StatusCode.NOT_FOUND, f"Servable not found: {request.model_spec.name}")
                try:
                    return method(request)
                except (ValueError, KeyError, TypeError, tf.errors.OpError) as e:
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, error_message(e))

            def Classify(self, request, context):  # noqa: N802 (gRPC API)
                return self._examples_method(fixture.classify, request, context)

            def Regress(self, request, context):  # noqa: N802 (gRPC API)
                return self._examples_method(fixture.regress, request, context)

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
