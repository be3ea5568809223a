"""Masked-LM / next-sentence training instances, made as google-research/bert's
`create_pretraining_data.py` makes them.

The instance-making functions are pure apart from the random generator passed
in, and call that generator exactly as the original does, call for call, so
`random.Random(seed)` gives the original's instances. The original's calls, in
order:

1. `shuffle(all_documents)`.
2. For each of `dupe_factor` passes, for each document
   (`create_instances_from_document`): `random()`, and `randint(2,
   max_num_tokens)` when it is below `short_seq_prob`; then for each instance:
   `randint(1, len(chunk) - 1)` when the chunk holds two or more segments;
   `random()` unless the chunk holds one segment; for a random next sentence
   `randint(0, len(all_documents) - 1)` (until another document, at most 10
   times) and `randint(0, len(document) - 1)`; `random()` per truncated token;
   for the masks `shuffle(candidates)`, then per masked token `random()`, a
   second `random()` when the first is >= 0.8, and `randint(0, len(vocab) - 1)`
   when that one is >= 0.5.
3. `shuffle(instances)`.

The variants' recipes (docs/VARIANTS.md, "Pretraining recipes") change these
calls only where they change the instances: ALBERT's sentence-order
prediction (`sentence_order_prediction`) draws the same numbers as
google-research/albert's `create_pretraining_data.py` (whose pairs are made
with the same calls as BERT's, the `random()` deciding a swap where BERT's
decides a random next sentence); RoBERTa's full-sentence packing
(`full_sentences`) draws nothing but the masks; unmasked instances for
dynamic masking (`dynamic_masking`) draw no masks.

ALBERT's n-gram masking (`ngram` above 1; `choose_ngrams`) draws the masks as
google-research/albert's `create_masked_lm_predictions` does, with two
differences in the draws: the length of each n-gram, which ALBERT draws from
NumPy's global generator (`np.random.choice`, not seeded by `--random_seed`),
is one `random()` of the same generator at the same point; and ALBERT's second
`shuffle` of the n-grams after masking, which only `--do_permutation` uses, is
not made. So for the masks: `shuffle(candidate words)`, then per n-gram
considered `random()` for its length and, when it is taken, per token BERT's
80/10/10 draws. At `ngram` 1 the masks are BERT's, call for call.

Tokens are handled as vocabulary ids rather than strings (the original converts
them at the end; the mapping is the same).

A variant's tokenizer (`InstanceVocab.from_tokenizer_files`: RoBERTa's
byte-level BPE, ALBERT's SentencePiece) changes no draw, only what the ids
are: its own special tokens and pair layout (RoBERTa `<s> A </s></s> B
</s>`, one token type; ALBERT `[CLS] A [SEP] B [SEP]`), replacements drawn
from its vocabulary less the special tokens, and words that start at a
`Ġ`/`▁` piece or at the first token of a line.
"""

import bisect
import dataclasses
import random
import sys

from keras_bert_impl import filesystem
from keras_bert_impl.errors import InputFileError, VocabError
from keras_bert_impl.tokenization import check_special_tokens

# The tokens the instances are made of; [UNK] because WordPiece emits it.
REQUIRED_TOKENS = ("[UNK]", "[CLS]", "[SEP]", "[MASK]")

_READ_BLOCK_BYTES = 1 << 20


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
    """The original's flags that shape instances (its defaults).

    Attributes:
        max_seq_length: Tokens per instance, [CLS] and both [SEP] included.
        max_predictions_per_seq: Most masked positions per instance.
        masked_lm_prob: Fraction of the tokens to mask.
        short_seq_prob: Probability of aiming at a random shorter length.
        dupe_factor: Passes over the corpus, each with other masks.
        do_whole_word_mask: Mask all pieces of a word together.
        sentence_order_prediction: ALBERT's pair label (A and B swapped).
        full_sentences: RoBERTa's packing, no pairs.
        dynamic_masking: No masks (drawn at training time).
        ngram: ALBERT's n-gram masking: the longest run of consecutive
            candidates (words, with `do_whole_word_mask`) masked together;
            1 is BERT's masking.
        favor_shorter_ngram: With `ngram` above 1, p(n) proportional to 1/n;
            otherwise to 1/(ngram + 1 - n), favouring longer n-grams, as
            google-research/albert (which reverses the 1/n weights).
    """

    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    dupe_factor: int = 10
    do_whole_word_mask: bool = False
    sentence_order_prediction: bool = False
    full_sentences: bool = False
    dynamic_masking: bool = False
    ngram: int = 1
    favor_shorter_ngram: bool = True

    def __post_init__(self):
        # The original needs room for [CLS] a [SEP] b [SEP] and a target of at
        # least 2 (`randint(2, max_seq_length - 3)`).
        if self.max_seq_length < 5:
            raise ValueError(f"max_seq_length must be at least 5, got {self.max_seq_length}")
        if self.max_predictions_per_seq < 1:
            raise ValueError(f"max_predictions_per_seq must be positive, got {self.max_predictions_per_seq}")
        if self.dupe_factor < 1:
            raise ValueError(f"dupe_factor must be positive, got {self.dupe_factor}")
        for name in ("masked_lm_prob", "short_seq_prob"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1], got {getattr(self, name)}")
        if self.sentence_order_prediction and self.full_sentences:
            raise ValueError("sentence_order_prediction makes pairs; full_sentences makes none: choose one")
        if self.ngram < 1:
            raise ValueError(f"ngram must be at least 1, got {self.ngram}")
        if self.ngram > 1 and self.dynamic_masking:
            raise ValueError("ngram masks are drawn into the records; dynamic_masking writes none: choose one")


@dataclasses.dataclass(frozen=True)
class InstanceVocab:
    """What instance making needs from the vocabulary, as ids.

    Attributes:
        cls_id, sep_id, mask_id: Ids of [CLS], [SEP], [MASK] (RoBERTa: <s>,
            </s>, <mask>).
        word_ids: Ids of the original's `vocab_words` (`list(vocab.keys())`),
            the pool a random replacement is drawn from, in that order (a
            variant's: every id but its special tokens').
        is_subword: `is_subword[id]` is true for a piece that continues a
            word: WordPiece's "##" pieces; a variant's pieces without `Ġ`
            (byte-level BPE) or `▁` (SentencePiece) in front.
        separators_between: Separators between the two texts of a pair (1;
            RoBERTa's `</s></s>`: 2).
        segment_ids: Whether the second text gets segment id 1 (False:
            RoBERTa's one token type, every segment id 0).
        line_starts_word: The first token of a line, and of each text of an
            instance, starts a word whatever its piece (the variants': a
            byte-level BPE line starts without `Ġ`, and no word runs across
            a separator). False for WordPiece, whose "##" piece joins the
            word before it even across [SEP], as the original.
        pad_id: What `input_ids` are padded with (`<pad>`; WordPiece's 0).
    """

    cls_id: int
    sep_id: int
    mask_id: int
    word_ids: tuple
    is_subword: bytes
    separators_between: int = 1
    segment_ids: bool = True
    line_starts_word: bool = False
    pad_id: int = 0

    @classmethod
    def from_vocab(cls, vocab, vocab_file="vocab"):
        """Builds it from a token -> id mapping (e.g. `FullTokenizer.vocab`).

        Raises:
            VocabError: `vocab` lacks one of `REQUIRED_TOKENS`, naming `vocab_file`.
        """
        check_special_tokens(vocab, vocab_file, required=REQUIRED_TOKENS)
        is_subword = bytearray(max(vocab.values()) + 1)
        for token, index in vocab.items():
            if token.startswith("##"):
                is_subword[index] = 1
        return cls(
            cls_id=vocab["[CLS]"],
            sep_id=vocab["[SEP]"],
            mask_id=vocab["[MASK]"],
            word_ids=tuple(vocab[token] for token in vocab),
            is_subword=bytes(is_subword),
        )

    @classmethod
    def from_tokenizer_files(cls, files, vocab_file):
        """Builds it for a variant's tokenizer: RoBERTa's byte-level BPE or ALBERT's SentencePiece.

        Args:
            files: `tokenization.from_files.read_vocab_file`'s dict (kind
                `byte_level_bpe` or `sentencepiece`).
            vocab_file: Named in errors.

        Raises:
            VocabError: the vocabulary lacks one of the kind's five special
                tokens (`tokenization.special_tokens`), naming `vocab_file`.
        """
        from keras_bert_impl.tokenization.from_files import BYTE_LEVEL_BPE, SPECIAL_TOKENS, vocabulary

        specials = SPECIAL_TOKENS[files["kind"]]
        tokens = vocabulary(files)  # in id order; "" where byte-level BPE's ids have a gap
        ids = {token: index for index, token in enumerate(tokens) if token}
        missing = [token for token in specials.all_tokens() if token not in ids]
        if missing:
            raise VocabError(f"{vocab_file}: no {', '.join(missing)} in the {files['kind']} vocabulary, which the "
                             "instances' layout and masks need")
        special_ids = {ids[token] for token in specials.all_tokens()}
        word_start = "\u0120" if files["kind"] == BYTE_LEVEL_BPE else "\u2581"  # Ġ (a space byte), ▁
        return cls(
            cls_id=ids[specials.cls],
            sep_id=ids[specials.sep],
            mask_id=ids[specials.mask],
            word_ids=tuple(index for index, token in enumerate(tokens) if token and index not in special_ids),
            is_subword=bytes(not token.startswith(word_start) for token in tokens),
            separators_between=specials.separators_between,
            segment_ids=specials.segment_ids,
            line_starts_word=True,
            pad_id=ids[specials.pad],
        )

    def check_options(self, options):
        """Refuses a `max_seq_length` with no room for a pair's target of 2 tokens in this layout.

        Raises:
            ValueError: naming `max_seq_length` and the least it may be.
        """
        least = 4 + self.separators_between
        if not options.full_sentences and options.max_seq_length < least:
            layout = "<s> A </s></s> B </s>" if self.separators_between > 1 else "[CLS] A [SEP] B [SEP]"
            raise ValueError(f"max_seq_length must be at least {least} for pairs laid out {layout}, "
                             f"got {options.max_seq_length}")


class VariantLineTokenizer:
    """A RoBERTa or ALBERT Python tokenizer as `add_documents` takes one: its
    "tokens" are ids already (`encode`), and a line is text: special tokens
    written in it are not looked for (as the original generator's
    WordPiece, and fairseq's BPE, never do), and one that the tokenizer's
    model emits on its own (a SentencePiece user-defined piece such as
    `[MASK]`) becomes the unknown token, so that no line holds a token of
    the layout or a mask.

    Args:
        tokenizer: `ByteLevelBpeTokenizer` or `SentencePieceTokenizer`
            (`tokenization.from_files.python_tokenizer`); its special tokens
            are no longer found in text once given here.
    """

    class _Ids(dict):
        def __missing__(self, token_id):
            return token_id

    def __init__(self, tokenizer):
        specials = tokenizer.special_tokens
        tokenizer.specials_in_text = []
        vocab = tokenizer.vocab
        self._encode = tokenizer.encode
        self._unk_id = vocab[specials.unk]
        self._special_ids = {vocab[token] for token in (specials.cls, specials.sep, specials.pad, specials.mask)
                             if token in vocab}
        self.vocab = self._Ids()

    def tokenize(self, line):
        """The ids of `line`, special ones as the unknown token's."""
        special_ids, unk_id = self._special_ids, self._unk_id
        return [unk_id if token_id in special_ids else token_id for token_id in self._encode(line)]


@dataclasses.dataclass(frozen=True, slots=True)
class TrainingInstance:
    """One `[CLS] A [SEP] B [SEP]` sequence with its masked-LM targets.

    Attributes:
        input_ids: Token ids after masking, unpadded.
        segment_a_length: How many leading tokens have segment id 0 ([CLS], A, [SEP]).
        masked_lm_positions: Masked positions, ascending.
        masked_lm_ids: The original ids at those positions.
        is_random_next: The pair label (`next_sentence_labels`), 1 when B
            comes from another document; with sentence-order prediction, 1
            when A and B are swapped (or, for a one-segment chunk, as in
            google-research/albert, B comes from another document); always
            False for full sentences.
    """

    input_ids: list
    segment_a_length: int
    masked_lm_positions: list
    masked_lm_ids: list
    is_random_next: bool


# ----------------------------------------------------------------------------
# Reading documents.
# ----------------------------------------------------------------------------


@dataclasses.dataclass
class ReadCounts:
    """What reading skipped: `skipped_lines` not valid UTF-8."""

    skipped_lines: int = 0


def _open_binary(path):
    return filesystem.open_file(path, "rb")


def line_number_at(path, offset, opener=_open_binary):
    """1-based number of the line holding byte `offset` of `path` (for messages)."""
    newlines = 0
    with opener(path) as reader:
        remaining = offset
        while remaining > 0:
            block = reader.read(min(remaining, _READ_BLOCK_BYTES))
            if not block:
                break
            newlines += block.count(b"\n")
            remaining -= len(block)
    return newlines + 1


def _decode(raw, path, offset, skip_invalid_utf8, counts, opener):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        if skip_invalid_utf8:
            counts.skipped_lines += 1
            return None
        line = line_number_at(path, offset, opener)
        raise InputFileError(
            f"{path}:{line}: not valid UTF-8 (byte {error.start} of the line: "
            f"{raw[error.start:error.start + 1]!r}); fix the file or pass --skip_invalid_utf8"
        ) from None


def is_blank_line(raw):
    """True for a line the original takes as a document break (`strip()` leaves nothing)."""
    return not raw.decode("utf-8", "replace").strip()


def _seek_document_boundary(reader, offset):
    """Moves `reader` just past the first blank line among the lines that start
    at or after `offset` (or to the end; to 0 for offset 0). Returns that position.

    The boundary depends only on `offset` and it never decreases as `offset`
    grows, so byte ranges that tile a file, each read from its start's
    boundary to its end's, read every document exactly once.
    """
    if offset == 0:
        reader.seek(0)
        return 0
    reader.seek(offset - 1)
    reader.readline()  # The rest of the line holding byte offset - 1.
    while True:
        raw = reader.readline()
        if not raw or is_blank_line(raw):
            return reader.tell()


def read_lines(path, skip_invalid_utf8=False, counts=None, byte_range=None, opener=_open_binary):
    """Stripped lines of a text file, as the original reads them.

    Lines end at "\\n" only (as TensorFlow's `GFile.readline`); a "\\r" stays
    in the line until `strip()`. Unlike the original, which stops with a
    traceback (or, in tf-models' copy, silently drops the bytes), a line that
    is not UTF-8 is an error naming `path:line`, or is skipped and counted.

    Args:
        path: The text file.
        skip_invalid_utf8: Skip (and count) undecodable lines instead of raising.
        counts: Optional `ReadCounts`, incremented.
        byte_range: Optional `(start, end)`: the lines from the document
            boundary at `start` to the one at `end` (see
            `_seek_document_boundary`), so that ranges that tile a file read
            each document exactly once.
        opener: Callable opening a path for binary reading (e.g. a remote
            filesystem's `open`).

    Yields:
        Each line, `strip()`-ed ("" for a blank line).

    Raises:
        InputFileError: missing file, or invalid UTF-8 when not skipping.
    """
    counts = counts if counts is not None else ReadCounts()
    try:
        reader = opener(path)
    except FileNotFoundError:
        raise InputFileError(f"{path}: input file not found") from None
    except IsADirectoryError:
        raise InputFileError(f"{path}: is a directory, expected a text file") from None
    with reader:
        offset, stop = 0, None
        if byte_range is not None:
            start, end = byte_range
            stop = _seek_document_boundary(reader, end)
            offset = _seek_document_boundary(reader, start)
        while stop is None or offset < stop:
            raw = reader.readline()
            if not raw:
                return
            line_offset = offset
            offset += len(raw)
            text = _decode(raw, path, line_offset, skip_invalid_utf8, counts, opener)
            if text is not None:
                yield text.strip()


def add_documents(documents, lines, tokenizer):
    """The original's document splitter, appending to `documents` in place.

    A blank line starts a new document; any other line is tokenized and, if it
    has tokens, appended as one segment (a list of ids) to the last document.
    Passing the same list for several files continues the last document across
    them, as the original does.

    Args:
        documents: List of documents (each a list of segments), not empty;
            start with `[[]]`.
        lines: Stripped lines (see `read_lines`).
        tokenizer: A `FullTokenizer`.

    Returns:
        `documents`.
    """
    tokenize = tokenizer.tokenize
    vocab = tokenizer.vocab
    for line in lines:
        if not line:
            documents.append([])
            continue
        tokens = tokenize(line)
        if tokens:
            documents[-1].append([vocab[token] for token in tokens])
    return documents


# ----------------------------------------------------------------------------
# Making instances.
# ----------------------------------------------------------------------------


def shuffle(rng, items):
    """`rng.shuffle(items)`, faster for a plain `random.Random`, same result.

    `random.Random.shuffle` draws, for i = n-1 down to 1, j = `_randbelow(i +
    1)`: 32-bit Mersenne Twister words, each cut to i+1's bit length, the ones
    not below i + 1 rejected. Here the words come in blocks from
    `getrandbits(32 * k)` (k words, least significant first); k is never more
    than the swaps still to make, each of which takes at least one word, so no
    word is drawn that `shuffle` would not have drawn.
    """
    n = len(items)
    # Subclasses may redefine the draws; the words below are read little-endian.
    if type(rng) is not random.Random or sys.byteorder != "little" or n < 2:
        rng.shuffle(items)
        return
    getrandbits = rng.getrandbits
    i = n - 1
    # j = word >> shift is accepted when j <= i; shift = 32 - bit_length(i + 1),
    # which changes only when i drops below floor = 2**(bit_length(i + 1) - 1) - 1.
    shift = 32 - n.bit_length()
    floor = (1 << (n.bit_length() - 1)) - 1
    while True:
        count = i  # Swaps left: i, i-1, ..., 1.
        for word in memoryview(getrandbits(32 * count).to_bytes(4 * count, "little")).cast("I"):
            j = word >> shift
            if j <= i:
                items[i], items[j] = items[j], items[i]
                i -= 1
                if i < floor:
                    if not i:
                        return
                    shift += 1
                    floor >>= 1


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """The original's truncation: one token at a time from the longer list, from
    the front or the back by `rng.random() < 0.5`.

    Returns:
        `(a_start, a_end, b_start, b_end)`: the kept slices. (Slices instead of
        `del tokens[0]` keep a megabyte-long segment linear, not quadratic.)
    """
    a_start, a_end, b_start, b_end = 0, len(tokens_a), 0, len(tokens_b)
    excess = a_end + b_end - max_num_tokens
    random_ = rng.random
    while excess > 0:
        if a_end - a_start > b_end - b_start:
            if random_() < 0.5:
                a_start += 1
            else:
                a_end -= 1
        elif random_() < 0.5:
            b_start += 1
        else:
            b_end -= 1
        excess -= 1
    return a_start, a_end, b_start, b_end


def candidate_words(input_ids, segment_a_length, vocab, do_whole_word_mask, separators=(), word_starts=()):
    """The original's masking candidates, as lists of positions ("words").

    All positions but [CLS], the middle and last [SEP] and `separators`, in
    order; with `do_whole_word_mask` a "##" piece (a variant's piece without
    `Ġ`/`▁`) joins the candidate before it, even across the middle [SEP]
    (the original checks only that a candidate exists) but never at one of
    `word_starts`, otherwise each position is a candidate of its own.

    Example:
    >>> vocab = InstanceVocab(cls_id=1, sep_id=2, mask_id=3, word_ids=(), is_subword=bytes([0] * 7 + [1]))
    >>> ids = [1, 5, 6, 7, 2, 7, 5, 2]  # [CLS] a b ##c [SEP] ##c a [SEP]
    >>> candidate_words(ids, 5, vocab, do_whole_word_mask=True)
    [[1], [2, 3, 5], [6]]
    >>> candidate_words(ids, 5, vocab, do_whole_word_mask=False)
    [[1], [2], [3], [5], [6]]
    """
    middle_sep = segment_a_length - 1
    is_subword = vocab.is_subword
    words = []
    for index in range(1, len(input_ids) - 1):
        if index == middle_sep or index in separators:
            continue
        if do_whole_word_mask and words and is_subword[input_ids[index]] and index not in word_starts:
            words[-1].append(index)
        else:
            words.append([index])
    return words


def _ngram_length_cdf(ngram, favor_shorter_ngram):
    """Cumulative p(1), ..., p(ngram): 1/n, or reversed (google-research/albert's
    `pvals[::-1]`), normalised so that the last is exactly 1."""
    weights = [1.0 / n for n in range(1, ngram + 1)]
    if not favor_shorter_ngram:
        weights.reverse()
    cumulative, total = [], 0.0
    for weight in weights:
        total += weight
        cumulative.append(total)
    return tuple(value / total for value in cumulative)


def choose_ngrams(words, num_to_predict, ngram, favor_shorter_ngram, rng):
    """google-research/albert's n-gram choice: yields the masked n-grams in the
    order chosen, each a list of positions.

    Every candidate word starts one n-gram; the starts are shuffled and taken
    in that order until `num_to_predict` positions are chosen. For each start
    a length n in 1..`ngram` is drawn (p(n) as `InstanceOptions.
    favor_shorter_ngram` says) and the n-gram is the n words from the start
    (fewer at the end of the candidates). While it holds more positions than
    are left it is shortened a word at a time; one that still does not fit,
    or that overlaps an n-gram already chosen, is skipped. An n-gram may run
    across the middle [SEP], as ALBERT's candidates do.

    The generator is lazy on purpose: a caller that draws each n-gram's
    replacements before asking for the next one draws in ALBERT's order
    (`create_masked_lm_predictions`).

    Args:
        words: Candidate words (`candidate_words`).
        num_to_predict: Most positions to choose.
        ngram: Longest n-gram, in words; at least 1.
        favor_shorter_ngram: p(n) proportional to 1/n, else to 1/(ngram + 1 - n).
        rng: `random.Random`: `shuffle` once, then one `random()` per start
            considered.

    Yields:
        Lists of positions (ascending), together never more than `num_to_predict`.

    Example:
    >>> words = [[1], [2, 3], [4], [5], [6], [7]]  # "##" pieces at 3
    >>> list(choose_ngrams(words, 4, 3, True, random.Random(2)))
    [[4, 5], [2, 3]]
    >>> list(choose_ngrams(words, 4, 3, True, random.Random(3)))
    [[1, 2, 3], [4]]
    """
    cdf = _ngram_length_cdf(ngram, favor_shorter_ngram)
    starts = list(range(len(words)))
    shuffle(rng, starts)
    covered = set()
    random_ = rng.random
    for start in starts:
        if len(covered) >= num_to_predict:
            return
        # numpy's `choice(p=...)`: the first length whose cumulative p exceeds u.
        n = bisect.bisect_right(cdf, random_()) + 1
        positions = [index for word in words[start:start + n] for index in word]
        while len(covered) + len(positions) > num_to_predict and n > 1:
            n -= 1
            positions = [index for word in words[start:start + n] for index in word]
        if len(covered) + len(positions) > num_to_predict or not covered.isdisjoint(positions):
            continue
        covered.update(positions)
        yield positions


def create_masked_lm_predictions(input_ids, segment_a_length, options, vocab, rng, separators=(), word_starts=()):
    """Chooses and replaces the masked tokens, as the original.

    Candidates are all positions but [CLS] and the two [SEP]s, grouped into
    whole words with `do_whole_word_mask` (`candidate_words`). The shuffled
    candidates are taken in order until `num_to_predict` positions; a whole word
    that would overshoot is skipped. With `options.ngram` above 1, runs of up
    to that many consecutive candidates are masked together, as
    google-research/albert (`choose_ngrams`). Each masked token is
    independently [MASK] (80%), itself (10%) or a random vocabulary word (10%).

    Args:
        input_ids: `[CLS] A [SEP] B [SEP]` ids; masked in place.
        segment_a_length: Index of the middle [SEP] plus one.
        options: `InstanceOptions`.
        vocab: `InstanceVocab`.
        rng: `random.Random`.
        separators: Further positions never masked (the [SEP]s between
            documents of a full-sentence instance, RoBERTa's middle `</s></s>`).
        word_starts: Positions that start a word whatever their piece
            (`InstanceVocab.line_starts_word`).

    Returns:
        `(masked_lm_positions, masked_lm_ids)`, positions ascending.
    """
    length = len(input_ids)
    num_to_predict = min(
        options.max_predictions_per_seq, max(1, int(round(length * options.masked_lm_prob)))
    )
    if options.ngram > 1:
        words = candidate_words(input_ids, segment_a_length, vocab, options.do_whole_word_mask, separators,
                                word_starts)
        ngrams = choose_ngrams(words, num_to_predict, options.ngram, options.favor_shorter_ngram, rng)
        # Lazily: each n-gram's replacements are drawn before the next n-gram's length.
        chosen = (index for positions in ngrams for index in positions)
    elif options.do_whole_word_mask:
        candidates = candidate_words(input_ids, segment_a_length, vocab, True, separators, word_starts)
        shuffle(rng, candidates)
        chosen = []
        for index_set in candidates:
            if len(chosen) >= num_to_predict:
                break
            if len(chosen) + len(index_set) > num_to_predict:
                continue
            chosen += index_set  # Candidate sets never overlap.
    else:
        middle_sep = segment_a_length - 1
        candidates = list(range(1, middle_sep))
        candidates += range(segment_a_length, length - 1)
        if separators:
            candidates = [index for index in candidates if index not in separators]
        shuffle(rng, candidates)
        chosen = candidates[:num_to_predict]

    labels = {}
    random_ = rng.random
    for index in chosen:
        labels[index] = input_ids[index]
        if random_() < 0.8:
            input_ids[index] = vocab.mask_id
        elif random_() < 0.5:
            pass  # Kept as it is.
        else:
            word_ids = vocab.word_ids
            input_ids[index] = word_ids[rng.randint(0, len(word_ids) - 1)]
    positions = sorted(labels)
    return positions, [labels[index] for index in positions]


def create_instances_from_document(all_documents, document_index, options, vocab, rng):
    """The original's instances for one document.

    Segments (lines) are gathered into a chunk until it reaches the target
    length (`max_seq_length - 3`, or with `short_seq_prob` a random shorter
    one); a random number of leading segments become A; B is either the rest
    (is_random_next False) or, half of the time and always for a one-segment
    chunk, text from a random other document, in which case the unused
    segments are put back for the next chunk. With
    `options.sentence_order_prediction` B is always the rest (but for a
    one-segment chunk, as google-research/albert), and half of the time A
    and B are swapped (is_random_next True). The pair is laid out as
    `vocab` says (`pair_input_ids`).

    Args:
        all_documents: List of documents, each a list of segments (id lists).
        document_index: Which document.
        options: `InstanceOptions`.
        vocab: `InstanceVocab`.
        rng: `random.Random`.

    Returns:
        List of `TrainingInstance`.
    """
    document = all_documents[document_index]
    max_num_tokens = options.max_seq_length - 2 - vocab.separators_between  # [CLS], [SEP], [SEP] (RoBERTa: 3 </s>)
    track_lines = vocab.line_starts_word and options.do_whole_word_mask
    target_seq_length = max_num_tokens
    if rng.random() < options.short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)

    instances = []
    current_chunk = []
    current_length = 0
    i = 0
    while i < len(document):
        segment = document[i]
        current_chunk.append(segment)
        current_length += len(segment)
        if i == len(document) - 1 or current_length >= target_seq_length:
            a_end = 1
            if len(current_chunk) >= 2:
                a_end = rng.randint(1, len(current_chunk) - 1)
            segments_a = current_chunk[:a_end]
            tokens_a = []
            for segment in segments_a:
                tokens_a += segment

            tokens_b = []
            sentence_order = options.sentence_order_prediction
            # One draw either way: with sentence order, it decides a swap below.
            if len(current_chunk) == 1 or (not sentence_order and rng.random() < 0.5):
                is_random_next = True
                target_b_length = target_seq_length - len(tokens_a)
                # The original tries 10 times to find another document.
                for _ in range(10):
                    random_document_index = rng.randint(0, len(all_documents) - 1)
                    if random_document_index != document_index:
                        break
                random_document = all_documents[random_document_index]
                random_start = rng.randint(0, len(random_document) - 1)
                random_stop = random_start
                for segment in random_document[random_start:]:
                    tokens_b += segment
                    random_stop += 1
                    if len(tokens_b) >= target_b_length:
                        break
                segments_b = random_document[random_start:random_stop] if track_lines else ()
                # The segments not used for A go back for the next chunk.
                i -= len(current_chunk) - a_end
            else:
                segments_b = current_chunk[a_end:]
                for segment in segments_b:
                    tokens_b += segment
                # Sentence order: the two consecutive texts swapped (label 1).
                is_random_next = sentence_order and rng.random() < 0.5
                if is_random_next:
                    tokens_a, tokens_b = tokens_b, tokens_a
                    segments_a, segments_b = segments_b, segments_a

            a_start, a_stop, b_start, b_stop = truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
            input_ids, segment_a_length, separators = pair_input_ids(
                tokens_a[a_start:a_stop], tokens_b[b_start:b_stop], vocab
            )  # [max_seq_length at most]
            word_starts = ()
            if track_lines:
                b_first = len(input_ids) - 1 - (b_stop - b_start)
                word_starts = (_line_starts(segments_a, a_start, a_stop, 1)
                               | _line_starts(segments_b, b_start, b_stop, b_first))

            positions, labels = _masked_lm_predictions(input_ids, segment_a_length, options, vocab, rng, separators,
                                                       word_starts)
            instances.append(TrainingInstance(input_ids, segment_a_length, positions, labels, is_random_next))
            current_chunk = []
            current_length = 0
        i += 1
    return instances


def pair_input_ids(tokens_a, tokens_b, vocab):
    """A pair laid out as `vocab`'s tokenizer lays it out.

    Args:
        tokens_a, tokens_b: The two texts' ids.
        vocab: `InstanceVocab`.

    Returns:
        `(input_ids, segment_a_length, separators)`: `[CLS] A [SEP] B [SEP]`
        with segment ids 0 up to the middle [SEP] and no further separators;
        RoBERTa's `<s> A </s></s> B </s>` with every segment id 0
        (`segment_a_length` the whole length) and the middle `</s></s>` as
        separators, never masked.

    Example:
    >>> roberta = InstanceVocab(cls_id=0, sep_id=2, mask_id=4, word_ids=(), is_subword=b"",
    ...                         separators_between=2, segment_ids=False)
    >>> pair_input_ids([10, 11], [12], roberta)
    ([0, 10, 11, 2, 2, 12, 2], 7, {3, 4})
    """
    input_ids = [vocab.cls_id]
    input_ids += tokens_a
    input_ids += [vocab.sep_id] * vocab.separators_between
    b_first = len(input_ids)
    input_ids += tokens_b
    input_ids.append(vocab.sep_id)
    if vocab.segment_ids:
        # The last middle separator is `segment_a_length - 1`, never masked anyway.
        separators = set(range(b_first - vocab.separators_between, b_first - 1)) if vocab.separators_between > 1 else ()
        return input_ids, b_first, separators
    return input_ids, len(input_ids), set(range(b_first - vocab.separators_between, b_first))


def _line_starts(segments, start, stop, first_position):
    """Positions of the kept line starts of a text made of `segments` (its
    tokens `[start, stop)` placed from `first_position` on), and of its first
    kept token, whatever it is."""
    positions = {first_position} if stop > start else set()
    offset = 0
    for segment in segments:
        if start <= offset < stop:
            positions.add(first_position + offset - start)
        offset += len(segment)
    return positions


def _masked_lm_predictions(input_ids, segment_a_length, options, vocab, rng, separators=(), word_starts=()):
    """`create_masked_lm_predictions`, or none for dynamic masking."""
    if options.dynamic_masking:
        return [], []
    return create_masked_lm_predictions(input_ids, segment_a_length, options, vocab, rng, separators, word_starts)


def create_full_sentence_instances(all_documents, options, vocab, rng):
    """RoBERTa's FULL-SENTENCES instances: `[CLS] s1 s2 ... [SEP]`, no pairs.

    Whole sentences (segments) are packed in document order until the next
    would pass `max_seq_length - 2` tokens; at the end of a document the
    packing goes on into the next one, with a [SEP] between the two
    documents. A sentence longer than a whole instance is cut into pieces of
    that length (RoBERTa's inputs are at most 512 tokens; nothing is
    dropped). Every token has segment id 0 and the pair label is 0; static
    masks never fall on a separator. With a variant's `vocab` these are its
    own tokens (`<s> s1 s2 </s> s3 </s>`).

    Args:
        all_documents: List of documents, each a list of segments (id lists).
        options: `InstanceOptions`.
        vocab: `InstanceVocab`.
        rng: `random.Random`, for the masks only.

    Returns:
        List of `TrainingInstance`.

    Example:
    >>> vocab = InstanceVocab(cls_id=1, sep_id=2, mask_id=3, word_ids=(), is_subword=b"")
    >>> options = InstanceOptions(max_seq_length=7, full_sentences=True, dynamic_masking=True)
    >>> documents = [[[10, 11], [12, 13]], [[20], [21, 22, 23, 24, 25, 26, 27]]]
    >>> [i.input_ids for i in create_full_sentence_instances(documents, options, vocab, None)]
    [[1, 10, 11, 12, 13, 2], [1, 20, 2], [1, 21, 22, 23, 24, 25, 2], [1, 26, 27, 2]]
    """
    max_num_tokens = options.max_seq_length - 2  # [CLS], [SEP]
    track_lines = vocab.line_starts_word and options.do_whole_word_mask
    instances = []
    packed = []
    line_starts = []  # Where lines (or the instance's first piece) start in `packed`, with `track_lines`.

    def emit():
        input_ids = [vocab.cls_id, *packed, vocab.sep_id]
        separators = {index for index in range(1, len(input_ids) - 1) if input_ids[index] == vocab.sep_id}
        word_starts = {1 + offset for offset in line_starts}
        positions, labels = _masked_lm_predictions(input_ids, len(input_ids), options, vocab, rng, separators,
                                                   word_starts)
        instances.append(TrainingInstance(input_ids, len(input_ids), positions, labels, False))
        packed.clear()
        line_starts.clear()

    for document_index, document in enumerate(all_documents):
        for segment_index, segment in enumerate(document):
            # The separator a new document's first sentence needs after the last one's.
            separator = [vocab.sep_id] if packed and document_index and segment_index == 0 else []
            if packed and len(packed) + len(separator) + len(segment) > max_num_tokens:
                emit()
                separator = []
            packed += separator
            for start in range(0, len(segment), max_num_tokens):
                piece = segment[start:start + max_num_tokens]
                if packed and len(packed) + len(piece) > max_num_tokens:
                    emit()
                if track_lines and (start == 0 or not packed):
                    line_starts.append(len(packed))
                packed += piece
    if packed:
        emit()
    return instances


def create_training_instances(documents, options, vocab, rng):
    """All instances of a corpus in the original's order before its final shuffle.

    Removes empty documents, shuffles the rest with `rng`, then makes
    `dupe_factor` passes over them (with `full_sentences`, each pass packs
    them all in that order). The caller finishes the original's sequence
    with `shuffle(rng, instances)` (or shuffles positions of the same count:
    a shuffle's draws depend only on the length).

    Args:
        documents: List of documents (see `add_documents`); not modified, but
            emptied documents are left out of the list used.
        options: `InstanceOptions`.
        vocab: `InstanceVocab`.
        rng: `random.Random`.

    Yields:
        `TrainingInstance`s, one document's at a time.
    """
    all_documents = [document for document in documents if document]
    shuffle(rng, all_documents)
    for _ in range(options.dupe_factor):
        if options.full_sentences:
            yield from create_full_sentence_instances(all_documents, options, vocab, rng)
            continue
        for document_index in range(len(all_documents)):
            yield from create_instances_from_document(all_documents, document_index, options, vocab, rng)
