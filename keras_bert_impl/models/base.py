"""What every model here shares: built from a `BertConfig`, serialized by it."""

import keras

from keras_bert_impl.errors import TrainingEnvironmentError
from keras_bert_impl.hardware import FROZEN_WEIGHTS_ENV, onednn_assumes_frozen_weights
from keras_bert_impl.layers.onednn_forms import set_onednn_forms


def sequence_inputs(*names):
    """int32 `keras.Input`s of shape [batch, seq], named and keyed by `names`.

    Example:
    >>> sorted(sequence_inputs("input_ids", "input_mask"))
    ['input_ids', 'input_mask']
    """
    return {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in names}


def refuse_training_with_frozen_weights(environ=None):
    """Raises where this process's oneDNN products would keep the first step's weights for every step.

    Args:
        environ: The environment read; default this process's.

    Raises:
        TrainingEnvironmentError: `TF_ONEDNN_ASSUME_FROZEN_WEIGHTS` is on
            with the oneDNN rewrites (`hardware.onednn_assumes_frozen_weights`).
    """
    if onednn_assumes_frozen_weights(environ):
        raise TrainingEnvironmentError(
            f"{FROZEN_WEIGHTS_ENV} is set in this process's environment: TensorFlow's oneDNN products would go on "
            f"computing with the first step's weights. It is a setting for a serving process only: train in a "
            f"process started without it (TensorFlow reads it once, at its first product).")


# What Keras' functional model takes besides `dtype` (its `Functional.__init__`).
_FUNCTIONAL_MODEL_ARGUMENTS = ("inputs", "outputs", "name", "trainable")


class BertConfigModel(keras.Model):
    """Base of our functional models: `get_config` holds the `BertConfig` (as
    the dict of `bert_config.json`), the dtype policy, name, trainability,
    the layers frozen and the encoders set to real tokens only after
    construction; subclasses add their own constructor arguments to it.

    A subclass builds its layers with its `dtype` and passes the same `dtype`
    here: Keras's functional model keeps no policy of its own, so this is
    where the one the layers were built with (a `mixed_bfloat16` policy, a
    per-layer `DTypePolicyMap`, or the global policy at build time for None)
    is kept for `get_config` and `.keras` files.

    Building one asks nothing of the machine. When Keras' own `predict` or
    `evaluate` graphs are made, its LayerNorms and attention get the forms the
    inference plan chooses for them (`inference.plan.keras_graph_forms`: on
    where traced graphs run on TensorFlow's oneDNN kernels), as the plan's
    functions do; eager calls, training and XLA keep Keras' computation
    (`layers.onednn_forms`).

    Args:
        dtype: The dtype policy the subclass built its layers with.
        **kwargs: The functional model's (`inputs`, `outputs`, `name`,
            `trainable`); any other is refused (`TypeError` naming it), as
            Keras' own constructors refuse one.

    Example:
    >>> from keras_bert_impl.config import BertConfig
    >>> from keras_bert_impl.models.bert_model import BertModel
    >>> config = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
    ...                     num_attention_heads=2, intermediate_size=16)
    >>> model = BertModel.from_config(BertModel(config, dtype="mixed_bfloat16").get_config())
    >>> model.encoder.compute_dtype, model.encoder.variable_dtype
    ('bfloat16', 'float32')
    """

    def __init__(self, dtype=None, **kwargs):
        # Keras' functional model drops any other keyword without a word: a misspelt argument
        # (`max_seq_lenght=128`) of a subclass or its `from_release` would be ignored.
        unknown = sorted(set(kwargs) - set(_FUNCTIONAL_MODEL_ARGUMENTS))
        if unknown:
            raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument {unknown[0]!r}")
        super().__init__(**kwargs)
        self.built_with_dtype = keras.dtype_policies.get(dtype) if dtype is not None else keras.config.dtype_policy()
        if self.built_with_dtype.name == "mixed_float16":
            # Keras's `compile` wraps the optimizer in a `LossScaleOptimizer`
            # when the model's policy is mixed_float16; float16 gradients
            # underflow without it. The functional model's own policy (the
            # float32 default) only casts float inputs, and ours are ints.
            self._dtype_policy = self.built_with_dtype

    def _plan_keras_graphs(self):
        """The LayerNorm and softmax forms that the inference plan chooses for Keras' own inference graphs."""
        from keras_bert_impl.inference.plan import keras_graph_forms

        set_onednn_forms(self, keras_graph_forms())

    def make_predict_function(self, force=False):
        """Keras' predict function, its graph traced in the plan's forms (`_plan_keras_graphs`)."""
        self._plan_keras_graphs()
        return super().make_predict_function(force)

    def make_test_function(self, force=False):
        """Keras' test function, its graph traced in the plan's forms (`_plan_keras_graphs`)."""
        self._plan_keras_graphs()
        return super().make_test_function(force)

    def make_train_function(self, force=False):
        """Keras' train function, refused where a serving-only setting would make its steps wrong.

        Raises:
            TrainingEnvironmentError: see `refuse_training_with_frozen_weights`.
        """
        refuse_training_with_frozen_weights()
        return super().make_train_function(force)

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """Keras `predict`. A dict of arrays (NumPy or tensors, `input_mask`
        among them) with no `steps` or `callbacks`, outside a distribution
        strategy, goes batch by batch through one traced function of the
        model (`inference.array_prediction.predict_on_real_tokens` at the full
        width): Keras' outputs without the `tf.data` pipeline and iterator
        Keras builds on every call (one MiniLM example: 75 against 15 ms,
        docs/BENCHMARKS.md), nor their autotuning thread
        (docs/FINDINGS.md). Anything else is Keras' own `predict`.

        Args:
            x, batch_size, verbose, steps, callbacks: As Keras'
                `Model.predict`.

        Returns:
            The outputs for all examples, as NumPy, as Keras returns them.

        Example:
        >>> import numpy as np
        >>> from keras_bert_impl.config import BertConfig
        >>> from keras_bert_impl.models.bert_model import BertModel
        >>> model = BertModel(BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
        ...                              num_attention_heads=2, intermediate_size=16))
        >>> x = {"input_ids": np.array([[2, 5, 3, 0]]), "input_mask": np.array([[1, 1, 1, 0]]),
        ...      "segment_ids": np.zeros((1, 4), "int32")}
        >>> model.predict(x, verbose=0)["sequence_output"].shape
        (1, 4, 8)
        """
        if steps is None and not callbacks and _batch_of_arrays(x) and not self._under_a_strategy():
            from keras_bert_impl.inference.array_prediction import predict_on_real_tokens

            return predict_on_real_tokens(self, x, batch_size or 32, cut=False, verbose=verbose != 0)
        return super().predict(x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks)

    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None, steps=None,
                 callbacks=None, return_dict=False, **kwargs):
        """Keras `evaluate`. A dict of arrays (as `predict` takes), with `y`
        and `sample_weight` arrays (or nests of them) of as many rows, and no
        `steps`, is batched in order by `data.pipeline_options.array_batches`:
        the batches Keras would make, in a pipeline without tf.data's
        autotuning thread, whose release can stall the caller
        (docs/FINDINGS.md). Anything else goes to Keras as it is.

        Args:
            x, y, batch_size, verbose, sample_weight, steps, callbacks,
                return_dict, **kwargs: As Keras' `Model.evaluate`.

        Returns:
            Keras' `evaluate` result: the loss and metrics.

        Example:
        >>> import numpy as np
        >>> from keras_bert_impl.config import BertConfig
        >>> from keras_bert_impl.models.classifier import BertClassifier
        >>> model = BertClassifier(BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
        ...                                   num_attention_heads=2, intermediate_size=16), num_labels=2)
        >>> model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        >>> x = {"input_ids": np.array([[2, 5, 3, 0]]), "input_mask": np.array([[1, 1, 1, 0]]),
        ...      "segment_ids": np.zeros((1, 4), "int32")}
        >>> bool(model.evaluate(x, np.array([1]), verbose=0) > 0)  # the loss
        True
        """
        # `fit` passes its validation arrays with `_use_cached_eval_dataset`: Keras then reads its own cached
        # iterator, and x is not used.
        if (steps is None and not kwargs.get("_use_cached_eval_dataset") and _batch_of_arrays(x)
                and (y is not None or sample_weight is None)):
            from keras_bert_impl.data.pipeline_options import array_batches

            # (x,), (x, y) or (x, y, sample_weight): what Keras unpacks from a dataset's elements.
            parts = (x,) if y is None else (x, y) if sample_weight is None else (x, y, sample_weight)
            x, y, sample_weight, batch_size = array_batches(parts, batch_size or 32), None, None, None
        self._build_metrics(x)
        return super().evaluate(x, y, batch_size=batch_size, verbose=verbose, sample_weight=sample_weight,
                                steps=steps, callbacks=callbacks, return_dict=return_dict, **kwargs)

    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None, validation_split=0.0,
            validation_data=None, shuffle=True, class_weight=None, sample_weight=None, initial_epoch=0,
            steps_per_epoch=None, validation_steps=None, validation_batch_size=None, validation_freq=1):
        """Keras `fit`. A dict of arrays (as `predict` takes), with `y` and
        `sample_weight` arrays (or nests of them) of as many rows, `shuffle`
        True or False and no `steps_per_epoch`, is batched by
        `data.pipeline_options.array_epochs`: Keras' batches (a new order
        each epoch where `shuffle`, the last part of the arrays held out by
        `validation_split` before that), in a pipeline without tf.data's
        autotuning thread, whose release at every epoch's end can stall
        training (docs/FINDINGS.md). Validation arrays are batched as
        `evaluate` batches them. Anything else goes to Keras as it is.

        Args:
            x, y, batch_size, epochs, verbose, callbacks, validation_split,
                validation_data, shuffle, class_weight, sample_weight,
                initial_epoch, steps_per_epoch, validation_steps,
                validation_batch_size, validation_freq: As Keras'
                `Model.fit`.

        Returns:
            Keras' `History`.

        Raises:
            ValueError: `validation_split` leaves no row for training or
                none for validation.

        Example:
        >>> import numpy as np
        >>> from keras_bert_impl.config import BertConfig
        >>> from keras_bert_impl.models.classifier import BertClassifier
        >>> model = BertClassifier(BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
        ...                                   num_attention_heads=2, intermediate_size=16), num_labels=2)
        >>> model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        >>> x = {"input_ids": np.array([[2, 5, 3, 0]] * 4), "input_mask": np.array([[1, 1, 1, 0]] * 4),
        ...      "segment_ids": np.zeros((4, 4), "int32")}
        >>> len(model.fit(x, np.array([1, 0, 1, 0]), batch_size=2, epochs=3, verbose=0).history["loss"])
        3
        """
        if (steps_per_epoch is None and shuffle in (True, False) and _batch_of_arrays(x)
                and _arrays_of_rows((y, sample_weight), _rows(x))):
            from keras_bert_impl.data.pipeline_options import array_epochs

            batch_size = batch_size or 32
            parts = (x,) if y is None else (x, y) if sample_weight is None else (x, y, sample_weight)
            if validation_split and validation_data is None:
                parts, validation_data = _split_off_the_last(parts, validation_split)
            x, y, sample_weight = array_epochs(parts, batch_size, shuffle=shuffle), None, None
            validation_data = _validation_batches(validation_data, validation_batch_size or batch_size)
            batch_size, validation_split, shuffle = None, None, False  # the dataset's own order
        self._build_before_tracing(x)
        return super().fit(x, y, batch_size=batch_size, epochs=epochs, verbose=verbose, callbacks=callbacks,
                           validation_split=validation_split or 0.0, validation_data=validation_data,
                           shuffle=shuffle, class_weight=class_weight, sample_weight=sample_weight,
                           initial_epoch=initial_epoch, steps_per_epoch=steps_per_epoch,
                           validation_steps=validation_steps, validation_batch_size=validation_batch_size,
                           validation_freq=validation_freq)

    def _build_before_tracing(self, x):
        """Creates the compiled optimizer's variables (its slots) and the compiled metrics' before `fit` traces its
        train step.

        Keras creates them now only under a distribution strategy; otherwise
        while tracing the first step. The optimizer's slots were each lifted
        out of the graph being traced, which took a one-layer tiny
        classifier's first `fit` from 3.3 to 4.7 s of CPU; and a metric's
        variables: see `_build_metrics`. The variables, and the training, are
        the same.
        """
        if self._under_a_strategy() or not self.built:
            return
        self._build_metrics(x)
        optimizer = getattr(self, "optimizer", None)
        if optimizer is not None and not optimizer.built:
            optimizer.build(self.trainable_variables)

    def _build_metrics(self, x):
        """Builds the compiled metrics (e.g. "accuracy"'s total and count) for the dataset `x`, before `fit` or
        `evaluate` traces its step.

        Keras builds them while tracing the first step, unless under a
        distribution strategy; a variable created while tracing makes
        TensorFlow trace the whole step again, without creating any (a
        one-layer tiny classifier's first `fit`: 2.8 -> 2.1 s of CPU). Built
        as under a strategy (`Trainer._symbolic_build`): from the shapes of
        the dataset's elements and the model's output spec. Anything else
        (no dataset, no labels, a strategy) is left to Keras.
        """
        metrics = getattr(self, "_compile_metrics", None)
        if (metrics is None or metrics.built or not self.built or self._under_a_strategy()
                or not hasattr(x, "element_spec")):
            return
        import tensorflow as tf

        def symbolic(spec):
            return keras.KerasTensor(spec.shape, spec.dtype.name) if isinstance(spec, tf.TensorSpec) else None

        specs = tf.nest.map_structure(symbolic, x.element_spec)
        inputs, y, _ = keras.utils.unpack_x_y_sample_weight(specs)
        if y is None or any(spec is None for spec in tf.nest.flatten(specs)):
            return
        metrics.build(y, self.compute_output_spec(inputs, training=False))  # as its first `update_state` would

    def _under_a_strategy(self):
        import tensorflow as tf

        return tf.distribute.has_strategy() or getattr(self, "_distribute_strategy", None) is not None

    def get_config(self):
        return {
            "bert_config": self.bert_config.to_dict(),
            "dtype": keras.dtype_policies.serialize(self.built_with_dtype),
            "name": self.name,
            "trainable": self.trainable,
            # Layers frozen after construction (e.g. the encoder, for a head-only
            # fine-tune): the model is rebuilt from the config, so they are named here.
            "frozen_layers": sorted(layer.path for layer in self._flatten_layers(include_self=False)
                                    if layer.path is not None and not layer.trainable) if self.trainable else [],
            # Encoders set to compute on real tokens only after construction
            # (`inference.padding_free.set_real_tokens_only`): speed, kept too.
            "real_tokens_only_layers": sorted(
                layer.path for layer in self._flatten_layers(include_self=False)
                if layer.path is not None and getattr(layer, "real_tokens_only", False) is True
            ),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        frozen = set(config.pop("frozen_layers", ()))
        real_tokens_only = set(config.pop("real_tokens_only_layers", ()))
        model = cls(**config)
        for layer in model._flatten_layers(include_self=False):
            if layer.path in real_tokens_only:
                layer.real_tokens_only = True
        if frozen:
            # Parents before children (setting a layer's flag sets its sublayers'),
            # so an unfrozen layer inside a frozen one is unfrozen again.
            for layer in model._flatten_layers(include_self=False):
                if layer.path is not None:
                    layer.trainable = layer.path not in frozen
        return model


def _batch_of_arrays(x):
    """Whether `x` is a dict of NumPy arrays or eager tensors, all with the same number (above 0) of rows and
    an `input_mask` of [rows, seq] among them."""
    import numpy as np
    import tensorflow as tf

    if not isinstance(x, dict) or "input_mask" not in x:
        return False
    if not all(isinstance(v, (np.ndarray, tf.Tensor)) and len(v.shape) >= 1 for v in x.values()):
        return False
    rows = {int(v.shape[0]) if v.shape[0] is not None else -1 for v in x.values()}
    return len(x["input_mask"].shape) == 2 and len(rows) == 1 and rows.pop() > 0


def _rows(x):
    return int(x["input_mask"].shape[0])


def _arrays_of_rows(nest, rows):
    """Whether every leaf of `nest` (Nones skipped) is a NumPy array or eager tensor of `rows` rows."""
    import numpy as np
    import tensorflow as tf

    leaves = [leaf for leaf in tf.nest.flatten(nest) if leaf is not None]
    return all(isinstance(leaf, (np.ndarray, tf.Tensor)) and len(leaf.shape) >= 1 and leaf.shape[0] == rows
               for leaf in leaves)


def _split_off_the_last(parts, validation_split):
    """`(training parts, validation parts)`: the last `validation_split` of the rows held out, as Keras does."""
    import math

    import tensorflow as tf

    rows = _rows(parts[0])
    kept = int(math.floor(rows * (1.0 - validation_split)))
    if not 0 < kept < rows:
        raise ValueError(f"validation_split={validation_split} of {rows} examples leaves {kept} for training and "
                         f"{rows - kept} for validation: each needs at least one")
    return (tf.nest.map_structure(lambda array: array[:kept], parts),
            tf.nest.map_structure(lambda array: array[kept:], parts))


def _validation_batches(validation_data, batch_size):
    """Validation arrays `(x, y[, sample_weight])` as `evaluate` batches them; anything else as it is."""
    if not isinstance(validation_data, (tuple, list)) or not 1 <= len(validation_data) <= 3:
        return validation_data
    parts = tuple(validation_data)
    while parts and parts[-1] is None:  # (x, y, None), (x, None): what Keras unpacks the same way
        parts = parts[:-1]
    if not parts or any(part is None for part in parts) or not _batch_of_arrays(parts[0]):
        return validation_data
    if not _arrays_of_rows(parts[1:], _rows(parts[0])):
        return validation_data
    from keras_bert_impl.data.pipeline_options import array_batches

    return array_batches(parts, batch_size)
