"""SQuAD v1.1 / v2.0 for span QA: the data path of the original `run_squad.py`.

Three stages, each a pure function of its inputs:

* Reading (`read_squad_examples`): contexts split on the original's
  whitespace into words, answers mapped from characters to words, v2.0's
  `is_impossible`. Malformed files raise `InputFileError` naming the file and
  the question id (or the `data[i].paragraphs[j]` path) at fault. A prepared
  TFDS `squad/v1.1`, `squad/v2.0` (or any dataset with their features)
  becomes the same `data` list first (`load_tfds_squad`), so that reading
  and the official evaluation treat it as the JSON file.
* Features (`convert_examples_to_features`): WordPiece sub-tokens mapped back
  to words, the "improved" answer span, `doc_stride` windows of
  `[CLS] question [SEP] context [SEP]` with the max-context rule, padded ids.
* Post-processing (`postprocess_predictions`): n-best spans over all windows
  of a question, `max_answer_length`, the answer text recovered from the
  original context, and v2.0's null-answer decision.

Every feature and prediction equals the original's; `tests/test_squad.py`
checks them against tf-models-official's independent port.

A variant's tokenizer (RoBERTa's byte-level BPE, ALBERT's SentencePiece: one
with `special_tokens`) cuts each word as it cuts it inside running text
(`tokenize_word`: RoBERTa's words after the first carry their space), lays
the windows out with its own special tokens (`<s> question </s></s> context
</s>`, segment ids all 0, for RoBERTa) and pads with its pad token. Each
context token also keeps its character offsets in the context
(`word_token_spans`), as Hugging Face's `run_qa` does: a training answer's
first and last tokens are those holding its first and last characters, and
a predicted answer is the context's text between its tokens' offsets.
`tests/test_variant_span_tagging.py` checks tokens and offsets against
Hugging Face's tokenizers.
"""

import bisect
import collections
import dataclasses
import json
import math
import re

import numpy as np

from keras_bert_impl import filesystem
from keras_bert_impl.data import tfds_inputs
from keras_bert_impl.errors import InputFileError
from keras_bert_impl.tokenization import BasicTokenizer, whitespace_tokenize

# The original numbers features from here, one id per window.
UNIQUE_ID_BASE = 1000000000

# The original splits contexts on these only (U+202F is NARROW NO-BREAK
# SPACE); other Unicode spaces stay inside words and are left to the tokenizer.
_CONTEXT_WORD = re.compile(r"[^ \t\r\n\u202f]+")


# ----------------------------------------------------------------------------
# Reading.
# ----------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class SquadExample:
    """One question about one context (the original's `SquadExample`).

    Attributes:
        qas_id: The question's `id`.
        question_text: The question.
        doc_tokens: The context split on whitespace (shared by the questions
            of a paragraph).
        orig_answer_text: Training only: the answer text ("" if impossible).
        start_position: Training only: index in `doc_tokens` of the answer's
            first word (-1 if impossible).
        end_position: Training only: index of its last word (-1 if impossible).
        is_impossible: SQuAD v2.0 training only: the question has no answer.
        context: The context as written (shared by the questions of a
            paragraph; None: `doc_tokens` joined by spaces).
        word_starts: The character in `context` where each of `doc_tokens`
            starts (None with `context` None).
        answer_start: Training only: the answer's first character in
            `context` (None if impossible).
    """

    qas_id: str
    question_text: str
    doc_tokens: list
    orig_answer_text: str = None
    start_position: int = None
    end_position: int = None
    is_impossible: bool = False
    context: str = None
    word_starts: list = None
    answer_start: int = None


def split_context(text):
    """Splits a context into words and the start character of each word.

    The original's `doc_tokens`; its `char_to_word_offset[c]` is
    `bisect_right(word_starts, c) - 1` (the word at or before character `c`).

    Returns:
        `(doc_tokens, word_starts)`.

    Example:
    >>> split_context(" The cat\\u202fsat.")
    (['The', 'cat', 'sat.'], [1, 5, 9])
    """
    matches = list(_CONTEXT_WORD.finditer(text))
    return [m.group() for m in matches], [m.start() for m in matches]


def load_squad_json(path):
    """The `data` list of a SQuAD JSON file.

    Raises:
        InputFileError: unreadable, not UTF-8 or not JSON (with line and
            column), or no `data` list at the top.
    """
    try:
        with filesystem.open_file(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise InputFileError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise InputFileError(f"{path}:{line}: not valid UTF-8 (byte {e.start})") from None
    try:
        dataset = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputFileError(f"{path}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})") from None
    if not isinstance(dataset, dict) or not isinstance(dataset.get("data"), list):
        raise InputFileError(f"{path}: not a SQuAD file (no top-level \"data\" list)")
    return dataset["data"]


def _tfds_answers(answers, source):
    """`[{text, answer_start}]` of a TFDS answers sequence (parallel arrays).

    Raises:
        InputFileError: `answers` is not SQuAD's `{text, answer_start}` of
            equal lengths, naming `source`.
    """
    if not isinstance(answers, dict) or not {"text", "answer_start"} <= set(answers):
        raise InputFileError(f"{source}: not SQuAD's answers (a sequence of text and answer_start)")
    if len(answers["text"]) != len(answers["answer_start"]):
        raise InputFileError(f"{source}: {len(answers['text'])} answer texts but "
                             f"{len(answers['answer_start'])} answer_start values")
    return [
        {"text": tfds_inputs.text(answer_text, source), "answer_start": int(answer_start)}
        for answer_text, answer_start in zip(answers["text"], answers["answer_start"], strict=True)
    ]


def load_tfds_squad(name, data_dir, split):
    """The `data` list of a SQuAD JSON file, rebuilt from a prepared TFDS dataset.

    TFDS keeps one record per question (`id`, `title`, `context`,
    `question`, `answers` {`text`, `answer_start`}; v2.0 also
    `is_impossible` and `plausible_answers`). They are grouped back into
    articles by title and paragraphs by context, in the order first met in
    the stored (not the file's) order, each question as the JSON has it.

    Args:
        name: The TFDS name (`squad/v1.1`, `squad/v2.0`, ...).
        data_dir: The TFDS data directory it is prepared in (never downloaded).
        split: The split (`train`, `validation`, or an expression).

    Returns:
        `[{"title", "paragraphs": [{"context", "qas": [...]}]}]`.

    Raises:
        InputFileError: the dataset is not prepared in `data_dir`, has no
            such split, or lacks SQuAD's features.
    """
    builder = tfds_inputs.open_prepared(name, data_dir)
    for key in ("id", "context", "question", "answers"):
        tfds_inputs.feature(builder, name, key)
    articles = {}  # title -> {context: paragraph}
    where = tfds_inputs.split_source(name, split)
    for position, row in enumerate(tfds_inputs.read_split(builder, name, split)):
        source = f"{where} record {position}"
        title = tfds_inputs.text(row.get("title", b""), f"{source} title")
        context = tfds_inputs.text(row["context"], f"{source} context")
        paragraph = articles.setdefault(title, {}).setdefault(context, {"context": context, "qas": []})
        qa = {
            "id": tfds_inputs.text(row["id"], f"{source} id"),
            "question": tfds_inputs.text(row["question"], f"{source} question"),
            "answers": _tfds_answers(row["answers"], f"{source} answers"),
        }
        if "is_impossible" in row:
            qa["is_impossible"] = bool(row["is_impossible"])
        if "plausible_answers" in row:
            qa["plausible_answers"] = _tfds_answers(row["plausible_answers"], f"{source} plausible_answers")
        paragraph["qas"].append(qa)
    return [{"title": title, "paragraphs": list(paragraphs.values())} for title, paragraphs in articles.items()]


def _get(container, key, kind, path, where):
    """`container[key]`, checked to be a `kind`; else an error naming `where`."""
    if not isinstance(container, dict) or key not in container:
        raise InputFileError(f"{path}: {where}: missing \"{key}\"")
    value = container[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise InputFileError(f"{path}: {where}: \"{key}\" must be of type {names}, got {type(value).__name__}")
    return value


def iter_questions(path, data):
    """Yields `(context, qa, where)` for every question, checking the layout.

    `where` names the question for messages (`question 'id'`).

    Raises:
        InputFileError: missing or mistyped `paragraphs`, `context`, `qas`,
            `id`, `question`.
    """
    for article_index, article in enumerate(data):
        paragraphs = _get(article, "paragraphs", list, path, f"data[{article_index}]")
        for paragraph_index, paragraph in enumerate(paragraphs):
            where = f"data[{article_index}].paragraphs[{paragraph_index}]"
            context = _get(paragraph, "context", str, path, where)
            qas = _get(paragraph, "qas", list, path, where)
            for qa_index, qa in enumerate(qas):
                qas_id = _get(qa, "id", (str, int), path, f"{where}.qas[{qa_index}]")
                question_where = f"question '{qas_id}'"
                _get(qa, "question", str, path, question_where)
                yield context, qa, question_where


def read_squad_examples(path, is_training, version_2_with_negative=False, data=None):
    """Reads a SQuAD file into `SquadExample`s (the original's `read_squad_examples`).

    A question whose context is empty (or blank) gets no window, as in the
    original: its prediction is "empty", and an unanswerable training
    question adds nothing. For training, each answerable question must have
    a context and exactly one answer. As
    in the original, a training question whose answer text (whitespace
    normalised) is not found in the words that `answer_start` points at is
    skipped; its id is returned so that the caller can report them.

    Args:
        path: The JSON file; with `data`, only how messages name the source.
        is_training: Read answers (and `is_impossible` for v2.0).
        version_2_with_negative: v2.0: every training question has
            `is_impossible`.
        data: The file's `data` list when already loaded (`load_squad_json`,
            `load_tfds_squad`); None reads `path`.

    Returns:
        `(examples, skipped_ids)`.

    Raises:
        InputFileError: naming the question id for a missing or mistyped
            key, a training question without exactly one answer, an empty
            answer, or an answer whose `answer_start` and length fall
            outside its context.
    """
    examples = []
    skipped_ids = []
    seen_ids = set()
    last_context = None
    for context, qa, where in iter_questions(path, load_squad_json(path) if data is None else data):
        if context is not last_context:
            doc_tokens, word_starts = split_context(context)
            last_context = context
        qas_id = qa["id"]
        in_context = dict(context=context, word_starts=word_starts)
        if not is_training:
            if qas_id in seen_ids:
                raise InputFileError(f"{path}: {where}: the id is used by an earlier question too")
            seen_ids.add(qas_id)
            examples.append(SquadExample(qas_id, qa["question"], doc_tokens, **in_context))
            continue
        is_impossible = False
        if version_2_with_negative:
            is_impossible = _get(qa, "is_impossible", bool, path, where)
        if is_impossible:
            examples.append(SquadExample(qas_id, qa["question"], doc_tokens, "", -1, -1, True, **in_context))
            continue
        answers = _get(qa, "answers", list, path, where)
        if not doc_tokens:  # (The original fails here with an IndexError.)
            raise InputFileError(f"{path}: {where}: its context is empty, so it holds no answer to train on")
        if len(answers) != 1:
            raise InputFileError(
                f"{path}: {where}: training needs exactly 1 answer per question, found {len(answers)}"
            )
        answer_text = _get(answers[0], "text", str, path, where)
        answer_start = _get(answers[0], "answer_start", int, path, where)
        if not answer_text:
            raise InputFileError(f"{path}: {where}: the answer text is empty")
        if answer_start < 0 or answer_start + len(answer_text) > len(context):
            raise InputFileError(
                f"{path}: {where}: answer {answer_text!r} at answer_start {answer_start} "
                f"lies outside its context ({len(context)} characters)"
            )
        start_position = bisect.bisect_right(word_starts, answer_start) - 1
        end_position = bisect.bisect_right(word_starts, answer_start + len(answer_text) - 1) - 1
        actual_text = " ".join(doc_tokens[start_position : end_position + 1])
        if actual_text.find(" ".join(whitespace_tokenize(answer_text))) == -1:
            skipped_ids.append(qas_id)
            continue
        examples.append(
            SquadExample(qas_id, qa["question"], doc_tokens, answer_text, start_position, end_position,
                         answer_start=answer_start, **in_context)
        )
    return examples, skipped_ids


# ----------------------------------------------------------------------------
# Features.
# ----------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class SquadFeatures:
    """One `[CLS] question [SEP] window [SEP]` sequence (the original's `InputFeatures`).

    Attributes:
        unique_id: From `UNIQUE_ID_BASE`, one per window.
        example_index: Index of the example in the converted list.
        doc_span_index: Index of the window within the example.
        tokens: The word pieces, unpadded.
        token_to_orig_map: Position in `tokens` -> index in `doc_tokens`.
        token_is_max_context: Position -> whether this window gives that
            token its maximum context.
        input_ids, input_mask, segment_ids: Padded to `max_seq_length`.
        start_position, end_position: Training only: answer positions in
            `tokens` (0, i.e. `[CLS]`, when impossible or outside the window).
        is_impossible: Training only: the example's `is_impossible`.
        token_spans: A variant's tokenizer only: position in `tokens` ->
            `(start, end)` character offsets of that context token in the
            example's context (None for WordPiece).
    """

    unique_id: int
    example_index: int
    doc_span_index: int
    tokens: list
    token_to_orig_map: dict
    token_is_max_context: dict
    input_ids: list
    input_mask: list
    segment_ids: list
    start_position: int = None
    end_position: int = None
    is_impossible: bool = None
    token_spans: dict = None


DocSpan = collections.namedtuple("DocSpan", ["start", "length"])


def doc_spans(num_doc_tokens, max_tokens_for_doc, doc_stride):
    """The original's sliding windows over a context's word pieces.

    Windows of `max_tokens_for_doc` tokens, each starting `doc_stride` after
    the previous one, the last one ending at the last token.

    Example:
    >>> doc_spans(10, 4, 3)
    [DocSpan(start=0, length=4), DocSpan(start=3, length=4), DocSpan(start=6, length=4)]
    """
    if max_tokens_for_doc < 1 or doc_stride < 1:
        raise ValueError(f"need max_tokens_for_doc >= 1 and doc_stride >= 1, got {max_tokens_for_doc}, {doc_stride}")
    spans = []
    start = 0
    while start < num_doc_tokens:
        length = min(num_doc_tokens - start, max_tokens_for_doc)
        spans.append(DocSpan(start, length))
        if start + length == num_doc_tokens:
            break
        start += min(length, doc_stride)
    return spans


def max_context_span_indexes(spans, num_doc_tokens):
    """For each token, the window in which it has its maximum context.

    A token's context in a window is `min(left, right) + 0.01 * length`
    (the original's `_check_is_max_context` score, in the same float64
    arithmetic); the first window with the highest score wins.

    Returns:
        Int array [num_doc_tokens] of window indexes.

    Example:
    >>> max_context_span_indexes(doc_spans(6, 4, 2), 6).tolist()
    [0, 0, 0, 1, 1, 1]
    """
    best_score = np.full(num_doc_tokens, -1.0)
    best_span = np.full(num_doc_tokens, -1)
    for span_index, span in enumerate(spans):
        left = np.arange(span.length)
        score = np.minimum(left, span.length - 1 - left) + 0.01 * span.length
        window = slice(span.start, span.start + span.length)
        better = score > best_score[window]
        best_score[window] = np.where(better, score, best_score[window])
        best_span[window] = np.where(better, span_index, best_span[window])
    return best_span


def improve_answer_span(doc_pieces, start, end, tokenizer, answer_text):
    """The sub-span of `doc_pieces[start:end + 1]` that tokenizes exactly as the answer.

    Whitespace words can carry more than the answer: "(1895-1943)." for the
    answer "1895". The word pieces `( 1895 - 1943 ) .` contain it exactly;
    when no sub-span matches ("Japan" inside "Japanese"), the span is kept.

    Returns:
        `(start, end)`, inclusive.
    """
    answer_pieces = " ".join(tokenizer.tokenize(answer_text))
    for new_start in range(start, end + 1):
        for new_end in range(end, new_start - 1, -1):
            if " ".join(doc_pieces[new_start : new_end + 1]) == answer_pieces:
                return new_start, new_end
    return start, end


def answer_token_span(piece_spans, first, last, answer_start, answer_end):
    """The tokens that hold an answer's first and last characters (Hugging Face's `run_qa`).

    Args:
        piece_spans: `(start, end)` character offsets of each context token.
        first, last: The first and last token of the answer's words.
        answer_start, answer_end: The answer's characters, end exclusive.

    Returns:
        `(start, end)` token indexes, inclusive: the last token from `first`
        on that starts at or before `answer_start`, and from there the
        first whose end reaches `answer_end`.

    Example:
    >>> answer_token_span([(0, 1), (1, 5), (5, 6), (6, 10), (10, 12)], 0, 4, 1, 10)
    (1, 3)
    """
    start = first
    while start < last and piece_spans[start + 1][0] <= answer_start:
        start += 1
    end = last
    while end > start and piece_spans[end - 1][1] >= answer_end:
        end -= 1
    return start, end


def sequence_layout(tokenizer):
    """`(cls, sep, separators_between, second_segment_id, pad_id)` of a tokenizer's pairs.

    WordPiece (`FullTokenizer`): the original's `[CLS] a [SEP] b [SEP]`,
    segment ids 0 then 1, padded with 0. A variant's tokenizer brings its
    `special_tokens`: RoBERTa's `<s> a </s></s> b </s>` with segment ids all
    0 and `<pad>`; ALBERT's `[CLS] a [SEP] b [SEP]` and `<pad>`.
    """
    specials = getattr(tokenizer, "special_tokens", None)
    if specials is None:
        return "[CLS]", "[SEP]", 1, 1, 0
    pad_id = tokenizer.convert_tokens_to_ids([specials.pad])[0]
    return specials.cls, specials.sep, specials.separators_between, int(specials.segment_ids), pad_id


@dataclasses.dataclass(slots=True)
class _TokenizedContext:
    pieces: list  # all_doc_tokens
    piece_ids: list
    piece_to_word: list  # tok_to_orig_index
    word_to_piece: list  # orig_to_tok_index
    piece_spans: list = None  # a variant's: (start, end) characters of each piece in the context


def tokenize_context(doc_tokens, tokenizer, word_pieces=None, word_starts=None):
    """Word pieces of a context's words, their ids, and the maps between words and pieces.

    A variant's tokenizer (one with `special_tokens`) cuts each word as in
    running text (`tokenize_word`, the first word of the context being the
    first of a text) and gives each piece's characters in the context
    (`word_token_spans`, offset by `word_starts`).

    Args:
        doc_tokens: The context's words.
        tokenizer: A `FullTokenizer`, or a variant's Python tokenizer.
        word_pieces: Optional dict word -> pieces, a cache shared between
            contexts (words repeat; tokenizing one never depends on another).
        word_starts: The character where each word starts in the context
            (variants; None: the words joined by single spaces).
    """
    if word_pieces is None:
        word_pieces = {}
    variant = hasattr(tokenizer, "special_tokens")
    if variant and word_starts is None:
        word_starts = np.cumsum([0] + [len(word) + 1 for word in doc_tokens[:-1]]).tolist()
    pieces = []
    piece_to_word = []
    word_to_piece = []
    piece_spans = [] if variant else None
    for word_index, word in enumerate(doc_tokens):
        word_to_piece.append(len(pieces))
        if variant:
            after_space = word_index > 0
            cached = word_pieces.get((word, after_space))
            if cached is None:
                tokens = tokenizer.tokenize_word(word, after_space)
                cached = word_pieces[word, after_space] = (tokens, tokenizer.word_token_spans(word, tokens, after_space))
            these, spans = cached
            start = word_starts[word_index]
            piece_spans.extend((start + a, start + b) for a, b in spans)
        else:
            these = word_pieces.get(word)
            if these is None:
                these = word_pieces[word] = tokenizer.tokenize(word)
        pieces.extend(these)
        piece_to_word.extend([word_index] * len(these))
    return _TokenizedContext(pieces, tokenizer.convert_tokens_to_ids(pieces), piece_to_word, word_to_piece,
                             piece_spans)


def example_to_features(
    example, example_index, context, tokenizer, max_seq_length, doc_stride, max_query_length,
    is_training, unique_id,
):
    """The features of one example, one per window (the original's loop body).

    Args:
        example: A `SquadExample`.
        example_index: Its index (stored in the features).
        context: `tokenize_context(example.doc_tokens, tokenizer, word_starts=example.word_starts)`.
        tokenizer: A `FullTokenizer`, or a variant's Python tokenizer.
        max_seq_length, doc_stride, max_query_length: As the original's flags.
        is_training: Compute answer positions.
        unique_id: Id of the first window.

    Returns:
        List of `SquadFeatures`.
    """
    cls, sep, between, second_segment_id, pad_id = sequence_layout(tokenizer)
    question = example.question_text
    if context.piece_spans is not None:
        question = question.lstrip()  # As Hugging Face's run_qa: a leading space would be a token.
    query_pieces = tokenizer.tokenize(question)[:max_query_length]
    num_pieces = len(context.pieces)
    if is_training and not example.is_impossible:
        answer_start = context.word_to_piece[example.start_position]
        if example.end_position < len(example.doc_tokens) - 1:
            answer_end = context.word_to_piece[example.end_position + 1] - 1
        else:
            answer_end = num_pieces - 1
        if context.piece_spans is None:
            answer_start, answer_end = improve_answer_span(
                context.pieces, answer_start, answer_end, tokenizer, example.orig_answer_text
            )
        elif answer_start <= answer_end:
            first_char = example.answer_start
            if first_char is None:  # An example made without its context: the words joined by spaces.
                first_char = context.piece_spans[answer_start][0]
            answer_start, answer_end = answer_token_span(
                context.piece_spans, answer_start, answer_end, first_char,
                first_char + len(example.orig_answer_text),
            )

    # [CLS] question [SEP] window [SEP] (RoBERTa: <s> question </s></s> window </s>)
    max_tokens_for_doc = max_seq_length - len(query_pieces) - 2 - between
    spans = doc_spans(num_pieces, max_tokens_for_doc, doc_stride)
    best_span = max_context_span_indexes(spans, num_pieces)
    prefix = [cls, *query_pieces] + [sep] * between
    doc_offset = len(prefix)
    prefix_ids = tokenizer.convert_tokens_to_ids(prefix)
    sep_id = prefix_ids[-1]
    features = []
    for span_index, span in enumerate(spans):
        window = slice(span.start, span.start + span.length)
        positions = range(doc_offset, doc_offset + span.length)
        tokens = prefix + context.pieces[window] + [sep]
        token_to_orig_map = dict(zip(positions, context.piece_to_word[window]))
        token_is_max_context = dict(zip(positions, (best_span[window] == span_index).tolist()))
        input_ids = prefix_ids + context.piece_ids[window] + [sep_id]
        padding = [0] * (max_seq_length - len(tokens))
        feature = SquadFeatures(
            unique_id=unique_id + span_index,
            example_index=example_index,
            doc_span_index=span_index,
            tokens=tokens,
            token_to_orig_map=token_to_orig_map,
            token_is_max_context=token_is_max_context,
            input_ids=input_ids + [pad_id] * len(padding),
            input_mask=[1] * len(tokens) + padding,
            segment_ids=[0] * doc_offset + [second_segment_id] * (span.length + 1) + padding,
        )
        if context.piece_spans is not None:
            feature.token_spans = dict(zip(positions, context.piece_spans[window]))
        if is_training:
            feature.is_impossible = example.is_impossible
            feature.start_position = feature.end_position = 0
            span_end = span.start + span.length - 1
            # A window without the whole answer is trained to point at [CLS].
            if not example.is_impossible and span.start <= answer_start and answer_end <= span_end:
                feature.start_position = answer_start - span.start + doc_offset
                feature.end_position = answer_end - span.start + doc_offset
        features.append(feature)
    return features


def convert_examples_to_features(
    examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training
):
    """Yields the `SquadFeatures` of all examples, `unique_id`s counting up from 1e9.

    A context shared by several questions is tokenized once, and each
    distinct word once (the original tokenizes every word of the context
    again for each question; the result is the same).

    Args:
        examples: `SquadExample`s, e.g. from `read_squad_examples`.
        tokenizer: A `FullTokenizer`, or a variant's Python tokenizer (its
            `special_tokens` lay the windows out).
        max_seq_length: Padded length; must exceed `max_query_length` and
            the special tokens (3; RoBERTa's 4) for every window to hold at
            least one context token.
        doc_stride: Tokens between the starts of consecutive windows.
        max_query_length: Questions are truncated to this many pieces.
        is_training: Compute answer positions.
    """
    specials = sequence_layout(tokenizer)[2] + 2
    if max_seq_length <= max_query_length + specials:
        raise ValueError(f"max_seq_length ({max_seq_length}) must be greater than max_query_length "
                         f"({max_query_length}) + {specials}")
    contexts = {}
    word_pieces = {}
    unique_id = UNIQUE_ID_BASE
    for example_index, example in enumerate(examples):
        key = id(example.doc_tokens)
        if key not in contexts:
            # Holding doc_tokens in the value keeps its id from being reused.
            contexts[key] = (example.doc_tokens,
                             tokenize_context(example.doc_tokens, tokenizer, word_pieces, example.word_starts))
        features = example_to_features(
            example, example_index, contexts[key][1], tokenizer, max_seq_length, doc_stride,
            max_query_length, is_training, unique_id,
        )
        unique_id += len(features)
        yield from features


# ----------------------------------------------------------------------------
# Post-processing.
# ----------------------------------------------------------------------------

RawResult = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])

_Candidate = collections.namedtuple(
    "_Candidate", ["feature_index", "start_index", "end_index", "start_logit", "end_logit"]
)
_Answer = collections.namedtuple("_Answer", ["text", "start_logit", "end_logit"])


@dataclasses.dataclass
class SquadPredictions:
    """What the original writes after prediction, keyed by question id.

    Attributes:
        predictions: Id -> answer text (`predictions.json`).
        nbest: Id -> list of `{text, probability, start_logit, end_logit}`
            (`nbest_predictions.json`).
        null_odds: v2.0 only: id -> null score minus the best non-null score
            (`null_odds.json`).
    """

    predictions: dict
    nbest: dict
    null_odds: dict


def best_indexes(logits, n_best_size):
    """Indexes of the `n_best_size` largest logits, ties in index order."""
    return sorted(range(len(logits)), key=logits.__getitem__, reverse=True)[:n_best_size]


def compute_softmax(scores):
    """Softmax of a list of floats, as Python floats."""
    if not scores:
        return []
    max_score = max(scores)
    exp_scores = [math.exp(score - max_score) for score in scores]
    total = sum(exp_scores)
    return [x / total for x in exp_scores]


def _strip_spaces(text):
    """`text` without spaces, and a map from its positions to those in `text`."""
    kept = [i for i, char in enumerate(text) if char != " "]
    return "".join(text[i] for i in kept), kept


def get_final_text(pred_text, orig_text, basic_tokenizer):
    """Projects a predicted (normalised, word-piece) answer back onto the context.

    `orig_text` is the whole words the predicted pieces came from ("Steve
    Smith's" for the pieces "steve smith"); the answer is the part of it that
    lines up, character for character, with the prediction once both are
    basic-tokenized ("Steve Smith"). When the alignment fails, `orig_text` is
    returned, as in the original.

    Args:
        pred_text: The predicted pieces joined, `##` removed.
        orig_text: The context words those pieces came from, joined by spaces.
        basic_tokenizer: A `BasicTokenizer` with the model's casing.

    Returns:
        The answer text.

    Example:
    >>> get_final_text("steve smith", "Steve Smith's", BasicTokenizer(do_lower_case=True))
    'Steve Smith'
    """
    tok_text = " ".join(basic_tokenizer.tokenize(orig_text))
    start = tok_text.find(pred_text)
    if start == -1:
        return orig_text
    end = start + len(pred_text) - 1
    orig_ns_text, orig_ns_to_s = _strip_spaces(orig_text)
    tok_ns_text, tok_ns_to_s = _strip_spaces(tok_text)
    if len(orig_ns_text) != len(tok_ns_text):
        return orig_text
    tok_s_to_ns = {s: ns for ns, s in enumerate(tok_ns_to_s)}
    # Both ends fall on non-space characters of tok_text (pred_text is stripped).
    if start not in tok_s_to_ns or end not in tok_s_to_ns:
        return orig_text
    return orig_text[orig_ns_to_s[tok_s_to_ns[start]] : orig_ns_to_s[tok_s_to_ns[end]] + 1]


def _answer_text(example, feature, candidate, basic_tokenizer):
    """The context text of a non-null candidate span.

    With a variant's tokenizer, the context's characters from the start of
    the first token to the end of the last (Hugging Face's `run_qa`); with
    WordPiece, the original's alignment of the pieces with the words.
    """
    if feature.token_spans is not None:
        context = example.context if example.context is not None else " ".join(example.doc_tokens)
        start = feature.token_spans[candidate.start_index][0]
        end = feature.token_spans[candidate.end_index][1]
        # A token of a word's space alone is empty, at the word's start.
        return context[start:end].strip()
    pieces = feature.tokens[candidate.start_index : candidate.end_index + 1]
    first_word = feature.token_to_orig_map[candidate.start_index]
    last_word = feature.token_to_orig_map[candidate.end_index]
    # Undo WordPiece, then normalise whitespace.
    pred_text = " ".join(pieces).replace(" ##", "").replace("##", "")
    pred_text = " ".join(pred_text.split())
    orig_text = " ".join(example.doc_tokens[first_word : last_word + 1])
    return get_final_text(pred_text, orig_text, basic_tokenizer)


def predict_answer(
    example, features, results_by_id, n_best_size, max_answer_length, basic_tokenizer,
    version_2_with_negative=False, null_score_diff_threshold=0.0,
):
    """The answer, n-best list and null-score difference of one question.

    Candidates are the pairs of the `n_best_size` best start and end
    positions of every window, kept when both lie in the context, the start
    has its maximum context in that window, and the span has at most
    `max_answer_length` pieces (with a variant's tokenizer, also some text:
    not a word's space alone). For v2.0 the null answer competes with its
    smallest score over the windows (`start_logits[0] + end_logits[0]`), and
    is chosen when it beats the best non-null answer by more than
    `null_score_diff_threshold`.

    Args:
        example: The `SquadExample`.
        features: Its `SquadFeatures`, in window order.
        results_by_id: `unique_id` -> `RawResult` (logits as float lists).
        n_best_size, max_answer_length: As the original's flags.
        basic_tokenizer: A `BasicTokenizer` with the model's casing.
        version_2_with_negative: Allow the null answer.
        null_score_diff_threshold: As the original's flag.

    Returns:
        `(answer_text, nbest_json, score_diff)`; `score_diff` is None for v1.1.
    """
    candidates = []
    # The original's starting values (ints: they reach the JSON when a
    # question has no window at all).
    score_null = 1000000
    null_feature_index = 0
    null_start_logit = null_end_logit = 0
    for feature_index, feature in enumerate(features):
        result = results_by_id[feature.unique_id]
        if version_2_with_negative:
            feature_null_score = result.start_logits[0] + result.end_logits[0]
            if feature_null_score < score_null:
                score_null = feature_null_score
                null_feature_index = feature_index
                null_start_logit, null_end_logit = result.start_logits[0], result.end_logits[0]
        num_tokens = len(feature.tokens)
        end_indexes = best_indexes(result.end_logits, n_best_size)
        for start_index in best_indexes(result.start_logits, n_best_size):
            if start_index >= num_tokens or start_index not in feature.token_to_orig_map:
                continue
            if not feature.token_is_max_context.get(start_index, False):
                continue
            for end_index in end_indexes:
                if end_index >= num_tokens or end_index not in feature.token_to_orig_map:
                    continue
                if end_index < start_index or end_index - start_index + 1 > max_answer_length:
                    continue
                candidates.append(
                    _Candidate(
                        feature_index, start_index, end_index,
                        result.start_logits[start_index], result.end_logits[end_index],
                    )
                )
    if version_2_with_negative:
        candidates.append(_Candidate(null_feature_index, 0, 0, null_start_logit, null_end_logit))
    candidates.sort(key=lambda c: c.start_logit + c.end_logit, reverse=True)

    nbest = []
    seen_texts = set()
    for candidate in candidates:
        if len(nbest) >= n_best_size:
            break
        if candidate.start_index > 0:
            feature = features[candidate.feature_index]
            text = _answer_text(example, feature, candidate, basic_tokenizer)
            if text in seen_texts or (feature.token_spans is not None and not text):
                continue
        else:
            text = ""
        seen_texts.add(text)
        nbest.append(_Answer(text, candidate.start_logit, candidate.end_logit))
    if version_2_with_negative and "" not in seen_texts:
        nbest.append(_Answer("", null_start_logit, null_end_logit))
    if not nbest:
        # No valid span at all (e.g. a context without word pieces): the
        # original's placeholder.
        nbest.append(_Answer("empty", 0.0, 0.0))

    probabilities = compute_softmax([a.start_logit + a.end_logit for a in nbest])
    nbest_json = [
        collections.OrderedDict(
            text=answer.text, probability=probability,
            start_logit=answer.start_logit, end_logit=answer.end_logit,
        )
        for answer, probability in zip(nbest, probabilities)
    ]
    if not version_2_with_negative:
        return nbest[0].text, nbest_json, None
    best_non_null = next((a for a in nbest if a.text), None)
    if best_non_null is None:
        # The original fails here; tf-models answers "" with the null score.
        return "", nbest_json, score_null
    score_diff = score_null - best_non_null.start_logit - best_non_null.end_logit
    text = "" if score_diff > null_score_diff_threshold else best_non_null.text
    return text, nbest_json, score_diff


def postprocess_predictions(
    examples, features, results, n_best_size, max_answer_length, do_lower_case,
    version_2_with_negative=False, null_score_diff_threshold=0.0,
):
    """The original's `write_predictions`, without the writing.

    Args:
        examples: The `SquadExample`s.
        features: All their `SquadFeatures`.
        results: `RawResult`s (or `(unique_id, start_logits, end_logits)`),
            one per feature; logits as sequences of floats.
        n_best_size: Candidates per question in the n-best list.
        max_answer_length: Longest answer, in word pieces.
        do_lower_case: The model's casing (for the text alignment).
        version_2_with_negative: SQuAD v2.0: allow the null answer.
        null_score_diff_threshold: Predict null when null score minus best
            non-null score exceeds this.

    Returns:
        A `SquadPredictions`.
    """
    features_by_example = collections.defaultdict(list)
    for feature in features:
        features_by_example[feature.example_index].append(feature)
    results_by_id = {}
    for unique_id, start_logits, end_logits in results:
        # Python floats, as the original: their sums order ties as it does.
        results_by_id[int(unique_id)] = RawResult(int(unique_id), _floats(start_logits), _floats(end_logits))
    basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
    output = SquadPredictions(collections.OrderedDict(), collections.OrderedDict(), collections.OrderedDict())
    for example_index, example in enumerate(examples):
        text, nbest_json, score_diff = predict_answer(
            example, features_by_example[example_index], results_by_id, n_best_size,
            max_answer_length, basic_tokenizer, version_2_with_negative, null_score_diff_threshold,
        )
        output.predictions[example.qas_id] = text
        output.nbest[example.qas_id] = nbest_json
        if version_2_with_negative:
            output.null_odds[example.qas_id] = score_diff
    return output


def _floats(logits):
    return logits.tolist() if hasattr(logits, "tolist") else [float(x) for x in logits]


def predictions_json(mapping):
    """The original's JSON layout: indented by 4, newline at the end."""
    return json.dumps(mapping, indent=4) + "\n"
