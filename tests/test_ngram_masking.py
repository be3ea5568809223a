"""ALBERT's n-gram masking (`--ngram`, `--favor_shorter_ngram`; docs/VARIANTS.md).

The reference is google-research/albert's `create_masked_lm_predictions`,
transcribed below on token strings (`albert_masked_lm_predictions`), sharing
no code with ours. ALBERT draws each n-gram's length with NumPy's global
`np.random.choice`; the transcription keeps that call, on a `RandomState`
whose uniform numbers come from the Python generator, which is where our
generator draws the length (NumPy's own `choice` then turns the number into
n). ALBERT's second shuffle of the n-grams (for `--do_permutation`) comes
after all the masks, so one call's masks are the same with or without it.
"""

import collections
import dataclasses
import hashlib
import random
from fractions import Fraction

import numpy as np
import pytest

from keras_bert_impl.cli import run_tool
from keras_bert_impl.data.pretraining_instances import (
    InstanceOptions,
    InstanceVocab,
    candidate_words,
    choose_ngrams,
    create_masked_lm_predictions,
    create_training_instances,
)
from keras_bert_impl.data.pretraining_pipeline import _options_fingerprint
from tools import create_pretraining_data

TOKENS = "[PAD] [UNK] [CLS] [SEP] [MASK] the dog ##house ##s big cat ##ing play run ##ning".split()
TOY_VOCAB = InstanceVocab.from_vocab(collections.OrderedDict((token, index) for index, token in enumerate(TOKENS)))
CLS, SEP, MASK = 2, 3, 4
WORDS = [index for index, token in enumerate(TOKENS) if index > MASK and not token.startswith("##")]
PIECES = [index for index, token in enumerate(TOKENS) if token.startswith("##")]


class ScriptedRng:
    """Plays back given draws and logs the calls; `shuffle` puts the items in `order`."""

    def __init__(self, order, randoms=(), randints=()):
        self.order, self.randoms, self.randints, self.calls = order, list(randoms), list(randints), []

    def shuffle(self, items):
        self.calls.append(("shuffle", len(items)))
        items[:] = [items[index] for index in self.order]

    def random(self):
        value = self.randoms.pop(0)
        self.calls.append(("random", value))
        return value

    def randint(self, low, high):
        value = self.randints.pop(0)
        self.calls.append(("randint", low, high))
        return value


# ----------------------------------------------------------------------------
# Hand-worked cases. Favouring shorter n-grams with ngram 3, p = 6/11, 3/11,
# 2/11: a uniform draw u gives n = 1 below 6/11 = 0.545, 2 below 9/11 = 0.818,
# else 3.
# ----------------------------------------------------------------------------

# [CLS] the big dog ##house [SEP] the cat [SEP]: whole words
# W0 = [1], W1 = [2], W2 = [3, 4], W3 = [6], W4 = [7].
PAIR = [CLS, 5, 9, 6, 7, SEP, 5, 10, SEP]


def test_whole_word_ngrams_by_hand():
    # 9 tokens * 0.5 -> 4 predictions. Starts in the order W4 W3 W2 W1 W0:
    # W4: u 0.9 -> n 3, only W4 is left: [7], taken, 0.1 [MASK].
    # W3: u 0.6 -> n 2: W3 W4 = [6, 7] fits (3 <= 4) but 7 is taken: skipped.
    # W2: u 0.7 -> n 2: W2 W3 = [3, 4, 6] (4 <= 4), taken: 3 -> 0.95, 0.3 kept;
    #     4 -> 0.2 [MASK]; 6 -> 0.85, 0.6 random (randint -> 10 "cat").
    # Four chosen: no more draws.
    ids = list(PAIR)
    rng = ScriptedRng([4, 3, 2, 1, 0], randoms=[0.9, 0.1, 0.6, 0.7, 0.95, 0.3, 0.2, 0.85, 0.6], randints=[10])
    options = InstanceOptions(masked_lm_prob=0.5, do_whole_word_mask=True, ngram=3)
    positions, labels = create_masked_lm_predictions(ids, 6, options, TOY_VOCAB, rng)
    assert positions == [3, 4, 6, 7]
    assert labels == [6, 7, 5, 10]
    assert ids == [CLS, 5, 9, 6, MASK, SEP, 10, MASK, SEP]
    # Each n-gram's length is drawn just before its replacements, as ALBERT draws them.
    assert rng.calls == [("shuffle", 5), ("random", 0.9), ("random", 0.1), ("random", 0.6), ("random", 0.7),
                         ("random", 0.95), ("random", 0.3), ("random", 0.2), ("random", 0.85), ("random", 0.6),
                         ("randint", 0, len(TOKENS) - 1)]


def test_ngrams_shorten_or_skip_at_the_budget_by_hand():
    # 2 predictions. Starts W4 W2 W0:
    # W4: u 0.0 -> n 1: [7], taken, 0.1 [MASK].
    # W2: u 0.0 -> n 1: [3, 4] needs 2 of the 1 left and cannot shorten: skipped.
    # W0: u 0.9 -> n 3: [1, 2, 3, 4] too many, n 2: [1, 2] too many, n 1: [1], taken, 0.3 [MASK].
    ids = list(PAIR)
    rng = ScriptedRng([4, 2, 0, 1, 3], randoms=[0.0, 0.1, 0.0, 0.9, 0.3])
    options = InstanceOptions(masked_lm_prob=0.5, max_predictions_per_seq=2, do_whole_word_mask=True, ngram=3)
    positions, labels = create_masked_lm_predictions(ids, 6, options, TOY_VOCAB, rng)
    assert (positions, labels) == ([1, 7], [5, 10])
    assert ids == [CLS, MASK, 9, 6, 7, SEP, 5, MASK, SEP]
    assert [call[0] for call in rng.calls] == ["shuffle"] + ["random"] * 5


def test_ngrams_run_across_the_middle_sep_as_albert_does():
    # Start W1, u 0.9 -> n 3: W1 W2 W3 = [2, 3, 4, 6], over the [SEP] at 5.
    words = candidate_words(PAIR, 6, TOY_VOCAB, do_whole_word_mask=True)
    assert words == [[1], [2], [3, 4], [6], [7]]
    rng = ScriptedRng([1, 0, 2, 3, 4], randoms=[0.9])
    assert next(choose_ngrams(words, 4, 3, True, rng)) == [2, 3, 4, 6]


def test_without_whole_words_ngrams_are_of_pieces():
    words = candidate_words(PAIR, 6, TOY_VOCAB, do_whole_word_mask=False)
    assert words == [[1], [2], [3], [4], [6], [7]]
    rng = ScriptedRng([3, 0, 1, 2, 4, 5], randoms=[0.7])
    assert next(choose_ngrams(words, 4, 3, True, rng)) == [4, 6]  # "##house" and "the": pieces, not words.


# ----------------------------------------------------------------------------
# Against google-research/albert's selection.
# ----------------------------------------------------------------------------


class PythonUniformRandomState(np.random.RandomState):
    """NumPy's legacy generator whose uniform draws (those `choice` makes) come
    from a Python `random.Random`."""

    def __init__(self, rng):
        super().__init__(0)
        self.rng = rng

    def random_sample(self, size=None):
        assert size in (None, ()), size  # `choice(p=...)` asks for one number.
        return np.array(self.rng.random())


def albert_masked_lm_predictions(tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng,
                                 ngram, favor_shorter_ngram, do_whole_word_mask, np_random):
    """google-research/albert's `create_masked_lm_predictions` (WordPiece
    pieces, no permutation), its flags as arguments and `np.random` as `np_random`.

    Returns:
        `(output_tokens, masked_lm_positions, masked_lm_labels)`.
    """
    cand_indexes = []
    for i, token in enumerate(tokens):
        if token in ("[CLS]", "[SEP]"):
            continue
        if do_whole_word_mask and cand_indexes and token.startswith("##"):
            cand_indexes[-1].append(i)
        else:
            cand_indexes.append([i])
    output_tokens = list(tokens)
    num_to_predict = min(max_predictions_per_seq, max(1, int(round(len(tokens) * masked_lm_prob))))
    ngrams = np.arange(1, ngram + 1, dtype=np.int64)
    pvals = 1.0 / np.arange(1, ngram + 1)
    pvals /= pvals.sum(keepdims=True)
    if not favor_shorter_ngram:
        pvals = pvals[::-1]
    ngram_indexes = [[cand_indexes[idx:idx + n] for n in ngrams] for idx in range(len(cand_indexes))]
    rng.shuffle(ngram_indexes)
    masked_lms, covered = [], set()
    for cand_index_set in ngram_indexes:
        if len(masked_lms) >= num_to_predict:
            break
        if not cand_index_set:
            continue
        p = pvals[:len(cand_index_set)]
        n = np_random.choice(ngrams[:len(cand_index_set)], p=p / p.sum(keepdims=True))
        index_set = sum(cand_index_set[n - 1], [])
        n -= 1
        while len(masked_lms) + len(index_set) > num_to_predict:
            if n == 0:
                break
            index_set = sum(cand_index_set[n - 1], [])
            n -= 1
        if len(masked_lms) + len(index_set) > num_to_predict:
            continue
        if any(index in covered for index in index_set):
            continue
        for index in index_set:
            covered.add(index)
            if rng.random() < 0.8:
                masked_token = "[MASK]"
            elif rng.random() < 0.5:
                masked_token = tokens[index]
            else:
                masked_token = vocab_words[rng.randint(0, len(vocab_words) - 1)]
            output_tokens[index] = masked_token
            masked_lms.append((index, tokens[index]))
    rng.shuffle(ngram_indexes)  # For --do_permutation only; after every mask.
    masked_lms.sort()
    return output_tokens, [index for index, _ in masked_lms], [label for _, label in masked_lms]


def random_segment(rng, length):
    """Word and "##" piece ids; about a third are pieces, a few of them first in the segment."""
    ids = []
    for _ in range(length):
        ids.append(rng.choice(PIECES) if (ids or rng.random() < 0.2) and rng.random() < 0.35 else rng.choice(WORDS))
    return ids


def random_pair(rng, length_a, length_b):
    """`[CLS] A [SEP] B [SEP]` ids and the segment A length ([CLS], A, [SEP])."""
    a = random_segment(rng, length_a)
    return [CLS, *a, SEP, *random_segment(rng, length_b), SEP], len(a) + 2


@pytest.mark.parametrize("ngram", [2, 3, 5])
@pytest.mark.parametrize("favor_shorter_ngram", [True, False], ids=["shorter", "reversed"])
@pytest.mark.parametrize("do_whole_word_mask", [True, False], ids=["words", "pieces"])
def test_same_masks_as_albert(ngram, favor_shorter_ngram, do_whole_word_mask):
    cases = random.Random(ngram * 10 + favor_shorter_ngram * 2 + do_whole_word_mask)
    differing_from_bert = 0
    for seed in range(150):
        ids, segment_a_length = random_pair(cases, cases.randint(1, 20), cases.randint(1, 20))
        options = InstanceOptions(
            masked_lm_prob=cases.choice([0.15, 0.3, 0.6]), max_predictions_per_seq=cases.randint(1, 12),
            do_whole_word_mask=do_whole_word_mask, ngram=ngram, favor_shorter_ngram=favor_shorter_ngram,
        )
        ours = list(ids)
        positions, labels = create_masked_lm_predictions(
            ours, segment_a_length, options, TOY_VOCAB, random.Random(seed)
        )

        rng = random.Random(seed)
        output, albert_positions, albert_labels = albert_masked_lm_predictions(
            [TOKENS[i] for i in ids], options.masked_lm_prob, options.max_predictions_per_seq, TOKENS, rng,
            ngram, favor_shorter_ngram, do_whole_word_mask, PythonUniformRandomState(rng),
        )
        assert [TOKENS[i] for i in ours] == output, seed
        assert positions == albert_positions and [TOKENS[i] for i in labels] == albert_labels, seed

        bert_options = dataclasses.replace(options, ngram=1)
        bert_positions, _ = create_masked_lm_predictions(
            list(ids), segment_a_length, bert_options, TOY_VOCAB, random.Random(seed)
        )
        differing_from_bert += bert_positions != positions
    assert differing_from_bert > 30, differing_from_bert  # The n-grams are not BERT's masks.


# ----------------------------------------------------------------------------
# Properties over many draws.
# ----------------------------------------------------------------------------


def expected_length_probabilities(ngram, favor_shorter_ngram):
    """The ALBERT paper's (Lan et al. 2020, experimental setup) p(n) = (1/n) / sum_k 1/k; google-research/albert's
    code reverses the weights when not favouring shorter n-grams."""
    weights = [Fraction(1, n) for n in range(1, ngram + 1)]
    if not favor_shorter_ngram:
        weights.reverse()
    return [float(weight / sum(weights)) for weight in weights]


@pytest.mark.parametrize("ngram,favor_shorter_ngram", [(3, True), (3, False), (4, True)])
def test_ngram_lengths_follow_p_of_n(ngram, favor_shorter_ngram):
    # The first n-gram of each call, from 12 one-piece words with room for 100
    # predictions: nothing shortens it unless it starts within ngram - 1 words
    # of the end, and where it starts (the shuffle) is independent of n (the
    # draw after it), so among the other starts its length is n.
    words = [[position] for position in range(1, 13)]
    rng = random.Random(2024)
    counts = collections.Counter()
    for _ in range(30_000):
        first = next(choose_ngrams(words, 100, ngram, favor_shorter_ngram, rng))
        if first[0] <= len(words) - (ngram - 1):
            counts[len(first)] += 1
    total = sum(counts.values())
    assert set(counts) <= set(range(1, ngram + 1))
    # Each count is Binomial(total, p(n)), total about 25,000, total * p(n) at
    # least 3,800: normal to good accuracy. Within 5 standard deviations
    # (about 1.2 % of total) a correct sampler fails with probability < 1e-6
    # per length; uniform lengths, or the other weighting, are 10+ % away.
    probabilities = expected_length_probabilities(ngram, favor_shorter_ngram)
    for n, p in enumerate(probabilities, start=1):
        bound = 5 * (total * p * (1 - p)) ** 0.5
        assert abs(counts[n] - total * p) < bound, (n, counts, probabilities)
    uniform_miss = max(abs(counts[n] - total / ngram) for n in range(1, ngram + 1))
    assert uniform_miss > 10 * (total * (1 / ngram) * (1 - 1 / ngram)) ** 0.5


def test_masks_are_whole_contiguous_ngrams_within_the_budget():
    cases = random.Random(5)
    for seed in range(400):
        ngram = cases.randint(2, 5)
        ids, segment_a_length = random_pair(cases, cases.randint(1, 30), cases.randint(1, 30))
        words = candidate_words(ids, segment_a_length, TOY_VOCAB, do_whole_word_mask=True)
        start_of = {word[0]: k for k, word in enumerate(words)}
        budget = cases.randint(1, 15)
        chosen = list(choose_ngrams(words, budget, ngram, cases.random() < 0.5, random.Random(seed)))
        assert sum(map(len, chosen)) <= budget
        flat = [index for ngram_positions in chosen for index in ngram_positions]
        assert len(flat) == len(set(flat))
        for positions in chosen:
            first = start_of[positions[0]]  # Starts at a word ...
            # ... and runs on over whole words, at most ngram of them (next() fails otherwise).
            next(n for n in range(1, ngram + 1) if sum(words[first:first + n], []) == positions)

        options = InstanceOptions(
            masked_lm_prob=0.5, max_predictions_per_seq=budget, do_whole_word_mask=True, ngram=ngram
        )
        masked = list(ids)
        positions, labels = create_masked_lm_predictions(
            masked, segment_a_length, options, TOY_VOCAB, random.Random(seed)
        )
        assert len(positions) <= budget and positions == sorted(set(positions))
        assert labels == [ids[p] for p in positions]
        assert all(set(word) <= set(positions) or not set(word) & set(positions) for word in words)
        assert all(masked[i] == ids[i] for i in range(len(ids)) if i not in positions)
        assert ids[0] == masked[0] == CLS and masked[segment_a_length - 1] == masked[-1] == SEP


def test_instances_keep_the_budget_and_whole_words():
    corpus = random.Random(9)
    documents = [
        [random_segment(corpus, corpus.randint(2, 12)) for _ in range(corpus.randint(1, 5))] for _ in range(30)
    ]
    for full_sentences in (False, True):
        options = InstanceOptions(max_seq_length=24, max_predictions_per_seq=4, masked_lm_prob=0.3, dupe_factor=2,
                                  do_whole_word_mask=True, ngram=3, full_sentences=full_sentences)
        instances = list(create_training_instances(documents, options, TOY_VOCAB, random.Random(3)))
        assert len(instances) > 40
        for instance in instances:
            assert 1 <= len(instance.masked_lm_positions) <= 4
            masked = set(instance.masked_lm_positions)
            original = list(instance.input_ids)
            for position, label in zip(instance.masked_lm_positions, instance.masked_lm_ids):
                original[position] = label
            separators = {i for i in range(1, len(original) - 1) if original[i] == SEP}
            words = candidate_words(original, instance.segment_a_length, TOY_VOCAB, True, separators)
            assert all(set(word) <= masked or not set(word) & masked for word in words)
            assert masked <= {i for word in words for i in word}  # Never [CLS] or a [SEP].


# ----------------------------------------------------------------------------
# The default, and the tool's flags.
# ----------------------------------------------------------------------------


def test_ngram_1_is_berts_masking_call_for_call():
    for do_whole_word_mask in (False, True):
        for seed in range(60):
            ids, segment_a_length = random_pair(random.Random(seed), 10, 12)
            bert = InstanceOptions(masked_lm_prob=0.3, do_whole_word_mask=do_whole_word_mask)
            ngram_1 = dataclasses.replace(bert, ngram=1, favor_shorter_ngram=False)
            a, b = list(ids), list(ids)
            rng_a, rng_b = random.Random(seed), random.Random(seed)
            assert create_masked_lm_predictions(a, segment_a_length, bert, TOY_VOCAB, rng_a) == \
                create_masked_lm_predictions(b, segment_a_length, ngram_1, TOY_VOCAB, rng_b)
            assert a == b and rng_a.random() == rng_b.random()
    # A manifest of shards written before these options existed still matches.
    assert "ngram" not in _options_fingerprint(InstanceOptions())
    assert _options_fingerprint(InstanceOptions(ngram=3))["ngram"] == 3


@pytest.fixture()
def tool_files(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(TOKENS) + "\n", encoding="utf-8")
    text = ["the big dog playing", "the cat running", "", "big cats play the run", "the dog sat", "doghouses"]
    (tmp_path / "in.txt").write_text("\n".join(text) + "\n", encoding="utf-8")
    return tmp_path


def run(tmp_path, capsys, *flags, output="out.tfrecord"):
    argv = [f"--input_file={tmp_path / 'in.txt'}", f"--output_file={tmp_path / output}",
            f"--vocab_file={tmp_path / 'vocab.txt'}", "--dupe_factor=3", "--max_seq_length=16", *flags]
    code = run_tool(create_pretraining_data.main, argv)
    return code, capsys.readouterr().err


# SHA-256 of what the tool wrote for `tool_files` (3 passes, 16 tokens) at
# commit f301109, before --ngram existed: token masks, whole-word masks.
BYTES_BEFORE_NGRAM = {
    (): "b80d62f9be3689b925d56c43175e743e2466c58074ccf179724152c228b66998",
    ("--do_whole_word_mask",): "92f8682c237a1217e9aa33706360d25120a495fc85425d638724353add331f56",
}


@pytest.mark.parametrize("masking", list(BYTES_BEFORE_NGRAM), ids=["tokens", "whole-words"])
def test_tool_ngram_1_writes_the_bytes_written_before_ngram(masking, tool_files, capsys):
    for k, flags in enumerate([(), ("--ngram=1",), ("--ngram=1", "--nofavor_shorter_ngram", "--do_permutation=false")]):
        assert run(tool_files, capsys, *masking, *flags, output=f"ngram-1-{k}")[0] == 0
        written = (tool_files / f"ngram-1-{k}").read_bytes()
        assert hashlib.sha256(written).hexdigest() == BYTES_BEFORE_NGRAM[masking], flags
    assert run(tool_files, capsys, *masking, "--ngram=3", "--masked_lm_prob=0.5", output="ngram-3")[0] == 0
    assert (tool_files / "ngram-3").read_bytes() != written


@pytest.mark.parametrize("flags,message", [
    (["--ngram=0"], "--ngram must be at least 1, got 0"),
    (["--ngram=-2"], "--ngram must be at least 1, got -2"),
    (["--ngram=3", "--dynamic_masking"], "--ngram masks are drawn into the records; dynamic_masking writes none"),
    (["--do_permutation"], "--do_permutation (ALBERT's permuted-token objective) is not supported"),
])
def test_bad_flags_are_one_line(flags, message, tool_files, capsys):
    code, err = run(tool_files, capsys, *flags)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tool_files / "out.tfrecord").exists()
