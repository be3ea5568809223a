#!/usr/bin/env python
"""Makes masked-LM / next-sentence pretraining TFRecords from text files.

A drop-in for google-research/bert's `create_pretraining_data.py`: the same
flags and defaults, and (by default) the same examples in the same order. Input:
one sentence per line, a blank line between documents.

With `--scalable`, the input is streamed in chunks by `--num_workers`
processes into `--num_shards` files `{output_file}-00000-of-NNNNN` ..., in
bounded memory; with `--beam`, the same runs as an Apache Beam pipeline, and
any other flag (`--runner=DataflowRunner --project=...`) is a pipeline option.

Examples:
    bert-create-pretraining-data --input_file=corpus/*.txt --output_file=out.tfrecord \\
      --vocab_file=vocab.txt --do_lower_case --max_seq_length=128 \\
      --max_predictions_per_seq=20 --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=5
    bert-create-pretraining-data --scalable --num_workers=8 --num_shards=64 --gzip_compress \\
      --input_file=wiki/*.txt --output_file=data/wiki.tfrecord --vocab_file=vocab.txt
"""

import os
import sys
import time

if __package__ in (None, ""):  # run as `python tools/create_pretraining_data.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from keras_bert_impl.cli import FlagParser, run_tool  # noqa: E402


def build_parser():
    parser = FlagParser(prog="create_pretraining_data", description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--input_file", help="Input text file, or comma list of files and globs.")
    add("--output_file", help="Output TFRecord file, or comma list (written round-robin); with --scalable, the shards' prefix.")
    add("--vocab_file", help="The vocabulary file that the BERT model was trained on.")
    parser.add_bool("do_lower_case", True, "Lower-case the input; True for uncased models")
    parser.add_bool("do_whole_word_mask", False, "Mask whole words rather than single word pieces")
    add("--max_seq_length", type=int, default=128, help="Maximum sequence length (default: %(default)s).")
    add("--max_predictions_per_seq", type=int, default=20, help="Maximum masked-LM predictions per sequence (default: %(default)s).")
    add("--random_seed", type=int, default=12345, help="Random seed (default: %(default)s).")
    add("--dupe_factor", type=int, default=10, help="Passes over the input, each with other masks (default: %(default)s).")
    add("--masked_lm_prob", type=float, default=0.15, help="Masked-LM probability (default: %(default)s).")
    add("--short_seq_prob", type=float, default=0.1, help="Probability of a shorter target length (default: %(default)s).")
    parser.add_bool("gzip_compress", False, "Write gzip-compressed TFRecords (tf-models' flag)")
    parser.add_bool("use_v2_feature_names", False, "Name features input_word_ids / input_type_ids (tf-models' flag)")
    parser.add_bool("skip_invalid_utf8", False, "Skip and count lines that are not UTF-8 instead of stopping")
    parser.add_bool("scalable", False, "Streaming, sharded mode: bounded memory, several processes, --num_shards outputs")
    parser.add_bool("beam", False, "Run the scalable mode as an Apache Beam pipeline (the [beam] extra); unknown flags are pipeline options")
    add("--num_shards", type=int, default=None, help="--scalable/--beam: output files (default: 16).")
    add("--num_workers", type=int, default=None, help="--scalable: worker processes (default: the CPU count); with --beam, passed to the runner.")
    add("--chunk_mb", type=float, default=None, help="--scalable/--beam: input MB per chunk, within which random next sentences, duplicates and shuffling stay (default: 2).")
    parser.add_bool("progress", sys.stderr.isatty(), "Show a progress line on stderr")
    return parser


def main(argv=None):
    parser = build_parser()
    args, pipeline_args = parser.parse_known_args(argv)
    if pipeline_args and not args.beam:
        parser.error(f"unrecognized arguments: {' '.join(pipeline_args)}")
    parser.require(args, "input_file", "output_file", "vocab_file")
    sharded = args.scalable or args.beam
    for flag in ("num_shards", "num_workers", "chunk_mb"):
        value = getattr(args, flag)
        if value is not None and not sharded:
            parser.error(f"--{flag} needs --scalable or --beam")
        if value is not None and value <= 0:
            parser.error(f"--{flag} must be positive")
    if args.num_workers is not None and args.beam:  # Also a Dataflow option: hand it on.
        pipeline_args.append(f"--num_workers={args.num_workers}")
    if sharded and "," in args.output_file:
        parser.error("--scalable/--beam write shards named after one --output_file prefix, not a comma list")

    from keras_bert_impl.data.pretraining_instances import InstanceOptions
    from keras_bert_impl.data.pretraining_pipeline import (
        GenerationSettings,
        Progress,
        write_original_order,
        write_sharded,
    )
    from keras_bert_impl.data.tfrecords import GZIP, resolve_input_files
    from keras_bert_impl.tokenization import load_vocab

    try:
        options = InstanceOptions(
            max_seq_length=args.max_seq_length,
            max_predictions_per_seq=args.max_predictions_per_seq,
            masked_lm_prob=args.masked_lm_prob,
            short_seq_prob=args.short_seq_prob,
            dupe_factor=args.dupe_factor,
            do_whole_word_mask=args.do_whole_word_mask,
        )
    except ValueError as error:
        parser.error(f"--{error}")
    settings = GenerationSettings(
        vocab=load_vocab(args.vocab_file),
        vocab_file=args.vocab_file,
        do_lower_case=args.do_lower_case,
        options=options,
        random_seed=args.random_seed,
        compression=GZIP if args.gzip_compress else None,
        use_v2_feature_names=args.use_v2_feature_names,
        skip_invalid_utf8=args.skip_invalid_utf8,
    )
    progress_stream = sys.stderr if args.progress else None
    num_shards = args.num_shards or 16
    chunk_bytes = int((args.chunk_mb or 2.0) * (1 << 20))

    start = time.perf_counter()
    kept = 0
    if args.beam:
        from keras_bert_impl.data.beam_pipeline import run_beam_pipeline

        stats, outputs = run_beam_pipeline(
            args.input_file, args.output_file, settings, num_shards, chunk_bytes, pipeline_args
        )
    elif args.scalable:
        stats, outputs, kept = write_sharded(
            resolve_input_files(args.input_file), args.output_file, settings, num_shards,
            num_workers=args.num_workers or os.cpu_count() or 1, chunk_bytes=chunk_bytes,
            progress_stream=progress_stream,
        )
    else:
        outputs = [path.strip() for path in args.output_file.split(",") if path.strip()]
        progress = Progress(progress_stream)
        stats = write_original_order(resolve_input_files(args.input_file), outputs, settings, progress)
        progress.close()
    elapsed = time.perf_counter() - start
    done = f"kept {kept} finished shard(s) from an earlier run" if kept else f"{stats.instances / max(elapsed, 1e-9):,.0f} instances/s"
    print(
        f"create_pretraining_data: wrote {len(outputs) - kept} file(s) in {elapsed:.1f}s ({done}): {stats.summary()}",
        file=sys.stderr,
    )


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
