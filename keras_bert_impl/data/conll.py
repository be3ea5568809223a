"""CoNLL-2003-format tagging data: reading, word-piece features, entity scores.

A file holds one word per line, its columns separated by whitespace, the
label in the last column (`EU NNP B-NP B-ORG`); a blank line ends a
sentence; `-DOCSTART-` lines separate documents. Every line of a file must
have the same number of columns.

Labels are word-level: a word's label sits on its first word piece, the
other pieces carry weight 0 (no loss, no prediction). Sentences longer than
a sequence are split at word boundaries into several windows, so every word
gets a prediction. A variant's tokenizer (RoBERTa's byte-level BPE, ALBERT's
SentencePiece) cuts each word as inside the sentence's text, its words
joined by spaces (`tokenize_word`: RoBERTa's words after the first carry
their space), between its own `cls` and `sep`, padded with its pad token.
Entity scores are conlleval's (chunks from IOB1, IOB2 or IOBES tags;
micro-averaged precision, recall and F1).

A prepared TFDS `conll2003` (or another dataset of CoNLL columns as
sequence features) gives the same sentences (`read_tfds_conll`): its
`ClassLabel` ids turned back into the file's tags, the columns in the
file's order, and the label list its `ClassLabel`'s names
(`tfds_label_names`).
"""

import collections
import dataclasses

from keras_bert_impl import extras
from keras_bert_impl.data import tfds_inputs
from keras_bert_impl.errors import InputFileError
from keras_bert_impl.io import read_utf8_lines

DOCSTART = "-DOCSTART-"


@dataclasses.dataclass
class TaggedSentence:
    """One sentence of a CoNLL file.

    Attributes:
        words: The first column.
        labels: The last column, or None for a one-column (words only) file.
        columns: All columns of each word's line, for writing predictions back.
        line_numbers: 1-based line of each word, for messages (empty for a
            sentence not read from a file).
        source: Where a sentence not read from a file comes from
            (`conll2003[train] sentence 7`), for messages; "" for files.
    """

    words: list
    labels: list
    columns: list
    line_numbers: list
    source: str = ""


def read_conll(path, require_labels=True):
    """Reads the sentences of a CoNLL-format file.

    Args:
        path: The file (UTF-8).
        require_labels: Refuse a file with only one column.

    Returns:
        List of `TaggedSentence`.

    Raises:
        InputFileError: `file:line` for undecodable bytes, a line whose number
            of columns differs from the first word line's, a missing label
            column; a file without any word.
    """
    sentences = []
    current = []  # (fields, line number) of each word of the sentence being read
    num_columns = first_line = None

    def end_sentence():
        if current:
            columns = [fields for fields, _ in current]
            sentences.append(
                TaggedSentence(
                    words=[fields[0] for fields in columns],
                    labels=[fields[-1] for fields in columns] if num_columns > 1 else None,
                    columns=columns,
                    line_numbers=[line_number for _, line_number in current],
                )
            )
            current.clear()

    try:
        for line_number, line in read_utf8_lines(path, kind="CoNLL file"):
            fields = line.split()
            if not fields:
                end_sentence()
                continue
            if fields[0] == DOCSTART:
                end_sentence()
                continue
            if num_columns is None:
                num_columns, first_line = len(fields), line_number
                if require_labels and num_columns < 2:
                    raise InputFileError(
                        f"{path}:{line_number}: needs a label column (word ... label), found 1 column"
                    )
            elif len(fields) != num_columns:
                raise InputFileError(
                    f"{path}:{line_number}: {len(fields)} columns, but line {first_line} has {num_columns}"
                )
            current.append((fields, line_number))
    except OSError as e:
        raise InputFileError(f"{path}: cannot read ({e.strerror or e})") from None
    end_sentence()
    if not sentences:
        raise InputFileError(f"{path}: no sentences (an empty file, or only -DOCSTART- lines)")
    return sentences


def _tfds_column_features(builder, name, words_feature, label_feature):
    """`[(feature, class names or None)]`: the sequence features of a CoNLL
    dataset, words first and labels last as the file's columns."""
    tfds = extras.import_extra("tensorflow_datasets", "tfds", "--tfds_name")

    for key in (words_feature, label_feature):
        if not isinstance(tfds_inputs.feature(builder, name, key), tfds.features.Sequence):
            raise InputFileError(f"{builder.data_dir}: feature {key!r} of TFDS dataset {name} is not a sequence")
    features = builder.info.features
    middle = [
        key for key, value in features.items()
        if isinstance(value, tfds.features.Sequence) and key not in (words_feature, label_feature)
    ]
    return [(key, tfds_inputs.class_names(features[key])) for key in (words_feature, *middle, label_feature)]


def _class_name(names, class_id, source):
    """`names[class_id]`, or an error naming `source` (-1 would pick the last name)."""
    if not 0 <= class_id < len(names):
        raise InputFileError(f"{source}: class id {class_id} is not one of the {len(names)} labels")
    return names[class_id]


def read_tfds_conll(name, data_dir, split, words_feature="tokens", label_feature="ner"):
    """Reads the sentences of one split of a prepared TFDS CoNLL dataset.

    Each record is a sentence with one sequence per column (`tokens`, `pos`,
    `chunks`, `ner` for `conll2003`); `ClassLabel` ids become their names,
    so `columns` are the file's lines split (words first, labels last).
    Records without words (TFDS's CoNLL builder stores one at the end of a
    file that ends with a blank line) are skipped.

    Args:
        name: The TFDS name, e.g. `conll2003`.
        data_dir: The TFDS data directory it is prepared in (never downloaded).
        split: The split (`train`, `dev`, `test` for `conll2003`, or an expression).
        words_feature, label_feature: The features of the words and the labels.

    Returns:
        List of `TaggedSentence`, in the stored order.

    Raises:
        InputFileError: the dataset is not prepared in `data_dir`, lacks the
            split or a feature, or its columns differ in length; no sentences.
    """
    builder = tfds_inputs.open_prepared(name, data_dir)
    columns = _tfds_column_features(builder, name, words_feature, label_feature)
    where = tfds_inputs.split_source(name, split)
    sentences = []
    for position, row in enumerate(tfds_inputs.read_split(builder, name, split)):
        source = f"{where} sentence {position}"
        values = []
        for key, names in columns:
            if names is None:
                values.append([tfds_inputs.text(value, f"{source} {key}") for value in row[key]])
            else:
                values.append([_class_name(names, int(value), f"{source} word {i} {key}")
                               for i, value in enumerate(row[key])])
        if len({len(column) for column in values}) != 1:
            raise InputFileError(f"{source}: features {', '.join(k for k, _ in columns)} differ in length")
        if not values[0]:
            continue
        word_columns = [list(fields) for fields in zip(*values)]
        sentences.append(
            TaggedSentence(values[0], values[-1], word_columns, line_numbers=[], source=source)
        )
    if not sentences:
        raise InputFileError(f"{where}: no sentences")
    return sentences


def tfds_label_names(name, data_dir, label_feature="ner"):
    """The label list of a prepared TFDS CoNLL dataset: its `ClassLabel`'s
    names in id order, or None when the labels are plain text."""
    builder = tfds_inputs.open_prepared(name, data_dir)
    return tfds_inputs.class_names(tfds_inputs.feature(builder, name, label_feature))


def label_list(sentences):
    """The labels of `sentences`: "O" first, the others sorted."""
    labels = {label for s in sentences for label in s.labels}
    return (["O"] if "O" in labels else []) + sorted(labels - {"O"})


# ----------------------------------------------------------------------------
# Features.
# ----------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class TaggingFeatures:
    """One `[CLS] pieces [SEP]` (RoBERTa: `<s> pieces </s>`) window of a sentence.

    Attributes:
        sentence_index: The sentence it comes from.
        first_word: Index in the sentence of the window's first word.
        word_positions: Position of each of the window's words' first piece.
        input_ids, input_mask, segment_ids: Padded to `max_seq_length`.
        label_ids: The word's label id on first pieces, 0 elsewhere.
        label_weights: 1 on first pieces, 0 elsewhere.
    """

    sentence_index: int
    first_word: int
    word_positions: list
    input_ids: list
    input_mask: list
    segment_ids: list
    label_ids: list
    label_weights: list


@dataclasses.dataclass
class TaggingCounts:
    """What feature conversion had to adapt (nothing is dropped).

    Attributes:
        windows: Features written.
        split_sentences: Sentences longer than a sequence, split in windows.
        empty_words: Words without any word piece (e.g. only control
            characters), given `[UNK]` (a variant's unknown token) so that
            they still get a label.
        cut_words: Words with more pieces than fit a sequence, cut after the
            first `max_seq_length - 2` (their label is on the first).
    """

    windows: int = 0
    split_sentences: int = 0
    empty_words: int = 0
    cut_words: int = 0


def sentence_windows(piece_counts, max_pieces):
    """Splits words into consecutive runs of at most `max_pieces` pieces.

    Args:
        piece_counts: Pieces per word (each at most `max_pieces`).
        max_pieces: Pieces per window.

    Returns:
        List of `(first_word, end_word)` ranges.

    Example:
    >>> sentence_windows([2, 3, 1, 4, 5], 5)
    [(0, 2), (2, 4), (4, 5)]
    """
    windows = []
    start = used = 0
    for index, count in enumerate(piece_counts):
        if used + count > max_pieces and index > start:
            windows.append((start, index))
            start, used = index, 0
        used += count
    windows.append((start, len(piece_counts)))
    return windows


def convert_sentences_to_features(sentences, tokenizer, max_seq_length, label_map, path):
    """Word-piece features of tagged sentences.

    Args:
        sentences: `TaggedSentence`s (labels may be None for prediction).
        tokenizer: A `FullTokenizer`, or a variant's Python tokenizer (its
            `special_tokens` and `tokenize_word`).
        max_seq_length: Padded length (at least 3).
        label_map: Label -> id; None to predict (any label column is not read).
        path: The sentences' file, for messages.

    Returns:
        `(features, counts)`: list of `TaggingFeatures` and a `TaggingCounts`.

    Raises:
        InputFileError: `file:line` of a label that is not in `label_map`.
    """
    max_pieces = max_seq_length - 2
    specials = getattr(tokenizer, "special_tokens", None)
    cls, sep, unk = ("[CLS]", "[SEP]", "[UNK]") if specials is None else (specials.cls, specials.sep, specials.unk)
    pad_id = 0 if specials is None else tokenizer.convert_tokens_to_ids([specials.pad])[0]
    counts = TaggingCounts()
    features = []
    for sentence_index, sentence in enumerate(sentences):
        pieces = []
        for word_index, word in enumerate(sentence.words):
            if specials is None:
                word_pieces = tokenizer.tokenize(word)
            else:
                word_pieces = tokenizer.tokenize_word(word, after_space=word_index > 0)
            if not word_pieces:
                counts.empty_words += 1
                word_pieces = [unk]
            if len(word_pieces) > max_pieces:
                counts.cut_words += 1
                word_pieces = word_pieces[:max_pieces]
            pieces.append(word_pieces)
        label_ids = [0] * len(pieces)
        if label_map is not None:
            for index, label in enumerate(sentence.labels):
                if label not in label_map:
                    where = (
                        f"{sentence.source} word {index + 1}" if sentence.source
                        else f"{path}:{sentence.line_numbers[index]}"
                    )
                    raise InputFileError(
                        f"{where}: label {label!r} is not one of the model's labels ({', '.join(label_map)})"
                    )
                label_ids[index] = label_map[label]
        windows = sentence_windows([len(p) for p in pieces], max_pieces)
        counts.split_sentences += len(windows) > 1
        for first_word, end_word in windows:
            tokens, word_positions = [cls], []
            window_labels, window_weights = [0], [0]
            for index in range(first_word, end_word):
                word_positions.append(len(tokens))
                tokens.extend(pieces[index])
                window_labels.extend([label_ids[index]] + [0] * (len(pieces[index]) - 1))
                window_weights.extend([1] + [0] * (len(pieces[index]) - 1))
            tokens.append(sep)
            padding = [0] * (max_seq_length - len(tokens))
            features.append(
                TaggingFeatures(
                    sentence_index=sentence_index,
                    first_word=first_word,
                    word_positions=word_positions,
                    input_ids=tokenizer.convert_tokens_to_ids(tokens) + [pad_id] * len(padding),
                    input_mask=[1] * len(tokens) + padding,
                    segment_ids=[0] * max_seq_length,
                    label_ids=window_labels + [0] + padding,
                    label_weights=window_weights + [0] + padding,
                )
            )
    counts.windows = len(features)
    return features, counts


def word_label_ids(features, predicted_ids, sentences):
    """Per-word predictions, gathered from the windows' first pieces.

    Args:
        features: The `TaggingFeatures` of `sentences`.
        predicted_ids: [num_features, max_seq_length] label ids (argmax).
        sentences: The `TaggedSentence`s.

    Returns:
        One list of label ids per sentence, one id per word.
    """
    words = [[None] * len(s.words) for s in sentences]
    for feature, row in zip(features, predicted_ids):
        for offset, position in enumerate(feature.word_positions):
            words[feature.sentence_index][feature.first_word + offset] = int(row[position])
    return words


def format_predictions(sentences, predicted_labels):
    """The sentences' lines with the predicted label appended, blank-line separated.

    With gold labels in the last column this is conlleval's input
    (`word ... gold predicted`).
    """
    lines = []
    for sentence, labels in zip(sentences, predicted_labels):
        lines.extend(" ".join([*columns, label]) for columns, label in zip(sentence.columns, labels))
        lines.append("")
    return "\n".join(lines) + ("\n" if lines else "")


# ----------------------------------------------------------------------------
# Entity-level scores (conlleval).
# ----------------------------------------------------------------------------


def split_tag(label):
    """`"B-PER"` -> `("B", "PER")`; `"O"` -> `("O", "")`; an unprefixed
    label is an inside tag of its own type (IO tagging)."""
    if label == "O":
        return "O", ""
    prefix, dash, entity_type = label.partition("-")
    if dash and prefix in ("B", "I", "E", "S"):
        return prefix, entity_type
    return "I", label


def _chunk_ends(previous_tag, tag, previous_type, entity_type):
    if previous_tag in ("E", "S"):
        return True
    if previous_tag in ("B", "I") and tag in ("B", "S", "O"):
        return True
    return previous_tag != "O" and previous_type != entity_type


def _chunk_starts(previous_tag, tag, previous_type, entity_type):
    if tag in ("B", "S"):
        return True
    if previous_tag in ("E", "S", "O") and tag in ("E", "I"):
        return True
    return tag != "O" and previous_type != entity_type


def entity_chunks(labels):
    """conlleval's chunks of one sentence: `(type, first, last)` word indexes.

    Example:
    >>> entity_chunks(["B-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG"])
    [('PER', 0, 1), ('LOC', 3, 3), ('LOC', 4, 4), ('ORG', 5, 5)]
    """
    chunks = []
    previous_tag, previous_type, start = "O", "", 0
    for index, label in enumerate([*labels, "O"]):
        tag, entity_type = split_tag(label)
        if _chunk_ends(previous_tag, tag, previous_type, entity_type):
            chunks.append((previous_type, start, index - 1))
        if _chunk_starts(previous_tag, tag, previous_type, entity_type):
            start = index
        previous_tag, previous_type = tag, entity_type
    return chunks


def _precision_recall_f1(correct, predicted, gold):
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def entity_scores(gold_sentences, predicted_sentences):
    """Entity-level precision, recall and F1 (micro over entities) and per type.

    Args:
        gold_sentences: Lists of gold labels, one list per sentence.
        predicted_sentences: Lists of predicted labels, aligned.

    Returns:
        Dict: `precision`, `recall`, `f1`, `accuracy` (per word), and for each
        entity type `<type>_precision`, `<type>_recall`, `<type>_f1`,
        `<type>_support` (gold entities).
    """
    gold_chunks, predicted_chunks = set(), set()
    correct_words = total_words = 0
    for index, (gold, predicted) in enumerate(zip(gold_sentences, predicted_sentences, strict=True)):
        gold_chunks.update((index, *chunk) for chunk in entity_chunks(gold))
        predicted_chunks.update((index, *chunk) for chunk in entity_chunks(predicted))
        correct_words += sum(g == p for g, p in zip(gold, predicted, strict=True))
        total_words += len(gold)
    correct = gold_chunks & predicted_chunks
    precision, recall, f1 = _precision_recall_f1(len(correct), len(predicted_chunks), len(gold_chunks))
    result = {"precision": precision, "recall": recall, "f1": f1, "accuracy": correct_words / max(total_words, 1)}
    by_type = collections.defaultdict(lambda: [0, 0, 0])  # correct, predicted, gold
    for chunks, slot in ((correct, 0), (predicted_chunks, 1), (gold_chunks, 2)):
        for chunk in chunks:
            by_type[chunk[1]][slot] += 1
    for entity_type in sorted(by_type):
        correct_count, predicted_count, gold_count = by_type[entity_type]
        scores = _precision_recall_f1(correct_count, predicted_count, gold_count)
        for name, value in zip(("precision", "recall", "f1"), scores):
            result[f"{entity_type}_{name}"] = value
        result[f"{entity_type}_support"] = gold_count
    return result
