"""Reading and writing google-research/bert's TF1 checkpoints (`bert_model.ckpt`)."""

import dataclasses
import fnmatch
import os
import re

import numpy as np
import tensorflow as tf

from keras_bert_impl import filesystem
from keras_bert_impl.checkpoints.keras_file import is_keras_file, read_keras_file
from keras_bert_impl.checkpoints.name_map import original_variable_map
from keras_bert_impl.errors import CheckpointError
from keras_bert_impl.io import temporary_path, write_text_atomically

# Optimizer slots and bookkeeping that original checkpoints carry next to the
# weights; a model never has them, so they are neither loaded nor "unexpected".
# Training state, not weights: optimizer slots and step, the float16 loss
# scale and our training checkpoints' dropout RNG states.
_IGNORED = re.compile(
    r"(^|/)(global_step|adam_m|adam_v|Adam|Adam_\d+|Momentum)$|^_CHECKPOINTABLE|^loss_scale/|^keras/"
)


@dataclasses.dataclass
class LoadReport:
    """What a checkpoint load matched, and what it did not.

    Attributes:
        loaded: Original names assigned into the model.
        missing: Model variables the checkpoint lacks.
        unexpected: Checkpoint variables the model has no place for.
        mismatched: `(name, checkpoint_shape, model_shape)` triples.
        fresh: The subset of `missing` the caller allowed to stay initialised.
    """

    loaded: list
    missing: list
    unexpected: list
    mismatched: list
    fresh: list

    def summary(self):
        parts = [f"{len(self.loaded)} loaded"]
        for label, items in (
            ("missing", self.missing),
            ("unexpected", self.unexpected),
            ("shape-mismatched", self.mismatched),
        ):
            if items:
                parts.append(f"{len(items)} {label} (e.g. {_describe(items[:3])})")
        return ", ".join(parts)


def _describe(items):
    out = []
    for item in items:
        if isinstance(item, tuple):
            name, ckpt_shape, model_shape = item
            out.append(f"{name}: checkpoint {list(ckpt_shape)} vs model {list(model_shape)}")
        else:
            out.append(item)
    return "; ".join(out)


def _allowed(name, patterns):
    return any(fnmatch.fnmatchcase(name, p) or name.startswith(p) for p in patterns)


def assign_original_weights(model, get_tensor, shapes, source, allow_fresh=()):
    """Assigns weights named in the original layout into `model`.

    Args:
        model: One of our models (built).
        get_tensor: `name -> array` for names in `shapes`.
        shapes: Dict of available original names -> shapes.
        source: Path used in error messages.
        allow_fresh: Names, name prefixes or glob patterns of model variables
            that may be absent from the source and keep their initial values
            (e.g. `("output_weights", "output_bias")` for a new classifier).

    Returns:
        A `LoadReport`.

    Raises:
        CheckpointError: shape mismatches, or missing variables not covered by
            `allow_fresh`. Nothing is assigned in that case.
    """
    variables = original_variable_map(model)
    available = {name: tuple(shape) for name, shape in shapes.items() if not _IGNORED.search(name)}
    missing = [name for name in variables if name not in available]
    unexpected = sorted(name for name in available if name not in variables)
    mismatched = [
        (name, available[name], tuple(variable.shape))
        for name, variable in variables.items()
        if name in available and available[name] != tuple(variable.shape)
    ]
    fresh = [name for name in missing if _allowed(name, allow_fresh)]
    report = LoadReport([], missing, unexpected, mismatched, fresh)
    refused = [name for name in missing if name not in fresh]
    if mismatched or refused:
        # Worded for both callers: a command-line user has no allow_fresh flag.
        problems = []
        if mismatched:
            problems.append(
                f"{len(mismatched)} shape-mismatched (e.g. {_describe(mismatched[:3])}): the checkpoint is for a "
                "model of another shape (its bert_config.json or number of labels differs from this model's)"
            )
        if refused:
            problems.append(
                f"{len(refused)} missing (e.g. {_describe(refused[:3])}): the checkpoint has no values for these "
                "variables; a Python caller may leave them freshly initialised by naming them in allow_fresh"
            )
        raise CheckpointError(f"{source}: does not fit {model.name}: " + "; ".join(problems))
    for name, variable in variables.items():
        if name in available:
            value = np.asarray(get_tensor(name))
            variable.assign(value.astype(variable.dtype, copy=False))
            report.loaded.append(name)
    return report


def open_checkpoint(checkpoint_prefix):
    """`(prefix, reader)` of a checkpoint prefix, a directory naming one, or a `.keras` file.

    The reader has `get_tensor(name)` and `get_variable_to_shape_map()`.
    Unlike `tf.train.load_checkpoint`, a prefix is opened as it is: that
    asks first whether the prefix is a directory, which TensorFlow's `ram://`
    answers yes for every prefix of a file's name.

    Raises:
        CheckpointError: no checkpoint there, or an unreadable one.
    """
    prefix = os.fspath(checkpoint_prefix)
    if is_keras_file(prefix):
        # A model file saved by Keras: read through the same name map, then
        # loaded and listed like a checkpoint (`keras_file.KerasFile`).
        return prefix, read_keras_file(prefix)
    if filesystem.isdir(prefix):
        latest = tf.train.latest_checkpoint(prefix)
        if latest is None:
            raise CheckpointError(f"{prefix}: directory holds no checkpoint")
        prefix = latest
    if not filesystem.exists(prefix + ".index"):
        raise CheckpointError(f"{prefix}: checkpoint not found (no {filesystem.basename(prefix)}.index)")
    try:
        return prefix, _CheckedReader(prefix, tf.compat.v1.train.NewCheckpointReader(prefix))
    except (tf.errors.OpError, ValueError) as e:
        raise CheckpointError(f"{prefix}: unreadable checkpoint ({e.message if hasattr(e, 'message') else e})") from None


class _CheckedReader:
    """A checkpoint reader whose `get_tensor` names the checkpoint and tensor
    when the data file is damaged or cut short (TensorFlow raises a bare
    `IndexError: Read less bytes than requested`, or a `DataLossError`)."""

    def __init__(self, prefix, reader):
        self._prefix, self._reader = prefix, reader

    def get_tensor(self, name):
        try:
            return self._reader.get_tensor(name)
        except (IndexError, tf.errors.OpError) as e:
            detail = (getattr(e, "message", None) or str(e)).splitlines()[0]
            raise CheckpointError(f"{self._prefix}: tensor {name} cannot be read ({detail}): the checkpoint's "
                                  "data file is damaged or cut short") from None

    def __getattr__(self, name):  # get_variable_to_shape_map, has_tensor, ...
        return getattr(self._reader, name)


def list_original_variables(checkpoint_prefix):
    """`{name: shape}` of an original-format checkpoint, without loading values
    (a `.keras` file is loaded to list it)."""
    _, reader = open_checkpoint(checkpoint_prefix)
    return reader.get_variable_to_shape_map()


def load_original_checkpoint(model, checkpoint_prefix, allow_fresh=()):
    """Loads an original `bert_model.ckpt` (or one we wrote) into `model` by name.

    Args:
        model: `BertModel`, `BertPretrainingModel`, `BertClassifier`, ... (built).
        checkpoint_prefix: e.g. `uncased_L-12_H-768_A-12/bert_model.ckpt`, a
            directory whose `checkpoint` file names one, or a `.keras` model
            file (`checkpoints.keras_file`).
        allow_fresh: See `assign_original_weights`.

    Returns:
        A `LoadReport` (unexpected variables, such as `cls/*` when loading a
        pretraining checkpoint into a classifier, are reported, not errors).

    Raises:
        CheckpointError: missing file, or a checkpoint that does not fit.

    Example:
    >>> report = load_original_checkpoint(model, "bert_model.ckpt")  # doctest: +SKIP
    >>> print(report.summary())  # doctest: +SKIP
    """
    prefix, reader = open_checkpoint(checkpoint_prefix)
    return assign_original_weights(
        model,
        reader.get_tensor,
        reader.get_variable_to_shape_map(),
        source=prefix,
        allow_fresh=allow_fresh,
    )


def write_checkpoint_tensors(tensors, checkpoint_prefix):
    """Writes `{name: array}` as a TF1 name-keyed checkpoint, atomically.

    The files appear under their final names only once complete (`.data`
    first, `.index` last), so an interrupted write never looks finished. A
    `checkpoint` state file naming the prefix is written beside them.
    """
    prefix = os.fspath(checkpoint_prefix)
    directory = filesystem.dirname(prefix) or "."
    filesystem.makedirs(directory)
    tmp_prefix = temporary_path(prefix)
    names = sorted(tensors)
    try:
        tf.raw_ops.SaveV2(
            prefix=tmp_prefix,
            tensor_names=names,
            shape_and_slices=[""] * len(names),
            tensors=[tf.convert_to_tensor(tensors[name]) for name in names],
        )
        # Over an existing checkpoint: its .index goes first, so between the two
        # renames the prefix reads as incomplete, never as new data under an old index.
        filesystem.remove(prefix + ".index", missing_ok=True)
        filesystem.rename(tmp_prefix + ".data-00000-of-00001", prefix + ".data-00000-of-00001")
        filesystem.rename(tmp_prefix + ".index", prefix + ".index")
    finally:
        for suffix in (".index", ".data-00000-of-00001"):
            filesystem.remove(tmp_prefix + suffix, missing_ok=True)
    write_checkpoint_state(directory, [filesystem.basename(prefix)])
    return prefix


def write_checkpoint_state(directory, prefixes):
    """Writes the `checkpoint` state file (`tf.train.latest_checkpoint` reads it).

    Args:
        directory: Where the checkpoints are.
        prefixes: Checkpoint basenames, oldest first; the last is the latest.
    """
    state = filesystem.join(directory, "checkpoint")
    lines = [f'model_checkpoint_path: "{prefixes[-1]}"']
    lines += [f'all_model_checkpoint_paths: "{p}"' for p in prefixes]
    write_text_atomically(state, "\n".join(lines) + "\n")


def original_weights(model):
    """`{original_name: numpy array}` of all of `model`'s mapped variables, in
    float32 as the original's checkpoints are (a model built in bfloat16 or
    float16 stores its variables so; TF1's `init_from_checkpoint` refuses
    such a checkpoint)."""
    return {
        name: _as_float32(variable.numpy()) for name, variable in original_variable_map(model).items()
    }


def _as_float32(value):
    return value.astype(np.float32) if np.issubdtype(value.dtype, np.floating) or value.dtype.name == "bfloat16" else value


def save_original_checkpoint(model, checkpoint_prefix, global_step=None):
    """Writes `model` as an original-format checkpoint (names, shapes, dtypes).

    Args:
        model: Any of our models.
        checkpoint_prefix: e.g. `out/bert_model.ckpt`.
        global_step: If given, also stored as int64 `global_step`, as the
            original's `run_pretraining.py` checkpoints do.

    Returns:
        The prefix written.
    """
    tensors = original_weights(model)
    if global_step is not None:
        tensors["global_step"] = np.asarray(global_step, dtype=np.int64)
    return write_checkpoint_tensors(tensors, checkpoint_prefix)
