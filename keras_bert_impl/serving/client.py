"""Clients for a TF Serving model: REST (`/v1/models/NAME:predict`,
`:classify`, `:regress`) and gRPC (`Predict`, `Classify`, `Regress`).

Every failed call raises `ServingError`, with the underlying exception as its
`__cause__`: an error status, a refused, dropped or timed-out connection,
and a response that is not what TF Serving sends (not JSON, cut short,
without `predictions`, a tensor with a shape but no values).

Both clients can retry a call the server could not take at that moment
(HTTP 503, gRPC UNAVAILABLE, and for REST a refused connection, which gRPC
reports as UNAVAILABLE too): `retries` more attempts, the k-th after
`backoff * 2**k` seconds. Retries are off by default, so a caller that does
its own sees every failure at once.

Example:
>>> client = RestClient("http://localhost:8501", "sentiment")  # doctest: +SKIP
>>> client.predict_instances([{"text": "What a great film!"}])  # doctest: +SKIP
[{'probabilities': [0.02, 0.98], 'label_ids': 1, 'labels': 'positive'}]
>>> client.classify([{"input_word_ids": [101, 2307, 102, 0], "input_mask": [1, 1, 1, 0],
...                   "input_type_ids": [0, 0, 0, 0]}])  # doctest: +SKIP
[[('negative', 0.02), ('positive', 0.98)]]
"""

import base64
import http.client
import json
import socket
import threading
import time
import urllib.parse

import numpy as np

from keras_bert_impl.errors import BertError

# The most bytes one answer may take (its body, or a tensor it declares),
# unless a client is given another limit.
MAX_RESPONSE_BYTES = 256 << 20
# Redirects that keep the POST and its body, followed within the one timeout.
_KEPT_REDIRECTS = (307, 308)
_MAX_REDIRECTS = 5


class ServingError(BertError, RuntimeError):
    """A predict call that failed; the message names the endpoint and why.

    Attributes:
        code: `"HTTP <status>"`, a gRPC status name (`"UNAVAILABLE"`), or
            None for a failure without a status (connection, bad response).
        unavailable: Whether the server could not take the call at that
            moment (HTTP 503, gRPC UNAVAILABLE, refused connection), so that
            the same call may succeed later.
    """

    def __init__(self, message, code=None, unavailable=False):
        super().__init__(message)
        self.code = code
        self.unavailable = unavailable


def call_with_retries(call, retries=0, backoff=0.1, sleep=time.sleep):
    """`call()`, tried again while it raises an unavailable `ServingError`.

    Args:
        call: A function of no arguments.
        retries: How many more attempts after the first (0: none).
        backoff: Seconds before the first retry; doubled for each next one.
        sleep: `sleep(seconds)`.

    Returns:
        What `call()` returned.

    Raises:
        ServingError: the last attempt's, or the first one not marked
            `unavailable`.
    """
    for attempt in range(retries + 1):
        try:
            return call()
        except ServingError as e:
            if attempt == retries or not e.unavailable:
                raise
        sleep(backoff * 2**attempt)


# The most of a JSON error body's `error` kept in an exception's message
# (TensorFlow's own messages are a few hundred characters; a server may send megabytes).
_MAX_ERROR_CHARS = 4000


def _error_detail(body, reason):
    """The `error` of TF Serving's JSON error body (its first `_MAX_ERROR_CHARS`), else the body's first 500
    characters, else the reason."""
    text = body.decode("utf-8", "replace")
    try:
        detail = json.loads(text)["error"]
    except (ValueError, KeyError, TypeError, RecursionError):  # RecursionError: nested past Python's limit
        return text[:500] or reason
    detail = detail if isinstance(detail, str) else json.dumps(detail)
    if len(detail) > _MAX_ERROR_CHARS:
        detail = f"{detail[:_MAX_ERROR_CHARS]}... ({len(detail) - _MAX_ERROR_CHARS} more characters)"
    return detail


def _read_by(response, deadline, max_bytes=MAX_RESPONSE_BYTES):
    """The body of `response`, read whole before `deadline` (`time.monotonic()`).

    A socket timeout bounds each read, not the answer: a server sending a
    byte at a time would otherwise hold the call without end.

    Raises:
        TimeoutError: the deadline passed first.
        ServingError: the body is (or says it will be) longer than `max_bytes`.
    """
    if response.length is not None and response.length > max_bytes:
        raise ServingError(f"the answer's body of {response.length} bytes is over the client's limit of {max_bytes}")
    sock = getattr(getattr(response.fp, "raw", None), "_sock", None)  # To bound each read by what is left.
    chunks, size = [], 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the answer did not end in time")
        if sock is not None:
            sock.settimeout(remaining)
        chunk = response.read1(1 << 16)
        if not chunk:
            if response.length:  # The server hung up before the length it promised.
                raise http.client.IncompleteRead(b"".join(chunks), response.length)
            return b"".join(chunks)
        size += len(chunk)
        if size > max_bytes:
            raise ServingError(f"the answer's body is over the client's limit of {max_bytes} bytes")
        chunks.append(chunk)


class _Watchdog:
    """Shuts a connection's socket down at a deadline, so that no read or write
    on it (headers dripped a byte at a time, an endless run of `100 Continue`)
    outlasts the call's timeout."""

    def __init__(self, connection, seconds):
        self.connection, self.fired = connection, False
        self.timer = threading.Timer(max(0.0, seconds), self._fire)
        self.timer.daemon = True

    def _fire(self):
        self.fired = True
        sock = self.connection.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self):
        self.timer.start()
        return self

    def __exit__(self, *exc):
        self.timer.cancel()


def _check_batch(where, output_rows, input_rows):
    """Each batched output has one row per example where every batched input
    has the same number of them.

    Args:
        where: The server, for the message.
        output_rows: `{name: row count, or None for an unbatched output}`.
        input_rows: Row counts of the inputs (None: unbatched).
    """
    sizes = set(input_rows)
    if len(sizes) != 1 or None in sizes:
        return
    (batch,) = sizes
    for name, rows in output_rows.items():
        if rows is not None and rows != batch:
            raise ServingError(f"{where}: output {name!r} has {rows} rows for {batch} examples")


def _list_rows(value):
    return len(value) if isinstance(value, (list, tuple)) else None


class RestClient:
    """TF Serving's REST API: predict, classify, regress.

    Args:
        base_url: e.g. `http://localhost:8501`.
        model_name: The served model's name (URL-quoted in the request).
        version: Optional integer version (default: the server's latest).
        timeout: Seconds per attempt, all of it: to connect, send, and read
            the headers and the body (redirects included).
        retries: Further attempts after an HTTP 503 or a refused connection.
        backoff: Seconds before the first retry, doubled for each next one.
        max_response_bytes: The longest answer body taken.
    """

    def __init__(self, base_url, model_name, version=None, timeout=30.0, retries=0, backoff=0.1,
                 max_response_bytes=MAX_RESPONSE_BYTES):
        self.base_url = base_url.rstrip("/")
        self.model_name = model_name
        self.version = version
        self.timeout = timeout
        self.max_response_bytes = max_response_bytes
        self.retries = retries
        self.backoff = backoff

    def method_url(self, method):
        """The URL of `method`: `predict`, `classify` or `regress`."""
        version = f"/versions/{int(self.version)}" if self.version is not None else ""
        return f"{self.base_url}/v1/models/{urllib.parse.quote(self.model_name, safe='')}{version}:{method}"

    @property
    def url(self):
        return self.method_url("predict")

    def _post_once(self, url, data):
        """One POST of `data` to `url` (following 307/308 redirects), all within
        `timeout`; the response body as a JSON object."""
        deadline = time.monotonic() + self.timeout
        for _ in range(_MAX_REDIRECTS + 1):
            status, reason, location, raw = self._exchange(url, data, deadline)
            if status not in _KEPT_REDIRECTS:
                break
            if not location:
                raise ServingError(f"{url}: HTTP {status} without a Location to go to")
            url = urllib.parse.urljoin(url, location)
        else:
            raise ServingError(f"{url}: more than {_MAX_REDIRECTS} redirects")
        if 300 <= status < 400:
            raise ServingError(f"{url}: HTTP {status} redirect to {location!r}, which would drop the request's "
                               "body; give the URL it names", f"HTTP {status}")
        if status >= 400:
            raise ServingError(f"{url}: HTTP {status}: {_error_detail(raw, reason)}", f"HTTP {status}", status == 503)
        try:
            payload = json.loads(raw)
        except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError; nested too deep
            raise ServingError(f"{url}: response is not JSON ({e}): {raw[:200]!r}") from e
        if not isinstance(payload, dict):
            raise ServingError(f"{url}: response is not a JSON object: {raw[:200]!r}")
        return payload

    def _exchange(self, url, data, deadline):
        """`(status, reason, location, body)` of one POST, or `ServingError` by `deadline`."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ServingError(f"{url}: not an http(s) URL")
        connection_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ServingError(f"{url}: no answer within {self.timeout} s")
        connection = connection_class(parts.hostname, parts.port, timeout=remaining)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        watchdog = _Watchdog(connection, remaining)
        try:
            with watchdog:
                try:
                    connection.connect()
                except TimeoutError as e:
                    raise ServingError(f"{url}: no connection within {self.timeout} s") from e
                except OSError as e:
                    refused = isinstance(e, ConnectionRefusedError)
                    raise ServingError(f"{url}: cannot connect: {e}", unavailable=refused) from e
                connection.request("POST", path, body=data, headers={"Content-Type": "application/json"})
                response = connection.getresponse()
                body = _read_by(response, deadline, self.max_response_bytes)
                return response.status, response.reason, response.getheader("Location"), body
        except ServingError:
            raise
        except TimeoutError as e:
            raise ServingError(f"{url}: no answer within {self.timeout} s") from e
        except (http.client.HTTPException, OSError) as e:  # RemoteDisconnected, IncompleteRead, reset
            if watchdog.fired or time.monotonic() >= deadline:
                raise ServingError(f"{url}: no answer within {self.timeout} s") from e
            raise ServingError(f"{url}: connection failed: {type(e).__name__}: {e}") from e
        finally:
            connection.close()

    def _call(self, method, body, key):
        url = self.method_url(method)
        data = json.dumps(body).encode("utf-8")
        payload = call_with_retries(lambda: self._post_once(url, data), self.retries, self.backoff)
        if key not in payload:
            detail = f": {payload['error']}" if "error" in payload else f" (keys: {sorted(payload)})"
            raise ServingError(f"{url}: response has no {key!r}{detail}")
        return payload[key]

    def _predict(self, body, key):
        return self._call("predict", body, key)

    def _one_per_request(self, method, body, key, requests, noun):
        """The response's `key`, checked to be a list with one entry per request."""
        values = self._call(method, body, key)
        if not isinstance(values, list) or len(values) != len(requests):
            count = len(values) if isinstance(values, list) else type(values).__name__
            raise ServingError(f"{self.method_url(method)}: {count} {key} for {len(requests)} {noun}")
        return values

    def _examples_results(self, method, examples, signature_name):
        """`results` of `:classify` / `:regress`, one per example."""
        body = {"signature_name": signature_name, "examples": [json_example(e) for e in examples]}
        return self._one_per_request(method, body, "results", examples, "examples")

    def classify(self, examples, signature_name="classify"):
        """TF Serving's Classify: per example, its `(label, score)` per class.

        Args:
            examples: Feature dicts, `{name: int, float, str, bytes or a list
                of them}` (bytes go as base64).
            signature_name: A signature of method `tensorflow/serving/classify`.

        Raises:
            ServingError: any failure, or a response without one result per example.
        """
        results = self._examples_results("classify", examples, signature_name)
        try:
            return [[(str(label), float(score)) for label, score in classes] for classes in results]
        except (TypeError, ValueError) as e:
            raise ServingError(f"{self.method_url('classify')}: results are not [label, score] pairs: {e}") from e

    def regress(self, examples, signature_name="regress"):
        """TF Serving's Regress: one float per example (see `classify` for `examples`).

        Raises:
            ServingError: any failure, or a response without one number per example.
        """
        results = self._examples_results("regress", examples, signature_name)
        try:
            return [float(value) for value in results]
        except (TypeError, ValueError) as e:
            raise ServingError(f"{self.method_url('regress')}: results are not numbers: {e}") from e

    def predict_instances(self, instances, signature_name="serving_default"):
        """Row format: a list of per-example dicts; returns `predictions`, one per instance.

        Raises:
            ServingError: any failure, or a response whose `predictions` is
                not a list with one entry per instance.
        """
        body = {"signature_name": signature_name, "instances": instances}
        return self._one_per_request("predict", body, "predictions", instances, "instances")

    def predict_inputs(self, inputs, signature_name="serving_default"):
        """Columnar format: a dict of batched inputs; returns `outputs`.

        Raises:
            ServingError: any failure (see the module docstring), or a list
                output without one row per example of the inputs.
        """
        outputs = self._predict({"signature_name": signature_name, "inputs": inputs}, "outputs")
        named = outputs if isinstance(outputs, dict) else {"outputs": outputs}
        _check_batch(self.url, {name: _list_rows(value) for name, value in named.items()},
                     [_list_rows(value) for value in inputs.values()])
        return outputs


def _feature_values(name, value):
    """A feature's values as a list, with the kind of list they fill."""
    values = list(value) if isinstance(value, (list, tuple, np.ndarray)) else [value]
    kinds = {"bytes" if isinstance(v, (str, bytes)) else "float" if isinstance(v, (float, np.floating)) else "int64"
             for v in values}
    if len(kinds) > 1:
        raise ServingError(f"feature {name!r} mixes {' and '.join(sorted(kinds))} values")
    return (kinds.pop() if kinds else "int64"), values


def json_example(features):
    """A feature dict in the JSON of TF Serving's REST `examples` (bytes as `{"b64": ...}`)."""
    def encode(value):
        if isinstance(value, bytes):
            return {"b64": base64.b64encode(value).decode("ascii")}
        return value.item() if isinstance(value, np.generic) else value

    return {name: [encode(v) for v in _feature_values(name, value)[1]] for name, value in features.items()}


def example_proto(features):
    """A feature dict as a `tf.train.Example`: ints to int64_list, floats to
    float_list, str (UTF-8) and bytes to bytes_list."""
    from tensorflow.core.example import example_pb2, feature_pb2

    example = example_pb2.Example()
    for name, value in features.items():
        kind, values = _feature_values(name, value)
        feature = example.features.feature[name]
        if kind == "bytes":
            feature.bytes_list.CopyFrom(feature_pb2.BytesList(value=[v.encode("utf-8") if isinstance(v, str) else v for v in values]))
        elif kind == "float":
            feature.float_list.CopyFrom(feature_pb2.FloatList(value=values))
        else:
            feature.int64_list.CopyFrom(feature_pb2.Int64List(value=[int(v) for v in values]))
    return example


# A TensorProto's value field for each dtype (tensorflow/core/framework/tensor.proto).
_VALUE_FIELDS = {
    "float16": "half_val", "bfloat16": "half_val", "float32": "float_val", "float64": "double_val",
    "int8": "int_val", "int16": "int_val", "int32": "int_val", "uint8": "int_val", "uint16": "int_val",
    "int64": "int64_val", "uint32": "uint32_val", "uint64": "uint64_val", "bool": "bool_val",
    "string": "string_val", "complex64": "scomplex_val", "complex128": "dcomplex_val",
}


def tensor_proto_to_array(name, proto, max_bytes=MAX_RESPONSE_BYTES):
    """A response's `TensorProto` as a numpy array, its values checked against its shape.

    `tf.make_ndarray` fills a tensor whose values are missing with zeros or
    empty strings; here that is an error, as is any count other than the
    shape's size or 1 (TensorFlow's form of a tensor with every element equal).

    Args:
        name: The output's name, for the message.
        proto: A `tensorflow.TensorProto`.
        max_bytes: The most bytes the array may take.

    Returns:
        The numpy array.

    Raises:
        ServingError: values missing or not matching the shape, or a shape
            whose array would be larger than `max_bytes`.
    """
    import tensorflow as tf

    try:
        dtype = tf.dtypes.as_dtype(proto.dtype)
    except TypeError:
        raise ServingError(f"output {name!r}: unknown dtype {proto.dtype}") from None
    shape = [dim.size for dim in proto.tensor_shape.dim]
    if any(dim < 0 for dim in shape):
        raise ServingError(f"output {name!r}: shape {shape} has a negative dimension")
    size = int(np.prod(shape, dtype=object))  # exact: a declared shape may overflow int64
    itemsize = 0 if dtype.base_dtype == tf.string else dtype.size
    if size * itemsize > max_bytes:  # One value stands for every element: this would be allocated.
        raise ServingError(f"output {name!r}: shape {shape} ({size * itemsize} bytes of {dtype.name}) is over the "
                           f"client's limit of {max_bytes} bytes")
    if proto.tensor_content and len(proto.tensor_content) != size * itemsize:
        raise ServingError(f"output {name!r}: {len(proto.tensor_content)} bytes of values for shape {shape} "
                           f"({size * itemsize} bytes)")
    if not proto.tensor_content and size > 0:
        # Only the field of its dtype holds its values (`make_ndarray` reads no other).
        field = _VALUE_FIELDS.get(dtype.base_dtype.name)
        count = len(getattr(proto, field)) if field else 0
        dtype = dtype.name
        if count == 0:
            raise ServingError(f"output {name!r}: dtype {dtype} and shape {shape} but no values")
        if count not in (1, size):
            raise ServingError(f"output {name!r}: {count} values for shape {shape} ({size} elements)")
    try:
        return tf.make_ndarray(proto)
    except (TypeError, ValueError) as e:
        raise ServingError(f"output {name!r}: undecodable tensor: {e}") from e


class GrpcClient:
    """TF Serving's gRPC `PredictionService`: `Predict`, `Classify`, `Regress`.

    Args:
        target: `host:port`, e.g. `localhost:8500`.
        model_name: The served model's name.
        timeout: Seconds per attempt.
        retries: Further attempts after UNAVAILABLE.
        backoff: Seconds before the first retry, doubled for each next one.
    """

    def __init__(self, target, model_name, timeout=30.0, retries=0, backoff=0.1):
        import grpc
        from tensorflow_serving.apis import prediction_service_pb2_grpc

        self.target = target
        self.model_name = model_name
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.channel = grpc.insecure_channel(target)
        self.stub = prediction_service_pb2_grpc.PredictionServiceStub(self.channel)

    def _call_once(self, method, request):
        import grpc

        try:
            return getattr(self.stub, method)(request, timeout=self.timeout)
        except grpc.RpcError as e:
            code = e.code()
            raise ServingError(
                f"{self.target}: gRPC {code.name}: {e.details()}", code.name, code == grpc.StatusCode.UNAVAILABLE
            ) from e

    def predict(self, inputs, signature_name="serving_default"):
        """`inputs`: dict name -> array-like; returns dict name -> numpy array.

        Raises:
            ServingError: an error status (its name and details in the
                message), or an output tensor without its values.
        """
        import tensorflow as tf
        from tensorflow_serving.apis import predict_pb2

        request = predict_pb2.PredictRequest()
        request.model_spec.name = self.model_name
        request.model_spec.signature_name = signature_name
        for name, value in inputs.items():
            request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
        response = call_with_retries(lambda: self._call_once("Predict", request), self.retries, self.backoff)
        outputs = {name: tensor_proto_to_array(name, proto) for name, proto in response.outputs.items()}
        _check_batch(self.target, {name: len(value) if value.ndim else None for name, value in outputs.items()},
                     [len(np.asarray(value)) if np.ndim(value) else None for value in inputs.values()])
        return outputs

    def _call_with_examples(self, method, request, examples, signature_name):
        """`method` ("Classify", "Regress") on `examples`; its response's `result`,
        checked to hold one entry per example."""
        request.model_spec.name = self.model_name
        request.model_spec.signature_name = signature_name
        for features in examples:
            request.input.example_list.examples.add().CopyFrom(
                features if not isinstance(features, dict) else example_proto(features)
            )
        result = call_with_retries(lambda: self._call_once(method, request), self.retries, self.backoff).result
        count = len(result.classifications if method == "Classify" else result.regressions)
        if count != len(examples):
            raise ServingError(f"{self.target}: {method} answered {count} results for {len(examples)} examples")
        return result

    def classify(self, examples, signature_name="classify"):
        """`Classify`: per example, its `(label, score)` per class.

        Args:
            examples: `tf.train.Example`s, or feature dicts (`example_proto`).
            signature_name: A signature of method `tensorflow/serving/classify`.

        Raises:
            ServingError: an error status, or not one result per example.
        """
        from tensorflow_serving.apis import classification_pb2

        result = self._call_with_examples("Classify", classification_pb2.ClassificationRequest(), examples, signature_name)
        return [[(c.label, c.score) for c in classifications.classes] for classifications in result.classifications]

    def regress(self, examples, signature_name="regress"):
        """`Regress`: one float per example (see `classify` for `examples`).

        Raises:
            ServingError: an error status, or not one result per example.
        """
        from tensorflow_serving.apis import regression_pb2

        result = self._call_with_examples("Regress", regression_pb2.RegressionRequest(), examples, signature_name)
        return [regression.value for regression in result.regressions]

    def close(self):
        self.channel.close()
