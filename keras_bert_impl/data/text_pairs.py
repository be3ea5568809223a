"""Text (pair) examples -> BERT input features, as the original scripts build them.

`extract_features.py` and `run_classifier.py` in google-research/bert share one
layout: `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, segment ids 0 then 1, the
pair truncated one token at a time from the longer side, zero padding.
"""

import dataclasses
import re

from keras_bert_impl.errors import InputFileError
from keras_bert_impl.io import read_utf8_lines

_PAIR_SEPARATOR = re.compile(r"^(.*) \|\|\| (.*)$")


@dataclasses.dataclass(frozen=True)
class TextPairExample:
    """One input line: `unique_id` counts lines from 0, `text_b` may be None."""

    unique_id: int
    text_a: str
    text_b: str | None


@dataclasses.dataclass(frozen=True)
class InputFeatures:
    """Model inputs for one example, padded to `max_seq_length`."""

    unique_id: int
    tokens: list
    input_ids: list
    input_mask: list
    segment_ids: list


def parse_text_pair_line(line):
    """Splits `text_a ||| text_b` (the original's format) into `(a, b or None)`."""
    line = line.strip()
    match = _PAIR_SEPARATOR.match(line)
    if match is None:
        return line, None
    return match.group(1), match.group(2)


def read_text_pair_examples(path):
    """Reads one example per line (`text_a` or `text_a ||| text_b`).

    Unlike the original, which silently drops undecodable bytes, invalid UTF-8
    is an error naming the line, so no input is quietly altered.

    Raises:
        InputFileError: missing file or invalid UTF-8, with `path:line`.
    """
    examples = []
    for _, line in read_utf8_lines(path, kind="input file"):
        text_a, text_b = parse_text_pair_line(line)
        examples.append(TextPairExample(len(examples), text_a, text_b))
    return examples


def truncate_seq_pair(tokens_a, tokens_b, max_length):
    """Truncates in place, always from the currently longer list (the original rule)."""
    while len(tokens_a) + len(tokens_b) > max_length:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        longer.pop()


def convert_example_to_features(example, tokenizer, max_seq_length):
    """Tokenizes, truncates, adds [CLS]/[SEP], and zero-pads one example.

    A variant's tokenizer (`tokenization.from_files`) brings its own
    `special_tokens`: RoBERTa's `<s> a </s></s> b </s>` with segment ids all
    0, padded with `<pad>`; ALBERT's `[CLS] a [SEP] b [SEP]` (padded with
    `<pad>`, id 0), as `TextPreprocessor` packs them in the graph.

    Args:
        example: A `TextPairExample`.
        tokenizer: A `FullTokenizer` (or a variant's Python tokenizer).
        max_seq_length: Padded length (including [CLS]/[SEP]); at least 3 for pairs.

    Returns:
        `InputFeatures`.
    """
    tokens_a = tokenizer.tokenize(example.text_a)
    tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
    if not tokens_b:
        return single_text_features(example.unique_id, tokens_a[: max_seq_length - 2], tokenizer, max_seq_length)
    specials = getattr(tokenizer, "special_tokens", None)
    cls, sep, between = ("[CLS]", "[SEP]", 1) if specials is None else (specials.cls, specials.sep,
                                                                       specials.separators_between)
    truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 2 - between)  # [CLS] a [SEP] b [SEP]
    tokens = [cls] + tokens_a + [sep]
    segment_ids = [0] * len(tokens)
    if tokens_b:  # As the original: none of b left after truncation, no second [SEP].
        tokens += [sep] * (between - 1) + tokens_b + [sep]
        second = 0 if specials is not None and not specials.segment_ids else 1
        segment_ids += [0] * (between - 1) + [second] * (len(tokens_b) + 1)
    return _padded_features(example.unique_id, tokens, segment_ids, tokenizer, max_seq_length)


def single_text_features(unique_id, tokens, tokenizer, max_seq_length):
    """`[CLS] tokens [SEP]`, zero-padded: one text's features from its word pieces, already cut to fit.

    `convert_example_to_features` of a single text, for word pieces chosen
    otherwise than by cutting the end (`tokenization.long_text`: head +
    tail, windows).

    Args:
        unique_id: The example's id.
        tokens: At most `max_seq_length - 2` word pieces.
        tokenizer: A `FullTokenizer` (or a variant's Python tokenizer).
        max_seq_length: Padded length.
    """
    specials = getattr(tokenizer, "special_tokens", None)
    cls, sep = ("[CLS]", "[SEP]") if specials is None else (specials.cls, specials.sep)
    if len(tokens) > max_seq_length - 2:
        raise ValueError(f"{len(tokens)} word pieces do not fit in max_seq_length {max_seq_length} beside [CLS] "
                         "and [SEP]")
    tokens = [cls] + list(tokens) + [sep]
    return _padded_features(unique_id, tokens, [0] * len(tokens), tokenizer, max_seq_length)


def _padded_features(unique_id, tokens, segment_ids, tokenizer, max_seq_length):
    specials = getattr(tokenizer, "special_tokens", None)
    input_ids = tokenizer.convert_tokens_to_ids(tokens)
    input_mask = [1] * len(input_ids)
    pad_id = 0 if specials is None else tokenizer.convert_tokens_to_ids([specials.pad])[0]
    padding = [0] * (max_seq_length - len(input_ids))
    return InputFeatures(
        unique_id,
        tokens,
        input_ids + [pad_id] * len(padding),
        input_mask + padding,
        segment_ids + padding,
    )
