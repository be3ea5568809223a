#!/usr/bin/env python
"""Calls a SavedModel's signatures the way TF Serving runs them: with only
TensorFlow and TF Text's C++ kernels, in a process where keras_bert_impl, Keras
and the peers cannot be imported, the SavedModel loaded into a graph by its
own restore and init ops (as TF Serving's C++ loader does, not by Python
objects) and its warmup requests replayed first. Deliberately imports nothing of ours (so its
absl flags are defined here, not with keras_bert_impl.cli, and its loader is its own: Python that
may import ours has `keras_bert_impl.serving.session_model.SessionModel`).

Usage:
    python tools/predict_saved_model.py SAVED_MODEL_DIR < requests.json
    bert-predict-saved-model --saved_model_dir=SAVED_MODEL_DIR < requests.json
        [--tensorflow_intra_op_parallelism=N] [--tensorflow_inter_op_parallelism=N]
where requests.json is [{"signature": NAME, "inputs": {name: nested list}}, ...]
(a string input may be {"b64": [base64 strings]} to pass raw bytes). Prints
{"blocked_modules_loaded": [...], "results": [outputs or {"error": ...}, ...]}
as strict JSON (a non-finite output is the string "NaN", "Infinity" or
"-Infinity"). The two thread flags are TF Serving's, with its meaning: the
session's intra-op and inter-op pools (0: TensorFlow's default; a negative
inter-op count runs each request's ops in the thread that sent it).
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


# `None` in sys.modules makes `import x` fail and `find_spec(x)` report "not
# installed": our package, Keras and the peers are absent, as in TF Serving.
BLOCKED = ("keras_bert_impl", "keras_bert_impl_tools", "keras", "tf_keras", "keras_hub", "keras_nlp", "official", "tests")
for _name in BLOCKED:
    sys.modules[_name] = None
sys.path = [p for p in sys.path if p not in ("", os.getcwd())]

import base64  # noqa: E402
import contextlib  # noqa: E402
import glob  # noqa: E402
import importlib.util  # noqa: E402

from absl import flags  # noqa: E402

PROG = "predict_saved_model"
HELP_FLAGS = ("help", "helpshort", "helpfull")


class UsageError(Exception):
    """A bad flag or a missing SavedModel directory (exit 2)."""


def define_flags(fv):
    flags.DEFINE_string("saved_model_dir", None, "The SavedModel directory (or give it as the one positional argument).", flag_values=fv)
    flags.DEFINE_integer("tensorflow_intra_op_parallelism", 0, "Threads of each op (TF Serving's flag; 0: every core).",
                         flag_values=fv)
    flags.DEFINE_integer("tensorflow_inter_op_parallelism", 0, "Threads running independent ops (TF Serving's flag; "
                         "0: every core; negative: each request's ops in the thread that sent it).", flag_values=fv)
    for name in HELP_FLAGS:
        flags.DEFINE_boolean(name, False, "Show the flags of this tool and exit.", flag_values=fv)


def _isdir(path):
    """`os.path.isdir`, or for a remote path (`gs://...`) `tf.io.gfile.isdir` (none of ours here)."""
    if "://" not in path:
        return os.path.isdir(path)
    import tensorflow as tf

    return tf.io.gfile.isdir(path)


def _versions_without_a_saved_model(path):
    """The integer version directories under `path`, ascending, where `path` holds no `saved_model.pb` itself;
    else []."""
    if "://" in path:
        import tensorflow as tf

        exists, listdir, isdir = tf.io.gfile.exists, tf.io.gfile.listdir, tf.io.gfile.isdir
    else:  # no TensorFlow to import for a local path's usage error
        exists, listdir, isdir = os.path.exists, os.listdir, os.path.isdir
    if any(exists(os.path.join(path, name)) for name in ("saved_model.pb", "saved_model.pbtxt")):
        return []
    names = [name.rstrip("/") for name in listdir(path)]
    return sorted(int(name) for name in names if name.isascii() and name.isdigit() and isdir(os.path.join(path, name)))


def _read_requests(stream):
    """The requests JSON on `stream`, or a ValueError saying what standard input held instead."""
    text = stream.read()
    if not text.strip():
        raise ValueError('standard input holds no requests: give a JSON list of {"signature": name, '
                         '"inputs": {name: values}} (see --help)')
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"standard input is not JSON: {error}") from None
    except RecursionError:  # lists or objects nested thousands deep
        raise ValueError("standard input is not JSON this tool reads: nested too deeply") from None


def parse_flags(argv):
    """`(SavedModel directory, session threads)` that `argv` names, or None after printing the help.

    The threads are `{"intra_op_threads": N, "inter_op_threads": N}` for `predict`.
    """
    fv = flags.FlagValues()
    define_flags(fv)
    argv = ["--help"] if "-h" in argv or "-?" in argv else argv
    try:
        positional = fv([PROG] + argv)[1:]
    except flags.Error as error:
        raise UsageError(str(error).splitlines()[0]) from None
    if any(fv[name].value for name in HELP_FLAGS):
        print(f"{PROG}: {__doc__}\nflags:\n{fv.get_help(include_special_flags=True)}")
        return None
    if len(positional) + bool(fv.saved_model_dir) != 1:
        raise UsageError("give the SavedModel directory, as --saved_model_dir or the one positional argument")
    saved_model_dir = fv.saved_model_dir or positional[0]
    if not _isdir(saved_model_dir):
        raise UsageError(f"{saved_model_dir}: no such SavedModel directory")
    versions = _versions_without_a_saved_model(saved_model_dir)
    if versions:  # a TF Serving --model_base_path, not one of its versions
        latest = f"{saved_model_dir.rstrip('/')}/{versions[-1]}"
        raise UsageError(f"{saved_model_dir}: a model directory holding version(s) {', '.join(map(str, versions))}, "
                         f"not a SavedModel; give one version, e.g. {latest} (the one TF Serving serves)")
    if fv.tensorflow_intra_op_parallelism < 0:
        raise UsageError(f"--tensorflow_intra_op_parallelism={fv.tensorflow_intra_op_parallelism}: "
                         "a count of threads, 0 or more")
    return saved_model_dir, dict(intra_op_threads=fv.tensorflow_intra_op_parallelism,
                                 inter_op_threads=fv.tensorflow_inter_op_parallelism)


def predict(saved_model_dir, requests, intra_op_threads=0, inter_op_threads=0):
    """`{"blocked_modules_loaded": [...], "results": [outputs or {"error": ...}, ...]}`.

    The SavedModel is loaded as TF Serving's C++ loader loads it: into a
    graph whose variables are set by the SavedModel's own restore op (not by
    Python objects, as `tf.saved_model.load` would), its warmup requests
    replayed first (a failing one fails the load there), and each signature
    run by its tensor names. `intra_op_threads` and `inter_op_threads` set
    the session's pools as TF Serving's `--tensorflow_intra_op_parallelism`
    and `--tensorflow_inter_op_parallelism` do (TensorFlow sizes its pools
    once a process, from the first session's).
    """
    import numpy as np
    import tensorflow as tf

    # TF Text's C++ kernels, which the TF Serving binary links in, without
    # importing its Python package (that would import Keras).
    package_dir = importlib.util.find_spec("tensorflow_text").submodule_search_locations[0]
    for library in sorted(glob.glob(os.path.join(package_dir, "python", "ops", "*.so"))):
        tf.load_op_library(library)

    if not isinstance(requests, list):
        raise ValueError(f"the requests are a JSON {type(requests).__name__}, not a list")
    tf.get_logger().setLevel("ERROR")  # the TF1 loader's deprecation notice
    warmup = _warmup_requests(saved_model_dir)
    graph = tf.Graph()
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=intra_op_threads,
                                      inter_op_parallelism_threads=inter_op_threads)
    with _native_stderr_quiet(), tf.compat.v1.Session(graph=graph, config=config) as session:
        signatures = tf.compat.v1.saved_model.loader.load(session, ["serve"], saved_model_dir).signature_def

        def run(signature, arrays):
            fetches = {name: info.name for name, info in signature.outputs.items()}
            return session.run(fetches, {signature.inputs[name].name: array for name, array in arrays.items()})

        _replay_warmup(warmup, signatures, run)
        results = []
        for index, request in enumerate(requests):
            # A bad request is answered with its own error, as TF Serving answers it; the others still run.
            try:
                signature, arrays = _request_arrays(request, signatures)
                outputs = run(signature, arrays)
            except tf.errors.OpError as e:
                results.append({"error": f"request {index}: {e.message}"})  # all of it: "Graph execution error:" ...
                continue
            except (ValueError, KeyError, TypeError, OverflowError, RecursionError) as e:  # binascii.Error: a ValueError
                text = e.args[0] if isinstance(e, KeyError) and e.args else str(e)  # KeyError's str() quotes it
                results.append({"error": f"request {index}: {text}"})
                continue
            results.append({
                name: (np.char.decode(np.asarray(value).astype(bytes), "utf-8")
                       if np.asarray(value).dtype == object else np.asarray(value)).tolist()
                for name, value in outputs.items()
            })
    return {"blocked_modules_loaded": [n for n in BLOCKED if sys.modules.get(n) is not None], "results": results}


def _request_arrays(request, signatures):
    """`(signature, {input name: array})` of one request, each value checked against its input's dtype.

    Raises:
        ValueError, KeyError, TypeError: naming what is wrong with the
            request (its shape, an input it names, a value of another type).
    """
    import tensorflow as tf

    if not (isinstance(request, dict) and isinstance(request.get("signature"), str)
            and isinstance(request.get("inputs"), dict)):
        raise ValueError('not {"signature": name, "inputs": {name: values}}')
    if request["signature"] not in signatures:
        raise KeyError(f"no signature {request['signature']!r}; the SavedModel has {sorted(signatures)}")
    signature = signatures[request["signature"]]
    unknown = sorted(set(request["inputs"]) - set(signature.inputs))
    if unknown:
        raise KeyError(f"signature {request['signature']!r} has no input {unknown[0]!r}; "
                       f"its inputs are {sorted(signature.inputs)}")
    return signature, {name: _input_array(name, value, tf.as_dtype(signature.inputs[name].dtype))
                       for name, value in request["inputs"].items()}


def _input_array(name, value, dtype):
    """The array fed to input `name` of `dtype`: strings for a string input, integers (never floats, booleans
    or text) that fit for an integer one.

    Raises:
        ValueError: naming the input and what its value holds instead.
    """
    import numpy as np

    if isinstance(value, dict):  # {"b64": [...]}: raw bytes, e.g. invalid UTF-8 or protos
        if dtype.name != "string" or set(value) != {"b64"} or not isinstance(value["b64"], list):
            raise ValueError(f'input {name!r}: an object is {{"b64": [base64 strings]}} for a string input')
        if not all(isinstance(item, str) for item in value["b64"]):
            raise ValueError(f"input {name!r}: b64 holds something other than base64 strings")
        try:
            return np.array([base64.b64decode(item, validate=True) for item in value["b64"]], dtype=object)
        except ValueError as error:
            raise ValueError(f"input {name!r}: not base64 ({error})") from None
    if dtype.name == "string":
        array = np.array(value, dtype=object)
        if not all(isinstance(item, str) for item in array.reshape(-1)):
            raise ValueError(f"input {name!r} takes strings (a list of texts, all of one length per level); "
                             "it holds a number, a list of uneven length or another value")
        return array
    try:
        array = np.array(value)
    except ValueError:
        raise ValueError(f"input {name!r}: lists of uneven length (each row as long as the others)") from None
    if dtype.is_integer and array.size and array.dtype.kind not in "iu":
        kind = {"f": "a floating-point number (101.7, 1e20)", "b": "true/false", "U": "text"}.get(
            array.dtype.kind, "an integer past int64, or values of mixed types")
        raise ValueError(f"input {name!r} takes integers; it holds {kind}")
    if dtype.is_integer and array.size and not dtype.min <= array.min() <= array.max() <= dtype.max:
        raise ValueError(f"input {name!r}: a value does not fit {dtype.name} ([{dtype.min}, {dtype.max}])")
    return array.astype(dtype.as_numpy_dtype)


@contextlib.contextmanager
def _native_stderr_quiet():
    """File descriptor 2 to /dev/null for the block: TensorFlow's C++ logs an
    INFO line for each graph session whatever TF_CPP_MIN_LOG_LEVEL says, and
    its errors reach us as exceptions anyway."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _warmup_requests(saved_model_dir):
    """`[(signature name, {input: array})]` of the predict requests in
    `assets.extra/tf_serving_warmup_requests`, which TF Serving runs before
    it serves a version."""
    import tensorflow as tf

    path = os.path.join(saved_model_dir, "assets.extra", "tf_serving_warmup_requests")
    if not tf.io.gfile.exists(path):
        return []
    from tensorflow_serving.apis import prediction_log_pb2

    requests = []
    for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
        log = prediction_log_pb2.PredictionLog.FromString(record)
        if log.HasField("predict_log"):
            request = log.predict_log.request
            requests.append((request.model_spec.signature_name or "serving_default",
                             {key: tf.make_ndarray(value) for key, value in request.inputs.items()}))
    return requests


def _replay_warmup(requests, signatures, run):
    """Runs the warmup `requests` (`_warmup_requests`) as TF Serving does.

    Raises:
        ValueError: a request fails (TF Serving would not load the version).
    """
    import tensorflow as tf

    for index, (name, arrays) in enumerate(requests):
        try:
            run(signatures[name], arrays)
        except (KeyError, ValueError, tf.errors.OpError) as e:  # ValueError: a feed of another shape
            raise ValueError(f"warmup request {index} ({name}) fails, so TF Serving would not load this version: "
                             f"{_reason(e)}") from None


def _reason(error):
    """The line of a TensorFlow error that says what went wrong (not where)."""
    for line in (getattr(error, "message", None) or str(error)).splitlines():
        line = line.strip()
        if line and line != "Graph execution error:" and not line.startswith(("Detected at node", "File ", "[[")):
            return line
    return type(error).__name__


def main(argv=None):
    """Runs the tool; returns the exit code (bad input: one stderr line)."""
    try:
        parsed = parse_flags(list(sys.argv[1:] if argv is None else argv))
    except UsageError as e:
        print(f"{PROG}: error: {e} (see --help)", file=sys.stderr)
        return 2
    if parsed is None:  # --help
        return 0
    saved_model_dir, threads = parsed
    import tensorflow as tf

    try:
        requests = _read_requests(sys.stdin)
        output = predict(saved_model_dir, requests, **threads)
    except (OSError, ValueError, KeyError, TypeError, tf.errors.OpError) as e:  # JSONDecodeError is a ValueError
        text = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)  # KeyError's str() quotes it
        # A graph's error starts "Graph execution error:"; the reason is a line below it.
        message = _reason(e) if isinstance(e, tf.errors.OpError) else (text.strip() or "?").splitlines()[0]
        print(f"{PROG}: error: {type(e).__name__}: {message}", file=sys.stderr)
        return 1
    # Strict JSON: a non-finite number is written as the string "NaN",
    # "Infinity" or "-Infinity" (json's bare NaN/Infinity is not JSON).
    json.dump(_finite_json(output), sys.stdout, allow_nan=False)
    return 0


def _finite_json(value):
    """`value` with every non-finite float replaced by its name as a string."""
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {key: _finite_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite_json(item) for item in value]
    return value


def console_main():
    sys.exit(main())


if __name__ == "__main__":
    console_main()
