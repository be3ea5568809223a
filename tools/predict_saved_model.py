#!/usr/bin/env python
"""Calls a SavedModel's signatures the way TF Serving runs them: with only
TensorFlow and TF Text's C++ kernels, in a process where keras_bert_impl, Keras
and the peers cannot be imported. Deliberately imports nothing of ours.

Usage:
    python tools/predict_saved_model.py SAVED_MODEL_DIR < requests.json
where requests.json is [{"signature": NAME, "inputs": {name: nested list}}, ...]
(a string input may be {"b64": [base64 strings]} to pass raw bytes). Prints
{"blocked_modules_loaded": [...], "results": [outputs or {"error": ...}, ...]}.
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

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def load_tf_text_ops():
    """Registers TF Text's C++ kernels, which the TF Serving binary links in,
    without importing its Python package (that would import Keras)."""
    package_dir = importlib.util.find_spec("tensorflow_text").submodule_search_locations[0]
    for library in sorted(glob.glob(os.path.join(package_dir, "python", "ops", "*.so"))):
        tf.load_op_library(library)


def to_tensor(value, spec):
    if isinstance(value, dict):  # {"b64": [...]}: raw bytes, e.g. invalid UTF-8 or protos
        return tf.constant([base64.b64decode(v) for v in value["b64"]], tf.string)
    return tf.constant(np.array(value, dtype=object if spec.dtype == tf.string else spec.dtype.as_numpy_dtype))


def main():
    load_tf_text_ops()
    loaded = tf.saved_model.load(sys.argv[1])
    results = []
    for request in json.load(sys.stdin):
        function = loaded.signatures[request["signature"]]
        specs = function.structured_input_signature[1]
        inputs = {name: to_tensor(value, specs[name]) for name, value in request["inputs"].items()}
        try:
            outputs = function(**inputs)
        except tf.errors.InvalidArgumentError as e:
            results.append({"error": e.message.splitlines()[0]})
            continue
        results.append({
            name: (np.char.decode(t.numpy().astype(bytes), "utf-8") if t.dtype == tf.string else t.numpy()).tolist()
            for name, t in outputs.items()
        })
    loaded_blocked = [n for n in BLOCKED if sys.modules.get(n) is not None]
    json.dump({"blocked_modules_loaded": loaded_blocked, "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
