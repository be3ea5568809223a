"""The serving graph: raw text -> BERT inputs -> task outputs, all TF ops.

`BertServingModule` wraps one of our task models and an `InGraphTokenizer`;
its `tf.function`s become the SavedModel's signatures. Nothing here runs
Python of ours at serving time: TF Serving executes the traced graph.
"""

import tensorflow as tf

from keras_bert_impl.layers.attention import MASK_ADDER
from keras_bert_impl.models.padding_free import drop_unused_padding
from keras_bert_impl.tokenization.in_graph import InGraphTokenizer

TASKS = ("classifier", "regression", "span_qa", "embeddings", "fill_mask")
MASK_LITERAL = "[MASK]"


def truncated_pair_lengths(length_a, length_b, max_total):
    """The original `_truncate_seq_pair`, in closed form over a batch.

    The original pops one token at a time from the longer list (from `b` on a
    tie). Equivalently: shorten the longer one towards the other, then take
    the rest alternately, `b` first.

    Args:
        length_a, length_b: [batch] int32 token counts.
        max_total: Tokens allowed for `a` and `b` together.

    Returns:
        `(new_length_a, new_length_b)`.
    """
    excess = tf.maximum(length_a + length_b - max_total, 0)
    cut_a = tf.where(length_a > length_b, tf.minimum(excess, length_a - length_b), 0)
    length_a, excess = length_a - cut_a, excess - cut_a
    cut_b = tf.where(length_b > length_a, tf.minimum(excess, length_b - length_a), 0)
    length_b, excess = length_b - cut_b, excess - cut_b
    return length_a - excess // 2, length_b - (excess - excess // 2)


def _take_first(ragged, lengths):
    positions = tf.ragged.range(ragged.row_lengths())
    keep = positions < tf.cast(lengths, positions.dtype)[:, None]
    return tf.ragged.boolean_mask(ragged, keep)


class BertServingModule(tf.Module):
    """Signatures for one exported task model.

    Args:
        model: The Keras model (`BertClassifier`, `BertModel`,
            `BertPretrainingModel`, span-QA model).
        task: One of `TASKS`.
        tokenizer: `InGraphTokenizer` over the model's vocabulary.
        max_seq_length: Padded length of every request.
        special_ids: Dict with `cls`, `sep`, `mask` ids.
        labels_path: `labels.txt` (one class name per line), stored as an
            asset (classifier).
        top_k: Candidates per [MASK] (fill_mask).
        max_masks: [MASK] positions scored per text (fill_mask).
        max_answer_length: Longest answer in word pieces (span_qa).
    """

    def __init__(
        self, model, task, tokenizer, max_seq_length, special_ids, labels_path=None,
        top_k=5, max_masks=8, max_answer_length=30,
    ):
        super().__init__(name=f"bert_{task}")
        if task not in TASKS:
            raise ValueError(f"task {task!r} is not one of {', '.join(TASKS)}")
        self.model = model
        self.task = task
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.cls_id, self.sep_id, self.mask_id = special_ids["cls"], special_ids["sep"], special_ids["mask"]
        self.top_k, self.max_masks, self.max_answer_length = top_k, max_masks, max_answer_length
        self.id_to_token = tokenizer.id_to_token
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
        if self.task == "fill_mask":
            return self._token_ids_with_masks(texts)
        return tf.cast(self.tokenizer.tokenize(texts), tf.int32)

    def _token_ids_with_masks(self, texts):
        # "[MASK]" written in the text is the mask token (the tokenizer alone
        # would split it into "[", "mask", "]").
        parts = tf.strings.split(texts, sep=MASK_LITERAL)  # [batch, (parts)]
        pieces = tf.cast(self.tokenizer.tokenize(parts.flat_values), tf.int32)  # [parts, (ids)]
        index_in_row = tf.ragged.range(parts.row_lengths()).flat_values
        is_last = index_in_row == tf.gather(parts.row_lengths(), parts.value_rowids()) - 1
        masks = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(tf.cast(~is_last, tf.int32))], self.mask_id),
            tf.cast(~is_last, tf.int64),
        )
        joined = tf.concat([pieces, masks], axis=1)  # each part followed by [MASK], but the last
        return tf.RaggedTensor.from_row_splits(joined, parts.row_splits).merge_dims(1, 2)

    def encode(self, text, text_b=None):
        """[batch] strings -> dict of int32 [batch, max_seq_length] inputs."""
        ids_a = self._token_ids(text)
        batch = tf.shape(text)[0]
        if text_b is None:
            length_a = tf.minimum(tf.cast(ids_a.row_lengths(), tf.int32), self.max_seq_length - 2)
            ids_a = _take_first(ids_a, length_a)
            pieces = [ids_a]
            segment_pieces = [tf.zeros_like(ids_a)]
        else:
            tf.debugging.assert_equal(
                tf.shape(text_b)[0], batch, message="text and text_b must have the same batch size"
            )
            ids_b = self._token_ids(text_b)
            raw_a, raw_b = tf.cast(ids_a.row_lengths(), tf.int32), tf.cast(ids_b.row_lengths(), tf.int32)
            # As the original: a `text_b` with no tokens gives the single layout.
            has_b = raw_b > 0
            pair_a, pair_b = truncated_pair_lengths(raw_a, raw_b, self.max_seq_length - 3)
            length_a = tf.where(has_b, pair_a, tf.minimum(raw_a, self.max_seq_length - 2))
            ids_a, ids_b = _take_first(ids_a, length_a), _take_first(ids_b, tf.where(has_b, pair_b, 0))
            middle_sep = tf.RaggedTensor.from_row_lengths(
                tf.fill([tf.reduce_sum(tf.cast(has_b, tf.int32))], self.sep_id), tf.cast(has_b, tf.int64)
            )
            pieces = [ids_a, middle_sep, ids_b]
            segment_pieces = [tf.zeros_like(ids_a), tf.zeros_like(middle_sep), tf.ones_like(ids_b)]
        cls = tf.RaggedTensor.from_tensor(tf.fill([batch, 1], self.cls_id))
        sep = tf.RaggedTensor.from_tensor(tf.fill([batch, 1], self.sep_id))
        ids = tf.concat([cls] + pieces + [sep], axis=1)
        last_segment = tf.zeros([batch, 1], tf.int32) if text_b is None else tf.cast(has_b, tf.int32)[:, None]
        segments = tf.concat(
            [tf.RaggedTensor.from_tensor(tf.zeros([batch, 1], tf.int32))]
            + segment_pieces
            + [tf.RaggedTensor.from_tensor(last_segment)],
            axis=1,
        )
        shape = [None, self.max_seq_length]
        return {
            "input_ids": ids.to_tensor(0, shape=shape),
            "input_mask": tf.ones_like(ids).to_tensor(0, shape=shape),
            "segment_ids": segments.to_tensor(0, shape=shape),
        }

    # -- ids -> task outputs -----------------------------------------------------

    def outputs(self, inputs):
        """Task outputs for a dict of int32 `input_ids`, `input_mask`, `segment_ids`.

        The model runs on the batch cut to its longest request
        (`drop_unused_padding`): requests padded to `max_seq_length` mostly
        end well before it, and no output at a real position depends on the
        padding after it.
        """
        # The request's length, static where the signature fixes it.
        seq_length = inputs["input_ids"].shape[1] or tf.shape(inputs["input_ids"])[1]
        inputs = drop_unused_padding(inputs)
        if self.task == "classifier":
            logits = self.model(inputs, training=False)
            probabilities = tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1)
            label_ids = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
            return {
                "probabilities": probabilities,
                "label_ids": label_ids,
                "labels": self.labels_table.lookup(tf.cast(label_ids, tf.int64)),
            }
        if self.task == "regression":
            return {"predictions": tf.cast(self.model(inputs, training=False), tf.float32)[:, 0]}
        if self.task == "embeddings":
            outputs = self.model(inputs, training=False)
            sequence = tf.cast(outputs["sequence_output"], tf.float32)
            mask = tf.cast(inputs["input_mask"], tf.float32)[:, :, None]
            mean = tf.reduce_sum(sequence * mask, axis=1) / tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)
            return {"pooled_output": tf.cast(outputs["pooled_output"], tf.float32), "mean_pooled": mean}
        if self.task == "fill_mask":
            return self._fill_mask(inputs)
        return self._span_qa(inputs, seq_length)

    def _fill_mask(self, inputs):
        is_mask = tf.equal(inputs["input_ids"], self.mask_id)
        # Positions of the first `max_masks` masks per row, padded with 0.
        positions = tf.ragged.boolean_mask(
            tf.broadcast_to(tf.range(tf.shape(is_mask)[1]), tf.shape(is_mask)), is_mask
        )
        mask_count = tf.minimum(tf.cast(positions.row_lengths(), tf.int32), self.max_masks)
        positions = _take_first(positions, mask_count).to_tensor(0, shape=[None, self.max_masks])
        outputs = self.model({**inputs, "masked_lm_positions": positions}, training=False)
        probabilities = tf.nn.softmax(tf.cast(outputs["masked_lm_logits"], tf.float32), axis=-1)
        scores, token_ids = tf.math.top_k(probabilities, k=self.top_k)  # [batch, max_masks, k]
        valid = tf.sequence_mask(mask_count, self.max_masks)[:, :, None]
        return {
            "mask_count": mask_count,
            "top_k_ids": tf.where(valid, token_ids, -1),
            "top_k_tokens": tf.where(valid, tf.gather(self.id_to_token, token_ids), ""),
            "top_k_scores": tf.where(valid, scores, 0.0),
        }

    def _span_qa(self, inputs, padded_length):
        outputs = self.model(inputs, training=False)
        start = tf.cast(outputs["start_logits"], tf.float32)
        end = tf.cast(outputs["end_logits"], tf.float32)
        seq = tf.shape(start)[1]
        # Answers lie in the context (segment 1, real tokens, not the final [SEP]).
        context = (inputs["segment_ids"] == 1) & (inputs["input_mask"] == 1) & (inputs["input_ids"] != self.sep_id)
        scores = start[:, :, None] + end[:, None, :]  # [batch, start, end]
        i = tf.range(seq)[:, None]
        j = tf.range(seq)[None, :]
        allowed = (j >= i) & (j - i < self.max_answer_length)
        allowed = allowed[None] & context[:, :, None] & context[:, None, :]
        scores = tf.where(allowed, scores, -1e9)
        flat = tf.reshape(scores, [tf.shape(scores)[0], -1])
        best = tf.argmax(flat, axis=-1, output_type=tf.int32)
        best_start, best_end = best // seq, best % seq
        has_answer = tf.reduce_any(allowed, axis=[1, 2])
        positions = tf.range(seq)[None, :]
        in_span = (positions >= best_start[:, None]) & (positions <= best_end[:, None]) & has_answer[:, None]
        tokens = tf.ragged.boolean_mask(tf.gather(self.id_to_token, inputs["input_ids"]), in_span)
        text = tf.strings.reduce_join(tokens, axis=1, separator=" ")
        text = tf.strings.regex_replace(text, " ##", "")
        # Back to the request's length; no answer starts or ends in the padding.
        padding = [[0, 0], [0, padded_length - seq]]
        start, end = (tf.pad(logits, padding, constant_values=MASK_ADDER) for logits in (start, end))
        if isinstance(padded_length, int):  # a signature with a fixed length says so
            start, end = tf.ensure_shape(start, [None, padded_length]), tf.ensure_shape(end, [None, padded_length])
        return {
            "start_logits": start,
            "end_logits": end,
            "answer_start": tf.where(has_answer, best_start, -1),
            "answer_end": tf.where(has_answer, best_end, -1),
            "answer_text": text,
        }

    # -- signatures ----------------------------------------------------------------

    def signatures(self):
        """The concrete functions to export, keyed by signature name."""
        text_spec = tf.TensorSpec([None], tf.string, name="text")

        @tf.function(input_signature=[text_spec])
        def serving_default(text):
            return self.outputs(self.encode(text))

        @tf.function(input_signature=[text_spec, tf.TensorSpec([None], tf.string, name="text_b")])
        def serve_text_pair(text, text_b):
            return self.outputs(self.encode(text, text_b))

        ids_spec = [tf.TensorSpec([None, None], tf.int32, name=n) for n in ("input_ids", "input_mask", "segment_ids")]

        @tf.function(input_signature=ids_spec)
        def serve_ids(input_ids, input_mask, segment_ids):
            return self.outputs({"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids})

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
        def serve_examples(examples):
            # tf-models-official's feature names for serialized tf.Example input.
            spec = {
                name: tf.io.FixedLenFeature([self.max_seq_length], tf.int64)
                for name in ("input_word_ids", "input_mask", "input_type_ids")
            }
            parsed = tf.io.parse_example(examples, spec)
            return self.outputs({
                "input_ids": tf.cast(parsed["input_word_ids"], tf.int32),
                "input_mask": tf.cast(parsed["input_mask"], tf.int32),
                "segment_ids": tf.cast(parsed["input_type_ids"], tf.int32),
            })

        return {
            "serving_default": serving_default.get_concrete_function(),
            "serve_text_pair": serve_text_pair.get_concrete_function(),
            "serve_ids": serve_ids.get_concrete_function(),
            "serve_examples": serve_examples.get_concrete_function(),
        }


__all__ = ["BertServingModule", "InGraphTokenizer", "TASKS", "truncated_pair_lengths"]
