"""Versioned SavedModel export for TF Serving: `saved_models/<name>/<version>/`.

A version directory is written under a temporary name and renamed into place
only when complete (SavedModel, `assets/labels.txt`,
`assets.extra/tf_serving_warmup_requests`), so TF Serving, which watches the
base path for new integer versions, never loads half an export, and an
existing version is never overwritten. The rename also claims the version
number: exports started side by side on one base path get one version each.

The export base, the parent of the model directories (`saved_models/`),
holds one `models.config` naming every model under it, the file
`tensorflow_model_server --model_config_file` reads.

An export computes in float32 or bfloat16 (`precision`; by default the
faster one on the exporting CPU, `hardware.default_precision`), and says
which in `assets.extra/export_metadata.json`, beside the CPU it was chosen
for. TF Serving ignores that file; the bfloat16 graph uses only stock ops,
and holds its weights in bfloat16 but for the LayerNorms'
(`models.precision`).

Every path goes through `keras_bert_impl.filesystem`, so `export_dir` may be
remote (`gs://`, `ram://`). There a directory cannot be renamed into place:
the version is written on the local disk and copied up, `saved_model.pb`
last, TF Serving's sign of a SavedModel; claiming a number there is a check
then a copy, not atomic as the local rename is.
"""

import json
import os
import posixpath
import tempfile
import uuid

import tensorflow as tf

from keras_bert_impl import filesystem, hardware
from keras_bert_impl.errors import BertError
from keras_bert_impl.io import write_bytes_atomically, write_text_atomically
from keras_bert_impl.models.constant_kernels import ConstantKernels, dense_kernel_bytes
from keras_bert_impl.models.precision import (
    copy_weights,
    holds_weights_for,
    inference_dtype_policy,
    model_precision,
    same_variable_layout,
)
from keras_bert_impl.serving.signatures import SIGNATURE_METHODS, BertServingModule
from keras_bert_impl.tasks.registry import exported_task_names, get_task
from keras_bert_impl.tokenization import check_special_tokens, check_vocab_fits, load_vocab
from keras_bert_impl.tokenization.in_graph import InGraphTokenizer
from keras_bert_impl.tokenization.preprocessor import shared_tables

WARMUP_FILE = "tf_serving_warmup_requests"
METADATA_FILE = "export_metadata.json"
MODELS_CONFIG = "models.config"
SAVED_MODEL_FILE = "saved_model.pb"
# Where the tensorflow/serving docker image expects models: /models/<name>.
DEFAULT_SERVING_BASE_PATH = "/models"
# Most bytes of kernel constants a SavedModel takes (it is one protocol
# buffer, which cannot pass 2 GiB): BERT-base holds 170 MB (bfloat16) or
# 340 MB (float32) per copy, BERT-large 3.6 times that.
MAX_CONSTANT_BYTES = 1 << 30


class ExportError(BertError, ValueError):
    """An export request that cannot be honoured (bad version, task, labels)."""


def existing_versions(export_dir):
    """Integer version directories present under `export_dir`, ascending."""
    if not filesystem.isdir(export_dir):
        return []
    # ASCII digits only: TF Serving parses version names with strtoll.
    return sorted(int(name) for name in filesystem.listdir(export_dir) if name.isascii() and name.isdigit())


def next_version(export_dir):
    """The next free integer version (1 for a new model)."""
    versions = existing_versions(export_dir)
    return versions[-1] + 1 if versions else 1


def copy_to_new_directory(source, target):
    """Copies directory `source` to `target`, which must not exist; files of
    subdirectories first and the top-level `saved_model.pb` last. A copy
    that fails part way is removed again, so no version directory is left
    that TF Serving would try (and fail) to load, or that blocks a retry.

    Raises:
        FileExistsError: `target` exists.
    """
    if filesystem.exists(target):
        raise FileExistsError(f"{target}: already exists")

    def copy(relative):
        for name in filesystem.listdir(filesystem.join(source, *relative)):
            if filesystem.isdir(filesystem.join(source, *relative, name)):
                filesystem.makedirs(filesystem.join(target, *relative, name))
                copy(relative + (name,))
            elif relative or name != SAVED_MODEL_FILE:
                filesystem.copy(filesystem.join(source, *relative, name), filesystem.join(target, *relative, name))

    filesystem.makedirs(target)
    try:
        copy(())
        filesystem.copy(filesystem.join(source, SAVED_MODEL_FILE), filesystem.join(target, SAVED_MODEL_FILE))
    except BaseException:
        filesystem.rmtree(target)
        raise


def publish_version(staging, export_dir, version=None):
    """Moves the complete export `staging` to `export_dir/<version>`.

    On a local disk the move is a rename, and the rename is the claim on the
    version number: it fails when that directory exists and is not empty, so
    of several exports racing for one number exactly one gets it. Without a
    `version` the others move on to the next free number; with one they
    fail. A remote `export_dir` gets a copy (`copy_to_new_directory`), which
    fails when the version exists.

    Args:
        staging: The finished export: a directory beside the versions, or
            on the local disk for a remote `export_dir`.
        export_dir: The model's base path.
        version: The integer version asked for, or None for the next free one.

    Returns:
        The version directory, `export_dir/<version>`.

    Raises:
        ExportError: `version` was given and exists.
    """
    candidate = next_version(export_dir) if version is None else version
    while True:
        final = filesystem.join(export_dir, str(candidate))
        try:
            if filesystem.is_remote(final):
                copy_to_new_directory(staging, final)
            else:
                filesystem.rename(staging, final, overwrite=False)
            return final
        except FileExistsError:
            pass
        if version is not None:
            raise ExportError(f"{final}: version {version} already exists; versions are never overwritten")
        # Another export took `candidate` since it was chosen; each retry
        # follows a version that appeared, so the loop ends.
        candidate = max(candidate + 1, next_version(export_dir))


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


def warmup_requests(model_name, texts, text_b=None):
    """PredictionLog records (serialized) that TF Serving replays on load."""
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    request = predict_pb2.PredictRequest(
        model_spec=model_pb2.ModelSpec(name=model_name, signature_name="serving_default")
    )
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(list(texts), dtype=tf.string))
    records = [prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))]
    if text_b is not None:
        pair = predict_pb2.PredictRequest(
            model_spec=model_pb2.ModelSpec(name=model_name, signature_name="serve_text_pair")
        )
        pair.inputs["text"].CopyFrom(tf.make_tensor_proto(list(texts), dtype=tf.string))
        pair.inputs["text_b"].CopyFrom(tf.make_tensor_proto(list(text_b), dtype=tf.string))
        records.append(prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=pair)))
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


def models_config_text(names, serving_base_path=DEFAULT_SERVING_BASE_PATH):
    """A `ModelServerConfig` in text format listing `names` at `serving_base_path/<name>`."""
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    config = model_server_config_pb2.ModelServerConfig()
    for name in names:
        config.model_config_list.config.add(
            name=name, base_path=posixpath.join(serving_base_path, name), model_platform="tensorflow"
        )
    return text_format.MessageToString(config)


def write_models_config(export_base, serving_base_path=DEFAULT_SERVING_BASE_PATH):
    """Writes `export_base/models.config` (`tensorflow_model_server --model_config_file`)
    listing every model under `export_base`, by name.

    The file is rewritten whole and atomically after each export; it names
    models only, never versions (TF Serving serves the latest of each).

    Args:
        export_base: The parent of the model directories (`saved_models`).
        serving_base_path: Where the server sees `export_base`: each model's
            `base_path` is `<serving_base_path>/<name>` (the docker image
            mounts models under `/models`).

    Returns:
        The path written.
    """
    path = filesystem.join(export_base, MODELS_CONFIG)
    write_text_atomically(path, models_config_text(model_names(export_base), serving_base_path))
    return path


def in_precision(model, spec, precision):
    """`model` as an export in `precision` computes: itself, or a copy built for it.

    The copy is `spec.build_model` with `models.precision.inference_dtype_policy`
    (in bfloat16, the weights held rounded: no conversion on each request)
    and `model`'s variables, matched one to one by path and shape.

    Raises:
        ExportError: the rebuilt model's variables do not match `model`'s.
    """
    if holds_weights_for(model, precision):
        return model
    num_labels = int(model.outputs[0].shape[-1]) if spec.uses_labels else None
    copy = spec.build_model(model.bert_config, num_labels, dtype=inference_dtype_policy(model, precision))
    if not same_variable_layout(model, copy) or not holds_weights_for(copy, precision):
        raise ExportError(f"cannot rebuild {model.name!r} in {precision}: its variables are not a "
                          f"{spec.name} model's; build it with dtype={hardware.DTYPE_POLICIES[precision]!r}")
    copy_weights(model, copy)
    return copy


def constant_kernel_copies(skip_padding):
    """How many copies of the kernel constants an export's graph holds: one per path of its forward pass."""
    return 2 if skip_padding else 1


def resolve_constant_kernels(constant_kernels, kernel_bytes, skip_padding):
    """Whether an export holds its Dense kernels as graph constants.

    Args:
        constant_kernels: True, False, or None: where no GPU or TPU is
            visible (oneDNN's CPU kernels are what it pays for) and the
            copies fit under `MAX_CONSTANT_BYTES`.
        kernel_bytes: `constant_kernels.dense_kernel_bytes` of the model exported.
        skip_padding: The export's setting (two paths, two copies).

    Raises:
        ExportError: True asked for copies past `MAX_CONSTANT_BYTES`.
    """
    total = kernel_bytes * constant_kernel_copies(skip_padding)
    if constant_kernels is None:
        return total <= MAX_CONSTANT_BYTES and not hardware.accelerator_visible()
    if constant_kernels and total > MAX_CONSTANT_BYTES:
        raise ExportError(f"the kernels as constants would take {total / 2**20:.0f} MiB of the SavedModel's graph, "
                          f"more than {MAX_CONSTANT_BYTES / 2**20:.0f} MiB: export without constant kernels")
    return bool(constant_kernels)


def export_metadata(task, precision, max_seq_length, do_lower_case, skip_padding, constant_kernels=False):
    """What `assets.extra/export_metadata.json` says of an export (a dict)."""
    from keras_bert_impl import __version__

    name, flags = hardware.read_cpuinfo()
    return {
        "task": task,
        "precision": precision,
        "dtype_policy": hardware.DTYPE_POLICIES[precision],
        "weights_dtype": precision if precision == "float32" else "bfloat16 (LayerNorm float32)",
        "skips_padding": skip_padding,
        "kernels": "graph constants" if constant_kernels else "variables",
        "max_seq_length": max_seq_length,
        "do_lower_case": do_lower_case,
        "exported_on_cpu": name,
        "exported_on_cpu_flags": [flag for flag in hardware.MATRIX_FLAGS if flag in flags],
        "exported_with_onednn_rewrites": hardware.onednn_graph_rewrites(),
        "keras_bert_impl": __version__,
        "tensorflow": tf.__version__,
    }


def export_saved_model(
    model,
    task,
    vocab_file,
    export_dir,
    do_lower_case=True,
    max_seq_length=128,
    label_names=None,
    version=None,
    warmup_texts=("The weather is lovely today.", "He drove to the stadium."),
    tables=None,
    serving_base_path=DEFAULT_SERVING_BASE_PATH,
    precision=None,
    skip_padding=None,
    constant_kernels=None,
):
    """Exports `model` as `export_dir/<version>/` for TF Serving, and lists
    it in the export base's `models.config`.

    Args:
        model: A built task model (see `BertServingModule`).
        task: A task name of `tasks.registry` with serving outputs.
        vocab_file: The model's `vocab.txt` (tokenization happens in-graph).
        export_dir: `saved_models/<model_name>`; the model name is its
            basename, `saved_models` the export base. May be remote.
        do_lower_case: As for the Python tokenizer.
        max_seq_length: Every request is padded/truncated to this.
        label_names: Class names for a classifier (default "0".."n-1").
        version: Integer version; default the next free one when the export
            is complete. An existing version is never overwritten.
        warmup_texts: Real requests stored in `assets.extra` for warmup.
        tables: Optional precomputed `in_graph.build_tables()`.
        serving_base_path: Where TF Serving sees the export base, for
            `models.config` (see `write_models_config`).
        precision: "float32", "bfloat16" or "auto" (`hardware.
            default_precision`: bfloat16 on a CPU with AMX or AMD's AVX-512 bf16
            that TensorFlow's oneDNN kernels run); a model in another precision is rebuilt in
            this one (`in_precision`). Default: the model's own.
        skip_padding: Whether a batch with padding runs the encoder's
            per-token work on its real tokens only (`BertServingModule`);
            default: on a CPU (1.2x the batch-32 throughput of a bfloat16
            export, docs/BENCHMARKS.md), not where a GPU or TPU is visible, where
            the gathers can cost more than the padding. Written to the
            export's metadata.
        constant_kernels: Whether the graph holds the Dense kernels as
            constants, which oneDNN packs once and multiplies with its
            blocked kernels, on AMX tiles where the CPU has them
            (`models.constant_kernels`, docs/BENCHMARKS.md). Default: where
            no GPU or TPU is visible and the copies (two with
            `skip_padding`) take at most `MAX_CONSTANT_BYTES`. Written to
            the export's metadata.

    Returns:
        The path of the version directory written.

    Raises:
        ExportError: existing version, unknown task, label count mismatch,
            unknown precision, a model that cannot be rebuilt in it, a
            `max_seq_length` below 3 or past the model's position embeddings,
            constant kernels asked for past `MAX_CONSTANT_BYTES`.
    """
    if task not in exported_task_names():
        raise ExportError(f"--task {task!r} is not one of {', '.join(exported_task_names())}")
    spec = get_task(task)
    # Checked here, not by the first long request TF Serving gets.
    positions = model.bert_config.max_position_embeddings
    if not 3 <= max_seq_length <= positions:
        raise ExportError(f"--max_seq_length {max_seq_length}: must be at least 3 ([CLS] and two [SEP]s) "
                          f"and at most the model's max_position_embeddings {positions}")
    try:
        precision = hardware.resolve_precision(precision) if precision else model_precision(model)
    except ValueError as error:
        raise ExportError(str(error)) from None
    if skip_padding is None:
        skip_padding = not hardware.accelerator_visible()
    skip_padding = bool(skip_padding)
    export_dir = os.fspath(export_dir).rstrip("/")
    remote = filesystem.is_remote(export_dir)
    if not remote:
        export_dir = os.path.abspath(export_dir)
    model_name = filesystem.basename(export_dir)
    if version is not None:
        version = int(version)
        if version < 0:  # TF Serving would read "-1" as a version; our own scans would not
            raise ExportError(f"version {version}: a version is a non-negative integer")
        final = filesystem.join(export_dir, str(version))
        if filesystem.exists(final):  # before any work; `publish_version` decides a race
            raise ExportError(f"{final}: version {version} already exists; versions are never overwritten")
    vocab = load_vocab(vocab_file)
    check_special_tokens(vocab, vocab_file, required=spec.required_tokens)
    check_vocab_fits(vocab, vocab_file, model.bert_config.vocab_size, "the model's config")
    tokens = [""] * (max(vocab.values()) + 1)
    for token, index in vocab.items():
        tokens[index] = token

    filesystem.makedirs(export_dir)
    work = tempfile.mkdtemp(prefix="export-assets-")  # local scratch: the labels file, a remote export's staging
    # A local staging directory sits beside the versions, so that publishing is a rename.
    staging = filesystem.join(work if remote else export_dir, f".tmp-{uuid.uuid4().hex}")
    try:
        labels_path = None
        if spec.uses_labels:
            num_labels = int(model.outputs[0].shape[-1]) if hasattr(model, "outputs") else None
            names = list(label_names) if label_names else [str(i) for i in range(num_labels)]
            if num_labels is not None and len(names) != num_labels:
                raise ExportError(f"--label_names has {len(names)} names for a {num_labels}-label classifier")
            labels_path = filesystem.join(work, "labels.txt")
            with filesystem.open_file(labels_path, "w") as f:
                f.write("\n".join(names) + "\n")
        tokenizer = InGraphTokenizer(tokens, do_lower_case=do_lower_case, tables=tables or shared_tables())
        served = in_precision(model, spec, precision)
        constant_kernels = resolve_constant_kernels(constant_kernels, dense_kernel_bytes(served), skip_padding)
        module = BertServingModule(
            served, task, tokenizer, max_seq_length,
            {"cls": vocab["[CLS]"], "sep": vocab["[SEP]"], "mask": vocab.get("[MASK]", 0)},
            labels_path=labels_path, skip_padding=skip_padding,
            constant_kernels=ConstantKernels(served) if constant_kernels else None,
        )
        tf.saved_model.save(module, staging, signatures=module.signatures())
        if task in SIGNATURE_METHODS:
            set_method_names(staging, SIGNATURE_METHODS[task])
        extra = filesystem.join(staging, "assets.extra")
        filesystem.makedirs(extra)
        texts = [t + " [MASK] ." if spec.masks_in_text else t for t in warmup_texts]
        with tf.io.TFRecordWriter(filesystem.join(extra, WARMUP_FILE)) as writer:
            for record in warmup_requests(model_name, texts, text_b=texts if spec.warmup_pairs else None):
                writer.write(record)
        with filesystem.open_file(filesystem.join(extra, METADATA_FILE), "w") as f:
            json.dump(export_metadata(task, precision, max_seq_length, do_lower_case, skip_padding,
                                      constant_kernels), f, indent=2)
            f.write("\n")
        final = publish_version(staging, export_dir, version)
    finally:
        filesystem.rmtree(staging, missing_ok=True)
        filesystem.rmtree(work, missing_ok=True)
    write_models_config(filesystem.dirname(export_dir), serving_base_path)
    return final


def release_files(model_dir, bert_config_file=None, vocab_file=None, init_checkpoint=None):
    """`(bert_config_file, vocab_file, init_checkpoint)`, filled in from a
    release directory written by our tools (its latest checkpoint, else
    `bert_model.ckpt`) where not given."""
    if model_dir:
        bert_config_file = bert_config_file or filesystem.join(model_dir, "bert_config.json")
        vocab_file = vocab_file or filesystem.join(model_dir, "vocab.txt")
        init_checkpoint = init_checkpoint or tf.train.latest_checkpoint(model_dir) or filesystem.join(
            model_dir, "bert_model.ckpt"
        )
    return bert_config_file, vocab_file, init_checkpoint


def export_checkpoint(task, bert_config_file, init_checkpoint, vocab_file, export_dir, do_lower_case=True,
                      max_seq_length=128, num_labels=2, label_names=None, version=None, log=print,
                      serving_base_path=DEFAULT_SERVING_BASE_PATH, precision="auto", skip_padding=None,
                      constant_kernels=None):
    """Builds the `task` model, loads an original-layout checkpoint and exports it.

    Args:
        task: A task name with serving outputs (`tasks.registry`).
        bert_config_file, init_checkpoint, vocab_file: The release;
            `init_checkpoint` may be a `.keras` model file
            (`checkpoints.keras_file`), whose config must equal
            `bert_config_file`'s.
        export_dir: `saved_models/<model_name>`.
        do_lower_case, max_seq_length: The in-graph preprocessing.
        num_labels: Classes, where the task has labels (`label_names` wins).
        label_names: Class names.
        version: Integer version; default the next free one.
        log: `log(message)`.
        serving_base_path: Where TF Serving sees the export base
            (`models.config`).
        precision: "auto" (`hardware.default_precision`: bfloat16 on a CPU
            with AMX or AMD's AVX-512 bf16 and TensorFlow's oneDNN rewrites on, else
            float32),
            "float32" or "bfloat16": what the export computes in.
        skip_padding: As for `export_saved_model` (default: on a CPU).
        constant_kernels: As for `export_saved_model` (default: on a CPU).

    Returns:
        The version directory written.

    Raises:
        ExportError: unknown task, existing version, unknown precision.
        CheckpointError: a checkpoint (or `.keras` file) that is unreadable
            or does not fit the release.
    """
    from keras_bert_impl.checkpoints.keras_file import check_keras_file_fits, is_keras_file
    from keras_bert_impl.checkpoints.original import load_original_checkpoint
    from keras_bert_impl.config import BertConfig
    from keras_bert_impl.io import check_max_seq_length

    if task not in exported_task_names():
        raise ExportError(f"--task {task!r} is not one of {', '.join(exported_task_names())}")
    if version is not None and filesystem.exists(filesystem.join(export_dir, str(version))):
        # Checked before any work: versions are never overwritten.
        raise ExportError(f"{filesystem.join(export_dir, str(version))}: version {version} already exists")
    config = BertConfig.from_json_file(bert_config_file)
    check_max_seq_length(max_seq_length, config, bert_config_file)
    if is_keras_file(init_checkpoint):
        check_keras_file_fits(init_checkpoint, config, bert_config_file, vocab_file, do_lower_case)
    spec = get_task(task)
    try:
        precision = hardware.resolve_precision(precision)
    except ValueError as error:
        raise ExportError(str(error)) from None
    model = spec.build_model(config, len(label_names) if label_names else num_labels,
                             dtype=hardware.DTYPE_POLICIES[precision])
    report = load_original_checkpoint(model, init_checkpoint, allow_fresh=spec.export_optional)
    log(f"{init_checkpoint}: {report.summary()}")
    log(f"computing in {precision} (CPU: {hardware.cpu_description()}; {hardware.onednn_description()})")
    return export_saved_model(
        model, task, vocab_file, export_dir, do_lower_case=do_lower_case, max_seq_length=max_seq_length,
        label_names=label_names, version=version, serving_base_path=serving_base_path, precision=precision,
        skip_padding=skip_padding, constant_kernels=constant_kernels,
    )
