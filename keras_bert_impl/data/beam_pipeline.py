"""The sharded pretraining-data generation as an Apache Beam pipeline.

The same chunks, seeds and shards as `pretraining_pipeline.write_sharded` (both
go through `shard_layout`), so the shards are byte for byte the ones the local
mode writes, and the manifest has the same form (counts, size and SHA-256 per
shard); one Beam element per shard, so up to `num_shards` workers run at once.
Files are read and written through `keras_bert_impl.filesystem`, as by every
other tool (local paths without TensorFlow; gs://, s3://, hdfs:// through
`tf.io.gfile`), shards and the manifest under a temporary name renamed when
complete. `apache_beam` (the `[beam]` extra) is imported only when a pipeline
is built.

The runner and everything about it come from pipeline options alone, e.g.
`--runner=DataflowRunner --project=P --region=R --temp_location=gs://B/tmp
--setup_file=./setup.py` (Dataflow), `--runner=FlinkRunner
--flink_master=host:8081 --environment_type=LOOPBACK`, `--runner=SparkRunner`;
the default is the DirectRunner.
"""

import json
import re

from keras_bert_impl import errors, extras, filesystem
from keras_bert_impl.data.pretraining_pipeline import (
    FinishedShard,
    PretrainingDataStats,
    ShardWriter,
    check_no_other_shards,
    empty_shards_warning,
    read_manifest,
    shard_layout,
    shard_paths,
    sharded_fingerprint,
)
from keras_bert_impl.data.tfrecord_files import MANIFEST_SUFFIX
from keras_bert_impl.errors import InputFileError
from keras_bert_impl.io import write_text_atomically


def match_input_files(patterns):
    """`(path, size)` of the files matched by a comma list of patterns, sorted.

    Raises:
        InputFileError: a pattern matches nothing.
    """
    files = set()
    for pattern in (p.strip() for p in patterns.split(",")):
        if not pattern:
            continue
        matches = [path for path in filesystem.glob(pattern) if not filesystem.isdir(path)]
        if not matches:
            raise InputFileError(f"{pattern}: no such input file")
        files.update((path, filesystem.getsize(path)) for path in matches)
    if not files:
        raise InputFileError(f"no input files in {patterns!r}")
    return sorted(files)


def worker_error(error):
    """Our typed error that a Beam worker raised, as the runner reports it; or None.

    A runner with workers of their own reports it in `error`'s text (the
    worker's traceback); one running in this process re-raises its type with
    the step's name appended, which is dropped.

    Example:
    >>> worker_error(RuntimeError("Traceback ...\\nkeras_bert_impl.errors.InputFileError: a.txt:2: not valid UTF-8 "
    ...                           "[while running 'Read']"))
    InputFileError('a.txt:2: not valid UTF-8')
    >>> worker_error(InputFileError("a.txt:2: not valid UTF-8 [while running 'Words']"))
    InputFileError('a.txt:2: not valid UTF-8')
    >>> worker_error(ValueError("not ours")) is None
    True
    """
    step = r"(?: \[while running '[^']*'\])*"
    if isinstance(error, errors.BertError):
        return type(error)(re.sub(step + "$", "", str(error)))
    match = re.search(r"keras_bert_impl\.errors\.(\w+): ([^\n]*?)" + step + r"(?:\\n|\n|$)", str(error))
    kind = getattr(errors, match.group(1), None) if match else None
    if not (isinstance(kind, type) and issubclass(kind, errors.BertError)):
        return None
    return kind(match.group(2))


def _make_shard_fn(settings):
    """A DoFn writing one shard per element `(path, [(chunk index, Chunk), ...])`."""
    beam = extras.import_extra("apache_beam", "beam", "--beam")
    from apache_beam.metrics import Metrics

    class MakeShard(beam.DoFn):
        def __init__(self, settings):
            self._settings = settings
            self._writer = None
            self._documents = Metrics.counter("pretraining_data", "documents")
            self._instances = Metrics.counter("pretraining_data", "instances")

        def setup(self):
            self._writer = ShardWriter(self._settings)

        def process(self, task):
            path, indexed_chunks = task

            def count(documents, instances):
                self._documents.inc(documents)
                self._instances.inc(instances)

            shard = self._writer.write(path, indexed_chunks, count)
            yield filesystem.basename(path), shard.to_json()

    return MakeShard(settings)


def _write_manifest(shard_entries, path, settings_fingerprint):
    manifest = {"settings": settings_fingerprint, "shards": dict(shard_entries)}
    write_text_atomically(path, json.dumps(manifest, indent=1, sort_keys=True))


def build_pipeline(pipeline, input_files, output_prefix, settings, num_shards, chunk_bytes):
    """Adds the generation to `pipeline` (a `beam.Pipeline`).

    Args:
        pipeline: The pipeline.
        input_files: `(path, size)` pairs (see `match_input_files`).
        output_prefix: Shards are `{output_prefix}-00000-of-NNNNN` ...
        settings: `GenerationSettings`.
        num_shards: Number of output files.
        chunk_bytes: Input bytes per chunk.

    Returns:
        The path of the manifest the pipeline writes last (settings, and
        per-shard counts, size and SHA-256).

    Raises:
        OutputConflictError: the output holds shards of another layout or settings.
    """
    beam = extras.import_extra("apache_beam", "beam", "--beam")

    tasks = shard_layout(input_files, output_prefix, num_shards, chunk_bytes)
    if not any(indexed_chunks for _, indexed_chunks in tasks):
        raise InputFileError(f"{', '.join(path for path, _ in input_files)}: input files are empty")
    manifest_path = output_prefix + MANIFEST_SUFFIX
    fingerprint = sharded_fingerprint(settings, input_files, num_shards, chunk_bytes, tasks)
    check_no_other_shards(output_prefix, [path for path, _ in tasks], read_manifest(manifest_path), fingerprint)
    # Every shard is written again: until the new manifest is written last,
    # none says the output is complete.
    filesystem.remove(manifest_path, missing_ok=True)
    (
        pipeline
        | "Shards" >> beam.Create(tasks)
        | "Spread" >> beam.Reshuffle()
        | "MakeShard" >> beam.ParDo(_make_shard_fn(settings))
        | "Collect" >> beam.combiners.ToList()
        | "Manifest" >> beam.Map(_write_manifest, manifest_path, fingerprint)
    )
    return manifest_path


def run_beam_pipeline(
    input_patterns, output_prefix, settings, num_shards, chunk_bytes=2 << 20, pipeline_args=(), log=print
):
    """Runs the generation on the runner that `pipeline_args` choose, and waits.

    Args:
        input_patterns: Comma list of files or globs (any TensorFlow file system).
        output_prefix: Shards are `{output_prefix}-00000-of-NNNNN` ...
        settings: `GenerationSettings`.
        num_shards: Number of output files.
        chunk_bytes: Input bytes per chunk.
        pipeline_args: Beam pipeline options as command-line strings.
        log: Callable(message), told of shards left without instances.

    Returns:
        `(stats, shard paths)`.
    """
    beam = extras.import_extra("apache_beam", "beam", "--beam")
    from apache_beam.options.pipeline_options import PipelineOptions

    input_files = match_input_files(input_patterns)
    with beam.Pipeline(options=PipelineOptions(list(pipeline_args))) as pipeline:
        manifest_path = build_pipeline(pipeline, input_files, output_prefix, settings, num_shards, chunk_bytes)
    with filesystem.open_file(manifest_path) as f:
        manifest = json.load(f)
    shard_stats = {name: FinishedShard.from_json(entry).stats for name, entry in manifest["shards"].items()}
    stats = PretrainingDataStats()
    for one in shard_stats.values():
        stats += one
    paths = shard_paths(output_prefix, num_shards)
    if not stats.documents:  # As the local mode: no dataset of empty shards.
        for path in paths + [manifest_path]:
            filesystem.remove(path, missing_ok=True)
        raise InputFileError(f"{', '.join(path for path, _ in input_files)}: no text to make instances of (blank lines only)")
    warning = empty_shards_warning(shard_stats)
    if warning:
        log(warning)
    return stats, paths
