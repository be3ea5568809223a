"""Sequence (pair) classification and regression: the original `run_classifier`.

The two task specs (`classifier`, `regression`), their serving outputs, and
`run_classifier`, the job behind `tools/run_classifier.py`: read a release
and a task's data, fine-tune with the original optimizer, evaluate, predict,
and write the original's result files.

Example:
>>> CLASSIFIER.head_variables
('output_weights', 'output_bias')
>>> print(format_eval_results({"eval_accuracy": 0.75, "global_step": 3}), end="")
eval_accuracy = 0.75
global_step = 3
"""

import dataclasses

from keras_bert_impl import filesystem
from keras_bert_impl.checkpoints.name_map import CLASSIFIER_VARIABLES
from keras_bert_impl.errors import InputFileError
from keras_bert_impl.io import format_results, write_text_atomically
from keras_bert_impl.tasks.spec import TaskSpec
from keras_bert_impl.training.fine_tuning import (
    FineTuningSettings,
    build_in_strategy,
    check_labels,
    compute_on_real_tokens,
    fit_for_steps,
    load_fine_tuned,
    load_initial_weights,
    on_real_tokens,
    predict_batches,
    read_release,
    recorded_labels,
    run_settings,
    save_release,
    training_steps,
    write_label_list,
)

SEQUENCE_INPUTS = ("input_ids", "input_mask", "segment_ids")


def _build_classifier(config, num_labels, dtype=None):
    from keras_bert_impl.models.classifier import BertClassifier

    return BertClassifier(config, num_labels=num_labels, dtype=dtype)


def classifier_serving_outputs(serving, inputs, padded_length):
    """`probabilities` [batch, num_labels], `label_ids` and `labels` [batch]."""
    import tensorflow as tf

    logits = serving.forward(inputs)
    probabilities = tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1)
    label_ids = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
    return {
        "probabilities": probabilities,
        "label_ids": label_ids,
        "labels": serving.labels_table.lookup(tf.cast(label_ids, tf.int64)),
    }


def regression_serving_outputs(serving, inputs, padded_length):
    """`predictions` [batch]: the regression score."""
    import tensorflow as tf

    return {"predictions": tf.cast(serving.forward(inputs), tf.float32)[:, 0]}


CLASSIFIER = TaskSpec(
    name="classifier",
    description="Sentence (pair) classification: class probabilities from the pooled output.",
    build_model=_build_classifier,
    head_variables=tuple(CLASSIFIER_VARIABLES),
    serving_outputs=classifier_serving_outputs,
    uses_labels=True,
)
REGRESSION = TaskSpec(
    name="regression",
    description="Sentence (pair) regression (STS-B): one score from the pooled output.",
    build_model=lambda config, num_labels=1, dtype=None: _build_classifier(config, 1, dtype),
    head_variables=tuple(CLASSIFIER_VARIABLES),
    serving_outputs=regression_serving_outputs,
)


def encode(examples, tokenizer, max_seq_length):
    """`{input_ids, input_mask, segment_ids}` int32 arrays [num_examples, max_seq_length]."""
    import numpy as np

    from keras_bert_impl.data.text_pairs import convert_example_to_features

    features = [convert_example_to_features(e, tokenizer, max_seq_length) for e in examples]
    return {
        key: np.array([getattr(f, key) for f in features], np.int32).reshape(len(features), max_seq_length)
        for key in SEQUENCE_INPUTS
    }


def evaluation_results(task, labels, logits, batch_size, global_step):
    """The original's eval metrics, from the dev logits (pure NumPy).

    Args:
        task: The data task (regression or not, extra metrics).
        labels: Class ids [n], or regression targets [n].
        logits: Model outputs [n, num_labels] ([n, 1] for regression).
        batch_size: The eval batch size; `loss` is the mean of per-batch mean
            losses (the Estimator's `loss`), `eval_loss` the per-example mean.
        global_step: Training steps of the evaluated weights.

    Returns:
        `{name: value}`.
    """
    import numpy as np

    from keras_bert_impl.data.classifier_data import accuracy, task_metrics
    from keras_bert_impl.probabilities import per_example_cross_entropy

    logits = np.asarray(logits, np.float64)
    if task.is_regression:
        predictions = logits[:, 0]
        per_example_loss = (predictions - labels) ** 2
    else:
        per_example_loss = per_example_cross_entropy(logits, labels)
        predictions = logits.argmax(axis=-1)
    batch_losses = [per_example_loss[i : i + batch_size].mean() for i in range(0, len(labels), batch_size)]
    result = {
        "eval_loss": float(per_example_loss.mean()),
        "global_step": int(global_step),
        "loss": float(np.mean(batch_losses)),
    }
    if not task.is_regression:
        result["eval_accuracy"] = accuracy(labels, predictions)
    result.update(task_metrics(task, labels, predictions))
    return result


def _as_float32_text(value):
    import numpy as np

    return value if isinstance(value, int) else str(np.float32(value))


def format_eval_results(result):
    """`key = value` lines sorted by key; floats printed as the original's float32."""
    return format_results(result, _as_float32_text)


def format_test_results(task, logits):
    """One line per example: tab-separated class probabilities (the score for regression)."""
    import numpy as np

    from keras_bert_impl.probabilities import softmax

    logits = np.asarray(logits, np.float64)
    if task.is_regression:
        return "".join(str(np.float32(value)) + "\n" for value in logits[:, 0])
    probabilities = softmax(logits).astype(np.float32)
    return "".join("\t".join(str(p) for p in row) + "\n" for row in probabilities)


def read_task_data(task, data_dir, do_train, do_eval, do_predict, recorded=(None, None)):
    """`(task, {split: examples})` for the splits the run needs.

    A TFDS task takes its label list from the dataset's `ClassLabel`; a
    column task (or TFDS task) without labels gets the label list the
    weights were trained with (`recorded`: `(labels, path)` of their
    `label_list.txt`), else its train split's, which is then read even for
    an eval/predict-only run. A label list other than the recorded one is
    refused: it would swap the classes.
    """
    from keras_bert_impl.data.classifier_data import read_examples, with_dataset_labels, with_labels

    task = with_dataset_labels(task, data_dir)
    recorded_list, recorded_path = recorded
    if task.labels is None and not task.is_regression and recorded_list is not None and not do_train:
        task = dataclasses.replace(task, labels=tuple(recorded_list))
    data = {}
    if do_train or (task.labels is None and not task.is_regression):
        data["train"] = read_examples(task, data_dir, "train")
        task = with_labels(task, data["train"])
    if not task.is_regression:
        check_labels(task.labels, recorded_list, recorded_path)
    for split, wanted in (("dev", do_eval), ("test", do_predict)):
        if wanted:
            data[split] = read_examples(task, data_dir, split)
    for split, examples in data.items():
        if not examples:
            raise InputFileError(f"{data_dir}: the {split} split of task {task.name} has no examples")
    return task, data


def compile_for_fine_tuning(model, is_regression, learning_rate, num_train_steps, num_warmup_steps):
    """The original optimizer, with the loss and metrics of a classifier or regression."""
    import keras

    from keras_bert_impl.training.optimization import create_optimizer

    if is_regression:
        loss, metrics = keras.losses.MeanSquaredError(), []
    else:
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        metrics = [keras.metrics.SparseCategoricalAccuracy("accuracy")]
    model.compile(
        optimizer=create_optimizer(learning_rate, num_train_steps, num_warmup_steps), loss=loss, metrics=metrics
    )


def fine_tune(model, task, features, labels, settings, output_dir, data_dir, log):
    """`model.fit` with the original optimizer and step count; returns the global step."""
    import tensorflow as tf

    num_examples = len(labels)
    batch_size = settings.train_batch_size
    num_train_steps, num_warmup_steps = training_steps(
        num_examples, batch_size, settings.num_train_epochs, settings.warmup_proportion
    )
    if num_train_steps < 1:
        raise InputFileError(
            f"{data_dir}: {num_examples} training examples with --train_batch_size="
            f"{batch_size} and --num_train_epochs={settings.num_train_epochs} make 0 training steps"
        )
    log(f"training on {num_examples} examples: {num_train_steps} steps of {batch_size} "
        f"({num_warmup_steps} warmup)")
    with model.distribute_strategy.scope():
        compile_for_fine_tuning(model, task.is_regression, settings.learning_rate, num_train_steps, num_warmup_steps)
    targets = labels.reshape(-1, 1) if task.is_regression else labels
    # As the original: shuffled, repeated, batches of exactly train_batch_size,
    # stopped at num_train_steps (with a whole-set shuffle buffer, not 100).
    dataset = (
        tf.data.Dataset.from_tensor_slices((features, targets))
        .shuffle(num_examples, seed=settings.seed, reshuffle_each_iteration=True)
        .repeat()
        .batch(batch_size, drop_remainder=True)
    )
    dataset = on_real_tokens(dataset, settings, features["input_mask"].shape[1]).prefetch(tf.data.AUTOTUNE)
    return fit_for_steps(
        model, dataset, num_train_steps, settings.num_train_epochs, output_dir, settings.save_checkpoints_steps, log,
        settings=run_settings(
            settings, num_train_steps, num_warmup_steps, num_examples, features["input_mask"].shape[1],
            train_data=(features, targets),
        ),
        allow_changed_settings=settings.allow_changed_settings,
    )


def run_classifier(
    task, data_dir, output_dir, bert_config_file, vocab_file, init_checkpoint=None, do_lower_case=True,
    max_seq_length=128, do_train=False, do_eval=False, do_predict=False, eval_batch_size=8,
    predict_batch_size=8, settings=FineTuningSettings(), log=print,
):
    """The original `run_classifier.py` as one call.

    Writes to `output_dir`: `eval_results.txt` (with `do_eval`),
    `test_results.tsv` (with `do_predict`), and after training
    `model.ckpt` with copies of the config and vocab (a release),
    `model.ckpt-<step>` training checkpoints and TensorBoard logs.

    Args:
        task: A data task from `data.classifier_data.get_task`.
        data_dir: The task's data directory (the TFDS data directory for a
            TFDS task).
        output_dir: Where everything is written.
        bert_config_file, vocab_file, init_checkpoint, do_lower_case: The release.
        max_seq_length: Padded length after WordPiece.
        do_train, do_eval, do_predict: What to run.
        eval_batch_size, predict_batch_size: Batch sizes of those steps.
        settings: `FineTuningSettings`.
        log: `log(message)` for progress.

    Returns:
        The evaluation results (`{}` without `do_eval`).
    """
    from keras_bert_impl.data.classifier_data import label_ids

    # Everything about the input is checked before TensorFlow starts.
    release = read_release(bert_config_file, vocab_file, do_lower_case, init_checkpoint, max_seq_length)
    task, data = read_task_data(task, data_dir, do_train, do_eval, do_predict,
                                recorded_labels(output_dir, init_checkpoint, training=do_train))

    batch_sizes = {
        flag: size for flag, size, used in (
            ("train_batch_size", settings.train_batch_size, do_train),
            ("eval_batch_size", eval_batch_size, do_eval),
            ("predict_batch_size", predict_batch_size, do_predict),
        ) if used
    }
    spec = REGRESSION if task.is_regression else CLASSIFIER
    num_labels = 1 if task.is_regression else len(task.labels)
    filesystem.makedirs(output_dir)
    model, _ = build_in_strategy(
        lambda: spec.build_model(release.config, num_labels), settings.strategy, settings.tpu_name,
        settings.seed, batch_sizes,
    )
    compute_on_real_tokens(model, settings)
    if do_train:
        load_initial_weights(model, init_checkpoint, spec.head_variables, log)
        features = encode(data["train"], release.tokenizer, max_seq_length)
        global_step = fine_tune(
            model, task, features, label_ids(task, data["train"]), settings, output_dir, data_dir, log
        )
        if not task.is_regression:  # Before the release: what its class ids mean.
            write_label_list(output_dir, task.labels)
        save_release(model, output_dir, bert_config_file, vocab_file, global_step, log)
    else:
        global_step = load_fine_tuned(model, output_dir, init_checkpoint, spec.head_variables, "classification", log)

    result = {}
    if do_eval:
        examples = data["dev"]
        logits = predict_batches(model, encode(examples, release.tokenizer, max_seq_length), eval_batch_size,
                                 settings, log)
        result = evaluation_results(task, label_ids(task, examples), logits, eval_batch_size, global_step)
        text = format_eval_results(result)
        write_text_atomically(filesystem.join(output_dir, "eval_results.txt"), text)
        log(f"eval on {len(examples)} examples:\n{text.rstrip()}")
    if do_predict:
        examples = data["test"]
        logits = predict_batches(model, encode(examples, release.tokenizer, max_seq_length), predict_batch_size,
                                 settings, log)
        path = filesystem.join(output_dir, "test_results.tsv")
        write_text_atomically(path, format_test_results(task, logits))
        log(f"wrote predictions for {len(examples)} examples to {path}")
    return result
