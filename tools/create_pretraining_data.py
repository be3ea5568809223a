#!/usr/bin/env python
"""Makes masked-LM / next-sentence pretraining TFRecords from text files.

A drop-in for google-research/bert's `create_pretraining_data.py`: the same
flags and defaults, and (by default) the same examples in the same order. Input:
one sentence per line, a blank line between documents.

With `--scalable`, the input is streamed in chunks by `--num_workers`
processes into `--num_shards` files `{output_file}-00000-of-NNNNN` ..., in
bounded memory; with `--beam`, the same runs as an Apache Beam pipeline, and
any other flag (`--runner=DataflowRunner --project=...`) is a pipeline option.
A `--scalable` rerun with the same flags keeps the shards whose size and
SHA-256 match `{output_file}.manifest.json` and writes the others again.

Examples:
    bert-create-pretraining-data --input_file=corpus/*.txt --output_file=out.tfrecord \\
      --vocab_file=vocab.txt --do_lower_case --max_seq_length=128 \\
      --max_predictions_per_seq=20 --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=5
    bert-create-pretraining-data --scalable --num_workers=8 --num_shards=64 --gzip_compress \\
      --input_file=wiki/*.txt --output_file=data/wiki.tfrecord --vocab_file=vocab.txt
    # ALBERT's sentence order; RoBERTa's packed, unmasked records (dynamic masking):
    bert-create-pretraining-data --sentence_order_prediction --input_file=... --output_file=... --vocab_file=...
    # ALBERT's whole-word n-gram masks (its defaults: n up to 3, shorter n more likely):
    bert-create-pretraining-data --sentence_order_prediction --do_whole_word_mask --ngram=3 --input_file=... ...
    bert-create-pretraining-data --full_sentences --dynamic_masking --dupe_factor=1 --input_file=... ...
    # ... with the variant's own tokenizer (RoBERTa: <s> A </s></s> B </s>; ALBERT: [CLS] A [SEP] B [SEP]):
    bert-create-pretraining-data --vocab_file=albert-base-v2/spiece.model --sentence_order_prediction \\
      --do_whole_word_mask --ngram=3 --input_file=... --output_file=...
    bert-create-pretraining-data --vocab_file=roberta-base/vocab.json --full_sentences --dynamic_masking ...
"""

import sys

from absl import flags

from keras_bert_impl.cli import FlagError, flag_values, parse_flags_with_pipeline_args, require, run_tool
from keras_bert_impl.jobs.create_pretraining_data import create_pretraining_data

PROG = "create_pretraining_data"
SHARDING_FLAGS = ("num_shards", "num_workers", "chunk_mb")


def define_flags(fv):
    define = dict(flag_values=fv)
    flags.DEFINE_string("input_file", None, "Input text file, or comma list of files and globs.", **define)
    flags.DEFINE_string("output_file", None, "Output TFRecord file, or comma list (written round-robin); with --scalable, the shards' prefix.", **define)
    flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on, or a variant release's tokenizer file: RoBERTa's vocab.json (merges.txt beside it) or ALBERT's spiece.model, whose special tokens and pair layout the records take.", **define)
    flags.DEFINE_boolean("do_lower_case", True, "Lower-case the input; True for uncased models (byte-level BPE never lower-cases).", **define)
    flags.DEFINE_boolean("do_whole_word_mask", False, "Mask whole words rather than single word pieces.", **define)
    flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.", **define)
    flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum masked-LM predictions per sequence.", **define)
    flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.", **define)
    flags.DEFINE_integer("dupe_factor", 10, "Passes over the input, each with other masks.", **define)
    flags.DEFINE_float("masked_lm_prob", 0.15, "Masked-LM probability.", **define)
    flags.DEFINE_float("short_seq_prob", 0.1, "Probability of a target length shorter than the maximum.", **define)
    flags.DEFINE_boolean("sentence_order_prediction", False, "ALBERT's sentence-order prediction: next_sentence_labels is 1 when two consecutive texts of a document are swapped (as google-research/albert), not when B is random.", **define)
    flags.DEFINE_boolean("full_sentences", False, "RoBERTa's FULL-SENTENCES: no pairs; whole sentences packed up to --max_seq_length across documents, a [SEP] between documents.", **define)
    flags.DEFINE_boolean("dynamic_masking", False, "Write unmasked records (no masked_lm_* features) for run_pretraining --dynamic_masking, which draws the masks anew each epoch.", **define)
    flags.DEFINE_integer("ngram", 1, "ALBERT's n-gram masking: mask runs of up to this many consecutive words (word pieces without --do_whole_word_mask) together; 1 is BERT's masking (ALBERT uses 3).", **define)
    flags.DEFINE_boolean("favor_shorter_ngram", True, "With --ngram above 1: draw the run length n with p(n) proportional to 1/n; --nofavor_shorter_ngram reverses those weights, p(n) proportional to 1/(ngram + 1 - n) (longer runs more likely), as google-research/albert's code does.", **define)
    flags.DEFINE_boolean("do_permutation", False, "ALBERT's permuted-token objective: not supported here (only false is accepted).", **define)
    flags.DEFINE_boolean("gzip_compress", False, "Write gzip-compressed TFRecords (tf-models' flag).", **define)
    flags.DEFINE_boolean("use_v2_feature_names", False, "Name features input_word_ids / input_type_ids (tf-models' flag).", **define)
    flags.DEFINE_boolean("skip_invalid_utf8", False, "Skip and count lines that are not UTF-8 instead of stopping.", **define)
    flags.DEFINE_boolean("scalable", False, "Streaming, sharded mode: bounded memory, several processes, --num_shards outputs.", **define)
    flags.DEFINE_boolean("beam", False, "Run the scalable mode as an Apache Beam pipeline (the [beam] extra); unknown flags are pipeline options.", **define)
    flags.DEFINE_integer("num_shards", None, "--scalable/--beam: output files (default: 16).", **define)
    flags.DEFINE_integer("num_workers", None, "--scalable: worker processes (default: the CPU count); with --beam, passed to the runner.", **define)
    flags.DEFINE_float("chunk_mb", None, "--scalable/--beam: input MB per chunk, within which random next sentences, duplicates and shuffling stay (default: 2; smaller when the input has fewer chunks than --num_shards).", **define)
    flags.DEFINE_boolean("progress", sys.stderr.isatty(), "Show a progress line on stderr.", **define)


def main(argv=None):
    fv, pipeline_args = parse_flags_with_pipeline_args(define_flags, argv, prog=PROG, description=__doc__)
    require(fv, "input_file", "output_file", "vocab_file")
    sharded = fv.scalable or fv.beam
    for flag in SHARDING_FLAGS:
        value = fv[flag].value
        if value is not None and not sharded:
            raise FlagError(f"--{flag} needs --scalable or --beam")
        if value is not None and value <= 0:
            raise FlagError(f"--{flag} must be positive")
    if fv.num_workers is not None and fv.beam:  # Also a Dataflow option: hand it on.
        pipeline_args.append(f"--num_workers={fv.num_workers}")
    if fv.do_permutation:
        raise FlagError("--do_permutation (ALBERT's permuted-token objective) is not supported: its records need a second set "
                        "of predictions that no model here trains on; leave it out")
    if sharded and "," in fv.output_file:
        raise FlagError("--scalable/--beam write shards named after one --output_file prefix, not a comma list")
    create_pretraining_data(
        fv.input_file, fv.output_file, fv.vocab_file, pipeline_args=pipeline_args,
        **flag_values(fv, (
            "do_lower_case", "do_whole_word_mask", "max_seq_length", "max_predictions_per_seq", "random_seed",
            "dupe_factor", "masked_lm_prob", "short_seq_prob", "sentence_order_prediction", "full_sentences",
            "dynamic_masking", "ngram", "favor_shorter_ngram", "gzip_compress", "use_v2_feature_names",
            "skip_invalid_utf8", "scalable", "beam", "progress", *SHARDING_FLAGS,
        )),
    )


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
