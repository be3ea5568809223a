"""`TextClassifier`: fine-tune BERT on raw text with Keras `fit`.

The Python face of `run_classifier`: a `BertClassifier` (the original
`output_weights`/`output_bias` head on the pooled output) that carries its
`BertPreprocessor`, so `fit`, `evaluate` and `predict` take strings and
tokenize them inside the `tf.data` pipeline, exactly as `FullTokenizer`.
`compile()` with no arguments is the original recipe: AdamW without bias
correction, warmup then linear decay to zero over the steps `fit` will run,
gradients clipped to norm 1.0.
"""

import dataclasses
import functools
import logging
import os
import tempfile

import keras
import numpy as np

from keras_bert_impl.models.classifier import BertClassifier
from keras_bert_impl.tasks.classifier import CLASSIFIER, REGRESSION, classifier_config
from keras_bert_impl.tasks.text_data import (
    check_class_ids,
    check_count,
    check_labelled,
    label_array,
    num_texts,
    predict_token_ids,
    text_dataset,
    text_tensor,
    tokenized,
    window_dataset,
)
from keras_bert_impl.tokenization.long_text import (
    CUT,
    HEAD_TAIL,
    WINDOWS,
    LongTextOptions,
    long_text_inputs,
    pool_window_logits,
)
from keras_bert_impl.tokenization.preprocessor import BertPreprocessor

_PACKAGE = "keras_bert_impl"

# Token positions of in-memory texts that `fit` tokenizes at once (three int32 arrays: 384 MiB at most); more texts
# are tokenized batch by batch, each epoch.
MAX_TOKENIZED_POSITIONS = 2**25
logger = logging.getLogger("keras_bert_impl")


@keras.saving.register_keras_serializable(package=_PACKAGE)
class TextClassifier(BertClassifier):
    """Classification (or regression, `num_classes=1`) of texts and text pairs.

    Args:
        bert_config: A `BertConfig` (or its dict).
        num_classes: Classes; 1 makes a regression (mean squared error).
        preprocessor: The `BertPreprocessor` of the model's vocabulary.
        dropout_rate: Dropout on the pooled output (the original's 0.1).
        learning_rate: Peak learning rate of the default optimizer.
        warmup_proportion: Fraction of the steps with linear warmup.
        seed: Seed of `fit`'s shuffling (None: not seeded).
        real_tokens_only: Cut each batch of `fit`, `evaluate` and `predict`
            after its longest row (`training.real_tokens`), and on a CPU run
            the encoder's per-token work on the real tokens only
            (`training.fine_tuning.compute_on_real_tokens`): the results of
            the full width at a fraction of the work. False computes every
            batch at the preprocessor's `max_seq_length`.
        label_names: The classes' names in class-id order (a fine-tuned
            release's `label_list.txt`, which `from_release` reads), which
            `export` answers with and `save_release` writes; None: none.
        multi_label: Each text has any number of the `num_classes` labels:
            a sigmoid per label and binary cross-entropy
            (`tasks.multi_label`); `y` is 0/1 [n, num_classes], `predict`
            each label's probability, `predict_labels` the labels at or
            over `threshold`.
        threshold: With `multi_label`, the probability at or over which a
            label is predicted: one number, or one per label
            (`tune_threshold` sets one per label from a dev set).
        long_text: How a text longer than the preprocessor's
            `max_seq_length` is read (`tokenization.long_text`): "cut" (the
            original: its first `max_seq_length - 2` word pieces),
            "head_tail" (its first `head_tokens` and its last word pieces)
            or "windows" (windows of `max_seq_length - 2` word pieces every
            `window_stride`: `fit` trains each window with its text's label,
            `predict` and `evaluate` pool the windows' logits per text by
            `window_pooling`, "mean" or "max"). Single texts only.
            `save_release` records it, `from_release` and `export` use it.
        head_tokens: With "head_tail" (default `max_seq_length // 4`).
        window_stride: With "windows" (default `max_seq_length // 2`).
        window_pooling: With "windows" (default "mean").
        dtype: Keras dtype policy.

    Example:
    >>> from keras_bert_impl.config import BertConfig
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "good", "bad", "film"]
    >>> config = BertConfig(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=1,
    ...                     num_attention_heads=2, intermediate_size=16)
    >>> model = TextClassifier(config, num_classes=2,
    ...                        preprocessor=BertPreprocessor(vocab, max_seq_length=8))
    >>> model.compile()
    >>> _ = model.fit(["good film", "bad film"] * 4, [1, 0] * 4, batch_size=4, epochs=1, verbose=0)
    >>> model.predict(["good film"], verbose=0).shape
    (1, 2)
    """

    def __init__(self, bert_config, num_classes, preprocessor, dropout_rate=0.1, learning_rate=5e-5,
                 warmup_proportion=0.1, seed=None, real_tokens_only=True, label_names=None, multi_label=False,
                 threshold=0.5, long_text=CUT, head_tokens=None, window_stride=None, window_pooling=None, dtype=None,
                 name="text_classifier", **kwargs):
        check_count(num_classes, "num_classes")  # 0 classes aborted the interpreter in oneDNN at predict
        if isinstance(preprocessor, dict):
            preprocessor = keras.layers.deserialize(preprocessor)
        if not isinstance(long_text, LongTextOptions):
            long_text = LongTextOptions(long_text, head_tokens, window_stride, window_pooling)
        long_text = long_text.resolved(preprocessor.max_seq_length)  # Refused before anything is built.
        super().__init__(classifier_config(bert_config), num_labels=num_classes, dropout_rate=dropout_rate,
                         dtype=dtype, name=name, **kwargs)
        self.num_classes = num_classes
        self.preprocessor = preprocessor
        self.learning_rate = learning_rate
        self.warmup_proportion = warmup_proportion
        self.seed = seed
        self.real_tokens_only = real_tokens_only
        self.label_names = None if label_names is None else tuple(label_names)
        self.multi_label = bool(multi_label)
        self.long_text = long_text
        if multi_label:
            from keras_bert_impl.data.multi_label import per_label_thresholds

            per_label_thresholds(threshold, num_classes)  # ValueError: not a number or one per label in (0, 1)
        self.threshold = threshold if np.ndim(threshold) == 0 else tuple(float(t) for t in threshold)
        self._original_recipe = None
        from keras_bert_impl.training.fine_tuning import FineTuningSettings, compute_on_real_tokens

        compute_on_real_tokens(self, FineTuningSettings(real_tokens_only=real_tokens_only))

    @property
    def spec(self):
        """The task spec: `classifier`, `multi_label`, or `regression` for one class."""
        from keras_bert_impl.tasks.multi_label import MULTI_LABEL

        if self.multi_label:
            return MULTI_LABEL
        return REGRESSION if self.num_classes == 1 else CLASSIFIER

    # -- from and to releases ---------------------------------------------

    @classmethod
    def from_release(cls, path, num_classes=None, max_seq_length=128, do_lower_case=None, **kwargs):
        """A classifier on the encoder of a release: its fine-tuned head where it has one, else a fresh head.

        Args:
            path: A release directory (`bert_config.json`, `vocab.txt`,
                `bert_model.ckpt` or `model.ckpt`), or a checkpoint prefix in one,
                or a named source (`hf://ORG/NAME[@REVISION]`: docs/SOURCES.md).
            num_classes: Classes (1: regression). None: as many as the
                release's fine-tuned head (`output_weights`, as
                `run_classifier` and `save_release` write it) has.
            max_seq_length: Padded length of the inputs.
            do_lower_case: None follows the release (its name where the
                original's check knows it, else its vocabulary's casing).
            **kwargs: Passed to the constructor.

        Returns:
            The model; `model.load_report` says what was loaded and what is
            new, `model.label_names` the release's `label_list.txt` (as the
            fine-tuning tools write it; None without one), which `export`
            takes by default; `model.long_text` how it reads long texts:
            as the release's `long_text.json` records (written by
            `save_release` and `bert-run-classifier --long_text`) unless
            `long_text` is given, else cut. The recorded options fill in
            those not given. A multi-label release (its `multi_label.json`,
            written by `save_release`, `bert-run-classifier --multi_label`
            and `bert-convert-hf` from a Hugging Face multi-label head)
            comes back `multi_label` with its labels and thresholds, unless
            `multi_label` or `threshold` is given.

        Raises:
            ValueError: `num_classes` is None and the release has no
                fine-tuned head.
        """
        from keras_bert_impl.checkpoints.sources import find_release
        from keras_bert_impl.checkpoints.sources import resolve_source
        from keras_bert_impl.training.fine_tuning import recorded_labels

        path = resolve_source(path)  # A named source fetched (or checked in the cache) once, not per read below.
        if num_classes is None:
            num_classes = release_head_classes(path)
        if "label_names" not in kwargs:
            labels, _ = recorded_labels(os.path.dirname(find_release(path).checkpoint))
            kwargs["label_names"] = labels if labels and len(labels) == num_classes else None
        directory = os.path.dirname(find_release(path).checkpoint)
        if kwargs.get("multi_label", True):  # A multi-label release: a sigmoid per label at its thresholds.
            from keras_bert_impl.checkpoints.release import read_release_multi_label

            record = read_release_multi_label(directory)
            if record is not None and len(record.thresholds) == num_classes:
                kwargs.setdefault("multi_label", True)
                kwargs.setdefault("threshold", record.thresholds)
                if kwargs.get("label_names") is None and record.labels is not None:
                    kwargs["label_names"] = record.labels
        if "long_text" not in kwargs:  # The release's reading, the options given in place of its.
            from keras_bert_impl.checkpoints.release import read_release_long_text

            recorded = read_release_long_text(directory)
            if recorded is not None:
                kwargs["long_text"] = recorded.mode
                for name, value in dataclasses.asdict(recorded).items():
                    if name != "mode" and value is not None:
                        kwargs.setdefault(name, value)
        return load_from_release(cls, path, max_seq_length, do_lower_case,
                                 fresh=CLASSIFIER.head_variables, num_classes=num_classes, **kwargs)

    def save_release(self, path, global_step=None):
        """Writes an original-layout release (what `--init_checkpoint` takes); returns the prefix.

        With `label_names`, the release holds them as `label_list.txt`, as
        the fine-tuning tools write it (`bert-export` and `from_release` read
        it); without, an earlier release's list there is removed. A
        `long_text` other than "cut" is recorded as `long_text.json`; a
        `multi_label` model's labels and thresholds as `multi_label.json`
        (`from_release` and `bert-export` read both).
        """
        from keras_bert_impl import filesystem
        from keras_bert_impl.checkpoints.release import (
            MultiLabelRecord,
            write_release,
            write_release_long_text,
            write_release_multi_label,
        )
        from keras_bert_impl.data.multi_label import per_label_thresholds
        from keras_bert_impl.training.fine_tuning import LABEL_LIST_FILE, write_label_list

        optimizer = getattr(self, "optimizer", None)  # None before `compile`
        if global_step is None and optimizer is not None and optimizer.built:
            global_step = int(optimizer.iterations.numpy())
        labels = (functools.partial(write_label_list, labels=self.label_names) if self.label_names
                  else lambda directory: filesystem.remove(filesystem.join(directory, LABEL_LIST_FILE), missing_ok=True))

        record = (MultiLabelRecord(self.label_names, per_label_thresholds(self.threshold, self.num_classes))
                  if self.multi_label else None)

        def write_more(directory):
            labels(directory)
            write_release_long_text(directory, self.long_text)
            write_release_multi_label(directory, record)

        return write_release(self, path, self.bert_config, self.preprocessor.vocabulary, global_step,
                             write_tokenizer=getattr(self.preprocessor, "write_tokenizer_files", None),
                             write_more=write_more)

    def export(self, export_base, label_names=None, version=None, precision=None, verify=True,
               calibration_texts=None, min_int8_agreement=None, optimize_for="portable"):
        """Exports for TF Serving under `export_base/<version>/`; returns that directory.

        The SavedModel tokenizes raw text in-graph with this model's
        preprocessing (signatures `serving_default`, `serve_text_pair`,
        `serve_ids`, `serve_examples`), in stock TensorFlow ops that TF
        Serving runs on any CPU or GPU. `precision` ("float32", "bfloat16",
        "int8" or "auto": bfloat16 on a CPU with AMX or AMD's AVX-512 bf16)
        is what it computes in; default this model's own.
        `optimize_for="this_cpu"` asks for this CPU's fastest form instead
        ("auto" precision, kernels packed by oneDNN: CPU only; see
        `serving.export.ExportOptions`). `label_names`
        default to `self.label_names` (a fine-tuned release's, from
        `from_release`), else "0".."n-1". For "int8",
        `calibration_texts` (your task's texts, as `bert-export
        --calibration_file` reads them; one string is one text) fix each
        product's input range (None: ranges per batch); int8's agreement
        with float32, measured on texts the calibration did not see
        (`export_metadata.json`), must reach `min_int8_agreement` (default
        `serving.int8_gate.DEFAULT_MIN_AGREEMENT`) for the version to be
        published. With `verify` (as `bert-export`)
        the version is published only once it loads as TF Serving loads it
        and answers its warmup requests as this model does
        (`serving.verification`). The raw-text signature reads long texts
        as this model's `long_text` says (windows: each text's windows run
        in the request's batch, their logits pooled in the graph).
        """
        return export_with_preprocessor(self, export_base, label_names=label_names or self.label_names,
                                        version=version, precision=precision, verify=verify,
                                        optimize_for=optimize_for,
                                        calibration_texts=calibration_texts,  # one string: one text (the check)
                                        min_int8_agreement=min_int8_agreement, long_text=self.long_text)

    def distill(self, texts, labels=None, num_hidden_layers=None, unlabeled_texts=None, batch_size=32, epochs=3,
                verbose="auto", callbacks=None, validation_data=None, **options):
        """A smaller, faster student of this fine-tuned classifier (`tasks.distillation`).

        The student has this model's configuration with `num_hidden_layers`
        layers (default: half), starts from its embeddings, every (n/k)-th
        layer, pooler and head, and is trained on this model's soft targets
        at a temperature, the hard `labels` where given, and its last-layer
        [CLS] state; `unlabeled_texts` add soft targets only.

        A `multi_label` model's student is multi-label too, of its labels
        and thresholds (`save_release` writes its `multi_label.json`): its
        soft targets are each label's sigmoid at the temperature, its
        `labels` 0/1 rows [n, num_classes] (binary cross-entropy).

        Args:
            texts, labels: Training texts (a list, or a tuple of two lists
                for pairs) and their labels (or None): class ids, scores
                for regression, 0/1 rows for `multi_label`.
            num_hidden_layers: The student's depth.
            unlabeled_texts: More texts without labels.
            batch_size, epochs, verbose, callbacks: As Keras `fit`'s.
            validation_data: `(texts, labels)` the student is evaluated on
                after each epoch (`val_loss`, `val_accuracy` in its history;
                for `multi_label` the binary cross-entropy and the share of
                per-label decisions right at probability 0.5).
            **options: `DistillationOptions` fields: `temperature`,
                `soft_weight`, `hard_weight`, `hidden_weight`,
                `learning_rate`, `seed`.

        Returns:
            The student, a `TextClassifier` (`predict`, `evaluate`,
            `save_release`, `export` as any other).
        """
        from keras_bert_impl.tasks.distillation import DistillationOptions, distill

        return distill(self, texts, labels, unlabeled_texts,
                       DistillationOptions(num_hidden_layers=num_hidden_layers, batch_size=batch_size, epochs=epochs,
                                           **options),
                       verbose=verbose, callbacks=callbacks, validation_data=validation_data)

    # -- Keras --------------------------------------------------------------

    def compile(self, optimizer=None, loss=None, metrics=None, num_train_steps=None, **kwargs):
        """Keras `compile`; with no optimizer, the original's.

        Its learning rate warms up, then decays to zero over `num_train_steps`
        (default: the steps of the first `fit`; give it to spread one schedule
        over several `fit` calls). A `fit` after the schedule has ended is
        refused: it would not change a weight.

        With no loss: sparse categorical cross-entropy on the logits (the
        original's), or mean squared error for regression; with no metrics:
        accuracy of class ids or one-hot labels, as the loss takes them (none
        for regression).
        """
        if num_train_steps is not None and optimizer is not None:
            raise ValueError("num_train_steps sizes the original optimizer: give it without an optimizer")
        if self.multi_label:
            from keras_bert_impl.tasks.multi_label import multi_label_compile_options

            defaults = multi_label_compile_options()
            loss = defaults["loss"] if loss is None else loss
            metrics = defaults["metrics"] if metrics is None else metrics
        if loss is None:
            loss = (keras.losses.MeanSquaredError() if self.num_classes == 1
                    else keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        if metrics is None:
            # Keras' "accuracy" follows the labels: class ids, or one-hot rows for a categorical loss.
            metrics = [] if self.num_classes == 1 else ["accuracy"]
        self._original_recipe = None
        if optimizer is None:
            self._original_recipe = dict(loss=loss, metrics=metrics, **kwargs)
            if num_train_steps is not None:
                self._compile_original_optimizer(num_train_steps)
                return
            optimizer = "adam"  # A stand-in: the schedule needs the steps, which only `fit` knows.
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def get_compile_config(self):
        """What `compile` was given, for `.keras` files; the original optimizer
        not yet sized by `fit` is saved as "none given"."""
        config = super().get_compile_config()
        if config is not None and self._original_recipe is not None:
            config = dict(config, optimizer=None)
        return config

    def compile_from_config(self, config):
        """Compiles a model loaded from a `.keras` file as it was compiled
        when saved: loss, metrics, and the optimizer with its schedule (whose
        step count and slots are then restored with the weights)."""
        config = keras.saving.deserialize_keras_object(config)
        self.compile(**config)
        if self.built and self._original_recipe is None:
            self.optimizer.build(self.trainable_variables)

    def _compile_original_optimizer(self, num_train_steps):
        from keras_bert_impl.training.optimization import StepCountingLossScaleOptimizer, create_optimizer

        recipe, self._original_recipe = self._original_recipe, None
        if int(num_train_steps) < 1:
            raise ValueError(f"num_train_steps must be at least 1, got {num_train_steps}")
        num_warmup_steps = int(num_train_steps * self.warmup_proportion)
        logger.info("original optimizer: %d steps (%d warmup)", num_train_steps, num_warmup_steps)
        optimizer = create_optimizer(self.learning_rate, num_train_steps, num_warmup_steps)
        if self.built_with_dtype.name == "mixed_float16":
            optimizer = StepCountingLossScaleOptimizer(optimizer)  # Steps skipped for overflow are counted.
        super().compile(optimizer=optimizer, **recipe)

    def _bucket_size(self):
        from keras_bert_impl.training.real_tokens import default_bucket_size

        return default_bucket_size(self.preprocessor.max_seq_length)

    def _dataset(self, x, y=None, sample_weight=None, batch_size=None, **options):
        from keras_bert_impl.training.real_tokens import cut_padding

        if self.long_text.mode == WINDOWS:
            dataset = window_dataset(x, y, sample_weight, batch_size=batch_size or 32, preprocess=self._long_text_rows,
                                     seed=self.seed, **options)
        else:
            preprocess = self.preprocessor if self.long_text.mode == CUT else lambda x: self._long_text_rows(x)[0]
            dataset = text_dataset(x, y, sample_weight, batch_size=batch_size or 32, preprocess=preprocess,
                                   seed=self.seed, **options)
        return cut_padding(dataset, self._bucket_size()) if self.real_tokens_only else dataset

    def _long_text_rows(self, texts):
        """`(inputs, text_index)` of [n] single texts as `long_text` reads them (`tokenization.long_text`)."""
        if isinstance(texts, tuple):
            raise ValueError(f"long_text={self.long_text.mode} reads single texts; text pairs are cut "
                             "(long_text='cut')")
        return long_text_inputs(self.preprocessor, texts, self.long_text)

    def _long_text_arrays(self, texts):
        """`_long_text_rows` as NumPy: `({name: [rows, max_seq_length]}, text_index [rows])`."""
        inputs, text_index = self._long_text_rows(texts)
        return {name: value.numpy() for name, value in inputs.items()}, text_index.numpy()

    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None,
            validation_data=None, shuffle=True, sample_weight=None, steps_per_epoch=None, validation_split=0.0,
            **kwargs):
        """Keras `fit` on raw texts (a list, a pair of lists, or a dataset of strings).

        Arrays are shuffled with the model's `seed`, repeated and cut into
        full batches, as the original's input function; `steps_per_epoch`
        defaults to one pass. `validation_split` holds out the last part of
        the arrays, before shuffling, as Keras does.
        """
        check_count(batch_size, "batch_size")
        check_count(epochs, "epochs")
        if self._original_recipe is None:  # Compiled with its optimizer: refused before a pipeline is traced.
            self._check_schedule_left()
        in_memory = not _is_dataset(x)
        if in_memory:
            texts = text_tensor(x)
            count = num_texts(texts)
            if validation_split and validation_data is None:
                texts, y, sample_weight, validation_data = _split_off(texts, y, sample_weight, validation_split)
                count = num_texts(texts)
            if count == 0:
                raise ValueError("fit needs at least one text")
            if y is not None and self.multi_label:
                from keras_bert_impl.tasks.multi_label import check_multi_hot

                check_multi_hot(label_array(y, count), self.num_classes)
            elif y is not None and self.num_classes > 1:  # Checked before any step: out of range fails after one.
                check_class_ids(label_array(y, count), self.num_classes)
            batch_size = batch_size or 32
            if self.long_text.mode == WINDOWS:  # Every window a training example with its text's label.
                x, count = self._window_training_set(texts, y, sample_weight, batch_size, shuffle)
            else:
                x = self._dataset(texts, y, sample_weight, batch_size, shuffle=shuffle, repeat=True,
                                  drop_remainder=True, tokenize=self._tokenize_at_once(count))
            steps_per_epoch = steps_per_epoch or max(1, count // batch_size)
            y = sample_weight = None
        else:
            _check_no_arrays_beside(x, y, sample_weight, validation_split, "fit")
            check_labelled(x, "fit")
            x = self._dataset(x, batch_size=batch_size, shuffle=shuffle)
        if validation_data is not None:
            validation_data = _unpack(validation_data)
            tokenize = None if _is_dataset(validation_data[0]) else self._tokenize_at_once(
                num_texts(text_tensor(validation_data[0])))
            validation_data = self._dataset(*validation_data, batch_size=batch_size, tokenize=tokenize)
        if self._original_recipe is not None:
            steps = steps_per_epoch or int(x.cardinality())
            if steps < 1:
                raise ValueError("fit with the original optimizer needs a dataset of known length or steps_per_epoch")
            self._compile_original_optimizer(steps * (epochs - kwargs.get("initial_epoch", 0)))
        return super().fit(x, epochs=epochs, verbose=verbose, callbacks=callbacks, validation_data=validation_data,
                           steps_per_epoch=steps_per_epoch, shuffle=False, **kwargs)  # `_dataset` shuffled it

    def _tokenize_at_once(self, count):
        """`text_dataset`'s `tokenize` for `count` in-memory texts, or None to tokenize batch by batch.

        Texts in memory are tokenized once, before the first epoch, where
        their ids fit in `MAX_TOKENIZED_POSITIONS`: a map of the
        preprocessor traces the tokenizer's graph for each dataset and
        optimises it again with each epoch's iterator (fit with
        validation_data: both), and tokenizes the same texts every epoch.
        """
        if self.long_text.mode != CUT or count * self.preprocessor.max_seq_length > MAX_TOKENIZED_POSITIONS:
            return None
        return functools.partial(tokenized, self.preprocessor)

    def _window_training_set(self, texts, y, sample_weight, batch_size, shuffle):
        """`(dataset, num_windows)`: the windows of `texts`, each with its text's label (and weight),
        shuffled as windows, repeated, in full batches."""
        import tensorflow as tf

        from keras_bert_impl.data.pipeline_options import without_autotune_thread
        from keras_bert_impl.training.real_tokens import cut_padding

        if y is None:
            raise ValueError("fit needs y")
        count = num_texts(texts)
        inputs, text_index = self._long_text_arrays(texts)
        parts = [inputs] + [label_array(v, count, name)[text_index]
                            for v, name in ((y, "y"), (sample_weight, "sample_weight")) if v is not None]
        dataset = tf.data.Dataset.from_tensor_slices(tuple(parts))
        if shuffle:
            dataset = dataset.shuffle(len(text_index), seed=self.seed, reshuffle_each_iteration=True)
        dataset = dataset.repeat().batch(batch_size, drop_remainder=True)
        dataset = without_autotune_thread(dataset.prefetch(tf.data.AUTOTUNE))
        return (cut_padding(dataset, self._bucket_size()) if self.real_tokens_only else dataset), len(text_index)

    def _check_schedule_left(self):
        """Raises where the optimizer's warmup-and-decay schedule has ended."""
        from keras_bert_impl.training.optimization import WarmupLinearDecay

        optimizer = getattr(self, "optimizer", None)  # None before compile: Keras' fit says so
        optimizer = getattr(optimizer, "inner_optimizer", optimizer)
        schedule = getattr(optimizer, "_learning_rate", None)
        if not isinstance(schedule, WarmupLinearDecay) or not optimizer.built:
            return
        step = int(optimizer.iterations.numpy())
        if step >= schedule.num_train_steps:
            raise ValueError(
                f"the learning rate has decayed to 0: the optimizer's schedule ended at step "
                f"{schedule.num_train_steps} and this model is at step {step}, so this fit would not change a "
                "weight. compile() again to fine-tune over this fit's steps, or compile(num_train_steps=N) "
                "before the first fit to spread one schedule over several fit calls")

    def evaluate(self, x=None, y=None, batch_size=None, sample_weight=None, **kwargs):
        """Keras `evaluate` on raw texts."""
        check_count(batch_size, "batch_size")
        if kwargs.get("_use_cached_eval_dataset"):  # fit's validation: already preprocessed
            return super().evaluate(x, y, batch_size=batch_size, sample_weight=sample_weight, **kwargs)
        if _is_dataset(x):
            _check_no_arrays_beside(x, y, sample_weight, 0.0, "evaluate")
            check_labelled(x, "evaluate")
        elif num_texts(text_tensor(x)) == 0:
            raise ValueError("evaluate needs at least one text")
        if self.long_text.mode == WINDOWS:
            return self._evaluate_pooled(x, y, sample_weight, batch_size, **kwargs)
        # Texts are tokenized once, as `predict` tokenizes them, not in a map that traces the tokenizer again.
        tokenize = None if _is_dataset(x) else self._tokenize_at_once(num_texts(text_tensor(x)))
        return super().evaluate(self._dataset(x, y, sample_weight, batch_size, tokenize=tokenize), **kwargs)

    def _evaluate_pooled(self, x, y, sample_weight, batch_size, return_dict=False, verbose="auto", **kwargs):
        """`evaluate` with windows: the compiled loss and metrics of each text's pooled logits."""
        import tensorflow as tf

        if _is_dataset(x):
            x, y, sample_weight = _dataset_arrays(x)
        texts = text_tensor(x)
        count = num_texts(texts)
        if y is None:
            raise ValueError("evaluate needs y")
        del kwargs  # Keras' steps and callbacks: the windows are predicted, then scored at once.
        logits = tf.constant(self._pooled_logits(texts, batch_size, verbose=verbose), tf.float32)
        y = tf.constant(label_array(y, count))
        weights = None if sample_weight is None else tf.constant(label_array(sample_weight, count, "sample_weight"))
        self.reset_metrics()
        loss = self.compute_loss(x=None, y=y, y_pred=logits, sample_weight=weights, training=False)
        results = {name: float(value) for name, value in self.compute_metrics(None, y, logits, weights).items()}
        results["loss"] = float(loss)
        return results if return_dict else self._flatten_metrics_in_order(results)

    def _pooled_logits(self, texts, batch_size, **kwargs):
        """[n, num_classes] logits of [n] texts: each text's windows' pooled (float64)."""
        inputs, text_index = self._long_text_arrays(texts)
        logits = predict_token_ids(self, inputs, batch_size, cut=self.real_tokens_only, description="windows",
                                   **kwargs)
        return pool_window_logits(logits, text_index, num_texts(texts), self.long_text.window_pooling)

    def predict(self, x, batch_size=None, **kwargs):
        """Class probabilities, float32 [num_texts, num_classes] (the score
        [num_texts] for regression; each label's own probability with
        `multi_label`). `x`: a list of texts, one text, a tuple
        `(texts_a, texts_b)` of pairs, or a dataset. With
        `long_text="windows"`, of each text's windows' pooled logits."""
        from keras_bert_impl.probabilities import softmax

        check_count(batch_size, "batch_size")
        if _is_dataset(x) and self.long_text.mode == WINDOWS:
            x = _dataset_arrays(x)[0]  # Its texts, each pooled over its windows below.
        if _is_dataset(x):
            logits = super().predict(self._dataset(x, batch_size=batch_size), **kwargs)
        else:
            texts = text_tensor(x)
            if num_texts(texts) == 0:
                logits = np.zeros((0, self.num_classes), np.float32)
            elif self.long_text.mode == WINDOWS:
                logits = self._pooled_logits(texts, batch_size, **kwargs)
            elif self.long_text.mode == HEAD_TAIL:
                logits = predict_token_ids(self, self._long_text_arrays(texts)[0], batch_size,
                                           cut=self.real_tokens_only, **kwargs)
            else:
                # Tokenized once for all texts (mapping in tf.data would
                # rebuild the tokenizer graph per call), then predicted batch
                # by batch, each cut after its longest row with real_tokens_only.
                logits = predict_token_ids(self, tokenized(self.preprocessor, texts), batch_size,
                                           cut=self.real_tokens_only, **kwargs)
        if self.multi_label:
            from keras_bert_impl.tasks.multi_label import sigmoid

            return sigmoid(logits).astype(np.float32)
        if self.num_classes == 1:
            return np.asarray(logits, np.float32)[:, 0]
        return softmax(logits).astype(np.float32)

    def predict_labels(self, x, batch_size=None, **kwargs):
        """With `multi_label`: bool [num_texts, num_classes], each label's probability at or over `threshold`.

        Raises:
            ValueError: the model is not `multi_label` (`predict`'s argmax is its answer).
        """
        if not self.multi_label:
            raise ValueError("predict_labels is for a multi_label classifier; take predict(x).argmax(-1)")
        return self.predict(x, batch_size=batch_size, **kwargs) >= np.asarray(self.threshold, np.float32)

    def tune_threshold(self, x, y, batch_size=None, grid=None, **kwargs):
        """Sets `threshold` to each label's threshold that maximises its F1 on `(x, y)` (a dev set); returns it.

        The thresholds are `data.multi_label.tune_thresholds` of `predict(x)`:
        of equal F1 the one nearest 0.5; a label without a positive text in
        `y` keeps 0.5. `save_release` records them, `export` answers with them.

        Args:
            x: Texts, as `predict` takes them.
            y: 0/1 [num_texts, num_classes], the true label sets.
            batch_size: Of `predict`.
            grid: The thresholds tried (default 0.05, 0.10, ..., 0.95).
            **kwargs: Passed to `predict`.

        Returns:
            The thresholds, one float per label.

        Raises:
            ValueError: the model is not `multi_label`; `y` is not 0/1 rows
                of its labels, one per text.
        """
        from keras_bert_impl.data.multi_label import DEFAULT_THRESHOLD_GRID, tune_thresholds
        from keras_bert_impl.tasks.multi_label import check_multi_hot

        if not self.multi_label:
            raise ValueError("tune_threshold is for a multi_label classifier")
        probabilities = self.predict(x, batch_size=batch_size, **kwargs)
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[0] != probabilities.shape[0]:
            raise ValueError(f"y has {y.shape[0]} rows for {probabilities.shape[0]} texts")
        check_multi_hot(y, self.num_classes)
        self.threshold = tune_thresholds(probabilities, y, DEFAULT_THRESHOLD_GRID if grid is None else grid)
        return self.threshold

    def get_config(self):
        config = super().get_config()
        config.pop("num_labels")
        # `real_tokens_only` below decides on the machine that loads the model
        # (off where a GPU is seen), as the constructor does.
        config.pop("real_tokens_only_layers", None)
        return {
            **config,
            "num_classes": self.num_classes,
            "preprocessor": keras.layers.serialize(self.preprocessor),
            "learning_rate": self.learning_rate,
            "warmup_proportion": self.warmup_proportion,
            "seed": self.seed,
            "real_tokens_only": self.real_tokens_only,
            "label_names": None if self.label_names is None else list(self.label_names),
            "multi_label": self.multi_label,
            "threshold": self.threshold if np.ndim(self.threshold) == 0 else list(self.threshold),
            "long_text": self.long_text.mode,
            "head_tokens": self.long_text.head_tokens,
            "window_stride": self.long_text.window_stride,
            "window_pooling": self.long_text.window_pooling,
        }


def _is_dataset(x):
    import tensorflow as tf

    return isinstance(x, tf.data.Dataset)


def _split_off(texts, y, sample_weight, validation_split):
    """`(texts, y, sample_weight)` less their last `validation_split`, and that part as validation data."""
    import math

    if not 0.0 < validation_split < 1.0:
        raise ValueError(f"validation_split must lie in (0, 1), got {validation_split}")
    if y is None:
        raise ValueError("validation_split needs y")
    count = num_texts(texts)
    at = int(math.ceil(count * (1.0 - validation_split)))  # As Keras: the last samples, before shuffling.

    def part(value, piece):
        if value is None:
            return None
        if isinstance(value, tuple):
            return tuple(part(v, piece) for v in value)
        return value[:at] if piece == 0 else value[at:]

    y, sample_weight = np.asarray(y), None if sample_weight is None else np.asarray(sample_weight)
    validation = tuple(v for v in (part(texts, 1), part(y, 1), part(sample_weight, 1)) if v is not None)
    return part(texts, 0), part(y, 0), part(sample_weight, 0), validation


def _check_no_arrays_beside(dataset, y, sample_weight, validation_split, method):
    """A dataset carries its labels and weights itself, as in Keras."""
    given = [name for name, value in (("y", y), ("sample_weight", sample_weight)) if value is not None]
    if validation_split:
        given.append("validation_split")
    if given:
        raise ValueError(f"{method}: {' and '.join(given)} cannot be given with a dataset; the dataset's elements "
                         "carry labels and weights: (texts, labels[, sample_weights])")


def _dataset_arrays(dataset):
    """`(texts, labels, sample_weights)` of a dataset of texts, `(texts, labels)` or `(texts, labels,
    weights)`, batched or not, read whole (None where the elements lack them); texts as a [n] tensor."""
    import tensorflow as tf

    parts = None
    for element in dataset:
        element = element if isinstance(element, tuple) else (element,)
        if isinstance(element[0], tuple) or (len(element) == 2 and element[1].dtype == tf.string):
            raise ValueError("long_text reads single texts; this dataset holds text pairs")
        element = [tf.reshape(part, [-1]) if part.shape.rank == 0 else part for part in element]
        parts = [[] for _ in element] if parts is None else parts
        for collected, part in zip(parts, element):
            collected.append(part.numpy())
    if parts is None:
        return tf.constant([], tf.string), None, None
    texts, *rest = [np.concatenate(collected) for collected in parts]
    rest += [None] * (2 - len(rest))
    return tf.constant(texts, tf.string), rest[0], rest[1]


def _unpack(data):
    if _is_dataset(data):
        return (data,)
    return tuple(data)


def release_head_classes(path):
    """The classes of a release's fine-tuned classifier head (`output_weights`: [classes, hidden]).

    Raises:
        ValueError: the release has no such head (a pre-trained release).
        CheckpointError: its checkpoint cannot be read.
    """
    from keras_bert_impl.checkpoints.original import open_checkpoint
    from keras_bert_impl.checkpoints.sources import find_release

    checkpoint, kernel = find_release(path).checkpoint, CLASSIFIER.head_variables[0]
    shape = open_checkpoint(checkpoint)[1].get_variable_to_shape_map().get(kernel)
    if shape is None:
        raise ValueError(f"{checkpoint}: no fine-tuned classifier head ({kernel}); give num_classes for a new one")
    return int(shape[0])


def export_with_preprocessor(model, export_base, **options):
    """Exports a Python task model that carries its preprocessor for TF Serving; returns the version directory.

    The export's in-graph tokenizer is the preprocessor's (its vocabulary,
    or a variant's tokenizer files, written to a scratch directory), with
    its lower-casing and `max_seq_length`; the task is `model.spec`'s.

    Args:
        model: A `TextClassifier`, `MultipleChoice`, ...: a task model with
            a `preprocessor` and a `spec`.
        export_base: `saved_models/<name>`; versions are written below it.
        **options: `serving.export.ExportOptions` fields (`version`,
            `precision`, `verify`, `optimize_for`, ...).
    """
    from keras_bert_impl.serving.export import ExportOptions, export_saved_model
    from keras_bert_impl.tokenization.preprocessor import shared_tables

    preprocessor = model.preprocessor
    options = ExportOptions(do_lower_case=preprocessor.do_lower_case, max_seq_length=preprocessor.max_seq_length,
                            tables=shared_tables(), **options)
    with tempfile.TemporaryDirectory(prefix="vocab-") as work:
        vocab_file = os.path.join(work, "vocab.txt")
        if hasattr(preprocessor, "write_tokenizer_files"):  # a variant's `TextPreprocessor`
            preprocessor.write_tokenizer_files(work)
            from keras_bert_impl.tokenization.from_files import KIND_FILES

            vocab_file = os.path.join(work, dict(KIND_FILES)[preprocessor.tokenizer_files["kind"]][0])
        else:
            with open(vocab_file, "w", encoding="utf-8") as f:
                f.write("".join(f"{token}\n" for token in preprocessor.vocabulary))
        return export_saved_model(model, model.spec.name, vocab_file, export_base, options, log=logger.info)


def load_from_release(cls, path, max_seq_length, do_lower_case, fresh=(), **kwargs):
    """`cls(config, preprocessor=..., **kwargs)` with the weights of a release.

    The release's tokenizer files pick the preprocessing: a WordPiece
    `vocab.txt` (BERT, DistilBERT) `BertPreprocessor`, exactly as before the
    variants; RoBERTa's `vocab.json` + `merges.txt` or ALBERT's
    `spiece.model` a `TextPreprocessor`, which packs with the variant's
    special tokens. A release may lack the pooler (Hugging Face's
    `*ForMaskedLM`): a task that has one starts it fresh, with a warning
    where the task reads it (`tasks.classifier.variant_fresh_variables`).

    Args:
        cls: A Python task model class.
        path: A release directory or checkpoint prefix, or a named source.
        max_seq_length: Of the preprocessor; at most the config's
            `max_sequence_length` (RoBERTa: its position rows less 2).
        do_lower_case: None follows the release.
        fresh: Variable names the release may lack (a new head, or a
            part the task does not read).
        **kwargs: Passed to `cls`.
    """
    from keras_bert_impl.checkpoints.original import load_original_checkpoint
    from keras_bert_impl.checkpoints.release import infer_do_lower_case
    from keras_bert_impl.checkpoints.sources import find_release
    from keras_bert_impl.config import BertConfig
    from keras_bert_impl.io import check_max_seq_length
    from keras_bert_impl.tasks.classifier import variant_fresh_variables
    from keras_bert_impl.tokenization import check_vocab_fits, load_vocab, validate_case_matches_checkpoint
    from keras_bert_impl.tokenization.from_files import (
        WORDPIECE,
        release_do_lower_case,
        release_tokenizer,
        vocab_file_kind,
    )
    from keras_bert_impl.tokenization.text_preprocessor import release_preprocessor

    files = find_release(path)
    config = BertConfig.from_json_file(files.bert_config_file)
    check_max_seq_length(max_seq_length, config, files.bert_config_file)
    if vocab_file_kind(files.vocab_file) == WORDPIECE:
        if do_lower_case is None:
            do_lower_case = infer_do_lower_case(files.vocab_file, files.checkpoint)
        validate_case_matches_checkpoint(do_lower_case, files.checkpoint)
        check_vocab_fits(load_vocab(files.vocab_file), files.vocab_file, config.vocab_size, files.bert_config_file)
    else:
        if do_lower_case is None:
            do_lower_case = release_do_lower_case(os.path.dirname(files.vocab_file))
        release_tokenizer(files.vocab_file, config.vocab_size, do_lower_case, files.bert_config_file)  # checks
    preprocessor = release_preprocessor(files.vocab_file, do_lower_case=do_lower_case, max_seq_length=max_seq_length,
                                        masks_in_text=kwargs.pop("masks_in_text", False))
    model = cls(config, preprocessor=preprocessor, **kwargs)
    pooler = variant_fresh_variables(config)
    model.load_report = load_original_checkpoint(model, files.checkpoint, allow_fresh=tuple(fresh) + pooler)
    logger.info("%s: %s", files.checkpoint, model.load_report.summary())
    started = sorted(name for name in model.load_report.fresh
                     if name.startswith(pooler) and not name.startswith(tuple(fresh)))
    if started:
        logger.warning("%s: the release has no pooler (%s): it starts fresh, so fine-tune before reading the "
                       "pooled output", files.checkpoint, ", ".join(started))
    return model


__all__ = ["TextClassifier", "export_with_preprocessor", "load_from_release"]
