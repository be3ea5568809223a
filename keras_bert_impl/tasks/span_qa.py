"""Extractive question answering (SQuAD v1.1 / v2.0): the original `run_squad`.

The `span_qa` task spec, its serving outputs (best answer span decoded
in-graph), and `SquadFineTuning`, what `jobs.run_fine_tuning` needs to
fine-tune and predict it as `tools/run_squad.py`.

Example:
>>> SPAN_QA.head_variables
('cls/squad/output_weights', 'cls/squad/output_bias')
"""

import dataclasses
import json
import random

from keras_bert_impl import filesystem
from keras_bert_impl.checkpoints.name_map import SQUAD_VARIABLES
from keras_bert_impl.errors import ConfigError, InputFileError
from keras_bert_impl.io import write_results, write_text_atomically
from keras_bert_impl.tasks.classifier import ClassifierFineTuning
from keras_bert_impl.tasks.distillation import StepwiseDistillation
from keras_bert_impl.tasks.spec import EXPORTED_TASKS, FineTuningSpec, TaskInputs, TaskSpec
from keras_bert_impl.training.fine_tuning import (
    FineTuningSettings,
    TrainingData,
    compute_on_real_tokens,
    predict_batches,
)

_INPUTS = ("input_ids", "input_mask", "segment_ids")
# What `predict` writes to the output directory (null_odds.json for v2.0,
# eval_results.txt where every question has a gold answer).
PREDICTION_OUTPUTS = ("predictions.json", "nbest_predictions.json", "null_odds.json", "eval_results.txt")


def _build_span_qa(config, num_labels=None, dtype=None):
    from keras_bert_impl.models.span_qa import BertSpanQA

    return BertSpanQA(config, dtype=dtype)


def span_qa_serving_outputs(serving, inputs, padded_length):
    """Start/end logits [batch, padded_length] and the best answer in the context.

    Answers lie in the context (`answer_context`) and are at most
    `serving.max_answer_length` tokens long; `answer_start/_end` are -1
    and `answer_text` "" when no span is allowed. The text is the answer's
    tokens decoded as their tokenizer writes them (`answer_text`).
    """
    import tensorflow as tf

    from keras_bert_impl.layers.attention import MASK_ADDER

    outputs = serving.forward(inputs)
    start = tf.cast(outputs["start_logits"], tf.float32)
    end = tf.cast(outputs["end_logits"], tf.float32)
    seq = tf.shape(start)[1]
    context = answer_context(serving, inputs)
    scores = start[:, :, None] + end[:, None, :]  # [batch, start, end]
    i = tf.range(seq)[:, None]
    j = tf.range(seq)[None, :]
    allowed = (j >= i) & (j - i < serving.max_answer_length)
    allowed = allowed[None] & context[:, :, None] & context[:, None, :]
    scores = tf.where(allowed, scores, -1e9)
    flat = tf.reshape(scores, [tf.shape(scores)[0], -1])  # [batch, start * end]
    best = tf.argmax(flat, axis=-1, output_type=tf.int32)
    best_start, best_end = best // seq, best % seq
    has_answer = tf.reduce_any(allowed, axis=[1, 2])
    positions = tf.range(seq)[None, :]
    in_span = (positions >= best_start[:, None]) & (positions <= best_end[:, None]) & has_answer[:, None]
    tokens = tf.ragged.boolean_mask(tf.gather(serving.id_to_token, inputs["input_ids"]), in_span)  # [batch, (span)]
    text = answer_text(serving.tokenizer, tokens)
    # Back to the request's length; no answer starts or ends in the padding,
    # the row's own included (so a row's answer does not depend on its batch).
    real = inputs["input_mask"] > 0
    padding = [[0, 0], [0, padded_length - seq]]
    start, end = (tf.pad(tf.where(real, logits, MASK_ADDER), padding, constant_values=MASK_ADDER)
                  for logits in (start, end))
    if isinstance(padded_length, int):  # a signature with a fixed length says so
        start, end = tf.ensure_shape(start, [None, padded_length]), tf.ensure_shape(end, [None, padded_length])
    return {
        "start_logits": start,
        "end_logits": end,
        "answer_start": tf.where(has_answer, best_start, -1),
        "answer_end": tf.where(has_answer, best_end, -1),
        "answer_text": text,
    }


def answer_context(serving, inputs):
    """bool [batch, seq]: the real tokens of a pair's second text, where answers lie.

    With segment ids (BERT, ALBERT: `[CLS] q [SEP] ctx [SEP]`) the context is
    segment 1; without (RoBERTa: `<s> q </s></s> ctx </s>`, segment ids all
    0) it is what follows the first `serving.separators_between` separators.
    Separators and padding are never part of it.
    """
    import tensorflow as tf

    if serving.second_segment_id == 1:
        return (inputs["segment_ids"] == 1) & (inputs["input_mask"] == 1) & (inputs["input_ids"] != serving.sep_id)
    is_sep = inputs["input_ids"] == serving.sep_id
    seps_so_far = tf.cumsum(tf.cast(is_sep, tf.int32) * tf.cast(inputs["input_mask"], tf.int32), axis=1)
    return (seps_so_far >= serving.separators_between) & (inputs["input_mask"] == 1) & ~is_sep


def answer_text(tokenizer, tokens):
    """[batch] strings: each row's answer tokens decoded as `tokenizer`'s family writes text.

    WordPiece joins words with spaces and undoes "##"; byte-level BPE maps
    each character back to its byte (`byte_level_text`); SentencePiece turns
    "▁" (U+2581) back into spaces. Byte-level and SentencePiece answers lose
    the White_Space at their ends (the space their first token carries).

    Args:
        tokenizer: The serving module's in-graph tokenizer.
        tokens: Ragged strings [batch, (answer_length)], the answer's tokens.
    """
    import tensorflow as tf

    from keras_bert_impl.tokenization.byte_level_bpe import InGraphByteLevelBpeTokenizer
    from keras_bert_impl.tokenization.sentencepiece_tokenizer import InGraphSentencePieceTokenizer

    if isinstance(tokenizer, InGraphByteLevelBpeTokenizer):
        return _strip_white_space(byte_level_text(tokens))
    if isinstance(tokenizer, InGraphSentencePieceTokenizer):
        return _strip_white_space(tf.strings.regex_replace(tf.strings.reduce_join(tokens, axis=1), "\u2581", " "))
    text = tf.strings.reduce_join(tokens, axis=1, separator=" ")
    return tf.strings.regex_replace(text, " ##", "")


def byte_level_text(tokens):
    """[batch] UTF-8 strings: byte-level BPE tokens [batch, (n)] turned back into their bytes.

    GPT-2's `bytes_to_unicode` wrote each byte as one character; a token
    with a character outside that table (an added token) stands for its own
    UTF-8 bytes, as Hugging Face's ByteLevel decoder has it. Bytes that are
    not UTF-8 (an answer cut inside a character) become U+FFFD, one per
    maximal invalid sequence, as Python's and Rust's lossy decoding do.
    """
    import numpy as np
    import tensorflow as tf

    from keras_bert_impl.tokenization.byte_level_bpe import bytes_to_unicode

    table = bytes_to_unicode()
    byte_of = np.full(max(map(ord, table.values())) + 1, -1, np.int32)  # code point -> byte, -1: not in the table
    for byte, char in table.items():
        byte_of[ord(char)] = byte
    one_byte = tf.constant([bytes([byte]) for byte in range(256)])  # [256]
    flat = tokens.flat_values  # [num_tokens]
    code_points = tf.strings.unicode_decode(flat, "UTF-8")  # [num_tokens, (chars)]
    in_table = code_points.flat_values < len(byte_of)
    bytes_ = tf.where(in_table, tf.gather(byte_of, tf.where(in_table, code_points.flat_values, 0)), -1)
    bytes_ = code_points.with_flat_values(bytes_)  # [num_tokens, (chars)]
    mapped = tf.strings.reduce_join(tf.gather(one_byte, tf.maximum(bytes_, 0)), axis=1)  # [num_tokens]
    all_mapped = tf.reduce_all(bytes_ >= 0, axis=1)
    text = tf.strings.reduce_join(tokens.with_flat_values(tf.where(all_mapped, mapped, flat)), axis=1)
    return tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)


def _strip_white_space(text):
    """`text` without Unicode White_Space at either end."""
    import tensorflow as tf

    from keras_bert_impl.tokenization.special_tokens import space_class

    spaces = space_class(re2=True)
    return tf.strings.regex_replace(text, f"^{spaces}+|{spaces}+$", "")


SPAN_QA = TaskSpec(
    name="span_qa",
    description=EXPORTED_TASKS["span_qa"],
    build_model=_build_span_qa,
    head_variables=tuple(SQUAD_VARIABLES),
    serving_outputs=span_qa_serving_outputs,
    warmup_pairs=True,
)


def read_training_examples(train_file, version_2_with_negative, seed, verbose_logging, log, data=None):
    """The training questions, shuffled as the original, skipped ones reported.

    `data`: the `data` list when already loaded (from TFDS, `train_file`
    then only names it in messages).
    """
    from keras_bert_impl.data.squad import read_squad_examples

    examples, skipped = read_squad_examples(train_file, True, version_2_with_negative, data=data)
    if skipped:
        shown = skipped if verbose_logging else skipped[:5]
        more = "" if len(shown) == len(skipped) else f", ... ({len(skipped) - len(shown)} more; --verbose_logging lists all)"
        log(
            f"{train_file}: skipped {len(skipped)} of {len(skipped) + len(examples)} questions whose "
            f"answer text is not at answer_start (as the original): {', '.join(map(str, shown))}{more}"
        )
    if not examples:
        raise InputFileError(f"{train_file}: no usable training questions")
    # The original pre-shuffles so that a small shuffle buffer suffices.
    random.Random(seed).shuffle(examples)
    return examples


def feature_arrays(features, is_training):
    """`(inputs, targets)`: int32 arrays [num_features, max_seq_length] of the
    model inputs, and for training `{start_logits, end_logits}` positions."""
    import numpy as np

    columns = {key: [] for key in _INPUTS}
    starts, ends = [], []
    for feature in features:
        for key in _INPUTS:
            columns[key].append(np.asarray(getattr(feature, key), np.int32))
        if is_training:
            starts.append(feature.start_position)
            ends.append(feature.end_position)
    inputs = {key: np.stack(rows) for key, rows in columns.items()}
    targets = None
    if is_training:
        targets = {"start_logits": np.asarray(starts, np.int32), "end_logits": np.asarray(ends, np.int32)}
    return inputs, targets


def has_gold_answers(dataset, version_2_with_negative):
    """Whether the official evaluation can run: there are questions, and
    every one has `answers` (for v1.1 at least one each; v2.0's
    unanswerable ones have none). Without questions there is nothing to
    score: the original writes its empty prediction files and stops."""
    if not any(paragraph.get("qas") for article in dataset for paragraph in article.get("paragraphs", ())):
        return False
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answers = qa.get("answers")
                if not isinstance(answers, list) or not (answers or version_2_with_negative):
                    return False
                if not all(isinstance(a, dict) and isinstance(a.get("text"), str) for a in answers):
                    return False
    return True


def predict(model, examples, tokenizer, global_step, output_dir, predict_file, max_seq_length, doc_stride,
            max_query_length, predict_batch_size, n_best_size, max_answer_length, do_lower_case,
            version_2_with_negative, null_score_diff_threshold, log, settings=FineTuningSettings(), dataset=None):
    """Predicts `predict_file`, writes the JSON files and, with gold answers, the evaluation.

    `dataset`: the `data` list the official evaluation reads, when already
    loaded (from TFDS, `predict_file` then only names it in messages).
    """
    from keras_bert_impl.data.squad import (
        convert_examples_to_features,
        load_squad_json,
        postprocess_predictions,
        predictions_json,
    )
    from keras_bert_impl.data.squad_metrics import evaluate_v1, evaluate_v2

    features = list(
        convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training=False)
    )
    log(f"predicting {len(examples)} questions ({len(features)} windows)")
    logits = {"start_logits": [], "end_logits": []}
    if features:
        inputs, _ = feature_arrays(features, is_training=False)
        # Full width, as the original: its n-best search ranks every position's
        # logit, padding included, before dropping those outside the context,
        # so the padding's logits decide which candidates remain.
        compute_on_real_tokens(model, settings, enabled=False)
        full_width = dataclasses.replace(settings, real_tokens_only=False)
        logits = predict_batches(model, inputs, predict_batch_size, full_width, log, "windows")
    results = zip([f.unique_id for f in features], logits["start_logits"], logits["end_logits"])
    output = postprocess_predictions(
        examples, features, results, n_best_size, max_answer_length, do_lower_case,
        version_2_with_negative, null_score_diff_threshold,
    )
    files = [("predictions.json", output.predictions), ("nbest_predictions.json", output.nbest)]
    if version_2_with_negative:
        files.append(("null_odds.json", output.null_odds))
    # An earlier run's outputs go first: whatever happens below, none of them
    # is read as this run's (say, an F1 these predictions never had).
    for name in PREDICTION_OUTPUTS:
        filesystem.remove(filesystem.join(output_dir, name), missing_ok=True)
    for name, mapping in files:
        write_text_atomically(filesystem.join(output_dir, name), predictions_json(mapping))
    log(f"wrote {', '.join(name for name, _ in files)} to {output_dir}")

    if dataset is None:
        dataset = load_squad_json(predict_file)
    if not has_gold_answers(dataset, version_2_with_negative):
        log(f"{predict_file} has no gold answers for every question: no eval_results.txt")
        return {}
    if version_2_with_negative:
        result = evaluate_v2(dataset, output.predictions, na_probs=output.null_odds)
    else:
        result = evaluate_v1(dataset, output.predictions)
    result["global_step"] = global_step
    write_results(filesystem.join(output_dir, "eval_results.txt"), result)
    log(f"official {'v2.0' if version_2_with_negative else 'v1.1'} evaluation: {json.dumps(result)}")
    return result


@dataclasses.dataclass(frozen=True)
class SquadFineTuning(FineTuningSpec):
    """Fine-tuning extractive question answering, as the original `run_squad.py`.

    With `do_predict`, writes `predictions.json`, `nbest_predictions.json`,
    `null_odds.json` (v2.0) and, when the predicted questions have gold
    answers, the official evaluation in `eval_results.txt` (see `predict`).

    The questions come from `train_file`/`predict_file` (SQuAD JSON), or
    with `tfds_name` (`squad/v1.1`, `squad/v2.0`) from the splits
    `train_split`/`predict_split` of that TFDS dataset prepared in
    `data_dir` (never downloaded). The other fields are the original's flags.

    A variant release (RoBERTa, ALBERT, DistilBERT) takes the same path:
    its tokenizer cuts the context's words as in running text and lays the
    windows out with its special tokens (`data/squad.py`), its answers are
    the context's characters between the tokens' offsets, and a release
    without a pooler (RoBERTa's `*ForMaskedLM`) gets a fresh one, unused by
    the span head, as the classifier does.

    Example:
    >>> SquadFineTuning(train_file="train.json").computes_on_real_tokens
    False
    """

    train_file: str = None
    predict_file: str = None
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    verbose_logging: bool = False
    version_2_with_negative: bool = False
    null_score_diff_threshold: float = 0.0
    tfds_name: str = None
    data_dir: str = None
    train_split: str = "train"
    predict_split: str = "validation"
    name = "squad"
    head_description = "SQuAD"
    # The original's loss is a softmax over every position, padding included,
    # and its n-best search ranks the padding's logits too.
    computes_on_real_tokens = False
    variant_tokenizers = True

    def read_inputs(self, release, run, log):
        from keras_bert_impl.data.squad import (
            convert_examples_to_features,
            load_squad_json,
            load_tfds_squad,
            read_squad_examples,
            sequence_layout,
        )
        from keras_bert_impl.data.tfds_inputs import split_source

        specials = sequence_layout(release.tokenizer)[2] + 2
        if run.max_seq_length <= self.max_query_length + specials:  # RoBERTa: <s> question </s></s> context </s>
            raise ConfigError(
                f"--max_seq_length ({run.max_seq_length}) must be greater than --max_query_length "
                f"({self.max_query_length}) + {specials}, the special tokens of {run.vocab_file}'s windows"
            )
        train_file, predict_file = self.train_file, self.predict_file
        train_data = predict_data = None
        if self.tfds_name:
            train_file = split_source(self.tfds_name, self.train_split)
            predict_file = split_source(self.tfds_name, self.predict_split)
            train_data = load_tfds_squad(self.tfds_name, self.data_dir, self.train_split) if run.do_train else None
            predict_data = (load_tfds_squad(self.tfds_name, self.data_dir, self.predict_split)
                            if run.do_predict else None)
        elif run.do_predict:
            predict_data = load_squad_json(predict_file)
        splits = {}
        if run.do_train:
            examples = read_training_examples(train_file, self.version_2_with_negative, run.training.seed,
                                              self.verbose_logging, log, train_data)
            features = convert_examples_to_features(examples, release.tokenizer, run.max_seq_length,
                                                    self.doc_stride, self.max_query_length, is_training=True)
            splits["train"] = (train_file, len(examples), *feature_arrays(features, is_training=True))
        if run.do_predict:
            splits["predict"] = (predict_file, read_squad_examples(predict_file, False, data=predict_data)[0],
                                 predict_data)
        return TaskInputs(SPAN_QA, splits)

    # The release's weights, the head fresh, and a variant's missing pooler (as the classifier's).
    initialise = ClassifierFineTuning.initialise

    def training_data(self, inputs, release, run, log):
        train_file, num_questions, arrays, targets = inputs.splits["train"]
        return TrainingData(
            inputs=arrays, targets=targets, num_examples=num_questions, unit="questions",
            description=f"{num_questions} questions ({len(targets['start_logits'])} windows)", source=train_file,
            # The original pre-shuffles the questions and streams them through a small buffer.
            shuffle_buffer=100,
        )

    def compile_options(self, inputs):
        from keras_bert_impl.models.span_qa import span_qa_losses

        loss, loss_weights = span_qa_losses()
        return {"loss": loss, "loss_weights": loss_weights}

    def predict(self, model, inputs, release, global_step, run, log):
        predict_file, examples, dataset = inputs.splits["predict"]
        return predict(
            model, examples, release.tokenizer, global_step, run.output_dir, predict_file, run.max_seq_length,
            self.doc_stride, self.max_query_length, run.predict_batch_size, self.n_best_size,
            self.max_answer_length, run.do_lower_case, self.version_2_with_negative,
            self.null_score_diff_threshold, log, run.training, dataset,
        )


@dataclasses.dataclass(frozen=True)
class SquadDistillation(StepwiseDistillation, SquadFineTuning):
    """A shallower span-QA student of a `run_squad` release (`bert-distill --task=squad`).

    Trained on the training questions' windows against the teacher's start
    and end logits at the temperature, the answer positions (the original
    loss), and the teacher's top-layer states; `predict` writes the
    student's files as `run_squad` does, and the teacher's in `teacher/`.

    Example:
    >>> SquadDistillation(train_file="train.json").teacher_predicts
    True
    """

    task = "squad"
    teacher_head = tuple(SQUAD_VARIABLES)
    teacher_predicts = True
    default_max_seq_length = 384

    def soft_logits(self, task_model, sequence_output, inputs):
        import keras

        # [batch, seq, 2] -> [batch, 2, seq]: a softmax over the positions, for the start and for the end.
        return keras.ops.transpose(task_model.span_head(sequence_output), (0, 2, 1))

    def training_data(self, inputs, release, run, log):
        import numpy as np

        data = super().training_data(inputs, release, run, log)
        positions = np.stack([data.targets["start_logits"], data.targets["end_logits"]], axis=1)  # [windows, 2]
        return dataclasses.replace(data, targets={"hard": positions})
