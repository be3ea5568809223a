"""`bert-create-pretraining-data` and dynamic masking with a variant's own tokenizer (issue 37 item 4).

RoBERTa's byte-level BPE (`vocab.json` + `merges.txt`, trained here by
`tokenizers`) and ALBERT's SentencePiece (`spiece.model`, trained here by
`sentencepiece`) on a small random corpus. The oracle is Hugging Face's
tokenizers over the same files (transformers' `RobertaTokenizerFast`,
`AlbertTokenizer`): each line's ids, and its words (SentencePiece: the
`word_ids()` of Metaspace's whitespace words; byte-level BPE: whitespace
words from the character offsets, since `word_ids()` there also splits at
punctuation). The pairs are compared with the independent transcription of
google-research/albert's `create_instances_from_document` in
`tests/test_pretraining_recipes.py`, on the oracle's ids.
"""

import random

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.cli import EXIT_BAD_INPUT, run_tool
from keras_bert_impl.config import BertConfig
from keras_bert_impl.data.pretraining_dataset import DynamicMasking, draw_masked_lm_predictions
from keras_bert_impl.errors import VocabError
from keras_bert_impl.jobs.create_pretraining_data import create_pretraining_data
from tests.test_pretraining_recipes import _albert_pairs, _loss_before_and_after, _write_corpus
from tools import create_pretraining_data as create_pretraining_data_tool

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

# Each family's special tokens, as ids of the files trained below: cls, sep, pad, unk, mask.
ROBERTA_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
MAX_SEQ_LENGTH, MAX_PREDICTIONS = 40, 8


def _train_tokenizers(directory, lines, bpe_size, sp_size):
    """`{model_type: (tokenizer file, Hugging Face's tokenizer)}` trained on `lines`."""
    import sentencepiece
    from tokenizers import ByteLevelBPETokenizer

    roberta, albert = directory / "roberta", directory / "albert"
    roberta.mkdir()
    albert.mkdir()
    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(lines * 3, vocab_size=bpe_size, min_frequency=2, special_tokens=ROBERTA_SPECIALS)
    trainer.save_model(str(roberta))
    with open(albert / "spiece.model", "wb") as model:  # ALBERT's special pieces: <pad> 0, <unk> 1
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(lines), model_writer=model, vocab_size=sp_size, model_type="unigram", pad_id=0,
            unk_id=1, bos_id=-1, eos_id=-1, user_defined_symbols=["[CLS]", "[SEP]", "[MASK]"],
            hard_vocab_limit=False, minloglevel=2)
    return {
        "roberta": (roberta / "vocab.json", transformers.RobertaTokenizerFast.from_pretrained(str(roberta))),
        "albert": (albert / "spiece.model", transformers.AlbertTokenizer.from_pretrained(str(albert))),
    }


def _random_corpus(seed, documents=40):
    """Lower-case documents of random words (some long: several pieces), with punctuation, no digits."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghijklmnoprstu") for _ in range(rng.randint(2, 10))) for _ in range(40)]
    text = []
    for _ in range(documents):
        for _ in range(rng.randint(1, 6)):
            line = [rng.choice(words) + rng.choice(["", "", "", ",", "."]) for _ in range(rng.randint(2, 8))]
            text.append(" ".join(line))
        text.append("")
    return text


@pytest.fixture(scope="module")
def variant_files(tmp_path_factory):
    """The corpus, and each family's tokenizer file and oracle."""
    directory = tmp_path_factory.mktemp("variant_pretraining")
    lines = _random_corpus(seed=4)
    corpus = directory / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return corpus, lines, _train_tokenizers(directory, [line for line in lines if line], 330, 120)


def _specials(model_type, theirs):
    tokens = ("<s>", "</s>", "<pad>", "<unk>", "<mask>") if model_type == "roberta" else (
        "[CLS]", "[SEP]", "<pad>", "<unk>", "[MASK]")
    return dict(zip(("cls", "sep", "pad", "unk", "mask"), theirs.convert_tokens_to_ids(list(tokens))))


def _oracle_documents(lines, model_type, theirs):
    """Documents of lines as the oracle cuts them: `[(ids, word numbers)]` per line, empty lines dropped.

    Word numbers count whitespace words within the document (`▁`/`Ġ` starts one, and so does a line).
    """
    documents, words_before = [[]], 0
    for line in lines:
        line = line.strip()
        if not line:
            documents.append([])
            words_before = 0
            continue
        encoding = theirs(line, add_special_tokens=False, return_offsets_mapping=True)
        ids = encoding["input_ids"]
        if not ids:
            continue
        if model_type == "albert":
            words = encoding.word_ids()
        else:  # whitespace words, by where each token ends (a bare `Ġ`: empty, at the next word's start)
            words = [len(line[:max(end, start + 1)].split()) - 1 for start, end in encoding["offset_mapping"]]
        documents[-1].append((ids, [words_before + word for word in words]))
        words_before += max(words) + 1
    return [document for document in documents if document]


def _read_records(path):
    records = []
    for serialized in tf.data.TFRecordDataset(str(path)):
        features = tf.train.Example.FromString(serialized.numpy()).features.feature
        records.append({name: list(feature.int64_list.value or feature.float_list.value)
                        for name, feature in features.items()})
    return records


def _check_layout(record, model_type, specials):
    """`(texts, real ids)` of a record laid out as `model_type`'s tokenizer lays out a pair
    (or a full-sentence row): its masks undone."""
    length = sum(record["input_mask"])
    ids = list(record["input_ids"])
    for position, label, weight in zip(record.get("masked_lm_positions", ()), record.get("masked_lm_ids", ()),
                                       record.get("masked_lm_weights", ())):
        if weight:
            ids[position] = label
    real = ids[:length]
    assert ids[length:] == [specials["pad"]] * (MAX_SEQ_LENGTH - length)
    assert real[0] == specials["cls"] and real[-1] == specials["sep"]
    assert specials["mask"] not in real and specials["pad"] not in real and specials["cls"] not in real[1:]
    seps = [index for index, token in enumerate(real) if token == specials["sep"]]
    segment_ids = record["segment_ids"]
    if model_type == "roberta":
        assert not any(segment_ids)  # one token type
    elif record["next_sentence_labels"] != [0] or len(seps) == 2:  # a pair: [CLS] A [SEP] B [SEP]
        middle = seps[0]
        assert segment_ids == [0] * (middle + 1) + [1] * (length - middle - 1) + [0] * (MAX_SEQ_LENGTH - length)
    texts, start = [], 1
    for sep in seps:
        texts.append(real[start:sep])
        start = sep + 1
    return texts, real


def _pair_of(texts, model_type):
    if model_type == "roberta":  # <s> A </s></s> B </s>
        assert len(texts) == 3 and texts[1] == []
        return texts[0], texts[2]
    assert len(texts) == 2
    return texts[0], texts[1]


@pytest.mark.parametrize("model_type", ["roberta", "albert"])
def test_sentence_order_records_are_albert_pairs_of_the_oracles_ids_in_the_variants_layout(
        variant_files, model_type, tmp_path):
    corpus, lines, tokenizers = variant_files
    vocab_file, theirs = tokenizers[model_type]
    records_file = tmp_path / "sop.tfrecord"
    create_pretraining_data(str(corpus), str(records_file), str(vocab_file), max_seq_length=MAX_SEQ_LENGTH,
                            max_predictions_per_seq=MAX_PREDICTIONS, dupe_factor=2, random_seed=5,
                            sentence_order_prediction=True, dynamic_masking=True, verbose=False)
    specials = _specials(model_type, theirs)
    ours = []
    for record in _read_records(records_file):
        texts, _ = _check_layout(record, model_type, specials)
        ours.append((*_pair_of(texts, model_type), record["next_sentence_labels"][0]))

    # The reference: google-research/albert's pairs of the oracle's ids, in the generator's order.
    documents = [[ids for ids, _ in document] for document in _oracle_documents(lines, model_type, theirs)]
    rng = random.Random(5)
    rng.shuffle(documents)
    # RoBERTa's pair takes one more separator: albert's `max_seq_length - 3` tokens of text become one fewer.
    reference_length = MAX_SEQ_LENGTH - (1 if model_type == "roberta" else 0)
    reference = []
    for _ in range(2):
        for index in range(len(documents)):
            reference += _albert_pairs(documents, index, reference_length, 0.1, rng)
    order = list(range(len(reference)))
    rng.shuffle(order)
    assert ours == [reference[index] for index in order]
    assert {label for *_, label in ours} == {0, 1}
    assert max(len(a) + len(b) for a, b, _ in ours) == reference_length - 3  # the budget is used up


def _check_whole_words(texts, documents, masked):
    """Each text found once in a document's ids: every oracle word within it is masked whole or not at all.

    Returns:
        How many texts were checked, and how many words of several tokens were masked whole.
    """
    streams = [(sum((ids for ids, _ in document), []), sum((words for _, words in document), []))
               for document in documents]
    checked = multi_token_words = 0
    for start, text in texts:
        if len(text) < 4:
            continue
        found = [(ids, words, at) for ids, words in streams for at in range(len(ids) - len(text) + 1)
                 if ids[at:at + len(text)] == text]
        if len(found) != 1:
            continue  # too short to place for certain
        _, words, at = found[0]
        groups = {}
        for offset in range(len(text)):
            groups.setdefault(words[at + offset], []).append(start + offset)
        for positions in groups.values():
            hits = [position in masked for position in positions]
            assert all(hits) or not any(hits), (text, positions, masked)
            multi_token_words += all(hits) and len(positions) > 1
        checked += 1
    return checked, multi_token_words


@pytest.mark.parametrize("model_type,recipe", [
    ("roberta", dict(sentence_order_prediction=True, ngram=3)),
    ("albert", dict(sentence_order_prediction=True, ngram=3)),
    ("albert", dict()),
    ("roberta", dict(full_sentences=True)),
])
def test_whole_word_masks_cover_the_oracles_words_and_never_a_special_token(variant_files, model_type, recipe,
                                                                            tmp_path):
    corpus, lines, tokenizers = variant_files
    vocab_file, theirs = tokenizers[model_type]
    records_file = tmp_path / "masked.tfrecord"
    create_pretraining_data(str(corpus), str(records_file), str(vocab_file), max_seq_length=MAX_SEQ_LENGTH,
                            max_predictions_per_seq=MAX_PREDICTIONS, dupe_factor=3, random_seed=9,
                            short_seq_prob=0.0, do_whole_word_mask=True, masked_lm_prob=0.2, verbose=False,
                            **recipe)
    specials = _specials(model_type, theirs)
    special_ids = set(specials.values()) - {specials["unk"]}
    documents = _oracle_documents(lines, model_type, theirs)
    vocabulary = set(theirs.get_vocab().values())
    checked = multi_token_words = replaced = 0
    for record in _read_records(records_file):
        texts, real = _check_layout(record, model_type, specials)
        weights = record["masked_lm_weights"]
        masked = {p for p, w in zip(record["masked_lm_positions"], weights) if w}
        for position, label in zip(record["masked_lm_positions"], record["masked_lm_ids"]):
            if position in masked:
                assert label not in special_ids and real[position] == label
                written = record["input_ids"][position]
                assert written in vocabulary and (written == specials["mask"] or written not in special_ids)
                replaced += written not in (label, specials["mask"])
        starts, start = [], 1
        for text in texts:
            starts.append((start, text))
            start += len(text) + 1
        text_checked, text_words = _check_whole_words(starts, documents, masked)
        checked += text_checked
        multi_token_words += text_words
    assert checked > 40 and multi_token_words > 20 and replaced > 3, (checked, multi_token_words, replaced)


@pytest.mark.parametrize("model_type,recipe", [
    ("roberta", dict(sentence_order_prediction=True, ngram=3)),
    ("albert", dict(sentence_order_prediction=True, ngram=3)),
    ("albert", dict(short_seq_prob=0.5)),
    ("roberta", dict(full_sentences=True)),
])
def test_whole_word_candidates_are_the_oracles_words(variant_files, model_type, recipe, tmp_path, monkeypatch):
    # Each instance's candidate words as masking sees them, compared with the oracle's words of the same
    # text (cut where a text starts mid-word): not merely never split (above), but the very same words.
    from keras_bert_impl.data import pretraining_instances

    corpus, lines, tokenizers = variant_files
    vocab_file, theirs = tokenizers[model_type]
    seen, candidate_words = [], pretraining_instances.candidate_words

    def spy(input_ids, *args, **kwargs):
        words = candidate_words(input_ids, *args, **kwargs)
        seen.append((list(input_ids), words))
        return words

    monkeypatch.setattr(pretraining_instances, "candidate_words", spy)
    create_pretraining_data(str(corpus), str(tmp_path / "out.tfrecord"), str(vocab_file),
                            max_seq_length=MAX_SEQ_LENGTH, max_predictions_per_seq=MAX_PREDICTIONS, dupe_factor=2,
                            random_seed=3, do_whole_word_mask=True, verbose=False, **recipe)
    specials = _specials(model_type, theirs)
    streams = [(sum((ids for ids, _ in document), []), sum((words for _, words in document), []))
               for document in _oracle_documents(lines, model_type, theirs)]
    checked = 0
    for input_ids, words in seen:
        texts, start = [], None  # [(first position, ids)] between the special tokens
        for position, token in enumerate(input_ids + [specials["sep"]]):
            if token in (specials["cls"], specials["sep"]):
                if start is not None and position > start:
                    texts.append((start, input_ids[start:position]))
                start = position + 1
        ours = {frozenset(word) for word in words}
        for first, text in texts:
            found = [(ids_, words_, at) for ids_, words_ in streams for at in range(len(ids_) - len(text) + 1)
                     if ids_[at:at + len(text)] == text]
            if len(text) < 4 or len(found) != 1:
                continue  # too short to place for certain
            _, oracle_words, at = found[0]
            expected = {}
            for offset in range(len(text)):
                expected.setdefault(oracle_words[at + offset], set()).add(first + offset)
            span = set(range(first, first + len(text)))
            assert {word & span for word in ours if word & span} == {frozenset(w) for w in expected.values()}
            assert all(word <= span for word in ours if word & span)  # no word runs out of its text
            checked += 1
    assert checked > 50, checked


def test_scalable_mode_writes_the_variants_layout_too(variant_files, tmp_path):
    corpus, _, tokenizers = variant_files
    vocab_file, theirs = tokenizers["roberta"]
    prefix = tmp_path / "shards"
    stats = create_pretraining_data(str(corpus), str(prefix), str(vocab_file), max_seq_length=MAX_SEQ_LENGTH,
                                    max_predictions_per_seq=MAX_PREDICTIONS, dupe_factor=1, scalable=True,
                                    num_shards=2, num_workers=1, do_whole_word_mask=True, verbose=False)
    records = _read_records(f"{prefix}-00000-of-00002") + _read_records(f"{prefix}-00001-of-00002")
    assert len(records) == stats.instances > 0
    specials = _specials("roberta", theirs)
    for record in records:
        _check_layout(record, "roberta", specials)


def test_dynamic_masking_takes_the_variants_mask_and_vocabulary(variant_files, tmp_path):
    _, _, tokenizers = variant_files
    vocab_file, theirs = tokenizers["roberta"]
    specials = _specials("roberta", theirs)
    size = len(theirs.get_vocab())
    masking = DynamicMasking.from_vocab_file(str(vocab_file), size, 6, masked_lm_prob=0.5)
    assert masking.mask_id == specials["mask"]
    assert masking.special_ids == (specials["cls"], specials["sep"], specials["pad"])
    assert sorted(masking.replacement_ids) == sorted(set(range(size)) - set(specials.values()))
    with pytest.raises(Exception, match=f"{vocab_file}: ids up to {size - 1}, but the model's embeddings"):
        DynamicMasking.from_vocab_file(str(vocab_file), size - 1, 6)
    alone = tmp_path / "vocab.json"  # run_pretraining --dynamic_masking reads the files the generator read
    alone.write_text(vocab_file.read_text())
    with pytest.raises(VocabError, match=f"^{tmp_path / 'merges.txt'}: not found; a byte-level BPE vocab.json"):
        DynamicMasking.from_vocab_file(str(alone), size, 6)

    rng = np.random.default_rng(0)
    rows, seq = 400, 16
    input_ids = rng.integers(10, size, (rows, seq))
    input_ids[:, 0], input_ids[:, 7], input_ids[:, 8] = specials["cls"], specials["sep"], specials["sep"]
    input_mask = np.ones((rows, seq), np.int64)
    input_ids[:, 12:], input_mask[:, 12:] = specials["pad"], 0
    input_ids[:, 11] = specials["sep"]
    batch = draw_masked_lm_predictions({"input_ids": tf.constant(input_ids, tf.int32),
                                        "input_mask": tf.constant(input_mask, tf.int32)}, masking, tf.constant([1, 2]))
    positions, weights = batch["masked_lm_positions"].numpy(), batch["masked_lm_weights"].numpy()
    masked = np.take_along_axis(input_ids, positions, axis=1)[weights > 0]
    written = np.take_along_axis(batch["input_ids"].numpy(), positions, axis=1)[weights > 0]
    assert not np.isin(masked, [specials["cls"], specials["sep"], specials["pad"]]).any()
    random_words = written[(written != masked) & (written != specials["mask"])]
    assert random_words.size > 30 and not np.isin(random_words, list(specials.values())).any()


@pytest.fixture(scope="module")
def counting_corpus(tmp_path_factory):
    """`tests/test_pretraining_recipes.py`'s counting corpus, with each family's tokenizer trained on it."""
    directory = tmp_path_factory.mktemp("counting")
    _write_corpus(directory, documents=40)
    lines = [line for line in (directory / "corpus.txt").read_text().splitlines() if line]
    return directory / "corpus.txt", _train_tokenizers(directory, lines, 270, 30)


def test_albert_release_with_sentence_order_records_of_its_spiece_model_trains(counting_corpus, tmp_path):
    corpus, tokenizers = counting_corpus
    vocab_file, theirs = tokenizers["albert"]
    records = tmp_path / "sop.tfrecord"
    stats = create_pretraining_data(str(corpus), str(records), str(vocab_file), max_seq_length=24,
                                    max_predictions_per_seq=4, dupe_factor=3, sentence_order_prediction=True,
                                    do_whole_word_mask=True, ngram=3, verbose=False)
    assert 0.3 < stats.random_next / stats.instances < 0.8  # one-segment chunks: always 1
    config = BertConfig(vocab_size=len(theirs.get_vocab()), hidden_size=16, num_hidden_layers=4,
                        num_attention_heads=2, intermediate_size=32, hidden_act="gelu", hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0, max_position_embeddings=24, type_vocab_size=2,
                        model_type="albert", embedding_size=8, num_hidden_groups=2)
    before, after = _loss_before_and_after(tmp_path, config, records)
    # The sentence-order head trains too; its loss is not asked to fall: this model's SentencePiece cuts
    # every word in two ("▁w", "3"), so most pairs are truncated mid-count and the order is hard to see.
    assert "next_sentence_loss" in after
    assert after["loss"] < before["loss"] - 0.3, (before, after)
    assert after["masked_lm_loss"] < before["masked_lm_loss"] - 0.3, (before, after)


def test_roberta_with_dynamic_masking_of_its_vocab_json_trains(counting_corpus, tmp_path):
    corpus, tokenizers = counting_corpus
    vocab_file, theirs = tokenizers["roberta"]
    records = tmp_path / "full.tfrecord"
    create_pretraining_data(str(corpus), str(records), str(vocab_file), max_seq_length=24,
                            max_predictions_per_seq=4, dupe_factor=1, full_sentences=True, dynamic_masking=True,
                            verbose=False)
    config = BertConfig(vocab_size=len(theirs.get_vocab()), hidden_size=16, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=32, hidden_act="gelu_exact",
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, max_position_embeddings=26,
                        type_vocab_size=1, layer_norm_eps=1e-5, model_type="roberta", position_offset=2)
    before, after = _loss_before_and_after(tmp_path, config, records, next_sentence_prediction=False,
                                           dynamic_masking=True, vocab_file=str(vocab_file))
    assert after["masked_lm_loss"] < before["masked_lm_loss"] - 0.3, (before, after)


@pytest.mark.parametrize("problem", ["tokenizer.json", "not a model", "no merges.txt", "too short"])
def test_bad_tokenizer_files_are_one_line_before_any_output(variant_files, problem, tmp_path, capsys):
    corpus, _, tokenizers = variant_files
    flags = [f"--input_file={corpus}", f"--output_file={tmp_path / 'out' / 'x.tfrecord'}"]
    if problem == "tokenizer.json":
        vocab_file = tmp_path / "tokenizer.json"
        vocab_file.write_text('{"version": "1.0", "model": {"type": "BPE", "vocab": {}}}')
        (tmp_path / "merges.txt").write_text("#version: 0.2\n")
        expected = f"{vocab_file}: expected a JSON object of token -> integer id"
    elif problem == "not a model":
        vocab_file = tmp_path / "spiece.model"
        vocab_file.write_bytes(b"\x00\xffnot a sentencepiece model")
        expected = f"{vocab_file}: not a SentencePiece model"
    elif problem == "no merges.txt":
        vocab_file = tmp_path / "vocab.json"
        vocab_file.write_text(tokenizers["roberta"][0].read_text())
        expected = f"{tmp_path / 'merges.txt'}: not found; a byte-level BPE vocab.json ({vocab_file}) is read"
    else:  # <s> A </s></s> B </s> leaves RoBERTa one token of text at 5
        vocab_file = tokenizers["roberta"][0]
        flags.append("--max_seq_length=5")
        expected = "--max_seq_length must be at least 6 for pairs laid out <s> A </s></s> B </s>, got 5"
    code = run_tool(create_pretraining_data_tool.main, [*flags, f"--vocab_file={vocab_file}"],
                    prog="create_pretraining_data")
    message = capsys.readouterr().err.strip()
    assert code != 0 and "\n" not in message, message
    assert message.startswith(f"create_pretraining_data: error: {expected}"), message
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    if problem == "no merges.txt":
        assert code == EXIT_BAD_INPUT
