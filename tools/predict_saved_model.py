#!/usr/bin/env python
"""Calls a SavedModel's signatures the way TF Serving runs them: with only
TensorFlow and TF Text's C++ kernels, in a process where keras_bert_impl, Keras
and the peers cannot be imported. Deliberately imports nothing of ours (so its
absl flags are defined here, not with keras_bert_impl.cli).

Usage:
    python tools/predict_saved_model.py SAVED_MODEL_DIR < requests.json
    bert-predict-saved-model --saved_model_dir=SAVED_MODEL_DIR < requests.json
where requests.json is [{"signature": NAME, "inputs": {name: nested list}}, ...]
(a string input may be {"b64": [base64 strings]} to pass raw bytes). Prints
{"blocked_modules_loaded": [...], "results": [outputs or {"error": ...}, ...]}
as strict JSON (a non-finite output is the string "NaN", "Infinity" or
"-Infinity").
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
import glob  # noqa: E402
import importlib.util  # noqa: E402

from absl import flags  # noqa: E402

PROG = "predict_saved_model"
HELP_FLAGS = ("help", "helpshort", "helpfull")


class UsageError(Exception):
    """A bad flag or a missing SavedModel directory (exit 2)."""


def define_flags(fv):
    flags.DEFINE_string("saved_model_dir", None, "The SavedModel directory (or give it as the one positional argument).", flag_values=fv)
    for name in HELP_FLAGS:
        flags.DEFINE_boolean(name, False, "Show the flags of this tool and exit.", flag_values=fv)


def _isdir(path):
    """`os.path.isdir`, or for a remote path (`gs://...`) `tf.io.gfile.isdir` (none of ours here)."""
    if "://" not in path:
        return os.path.isdir(path)
    import tensorflow as tf

    return tf.io.gfile.isdir(path)


def parse_flags(argv):
    """The SavedModel directory that `argv` names, or None after printing the help."""
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
    return saved_model_dir


def predict(saved_model_dir, requests):
    """`{"blocked_modules_loaded": [...], "results": [outputs or {"error": ...}, ...]}`."""
    import numpy as np
    import tensorflow as tf

    # TF Text's C++ kernels, which the TF Serving binary links in, without
    # importing its Python package (that would import Keras).
    package_dir = importlib.util.find_spec("tensorflow_text").submodule_search_locations[0]
    for library in sorted(glob.glob(os.path.join(package_dir, "python", "ops", "*.so"))):
        tf.load_op_library(library)

    def to_tensor(value, spec):
        if isinstance(value, dict):  # {"b64": [...]}: raw bytes, e.g. invalid UTF-8 or protos
            return tf.constant([base64.b64decode(v) for v in value["b64"]], tf.string)
        return tf.constant(np.array(value, dtype=object if spec.dtype == tf.string else spec.dtype.as_numpy_dtype))

    loaded = tf.saved_model.load(saved_model_dir)
    if not isinstance(requests, list):
        raise ValueError(f"the requests are a JSON {type(requests).__name__}, not a list")
    results = []
    for index, request in enumerate(requests):
        if not (isinstance(request, dict) and isinstance(request.get("signature"), str)
                and isinstance(request.get("inputs"), dict)):
            raise ValueError(f"request {index} is not {{\"signature\": name, \"inputs\": {{name: values}}}}")
        if request["signature"] not in loaded.signatures:
            raise KeyError(f"request {index}: no signature {request['signature']!r}; "
                           f"the SavedModel has {sorted(loaded.signatures)}")
        function = loaded.signatures[request["signature"]]
        specs = function.structured_input_signature[1]
        unknown = sorted(set(request["inputs"]) - set(specs))
        if unknown:
            raise KeyError(f"request {index}: signature {request['signature']!r} has no input {unknown[0]!r}; "
                           f"its inputs are {sorted(specs)}")
        inputs = {name: to_tensor(value, specs[name]) for name, value in request["inputs"].items()}
        try:
            outputs = function(**inputs)
        except tf.errors.InvalidArgumentError as e:
            results.append({"error": e.message})  # all of it: the first line is "Graph execution error:"
            continue
        results.append({
            name: (np.char.decode(t.numpy().astype(bytes), "utf-8") if t.dtype == tf.string else t.numpy()).tolist()
            for name, t in outputs.items()
        })
    return {"blocked_modules_loaded": [n for n in BLOCKED if sys.modules.get(n) is not None], "results": results}


def main(argv=None):
    """Runs the tool; returns the exit code (bad input: one stderr line)."""
    try:
        saved_model_dir = parse_flags(list(sys.argv[1:] if argv is None else argv))
    except UsageError as e:
        print(f"{PROG}: error: {e} (see --help)", file=sys.stderr)
        return 2
    if saved_model_dir is None:  # --help
        return 0
    import tensorflow as tf

    try:
        requests = json.load(sys.stdin)
        output = predict(saved_model_dir, requests)
    except (OSError, ValueError, KeyError, TypeError, tf.errors.OpError) as e:  # JSONDecodeError is a ValueError
        text = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)  # KeyError's str() quotes it
        message = (text.strip() or "?").splitlines()[0]
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
