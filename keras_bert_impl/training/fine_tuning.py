"""The fine-tuning plumbing every task shares: a release in, `fit` to a step
count with checkpoints that resume, a fine-tuned release out.

A *release* is what google-research/bert publishes and what our tools
write: `bert_config.json`, `vocab.txt` and an original-layout checkpoint.
`fit_for_steps` is the original Estimator's training contract in Keras:
exactly `num_train_steps` optimizer steps, `model.ckpt-<step>` every
`save_checkpoints_steps` (weights, Adam slots, step, dropout RNG state), and
a rerun of the same call after an interruption, even kill -9, continues from
the newest one at the same place in the seeded data.

Example:
>>> training_steps(num_examples=1000, batch_size=32, num_epochs=3.0, warmup_proportion=0.1)
(93, 9)
"""

import dataclasses
import hashlib
import math
import sys

from keras_bert_impl import filesystem
from keras_bert_impl.checkpoints.release import LABEL_LIST_FILE, write_release_labels
from keras_bert_impl.data.pipeline_options import without_autotune_thread
from keras_bert_impl.errors import CheckpointError, InputFileError
from keras_bert_impl.io import check_max_seq_length, copy_atomically, write_text_atomically

FINE_TUNED_CHECKPOINT = "model.ckpt"


def log_to_stderr(prog):
    """A `log(message)` that prints `prog: message` on stderr."""
    return lambda message: print(f"{prog}: {message}", file=sys.stderr, flush=True)


@dataclasses.dataclass(frozen=True)
class Release:
    """A BERT release, checked: its config, tokenizer and file names.

    Attributes:
        config: The `BertConfig`.
        tokenizer: `FullTokenizer` over `vocab_file`.
        bert_config_file, vocab_file: The files read.
        init_checkpoint: The checkpoint prefix or `.keras` model file (may
            be None: fresh weights).
        do_lower_case: The casing the tokenizer applies.
    """

    config: object
    tokenizer: object
    bert_config_file: str
    vocab_file: str
    init_checkpoint: str = None
    do_lower_case: bool = True


@dataclasses.dataclass(frozen=True)
class FineTuningSettings:
    """How to fine-tune: the original scripts' training flags, plus the strategy.

    Attributes:
        train_batch_size: Examples per optimizer step (all replicas).
        learning_rate: Peak learning rate of AdamW.
        num_train_epochs: Passes over the training examples (may be fractional).
        warmup_proportion: Fraction of the steps with linear warmup.
        save_checkpoints_steps: Steps between `model.ckpt-<step>` checkpoints.
        strategy: `default`, `one_device`, `mirrored`, `multi_worker_mirrored` or `tpu`.
        tpu_name: TPU name or address for `strategy="tpu"`.
        seed: Seed of initialisation, dropout and shuffling.
        real_tokens_only: Cut each batch after its longest row wherever that
            gives the full-width result (`training.real_tokens`); False
            computes at `max_seq_length` as the original does.
        allow_changed_settings: Resume from the checkpoints in the output
            directory even where they were trained with other settings
            (`training.run_settings`); by default that is refused.
    """

    train_batch_size: int = 32
    learning_rate: float = 5e-5
    num_train_epochs: float = 3.0
    warmup_proportion: float = 0.1
    save_checkpoints_steps: int = 1000
    strategy: str = "default"
    tpu_name: str = None
    seed: int = 12345
    real_tokens_only: bool = True
    allow_changed_settings: bool = False

    @classmethod
    def field_names(cls):
        return tuple(field.name for field in dataclasses.fields(cls))


@dataclasses.dataclass(frozen=True)
class FineTuningRun:
    """One run of a fine-tuning job: the release, what to do, where, and how to train.

    Attributes:
        output_dir: Where checkpoints, the fine-tuned release and results go.
        bert_config_file, vocab_file, init_checkpoint, do_lower_case: The release.
        max_seq_length: Padded length after WordPiece.
        do_train, do_eval, do_predict: What to run.
        eval_batch_size, predict_batch_size: Batch sizes of those steps.
        training: `FineTuningSettings`.
    """

    output_dir: str
    bert_config_file: str
    vocab_file: str
    init_checkpoint: str = None
    do_lower_case: bool = True
    max_seq_length: int = 128
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    training: FineTuningSettings = FineTuningSettings()

    def batch_sizes(self):
        """`{flag name: batch size}` of the steps this run takes.

        Example:
        >>> FineTuningRun("out", "c.json", "v.txt", do_train=True, do_predict=True).batch_sizes()
        {'train_batch_size': 32, 'predict_batch_size': 8}
        """
        return {
            flag: size for flag, size, used in (
                ("train_batch_size", self.training.train_batch_size, self.do_train),
                ("eval_batch_size", self.eval_batch_size, self.do_eval),
                ("predict_batch_size", self.predict_batch_size, self.do_predict),
            ) if used
        }


@dataclasses.dataclass(frozen=True)
class TrainingData:
    """A task's encoded training set, as `fine_tune` trains on it.

    Attributes:
        inputs: `{input_ids, input_mask, segment_ids}`, int32 arrays
            [num_rows, max_seq_length].
        targets: What the loss compares the outputs with: an array
            [num_rows, ...] or a dict of them.
        num_examples: What the original counts its steps by: examples,
            windows, or SQuAD questions (fewer than their windows).
        unit: What `num_examples` counts, in the 0-steps error
            ("training examples", "windows", "questions").
        description: The data in the progress line ("40 examples").
        source: The file or directory it came from, named in errors.
        sample_weights: Weights of the targets (per token for tagging), or None.
        shuffle_buffer: None shuffles the whole set anew on every pass (the
            original run_classifier's order, with a whole-set buffer); a
            number shuffles the repeated data through a buffer of that size
            (the original run_squad's 100).
        fingerprint: What the recorded run settings hash as the training
            data (`data_sha256`); None: `(inputs, targets)`.
    """

    inputs: dict
    targets: object
    num_examples: int
    unit: str
    description: str
    source: str
    sample_weights: object = None
    shuffle_buffer: int = None
    fingerprint: object = None

    @property
    def num_rows(self):
        return len(self.inputs["input_mask"])

    @property
    def max_seq_length(self):
        return self.inputs["input_mask"].shape[1]

    def elements(self):
        """The `from_tensor_slices` structure: (inputs, targets[, sample_weights])."""
        if self.sample_weights is None:
            return self.inputs, self.targets
        return self.inputs, self.targets, self.sample_weights


def read_release(bert_config_file, vocab_file, do_lower_case=True, init_checkpoint=None, max_seq_length=None):
    """Reads and cross-checks a release.

    Args:
        bert_config_file: The original `bert_config.json`.
        vocab_file: Its `vocab.txt`.
        do_lower_case: Lower-case input; checked against the checkpoint's
            name as the original's `validate_case_matches_checkpoint` does.
        init_checkpoint: The checkpoint prefix, a `.keras` model file, or None.
        max_seq_length: If given, must fit `max_position_embeddings`.

    Returns:
        A `Release`.

    Raises:
        ConfigError, VocabError: the files are bad or do not fit together.
        CheckpointError: a `.keras` `init_checkpoint` that cannot be read or
            whose config, vocabulary or casing differs from the files'.
    """
    from keras_bert_impl.checkpoints.keras_file import check_keras_file_fits, is_keras_file
    from keras_bert_impl.config import BertConfig
    from keras_bert_impl.tokenization import (
        FullTokenizer,
        check_special_tokens,
        check_vocab_fits,
        validate_case_matches_checkpoint,
    )
    from keras_bert_impl.tokenization.from_files import WORDPIECE, release_tokenizer, vocab_file_kind

    config = BertConfig.from_json_file(bert_config_file)
    if max_seq_length is not None:
        check_max_seq_length(max_seq_length, config, bert_config_file)
    validate_case_matches_checkpoint(do_lower_case, init_checkpoint)
    if vocab_file_kind(vocab_file) == WORDPIECE:
        tokenizer = FullTokenizer(vocab_file, do_lower_case=do_lower_case)
        check_special_tokens(tokenizer.vocab, vocab_file)
        check_vocab_fits(tokenizer.vocab, vocab_file, config.vocab_size, bert_config_file)
    else:  # A variant's vocab.json + merges.txt or spiece.model (docs/VARIANTS.md).
        tokenizer = release_tokenizer(vocab_file, config.vocab_size, do_lower_case, bert_config_file)
    if is_keras_file(init_checkpoint):
        check_keras_file_fits(init_checkpoint, config, bert_config_file, vocab_file, do_lower_case)
    return Release(config, tokenizer, bert_config_file, vocab_file, init_checkpoint, do_lower_case)


def training_steps(num_examples, batch_size, num_epochs, warmup_proportion):
    """The original's `(num_train_steps, num_warmup_steps)`."""
    num_train_steps = int(num_examples / batch_size * num_epochs)
    return num_train_steps, int(num_train_steps * warmup_proportion)


def build_in_strategy(make_model, strategy="default", tpu_name=None, seed=12345, batch_sizes=None):
    """The distribution strategy and a model built in its scope.

    Args:
        make_model: `() -> keras.Model`.
        strategy: A strategy name (`training.strategy.get_strategy`).
        tpu_name: TPU name or address for `strategy="tpu"`.
        seed: Keras' global seed, set before the model is built.
        batch_sizes: `{flag name: batch size}`; each must split over the
            replicas.

    Returns:
        `(model, strategy)`.
    """
    import keras

    from keras_bert_impl.training.strategy import check_batch_size, get_strategy

    distribution = get_strategy(strategy, tpu_name)
    for flag, batch_size in (batch_sizes or {}).items():
        check_batch_size(batch_size, distribution, f"--{flag}")
    keras.utils.set_random_seed(seed)
    with distribution.scope():
        return make_model(), distribution


def on_real_tokens(dataset, settings, max_seq_length):
    """`dataset`'s batches cut after their longest row, unless `settings` say otherwise.

    TPUs compile one program per shape and want them static: they keep the
    full width.

    Args:
        dataset: Batches of fixed-width features with `input_mask`.
        settings: `FineTuningSettings` (`real_tokens_only`, `strategy`).
        max_seq_length: The padded width (sets the bucket).

    Returns:
        A dataset of the same batches in the same order.
    """
    from keras_bert_impl.training.real_tokens import cut_padding, default_bucket_size

    if not _cuts_batches(settings):
        return dataset
    return cut_padding(dataset, default_bucket_size(max_seq_length))


def _cuts_batches(settings):
    return settings.real_tokens_only and settings.strategy != "tpu"


def compute_on_real_tokens(model, settings, enabled=True):
    """Sets `model`'s encoders to run their per-token work on real tokens only, where that pays.

    Exact wherever nothing reads the padded positions' outputs (see
    `TransformerEncoder`'s `real_tokens_only`): classification and tagging,
    not SQuAD (the original's training loss covers the padding, and its
    n-best search ranks the padding's logits). On by
    `settings.real_tokens_only` where no XLA compiles the steps (a CPU):
    the real-token row count changes from batch to batch, which XLA on a GPU
    or TPU would compile anew each time; there the cut batches alone apply.

    Args:
        model: A task model.
        settings: `FineTuningSettings`.
        enabled: False turns it off whatever the settings (SQuAD).

    Returns:
        Whether it is on.
    """
    import tensorflow as tf

    from keras_bert_impl.inference.padding_free import set_real_tokens_only

    on = bool(enabled and _cuts_batches(settings) and not tf.config.list_logical_devices("GPU"))
    set_real_tokens_only(model, on)
    return on


def predict_batches(model, inputs, batch_size, settings, log=print, description="examples"):
    """`model`'s outputs for `inputs` (NumPy), on real tokens as `settings` say.

    Per-token outputs come back at the full width (zeros after each batch's
    last real position when cut). See `inference.array_prediction.predict_on_real_tokens`.
    """
    from keras_bert_impl.inference.array_prediction import predict_on_real_tokens
    from keras_bert_impl.training.real_tokens import default_bucket_size

    width = len(inputs["input_mask"][0])
    return predict_on_real_tokens(
        model, inputs, batch_size, default_bucket_size(width),
        cut=_cuts_batches(settings), log=log, description=description,
    )


def epoch_layout(num_train_steps, num_train_epochs):
    """`(epochs, steps_per_epoch)` that Keras shows for a run of `num_train_steps`.

    As many epochs as the user asked for (rounded up), of equal length but
    the last: `--num_train_epochs=2` shows two epochs, whatever remainder
    the original's step count leaves.

    Example:
    >>> epoch_layout(63, 2.0), epoch_layout(93, 3.0), epoch_layout(15, 0.5)
    ((2, 32), (3, 31), (1, 15))
    """
    epochs = max(1, min(num_train_steps, math.ceil(num_train_epochs)))
    return epochs, math.ceil(num_train_steps / epochs)


def data_sha256(data):
    """SHA-256 of the arrays in `data` (nested dicts, tuples and lists of
    arrays), names and shapes included: it changes with any input or label.

    Example:
    >>> import numpy as np
    >>> data_sha256({"ids": np.array([1, 2])}) == data_sha256({"ids": np.array([1, 3])})
    False
    """
    import numpy as np

    digest = hashlib.sha256()

    def add(value, name):
        if isinstance(value, dict):
            for key in sorted(value):
                add(value[key], f"{name}/{key}")
        elif isinstance(value, (list, tuple)) and not np.isscalar(value):
            for index, item in enumerate(value):
                add(item, f"{name}/{index}")
        else:
            array = np.ascontiguousarray(value)
            digest.update(f"{name}:{array.dtype.str}:{array.shape};".encode())
            digest.update(array.tobytes())

    add(data, "")
    return digest.hexdigest()


def run_settings(settings, num_train_steps, num_warmup_steps, num_examples, max_seq_length, train_data=None,
                 task_settings=None):
    """What decides a fine-tuning run's course, as `fit_for_steps` records it.

    Not the strategy, checkpoint frequency or `real_tokens_only`: they leave
    the trained weights as they are. `train_data` (the encoded training
    inputs and labels) is recorded as its `data_sha256`: windows, casing,
    truncation and label order all change it. `task_settings` (a
    distillation's depth, temperature and loss weights) are added as given.

    Example:
    >>> sorted(run_settings(FineTuningSettings(), 93, 9, 1000, 128))[:4]
    ['learning_rate', 'max_seq_length', 'num_train_epochs', 'num_train_examples']
    """
    return {
        "learning_rate": settings.learning_rate,
        "train_batch_size": settings.train_batch_size,
        "num_train_epochs": settings.num_train_epochs,
        "warmup_proportion": settings.warmup_proportion,
        "seed": settings.seed,
        "num_train_steps": num_train_steps,
        "num_warmup_steps": num_warmup_steps,
        "num_train_examples": num_examples,
        "max_seq_length": max_seq_length,
        **({"train_data_sha256": data_sha256(train_data)} if train_data is not None else {}),
        **(task_settings or {}),
    }


def build_optimizer_before_tracing(model):
    """Creates `model`'s compiled optimizer's variables (its slots) now, before `fit` traces its train step.

    Keras creates them beforehand only under a distribution strategy;
    otherwise while tracing the first step, each variable lifted out of the
    graph being traced (as `BertConfigModel.fit` avoids for the task
    models): for the distillation trainers (plain Keras models around the
    student), ~1 s of CPU a run for the tiny models of the tests. The
    variables, their order and the training are the same (those a resumed
    run restores are built so too). Nothing happens under a strategy, or
    while a layer of `model` is unbuilt (its variables are not all there).

    Args:
        model: A compiled Keras model.
    """
    import tensorflow as tf

    optimizer = getattr(model, "optimizer", None)
    if (optimizer is None or optimizer.built or tf.distribute.has_strategy()
            or getattr(model, "_distribute_strategy", None) is not None):
        return
    if all(layer.built for layer in model._flatten_layers(include_self=False)):
        optimizer.build(model.trainable_variables)


def fit_for_steps(model, dataset, num_train_steps, num_train_epochs, output_dir,
                  save_checkpoints_steps=1000, log=print, settings=None, allow_changed_settings=False):
    """`model.fit` on a repeating `dataset` until `num_train_steps` optimizer steps.

    Training checkpoints (`model.ckpt-<step>`) and TensorBoard summaries go
    to `output_dir`. A rerun continues from the newest checkpoint there
    (weights, Adam slots, step) and from the same place in the seeded data,
    so an interrupted run ends where the uninterrupted one would.

    Args:
        model: A compiled Keras model.
        dataset: Repeating `tf.data.Dataset` of batches, one per step.
        num_train_steps: Optimizer steps in all.
        num_train_epochs: Passes over the data they make (sets the epochs
            shown, `epoch_layout`).
        output_dir: Checkpoints and summaries.
        save_checkpoints_steps: Steps between training checkpoints.
        log: `log(message)` for progress lines.
        settings: `run_settings(...)` of this run, recorded in `output_dir`;
            resuming checkpoints trained with other ones raises
            `ChangedSettingsError` unless `allow_changed_settings`.
        allow_changed_settings: Resume with changed settings on purpose.

    Returns:
        The global step reached.
    """
    from keras_bert_impl.training.checkpointing import checkpoint_steps, save_training_checkpoint
    from keras_bert_impl.training.resume import resume_training, step_callbacks

    step, prefix = resume_training(model, model.optimizer, output_dir, settings, allow_changed_settings, log=log)
    if prefix:
        log(f"resuming from {prefix} (step {step} of {num_train_steps})")
    if step >= num_train_steps:
        return step
    epochs, steps_per_epoch = epoch_layout(num_train_steps, num_train_epochs)
    build_optimizer_before_tracing(model)
    model.fit(
        dataset.skip(step),  # The batches the restored steps consumed.
        initial_epoch=step // steps_per_epoch,
        epochs=epochs,
        steps_per_epoch=steps_per_epoch,
        shuffle=False,  # The dataset is shuffled with the seed; Keras would only warn.
        # A progress bar on a terminal, one line per epoch in a log file.
        verbose=1 if sys.stdout.isatty() else 2,
        callbacks=step_callbacks(
            num_train_steps, output_dir, save_checkpoints_steps, output_dir,
            summary_steps=max(1, min(100, save_checkpoints_steps, num_train_steps // 20)),
        ),
    )
    step = int(model.optimizer.iterations.numpy())
    if step not in checkpoint_steps(output_dir):
        # The last step is saved too, so a rerun of a finished run returns at
        # once (as the original's Estimator) instead of training again.
        save_training_checkpoint(model, model.optimizer, output_dir)
    return step


def training_dataset(data, settings, cut_padding=True, reshuffle_each_iteration=True):
    """The endless batches `fine_tune` trains on.

    Shuffled with `settings.seed` (the whole set anew on every pass, or the
    repeated data through `data.shuffle_buffer`), repeated, in batches of
    exactly `train_batch_size`, each cut after its longest row where
    `cut_padding` and the settings allow (`on_real_tokens`).

    Args:
        data: `TrainingData`.
        settings: `FineTuningSettings`.
        cut_padding: Whether the task allows cutting the padding.
        reshuffle_each_iteration: False gives every iterator the same order
            (a benchmark that restarts iterators); training reshuffles.

    Returns:
        A prefetching `tf.data.Dataset` of `data.elements()` batches.
    """
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices(data.elements())
    if data.shuffle_buffer is None:
        dataset = dataset.shuffle(data.num_rows, seed=settings.seed,
                                  reshuffle_each_iteration=reshuffle_each_iteration).repeat()
    else:
        dataset = dataset.repeat().shuffle(data.shuffle_buffer, seed=settings.seed,
                                           reshuffle_each_iteration=reshuffle_each_iteration)
    dataset = dataset.batch(settings.train_batch_size, drop_remainder=True)
    if cut_padding:
        dataset = on_real_tokens(dataset, settings, data.max_seq_length)
    return without_autotune_thread(dataset.prefetch(tf.data.AUTOTUNE))


def fine_tune(model, data, compile_options, settings, output_dir, cut_padding=True, log=print, task_settings=None):
    """Trains `model` on `data` as the original scripts do; returns the global step.

    The original optimizer (AdamW, warmup, linear decay) over
    `training_steps(...)` steps; the data shuffled with `settings.seed`,
    repeated, in batches of exactly `train_batch_size`, each cut after its
    longest row where `cut_padding` (and the settings) allow; then
    `fit_for_steps`, which resumes and refuses changed settings.

    Args:
        model: The task model, built in its strategy.
        data: `TrainingData`.
        compile_options: `() -> dict` of `model.compile` arguments besides
            the optimizer (loss, metrics...); called in the strategy's scope.
        settings: `FineTuningSettings`.
        output_dir: Checkpoints, summaries and the recorded settings.
        cut_padding: Whether the task's loss allows cutting the padding
            (not SQuAD's, a softmax over every position).
        log: `log(message)`.
        task_settings: The task's own settings recorded with the run's
            (`FineTuningSpec.run_settings`).

    Raises:
        InputFileError: the data make 0 training steps.
    """
    from keras_bert_impl.training.optimization import create_optimizer

    batch_size = settings.train_batch_size
    num_train_steps, num_warmup_steps = training_steps(
        data.num_examples, batch_size, settings.num_train_epochs, settings.warmup_proportion
    )
    if num_train_steps < 1:
        raise InputFileError(
            f"{data.source}: {data.num_examples} {data.unit} with --train_batch_size={batch_size} "
            f"and --num_train_epochs={settings.num_train_epochs} make 0 training steps"
        )
    log(f"training on {data.description}: {num_train_steps} steps of {batch_size} ({num_warmup_steps} warmup)")
    with model.distribute_strategy.scope():
        model.compile(
            optimizer=create_optimizer(settings.learning_rate, num_train_steps, num_warmup_steps), **compile_options()
        )
    fingerprint = data.fingerprint if data.fingerprint is not None else (data.inputs, data.targets)
    return fit_for_steps(
        model, training_dataset(data, settings, cut_padding), num_train_steps, settings.num_train_epochs, output_dir,
        settings.save_checkpoints_steps, log,
        settings=run_settings(settings, num_train_steps, num_warmup_steps, data.num_examples, data.max_seq_length,
                              train_data=fingerprint, task_settings=task_settings),
        allow_changed_settings=settings.allow_changed_settings,
    )


def load_fine_tuned(model, output_dir, init_checkpoint, head, task, log=print):
    """Weights for prediction without training; returns their global step.

    They come from `output_dir/model.ckpt` when it exists (as the original's
    Estimator restores its model_dir), else from `init_checkpoint`, which
    must then hold the `head` variables.

    Args:
        model: The task model.
        output_dir: Where a fine-tuning run wrote its release.
        init_checkpoint: The fallback checkpoint prefix or `.keras` file.
        head: Original names of the head's variables.
        task: What the head is for, in messages ("SQuAD").
        log: `log(message)`.

    Raises:
        CheckpointError: neither holds a fine-tuned head.
    """
    from keras_bert_impl.checkpoints.original import list_original_variables, load_original_checkpoint, open_checkpoint

    prefix = filesystem.join(output_dir, FINE_TUNED_CHECKPOINT)
    if not filesystem.exists(prefix + ".index"):
        prefix = init_checkpoint
    if not prefix:
        raise CheckpointError(
            f"--init_checkpoint is not set and {output_dir} holds no {FINE_TUNED_CHECKPOINT}: "
            "no fine-tuned weights (add --do_train to fine-tune first)"
        )
    names = list_original_variables(prefix)
    if not all(name in names for name in head):
        raise CheckpointError(
            f"{prefix}: has no {' or '.join(head)}, so it is not fine-tuned for {task} "
            "(add --do_train to fine-tune it)"
        )
    log(f"using the weights of {prefix}")
    load_original_checkpoint(model, prefix)
    return int(open_checkpoint(prefix)[1].get_tensor("global_step")) if "global_step" in names else 0


def load_initial_weights(model, init_checkpoint, head, log=print):
    """Loads a release into `model` before fine-tuning; the head may be fresh.

    Args:
        model: The task model.
        init_checkpoint: A checkpoint prefix or `.keras` model file; None
            leaves the initial weights.
        head: Original names of the head's variables (allowed to be missing).
        log: `log(message)`; gets what was loaded, missing and unexpected.
    """
    from keras_bert_impl.checkpoints.original import load_original_checkpoint

    if init_checkpoint:
        report = load_original_checkpoint(model, init_checkpoint, allow_fresh=head)
        log(f"{init_checkpoint}: {report.summary()}")


def recorded_labels(output_dir, init_checkpoint=None, training=False):
    """`(labels, path)`: the label list of the fine-tuned weights a run will use, or `(None, None)`.

    They are `output_dir`'s when it holds a label list or fine-tuned weights
    (or the run trains there), else, for a run that does not train,
    `init_checkpoint`'s directory's.
    """
    from keras_bert_impl.io import read_utf8_lines

    for directory in _fine_tuned_directories(output_dir, init_checkpoint, training):
        path = filesystem.join(directory, LABEL_LIST_FILE)
        if directory and filesystem.exists(path):
            return [line.strip() for _, line in read_utf8_lines(path, kind="label list") if line.strip()], path
    return None, None


def _fine_tuned_directories(output_dir, init_checkpoint, training):
    """Where the fine-tuned weights a run will use, and what is recorded beside them, may be: in order."""
    directories = [output_dir]
    if not training and not filesystem.exists(filesystem.join(output_dir, FINE_TUNED_CHECKPOINT + ".index")):
        directories.append(filesystem.dirname(init_checkpoint or ""))
    return directories


def recorded_long_text(output_dir, init_checkpoint=None, training=False):
    """The `LongTextOptions` recorded beside the fine-tuned weights a run will use (as `recorded_labels`
    finds them), or None where the release has none (it cut long texts) or the run trains.

    Raises:
        CheckpointError: a `long_text.json` that is not long-text options, naming it.
    """
    from keras_bert_impl.checkpoints.release import LONG_TEXT_FILE, read_release_long_text

    if training:
        return None
    for directory in _fine_tuned_directories(output_dir, init_checkpoint, training):
        if directory and (filesystem.exists(filesystem.join(directory, LONG_TEXT_FILE))
                          or filesystem.exists(filesystem.join(directory, LABEL_LIST_FILE))):
            return read_release_long_text(directory)  # The release whose labels are read: its reading too.
    return None


def recorded_multi_label(output_dir, init_checkpoint=None, training=False):
    """`(record, directory)`: the `checkpoints.release.MultiLabelRecord` recorded beside the fine-tuned
    weights a run will use (as `recorded_labels` finds them), or `(None, None)` where that release is not
    multi-label or the run trains.

    Raises:
        CheckpointError: a `multi_label.json` that is not a record, naming it.
    """
    from keras_bert_impl.checkpoints.release import MULTI_LABEL_FILE, read_release_multi_label

    if training:
        return None, None
    for directory in _fine_tuned_directories(output_dir, init_checkpoint, training):
        if directory and (filesystem.exists(filesystem.join(directory, MULTI_LABEL_FILE))
                          or filesystem.exists(filesystem.join(directory, LABEL_LIST_FILE))):
            record = read_release_multi_label(directory)  # The release whose labels are read: its record too.
            return (record, directory) if record is not None else (None, None)
    return None, None


def check_labels(labels, recorded, path, flag="--labels"):
    """Refuses a label list other than the one the weights were trained with.

    The order is the class ids: another order (a list inferred from another
    train file, say) would swap the classes silently.

    Raises:
        InputFileError: naming the label list file and both lists.
    """
    if recorded is not None and labels is not None and list(labels) != list(recorded):
        raise InputFileError(
            f"{path}: the weights were trained with the labels {','.join(recorded)} (in class-id order), "
            f"this run's are {','.join(labels)}; pass {flag}={','.join(recorded)}, or use another --output_dir"
        )


def write_label_list(output_dir, labels):
    """Writes `labels`, one per line in class-id order, as `output_dir/label_list.txt`.

    `labels` None (a release without classes) removes the one an earlier
    release left there, so that it never names another model's classes.
    """
    if labels is None:
        filesystem.remove(filesystem.join(output_dir, LABEL_LIST_FILE), missing_ok=True)
    else:
        write_release_labels(output_dir, labels)


def tokenizer_files_to_copy(vocab_file):
    """`[(source, name in a release)]`: the tokenizer files a release of `vocab_file` holds.

    A WordPiece vocabulary is copied as `vocab.txt`; a variant's files
    (`vocab.json` + `merges.txt`, or `spiece.model`, with the
    `checkpoints.release.TOKENIZER_EXTRAS` beside them) keep their names.

    Example:
    >>> tokenizer_files_to_copy("uncased/my_vocab.txt")
    [('uncased/my_vocab.txt', 'vocab.txt')]
    """
    from keras_bert_impl.checkpoints.release import TOKENIZER_EXTRAS
    from keras_bert_impl.tokenization.from_files import KIND_FILES, WORDPIECE, vocab_file_kind

    kind = vocab_file_kind(vocab_file)
    if kind == WORDPIECE:
        return [(vocab_file, "vocab.txt")]
    directory = filesystem.dirname(vocab_file) or "."
    names = dict(KIND_FILES)[kind] + tuple(name for name in TOKENIZER_EXTRAS
                                           if filesystem.exists(filesystem.join(directory, name)))
    return [(filesystem.join(directory, name), name) for name in names]


def save_release(model, output_dir, bert_config_file, vocab_file, global_step=None, log=print):
    """Writes `output_dir/model.ckpt` with copies of the config and vocab: a release.

    The config file is copied as it is, unless the model's configuration
    differs from it (a distilled student's depth): then the model's is written.

    Returns:
        The checkpoint prefix written.
    """
    from keras_bert_impl.checkpoints.original import save_original_checkpoint
    from keras_bert_impl.checkpoints.release import begin_release
    from keras_bert_impl.config import BertConfig

    with filesystem.open_file(bert_config_file) as f:
        config_text = f.read()  # Read first: it may be the very file begin_release removes.
    if BertConfig.from_json_file(bert_config_file) != model.bert_config:
        config_text = model.bert_config.to_json_string()
    begin_release(output_dir)
    prefix = save_original_checkpoint(
        model, filesystem.join(output_dir, FINE_TUNED_CHECKPOINT), global_step=global_step
    )
    for source, name in tokenizer_files_to_copy(vocab_file):
        copy_atomically(source, filesystem.join(output_dir, name))
    write_text_atomically(filesystem.join(output_dir, "bert_config.json"), config_text)  # Last: see begin_release.
    log(f"wrote {prefix} (global_step {global_step})")
    return prefix
