"""The files TF Serving reads beside a SavedModel: `models.config`, warmup requests, method names.

The export base, the parent of the model directories (`saved_models/`),
holds one `models.config` naming every model under it, the file
`tensorflow_model_server --model_config_file` reads. Each version holds
`assets.extra/tf_serving_warmup_requests`, real requests TF Serving replays
on load, and its signatures' method names (`tf.saved_model.save` writes
every one as predict; TF Serving's Classify and Regress run only their own).
"""

import posixpath

import tensorflow as tf

from keras_bert_impl import filesystem
from keras_bert_impl.io import write_bytes_atomically, write_text_atomically
from keras_bert_impl.serving.versions import SAVED_MODEL_FILE, ExportError, existing_versions

WARMUP_FILE = "tf_serving_warmup_requests"
MODELS_CONFIG = "models.config"
# Where the tensorflow/serving docker image expects models: /models/<name>.
DEFAULT_SERVING_BASE_PATH = "/models"
# Rewrites of models.config before giving up on a file that other writers keep making stale.
_WRITE_ATTEMPTS = 10


def set_method_names(saved_model_dir, method_names):
    """Sets the signatures' method_name in `saved_model_dir/saved_model.pb`.

    `tf.saved_model.save` writes every signature as predict; TF Serving's
    Classify and Regress run only a signature of their method. The
    fingerprint (`fingerprint.pb`, a checksum of `saved_model.pb`) is
    written again to match.

    Args:
        saved_model_dir: A SavedModel, not yet published.
        method_names: Dict signature key -> method name.

    Raises:
        KeyError: a signature key the SavedModel does not have.
    """
    from tensorflow.core.protobuf import saved_model_pb2
    from tensorflow.python.saved_model import fingerprinting_utils

    path = filesystem.join(saved_model_dir, SAVED_MODEL_FILE)
    with filesystem.open_file(path, "rb") as f:
        saved_model = saved_model_pb2.SavedModel.FromString(f.read())
    for meta_graph in saved_model.meta_graphs:
        for key, method_name in method_names.items():
            if key not in meta_graph.signature_def:
                raise KeyError(f"{path}: no signature {key!r}")
            meta_graph.signature_def[key].method_name = method_name
    write_bytes_atomically(path, saved_model.SerializeToString())
    fingerprinting_utils.write_fingerprint(saved_model_dir)


def warmup_requests(model_name, requests):
    """PredictionLog records (serialized) that TF Serving replays on load.

    Args:
        model_name: The model's name in TF Serving.
        requests: `[(signature name, {input name: strings})]`
            (`BertServingModule.warmup_inputs`: raw text, a list or a list
            of lists), in the order TF Serving replays them.
    """
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    records = []
    for signature_name, inputs in requests:
        request = predict_pb2.PredictRequest(
            model_spec=model_pb2.ModelSpec(name=model_name, signature_name=signature_name)
        )
        for name, values in inputs.items():
            request.inputs[name].CopyFrom(tf.make_tensor_proto(values, dtype=tf.string))
        records.append(prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request)))
    return [record.SerializeToString() for record in records]


def model_names(export_base):
    """The models under `export_base`: each directory holding an integer version directory, sorted."""

    def is_model(path):
        return filesystem.isdir(path) and any(
            filesystem.isdir(filesystem.join(path, str(version))) for version in existing_versions(path)
        )

    if not filesystem.isdir(export_base):
        return []
    return [name for name in filesystem.listdir(export_base) if is_model(filesystem.join(export_base, name))]


def models_config_text(names, serving_base_path=DEFAULT_SERVING_BASE_PATH, existing=None):
    """A `ModelServerConfig` in text format listing `names` at `serving_base_path/<name>`.

    Args:
        names: The model names to list.
        serving_base_path: Where the server sees their parent directory.
        existing: A `ModelServerConfig` already there (`read_models_config`):
            its entries are kept (the base path of those named in `names`
            set to theirs; version policies, labels and every other entry as
            written), and the names it lacks are added.
    """
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    config = model_server_config_pb2.ModelServerConfig()
    if existing is not None:
        config.CopyFrom(existing)
    present = set()
    for entry in config.model_config_list.config:
        present.add(entry.name)
        if entry.name in names:
            entry.base_path = posixpath.join(serving_base_path, entry.name)
    for name in names:
        if name not in present:
            config.model_config_list.config.add(
                name=name, base_path=posixpath.join(serving_base_path, name), model_platform="tensorflow"
            )
    # By name: the same models give the same bytes, whichever export wrote last.
    entries = sorted(config.model_config_list.config, key=lambda entry: entry.name)
    ordered = [type(entry)() for entry in entries]
    for copy, entry in zip(ordered, entries):
        copy.CopyFrom(entry)
    del config.model_config_list.config[:]
    config.model_config_list.config.extend(ordered)
    return text_format.MessageToString(config)


def read_models_config(export_base):
    """The `ModelServerConfig` of `export_base/models.config`, or None where there is none.

    Raises:
        ExportError: the file is not a text-format `ModelServerConfig` with a
            model list (one an export could add to), naming the file.
    """
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    path = filesystem.join(export_base, MODELS_CONFIG)
    if not filesystem.exists(path):
        return None
    with filesystem.open_file(path) as f:
        text = f.read()
    config = model_server_config_pb2.ModelServerConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as error:
        raise ExportError(f"{path}: not a TF Serving model config in text format ({error}); fix or remove it, "
                          "or export under another directory") from None
    if config.WhichOneof("config") == "custom_model_config":
        raise ExportError(f"{path}: a custom_model_config, which an export cannot add its model to; "
                          "export under another directory")
    return config


def write_models_config(export_base, serving_base_path=DEFAULT_SERVING_BASE_PATH):
    """Writes `export_base/models.config` (`tensorflow_model_server --model_config_file`)
    listing every model under `export_base`, by name.

    The file is rewritten whole and atomically after each export; it names
    models only, never versions (TF Serving serves the latest of each). An
    existing file is merged into, not replaced: entries of models that are
    not under `export_base` stay as written (another tool's or a person's),
    and those that are keep their version policies and labels.

    Exports of other models may write the file at the same time (no lock:
    `export_base` may be on `gs://`). Each writer reads the file back after
    writing and writes again until it names every model then under
    `export_base`, so the last writer leaves every published model listed;
    one written from an older reading is replaced within milliseconds.

    Args:
        export_base: The parent of the model directories (`saved_models`).
        serving_base_path: Where the server sees `export_base`: each model's
            `base_path` is `<serving_base_path>/<name>` (the docker image
            mounts models under `/models`).

    Returns:
        The path written.

    Raises:
        ExportError: an existing file that is not a model list
            (`read_models_config`), or one that other writers kept replacing
            with lists lacking a model.
    """
    path = filesystem.join(export_base, MODELS_CONFIG)
    for _ in range(_WRITE_ATTEMPTS):
        names = model_names(export_base)
        write_text_atomically(path, models_config_text(names, serving_base_path, read_models_config(export_base)))
        lacking = sorted(set(model_names(export_base)) - _listed_names(read_models_config(export_base)))
        if not lacking:
            return path
    raise ExportError(f"{path}: still lacks {lacking} after {_WRITE_ATTEMPTS} writes; another process keeps "
                      "writing it: stop it, or export under another directory")


def _listed_names(config):
    """The model names a `ModelServerConfig` (or None) lists."""
    return set() if config is None else {entry.name for entry in config.model_config_list.config}


def write_warmup_requests(path, model_name, requests):
    """Writes `warmup_requests(model_name, requests)` to the TFRecord file `path`."""
    with tf.io.TFRecordWriter(path) as writer:
        for record in warmup_requests(model_name, requests):
            writer.write(record)
