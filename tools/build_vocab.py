#!/usr/bin/env python
"""Learns a WordPiece vocab.txt from text files, for a BERT pretrained from scratch.

Words are the original BasicTokenizer's (punctuation split off, CJK characters
one a word, lower-cased and accents stripped with --do_lower_case), pieces are
learned bottom-up by merging the most frequent adjacent pair. The file has the
released vocabularies' layout ([PAD], [unused0..98], [UNK], [CLS], [SEP],
[MASK], more [unusedN], every character, the pieces, the ## characters), so
FullTokenizer, the in-graph tokenizer and bert-create-pretraining-data take it
as it is, with the same --do_lower_case.

With --beam the words are counted as an Apache Beam pipeline (the [beam]
extra), and any flag not defined here (--runner=DataflowRunner --project=...)
is a pipeline option; the summed counts come back to this process, which
learns the same pieces and writes the same file as without --beam.

Examples:
    bert-build-vocab --input_file='corpus/*.txt' --output_file=vocab.txt --vocab_size=30522
    bert-build-vocab --input_file=news.txt,books.txt --output_file=cased/vocab.txt --nodo_lower_case \\
      --vocab_size=8000 --min_frequency=5 --num_unused=0
    bert-build-vocab --beam --input_file='gs://B/corpus/*.txt' --output_file=gs://B/vocab/vocab.txt \\
      --runner=DataflowRunner --project=P --region=R --temp_location=gs://B/tmp --setup_file=./setup.py
"""

import sys

from absl import flags

from keras_bert_impl.cli import FlagError, flag_values, parse_flags_with_pipeline_args, require, run_tool
from keras_bert_impl.jobs.build_vocab import build_vocab

PROG = "build_vocab"


def define_flags(fv):
    define = dict(flag_values=fv)
    flags.DEFINE_string("input_file", None, "Input text file, or comma list of files and globs (as bert-create-pretraining-data takes them).", **define)
    flags.DEFINE_string("output_file", None, "The vocab.txt to write (atomically).", **define)
    flags.DEFINE_integer("vocab_size", 30522, "Tokens in the vocabulary (fewer when no pair is left that occurs --min_frequency times); bert_config.json's vocab_size must be at least this.", **define)
    flags.DEFINE_boolean("do_lower_case", True, "Lower-case and strip accents; True for an uncased model (the tokenizer that uses the vocabulary must say the same).", **define)
    flags.DEFINE_integer("min_frequency", 2, "Fewest occurrences in the corpus of a pair of pieces for their merge to become a piece.", **define)
    flags.DEFINE_integer("num_unused", 99, "[unusedN] tokens reserved for later use; the first 99 come before [UNK] [CLS] [SEP] [MASK], so that 99 gives them the released models' ids 100-103 (those have 994).", **define)
    flags.DEFINE_integer("max_input_chars_per_word", 200, "The tokenizer's limit (the original's 200): longer words become [UNK] and are not learned from.", **define)
    flags.DEFINE_boolean("beam", False, "Count the words as an Apache Beam pipeline (the [beam] extra), then learn here from the summed counts; unknown flags are pipeline options. The counts pass through --output_file + '.counts/', which the workers must be able to write.", **define)
    flags.DEFINE_integer("num_workers", None, "With --beam, passed to the runner (Dataflow's workers).", **define)


def main(argv=None):
    fv, pipeline_args = parse_flags_with_pipeline_args(define_flags, argv, prog=PROG, description=__doc__)
    require(fv, "input_file", "output_file")
    if fv.num_workers is not None:
        if not fv.beam:
            raise FlagError("--num_workers needs --beam")
        if fv.num_workers <= 0:
            raise FlagError("--num_workers must be positive")
        pipeline_args.append(f"--num_workers={fv.num_workers}")  # Also a Dataflow option: hand it on.
    build_vocab(
        fv.input_file, fv.output_file, pipeline_args=pipeline_args,
        **flag_values(fv, ("vocab_size", "do_lower_case", "min_frequency", "num_unused", "max_input_chars_per_word",
                           "beam")),
    )


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
