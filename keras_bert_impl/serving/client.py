"""Clients for a TF Serving model: REST (`/v1/models/NAME:predict`) and gRPC.

Example:
>>> client = RestClient("http://localhost:8501", "sentiment")  # doctest: +SKIP
>>> client.predict_instances([{"text": "What a great film!"}])  # doctest: +SKIP
[{'probabilities': [0.02, 0.98], 'label_ids': 1, 'labels': 'positive'}]
"""

import json
import urllib.error
import urllib.request

from keras_bert_impl.errors import BertError


class ServingError(BertError, RuntimeError):
    """The server answered with an error status (its message included)."""


class RestClient:
    """TF Serving's REST predict API.

    Args:
        base_url: e.g. `http://localhost:8501`.
        model_name: The served model's name.
        version: Optional integer version (default: the server's latest).
        timeout: Seconds per request.
    """

    def __init__(self, base_url, model_name, version=None, timeout=30.0):
        self.base_url = base_url.rstrip("/")
        self.model_name = model_name
        self.version = version
        self.timeout = timeout

    @property
    def url(self):
        version = f"/versions/{self.version}" if self.version is not None else ""
        return f"{self.base_url}/v1/models/{self.model_name}{version}:predict"

    def _post(self, body):
        request = urllib.request.Request(
            self.url, data=json.dumps(body).encode("utf-8"), headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as e:
            detail = e.read().decode("utf-8", "replace")
            try:
                detail = json.loads(detail).get("error", detail)
            except ValueError:
                pass
            raise ServingError(f"{self.url}: HTTP {e.code}: {detail}") from None

    def predict_instances(self, instances, signature_name="serving_default"):
        """Row format: a list of per-example dicts; returns `predictions`."""
        body = {"signature_name": signature_name, "instances": instances}
        return self._post(body)["predictions"]

    def predict_inputs(self, inputs, signature_name="serving_default"):
        """Columnar format: a dict of batched inputs; returns `outputs`."""
        body = {"signature_name": signature_name, "inputs": inputs}
        return self._post(body)["outputs"]


class GrpcClient:
    """TF Serving's gRPC `PredictionService.Predict`.

    Args:
        target: `host:port`, e.g. `localhost:8500`.
        model_name: The served model's name.
        timeout: Seconds per request.
    """

    def __init__(self, target, model_name, timeout=30.0):
        import grpc
        from tensorflow_serving.apis import prediction_service_pb2_grpc

        self.model_name = model_name
        self.timeout = timeout
        self.channel = grpc.insecure_channel(target)
        self.stub = prediction_service_pb2_grpc.PredictionServiceStub(self.channel)

    def predict(self, inputs, signature_name="serving_default"):
        """`inputs`: dict name -> array-like; returns dict name -> numpy array."""
        import grpc
        import tensorflow as tf
        from tensorflow_serving.apis import predict_pb2

        request = predict_pb2.PredictRequest()
        request.model_spec.name = self.model_name
        request.model_spec.signature_name = signature_name
        for name, value in inputs.items():
            request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
        try:
            response = self.stub.Predict(request, timeout=self.timeout)
        except grpc.RpcError as e:
            raise ServingError(f"gRPC {e.code().name}: {e.details()}") from None
        return {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}

    def close(self):
        self.channel.close()
