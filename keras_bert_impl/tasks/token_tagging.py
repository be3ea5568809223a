"""Token tagging (NER) on CoNLL-2003-format files.

The `token_tagging` task spec, its serving outputs (a label per word piece),
and `TaggingFineTuning`, what `jobs.run_fine_tuning` needs to fine-tune,
evaluate and predict it as `tools/run_ner.py`. A word's label is trained
and predicted on its first word piece; the other pieces are ignored by the
loss. Sentences longer than `max_seq_length` are split into windows at word
boundaries, so every word is predicted.

Example:
>>> TOKEN_TAGGING.head_variables
('output_weights', 'output_bias')
"""

import dataclasses

from keras_bert_impl import filesystem
from keras_bert_impl.checkpoints.name_map import TOKEN_CLASSIFIER_VARIABLES
from keras_bert_impl.errors import InputFileError
from keras_bert_impl.io import format_results, write_text_atomically
from keras_bert_impl.tasks.classifier import ClassifierFineTuning
from keras_bert_impl.tasks.distillation import StepwiseDistillation
from keras_bert_impl.tasks.spec import EXPORTED_TASKS, FineTuningSpec, TaskInputs, TaskSpec
from keras_bert_impl.training.fine_tuning import (
    LABEL_LIST_FILE,
    FineTuningSettings,
    TrainingData,
    check_labels,
    predict_batches,
    recorded_labels,
)

_INPUTS = ("input_ids", "input_mask", "segment_ids")


def _build_tagger(config, num_labels, dtype=None):
    from keras_bert_impl.models.token_classifier import BertTokenClassifier

    return BertTokenClassifier(config, num_labels=num_labels, dtype=dtype)


def token_tagging_serving_outputs(serving, inputs, padded_length):
    """`probabilities` [batch, padded_length, num_labels], `label_ids` and
    `labels` [batch, padded_length]: 0, -1 and "" at every padding position
    of the row, so a row's answer does not depend on the rest of its batch."""
    import tensorflow as tf

    logits = tf.cast(serving.forward(inputs), tf.float32)  # [batch, seq, num_labels]
    real = inputs["input_mask"] > 0  # [batch, seq]
    probabilities = tf.where(real[:, :, None], tf.nn.softmax(logits, axis=-1), 0.0)
    label_ids = tf.where(real, tf.argmax(logits, axis=-1, output_type=tf.int32), -1)  # [batch, seq]
    labels = tf.where(real, serving.labels_table.lookup(tf.cast(tf.maximum(label_ids, 0), tf.int64)), "")
    extra = padded_length - tf.shape(label_ids)[1]
    outputs = {
        "probabilities": tf.pad(probabilities, [[0, 0], [0, extra], [0, 0]]),
        "label_ids": tf.pad(label_ids, [[0, 0], [0, extra]], constant_values=-1),
        "labels": tf.pad(labels, [[0, 0], [0, extra]], constant_values=""),
    }
    if isinstance(padded_length, int):  # a signature with a fixed length says so
        outputs = {name: tf.ensure_shape(value, [None, padded_length] + value.shape.as_list()[2:])
                   for name, value in outputs.items()}
    return outputs


TOKEN_TAGGING = TaskSpec(
    name="token_tagging",
    description=EXPORTED_TASKS["token_tagging"],
    build_model=_build_tagger,
    head_variables=tuple(TOKEN_CLASSIFIER_VARIABLES),
    serving_outputs=token_tagging_serving_outputs,
    uses_labels=True,
)


def resolve_labels(labels, train_sentences, output_dir, init_checkpoint, dataset_labels=None):
    """The label list: `labels`, else the training data's, else the
    weights' `label_list.txt` (`recorded_labels`), else `dataset_labels`;
    checked against the weights' list (another order swaps the classes).

    The training data's labels are `dataset_labels` (a TFDS `ClassLabel`'s
    names) when given, else the train file's ("O" first, then sorted).
    """
    from keras_bert_impl.data.conll import label_list

    recorded, path = recorded_labels(output_dir, init_checkpoint, training=train_sentences is not None)
    if labels is not None:
        resolved = list(labels)
    elif train_sentences is not None:
        resolved = list(dataset_labels) if dataset_labels else label_list(train_sentences)
    elif recorded is not None:
        return recorded
    elif dataset_labels:
        resolved = list(dataset_labels)
    else:
        raise InputFileError(
            f"no label list: pass --labels, or train first (which writes {LABEL_LIST_FILE} to --output_dir)"
        )
    check_labels(resolved, recorded, path)
    return resolved


def encode(sentences, tokenizer, max_seq_length, label_map, path, log):
    """`(features, arrays)`: the windows and their int32 arrays (inputs, label ids, weights)."""
    import numpy as np

    from keras_bert_impl.data.conll import convert_sentences_to_features

    features, counts = convert_sentences_to_features(sentences, tokenizer, max_seq_length, label_map, path)
    unk = tokenizer.special_tokens.unk if hasattr(tokenizer, "special_tokens") else "[UNK]"
    notes = [
        f"{counts.split_sentences} sentences split into windows" if counts.split_sentences else "",
        f"{counts.empty_words} words without word pieces read as {unk}" if counts.empty_words else "",
        f"{counts.cut_words} words cut to {max_seq_length - 2} pieces" if counts.cut_words else "",
    ]
    log(f"{path}: {len(sentences)} sentences, {counts.windows} windows" + "".join(f"; {n}" for n in notes if n))
    arrays = {
        key: np.array([getattr(f, key) for f in features], np.int32).reshape(len(features), max_seq_length)
        for key in (*_INPUTS, "label_ids", "label_weights")
    }
    return features, arrays


def predict_labels(model, features, arrays, sentences, labels, batch_size, settings=FineTuningSettings(), log=print):
    """`(word_labels, logits)`: predicted labels per sentence and word, and the logits
    [windows, max_seq_length, num_labels] (zeros after each batch's cut, see `predict_batches`)."""
    from keras_bert_impl.data.conll import word_label_ids

    logits = predict_batches(model, {key: arrays[key] for key in _INPUTS}, batch_size, settings, log, "windows")
    word_ids = word_label_ids(features, logits.argmax(axis=-1), sentences)
    return [[labels[i] for i in ids] for ids in word_ids], logits


def weighted_loss(logits, label_ids, label_weights):
    """Mean cross-entropy over the labelled pieces (NumPy, float64)."""
    from keras_bert_impl.probabilities import per_example_cross_entropy

    losses = per_example_cross_entropy(logits, label_ids)
    return float((losses * label_weights).sum() / max(label_weights.sum(), 1))


def compile_options():
    """`model.compile` arguments besides the optimizer: the loss over first pieces, their accuracy."""
    import keras

    from keras_bert_impl.models.token_classifier import token_classification_loss

    return {
        "loss": token_classification_loss(),
        "weighted_metrics": [keras.metrics.SparseCategoricalAccuracy("accuracy")],
    }


@dataclasses.dataclass(frozen=True)
class TaggingFineTuning(FineTuningSpec):
    """Fine-tuning a token tagger (NER) on CoNLL-2003-format sentences, as `tools/run_ner.py`.

    Writes `eval_results.txt` (entity-level precision, recall, f1 per type
    and overall, word accuracy, `eval_loss`, `global_step`) and
    `eval_predictions.txt` with `do_eval`, `test_predictions.txt` with
    `do_predict` (every word line with the predicted label appended).

    The sentences come from `train_file`/`eval_file`/`predict_file`, or
    with `tfds_name` (`conll2003`) from the splits `train_split`,
    `eval_split`, `predict_split` of that TFDS dataset prepared in
    `data_dir` (never downloaded), whose `ClassLabel` names are then the
    label list unless `labels` or a checkpoint's `label_list.txt` say
    otherwise.

    A variant release (RoBERTa, ALBERT, DistilBERT) takes the same path:
    its tokenizer cuts each word as in the sentence's running text, between
    its own special tokens (`data/conll.py`), and a release without a
    pooler (RoBERTa's `*ForMaskedLM`) gets a fresh one, unused by the head.

    Example:
    >>> TaggingFineTuning(train_file="train.txt").head_description
    'tagging'
    """

    train_file: str = None
    eval_file: str = None
    predict_file: str = None
    labels: tuple = None
    tfds_name: str = None
    data_dir: str = None
    train_split: str = "train"
    eval_split: str = "dev"
    predict_split: str = "test"
    name = "ner"
    head_description = "tagging"
    variant_tokenizers = True

    def read_inputs(self, release, run, log):
        from keras_bert_impl.data.conll import read_conll, read_tfds_conll, tfds_label_names
        from keras_bert_impl.data.tfds_inputs import split_source

        paths = {"train": self.train_file, "eval": self.eval_file, "predict": self.predict_file}
        tfds_splits = {"train": self.train_split, "eval": self.eval_split, "predict": self.predict_split}
        sentences = {}
        for split, wanted in (("train", run.do_train), ("eval", run.do_eval), ("predict", run.do_predict)):
            if wanted and self.tfds_name:
                paths[split] = split_source(self.tfds_name, tfds_splits[split])
                sentences[split] = read_tfds_conll(self.tfds_name, self.data_dir, tfds_splits[split])
            elif wanted:
                sentences[split] = read_conll(paths[split], require_labels=split != "predict")
        dataset_labels = tfds_label_names(self.tfds_name, self.data_dir) if self.tfds_name else None
        labels = resolve_labels(self.labels, sentences.get("train"), run.output_dir, run.init_checkpoint,
                                dataset_labels)
        label_map = {label: index for index, label in enumerate(labels)}
        # A predict file's last column is not read as labels (it may be POS tags, or absent).
        splits = {
            split: (split_sentences, *encode(split_sentences, release.tokenizer, run.max_seq_length,
                                             None if split == "predict" else label_map, paths[split], log))
            for split, split_sentences in sentences.items()
        }
        return TaskInputs(TOKEN_TAGGING, splits, num_labels=len(labels), labels=tuple(labels), extra=paths)

    # The release's weights, the head fresh, and a variant's missing pooler (as the classifier's).
    initialise = ClassifierFineTuning.initialise

    def training_data(self, inputs, release, run, log):
        _, _, arrays = inputs.splits["train"]
        return TrainingData(
            inputs={key: arrays[key] for key in _INPUTS}, targets=arrays["label_ids"],
            sample_weights=arrays["label_weights"], num_examples=len(arrays["input_ids"]), unit="windows",
            description=f"{len(arrays['input_ids'])} windows", source=inputs.extra["train"], fingerprint=arrays,
        )

    def compile_options(self, inputs):
        return compile_options()

    def evaluate(self, model, inputs, release, global_step, run, log):
        from keras_bert_impl.data.conll import entity_scores, format_predictions

        sentences, features, arrays = inputs.splits["eval"]
        predicted, logits = predict_labels(
            model, features, arrays, sentences, inputs.labels, run.eval_batch_size, run.training, log
        )
        result = entity_scores([s.labels for s in sentences], predicted)
        result["eval_loss"] = weighted_loss(logits, arrays["label_ids"], arrays["label_weights"])
        result["global_step"] = global_step
        write_text_atomically(filesystem.join(run.output_dir, "eval_results.txt"), format_results(result))
        write_text_atomically(
            filesystem.join(run.output_dir, "eval_predictions.txt"), format_predictions(sentences, predicted)
        )
        log(f"eval on {len(sentences)} sentences: precision {result['precision']:.4f}, "
            f"recall {result['recall']:.4f}, f1 {result['f1']:.4f}")
        return result

    def predict(self, model, inputs, release, global_step, run, log):
        from keras_bert_impl.data.conll import format_predictions

        sentences, features, arrays = inputs.splits["predict"]
        predicted, _ = predict_labels(
            model, features, arrays, sentences, inputs.labels, run.predict_batch_size, run.training, log
        )
        path = filesystem.join(run.output_dir, "test_predictions.txt")
        write_text_atomically(path, format_predictions(sentences, predicted))
        log(f"wrote predictions for {len(sentences)} sentences to {path}")
        return {}


@dataclasses.dataclass(frozen=True)
class TaggingDistillation(StepwiseDistillation, TaggingFineTuning):
    """A shallower tagger of a `run_ner` release (`bert-distill --task=ner`).

    The teacher's `label_list.txt` is the label list. Trained on the train
    sentences' windows against the teacher's tag logits at the temperature
    and the tags (both on each word's first piece), and the teacher's
    top-layer states (every real token); `evaluate` writes the student's
    files as `run_ner` does, and the teacher's in `teacher/`.

    Example:
    >>> TaggingDistillation(train_file="train.txt").task
    'ner'
    """

    task = "ner"
    teacher_head = tuple(TOKEN_CLASSIFIER_VARIABLES)

    def read_inputs(self, release, run, log):
        labels, path = self.teacher_label_list(run)
        check_labels(self.labels, labels, path)
        with_teachers_labels = dataclasses.replace(self, labels=tuple(labels))
        return super(TaggingDistillation, with_teachers_labels).read_inputs(release, run, log)

    def soft_logits(self, task_model, sequence_output, inputs):
        return task_model.token_head(task_model.get_layer("dropout")(sequence_output))  # [batch, seq, num_labels]

    def training_data(self, inputs, release, run, log):
        data = super().training_data(inputs, release, run, log)
        weights = data.sample_weights  # [windows, seq]: 1 on each word's first piece
        return dataclasses.replace(data, targets={"hard": data.targets},
                                   sample_weights={"hard": weights, "soft": weights})
