"""Multi-label classification: a sigmoid per label on the classifier's head, binary cross-entropy.

The model is `BertClassifier` as it is (`output_weights` [num_labels, H]
on the pooled output); what differs is the loss (each label's sigmoid
cross-entropy, averaged: transformers' `problem_type=
"multi_label_classification"`), the outputs (a probability per label, the
labels at or over a threshold, default 0.5, or one per label tuned on the
dev set: `data.multi_label.tune_thresholds`) and the scores (micro/macro F1,
per-label precision/recall/F1). `MultiLabelFineTuning` is
`bert-run-classifier --multi_label`; the release records the labels and
thresholds as `multi_label.json` (`checkpoints.release.MultiLabelRecord`).

Example:
>>> MULTI_LABEL.head_variables
('output_weights', 'output_bias')
>>> sorted(multi_label_evaluation([[1, 0]], [[2.0, -1.0]], ("a", "b"), 0.5, 7))[:3]
['a_f1', 'a_precision', 'a_recall']
"""

import dataclasses

from keras_bert_impl import filesystem
from keras_bert_impl.checkpoints.name_map import CLASSIFIER_VARIABLES
from keras_bert_impl.errors import InputFileError
from keras_bert_impl.io import write_text_atomically
from keras_bert_impl.tasks.classifier import ClassifierFineTuning, _build_classifier, encode, format_eval_results
from keras_bert_impl.tasks.spec import EXPORTED_TASKS, FineTuningSpec, TaskInputs, TaskSpec
from keras_bert_impl.training.fine_tuning import TrainingData, check_labels, predict_batches, recorded_labels

def multi_label_serving_outputs(serving, inputs, padded_length):
    """`probabilities` [batch, num_labels] (a sigmoid each) and `label_mask` [batch, num_labels]: the
    labels at or over the export's `threshold` (`serving.export.ExportOptions.threshold`), else the
    model's (a `TextClassifier`'s; 0.5 for a model without one)."""
    import tensorflow as tf

    probabilities = tf.sigmoid(tf.cast(serving.forward(inputs), tf.float32))
    threshold = getattr(serving, "threshold", None)
    threshold = tf.constant(getattr(serving.model, "threshold", 0.5) if threshold is None else threshold, tf.float32)
    return {"probabilities": probabilities, "label_mask": probabilities >= threshold}


MULTI_LABEL = TaskSpec(
    name="multi_label",
    description=EXPORTED_TASKS["multi_label"],
    build_model=_build_classifier,
    head_variables=tuple(CLASSIFIER_VARIABLES),
    serving_outputs=multi_label_serving_outputs,
    uses_labels=True,
    long_texts=True,
)


def sigmoid(logits):
    """The probability of each label, float64, stable for large logits."""
    import numpy as np

    logits = np.asarray(logits, np.float64)
    return np.exp(-np.logaddexp(0.0, -logits))


def check_multi_hot(targets, num_labels, name="y"):
    """Refuses multi-label targets that are not 0/1 rows of `num_labels`.

    Raises:
        ValueError: naming the first bad row.

    Example:
    >>> import numpy as np
    >>> check_multi_hot(np.array([[1, 0], [0, 2]]), 2)
    Traceback (most recent call last):
    ...
    ValueError: y 1 is [0 2]: multi-label targets are 0/1 rows of the 2 labels
    """
    import numpy as np

    targets = np.asarray(targets)
    if targets.ndim != 2 or targets.shape[1] != num_labels:
        raise ValueError(f"{name} has shape {targets.shape}: multi-label targets are 0/1 rows of the {num_labels} "
                         "labels, [num_texts, num_labels]")
    bad = np.flatnonzero(~np.isin(targets, (0, 1)).all(axis=1))
    if bad.size:
        raise ValueError(f"{name} {bad[0]} is {targets[bad[0]]}: multi-label targets are 0/1 rows of the "
                         f"{num_labels} labels")


def multi_label_compile_options():
    """`model.compile` arguments besides the optimizer: mean binary cross-entropy on the logits,
    and per-label accuracy at probability 0.5 (logit 0)."""
    import keras

    return {
        "loss": keras.losses.BinaryCrossentropy(from_logits=True),
        "metrics": [keras.metrics.BinaryAccuracy("accuracy", threshold=0.0)],
    }


def multi_label_evaluation(targets, logits, labels, threshold, global_step):
    """The scores of `data.multi_label.multi_label_scores` at `threshold`, with `eval_loss` and `global_step`.

    Args:
        targets: 0/1 [n, num_labels].
        logits: The model's logits [n, num_labels].
        labels: The label names.
        threshold: Probability at or over which a label is predicted: one
            number, or one per label (written as `<label>_threshold`).
        global_step: Training steps of the evaluated weights.
    """
    from keras_bert_impl.data.multi_label import multi_label_scores, per_example_binary_cross_entropy

    from keras_bert_impl.data.multi_label import per_label_thresholds

    thresholds = per_label_thresholds(threshold, len(labels))
    predictions = sigmoid(logits) >= thresholds
    result = multi_label_scores(targets, predictions, labels)
    result.update({f"{label}_threshold": value for label, value in zip(labels, thresholds)})
    result["eval_loss"] = float(per_example_binary_cross_entropy(logits, targets).mean())
    result["global_step"] = int(global_step)
    return result


def format_label_probabilities(logits):
    """One line per example: each label's probability, tab-separated (float32)."""
    import numpy as np

    return "".join("\t".join(str(p) for p in row) + "\n" for row in sigmoid(logits).astype(np.float32))


@dataclasses.dataclass(frozen=True)
class MultiLabelFineTuning(FineTuningSpec):
    """Fine-tuning a multi-label classifier on column files (`bert-run-classifier --multi_label`).

    Writes `eval_results.txt` (micro/macro F1, per-label scores at
    the thresholds, each `<label>_threshold`, `eval_loss`, `global_step`)
    with `do_eval`, and `test_results.tsv` (each label's probability per
    line) with `do_predict`. The label list goes beside the fine-tuned
    release as `label_list.txt`, with the thresholds as `multi_label.json`.

    Args:
        dataset: A `data.multi_label.MultiLabelDataset`.
        data_dir: Its directory.
        threshold: The decision threshold on each label's probability (one
            number, or one per label); None: what the fine-tuned release
            records (`multi_label.json`) where the run does not train, else 0.5.
        tune_threshold: Choose each label's threshold for its F1 on the
            dev set (`data.multi_label.tune_thresholds`) and score at them;
            they go into `eval_results.txt` and, where `output_dir` holds
            the fine-tuned release, its `multi_label.json`. The dev scores
            are then those of thresholds fit to the dev set itself:
            optimistic, a held-out set says how they carry over.

    Example:
    >>> from keras_bert_impl.data.multi_label import MultiLabelDataset
    >>> MultiLabelFineTuning(MultiLabelDataset("csv"), "tags").head_description
    'multi-label classification'
    """

    dataset: object
    data_dir: str
    threshold: object = None
    tune_threshold: bool = False
    name = "classifier"
    head_description = "multi-label classification"
    variant_tokenizers = True

    def read_inputs(self, release, run, log):
        from keras_bert_impl.data.multi_label import with_labels

        dataset = self.dataset
        recorded, recorded_path = recorded_labels(run.output_dir, run.init_checkpoint, training=run.do_train)
        if dataset.labels is None and recorded is not None and not run.do_train:
            dataset = dataclasses.replace(dataset, labels=tuple(recorded))
        splits = {}
        if run.do_train or dataset.labels is None:
            splits["train"] = dataset.read_examples(self.data_dir, "train")
            dataset = with_labels(dataset, splits["train"], filesystem.join(self.data_dir, f"train.{dataset.name}"))
        check_labels(dataset.labels, recorded, recorded_path)
        for split, wanted in (("dev", run.do_eval), ("test", run.do_predict)):
            if wanted:
                splits[split] = dataset.read_examples(self.data_dir, split)
        for split, examples in splits.items():
            if not examples:
                raise InputFileError(f"{self.data_dir}: the {split} split has no examples")
        return TaskInputs(MULTI_LABEL, splits, num_labels=len(dataset.labels), labels=tuple(dataset.labels),
                          extra=dataset)

    # The release's encoder, a fresh head (and a fresh pooler for a variant without one), as the classifier's.
    initialise = ClassifierFineTuning.initialise

    def training_data(self, inputs, release, run, log):
        from keras_bert_impl.data.multi_label import multi_hot

        examples = inputs.splits["train"]
        return TrainingData(
            inputs=encode(examples, release.tokenizer, run.max_seq_length),
            targets=multi_hot(examples, inputs.labels),
            num_examples=len(examples), unit="training examples",
            description=f"{len(examples)} examples, {len(inputs.labels)} labels", source=self.data_dir,
        )

    def compile_options(self, inputs):
        return multi_label_compile_options()

    def thresholds(self, inputs, run):
        """One threshold per label: `threshold`, else the fine-tuned release's (where the run does not
        train), else 0.5."""
        from keras_bert_impl.data.multi_label import per_label_thresholds
        from keras_bert_impl.training.fine_tuning import recorded_multi_label

        threshold = self.threshold
        if threshold is None:
            record, _ = recorded_multi_label(run.output_dir, run.init_checkpoint, training=run.do_train)
            threshold = record.thresholds if record is not None else 0.5
        return per_label_thresholds(threshold, len(inputs.labels))

    def release_files(self, output_dir, inputs, run):
        from keras_bert_impl.checkpoints.release import MultiLabelRecord, write_release_multi_label

        write_release_multi_label(output_dir, MultiLabelRecord(inputs.labels, self.thresholds(inputs, run)))

    def _logits(self, model, examples, release, batch_size, run, log):
        return predict_batches(model, encode(examples, release.tokenizer, run.max_seq_length), batch_size,
                               run.training, log)

    def evaluate(self, model, inputs, release, global_step, run, log):
        from keras_bert_impl.data.multi_label import multi_hot

        examples = inputs.splits["dev"]
        logits = self._logits(model, examples, release, run.eval_batch_size, run, log)
        targets = multi_hot(examples, inputs.labels)
        thresholds = self.thresholds(inputs, run)
        if self.tune_threshold:
            thresholds = self._tuned_thresholds(logits, targets, inputs, run, log)
        result = multi_label_evaluation(targets, logits, inputs.labels, thresholds, global_step)
        text = format_eval_results(result)
        write_text_atomically(filesystem.join(run.output_dir, "eval_results.txt"), text)
        log(f"eval on {len(examples)} examples: micro_f1 {result['micro_f1']:.4f}, macro_f1 {result['macro_f1']:.4f}")
        return result

    def _tuned_thresholds(self, logits, targets, inputs, run, log):
        """Each label's threshold for its F1 on the dev set, recorded in the release of the evaluated weights
        where that release is `output_dir` (trained there, or read from there: not another directory's)."""
        import os

        from keras_bert_impl.checkpoints.release import MULTI_LABEL_FILE, MultiLabelRecord, write_release_multi_label
        from keras_bert_impl.data.multi_label import tune_thresholds
        from keras_bert_impl.training.fine_tuning import FINE_TUNED_CHECKPOINT

        thresholds = tune_thresholds(sigmoid(logits), targets)
        log("thresholds tuned on the dev set: " + ", ".join(f"{label} {value:g}" for label, value
                                                             in zip(inputs.labels, thresholds)))
        trained_here = run.do_train or filesystem.exists(filesystem.join(run.output_dir, FINE_TUNED_CHECKPOINT
                                                                         + ".index"))
        read_from_here = os.path.normpath(filesystem.dirname(run.init_checkpoint or "") or ".") == \
            os.path.normpath(run.output_dir)
        if trained_here or read_from_here:
            write_release_multi_label(run.output_dir, MultiLabelRecord(inputs.labels, thresholds))
            log(f"wrote them to {filesystem.join(run.output_dir, MULTI_LABEL_FILE)}")
        else:
            log(f"the evaluated weights are {run.init_checkpoint}'s, whose release is not --output_dir: the "
                "thresholds are in eval_results.txt only (give --output_dir that release to record them there)")
        return thresholds

    def predict(self, model, inputs, release, global_step, run, log):
        examples = inputs.splits["test"]
        logits = self._logits(model, examples, release, run.predict_batch_size, run, log)
        path = filesystem.join(run.output_dir, "test_results.tsv")
        write_text_atomically(path, format_label_probabilities(logits))
        log(f"wrote label probabilities for {len(examples)} examples to {path}")
        return {}
