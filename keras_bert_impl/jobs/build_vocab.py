"""A WordPiece `vocab.txt` learned from text files (`tools/build_vocab.py`,
console `bert-build-vocab`).

Example:
>>> import os, tempfile
>>> from keras_bert_impl.io import write_text_atomically
>>> from keras_bert_impl.tokenization import FullTokenizer
>>> work = tempfile.mkdtemp()
>>> write_text_atomically(os.path.join(work, "in.txt"), "The cat sat.\\nThe cats ran.\\n\\nThe cat ran.\\n")
>>> stats = build_vocab(os.path.join(work, "in.txt"), os.path.join(work, "vocab.txt"), vocab_size=150,
...                     num_unused=0, verbose=False)
>>> stats.words, stats.tokens
(12, 28)
>>> FullTokenizer(os.path.join(work, "vocab.txt")).tokenize("The cats sat.")
['the', 'cat', '##s', 's', '##at', '.']
"""

import dataclasses
import os
import sys
import time

from keras_bert_impl import filesystem
from keras_bert_impl.cli import FlagError
from keras_bert_impl.errors import InputFileError
from keras_bert_impl.io import check_output_dir, exclusive_output, read_utf8_blocks, write_text_atomically


# The directory beside `--output_file` that the Beam workers write the word counts to.
COUNTS_SUFFIX = ".counts"


@dataclasses.dataclass(frozen=True)
class VocabStats:
    """What `build_vocab` read and wrote.

    Args:
        files: Input files read.
        words: Words in them (`BasicTokenizer`'s).
        distinct_words: Different words among them.
        tokens: Tokens written (at most the `vocab_size` asked for).
        pieces: Tokens learned by merging (the rest are reserved or single characters).
        count_seconds, learn_seconds: Time spent counting words and learning pieces.
    """

    files: int
    words: int
    distinct_words: int
    tokens: int
    pieces: int
    count_seconds: float
    learn_seconds: float


def build_vocab(
    input_file,
    output_file,
    vocab_size=30522,
    *,
    do_lower_case=True,
    min_frequency=2,
    num_unused=99,
    max_input_chars_per_word=200,
    beam=False,
    pipeline_args=(),
    verbose=True,
):
    """Learns a WordPiece vocabulary from text files and writes it as `vocab.txt`.

    Args:
        input_file: Comma list of files and globs, as `create_pretraining_data`
            takes them (any text: one sentence per line or not).
        output_file: The `vocab.txt` to write (atomically: a killed run leaves
            no file that looks complete).
        vocab_size: Tokens in the vocabulary (fewer when the corpus has no
            pair left that occurs `min_frequency` times).
        do_lower_case: Lower-case and strip accents, as the tokenizer that will
            use the vocabulary (True for an uncased model).
        min_frequency: Fewest occurrences of a pair for it to become a piece.
        num_unused: `[unusedN]` tokens reserved for later use.
        max_input_chars_per_word: The tokenizer's limit: longer words, which it
            makes `[UNK]`, are not learned from.
        beam: Count the words on Apache Beam (the runner `pipeline_args`
            choose), then learn in this process from the summed counts: the
            same file. The counts pass through `{output_file}.counts/`, which
            the workers must be able to write (a gs:// `output_file` on
            Dataflow); it is emptied first and removed at the end.
        pipeline_args: Beam pipeline options, with `beam`.
        verbose: Print what was read and written on stderr.

    Returns:
        The `VocabStats` of the run.

    Raises:
        FlagError: a setting out of range, or `vocab_size` too small for the
            reserved tokens and the corpus's characters (before any output).
        InputFileError: an input pattern matching nothing, a file that is not
            UTF-8 (naming `file:line`), or input without a single word.
    """
    from keras_bert_impl.data.tfrecord_files import resolve_input_files
    from keras_bert_impl.tokenization.wordpiece_learner import count_words, learn_vocab, no_short_words_error

    for name, value, least in (("vocab_size", vocab_size, 1), ("min_frequency", min_frequency, 1),
                               ("num_unused", num_unused, 0), ("max_input_chars_per_word", max_input_chars_per_word, 1)):
        if value < least:
            raise FlagError(f"--{name} must be at least {least}, got {value}")
    check_output_dir(os.path.dirname(output_file) or ".", "--output_file's directory")
    files = resolve_input_files(input_file)

    start = time.perf_counter()
    if beam:
        with exclusive_output(output_file):  # Two runs would share the counts directory.
            counted_words = _count_on_beam(files, output_file, do_lower_case, max_input_chars_per_word, pipeline_args)
        counts, long_words = counted_words.counts, counted_words.long_words
    else:
        counts = None
        for path in files:
            counts = count_words((text for _, text in read_utf8_blocks(path)), do_lower_case, counts)
        long_words = None
    counted = time.perf_counter()
    words = sum(counts.values()) + (long_words.occurrences if long_words else 0)
    if not words:
        raise InputFileError(f"{input_file}: the input files hold no words ({len(files)} file(s) read)")
    try:
        if not counts:  # Only words too long, counted on Beam.
            raise no_short_words_error(max_input_chars_per_word, long_words.shortest)
        learned = learn_vocab(counts, vocab_size, num_unused=num_unused, min_frequency=min_frequency,
                              max_input_chars_per_word=max_input_chars_per_word)
    except ValueError as error:  # Its message starts with the argument's name.
        raise FlagError(f"--{error}") from None
    vocab = learned.tokens
    done = time.perf_counter()
    filesystem.makedirs_for(output_file)
    write_text_atomically(output_file, "".join(token + "\n" for token in vocab))

    stats = VocabStats(
        files=len(files), words=words, distinct_words=len(counts) + (long_words.distinct if long_words else 0),
        tokens=len(vocab),
        pieces=len(learned.pieces), count_seconds=counted - start, learn_seconds=done - counted,
    )
    if verbose:
        short = f" (fewer than --vocab_size {vocab_size}: no pair left that occurs --min_frequency {min_frequency} times)" \
            if len(vocab) < vocab_size else ""
        print(
            f"build_vocab: {stats.words:,} words ({stats.distinct_words:,} distinct) in {stats.files} file(s) counted in "
            f"{stats.count_seconds:.1f}s; {stats.pieces:,} pieces learned in {stats.learn_seconds:.1f}s; "
            f"wrote {stats.tokens:,} tokens to {output_file}{short}",
            file=sys.stderr,
        )
    return stats


def _count_on_beam(files, output_file, do_lower_case, max_input_chars_per_word, pipeline_args):
    """The `BeamWordCounts` of `files`, through `{output_file}.counts/` (removed after, however the run ends)."""
    from keras_bert_impl.data.beam_word_counts import count_words_on_beam

    counts_dir = output_file + COUNTS_SUFFIX
    try:
        return count_words_on_beam(files, counts_dir, do_lower_case, max_input_chars_per_word, pipeline_args)
    finally:
        filesystem.rmtree(counts_dir, missing_ok=True)
