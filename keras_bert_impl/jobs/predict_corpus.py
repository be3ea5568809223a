"""Predictions (or embeddings) of an export for every text of a corpus
(`tools/predict.py`, console `bert-predict`): in one process, or on Apache
Beam's `RunInference` on any runner.

Inputs: txt/csv/tsv/jsonl/TFRecord files (`data/text_inputs.py`), each text
keyed by `file:line` or a key column. The model: an export of `bert-export`,
run through its raw-text signature (`serving/raw_text_inference.py`), so
that Beam's workers load it with TensorFlow and TF Text alone. Outputs:
`{output_prefix}-00000-of-NNNNN.jsonl` (or `.tfrecord`, `.parquet`) shards, one row per
text, `{"key": ..., <output>: ...}`, and `{output_prefix}.manifest.json`
written last: until the manifest is there, nothing says the output is
complete. Shards are written under temporary names and renamed when complete
(Beam's file sinks: a temporary directory, renamed at the end). A new run
first removes what a killed run left (shards, temporary files, no manifest),
so every key ends up in the output exactly once; an output with a manifest
(a complete result) is refused unless `overwrite`.

With Beam, the files are read and the rows written by this package's code
(workers need it installed: `--setup_file=./setup.py` on Dataflow), the
model run by the handler alone.

Example:
>>> predict_corpus("reviews/*.txt", "out/reviews", "saved_models/sentiment/1")  # doctest: +SKIP
PredictionRun(records=2000, shards=['out/reviews-00000-of-00004.jsonl', ...], manifest='out/reviews.manifest.json')
"""

import dataclasses
import json
import os
import re

from keras_bert_impl import extras, filesystem
from keras_bert_impl.data.beam_pipeline import match_input_files, worker_error
from keras_bert_impl.data.pretraining_pipeline import OutputConflictError
from keras_bert_impl.data.text_inputs import read_keyed_texts
from keras_bert_impl.data.tfrecord_files import MANIFEST_SUFFIX, TFRecordFileWriter
from keras_bert_impl.io import PARTIAL_MARK, exclusive_output, temporary_path, write_text_atomically
from keras_bert_impl.serving.raw_text_inference import (
    PAIR_SIGNATURE,
    TEXT_SIGNATURE,
    RawTextSignatureError,
    beam_model_handler,
    raw_text_functions,
    raw_text_outputs,
    resolve_saved_model_dir,
)

OUTPUT_FORMATS = ("jsonl", "tfrecord", "parquet")
KEY = "key"


@dataclasses.dataclass(frozen=True)
class PredictionRun:
    """What a finished run wrote.

    Attributes:
        records: Rows written (one per text).
        shards: The shard files, in order.
        manifest: The manifest's path (written last).
    """

    records: int
    shards: list
    manifest: str


def shard_paths(output_prefix, num_shards, output_format):
    """`{output_prefix}-00000-of-NNNNN.{format}` ..., the names Beam's file sinks give too.

    Example:
    >>> shard_paths("out/reviews", 2, "jsonl")
    ['out/reviews-00000-of-00002.jsonl', 'out/reviews-00001-of-00002.jsonl']
    """
    return [f"{output_prefix}-{shard:05d}-of-{num_shards:05d}.{output_format}" for shard in range(num_shards)]


def encode_row(row, output_format):
    """One output row as its file line or record: JSON (UTF-8 text), or a serialized `tf.Example`.

    In a tf.Example each output is flattened into one feature (floats,
    int64s or bytes); the key is a bytes feature.

    Example:
    >>> encode_row({"key": "a.txt:1", "probabilities": [0.25, 0.75]}, "jsonl")
    '{"key": "a.txt:1", "probabilities": [0.25, 0.75]}'
    """
    if output_format == "jsonl":
        return json.dumps(row, ensure_ascii=False)
    from tensorflow.core.example import example_pb2

    example = example_pb2.Example()
    for name, value in row.items():
        values = _flatten(value)
        feature = example.features.feature[name]
        if all(isinstance(v, str) for v in values):
            feature.bytes_list.value.extend(v.encode("utf-8") for v in values)
        elif all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            feature.int64_list.value.extend(values)
        else:
            feature.float_list.value.extend(float(v) for v in values)
    return example.SerializeToString()


def _flatten(value):
    if isinstance(value, list):
        return [item for part in value for item in _flatten(part)]
    return [value]


_ARROW_TYPES = {"float32": "float32", "float64": "float64", "int32": "int32", "int64": "int64", "string": "string",
                "bool": "bool_"}


def parquet_schema(output_types):
    """The Arrow schema of the rows: `key` a string, each output its dtype, as lists for each axis past the batch.

    Args:
        output_types: `{output name: (dtype name, rank)}`, as `raw_text_outputs` gives.
    """
    pa = extras.import_extra("pyarrow", "beam", "--output_format=parquet")
    fields = [pa.field(KEY, pa.string())]
    for name, (dtype, rank) in output_types.items():
        arrow_type = getattr(pa, _ARROW_TYPES[dtype])()
        for _ in range(rank - 1):
            arrow_type = pa.list_(arrow_type)
        fields.append(pa.field(name, arrow_type))
    return pa.schema(fields)


def _output_names(saved_model_dir, signature_name, available, outputs):
    if not outputs:
        return list(available)
    unknown = [name for name in outputs if name not in available]
    if unknown:
        raise RawTextSignatureError(
            f"{saved_model_dir}: {signature_name} has no output {', '.join(unknown)} (has {', '.join(available)})"
        )
    return list(outputs)


def _existing_outputs(output_prefix):
    """The shards (of any count and format, finished or under their temporary names) and Beam temporary
    directories of `output_prefix`."""
    directory, name = os.path.split(output_prefix)
    directory = directory or "."
    pattern = re.compile(re.escape(name) + r"-\d{5}-of-\d{5}\.(?:" + "|".join(OUTPUT_FORMATS) + ")(?:" + re.escape(PARTIAL_MARK) + r"[\w-]+)?$")
    beam_temporary = re.compile(f"beam-temp-{re.escape(name)}-[0-9a-f]{{32}}$")  # Beam's file sinks' (uuid1().hex)
    names = filesystem.listdir(directory) if filesystem.isdir(directory) else []
    return [filesystem.join(directory, n) for n in names
            if pattern.match(n) or beam_temporary.match(n)]


def prepare_output(output_prefix, overwrite):
    """Clears `output_prefix` for a new run: what a killed run left is removed;
    a complete result (its manifest) only with `overwrite`, manifest first.

    Raises:
        OutputConflictError: a complete result is there and `overwrite` is False.
    """
    manifest = output_prefix + MANIFEST_SUFFIX
    if filesystem.exists(manifest):
        if not overwrite:
            raise OutputConflictError(
                f"{manifest}: a complete result is there already; give --overwrite to write it again, or another --output_prefix"
            )
        filesystem.remove(manifest)  # first: from here on the output does not look complete
    remove_unfinished(output_prefix)
    directory = os.path.dirname(output_prefix)
    if directory:
        filesystem.makedirs(directory)


def remove_unfinished(output_prefix):
    """Removes the shards, temporary files and Beam temporary directories of `output_prefix` (not its manifest)."""
    for path in _existing_outputs(output_prefix):
        if filesystem.isdir(path):
            filesystem.rmtree(path)
        else:
            filesystem.remove(path, missing_ok=True)


def write_manifest(shards, records, manifest_path, description):
    """Writes the manifest that marks the output complete: its shards and row count."""
    manifest = dict(description, records=records, shards=sorted(filesystem.basename(path) for path in shards))
    write_text_atomically(manifest_path, json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def _batches(input_files, batch_size, read_options):
    batch = []
    for path in input_files:
        for keyed in read_keyed_texts(path, **read_options):
            batch.append(keyed)
            if len(batch) == batch_size:
                yield batch
                batch = []
    if batch:
        yield batch


class _ShardFiles:
    """The shards of one process, each under a temporary name until all are complete."""

    def __init__(self, paths, output_format, schema=None):
        self.paths = paths
        self.output_format = output_format
        if output_format == "tfrecord":
            self._writers = [TFRecordFileWriter(path) for path in paths]
            return
        self._temporary = [temporary_path(path) for path in paths]
        if output_format == "parquet":
            import pyarrow.parquet

            self._files = [filesystem.open_file(path, "wb") for path in self._temporary]
            self._writers = [pyarrow.parquet.ParquetWriter(f, schema) for f in self._files]
        else:
            self._writers = [filesystem.open_file(path, "w", newline="") for path in self._temporary]

    def write(self, rows_by_shard):
        """Writes `{shard: [row, ...]}`."""
        for shard, rows in rows_by_shard.items():
            if self.output_format == "parquet":
                import pyarrow

                self._writers[shard].write_table(pyarrow.Table.from_pylist(rows, schema=self._writers[shard].schema))
            elif self.output_format == "tfrecord":
                for row in rows:
                    self._writers[shard].write(encode_row(row, "tfrecord"))
            else:
                self._writers[shard].write("".join(encode_row(row, "jsonl") + "\n" for row in rows))

    def _close_files(self):
        for writer in self._writers:
            writer.close()
        for f in getattr(self, "_files", ()):
            f.close()

    def publish(self):
        """Closes every shard, then renames each: no shard is final before all are complete."""
        if self.output_format == "tfrecord":
            for writer in self._writers:
                writer.finish()
            for writer in self._writers:
                writer.publish()
            return
        self._close_files()
        for temporary, path in zip(self._temporary, self.paths):
            filesystem.rename(temporary, path)

    def abort(self):
        if self.output_format == "tfrecord":
            for writer in self._writers:
                writer.abort()
            return
        self._close_files()
        for temporary in self._temporary:
            filesystem.remove(temporary, missing_ok=True)


def _predict_in_process(input_files, paths, saved_model_dir, signature_name, output_names, batch_size,
                        read_options, output_format, schema):
    load, predict = raw_text_functions()
    model = load(saved_model_dir)
    shards = _ShardFiles(paths, output_format, schema)
    records = 0
    try:
        for batch in _batches(input_files, batch_size, read_options):
            texts_b = [keyed.text_b for keyed in batch] if signature_name == PAIR_SIGNATURE else None
            rows = predict(model, signature_name, [keyed.text for keyed in batch], texts_b, output_names)
            rows_by_shard = {}
            for keyed, row in zip(batch, rows):
                rows_by_shard.setdefault(records % len(paths), []).append({KEY: keyed.key, **row})
                records += 1
            shards.write(rows_by_shard)
    except BaseException:
        shards.abort()
        raise
    shards.publish()
    return records


def _keyed_examples(path, read_options):
    for keyed in read_keyed_texts(path, **read_options):
        yield keyed.key, (keyed.text, keyed.text_b)


def _output_row(keyed_result):
    key, result = keyed_result
    return {KEY: key, **result.inference}


def _predict_on_beam(input_files, output_prefix, num_shards, saved_model_dir, signature_name, output_names,
                     batch_size, read_options, output_format, schema, manifest_path, description, pipeline_args):
    handler = beam_model_handler(saved_model_dir, signature_name, output_names, batch_size)
    try:
        _run_pipeline(pipeline_args, input_files, output_prefix, num_shards, handler, read_options, output_format,
                      schema, manifest_path, description)
    except Exception as error:  # noqa: BLE001: a runner reports a worker's error as its own type, with the text
        ours = worker_error(error)
        if ours is None:
            raise
        raise ours from None


def _run_pipeline(pipeline_args, input_files, output_prefix, num_shards, handler, read_options, output_format,
                  schema, manifest_path, description):
    beam = extras.import_extra("apache_beam", "beam", "--beam")
    from apache_beam.ml.inference.base import RunInference
    from apache_beam.options.pipeline_options import PipelineOptions

    sink_options = dict(file_name_suffix=f".{output_format}", num_shards=num_shards,
                        shard_name_template="-SSSSS-of-NNNNN")
    with beam.Pipeline(options=PipelineOptions(list(pipeline_args))) as pipeline:
        rows = (
            pipeline
            | "Files" >> beam.Create(input_files)
            | "Spread" >> beam.Reshuffle()
            | "Read" >> beam.FlatMap(_keyed_examples, read_options)
            | "Predict" >> RunInference(handler)
            | "Rows" >> beam.Map(_output_row)
        )
        if output_format == "parquet":
            written = rows | "Write" >> beam.io.WriteToParquet(output_prefix, schema, **sink_options)
        elif output_format == "tfrecord":
            written = rows | "Encode" >> beam.Map(encode_row, output_format) | "Write" >> beam.io.WriteToTFRecord(
                output_prefix, **sink_options)
        else:
            written = rows | "Encode" >> beam.Map(encode_row, output_format) | "Write" >> beam.io.WriteToText(
                output_prefix, **sink_options)
        count = rows | "Count" >> beam.combiners.Count.Globally()
        (
            written
            | "Shards" >> beam.combiners.ToList()
            | "Manifest" >> beam.Map(write_manifest, beam.pvalue.AsSingleton(count), manifest_path, description)
        )


def predict_corpus(
    input_file,
    output_prefix,
    saved_model_dir,
    *,
    input_format=None,
    text_column="text",
    text_b_column=None,
    key_column=None,
    outputs=None,
    output_format="jsonl",
    num_shards=4,
    batch_size=32,
    overwrite=False,
    beam=False,
    pipeline_args=(),
):
    """Writes the export's outputs for every text of `input_file`, keyed.

    Args:
        input_file: Comma list of files and globs (any TensorFlow file system).
        output_prefix: Shards are `{output_prefix}-00000-of-NNNNN.{output_format}`.
        saved_model_dir: An export's version directory, or its model
            directory (the highest version is taken).
        input_format: One of `text_inputs.INPUT_FORMATS`; None: from each file's name.
        text_column, text_b_column, key_column: Columns (JSON keys,
            tf.Example features) of the text, the pair's second text (the
            export's `serve_text_pair` then runs) and the key (default `file:line`).
        outputs: The signature's outputs to write; None: all.
        output_format: `jsonl`, `tfrecord` or `parquet` (pyarrow, which the
            `[beam]` extra installs).
        num_shards: Output files.
        batch_size: Texts per call of the signature (Beam's min and max batch size).
        overwrite: Write over a complete earlier result.
        beam: Run as a Beam pipeline on the runner `pipeline_args` choose.
        pipeline_args: Beam pipeline options as command-line strings.

    Returns:
        `PredictionRun`.

    Raises:
        InputFileError: an input that is missing or bad, naming `file:line`.
        RawTextSignatureError: no export, or one without the raw-text signature.
        OutputConflictError: a complete result at `output_prefix`, without `overwrite`.
    """
    if output_format not in OUTPUT_FORMATS:
        raise ValueError(f"output_format must be one of {OUTPUT_FORMATS}, got {output_format!r}")
    if num_shards < 1 or batch_size < 1:
        raise ValueError("num_shards and batch_size must be positive")
    saved_model_dir = resolve_saved_model_dir(saved_model_dir)
    signature_name = PAIR_SIGNATURE if text_b_column else TEXT_SIGNATURE
    output_types = raw_text_outputs(saved_model_dir, signature_name)
    output_names = _output_names(saved_model_dir, signature_name, output_types, outputs)
    schema = parquet_schema({name: output_types[name] for name in output_names}) if output_format == "parquet" else None
    input_files = [path for path, _ in match_input_files(input_file)]
    read_options = dict(input_format=input_format, text_column=text_column, text_b_column=text_b_column,
                        key_column=key_column)
    manifest_path = output_prefix + MANIFEST_SUFFIX
    paths = shard_paths(output_prefix, num_shards, output_format)
    description = {"saved_model": saved_model_dir, "signature": signature_name, "outputs": output_names,
                   "format": output_format}
    with exclusive_output(output_prefix):
        prepare_output(output_prefix, overwrite)
        try:
            if beam:
                _predict_on_beam(input_files, output_prefix, num_shards, saved_model_dir, signature_name, output_names,
                                 batch_size, read_options, output_format, schema, manifest_path, description,
                                 pipeline_args)
                with filesystem.open_file(manifest_path) as f:
                    records = json.load(f)["records"]
            else:
                records = _predict_in_process(input_files, paths, saved_model_dir, signature_name, output_names,
                                              batch_size, read_options, output_format, schema)
                write_manifest(paths, records, manifest_path, description)
        except BaseException:
            remove_unfinished(output_prefix)  # a failed run leaves nothing (what a killed one leaves, the next run removes)
            raise
    return PredictionRun(records, paths, manifest_path)
