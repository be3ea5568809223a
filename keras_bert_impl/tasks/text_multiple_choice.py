"""`MultipleChoice`: pick the most plausible of a context's choices (SWAG), on raw text.

The Python face of `bert-run-multiple-choice`: a `BertMultipleChoice` that
carries its `BertPreprocessor`, so `fit` and `predict` take a context per
question and its list of choices, and tokenize every (context, choice) pair
in-graph exactly as `FullTokenizer`.
"""

import keras
import numpy as np

from keras_bert_impl.models.multiple_choice import BertMultipleChoice
from keras_bert_impl.tasks.classifier import classifier_config
from keras_bert_impl.tasks.multiple_choice import MULTIPLE_CHOICE
from keras_bert_impl.tasks.text_data import check_class_ids, check_count, predict_token_ids, text_tensor, tokenized

_PACKAGE = "keras_bert_impl"


@keras.saving.register_keras_serializable(package=_PACKAGE)
class MultipleChoice(BertMultipleChoice):
    """Multiple choice on raw text: `[n, num_choices]` probabilities for `n` contexts.

    `x` is `(contexts, choices)`: `contexts` a list of `n` strings and
    `choices` a list of `n` lists of strings, each as long as the others
    (any number of choices); `y` the right choice's index per context.
    `compile()` with no arguments is the original recipe (AdamW, warmup then
    linear decay to zero over the steps of the next `fit`, sparse
    categorical cross-entropy over the choices).

    Args:
        bert_config: A `BertConfig` (or its dict).
        preprocessor: The `BertPreprocessor` of the model's vocabulary.
        dropout_rate: Dropout on the pooled output (the original's 0.1).
        learning_rate: Peak learning rate of the default optimizer.
        warmup_proportion: Fraction of the steps with linear warmup.
        dtype: Keras dtype policy.

    Example:
    >>> from keras_bert_impl.config import BertConfig
    >>> from keras_bert_impl.tokenization.preprocessor import BertPreprocessor
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "he", "ate", "flew", "sang"]
    >>> config = BertConfig(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=1,
    ...                     num_attention_heads=2, intermediate_size=16)
    >>> model = MultipleChoice(config, BertPreprocessor(vocab, max_seq_length=8))
    >>> model.compile()
    >>> _ = model.fit((["he"] * 4, [["ate", "flew", "sang"]] * 4), [0] * 4, batch_size=2, verbose=0)
    >>> model.predict((["he"], [["ate", "flew", "sang"]]), verbose=0).shape
    (1, 3)
    """

    def __init__(self, bert_config, preprocessor, dropout_rate=0.1, learning_rate=5e-5, warmup_proportion=0.1,
                 dtype=None, name="multiple_choice", **kwargs):
        if isinstance(preprocessor, dict):
            preprocessor = keras.layers.deserialize(preprocessor)
        super().__init__(classifier_config(bert_config), dropout_rate=dropout_rate, dtype=dtype, name=name,
                         **kwargs)
        self.preprocessor = preprocessor
        self.learning_rate = learning_rate
        self.warmup_proportion = warmup_proportion
        self._original_recipe = None

    @property
    def spec(self):
        """The task spec, `multiple_choice`."""
        return MULTIPLE_CHOICE

    @classmethod
    def from_release(cls, path, max_seq_length=128, do_lower_case=None, **kwargs):
        """A multiple-choice model on a release's encoder: its fine-tuned head where it has one, else a fresh one.

        Args:
            path: A release directory or checkpoint prefix in one (a
                pre-trained release, or `bert-run-multiple-choice`'s output).
            max_seq_length: Padded length of each (context, choice) pair.
            do_lower_case: None follows the release.
            **kwargs: Passed to the constructor.

        Returns:
            The model; `model.load_report` says what was loaded and what is new.

        Raises:
            CheckpointError: the release's head is another task's
                (`output_weights` of more than one row).
        """
        from keras_bert_impl.tasks.text_classifier import load_from_release

        return load_from_release(cls, path, max_seq_length, do_lower_case, fresh=MULTIPLE_CHOICE.head_variables,
                                 **kwargs)

    def save_release(self, path, global_step=None):
        """Writes an original-layout release (what `--init_checkpoint` takes); returns the prefix."""
        from keras_bert_impl.checkpoints.release import write_release

        optimizer = getattr(self, "optimizer", None)
        if global_step is None and optimizer is not None and optimizer.built:
            global_step = int(optimizer.iterations.numpy())
        return write_release(self, path, self.bert_config, self.preprocessor.vocabulary, global_step,
                             write_tokenizer=getattr(self.preprocessor, "write_tokenizer_files", None))

    def export(self, export_base, version=None, precision=None, verify=True, optimize_for="portable"):
        """Exports for TF Serving under `export_base/<version>/`; returns that directory.

        The SavedModel's `serving_default` takes `context` (string
        [batch]) and `choices` (string [batch, num_choices]), packs each
        (context, choice) pair in-graph as this model's preprocessing does,
        and answers `probabilities` (float32 [batch, num_choices]) and
        `choice` (int32 [batch], the most probable); `serve_ids` takes
        `input_ids`, `input_mask`, `segment_ids` int32 [batch, num_choices,
        seq_length] (`encode`'s). By default float32 in stock TensorFlow
        ops that TF Serving runs on any CPU or GPU; `precision` ("float32",
        "bfloat16" or "auto") and `optimize_for="this_cpu"` as for
        `TextClassifier.export` (int8 is for tasks whose requests are
        texts). With `verify` the version is published only once it loads
        as TF Serving loads it and answers its warmup requests as this model
        does (`serving.verification`).

        Raises:
            ExportError: an existing `version`, precision "int8", or a
                version that does not answer as the model.
        """
        from keras_bert_impl.tasks.text_classifier import export_with_preprocessor

        return export_with_preprocessor(self, export_base, version=version, precision=precision, verify=verify,
                                        optimize_for=optimize_for)

    def encode(self, x):
        """`{input_ids, input_mask, segment_ids}` int32 [n, num_choices, max_seq_length] of `(contexts, choices)`.

        Raises:
            ValueError: `x` is not a pair of lists, the counts differ, or the
                contexts have different numbers of choices (naming the first).
            TypeError: a context or choice is not a string.
        """
        if not (isinstance(x, tuple) and len(x) == 2):
            raise ValueError("x must be (contexts, choices): a list of contexts and a list of choice lists")
        contexts, choices = x
        contexts = [contexts] if isinstance(contexts, (str, bytes)) else list(contexts)
        if contexts and choices and isinstance(choices[0], (str, bytes)) and len(contexts) == 1:
            choices = [choices]  # one question: its choices as one list
        choices = [list(row) for row in choices]
        if len(contexts) != len(choices):
            raise ValueError(f"{len(contexts)} contexts but {len(choices)} lists of choices")
        if not contexts:
            raise ValueError("no contexts given")
        num_choices = len(choices[0])
        for index, row in enumerate(choices):
            if len(row) != num_choices:
                raise ValueError(f"context {index} has {len(row)} choices, context 0 has {num_choices}: every "
                                 "context needs as many")
        if num_choices < 2:
            raise ValueError(f"a question needs at least 2 choices, got {num_choices}")
        pairs = (text_tensor([c for c in contexts for _ in range(num_choices)]),
                 text_tensor([choice for row in choices for choice in row]))
        features = tokenized(self.preprocessor, pairs)  # [n * num_choices, max_seq_length]
        return {name: value.reshape(len(contexts), num_choices, -1) for name, value in features.items()
                if name in ("input_ids", "input_mask", "segment_ids")}

    def compile(self, optimizer=None, loss=None, metrics=None, **kwargs):
        """Keras `compile`; with no optimizer, the original's, sized by the next `fit`."""
        loss = loss or keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        metrics = ["accuracy"] if metrics is None else metrics
        self._original_recipe = None
        if optimizer is None:
            self._original_recipe = dict(loss=loss, metrics=metrics, **kwargs)
            optimizer = "adam"  # A stand-in: the schedule needs the steps, which only `fit` knows.
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", **kwargs):
        """Keras `fit` on `(contexts, choices)` and the right choices' indices `y`.

        Raises:
            ValueError: a label is not the index of one of the choices.
        """
        check_count(batch_size, "batch_size")
        check_count(epochs, "epochs")
        features = self.encode(x)
        labels = np.asarray(y)
        check_class_ids(labels, features["input_ids"].shape[1])
        batch_size = batch_size or 32
        if self._original_recipe is not None:
            from keras_bert_impl.training.optimization import create_optimizer

            steps = -(-len(labels) // batch_size) * epochs
            recipe, self._original_recipe = self._original_recipe, None
            super().compile(optimizer=create_optimizer(self.learning_rate, steps,
                                                       int(steps * self.warmup_proportion)), **recipe)
        return super().fit(features, labels, batch_size=batch_size, epochs=epochs, verbose=verbose, **kwargs)

    def predict(self, x, batch_size=None, **kwargs):
        """Choice probabilities, float32 [n, num_choices], of `(contexts, choices)`."""
        from keras_bert_impl.probabilities import softmax

        check_count(batch_size, "batch_size")
        logits = predict_token_ids(self, self.encode(x), batch_size, cut=False, description="questions", **kwargs)
        return softmax(logits).astype(np.float32)

    def get_config(self):
        return {
            **super().get_config(),
            "preprocessor": keras.layers.serialize(self.preprocessor),
            "learning_rate": self.learning_rate,
            "warmup_proportion": self.warmup_proportion,
        }


__all__ = ["MultipleChoice"]
