"""Versioned SavedModel export for TF Serving: `saved_models/<name>/<version>/`.

A version directory is written under a temporary name and renamed into place
only when complete (SavedModel, `assets/labels.txt`,
`assets.extra/tf_serving_warmup_requests`), so TF Serving, which watches the
base path for new integer versions, never loads half an export, and an
existing version is never overwritten. The rename also claims the version
number: exports started side by side on one base path get one version each.
"""

import errno
import os
import shutil
import tempfile
import uuid

import tensorflow as tf

from keras_bert_impl.errors import BertError
from keras_bert_impl.io import write_text_atomically
from keras_bert_impl.serving.signatures import BertServingModule
from keras_bert_impl.tasks.registry import exported_task_names, get_task
from keras_bert_impl.tokenization import check_special_tokens, load_vocab
from keras_bert_impl.tokenization.in_graph import InGraphTokenizer
from keras_bert_impl.tokenization.preprocessor import shared_tables

WARMUP_FILE = "tf_serving_warmup_requests"


class ExportError(BertError, ValueError):
    """An export request that cannot be honoured (bad version, task, labels)."""


def existing_versions(export_dir):
    """Integer version directories present under `export_dir`, ascending."""
    if not os.path.isdir(export_dir):
        return []
    return sorted(int(name) for name in os.listdir(export_dir) if name.isdigit())


def next_version(export_dir):
    """The next free integer version (1 for a new model)."""
    versions = existing_versions(export_dir)
    return versions[-1] + 1 if versions else 1


def publish_version(staging, export_dir, version=None):
    """Renames the complete export `staging` to `export_dir/<version>`.

    The rename is the claim on the version number: it fails when that
    directory exists and is not empty, so of several exports racing for one
    number exactly one gets it. Without a `version` the others move on to
    the next free number; with one they fail.

    Args:
        staging: The finished export, a directory beside the versions.
        export_dir: The model's base path.
        version: The integer version asked for, or None for the next free one.

    Returns:
        The version directory, `export_dir/<version>`.

    Raises:
        ExportError: `version` was given and exists.
    """
    candidate = next_version(export_dir) if version is None else version
    while True:
        final = os.path.join(export_dir, str(candidate))
        try:
            os.rename(staging, final)
            return final
        except OSError as e:
            # Linux answers ENOTEMPTY for a directory in the way, others EEXIST.
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
        if version is not None:
            raise ExportError(f"{final}: version {version} already exists; versions are never overwritten")
        # Another export took `candidate` since it was chosen; each retry
        # follows a version that appeared, so the loop ends.
        candidate = max(candidate + 1, next_version(export_dir))


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


def write_models_config(export_dir, model_name):
    """`models.config` (TF Serving --model_config_file) naming this model's base path."""
    path = os.path.join(export_dir, "models.config")
    text = (
        "model_config_list {\n"
        "  config {\n"
        f'    name: "{model_name}"\n'
        f'    base_path: "/models/{model_name}"\n'
        '    model_platform: "tensorflow"\n'
        "  }\n"
        "}\n"
    )
    write_text_atomically(path, text)
    return path


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
):
    """Exports `model` as `export_dir/<version>/` for TF Serving.

    Args:
        model: A built task model (see `BertServingModule`).
        task: A task name of `tasks.registry` with serving outputs.
        vocab_file: The model's `vocab.txt` (tokenization happens in-graph).
        export_dir: `saved_models/<model_name>`; the model name is its basename.
        do_lower_case: As for the Python tokenizer.
        max_seq_length: Every request is padded/truncated to this.
        label_names: Class names for a classifier (default "0".."n-1").
        version: Integer version; default the next free one when the export
            is complete. An existing version is never overwritten.
        warmup_texts: Real requests stored in `assets.extra` for warmup.
        tables: Optional precomputed `in_graph.build_tables()`.

    Returns:
        The path of the version directory written.

    Raises:
        ExportError: existing version, unknown task, label count mismatch.
    """
    if task not in exported_task_names():
        raise ExportError(f"--task {task!r} is not one of {', '.join(exported_task_names())}")
    spec = get_task(task)
    export_dir = os.path.abspath(export_dir)
    model_name = os.path.basename(export_dir.rstrip("/"))
    if version is not None:
        version = int(version)
        final = os.path.join(export_dir, str(version))
        if os.path.exists(final):  # before any work; `publish_version` decides a race
            raise ExportError(f"{final}: version {version} already exists; versions are never overwritten")
    vocab = load_vocab(vocab_file)
    check_special_tokens(vocab, vocab_file, required=spec.required_tokens)
    tokens = [""] * (max(vocab.values()) + 1)
    for token, index in vocab.items():
        tokens[index] = token

    os.makedirs(export_dir, exist_ok=True)
    staging = os.path.join(export_dir, f".tmp-{uuid.uuid4().hex}")
    work = tempfile.mkdtemp(prefix="export-assets-")
    try:
        labels_path = None
        if spec.uses_labels:
            num_labels = int(model.outputs[0].shape[-1]) if hasattr(model, "outputs") else None
            names = list(label_names) if label_names else [str(i) for i in range(num_labels)]
            if num_labels is not None and len(names) != num_labels:
                raise ExportError(f"--label_names has {len(names)} names for a {num_labels}-label classifier")
            labels_path = os.path.join(work, "labels.txt")
            with open(labels_path, "w", encoding="utf-8") as f:
                f.write("\n".join(names) + "\n")
        tokenizer = InGraphTokenizer(tokens, do_lower_case=do_lower_case, tables=tables or shared_tables())
        module = BertServingModule(
            model, task, tokenizer, max_seq_length,
            {"cls": vocab["[CLS]"], "sep": vocab["[SEP]"], "mask": vocab.get("[MASK]", 0)},
            labels_path=labels_path,
        )
        tf.saved_model.save(module, staging, signatures=module.signatures())
        extra = os.path.join(staging, "assets.extra")
        os.makedirs(extra, exist_ok=True)
        texts = [t + " [MASK] ." if spec.masks_in_text else t for t in warmup_texts]
        with tf.io.TFRecordWriter(os.path.join(extra, WARMUP_FILE)) as writer:
            for record in warmup_requests(model_name, texts, text_b=texts if spec.warmup_pairs else None):
                writer.write(record)
        final = publish_version(staging, export_dir, version)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    write_models_config(export_dir, model_name)
    return final


def release_files(model_dir, bert_config_file=None, vocab_file=None, init_checkpoint=None):
    """`(bert_config_file, vocab_file, init_checkpoint)`, filled in from a
    release directory written by our tools (its latest checkpoint, else
    `bert_model.ckpt`) where not given."""
    if model_dir:
        bert_config_file = bert_config_file or os.path.join(model_dir, "bert_config.json")
        vocab_file = vocab_file or os.path.join(model_dir, "vocab.txt")
        init_checkpoint = init_checkpoint or tf.train.latest_checkpoint(model_dir) or os.path.join(
            model_dir, "bert_model.ckpt"
        )
    return bert_config_file, vocab_file, init_checkpoint


def export_checkpoint(task, bert_config_file, init_checkpoint, vocab_file, export_dir, do_lower_case=True,
                      max_seq_length=128, num_labels=2, label_names=None, version=None, log=print):
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

    Returns:
        The version directory written.

    Raises:
        ExportError: unknown task, existing version.
        CheckpointError: a checkpoint (or `.keras` file) that is unreadable
            or does not fit the release.
    """
    from keras_bert_impl.checkpoints.keras_file import check_keras_file_fits, is_keras_file
    from keras_bert_impl.checkpoints.original import load_original_checkpoint
    from keras_bert_impl.config import BertConfig
    from keras_bert_impl.io import check_max_seq_length

    if task not in exported_task_names():
        raise ExportError(f"--task {task!r} is not one of {', '.join(exported_task_names())}")
    if version is not None and os.path.exists(os.path.join(export_dir, str(version))):
        # Checked before any work: versions are never overwritten.
        raise ExportError(f"{os.path.join(export_dir, str(version))}: version {version} already exists")
    config = BertConfig.from_json_file(bert_config_file)
    check_max_seq_length(max_seq_length, config, bert_config_file)
    if is_keras_file(init_checkpoint):
        check_keras_file_fits(init_checkpoint, config, bert_config_file, vocab_file, do_lower_case)
    spec = get_task(task)
    model = spec.build_model(config, len(label_names) if label_names else num_labels)
    report = load_original_checkpoint(model, init_checkpoint, allow_fresh=spec.export_optional)
    log(f"{init_checkpoint}: {report.summary()}")
    return export_saved_model(
        model, task, vocab_file, export_dir, do_lower_case=do_lower_case, max_seq_length=max_seq_length,
        label_names=label_names, version=version,
    )
