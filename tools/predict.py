#!/usr/bin/env python
"""Predictions or embeddings of an export (bert-export) for every text of a corpus.

Reads txt files (one text per line), csv/tsv/jsonl files (named columns) or
TFRecords of tf.Example (a bytes feature per text), local or on any
TensorFlow file system, globs and comma lists; runs the export's raw-text
signature (`serve_text_pair` with --text_b_column) in batches; writes
`{output_prefix}-00000-of-NNNNN.jsonl` (or .tfrecord, .parquet) shards, one row per
text with its key (`file:line`, or --key_column's value), and
`{output_prefix}.manifest.json` last, which marks the result complete.

With --beam the same runs as an Apache Beam pipeline (RunInference with
Beam's TensorFlow model handler; the [beam] extra) and any flag this tool
does not know is a pipeline option: the runner and its settings
(`--runner=DataflowRunner --project=P --region=R --temp_location=gs://B/tmp
--setup_file=./setup.py`; the default is the DirectRunner). A run killed
part way leaves no manifest; the next run removes its files and writes
every row once. A complete result is refused unless --overwrite.

Examples:
    bert-predict --input_file=reviews/*.txt --saved_model_dir=saved_models/sentiment \\
      --output_prefix=out/reviews
    bert-predict --beam --input_file=data/*.jsonl --text_column=review --key_column=id \\
      --saved_model_dir=saved_models/sentiment/1 --output_prefix=out/reviews --num_shards=16 \\
      --runner=DirectRunner --direct_num_workers=2 --direct_running_mode=multi_processing
"""

import sys

from absl import flags

from keras_bert_impl.cli import (
    FlagError,
    flag_values,
    parse_flags_with_pipeline_args,
    quiet_tensorflow,
    require,
    require_positive,
    run_tool,
)

PROG = "predict"


def define_flags(fv):
    define = dict(flag_values=fv)
    flags.DEFINE_string("input_file", None, "Input file, or comma list of files and globs (any TensorFlow file system).", **define)
    flags.DEFINE_string("input_format", None, "txt, csv, tsv, jsonl or tfrecord (default: from each file's name).", **define)
    flags.DEFINE_string("text_column", "text", "csv/tsv/jsonl column, or tf.Example bytes feature, of the text.", **define)
    flags.DEFINE_string("text_b_column", None, "Column of a pair's second text: the export's serve_text_pair runs.", **define)
    flags.DEFINE_string("key_column", None, "Column of each text's key, unique per text (default: file:line, file:record for TFRecords).", **define)
    flags.DEFINE_string("saved_model_dir", None, "An export of bert-export: a version directory, or the model's directory (its highest version).", **define)
    flags.DEFINE_string("output_prefix", None, "Shards are {output_prefix}-00000-of-NNNNN.{format}; the manifest {output_prefix}.manifest.json.", **define)
    flags.DEFINE_enum("output_format", "jsonl", ["jsonl", "tfrecord", "parquet"], "Rows as JSON lines, as tf.Examples (each output flattened into one feature), or as Parquet (pyarrow: the [beam] extra).", **define)
    flags.DEFINE_string("outputs", None, "Comma list of the signature's outputs to write (default: all).", **define)
    flags.DEFINE_integer("num_shards", 4, "Output files.", **define)
    flags.DEFINE_integer("batch_size", 32, "Texts per call of the export (with --beam, Beam's min and max batch size).", **define)
    flags.DEFINE_boolean("overwrite", False, "Write over a complete earlier result (its manifest is removed first).", **define)
    flags.DEFINE_boolean("beam", False, "Run as an Apache Beam pipeline (the [beam] extra); unknown flags are pipeline options.", **define)


def main(argv=None):
    fv, pipeline_args = parse_flags_with_pipeline_args(define_flags, argv, prog=PROG, description=__doc__)
    require(fv, "input_file", "saved_model_dir", "output_prefix")
    require_positive(fv, "num_shards", "batch_size")
    outputs = [name.strip() for name in fv.outputs.split(",") if name.strip()] if fv.outputs else None
    if fv.outputs is not None and not outputs:
        raise FlagError(f"--outputs {fv.outputs!r} names no output")
    quiet_tensorflow()

    from keras_bert_impl.jobs.predict_corpus import predict_corpus

    run = predict_corpus(
        fv.input_file, fv.output_prefix, fv.saved_model_dir, outputs=outputs, pipeline_args=pipeline_args,
        **flag_values(fv, ("input_format", "text_column", "text_b_column", "key_column", "output_format",
                           "num_shards", "batch_size", "overwrite", "beam")),
    )
    print(f"{PROG}: {run.records:,} rows in {len(run.shards)} shard(s) of {fv.output_prefix}; manifest {run.manifest}",
          file=sys.stderr)


def console_main():
    sys.exit(run_tool(main, prog=PROG))


if __name__ == "__main__":
    console_main()
