"""The serving graph: raw text -> BERT inputs -> task outputs, all TF ops.

`BertServingModule` wraps one of our task models and an `InGraphTokenizer`;
its `tf.function`s become the SavedModel's signatures. Nothing here runs
Python of ours at serving time: TF Serving executes the traced graph.

A task whose requests are a context and its choices (`tasks.spec.CHOICE_REQUESTS`:
multiple choice) has `serving_default` with `context` (DT_STRING [batch]) and
`choices` (DT_STRING [batch, num_choices]), each (context, choice) pair
packed as a text pair, and `serve_ids` with ids [batch, num_choices,
seq_length]; the other tasks' requests are texts.

Besides the predict signatures, a classifier exports `classify` and a
regression `regress`: the tf.Example signature in the form TF Serving's
`:classify` / `:regress` methods take (tensorflow_serving/servables/
tensorflow/classifier.cc, regressor.cc). Each has the one input `inputs`
(serialized tf.Example, DT_STRING [batch]); `classify` has exactly the
outputs `classes` (DT_STRING [batch, num_labels], the label names) and
`scores` (DT_FLOAT [batch, num_labels], the probabilities), `regress` the
one output `outputs` (DT_FLOAT [batch]). TF Serving also checks the
signature's method_name, which `tf.saved_model.save` always writes as
predict: the export sets it from `SIGNATURE_METHODS` afterwards.
"""

import tensorflow as tf

from keras_bert_impl.inference.forward import PlannedModel
from keras_bert_impl.inference.padding_free import call_skipping_padding, drop_unused_padding, real_tokens_only_set_to
from keras_bert_impl.layers.graph_checks import check, ids_in_range
from keras_bert_impl.tasks.registry import exported_task_names, get_task
from keras_bert_impl.tasks.spec import CHOICE_REQUESTS
from keras_bert_impl.tokenization.in_graph import InGraphTokenizer
from keras_bert_impl.tokenization.long_text import CUT, long_text_ids, segment_pool
from keras_bert_impl.tokenization.preprocessor import pack_inputs, pack_one_text, token_ids_with_masks

CLASSIFY_METHOD_NAME = "tensorflow/serving/classify"
REGRESS_METHOD_NAME = "tensorflow/serving/regress"

# Per task, the signature TF Serving's Classify or Regress runs and its
# method_name. A request names it in `model_spec.signature_name` (REST:
# "signature_name"): left empty, TF Serving takes `serving_default`, which
# is the raw-text predict signature here.
SIGNATURE_METHODS = {
    "classifier": {"classify": CLASSIFY_METHOD_NAME},
    "regression": {"regress": REGRESS_METHOD_NAME},
}


class BertServingModule(tf.Module):
    """Signatures for one exported task model.

    Args:
        model: The Keras model (`BertClassifier`, `BertModel`,
            `BertPretrainingModel`, span-QA model), or a `PlannedModel`
            (`inference.forward.apply_plan`: the model an export's plan runs,
            with its kernels and forms; the two arguments below are then its).
        task: A task name of `tasks.registry` with serving outputs.
        tokenizer: `InGraphTokenizer` over the model's vocabulary, or a
            variant's in-graph tokenizer (`tokenization.from_files`), which
            finds the special tokens (the mask among them) in the text itself.
        max_seq_length: Padded length of every request.
        special_ids: Dict with `cls`, `sep`, `mask` ids, and `pad` (default 0).
        labels_path: `labels.txt` (one class name per line), stored as an
            asset (classifier).
        top_k: Candidates per [MASK] (fill_mask).
        max_masks: [MASK] positions scored per text (fill_mask).
        max_answer_length: Longest answer in tokens (span_qa).
        skip_padding: Run the encoder's per-token work on real tokens only
            (`padding_free.call_skipping_padding`; one graph, for a batch
            with padding or without); False: every position,
            whatever the model's own `real_tokens_only`.
        special_tokens: The variant's `tokenization.special_tokens.SpecialTokens`
            (how a pair is laid out: RoBERTa's `<s> a </s></s> b </s>` with
            segment ids all 0); None: BERT's.
        vocabulary: The tokens in id order, for a tokenizer without
            `id_to_token` (fill_mask's `top_k_tokens`).
        kernels: How the forward pass holds `model`'s Dense kernels
            (`PlannedModel.kernels`): None (its variables), an
            `inference.constant_kernels.ConstantKernels` (graph constants,
            which oneDNN packs once; the SavedModel then holds no variable of
            theirs), an `inference.packed_kernels.PackedKernels` (variables
            that oneDNN's products pack once) or an `inference.int8.Int8Kernels`.
            Either way the forward pass is one function that every
            signature calls, so the SavedModel holds it (and its kernels)
            once.
        onednn_forms: Trace the LayerNorms and softmax in the forms oneDNN
            runs as one kernel (`layers.onednn_forms`); False (the default):
            Keras' own, whatever the model's layers are set to, so the graph
            does not depend on the machine that traced it.
        long_text: How the raw-text signature (`serving_default`) reads a
            text longer than `max_seq_length`: a resolved
            `tokenization.long_text.LongTextOptions` (head + tail, or
            windows run through the model together and their logits pooled
            per text), for a task whose spec has `long_texts`; None: cut.
            Pairs and ids are read as without it.
        threshold: For a multi-label task, the probability at or over which
            a label is in `label_mask`: one number, or one per label; None:
            the model's own `threshold`, else 0.5.
    """

    def __init__(
        self, model, task, tokenizer, max_seq_length, special_ids, labels_path=None,
        top_k=5, max_masks=8, max_answer_length=30, skip_padding=True, kernels=None,
        special_tokens=None, vocabulary=None, onednn_forms=False, long_text=None, threshold=None,
    ):
        super().__init__(name=f"bert_{task}")
        self.spec = get_task(task)
        if self.spec.serving_outputs is None:
            raise ValueError(f"task {task!r} has no serving outputs; export one of {', '.join(exported_task_names())}")
        if long_text is not None and long_text.mode == CUT:
            long_text = None
        if long_text is not None and not self.spec.long_texts:
            raise ValueError(f"task {task!r} cuts long texts; long_text={long_text.mode} is for a classifier, "
                             "regression or multi_label export")
        # A plain attribute would be tracked as a dataclass of the SavedModel's objects: kept out of it.
        object.__setattr__(self, "long_text", long_text)
        object.__setattr__(self, "threshold", threshold)  # A tuple attribute would be tracked too.
        # The model's TensorFlow variables are what the SavedModel tracks, not
        # the Keras model: tracked through Keras' variable objects, the restore
        # op wrote to handles of its own that the signatures never read, so TF
        # Serving's C++ loader (which restores by graph, not by Python object)
        # served uninitialised weights and failed every request. Keras' own
        # exporter tracks them the same way. The model itself is left
        # untracked, so each weight is saved once.
        planned = model if isinstance(model, PlannedModel) else PlannedModel(model, kernels, bool(onednn_forms))
        object.__setattr__(self, "planned", planned)
        object.__setattr__(self, "model", planned.model)
        # Kernels read as constants are not saved as variables too: were any
        # read outside `forward`, saving would fail on the untracked variable.
        # Packed and int8 kernels bring variables of their own in place of some.
        self.tf_variables = planned.saved_variables()
        self.task = task
        self.skip_padding = skip_padding
        # Made by the first `forward`; in a plain list, which the SavedModel
        # saver does not look into: as an attribute it would trace it once
        # more, outside the signatures, and save the constants again.
        object.__setattr__(self, "_shared_forward", [])
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.cls_id, self.sep_id, self.mask_id = special_ids["cls"], special_ids["sep"], special_ids["mask"]
        self.pad_id = special_ids.get("pad", 0)
        self.separators_between = special_tokens.separators_between if special_tokens else 1
        self.second_segment_id = 0 if special_tokens and not special_tokens.segment_ids else 1
        self.top_k, self.max_masks, self.max_answer_length = top_k, max_masks, max_answer_length
        self.id_to_token = (tokenizer.id_to_token if hasattr(tokenizer, "id_to_token")
                            else tf.constant(list(vocabulary), tf.string))
        if labels_path is not None:
            self.labels_asset = tf.saved_model.Asset(labels_path)
            self.labels_table = tf.lookup.StaticHashTable(
                tf.lookup.TextFileInitializer(
                    self.labels_asset, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER,
                    tf.string, tf.lookup.TextFileIndex.WHOLE_LINE,
                ),
                default_value="",
            )

    # -- text -> ids ----------------------------------------------------------

    def _token_ids(self, texts):
        if self.spec.masks_in_text and isinstance(self.tokenizer, InGraphTokenizer):
            return token_ids_with_masks(self.tokenizer, texts, self.mask_id)
        return tf.cast(self.tokenizer.tokenize(texts), tf.int32)

    def encode(self, text, text_b=None, token_ids=None):
        """[batch] strings -> dict of int32 [batch, max_seq_length] inputs.

        `token_ids` ([batch] strings -> ragged ids) defaults to tracing the
        tokenizer where it is called; `signatures` passes one traced function
        that every text signature calls.
        """
        token_ids = token_ids or self._token_ids
        ids_b = None
        if text_b is not None:
            tf.debugging.assert_equal(
                tf.shape(text_b)[0], tf.shape(text)[0], message="text and text_b must have the same batch size"
            )
            ids_b = token_ids(text_b)
        return self._pack(token_ids(text), ids_b)

    def encode_choices(self, context, choices, token_ids=None):
        """[batch] contexts and [batch, num_choices] choices -> dict of int32 [batch, num_choices, max_seq_length].

        Each (context, choice) pair is packed as a text pair (`[CLS] context
        [SEP] choice [SEP]`, the longer side cut first), as
        `tasks.multiple_choice.encode_choices` and `MultipleChoice.encode`
        do; each context is tokenized once.
        """
        token_ids = token_ids or self._token_ids
        tf.debugging.assert_equal(
            tf.shape(choices)[0], tf.shape(context)[0], message="context and choices must have the same batch size"
        )
        batch_size, num_choices = tf.shape(choices)[0], tf.shape(choices)[1]
        # [batch * num_choices, (ids)]: each context's ids once per choice, row-major as the choices.
        context_ids = tf.gather(token_ids(context), tf.repeat(tf.range(batch_size), num_choices))
        pairs = self._pack(context_ids, token_ids(tf.reshape(choices, [-1])))  # [batch * num_choices, seq] each
        shape = tf.stack([batch_size, num_choices, self.max_seq_length])
        return {name: tf.reshape(value, shape) for name, value in pairs.items()}

    def _pack(self, ids_a, ids_b):
        return pack_inputs(ids_a, ids_b, self.max_seq_length, self.cls_id, self.sep_id, pad_id=self.pad_id,
                           separators_between=self.separators_between, second_segment_id=self.second_segment_id)

    def long_text_outputs(self, text, token_ids=None):
        """Task outputs for [batch] single texts, long ones read as `self.long_text` says.

        Head + tail is one row per text; windows are rows of their own, run
        through the model in one batch, and each text's logits are the
        mean (or max) of its windows' (`tf.math.segment_mean` /
        `segment_max`), from which the task's outputs follow as from one
        row's.
        """
        token_ids = token_ids or self._token_ids
        rows, text_index = long_text_ids(token_ids(text), self.long_text, self.max_seq_length)
        inputs = pack_one_text(rows, self.max_seq_length, self.cls_id, self.sep_id, self.pad_id)
        if text_index is None:
            return self.outputs(inputs)
        seq_length = inputs["input_ids"].shape[1] or tf.shape(inputs["input_ids"])[1]
        pooled = _PooledWindows(self, text_index, self.long_text.window_pooling)
        return self.spec.serving_outputs(pooled, drop_unused_padding(inputs), seq_length)

    def check_id_ranges(self, inputs):
        """`inputs` with their ids checked against the model's embedding tables.

        Requests that bring their own ids (`serve_ids`, `serve_examples`) are
        checked in-graph: Keras' embedding lookup wraps a negative id to the
        end of the table, and on a GPU an id past the end reads zeros, so
        without the check some bad ids would answer silently; an `input_mask`
        of another shape or outside {0, 1}, or not of the form 1...10...0,
        would answer wrongly as silently.
        A failed check is an InvalidArgument error naming the input and what
        it must be.

        Args:
            inputs: Dict of integer `input_ids`, `input_mask`, `segment_ids`
                ([batch, seq_length], or [batch, num_choices, seq_length]).

        Returns:
            The same dict, its tensors depending on the checks.
        """
        config = self.model.bert_config
        checks = [
            # A narrower input_mask would cut the ids to its width unseen.
            check(tf.equal(tf.shape(inputs[name]), tf.shape(inputs["input_ids"])),
                  f"{name} must have the shape of input_ids", "shapes:", tf.shape(inputs[name]),
                  tf.shape(inputs["input_ids"]))
            for name in ("input_mask", "segment_ids")
        ]
        # A mask value of 2 would add +10000 to an attention score.
        # A model without token types (DistilBERT) ignores segment ids: those a packer writes (0, 1) pass.
        ranges = (("input_ids", config.vocab_size), ("input_mask", 2), ("segment_ids", config.type_vocab_size or 2))
        for name, size in ranges:
            message = f"{name} must lie in [0, {size})"
            checks += ids_in_range(inputs[name], size, message, message)
        # BERT answers at position 0 ([CLS]) and reads the padding after the
        # real tokens: a left-padded or all-zero mask gave one fixed answer
        # whatever the ids. Ones first, then zeros, position 0 real.
        mask = inputs["input_mask"]
        message = ("input_mask must be 1 at position 0 ([CLS]) and hold its 1s before its 0s (padding on the "
                   "right, as BERT's inputs are made)")
        with tf.control_dependencies(checks):  # after the range checks, so a mask of 2 is named as such
            layout = [check(tf.equal(mask[..., :1], 1), message), check(mask[..., 1:] <= mask[..., :-1], message)]
        with tf.control_dependencies(layout):
            return {name: tf.identity(value) for name, value in inputs.items()}

    # -- ids -> task outputs -----------------------------------------------------

    def outputs(self, inputs):
        """Task outputs for a dict of int32 `input_ids`, `input_mask`, `segment_ids`.

        The model runs on the batch cut to its longest request
        (`drop_unused_padding`): requests padded to `max_seq_length` mostly
        end well before it, and no output at a real position depends on the
        padding after it. The task's spec says what it returns.
        """
        # The request's length, static where the signature fixes it.
        seq_length = inputs["input_ids"].shape[1] or tf.shape(inputs["input_ids"])[1]
        return self.spec.serving_outputs(self, drop_unused_padding(inputs), seq_length)

    def forward(self, inputs):
        """The model's outputs for `inputs` (a dict of its inputs), for inference.

        With `skip_padding` every batch runs the per-token work on its real
        tokens only (the same outputs at real positions; zeros at padded
        positions of a sequence output); otherwise every position.
        """
        inputs = {name: tf.convert_to_tensor(value) for name, value in inputs.items()}
        if not self._shared_forward:
            # One trace for every signature: the SavedModel holds the encoder's
            # graph (and constant kernels) once, and the export traces it once.
            # Every dimension left open, whatever a signature knows statically.
            spec = {name: tf.TensorSpec([None] * value.shape.rank, value.dtype, name=name)
                    for name, value in inputs.items()}
            self._shared_forward.append(tf.function(self._forward, autograph=False, input_signature=[spec]))
        return self._shared_forward[0](inputs)

    def _forward(self, inputs):
        with self.planned.tracing():
            if self.skip_padding:
                return call_skipping_padding(self.model, inputs)
            with real_tokens_only_set_to(self.model, False):
                return self.model(inputs, training=False)

    def outputs_from_examples(self, examples):
        """Task outputs for serialized tf.Examples with tf-models' feature names.

        Args:
            examples: DT_STRING [batch], each an `Example` with int64
                `input_word_ids`, `input_mask`, `input_type_ids` of
                `max_seq_length` values.
        """
        spec = {
            name: tf.io.FixedLenFeature([self.max_seq_length], tf.int64)
            for name in ("input_word_ids", "input_mask", "input_type_ids")
        }
        parsed = tf.io.parse_example(examples, spec)
        # Checked as int64, before the cast could wrap an id into range.
        inputs = self.check_id_ranges({
            "input_ids": parsed["input_word_ids"],
            "input_mask": parsed["input_mask"],
            "segment_ids": parsed["input_type_ids"],
        })
        return self.outputs({name: tf.cast(value, tf.int32) for name, value in inputs.items()})

    def class_names(self, batch_size, num_labels):
        """The label names, one row per example: DT_STRING [batch_size, num_labels]."""
        names = self.labels_table.lookup(tf.range(num_labels, dtype=tf.int64))  # [num_labels]
        return tf.tile(names[tf.newaxis, :], [batch_size, 1])

    # -- signatures ----------------------------------------------------------------

    def signatures(self):
        """The concrete functions to export, keyed by signature name."""
        # The tokenizer's graph is large: traced once, called by each text signature.
        token_ids = tf.function(self._token_ids, autograph=False, input_signature=[tf.TensorSpec([None], tf.string)])
        if self.spec.requests == CHOICE_REQUESTS:
            return self._choice_signatures(token_ids)
        text_spec = tf.TensorSpec([None], tf.string, name="text")

        @tf.function(autograph=False, input_signature=[text_spec])
        def serving_default(text):
            if self.long_text is not None:
                return self.long_text_outputs(text, token_ids=token_ids)
            return self.outputs(self.encode(text, token_ids=token_ids))

        @tf.function(autograph=False, input_signature=[text_spec, tf.TensorSpec([None], tf.string, name="text_b")])
        def serve_text_pair(text, text_b):
            return self.outputs(self.encode(text, text_b, token_ids=token_ids))

        ids_spec = [tf.TensorSpec([None, None], tf.int32, name=n) for n in ("input_ids", "input_mask", "segment_ids")]

        @tf.function(autograph=False, input_signature=ids_spec)
        def serve_ids(input_ids, input_mask, segment_ids):
            inputs = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
            return self.outputs(self.check_id_ranges(inputs))

        @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
        def serve_examples(examples):
            return self.outputs_from_examples(examples)

        signatures = {
            "serving_default": serving_default.get_concrete_function(),
            "serve_text_pair": serve_text_pair.get_concrete_function(),
            "serve_ids": serve_ids.get_concrete_function(),
            "serve_examples": serve_examples.get_concrete_function(),
        }
        # TF Serving finds the input by this key: `inputs` (classifier.cc's kClassifyInputs).
        inputs_spec = tf.TensorSpec([None], tf.string, name="inputs")
        methods = SIGNATURE_METHODS.get(self.task, {})
        if "classify" in methods:

            @tf.function(autograph=False, input_signature=[inputs_spec])
            def classify(inputs):
                scores = self.outputs_from_examples(inputs)["probabilities"]  # [batch, num_labels]
                classes = self.class_names(tf.shape(scores)[0], scores.shape[-1])  # [batch, num_labels]
                return {"classes": classes, "scores": scores}

            signatures["classify"] = classify.get_concrete_function()
        if "regress" in methods:

            @tf.function(autograph=False, input_signature=[inputs_spec])
            def regress(inputs):
                return {"outputs": self.outputs_from_examples(inputs)["predictions"]}  # [batch]

            signatures["regress"] = regress.get_concrete_function()
        return signatures

    def _choice_signatures(self, token_ids):
        """A context and its choices as raw text (`serving_default`), or their ids (`serve_ids`)."""

        @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="context"),
                                                       tf.TensorSpec([None, None], tf.string, name="choices")])
        def serving_default(context, choices):
            return self.outputs(self.encode_choices(context, choices, token_ids=token_ids))

        ids_spec = [tf.TensorSpec([None, None, None], tf.int32, name=n)
                    for n in ("input_ids", "input_mask", "segment_ids")]

        @tf.function(autograph=False, input_signature=ids_spec)
        def serve_ids(input_ids, input_mask, segment_ids):
            inputs = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
            return self.outputs(self.check_id_ranges(inputs))

        return {"serving_default": serving_default.get_concrete_function(),
                "serve_ids": serve_ids.get_concrete_function()}

    def warmup_inputs(self, texts):
        """`[(signature name, {input name: list})]`: the requests TF Serving replays on load, made of `texts`.

        Text requests: `texts` through `serving_default`, and as pairs
        through `serve_text_pair` where the task warms up on pairs. Choice
        requests: each text a context whose choices are every text (at
        least two); none without texts.
        """
        texts = list(texts)
        if self.spec.requests == CHOICE_REQUESTS:
            if not texts:
                return []
            num_choices = max(len(texts), 2)
            choices = [[texts[(row + column) % len(texts)] for column in range(num_choices)]
                       for row in range(len(texts))]
            return [("serving_default", {"context": texts, "choices": choices})]
        requests = [("serving_default", {"text": texts})]
        if self.spec.warmup_pairs:
            requests.append(("serve_text_pair", {"text": texts, "text_b": texts}))
        return requests


class _PooledWindows:
    """A `BertServingModule` seen by a task's `serving_outputs` with `forward` giving one row per text:
    the pooled logits of its windows (`tokenization.long_text.segment_pool`)."""

    def __init__(self, serving, text_index, pooling):
        self._serving, self._text_index, self._pooling = serving, text_index, pooling

    def forward(self, inputs):
        windows = self._serving.forward(inputs)  # [num_windows, num_labels]
        return segment_pool(windows, self._text_index, None, self._pooling)  # [batch, num_labels]

    def __getattr__(self, name):
        return getattr(self._serving, name)


__all__ = ["BertServingModule", "CLASSIFY_METHOD_NAME", "InGraphTokenizer", "REGRESS_METHOD_NAME", "SIGNATURE_METHODS"]
