"""Sequence (pair) classification and regression: the original `run_classifier`.

The two task specs (`classifier`, `regression`), their serving outputs, and
`ClassifierFineTuning`, what `jobs.run_fine_tuning` needs to fine-tune,
evaluate and predict them as `tools/run_classifier.py`: a dataset's examples
as the original's features, its loss and metrics, and the original's result
files.

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
from keras_bert_impl.tasks.spec import EXPORTED_TASKS, FineTuningSpec, TaskInputs, TaskSpec
from keras_bert_impl.training.fine_tuning import TrainingData, check_labels, predict_batches, recorded_labels

SEQUENCE_INPUTS = ("input_ids", "input_mask", "segment_ids")


def classifier_config(config):
    """The config of a classifier on `config`'s encoder: with a pooler.

    A classifier reads the pooled output: the [CLS] (RoBERTa: `<s>`) state
    through a dense layer and tanh. An encoder without a pooler (DistilBERT)
    gets a fresh one, fine-tuned with the head. That is RoBERTa's own
    classification head (`dense`, tanh, `out_proj` on `<s>`, Hugging Face's
    `RobertaClassificationHead`), and DistilBERT's `pre_classifier` with tanh
    in place of its ReLU; a fine-tuned release keeps the pooler
    (`use_pooler: true`). docs/VARIANTS.md.

    Example:
    >>> from keras_bert_impl.config import BertConfig
    >>> config = BertConfig(vocab_size=10, hidden_size=8, num_attention_heads=2, type_vocab_size=0,
    ...                     model_type="distilbert", use_pooler=False)
    >>> classifier_config(config).use_pooler
    True
    """
    from keras_bert_impl.models.bert_model import as_bert_config

    config = as_bert_config(config)
    return config if config.use_pooler else dataclasses.replace(config, use_pooler=True)


def variant_fresh_variables(config):
    """Original names a release may lack where a task model has them: its pooler.

    Hugging Face's `BertForMaskedLM` and `RobertaForMaskedLM` (and
    keras-hub's RoBERTa) save no pooler, DistilBERT has none at all; a model
    that reads the pooled output starts it fresh, as transformers does, and
    says so (the load report's `fresh`).

    Example:
    >>> from keras_bert_impl.config import BertConfig
    >>> variant_fresh_variables(BertConfig(vocab_size=10, hidden_size=8, num_attention_heads=2))
    ('bert/pooler/',)
    """
    del config  # Every model type's releases come with and without one.
    return ("bert/pooler/",)


def _build_classifier(config, num_labels, dtype=None):
    from keras_bert_impl.models.classifier import BertClassifier

    return BertClassifier(classifier_config(config), num_labels=num_labels, dtype=dtype)


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
    description=EXPORTED_TASKS["classifier"],
    build_model=_build_classifier,
    head_variables=tuple(CLASSIFIER_VARIABLES),
    serving_outputs=classifier_serving_outputs,
    uses_labels=True,
    long_texts=True,
)
REGRESSION = TaskSpec(
    name="regression",
    description=EXPORTED_TASKS["regression"],
    build_model=lambda config, num_labels=1, dtype=None: _build_classifier(config, 1, dtype),
    head_variables=tuple(CLASSIFIER_VARIABLES),
    serving_outputs=regression_serving_outputs,
    long_texts=True,
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


def encode_long_texts(examples, tokenizer, max_seq_length, long_text):
    """Single texts as `long_text` reads them: `(features, text_index)`.

    Args:
        examples: `ClassifierExample`s (or any with `text_a`) without a second text.
        tokenizer: A `FullTokenizer` (or a variant's Python tokenizer).
        max_seq_length: Padded length.
        long_text: Resolved `tokenization.long_text.LongTextOptions`.

    Returns:
        `encode`'s dict of int32 arrays [rows, max_seq_length], one row per
        example (cut, head_tail) or per window; int32 [rows], each row's
        example.
    """
    import numpy as np

    from keras_bert_impl.data.text_pairs import single_text_features
    from keras_bert_impl.tokenization.long_text import long_text_pieces

    features, text_index = [], []
    for index, example in enumerate(examples):
        for piece in long_text_pieces(tokenizer.tokenize(example.text_a), long_text, max_seq_length):
            features.append(single_text_features(index, piece, tokenizer, max_seq_length))
            text_index.append(index)
    arrays = {
        key: np.array([getattr(f, key) for f in features], np.int32).reshape(len(features), max_seq_length)
        for key in SEQUENCE_INPUTS
    }
    return arrays, np.array(text_index, np.int32)


def check_single_texts(examples, long_text, source):
    """Refuses text pairs where long texts are not cut: head + tail and windows read one text.

    Raises:
        InputFileError: naming `source` and the first pair.
    """
    if long_text.mode == "cut":
        return
    for example in examples:
        if example.text_b:
            raise InputFileError(f"{source}: --long_text={long_text.mode} reads single texts, but example "
                                 f"{getattr(example, 'guid', '')!s} is a text pair; pairs are cut (--long_text=cut)")


def long_text_logits(model, examples, tokenizer, max_seq_length, long_text, batch_size, settings, log):
    """A classifier's logits [n, num_labels] of `examples` read as `long_text` says: each
    example's own row, or the pooled logits of its windows (float64)."""
    from keras_bert_impl.tokenization.long_text import WINDOWS, pool_window_logits

    features, text_index = encode_long_texts(examples, tokenizer, max_seq_length, long_text)
    logits = predict_batches(model, features, batch_size, settings, log,
                             description="windows" if long_text.mode == WINDOWS else "examples")
    if long_text.mode != WINDOWS:
        return logits
    return pool_window_logits(logits, text_index, len(examples), long_text.window_pooling)


def evaluation_results(dataset, labels, logits, batch_size, global_step):
    """The original's eval metrics, from the dev logits (pure NumPy).

    Args:
        dataset: The dataset (regression or not, its extra metrics).
        labels: Class ids [n], or regression targets [n].
        logits: Model outputs [n, num_labels] ([n, 1] for regression).
        batch_size: The eval batch size; `loss` is the mean of per-batch mean
            losses (the Estimator's `loss`), `eval_loss` the per-example mean.
        global_step: Training steps of the evaluated weights.

    Returns:
        `{name: value}`.
    """
    import numpy as np

    from keras_bert_impl.data.classification_metrics import accuracy, dataset_metrics
    from keras_bert_impl.probabilities import per_example_cross_entropy

    logits = np.asarray(logits, np.float64)
    if dataset.is_regression:
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
    if not dataset.is_regression:
        result["eval_accuracy"] = accuracy(labels, predictions)
    result.update(dataset_metrics(dataset, labels, predictions))
    return result


def _as_float32_text(value):
    import numpy as np

    return value if isinstance(value, int) else str(np.float32(value))


def format_eval_results(result):
    """`key = value` lines sorted by key; floats printed as the original's float32."""
    return format_results(result, _as_float32_text)


def format_test_results(dataset, logits):
    """One line per example: tab-separated class probabilities (the score for regression)."""
    import numpy as np

    from keras_bert_impl.probabilities import softmax

    logits = np.asarray(logits, np.float64)
    if dataset.is_regression:
        return "".join(str(np.float32(value)) + "\n" for value in logits[:, 0])
    probabilities = softmax(logits).astype(np.float32)
    return "".join("\t".join(str(p) for p in row) + "\n" for row in probabilities)


def read_dataset_splits(dataset, data_dir, do_train, do_eval, do_predict, recorded=(None, None)):
    """`(dataset, {split: examples})` for the splits the run needs.

    A TFDS dataset takes its label list from the dataset's `ClassLabel`; a
    column dataset (or TFDS dataset) without labels gets the label list the
    weights were trained with (`recorded`: `(labels, path)` of their
    `label_list.txt`), else its train split's, which is then read even for
    an eval/predict-only run. A label list other than the recorded one is
    refused: it would swap the classes.
    """
    from keras_bert_impl.data.classification_datasets import read_examples
    from keras_bert_impl.data.classification_examples import with_labels
    from keras_bert_impl.data.tfds_text import with_dataset_labels

    dataset = with_dataset_labels(dataset, data_dir)
    recorded_list, recorded_path = recorded
    if dataset.labels is None and not dataset.is_regression and recorded_list is not None and not do_train:
        dataset = dataclasses.replace(dataset, labels=tuple(recorded_list))
    data = {}
    if do_train or (dataset.labels is None and not dataset.is_regression):
        data["train"] = read_examples(dataset, data_dir, "train")
        dataset = with_labels(dataset, data["train"])
    if not dataset.is_regression:
        check_labels(dataset.labels, recorded_list, recorded_path)
    for split, wanted in (("dev", do_eval), ("test", do_predict)):
        if wanted:
            data[split] = read_examples(dataset, data_dir, split)
    for split, examples in data.items():
        if not examples:
            raise InputFileError(f"{data_dir}: the {split} split of task {dataset.name} has no examples")
    return dataset, data


def compile_options(is_regression):
    """`model.compile` arguments besides the optimizer: the original's loss, and accuracy for classes."""
    import keras

    if is_regression:
        return {"loss": keras.losses.MeanSquaredError(), "metrics": []}
    return {
        "loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        "metrics": [keras.metrics.SparseCategoricalAccuracy("accuracy")],
    }


@dataclasses.dataclass(frozen=True)
class ClassifierFineTuning(FineTuningSpec):
    """Fine-tuning a classifier (or STS-B-like regression) on a dataset, as the original `run_classifier.py`.

    Writes `eval_results.txt` (the original's metrics, `key = value`) with
    `do_eval` and `test_results.tsv` (class probabilities per line) with
    `do_predict`.

    Args:
        dataset: A dataset from `data.classification_datasets.get_dataset`.
        data_dir: Its data directory (the TFDS data directory for a TFDS dataset).
        long_text: A `tokenization.long_text.LongTextOptions`: how texts
            longer than `max_seq_length` are read (head + tail, or windows:
            each window trained with its text's label, the windows' logits
            pooled at evaluation and prediction), recorded beside the
            fine-tuned release (`long_text.json`). None: cut, as the
            original, when training; else what the weights' release
            records.

    Example:
    >>> from keras_bert_impl.data.classification_datasets import get_dataset
    >>> ClassifierFineTuning(get_dataset("mrpc"), "glue/MRPC").head_description
    'classification'
    """

    dataset: object
    data_dir: str
    long_text: object = None
    name = "classifier"
    head_description = "classification"
    variant_tokenizers = True

    def long_text_options(self, run):
        """The resolved `LongTextOptions` of this run: `long_text`, else cut when
        training, else what the weights' release records (`recorded_long_text`)."""
        from keras_bert_impl.tokenization.long_text import LongTextOptions
        from keras_bert_impl.training.fine_tuning import recorded_long_text

        options = self.long_text or recorded_long_text(run.output_dir, run.init_checkpoint, training=run.do_train)
        return (options or LongTextOptions()).resolved(run.max_seq_length, flag_prefix="--")

    def read_inputs(self, release, run, log):
        from keras_bert_impl.checkpoints.release import MULTI_LABEL_FILE
        from keras_bert_impl.training.fine_tuning import recorded_multi_label

        _, directory = recorded_multi_label(run.output_dir, run.init_checkpoint, training=run.do_train)
        if directory is not None:  # Its softmax would not be the model's answer: refused, not guessed.
            raise InputFileError(f"{filesystem.join(directory, MULTI_LABEL_FILE)}: the fine-tuned release is a "
                                 "multi-label classifier (a sigmoid per label); pass --multi_label")
        dataset, examples = read_dataset_splits(
            self.dataset, self.data_dir, run.do_train, run.do_eval, run.do_predict,
            recorded_labels(run.output_dir, run.init_checkpoint, training=run.do_train),
        )
        long_text = self.long_text_options(run)
        for split, split_examples in examples.items():
            check_single_texts(split_examples, long_text, f"{self.data_dir} ({split})")
        if long_text.mode != "cut":
            log(f"texts longer than --max_seq_length={run.max_seq_length}: {long_text.to_json()}")
        if dataset.is_regression:
            return TaskInputs(REGRESSION, examples, num_labels=1, extra=dataset)
        return TaskInputs(CLASSIFIER, examples, num_labels=len(dataset.labels), labels=tuple(dataset.labels),
                          extra=dataset)

    def initialise(self, model, inputs, release, run, log):
        from keras_bert_impl.training.fine_tuning import load_initial_weights

        fresh = inputs.model_spec.head_variables + variant_fresh_variables(release.config)
        load_initial_weights(model, run.init_checkpoint, fresh, log)

    def training_data(self, inputs, release, run, log):
        from keras_bert_impl.data.classification_examples import label_ids

        dataset, examples = inputs.extra, inputs.splits["train"]
        labels = label_ids(dataset, examples)
        long_text = self.long_text_options(run)
        if long_text.mode == "cut":
            features, description = encode(examples, release.tokenizer, run.max_seq_length), f"{len(labels)} examples"
        else:
            features, text_index = encode_long_texts(examples, release.tokenizer, run.max_seq_length, long_text)
            labels = labels[text_index]  # Each window (or head + tail) with its text's label.
            description = f"{len(examples)} examples" + (f" in {len(labels)} windows" if len(labels) > len(examples)
                                                         else f", {long_text.mode}")
        return TrainingData(
            inputs=features, targets=labels.reshape(-1, 1) if dataset.is_regression else labels,
            num_examples=len(labels), unit="training examples" if len(labels) == len(examples) else "training windows",
            description=description, source=self.data_dir,
        )

    def run_settings(self, release):
        if self.long_text is None or self.long_text.mode == "cut":
            return {}  # As runs recorded before long texts had a setting.
        return {"long_text": self.long_text.to_json()}

    def release_files(self, output_dir, inputs, run):
        from keras_bert_impl.checkpoints.release import write_release_long_text

        write_release_long_text(output_dir, self.long_text_options(run))

    def compile_options(self, inputs):
        return compile_options(inputs.extra.is_regression)

    def _logits(self, model, examples, release, batch_size, run, log):
        long_text = self.long_text_options(run)
        if long_text.mode != "cut":
            return long_text_logits(model, examples, release.tokenizer, run.max_seq_length, long_text, batch_size,
                                    run.training, log)
        features = encode(examples, release.tokenizer, run.max_seq_length)
        return predict_batches(model, features, batch_size, run.training, log)

    def evaluate(self, model, inputs, release, global_step, run, log):
        from keras_bert_impl.data.classification_examples import label_ids

        dataset, examples = inputs.extra, inputs.splits["dev"]
        logits = self._logits(model, examples, release, run.eval_batch_size, run, log)
        result = evaluation_results(dataset, label_ids(dataset, examples), logits, run.eval_batch_size, global_step)
        text = format_eval_results(result)
        write_text_atomically(filesystem.join(run.output_dir, "eval_results.txt"), text)
        log(f"eval on {len(examples)} examples:\n{text.rstrip()}")
        return result

    def predict(self, model, inputs, release, global_step, run, log):
        examples = inputs.splits["test"]
        logits = self._logits(model, examples, release, run.predict_batch_size, run, log)
        path = filesystem.join(run.output_dir, "test_results.tsv")
        write_text_atomically(path, format_test_results(inputs.extra, logits))
        log(f"wrote predictions for {len(examples)} examples to {path}")
        return {}
