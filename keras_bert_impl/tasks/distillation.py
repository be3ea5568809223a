"""Knowledge distillation: a shallower, faster student from a fine-tuned model.

DistilBERT's recipe (Sanh et al., 2019), applied to a task model: the student
is the teacher's configuration with fewer layers (`student_config`: a
RoBERTa, ALBERT or DistilBERT teacher gives a student of its variant, with its
tokenizer), initialised from the teacher (embeddings, every (n/k)-th
transformer layer, pooler and head), and trained on three losses at once:

* soft targets: the teacher's class distribution at a temperature T, by
  cross-entropy (KL divergence) against the student's at T, scaled by T² so
  its gradients keep their size as T changes (Hinton et al., 2015);
* hard labels, where the texts have them (the ordinary fine-tuning loss);
* hidden states: 1 - cosine similarity between the student's and the
  teacher's last-layer state at [CLS], the pooler's input.

A multi-label teacher (`TextClassifier(multi_label=True)`, a release with
`multi_label.json`) has a sigmoid per label, not a distribution over
classes, so its soft targets are each label's sigmoid at T,
`sigmoid(z_teacher / T)`, against the student's `sigmoid(z_student / T)` by
binary cross-entropy less the teacher's own entropy (the binary KL
divergence: the cross-entropy's gradients, 0 where the student agrees),
averaged over the labels and scaled by T² as the softmax's
(`models.distillation_losses.MultiLabelSoftTargetLoss`); its hard labels
are 0/1 rows, by binary cross-entropy (`tasks.multi_label`). The student is
multi-label, of the teacher's labels and thresholds.

Unlabelled texts take part through the first and last. The teacher's targets
are computed once, before training (one forward pass over the texts), so a
step costs only the student's forward and backward pass.

That is `distill` (`TextClassifier.distill`), and `ClassifierDistillation`
(`bert-distill`) or, for a multi-label teacher, `MultiLabelDistillation`.
The other tasks' students put `DistillationSpec` (or `StepwiseDistillation`,
whose teacher runs beside the student on each batch, for per-token targets)
on their task's fine-tuning spec:
`span_qa.SquadDistillation`, `token_tagging.TaggingDistillation`,
`general_distillation.GeneralDistillation`.

Example:
>>> evenly_spaced_layers(12, 6)
[0, 2, 4, 6, 8, 10]
>>> evenly_spaced_layers(6, 4)
[0, 1, 3, 4]
"""

import dataclasses
import math
import os
import re

import numpy as np

from keras_bert_impl.checkpoints.name_map import CLASSIFIER_VARIABLES
from keras_bert_impl.errors import BertError
from keras_bert_impl.tasks.classifier import ClassifierFineTuning, read_dataset_splits
from keras_bert_impl.tasks.multi_label import MultiLabelFineTuning
from keras_bert_impl.tasks.spec import TaskInputs
from keras_bert_impl.tasks.text_data import num_texts, text_tensor

# The student's loss weights and temperature unless told otherwise.
DEFAULT_TEMPERATURE = 2.0
DEFAULT_LOSS_WEIGHTS = {"soft": 1.0, "hard": 1.0, "hidden": 1.0}
_LAYER = re.compile(r"^bert/encoder/layer_(\d+)/")
_GROUP = re.compile(r"^bert/encoder/transformer/group_(\d+)/")  # ALBERT's shared layers


class DistillationError(BertError, ValueError):
    """A teacher, student shape or data that distillation cannot use."""


def evenly_spaced_layers(num_teacher_layers, num_student_layers):
    """Teacher layers the student's layers start from, bottom first.

    Every (n/k)-th layer from the bottom, as DistilBERT takes layers 0, 2,
    ..., 10 of BERT-base's 12.

    Raises:
        DistillationError: a student with no layers, or deeper than the teacher.
    """
    if not 1 <= num_student_layers <= num_teacher_layers:
        raise DistillationError(
            f"num_hidden_layers must lie in [1, {num_teacher_layers}] (the teacher has {num_teacher_layers} "
            f"layers); got {num_student_layers}"
        )
    return [i * num_teacher_layers // num_student_layers for i in range(num_student_layers)]


def student_config(teacher_config, num_hidden_layers):
    """The student's configuration: the teacher's, with `num_hidden_layers` layers.

    Every other key is the teacher's, so a variant's student is of that
    variant and reads its tokenizer: RoBERTa's position offset and single
    token type, DistilBERT's missing token types (and pooler, unless
    fine-tuned with one), ALBERT's embedding width, inner groups and
    sharing. ALBERT keeps `num_hidden_groups` groups where the student has
    layers enough to run each, else one group a layer.

    Example:
    >>> from keras_bert_impl.config import BertConfig
    >>> albert = BertConfig(vocab_size=10, hidden_size=8, num_attention_heads=2, num_hidden_layers=4,
    ...                     model_type="albert", embedding_size=4, num_hidden_groups=2)
    >>> config = student_config(albert, 1)
    >>> config.num_hidden_layers, config.num_hidden_groups, config.embedding_size
    (1, 1, 4)
    """
    groups = teacher_config.num_hidden_groups
    return dataclasses.replace(teacher_config, num_hidden_layers=num_hidden_layers,
                               num_hidden_groups=None if groups is None else min(groups, num_hidden_layers))


def teacher_groups(teacher, student, layers):
    """ALBERT: the teacher's weight group each student group starts from; [] for a model without groups.

    Student group g starts from the group that the teacher layer of its
    first layer runs (layer i runs group `int(i / L * G)`, as ALBERT's
    `transformer_model`).

    Args:
        teacher, student: The two `BertConfig`s.
        layers: `evenly_spaced_layers(...)`: the teacher layer of each student layer.

    Example:
    >>> from keras_bert_impl.config import BertConfig
    >>> albert = BertConfig(vocab_size=10, hidden_size=8, num_attention_heads=2, num_hidden_layers=6,
    ...                     model_type="albert", num_hidden_groups=3)
    >>> teacher_groups(albert, student_config(albert, 2), evenly_spaced_layers(6, 2))
    [0, 1]
    """
    if student.num_hidden_groups is None:
        return []
    first_layers = {}
    for i in range(student.num_hidden_layers):
        first_layers.setdefault(_albert_group(i, student), i)
    return [_albert_group(layers[first_layers[g]], teacher) for g in range(student.num_hidden_groups)]


def _albert_group(layer, config):
    """The weight group ALBERT's layer `layer` runs."""
    return int(layer / config.num_hidden_layers * config.num_hidden_groups)


def teacher_variable_name(student_name, layers, groups=()):
    """The teacher variable a student variable starts from: the same name, but
    `layer_<i>` becomes `layer_<layers[i]>` (and ALBERT's `group_<g>`
    `group_<groups[g]>`).

    Example:
    >>> teacher_variable_name("bert/encoder/layer_2/output/dense/kernel", [0, 2, 4])
    'bert/encoder/layer_4/output/dense/kernel'
    >>> teacher_variable_name("output_weights", [0, 2, 4])
    'output_weights'
    >>> teacher_variable_name("bert/encoder/transformer/group_1/inner_group_0/LayerNorm/gamma", [0, 3], [0, 2])
    'bert/encoder/transformer/group_2/inner_group_0/LayerNorm/gamma'
    """
    name = _LAYER.sub(lambda match: f"bert/encoder/layer_{layers[int(match.group(1))]}/", student_name)
    return _GROUP.sub(lambda match: f"bert/encoder/transformer/group_{groups[int(match.group(1))]}/", name)


def initialise_from_teacher(student, teacher, layers):
    """Copies the teacher's embeddings, the chosen layers (ALBERT: groups), pooler and head into the student.

    Args:
        student: The student task model (built).
        teacher: The teacher task model, of the same configuration but depth
            (`student_config`).
        layers: `evenly_spaced_layers(...)`: the teacher layer of each student layer.
    """
    from keras_bert_impl.checkpoints.name_map import original_variable_map

    groups = teacher_groups(teacher.bert_config, student.bert_config, layers)
    teacher_variables = original_variable_map(teacher)
    for name, variable in original_variable_map(student).items():
        variable.assign(teacher_variables[teacher_variable_name(name, layers, groups)])


@dataclasses.dataclass(frozen=True)
class DistillationOptions:
    """How to distill; the defaults reach the goals of docs/BENCHMARKS.md's distillation tables.

    Attributes:
        num_hidden_layers: The student's depth (default: half the teacher's, at least 1).
        temperature: Of the soft targets.
        soft_weight, hard_weight, hidden_weight: The three losses' weights
            (0 leaves a loss out).
        learning_rate: Peak learning rate of the original AdamW (default: the teacher's).
        batch_size, epochs: Of training.
        seed: Of the data order (default: the teacher's).
    """

    num_hidden_layers: int = None
    temperature: float = DEFAULT_TEMPERATURE
    soft_weight: float = DEFAULT_LOSS_WEIGHTS["soft"]
    hard_weight: float = DEFAULT_LOSS_WEIGHTS["hard"]
    hidden_weight: float = DEFAULT_LOSS_WEIGHTS["hidden"]
    learning_rate: float = None
    batch_size: int = 32
    epochs: int = 3
    seed: int = None

    def check(self):
        """Raises `DistillationError` naming the first value it cannot train with."""
        for name in ("num_hidden_layers", "batch_size", "epochs", "seed"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))):
                raise DistillationError(f"{name} must be a whole number, got {value!r}")
        for name in ("temperature", "batch_size", "epochs"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise DistillationError(f"{name} must be a finite number above 0, got {value!r}")
        weights = [self.soft_weight, self.hard_weight, self.hidden_weight]
        if not all(isinstance(w, (int, float)) and math.isfinite(w) and w >= 0 for w in weights):
            raise DistillationError(f"the loss weights must be finite and >= 0, got {weights}")
        if self.learning_rate is not None and not (math.isfinite(self.learning_rate) and self.learning_rate > 0):
            raise DistillationError(f"learning_rate must be a finite number above 0, got {self.learning_rate!r}")


def check_teacher(teacher):
    """Refuses a teacher whose head was never trained (a release loaded with a fresh head).

    A teacher is known by what a `TextClassifier` has (its encoder, head,
    preprocessing and classes), not by importing the class: the task API
    (`tasks.text_classifier`) calls this module, and no import goes back.

    Raises:
        DistillationError: naming what is missing.
    """
    if not all(hasattr(teacher, name) for name in ("bert", "head", "preprocessor", "num_classes", "bert_config")):
        raise DistillationError(f"the teacher must be a fine-tuned TextClassifier, got {type(teacher).__name__}")
    report = getattr(teacher, "load_report", None)
    fresh_head = report is not None and any(name in report.fresh for name in ("output_weights", "output_bias"))
    optimizer = getattr(teacher, "optimizer", None)
    trained_here = optimizer is not None and optimizer.built and int(optimizer.iterations.numpy()) > 0
    if fresh_head and not trained_here:
        raise DistillationError(
            "the teacher's classification head is freshly initialised (its release has no output_weights) and it "
            "was not trained since: fine-tune it first (fit, or bert-run-classifier --do_train)"
        )


def teacher_targets(teacher, inputs, batch_size):
    """The teacher's logits [n, num_classes] and last-layer [CLS] states [n, hidden_size].

    Computed at inference (no dropout), batch by batch on the real tokens.
    """
    import keras

    from keras_bert_impl.models.base import sequence_inputs
    from keras_bert_impl.inference.array_prediction import predict_on_real_tokens
    from keras_bert_impl.training.real_tokens import default_bucket_size

    ids = sequence_inputs("input_ids", "input_mask", "segment_ids")
    encoded = teacher.bert(ids)
    both = keras.Model(ids, {"logits": teacher.head(encoded["pooled_output"]),
                             "cls_state": encoded["sequence_output"][:, 0]})
    width = inputs["input_mask"].shape[1]
    outputs = predict_on_real_tokens(both, inputs, batch_size, default_bucket_size(width), description="texts")
    return outputs["logits"].astype(np.float32), outputs["cls_state"].astype(np.float32)


def make_student(teacher, num_hidden_layers, options):
    """The student: the teacher's class (a `TextClassifier`) at `num_hidden_layers` layers, its weights copied."""
    import keras

    layers = evenly_spaced_layers(teacher.bert_config.num_hidden_layers, num_hidden_layers)
    config = student_config(teacher.bert_config, num_hidden_layers)
    student = type(teacher)(
        config, teacher.num_classes, keras.layers.deserialize(keras.layers.serialize(teacher.preprocessor)),
        dropout_rate=teacher.dropout_rate,
        learning_rate=options.learning_rate or teacher.learning_rate,
        warmup_proportion=teacher.warmup_proportion,
        seed=teacher.seed if options.seed is None else options.seed,
        real_tokens_only=teacher.real_tokens_only,
        label_names=teacher.label_names,  # the same classes: the student answers with the same names
        multi_label=teacher.multi_label, threshold=teacher.threshold,  # and decides as the teacher
        dtype=teacher.dtype_policy.name,
    )
    initialise_from_teacher(student, teacher, layers)
    return student


def _training_model(student, losses):
    """The student with an output per loss: its logits (`hard` [batch, num_classes],
    `soft` [batch, 1, num_classes]) and its last-layer [CLS] state (`hidden`
    [batch, 1, hidden_size]). The axis of 1 keeps the targets of `soft` and
    `hidden` from being taken for per-token ones when a batch is cut after
    its longest row (`training.real_tokens.cut_batch`). Its `bert` and
    `head` are the student's, for the checkpoints of training."""
    import keras

    from keras_bert_impl.models.base import sequence_inputs

    ids = sequence_inputs("input_ids", "input_mask", "segment_ids")
    encoded = student.bert(ids)
    logits = student.head(student.get_layer("dropout")(encoded["pooled_output"]))  # [batch, num_classes]
    outputs = {"soft": logits[:, None, :], "hard": keras.layers.Identity(name="hard")(logits),
               "hidden": encoded["sequence_output"][:, :1]}
    trainer = keras.Model(ids, {name: outputs[name] for name in losses})
    trainer.bert, trainer.head = student.bert, student.head  # The student's weights, by their original names.
    return trainer


def distill(teacher, texts, labels=None, unlabeled_texts=None, options=DistillationOptions(), verbose="auto",
            callbacks=None, validation_data=None):
    """Trains a student with `options.num_hidden_layers` layers from `teacher`; returns it.

    Args:
        teacher: A fine-tuned `TextClassifier`.
        texts: Texts (a list, or a tuple of two lists for pairs).
        labels: Their labels (class ids, scores for regression, or 0/1 rows
            [n, num_classes] for a multi-label teacher), or None.
        unlabeled_texts: More texts, without labels: soft targets and hidden
            states only.
        options: `DistillationOptions`.
        verbose, callbacks: As Keras `fit`'s.
        validation_data: `(texts, labels)`: the student's `evaluate` on them
            after each epoch, as `val_loss`, `val_accuracy` in the history
            (multi-label: the binary cross-entropy and the share of
            (text, label) decisions right at probability 0.5, as
            `multi_label.multi_label_compile_options`).

    Returns:
        The student, a `TextClassifier` (`history` attribute: the `fit` history).

    Raises:
        DistillationError: a teacher that is not fine-tuned, a student deeper
            than the teacher or with no layers, no texts, labels that do not
            match the texts, or options it cannot train with.
        TypeError: texts that are not strings.
    """
    from keras_bert_impl.training.fine_tuning import (
        FineTuningSettings,
        TrainingData,
        build_optimizer_before_tracing,
        training_dataset,
    )
    from keras_bert_impl.training.optimization import create_optimizer

    check_teacher(teacher)
    options.check()
    num_layers = options.num_hidden_layers
    if num_layers is None:
        num_layers = max(1, teacher.bert_config.num_hidden_layers // 2)
    evenly_spaced_layers(teacher.bert_config.num_hidden_layers, num_layers)  # checks the depth first
    labelled = text_tensor(texts) if texts is not None else None
    unlabelled = text_tensor(unlabeled_texts) if unlabeled_texts is not None else None
    count = (num_texts(labelled) if labelled is not None else 0)
    extra = num_texts(unlabelled) if unlabelled is not None else 0
    if count + extra == 0:
        raise DistillationError("distill needs at least one text")
    hard = labels is not None and options.hard_weight > 0
    multi_label = bool(getattr(teacher, "multi_label", False))
    if labels is not None and multi_label:
        labels = _multi_hot_labels(labels, count, teacher.num_classes)
    elif labels is not None:
        labels = np.asarray(labels)
        if labels.shape != (count,):
            raise DistillationError(f"labels must be one per text, of shape [{count}] for {count} texts; got labels "
                                    f"of shape {list(labels.shape)}")
        if count and teacher.num_classes > 1 and not (np.issubdtype(labels.dtype, np.integer)
                                           and labels.min() >= 0 and labels.max() < teacher.num_classes):
            raise DistillationError(f"labels must be class ids in [0, {teacher.num_classes}), got "
                                    f"{labels.dtype} values from {labels.min()} to {labels.max()}")
        if labels.dtype.kind not in "biuf" or not np.all(np.isfinite(labels.astype(np.float64))):
            raise DistillationError("labels hold NaN or infinite values")

    parts = [t for t in (labelled, unlabelled) if t is not None]
    inputs = [{key: value.numpy() for key, value in teacher.preprocessor(t).items()} for t in parts]
    inputs = {key: np.concatenate([part[key] for part in inputs]) for key in inputs[0]}
    logits, cls_state = teacher_targets(teacher, inputs, options.batch_size)

    student = make_student(teacher, num_layers, options)
    weights = {"soft": options.soft_weight, "hard": options.hard_weight if hard else 0.0,
               "hidden": options.hidden_weight}
    losses = [name for name, weight in weights.items() if weight > 0]
    if not losses:
        raise DistillationError("every loss weight is 0 (or hard_weight only, without labels): nothing to train on")
    if multi_label:  # 0/1 rows [n, num_classes]; the unlabelled texts' rows weigh nothing.
        hard_targets = np.zeros((count + extra, teacher.num_classes), np.float32)
        if labels is not None:
            hard_targets[:count] = labels
    else:
        hard_targets = (np.concatenate([labels if labels is not None else np.zeros(count), np.zeros(extra)])
                        .astype(np.float32 if teacher.num_classes == 1 else np.int32))
        if teacher.num_classes == 1:
            hard_targets = hard_targets.reshape(-1, 1)
    targets = {"soft": logits[:, None, :], "hidden": cls_state[:, None, :], "hard": hard_targets}
    sample_weights = {name: np.ones(count + extra, np.float32) for name in losses}
    if "hard" in losses:
        sample_weights["hard"] = np.concatenate([np.ones(count), np.zeros(extra)]).astype(np.float32)

    total = count + extra
    steps_per_epoch = max(1, total // options.batch_size)
    num_train_steps = steps_per_epoch * options.epochs
    trainer = _training_model(student, losses)
    trainer.compile(
        optimizer=create_optimizer(student.learning_rate, num_train_steps,
                                   int(num_train_steps * student.warmup_proportion)),
        **distillation_compile_options(losses, weights, teacher.num_classes, options.temperature, multi_label),
    )
    data = TrainingData(inputs, {name: targets[name] for name in losses},
                        num_examples=total, unit="texts", description=f"{total} texts", source="texts",
                        sample_weights={name: sample_weights[name] for name in losses})
    settings = FineTuningSettings(train_batch_size=min(options.batch_size, total), seed=student.seed,
                                  real_tokens_only=student.real_tokens_only)
    dataset = training_dataset(data, settings)
    student.compile()  # The original recipe: `evaluate` now, a further `fit` later.
    callbacks = list(callbacks or [])
    if validation_data is not None:
        callbacks.insert(0, student_validation(student, validation_data))
    build_optimizer_before_tracing(trainer)
    history = trainer.fit(dataset, epochs=options.epochs, steps_per_epoch=steps_per_epoch, verbose=verbose,
                          callbacks=callbacks, shuffle=False)
    student.history = history
    return student


def _multi_hot_labels(labels, count, num_classes):
    """A multi-label teacher's `labels` as float32 0/1 rows [count, num_classes].

    Raises:
        DistillationError: not one row per text, or not 0/1 rows of the labels.
    """
    from keras_bert_impl.tasks.multi_label import check_multi_hot

    labels = np.asarray(labels)
    if labels.shape != (count, num_classes):
        raise DistillationError(f"labels of a multi-label teacher are 0/1 rows, of shape [{count}, {num_classes}] for "
                                f"{count} texts; got labels of shape {list(labels.shape)}")
    try:
        check_multi_hot(labels, num_classes, name="labels row")
    except ValueError as error:
        raise DistillationError(str(error)) from None
    return labels.astype(np.float32)


def student_validation(student, validation_data):
    """A callback adding the student's own `evaluate` on held-out labelled texts to each epoch's logs."""
    import keras

    class StudentValidation(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            results = student.evaluate(*tuple(validation_data), verbose=0, return_dict=True)
            if logs is not None:
                logs.update({f"val_{name}": value for name, value in results.items()})

    return StudentValidation()


def distillation_compile_options(losses, weights, num_classes, temperature, multi_label=False):
    """`model.compile` arguments of a `_training_model` with outputs `losses`; `multi_label`: a sigmoid per
    label (`MultiLabelSoftTargetLoss`, binary cross-entropy on 0/1 rows)."""
    import keras

    from keras_bert_impl.models.distillation_losses import (
        CosineDistanceLoss,
        MultiLabelSoftTargetLoss,
        SoftTargetLoss,
    )

    if multi_label:
        soft, hard = MultiLabelSoftTargetLoss(temperature), keras.losses.BinaryCrossentropy(from_logits=True)
    else:
        soft = SoftTargetLoss(temperature)
        hard = (keras.losses.MeanSquaredError() if num_classes == 1
                else keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    every = {"soft": soft, "hard": hard, "hidden": CosineDistanceLoss()}
    return {"loss": {name: every[name] for name in losses}, "loss_weights": {name: weights[name] for name in losses}}


def read_text_lines(path):
    """The non-blank lines of a UTF-8 file, one text each (for `--unlabeled_file`).

    Raises:
        InputFileError: a missing or undecodable file, or one without a text.
    """
    from keras_bert_impl.errors import InputFileError
    from keras_bert_impl.io import read_utf8_lines

    texts = [line.strip() for _, line in read_utf8_lines(path, kind="unlabeled file") if line.strip()]
    if not texts:
        raise InputFileError(f"{path}: no text in it (one text per line)")
    return texts


# Where a distillation run writes the teacher's own evaluation and predictions.
TEACHER_DIR = "teacher"
# The recorded setting (`training_settings.json`) that marks a directory as a distillation run's.
_DISTILLATION_TASK_SETTING = "distillation_task"


def distillation_settings(task, num_hidden_layers, options):
    """What a `bert-distill` run records beside the fine-tuning settings (`FineTuningSpec.run_settings`).

    Example:
    >>> sorted(distillation_settings("general", 3, DistillationOptions()))[:3]
    ['distillation_task', 'hard_weight', 'hidden_weight']
    """
    return {_DISTILLATION_TASK_SETTING: task, "student_num_hidden_layers": num_hidden_layers,
            "temperature": options.temperature, "soft_weight": options.soft_weight,
            "hard_weight": options.hard_weight, "hidden_weight": options.hidden_weight}


def check_student_directory(output_dir, teacher_config_file):
    """Refuses an output directory that would overwrite the teacher or another release.

    The student's release is written as `model.ckpt` and `bert_config.json`:
    in the teacher's own directory (however named: links are resolved)
    they replace the teacher; in a directory holding another release they
    replace its config and orphan its weights. A directory that holds an
    earlier run of `bert-distill` (its recorded settings say so) is taken:
    the rerun resumes it.

    Args:
        output_dir: Where the student goes.
        teacher_config_file: The teacher release's `bert_config.json`.

    Raises:
        OutputPathError: naming the directory and what it holds.
    """
    from keras_bert_impl import filesystem
    from keras_bert_impl.errors import OutputPathError
    from keras_bert_impl.training.run_settings import RUN_SETTINGS_FILE, read_run_settings

    teacher_dir = filesystem.dirname(teacher_config_file) or "."
    if "://" not in output_dir and "://" not in teacher_dir:
        if os.path.realpath(output_dir) == os.path.realpath(teacher_dir):
            raise OutputPathError(f"{output_dir}: the teacher's own directory ({teacher_dir}); the student's release "
                                  "would replace the teacher: give another --output_dir")
    elif output_dir.rstrip("/") == teacher_dir.rstrip("/"):
        raise OutputPathError(f"{output_dir}: the teacher's own directory; give another --output_dir")
    if not filesystem.exists(filesystem.join(output_dir, "bert_config.json")):
        return
    settings = read_run_settings(output_dir) or {}
    if _DISTILLATION_TASK_SETTING not in settings:
        raise OutputPathError(
            f"{output_dir}: holds another release (bert_config.json, and no {RUN_SETTINGS_FILE} of a bert-distill "
            "run); the student's would replace its config and orphan its weights: give another --output_dir"
        )


@dataclasses.dataclass(frozen=True)
class DistillationSpec:
    """What every `bert-distill` task adds to its fine-tuning spec (put it first
    among the bases, as `ClassifierDistillation(DistillationSpec, ClassifierFineTuning)`).

    The job's release (`run.bert_config_file`, `vocab_file`,
    `init_checkpoint`) is the teacher's. The job builds the student at
    `options.num_hidden_layers` (`model_config`) and starts it from the
    teacher (`initialise`: embeddings, every (n/k)-th layer, pooler and
    head); the task's own `read_inputs`, `training_data` and its evaluation
    and prediction files stay as they are. The teacher's evaluation (and,
    where prediction is scored, its predictions) go to `<output_dir>/teacher/`,
    in the task's own files, beside the student's.

    Attributes:
        options: `DistillationOptions` (its `batch_size`, `epochs`,
            `learning_rate`, `seed` are the run's training settings there).
        teacher_cache: Holds the teacher once built (not an option).
        task: The name `bert-distill --task` gives it (`tasks.registry.DISTILLATION`).
        teacher_predicts: Whether `predict` runs the teacher too (where the
            predictions are scored, as SQuAD's).
        default_max_seq_length: The task tool's default.
        teacher_head: Original names of the head variables the teacher must have.
    """

    options: DistillationOptions = DistillationOptions()
    teacher_cache: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)
    task = None
    teacher_predicts = False
    default_max_seq_length = 128
    teacher_head = ()

    def read_inputs(self, release, run, log):
        self.check_before_reading(release, run)
        return super().read_inputs(release, run, log)

    def check_before_reading(self, release, run):
        """Options, student depth and the teacher's head: checked before the data are read.

        Raises:
            DistillationError: options out of range, a student deeper than the teacher or of no layers.
            CheckpointError: a teacher checkpoint without the task's head.
        """
        from keras_bert_impl.checkpoints.original import list_original_variables
        from keras_bert_impl.errors import CheckpointError

        self.options.check()
        evenly_spaced_layers(release.config.num_hidden_layers, self.num_hidden_layers(release))
        names = list_original_variables(run.init_checkpoint)
        if not all(name in names for name in self.teacher_head):
            raise CheckpointError(f"{run.init_checkpoint}: has no {' or '.join(self.teacher_head)}, so it is not "
                                  f"a model fine-tuned for {self.head_description} to distill (fine-tune it first)")

    def teacher_label_list(self, run):
        """`(labels, path)` of the `label_list.txt` beside the teacher.

        Raises:
            CheckpointError: there is none (not a model with labels fine-tuned by our tools).
        """
        from keras_bert_impl import filesystem
        from keras_bert_impl.errors import CheckpointError
        from keras_bert_impl.training.fine_tuning import LABEL_LIST_FILE, recorded_labels

        labels, path = recorded_labels("", run.init_checkpoint)
        if labels is None:
            directory = filesystem.dirname(run.init_checkpoint or "")
            raise CheckpointError(f"{directory or run.init_checkpoint}: no {LABEL_LIST_FILE}, so not a fine-tuned "
                                  f"{self.head_description} model (its fine-tuning writes one beside the release)")
        return labels, path

    def run_settings(self, release):
        """The student's depth, the temperature and the loss weights: a rerun that changes one is refused by name."""
        return distillation_settings(self.task, self.num_hidden_layers(release), self.options)

    def num_hidden_layers(self, release):
        depth = self.options.num_hidden_layers
        return max(1, release.config.num_hidden_layers // 2) if depth is None else depth

    def teacher_config(self, release):
        """The teacher's configuration (default: the release's)."""
        return release.config

    def model_config(self, release):
        return student_config(self.teacher_config(release), self.num_hidden_layers(release))

    def teacher(self, inputs, release, run, log, strategy):
        """The teacher task model, built once and loaded from `run.init_checkpoint`."""
        if "model" not in self.teacher_cache:
            from keras_bert_impl.checkpoints.original import load_original_checkpoint, open_checkpoint

            with strategy.scope():
                teacher = inputs.model_spec.build_model(self.teacher_config(release), inputs.num_labels)
            fresh = [name for name in inputs.model_spec.head_variables if name not in self.teacher_head]
            load_original_checkpoint(teacher, run.init_checkpoint, allow_fresh=fresh)
            reader = open_checkpoint(run.init_checkpoint)[1]
            self.teacher_cache["global_step"] = (int(reader.get_tensor("global_step"))
                                                 if reader.has_tensor("global_step") else 0)
            log(f"teacher: {run.init_checkpoint} ({release.config.num_hidden_layers} layers)")
            self.teacher_cache["model"] = teacher
        return self.teacher_cache["model"]

    def initialise(self, model, inputs, release, run, log):
        teacher = self.teacher(inputs, release, run, log, model.distribute_strategy)
        layers = evenly_spaced_layers(release.config.num_hidden_layers, model.bert_config.num_hidden_layers)
        initialise_from_teacher(model, teacher, layers)
        log(f"student: {len(layers)} layers, from the teacher's layers {layers}")

    def loss_weights(self, inputs):
        """`{term: weight}` of the terms trained on (those of weight above 0)."""
        weights = {"soft": self.options.soft_weight, "hard": self.options.hard_weight,
                   "hidden": self.options.hidden_weight}
        return {term: weight for term, weight in weights.items() if weight > 0}

    def evaluate(self, model, inputs, release, global_step, run, log):
        self._run_teacher("evaluate", model, inputs, release, run, log)
        return super().evaluate(model, inputs, release, global_step, run, log)

    def predict(self, model, inputs, release, global_step, run, log):
        if self.teacher_predicts:
            self._run_teacher("predict", model, inputs, release, run, log)
        return super().predict(model, inputs, release, global_step, run, log)

    def _run_teacher(self, step, model, inputs, release, run, log):
        """The task's `evaluate` or `predict` of the teacher, into `<output_dir>/teacher/`."""
        from keras_bert_impl import filesystem

        teacher = self.teacher(inputs, release, run, log, model.distribute_strategy)
        directory = filesystem.join(run.output_dir, TEACHER_DIR)
        filesystem.makedirs(directory)
        log(f"the teacher's {step}, into {directory}")
        getattr(super(), step)(teacher, inputs, release, self.teacher_cache["global_step"],
                               dataclasses.replace(run, output_dir=directory), log)


def encoder_states(task_model, inputs):
    """Every layer's output [batch, seq, H] of a task model's encoder, bottom first, and its `BertModel`.

    ALBERT's encoder gives one state per block run, `inner_group_num` a
    layer; a layer's output is its last block's.
    """
    bert = getattr(task_model, "bert", task_model)
    embedded = bert.embedding_postprocessor(bert.word_embedding(inputs["input_ids"]), inputs["segment_ids"])
    states, _ = bert.encoder(embedded, inputs["input_mask"])
    inner = bert.bert_config.inner_group_num
    return list(states)[inner - 1::inner], bert


def matched_teacher_layers(num_teacher_layers, num_student_layers):
    """The teacher layer whose output each student layer's output learns (hidden-state loss).

    Student layer i starts from teacher layer `evenly_spaced_layers(...)[i]`
    and stands for the block of teacher layers up to the next one taken, so
    its output learns the last of that block's: the top layer learns the
    teacher's top layer, as in DistilBERT.

    Example:
    >>> matched_teacher_layers(12, 6)
    [1, 3, 5, 7, 9, 11]
    >>> matched_teacher_layers(6, 4)
    [0, 2, 3, 5]
    """
    layers = evenly_spaced_layers(num_teacher_layers, num_student_layers)
    return [following - 1 for following in layers[1:]] + [num_teacher_layers - 1]


@dataclasses.dataclass(frozen=True)
class StepwiseDistillation(DistillationSpec):
    """Distillation with the teacher running beside the student on each batch
    (`models.distillation_losses.DistillationTrainer`), for targets too large
    to compute once: per-token logits and hidden states.

    A task supplies `soft_logits` (its head on the encoder's output); its
    `training_data` gives the labels as `targets={"hard": ...}` and their
    weights (if any) as `sample_weights={"hard": ..., "soft": ...}`.

    Attributes:
        every_layer: The hidden-state loss pairs every student layer with
            its `matched_teacher_layers` layer; otherwise the top layers only.
        model_inputs: The names of the training inputs the models take.
    """

    every_layer = False
    model_inputs = ("input_ids", "input_mask", "segment_ids")

    def soft_logits(self, task_model, sequence_output, inputs):
        """The task head's logits from `sequence_output` [batch, seq, H]; the class axis last."""
        raise NotImplementedError

    def outputs_model(self, task_model, layers, with_logits):
        """`model_inputs -> {"soft": logits (`with_logits`), "hidden": [the states of `layers`]}` of a task model."""
        import keras

        from keras_bert_impl.models.base import sequence_inputs

        ids = sequence_inputs(*self.model_inputs)
        states, _ = encoder_states(task_model, ids)
        outputs = {"hidden": [states[i] for i in layers]}
        if with_logits:
            outputs["soft"] = self.soft_logits(task_model, states[-1], ids)
        return keras.Model(ids, outputs)

    def trains_logits(self, inputs):
        """Whether the models have a head to distill (a masked-LM student of a teacher without one has not)."""
        return True

    def loss_weights(self, inputs):
        weights = super().loss_weights(inputs)
        return {term: weight for term, weight in weights.items() if term == "hidden" or self.trains_logits(inputs)}

    def training_model(self, model, inputs):
        from keras_bert_impl.checkpoints.name_map import HEAD_VARIABLES
        from keras_bert_impl.models.distillation_losses import DistillationTrainer

        teacher = self.teacher_cache["model"]
        depth, teacher_depth = model.bert_config.num_hidden_layers, teacher.bert_config.num_hidden_layers
        student_layers = list(range(depth)) if self.every_layer else [depth - 1]
        teacher_layers = matched_teacher_layers(teacher_depth, depth) if self.every_layer else [teacher_depth - 1]
        with_logits = self.trains_logits(inputs)
        trainer = DistillationTrainer(self.outputs_model(model, student_layers, with_logits),
                                      self.outputs_model(teacher, teacher_layers, with_logits),
                                      self.loss_weights(inputs), self.options.temperature)
        # The student's weights under their original names, for the training checkpoints.
        trainer.bert = getattr(model, "bert", model)
        for attribute in HEAD_VARIABLES:
            if hasattr(model, attribute):
                setattr(trainer, attribute, getattr(model, attribute))
        return trainer

    def compile_options(self, inputs):
        return {}  # The trainer computes its own loss.


@dataclasses.dataclass(frozen=True)
class ClassifierStudent(DistillationSpec):
    """What the classifiers' distillations share (put it first among the bases): the student is the
    teacher's classifier at fewer layers, its targets computed once (`teacher_training_data`), its
    training model `_training_model`; `unlabeled_file` adds texts without labels.

    Attributes:
        multi_label: The losses are a sigmoid's per label (`distillation_compile_options`).
    """

    unlabeled_file: str = None
    name = "distill"
    task = "classifier"
    teacher_head = tuple(CLASSIFIER_VARIABLES)
    multi_label = False

    def training_model(self, model, inputs):
        return _training_model(model, list(self.loss_weights(inputs)))

    def compile_options(self, inputs):
        weights = self.loss_weights(inputs)
        return distillation_compile_options(list(weights), weights, inputs.num_labels, self.options.temperature,
                                            self.multi_label)


@dataclasses.dataclass(frozen=True)
class ClassifierDistillation(ClassifierStudent, ClassifierFineTuning):
    """Distilling a fine-tuned classifier release into a shallower one (`bert-distill`).

    The teacher's `label_list.txt` fixes the classes. The student trains on
    the dataset's train split, plus `unlabeled_file`'s lines, against the
    teacher's soft targets and [CLS] states (computed once, before training)
    and the labels. `evaluate` writes the student's `eval_results.txt`
    (run_classifier's metrics) and the teacher's in `teacher/eval_results.txt`.

    Args:
        dataset, data_dir: As `ClassifierFineTuning`'s.
        unlabeled_file: More training texts, one per line, without labels.
        options: `DistillationOptions`.
    """

    def read_inputs(self, release, run, log):
        from keras_bert_impl.tasks.classifier import CLASSIFIER, REGRESSION

        self.check_before_reading(release, run)
        refuse_multi_label_teacher(run)
        labels, path = (None, None) if self.dataset.is_regression else self.teacher_label_list(run)
        dataset = self.dataset
        if labels is not None and dataset.labels is None:
            dataset = dataclasses.replace(dataset, labels=tuple(labels))
        dataset, examples = read_dataset_splits(dataset, self.data_dir, run.do_train, run.do_eval, run.do_predict,
                                                (labels, path))
        if run.do_train and self.unlabeled_file:
            examples["unlabeled"] = read_text_lines(self.unlabeled_file)
        spec = REGRESSION if dataset.is_regression else CLASSIFIER
        num_labels = 1 if dataset.is_regression else len(dataset.labels)
        return TaskInputs(spec, examples, num_labels=num_labels, labels=None if dataset.is_regression
                          else tuple(dataset.labels), extra=dataset)

    def training_data(self, inputs, release, run, log):
        from keras_bert_impl.data.classification_examples import ClassifierExample, label_ids
        from keras_bert_impl.tasks.classifier import encode

        dataset, labelled = inputs.extra, inputs.splits["train"]
        unlabelled = [ClassifierExample(i, text, None, f"unlabeled-{i}", None, f"{self.unlabeled_file}")
                      for i, text in enumerate(inputs.splits.get("unlabeled", ()))]
        features = encode(labelled + unlabelled, release.tokenizer, run.max_seq_length)
        hard = np.concatenate([label_ids(dataset, labelled), np.zeros(len(unlabelled))])
        hard = hard.astype(np.float32).reshape(-1, 1) if dataset.is_regression else hard.astype(np.int32)
        return teacher_training_data(self.teacher_cache["model"], features, hard, len(labelled),
                                     self.loss_weights(inputs), run.training.train_batch_size, self.data_dir)


def teacher_training_data(teacher, features, hard, count, losses, batch_size, source):
    """The `TrainingData` of a classifier's student, its targets computed once: the teacher's logits and
    [CLS] states on every text, the labels `hard` of the first `count` (the rest, unlabelled, weigh 0 there).

    Args:
        teacher: The teacher task model.
        features: `encode`'s arrays of the labelled texts, then the unlabelled.
        hard: The labels, one row per text (the unlabelled rows any value).
        count: How many texts are labelled.
        losses: The terms trained on (`DistillationSpec.loss_weights`).
        batch_size: Of the teacher's forward pass.
        source: What the texts came from, for messages.
    """
    from keras_bert_impl.training.fine_tuning import TrainingData

    logits, cls_state = teacher_targets(teacher, features, batch_size)
    total = len(hard)
    # [n, 1, num_classes] and [n, 1, H], as `_training_model`'s outputs: never cut, never broadcast.
    targets = {"soft": logits[:, None, :], "hard": hard, "hidden": cls_state[:, None, :]}
    weights = {"soft": np.ones(total, np.float32), "hidden": np.ones(total, np.float32),
               "hard": np.concatenate([np.ones(count), np.zeros(total - count)]).astype(np.float32)}
    return TrainingData(
        inputs=features, targets={name: targets[name] for name in losses},
        sample_weights={name: weights[name] for name in losses}, num_examples=total,
        unit="training texts", description=f"{total} texts ({count} labelled)", source=source,
    )


def teacher_multi_label_record(run):
    """The `checkpoints.release.MultiLabelRecord` of the teacher release (`run.init_checkpoint`'s directory),
    or None where it is not multi-label."""
    from keras_bert_impl import filesystem
    from keras_bert_impl.checkpoints.release import read_release_multi_label

    return read_release_multi_label(filesystem.dirname(run.init_checkpoint or ""))


def refuse_multi_label_teacher(run):
    """Raises `CheckpointError` where the teacher is multi-label: a softmax over its labels is no answer of it."""
    from keras_bert_impl import filesystem
    from keras_bert_impl.checkpoints.release import MULTI_LABEL_FILE
    from keras_bert_impl.errors import CheckpointError

    if teacher_multi_label_record(run) is not None:
        path = filesystem.join(filesystem.dirname(run.init_checkpoint), MULTI_LABEL_FILE)
        raise CheckpointError(f"{path}: the teacher is a multi-label classifier (a sigmoid per label); its student "
                              "is a MultiLabelDistillation's (bert-distill picks it from this file)")


@dataclasses.dataclass(frozen=True)
class MultiLabelDistillation(ClassifierStudent, MultiLabelFineTuning):
    """Distilling a fine-tuned multi-label classifier release into a shallower one (`bert-distill` of a
    teacher whose release has `multi_label.json`: `bert-run-classifier --multi_label`, `save_release`).

    The teacher's labels (its `label_list.txt` and `multi_label.json`) fix
    the labels, in its order: a data file naming another label is refused at
    its line, and 0/1 label columns must be the teacher's labels. The
    student trains on the train split, plus `unlabeled_file`'s lines,
    against the teacher's sigmoid per label at the temperature
    (`models.distillation_losses.MultiLabelSoftTargetLoss`) and [CLS]
    states (computed once, before training) and the 0/1 labels (binary
    cross-entropy). Its release records the teacher's labels and thresholds
    (`multi_label.json`): it decides as the teacher does. `evaluate` writes
    the student's `eval_results.txt` (run_classifier --multi_label's
    micro/macro F1 and per-label scores at those thresholds) and the
    teacher's in `teacher/eval_results.txt`; `predict` each label's
    probability to `test_results.tsv`.

    Args:
        dataset: A `data.multi_label.MultiLabelDataset` (its `labels`, if
            given, must be the teacher's).
        data_dir: Its directory.
        unlabeled_file: More training texts, one per line, without labels.
        options: `DistillationOptions`.

    Example:
    >>> from keras_bert_impl.data.multi_label import MultiLabelDataset
    >>> spec = MultiLabelDistillation(MultiLabelDataset("csv", delimiter="|"), "tags")
    >>> spec.task, spec.head_description
    ('classifier', 'multi-label classification')
    """

    multi_label = True

    def read_inputs(self, release, run, log):
        from keras_bert_impl import filesystem
        from keras_bert_impl.errors import InputFileError
        from keras_bert_impl.tasks.multi_label import MULTI_LABEL
        from keras_bert_impl.training.fine_tuning import check_labels

        self.check_before_reading(release, run)
        self.teacher_thresholds(run)  # A teacher that is not multi-label is refused here.
        labels, path = self.teacher_label_list(run)
        dataset = self.dataset
        if dataset.label_columns and sorted(dataset.label_columns) != sorted(labels):
            raise InputFileError(f"{path}: the teacher's labels are {','.join(labels)}; the label columns are "
                                 f"{','.join(dataset.label_columns)}: give one 0/1 column per teacher label")
        if not dataset.label_columns:
            check_labels(dataset.labels, labels, path)
        dataset = dataclasses.replace(dataset, labels=tuple(labels))  # The teacher's order: its outputs'.
        splits = {}
        for split, wanted in (("train", run.do_train), ("dev", run.do_eval), ("test", run.do_predict)):
            if wanted:
                splits[split] = dataset.read_examples(self.data_dir, split)
                if not splits[split]:
                    raise InputFileError(f"{filesystem.join(self.data_dir, f'{split}.{dataset.name}')}: the "
                                         f"{split} split has no examples")
        if run.do_train and self.unlabeled_file:
            splits["unlabeled"] = read_text_lines(self.unlabeled_file)
        return TaskInputs(MULTI_LABEL, splits, num_labels=len(labels), labels=tuple(labels), extra=dataset)

    def teacher_thresholds(self, run):
        """The teacher release's thresholds, one per label.

        Raises:
            CheckpointError: the teacher has no `multi_label.json` (it is not multi-label).
        """
        from keras_bert_impl.checkpoints.release import MULTI_LABEL_FILE
        from keras_bert_impl.errors import CheckpointError

        record = teacher_multi_label_record(run)
        if record is None:
            raise CheckpointError(f"{run.init_checkpoint}: no {MULTI_LABEL_FILE} beside it, so not a multi-label "
                                  "classifier (bert-run-classifier --multi_label and save_release write one)")
        return record.thresholds

    def thresholds(self, inputs, run):
        """The teacher's: the student decides as its teacher does, and records them in its release."""
        return self.teacher_thresholds(run)

    def run_settings(self, release):
        return {**super().run_settings(release), "multi_label": True}

    def training_data(self, inputs, release, run, log):
        from keras_bert_impl.data.multi_label import MultiLabelExample, multi_hot
        from keras_bert_impl.tasks.classifier import encode

        labelled = inputs.splits["train"]
        unlabelled = [MultiLabelExample(i, text, None, (), f"{self.unlabeled_file}")
                      for i, text in enumerate(inputs.splits.get("unlabeled", ()))]
        features = encode(labelled + unlabelled, release.tokenizer, run.max_seq_length)
        hard = multi_hot(labelled + unlabelled, inputs.labels)  # [n, num_labels]; the unlabelled rows 0, weigh 0
        return teacher_training_data(self.teacher_cache["model"], features, hard, len(labelled),
                                     self.loss_weights(inputs), run.training.train_batch_size, self.data_dir)

