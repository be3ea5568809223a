"""Pretraining TFRecords from text files, in the original's order or sharded
(`tools/create_pretraining_data.py`, console `bert-create-pretraining-data`).

Example:
>>> import os, tempfile
>>> from keras_bert_impl.io import write_text_atomically
>>> work = tempfile.mkdtemp()
>>> write_text_atomically(os.path.join(work, "vocab.txt"), "\\n".join(
...     ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "dog", "ran", "."]) + "\\n")
>>> write_text_atomically(os.path.join(work, "in.txt"), "The cat sat.\\nThe dog ran.\\n\\nThe dog sat.\\nThe cat ran.\\n")
>>> stats = create_pretraining_data(
...     os.path.join(work, "in.txt"), os.path.join(work, "out.tfrecord"), os.path.join(work, "vocab.txt"),
...     max_seq_length=16, max_predictions_per_seq=2, dupe_factor=1, verbose=False)
>>> stats.instances > 0, os.path.exists(os.path.join(work, "out.tfrecord"))
(True, True)
"""

import contextlib
import math
import os
import sys
import time

from keras_bert_impl.cli import FlagError
from keras_bert_impl.errors import VocabError
from keras_bert_impl.io import check_output_dir, exclusive_output, remove_partials


def output_paths(output_file):
    """The files of a comma list `--output_file`, each once.

    Example:
    >>> output_paths("a.tfrecord, b.tfrecord")
    ['a.tfrecord', 'b.tfrecord']
    >>> output_paths("a.tfrecord,./a.tfrecord")
    Traceback (most recent call last):
    ...
    keras_bert_impl.cli.FlagError: --output_file names ./a.tfrecord twice (as a.tfrecord): half the instances would be lost
    """
    from keras_bert_impl import filesystem

    paths = [path.strip() for path in output_file.split(",") if path.strip()]
    if not paths:
        raise FlagError(f"--output_file {output_file!r} names no file")
    seen = {}
    for path in paths:
        key = path if filesystem.is_remote(path) else os.path.abspath(path)
        if key in seen:
            raise FlagError(f"--output_file names {path} twice (as {seen[key]}): half the instances would be lost")
        seen[key] = path
    return paths


def create_pretraining_data(
    input_file,
    output_file,
    vocab_file,
    *,
    do_lower_case=True,
    do_whole_word_mask=False,
    max_seq_length=128,
    max_predictions_per_seq=20,
    random_seed=12345,
    dupe_factor=10,
    masked_lm_prob=0.15,
    short_seq_prob=0.1,
    sentence_order_prediction=False,
    full_sentences=False,
    dynamic_masking=False,
    ngram=1,
    favor_shorter_ngram=True,
    gzip_compress=False,
    use_v2_feature_names=False,
    skip_invalid_utf8=False,
    scalable=False,
    beam=False,
    num_shards=None,
    num_workers=None,
    chunk_mb=None,
    progress=False,
    pipeline_args=(),
    verbose=True,
):
    """Writes masked-LM / next-sentence examples of the text files.

    Args:
        input_file: Comma list of files and globs; one sentence per line, a
            blank line between documents.
        output_file: Comma list of TFRecord files written round-robin, or with
            `scalable`/`beam` the prefix of `num_shards` shards.
        vocab_file: The model's tokenizer file: WordPiece `vocab.txt`
            (BERT, as the original), or a variant release's: RoBERTa's
            `vocab.json` (with `merges.txt` beside it) or ALBERT's
            `spiece.model` (any `*.json`, `*.model`), whose special tokens,
            pair layout, vocabulary and word starts (`Ġ`, `▁`) the
            instances take (`InstanceVocab.from_tokenizer_files`).
        do_lower_case ... short_seq_prob: The original's flags.
        sentence_order_prediction: ALBERT's pair label (`next_sentence_labels`
            1 = A and B swapped) instead of BERT's random next sentence.
        full_sentences: RoBERTa's packing: no pairs, whole sentences packed
            across documents.
        dynamic_masking: Write the records unmasked (no `masked_lm_*`
            features), for `run_pretraining(dynamic_masking=True)`.
        ngram, favor_shorter_ngram: ALBERT's n-gram masking: runs of up to
            `ngram` consecutive candidates (whole words with
            `do_whole_word_mask`) masked together, n drawn with p(n) ∝ 1/n,
            or without `favor_shorter_ngram` ∝ 1/(ngram + 1 - n); 1 is
            BERT's masking.
        gzip_compress, use_v2_feature_names: tf-models' flags.
        skip_invalid_utf8: Count lines that are not UTF-8 instead of stopping.
        scalable: Streaming, sharded, multi-process mode.
        beam: The sharded mode as an Apache Beam pipeline, with `pipeline_args`.
        num_shards, num_workers, chunk_mb: Layout of the sharded modes
            (defaults 16, the CPU count, 2; chunks are made smaller when the
            input would otherwise leave shards without a chunk).
        progress: A progress line on stderr.
        pipeline_args: Beam pipeline options, with `beam`.
        verbose: Print a summary line on stderr.

    A rerun of the sharded mode keeps the shards that its manifest lists with
    their size and SHA-256, and writes again, saying so on stderr, each one
    that is missing or differs. Shards left without instances (fewer
    documents than shards) are warned of on stderr.

    Returns:
        The `PretrainingDataStats` of what was written.

    Raises:
        FlagError: an option out of range (as the original's flags name it).
        VocabError: a tokenizer file that is missing, unreadable, not of the
            kind its name says, or without its special tokens (before any
            output).
    """
    from keras_bert_impl.data.pretraining_instances import InstanceOptions
    from keras_bert_impl.data.pretraining_pipeline import (
        GenerationSettings,
        Progress,
        instance_tokenizer,
        write_original_order,
        write_sharded,
    )
    from keras_bert_impl.data.tfrecord_files import GZIP, resolve_input_files
    from keras_bert_impl.tokenization import load_vocab

    try:
        options = InstanceOptions(
            max_seq_length=max_seq_length,
            max_predictions_per_seq=max_predictions_per_seq,
            masked_lm_prob=masked_lm_prob,
            short_seq_prob=short_seq_prob,
            dupe_factor=dupe_factor,
            do_whole_word_mask=do_whole_word_mask,
            sentence_order_prediction=sentence_order_prediction,
            full_sentences=full_sentences,
            dynamic_masking=dynamic_masking,
            ngram=ngram,
            favor_shorter_ngram=favor_shorter_ngram,
        )
    except ValueError as error:
        raise FlagError(f"--{error}") from None
    tokenizer_files = None
    # As `tokenization.from_files.vocab_file_kind`, without importing TensorFlow for a vocab.txt.
    if os.path.basename(str(vocab_file)).endswith((".json", ".model")):
        from keras_bert_impl.tokenization.from_files import read_vocab_file, vocabulary

        tokenizer_files = read_vocab_file(vocab_file)
        vocab = {token: index for index, token in enumerate(vocabulary(tokenizer_files)) if token}
    else:
        vocab = load_vocab(vocab_file)
    settings = GenerationSettings(
        vocab=vocab,
        vocab_file=vocab_file,
        do_lower_case=do_lower_case,
        options=options,
        random_seed=random_seed,
        compression=GZIP if gzip_compress else None,
        use_v2_feature_names=use_v2_feature_names,
        skip_invalid_utf8=skip_invalid_utf8,
        tokenizer_files=tokenizer_files,
    )
    try:
        instance_tokenizer(settings)  # The tokenizer's special tokens and layout, before any output.
    except VocabError:
        raise
    except ValueError as error:  # No room for the layout's pair in --max_seq_length.
        raise FlagError(f"--{error}") from None
    progress_stream = sys.stderr if progress else None
    log = lambda message: print(f"create_pretraining_data: {message}", file=sys.stderr, flush=True)  # noqa: E731
    num_shards = num_shards or 16
    chunk_mb = 2.0 if chunk_mb is None else chunk_mb
    if not (math.isfinite(chunk_mb) and chunk_mb * (1 << 20) >= 1):
        raise FlagError(f"--chunk_mb must be a finite size of at least one byte, got {chunk_mb}")
    chunk_bytes = int(chunk_mb * (1 << 20))
    outputs = [output_file] if scalable or beam else output_paths(output_file)
    for path in outputs:  # Before any work: a file in the way is named with its flag.
        check_output_dir(os.path.dirname(path) or ".", "--output_file's directory")

    start = time.perf_counter()
    kept = 0
    with contextlib.ExitStack() as locks:
        # One run at a time per output: two would mix their files (and one
        # would delete the other's unfinished ones).
        for path in outputs:
            locks.enter_context(exclusive_output(path))
        if beam:
            from keras_bert_impl.data.beam_pipeline import run_beam_pipeline

            stats, outputs = run_beam_pipeline(
                input_file, output_file, settings, num_shards, chunk_bytes, list(pipeline_args), log=log
            )
        elif scalable:
            stats, outputs, kept = write_sharded(
                resolve_input_files(input_file), output_file, settings, num_shards,
                num_workers=num_workers or os.cpu_count() or 1, chunk_bytes=chunk_bytes,
                progress_stream=progress_stream, log=log,
            )
        else:
            for path in outputs:
                remove_partials(path)  # A killed earlier run's.
            progress_line = Progress(progress_stream)
            stats = write_original_order(resolve_input_files(input_file), outputs, settings, progress_line)
            progress_line.close()
    elapsed = time.perf_counter() - start
    done = f"kept {kept} finished shard(s) from an earlier run" if kept else f"{stats.instances / max(elapsed, 1e-9):,.0f} instances/s"
    if verbose:
        print(
            f"create_pretraining_data: wrote {len(outputs) - kept} file(s) in {elapsed:.1f}s ({done}): {stats.summary()}",
            file=sys.stderr,
        )
    return stats
