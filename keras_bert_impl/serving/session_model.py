"""An export run in this process as TF Serving's C++ server runs it.

TF Serving loads a SavedModel into a graph `Session`: the graph of
`saved_model.pb`, its variables set by the SavedModel's own restore op (not
by Python objects, as `tf.saved_model.load` makes them), its warmup requests
replayed first, and each request answered by one `Session::Run` of the
signature's tensors, the session's pools sized by the server's
`--tensorflow_intra_op_parallelism` and `--tensorflow_inter_op_parallelism`.
`SessionModel` does the same, so that an export's outputs and speed can be
seen from Python as the server will give them (the online setting that
`bert-export` advises, the benchmarks' `_session` stacks). No Python of ours
runs in a call: the graph holds everything, the tokenizer included.

(`tools/predict_saved_model.py` loads an export the same way with code of its
own: that tool proves an export needs nothing of ours, so it imports nothing
of ours.)

Example:
>>> model = SessionModel("saved_models/sentiment/1", intra_op_threads=1, inter_op_threads=-1)  # doctest: +SKIP
>>> model.replay_warmup()  # doctest: +SKIP
2
>>> model.predict({"text": ["What a great film!"]})["labels"]  # doctest: +SKIP
array([b'positive'], dtype=object)
>>> serve_ids = model.callable("serve_ids")  # a request as one run of a callable made once  # doctest: +SKIP
>>> serve_ids(input_ids=ids, input_mask=mask, segment_ids=segment_ids)["pooled_output"].shape  # doctest: +SKIP
(1, 384)
"""

import contextlib
import os
import sys
import warnings

from keras_bert_impl import filesystem
from keras_bert_impl.errors import BertError
from keras_bert_impl.inference.calling_thread import input_array
from keras_bert_impl.serving.versions import existing_versions

WARMUP_FILE = "assets.extra/tf_serving_warmup_requests"  # where TF Serving reads them


class SessionModelError(BertError, ValueError):
    """A version TF Serving's loader cannot restore, a call that names no signature or input of the export or
    gives values its input's type cannot hold, or a warmup request that fails."""


class SessionModel:
    """An export loaded into a `tf.compat.v1.Session` as TF Serving loads it.

    Args:
        saved_model_dir: One version's directory (`saved_models/NAME/VERSION`).
        intra_op_threads: TF Serving's `--tensorflow_intra_op_parallelism`:
            the threads of each op (oneDNN's), 0 for every core; None (the
            default): the process' own setting. TensorFlow has one intra-op
            pool per process, made with the first device: if the process
            already ran an eager op with another count, this one is not
            honoured (a warning says so); size it at the process' start with
            `tf.config.threading.set_intra_op_parallelism_threads`.
        inter_op_threads: TF Serving's `--tensorflow_inter_op_parallelism`:
            the threads that run independent ops, 0 for every core; a
            negative count runs each call's ops in the calling thread (no
            pool: TF Serving's online setting, with one intra-op thread).
        tags: The MetaGraph's tags.

    Attributes:
        signature_defs: `{signature name: SignatureDef}`, as the export has them.

    Raises:
        OSError: `saved_model_dir` holds no SavedModel (TensorFlow's message).
        SessionModelError: it is a model directory (TF Serving's
            `--model_base_path`) rather than one of its versions, the latest
            named; its variables cannot be restored (cut short, altered or
            missing), the reason and the op that found it named.
    """

    def __init__(self, saved_model_dir, intra_op_threads=None, inter_op_threads=0, tags=("serve",)):
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the in-graph tokenizer's ops that exports hold)

        _refuse_a_model_directory(str(saved_model_dir))
        if intra_op_threads is None:
            intra_op_threads = tf.config.threading.get_intra_op_parallelism_threads()
        _warn_if_the_intra_op_pool_is_set(intra_op_threads)
        self.saved_model_dir = str(saved_model_dir)
        config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=intra_op_threads,
                                          inter_op_parallelism_threads=inter_op_threads)
        self._session = tf.compat.v1.Session(graph=tf.Graph(), config=config)
        logger, level = tf.get_logger(), tf.get_logger().level
        logger.setLevel("ERROR")  # the TF1 loader's notice that it is deprecated: TF Serving's loader is this one
        try:
            with _native_info_quiet():
                meta_graph = tf.compat.v1.saved_model.loader.load(self._session, list(tags), self.saved_model_dir)
        except (tf.errors.OpError, ValueError) as error:  # restoring failed (ValueError: no variables at all)
            self._session.close()
            raise SessionModelError(f"{self.saved_model_dir}: TF Serving's loader fails on this version "
                                    f"({error_reason(error)}{_node_of(error)}): its variables/ or assets are damaged "
                                    "or missing; export it again") from error
        finally:
            logger.setLevel(level)
        self.signature_defs = dict(meta_graph.signature_def)
        self._callables = {}  # by signature name: made once each

    @property
    def session(self):
        """The `tf.compat.v1.Session` that holds the export (for profiling: `run` with `RunOptions`)."""
        return self._session

    def input_names(self, signature_name="serving_default"):
        """The signature's input names, sorted."""
        return sorted(self._signature(signature_name).inputs)

    def callable(self, signature_name="serving_default"):
        """A function of the signature's inputs (keywords, arrays or lists) to `{output name: array}`.

        Each call is one run of a callable made once per signature (TF
        Serving's `Session::Run`: no feed dictionary to parse per request).

        Raises:
            SessionModelError: The export has no such signature; a call lacks
                an input or names one the signature does not have.
        """
        import tensorflow as tf

        if signature_name in self._callables:
            return self._callables[signature_name]
        signature = self._signature(signature_name)
        inputs, outputs = sorted(signature.inputs), sorted(signature.outputs)
        dtypes = [tf.as_dtype(signature.inputs[name].dtype).as_numpy_dtype for name in inputs]
        run = self._session.make_callable([signature.outputs[name].name for name in outputs],
                                          feed_list=[signature.inputs[name].name for name in inputs])

        def call(**arrays):
            missing, unknown = sorted(set(inputs) - set(arrays)), sorted(set(arrays) - set(inputs))
            if missing or unknown:
                raise SessionModelError(
                    f"{self.saved_model_dir}: signature {signature_name!r} takes {inputs}; "
                    + (f"missing {missing}" if missing else f"no input {unknown}"))
            return dict(zip(outputs, run(*(_as_input(arrays[name], dtype, name) for name, dtype in zip(inputs, dtypes)))))

        self._callables[signature_name] = call
        return call

    def predict(self, inputs, signature_name="serving_default"):
        """`{output name: array}` of one run of the signature on `inputs` (`{input name: array or list}`)."""
        return self.callable(signature_name)(**inputs)

    def replay_warmup(self):
        """Runs the export's warmup requests (`assets.extra/tf_serving_warmup_requests`) as TF Serving does.

        Returns:
            How many it ran (0 where the export has none).

        Raises:
            SessionModelError: A request fails, as it would fail the version's
                load in TF Serving (the request's index and signature named).
        """
        import tensorflow as tf

        requests = warmup_requests(self.saved_model_dir)
        for index, (name, arrays) in enumerate(requests):
            try:
                self.predict(arrays, name)
            except (SessionModelError, ValueError, tf.errors.OpError) as error:
                raise SessionModelError(f"{self.saved_model_dir}: warmup request {index} ({name}) fails, so TF "
                                        f"Serving would not load this version: {error_reason(error)}") from error
        return len(requests)

    def close(self):
        """Frees the session (and the weights it holds)."""
        self._session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def _signature(self, name):
        if name not in self.signature_defs:
            raise SessionModelError(f"{self.saved_model_dir}: no signature {name!r}; the export has "
                                    f"{sorted(self.signature_defs)}")
        return self.signature_defs[name]


def _refuse_a_model_directory(path):
    """Raises `SessionModelError` where `path` holds no SavedModel but version directories (a model's base
    path, which TF Serving serves the latest version of)."""
    if any(filesystem.exists(filesystem.join(path, name)) for name in ("saved_model.pb", "saved_model.pbtxt")):
        return
    versions = existing_versions(path)
    if versions:
        raise SessionModelError(
            f"{path}: a model directory holding version(s) {', '.join(map(str, versions))}, not a SavedModel; "
            f"give one version, e.g. {filesystem.join(path, str(versions[-1]))} (the one TF Serving serves)")


def warmup_requests(saved_model_dir):
    """`[(signature name, {input name: array})]`: the predict requests of an export's warmup file, in order.

    Args:
        saved_model_dir: One version's directory.

    Returns:
        An empty list where the export has no warmup file.
    """
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    path = f"{str(saved_model_dir).rstrip('/')}/{WARMUP_FILE}"
    if not tf.io.gfile.exists(path):
        return []
    requests = []
    for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
        log = prediction_log_pb2.PredictionLog.FromString(record)
        if log.HasField("predict_log"):
            request = log.predict_log.request
            requests.append((request.model_spec.signature_name or "serving_default",
                             {name: tf.make_ndarray(tensor) for name, tensor in request.inputs.items()}))
    return requests


def error_reason(error):
    """The line of a TensorFlow error that says what went wrong (not "Graph execution error:", not where)."""
    for line in (getattr(error, "message", None) or str(error)).splitlines():
        line = line.strip()
        if line and line != "Graph execution error:" and not line.startswith(("Detected at node", "File ", "[[")):
            return line
    return type(error).__name__


def _node_of(error):
    """`", in its op NAME"` for an error a graph op raised (`RestoreV2`: reading the variables), else ""."""
    node = getattr(getattr(error, "node_def", None), "name", "") or ""
    if not node:
        for line in (getattr(error, "message", None) or "").splitlines():
            if "[[{{node " in line:
                node = line.split("[[{{node ", 1)[1].split("}}", 1)[0]
    return f", in its op {node}" if node else ""


def _as_input(value, dtype, name):
    """`calling_thread.input_array`, its refusals as `SessionModelError`s naming the input (TF Serving refuses a
    tensor of another type)."""
    try:
        return input_array(value, dtype)
    except (TypeError, ValueError) as error:
        raise SessionModelError(f"input {name!r}: {error}") from None


@contextlib.contextmanager
def _native_info_quiet():
    """Standard error's file descriptor to /dev/null for the block, where `TF_CPP_MIN_LOG_LEVEL` asks for no INFO.

    A process' first graph session logs two lines through the C++ absl
    logger, which that variable does not reach ("All log messages before
    absl::InitializeLog() ...", "MLIR V1 optimization pass is not enabled");
    the loader's errors reach Python as exceptions whatever stderr is.
    Whatever other threads write to stderr during the block is lost too.
    """
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0").strip() in ("", "0"):
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _warn_if_the_intra_op_pool_is_set(intra_op_threads):
    """Warns where the process' intra-op pool already exists with another count than `intra_op_threads`.

    Setting TensorFlow's process-wide count to the session's is refused
    exactly when its eager context (and so the pool) already exists with
    another; before that, it makes a later eager context agree.
    """
    import tensorflow as tf

    if tf.config.threading.get_intra_op_parallelism_threads() == intra_op_threads:
        return
    try:
        tf.config.threading.set_intra_op_parallelism_threads(intra_op_threads)
    except RuntimeError:
        warnings.warn(
            f"intra_op_threads={intra_op_threads} is not honoured: this process made its intra-op pool at its first "
            f"op, with {tf.config.threading.get_intra_op_parallelism_threads()} threads (0: every core); call "
            "tf.config.threading.set_intra_op_parallelism_threads at the process' start", RuntimeWarning, stacklevel=3)
