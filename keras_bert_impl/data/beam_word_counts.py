"""A corpus's `BasicTokenizer` word counts on Apache Beam, for `bert-build-vocab --beam`.

The counting of `tokenization.wordpiece_learner.count_words` as a pipeline,
for corpora past what one process reads in reasonable time: the files are
read line by line on the workers (`ReadAllFromText`: a file is split into
byte ranges that several workers read), each line's words counted as
`count_words` counts them (no word crosses a line, so any split of the
corpus into lines gives the same counts), the counts summed per word
(`CombinePerKey(sum)`), and written as a few small text shards, `word<TAB>count`
per line. The launching process then reads them back and learns the pieces
(as tensorflow_text's Beam learner: Beam counts, one process learns); what it
holds is the distinct words, not the corpus.

Words longer than `max_input_chars_per_word`, which the learner leaves out
(the tokenizer makes them `[UNK]`), are summed on Beam like the others but
not written: only how many there are (distinct and in all) and the shortest
one's length, for the run's summary and for the error when no word is short
enough. Nothing else is pruned: a word seen fewer than `min_frequency` times
still adds its pairs to those of other words (`ab` once and `abc` once make
the pair `a ##b` twice) and its characters to the alphabet, so dropping it
would change the vocabulary.

A line that is not UTF-8 stops the pipeline with the `InputFileError` of the
one-process reader (`file:line`, the file's first such line: the worker that
meets it reads the file up to there), which the launcher gets back from the
runner's report (`worker_error`).

Example (the DirectRunner, in this process):
>>> import os, tempfile
>>> work = tempfile.mkdtemp()
>>> with open(os.path.join(work, "a.txt"), "w", encoding="utf-8") as f:
...     _ = f.write("The cat sat.\\nThe cats ran, supercalifragilistic!\\n")
>>> counted = count_words_on_beam([os.path.join(work, "a.txt")], os.path.join(work, "counts"),
...                               max_input_chars_per_word=10)
>>> sorted(counted.counts.items())
[('!', 1), (',', 1), ('.', 1), ('cat', 1), ('cats', 1), ('ran', 1), ('sat', 1), ('the', 2)]
>>> counted.long_words
LongWords(distinct=1, occurrences=1, shortest=20)
"""

import dataclasses
import json
import re

from keras_bert_impl import extras, filesystem
from keras_bert_impl.errors import InputFileError
from keras_bert_impl.io import read_utf8_blocks

COUNTS_NAME = "words"  # The shards: {counts_dir}/words-00000-of-NNNNN
LONG_WORDS_NAME = "long_words.json"
SHARD_TEMPLATE = "-SSSSS-of-NNNNN"
# Distinct words a worker sums in memory before handing them on (a bound on its memory, not on the result).
WORDS_HELD = 200_000


@dataclasses.dataclass(frozen=True)
class LongWords:
    """The words over `max_input_chars_per_word`: counted, not learned from.

    Args:
        distinct: Different such words.
        occurrences: Their occurrences in all.
        shortest: The shortest one's length (0 when there is none).
    """

    distinct: int = 0
    occurrences: int = 0
    shortest: int = 0


@dataclasses.dataclass(frozen=True)
class BeamWordCounts:
    """What `count_words_on_beam` counted.

    Args:
        counts: Dict word -> occurrences, words of at most `max_input_chars_per_word` characters.
        long_words: The `LongWords` left out of `counts`.
    """

    counts: dict
    long_words: LongWords


def locate_bad_utf8(path):
    """Raises the one-process reader's `InputFileError` for `path`'s first line that is not UTF-8.

    Raises:
        InputFileError: `path:line: not valid UTF-8 (byte N: ...)`, or a
            message without the line when the whole file reads as UTF-8.
    """
    for _ in read_utf8_blocks(path):
        pass
    raise InputFileError(f"{path}: not valid UTF-8 (a line that a Beam worker read)")


def _count_words_fn(do_lower_case):
    """A DoFn from `(path, line bytes)` to `(word, occurrences)`, summed over up to `WORDS_HELD` words."""
    beam = extras.import_extra("apache_beam", "beam", "--beam")
    from apache_beam.transforms.window import GlobalWindow
    from apache_beam.utils.timestamp import MIN_TIMESTAMP
    from apache_beam.utils.windowed_value import WindowedValue

    from keras_bert_impl.tokenization.full_tokenizer import BasicTokenizer

    class CountWords(beam.DoFn):
        def __init__(self, do_lower_case):
            self._do_lower_case = do_lower_case
            self._tokenizer = None
            self._counts = None

        def setup(self):
            import collections

            self._tokenizer = BasicTokenizer(do_lower_case=self._do_lower_case)
            self._counter = collections.Counter

        def start_bundle(self):
            self._counts = self._counter()

        def process(self, path_and_line):
            path, raw = path_and_line
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            if text is None:
                locate_bad_utf8(path)
            self._counts.update(self._tokenizer.tokenize(text))
            if len(self._counts) >= WORDS_HELD:
                yield from self._counts.items()
                self._counts = self._counter()

        def finish_bundle(self):
            for word_count in self._counts.items():
                yield WindowedValue(word_count, MIN_TIMESTAMP, [GlobalWindow()])
            self._counts = None

    return CountWords(do_lower_case)


def _long_words_fn():
    """A CombineFn from `(word, occurrences)` to `(distinct, occurrences, shortest length)`."""
    beam = extras.import_extra("apache_beam", "beam", "--beam")

    class SumLongWords(beam.CombineFn):
        def create_accumulator(self):
            return 0, 0, 0

        def add_input(self, accumulator, word_count):
            word, count = word_count
            return self.merge_accumulators([accumulator, (1, count, len(word))])

        def merge_accumulators(self, accumulators):
            distinct = occurrences = shortest = 0
            for more, times, length in accumulators:
                distinct, occurrences = distinct + more, occurrences + times
                if length and (not shortest or length < shortest):
                    shortest = length
            return distinct, occurrences, shortest

        def extract_output(self, accumulator):
            return json.dumps(dict(zip(("distinct", "occurrences", "shortest"), accumulator)))

    return SumLongWords()


def _format_count(word_count):
    word, count = word_count
    return f"{word}\t{count}"


def build_pipeline(pipeline, input_files, counts_dir, do_lower_case=True, max_input_chars_per_word=200):
    """Adds the counting to `pipeline` (a `beam.Pipeline`).

    Args:
        pipeline: The pipeline.
        input_files: The text files (local or any file system Beam reads).
        counts_dir: The directory the shards and the long-word summary are written to.
        do_lower_case: As `BasicTokenizer`.
        max_input_chars_per_word: Longer words are only summarized.
    """
    beam = extras.import_extra("apache_beam", "beam", "--beam")
    from apache_beam.coders import BytesCoder
    from apache_beam.io.filesystem import CompressionTypes

    counts = (
        pipeline
        | "Files" >> beam.Create(list(input_files))
        # Raw bytes, as the one-process reader reads them (no decompression by
        # file name; a .gz file is refused there as not UTF-8 too).
        | "Lines" >> beam.io.ReadAllFromText(coder=BytesCoder(), compression_type=CompressionTypes.UNCOMPRESSED,
                                             with_filename=True)
        | "Words" >> beam.ParDo(_count_words_fn(do_lower_case))
        | "Sum" >> beam.CombinePerKey(sum)
    )
    short, long = counts | "ByLength" >> beam.Partition(
        lambda word_count, _: int(len(word_count[0]) > max_input_chars_per_word), 2)
    (
        short
        | "Format" >> beam.Map(_format_count)
        | "WriteCounts" >> beam.io.WriteToText(filesystem.join(counts_dir, COUNTS_NAME),
                                               shard_name_template=SHARD_TEMPLATE)
    )
    (
        long
        | "SumLong" >> beam.CombineGlobally(_long_words_fn())
        | "WriteLong" >> beam.io.WriteToText(filesystem.join(counts_dir, LONG_WORDS_NAME), num_shards=1,
                                             shard_name_template="")
    )


def read_counts(counts_dir):
    """The counts that `build_pipeline` wrote to `counts_dir`, checked complete.

    Returns:
        The `BeamWordCounts`.

    Raises:
        InputFileError: a shard or the summary is missing (a run that did not finish).
    """
    names = filesystem.listdir(counts_dir) if filesystem.isdir(counts_dir) else []
    pattern = re.compile(re.escape(COUNTS_NAME) + r"-(\d{5})-of-(\d{5})$")
    shards = sorted((match.groups(), name) for name in names for match in [pattern.match(name)] if match)
    totals = {total for (_, total), _ in shards}
    if len(totals) != 1 or len(shards) != int(totals.pop()) or LONG_WORDS_NAME not in names:
        raise InputFileError(f"{counts_dir}: the word counts are incomplete ({len(shards)} shard(s)); run again")
    counts = {}
    for _, name in shards:
        for _, text in read_utf8_blocks(filesystem.join(counts_dir, name), kind="word counts shard"):
            for line in text.split("\n"):
                if line:
                    word, _, count = line.rpartition("\t")
                    counts[word] = int(count)
    with filesystem.open_file(filesystem.join(counts_dir, LONG_WORDS_NAME)) as f:
        long_words = LongWords(**json.load(f))
    return BeamWordCounts(counts, long_words)


def count_words_on_beam(input_files, counts_dir, do_lower_case=True, max_input_chars_per_word=200, pipeline_args=()):
    """Counts the words of `input_files` on the runner `pipeline_args` choose, and waits.

    `counts_dir` is emptied first (what a failed run left there is not read)
    and left as the pipeline wrote it; the caller removes it.

    Args:
        input_files: The text files.
        counts_dir: A directory the workers can write and this process read.
        do_lower_case: As `BasicTokenizer`.
        max_input_chars_per_word: Longer words are counted in `long_words` only.
        pipeline_args: Beam pipeline options as command-line strings.

    Returns:
        The `BeamWordCounts`.

    Raises:
        InputFileError: a line that is not UTF-8 (`file:line`), as a worker raised it.
    """
    beam = extras.import_extra("apache_beam", "beam", "--beam")
    from apache_beam.options.pipeline_options import PipelineOptions

    from keras_bert_impl.data.beam_pipeline import worker_error

    filesystem.rmtree(counts_dir, missing_ok=True)
    filesystem.makedirs(counts_dir)
    try:
        with beam.Pipeline(options=PipelineOptions(list(pipeline_args))) as pipeline:
            build_pipeline(pipeline, input_files, counts_dir, do_lower_case, max_input_chars_per_word)
    except Exception as error:  # noqa: BLE001: a runner reports a worker's error as its own type, with the text
        ours = worker_error(error)
        if ours is None:
            raise
        raise ours from None
    return read_counts(counts_dir)


__all__ = ["BeamWordCounts", "LongWords", "build_pipeline", "count_words_on_beam", "locate_bad_utf8", "read_counts"]
