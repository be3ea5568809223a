"""SQuAD and NER on variant releases (issue 37 item 5): RoBERTa, ALBERT, DistilBERT.

The oracle is Hugging Face's tokenizers (transformers' `RobertaTokenizerFast`
and `AlbertTokenizer`, both on the `tokenizers` library), used as its
`run_qa` and token-classification examples use them: a context or sentence
is tokenized as one text with `return_offsets_mapping`, windows are cut by
`return_overflowing_tokens` with a stride, a word's first token carries its
label, and an answer is the context's characters between its first and last
token's offsets. Our features are made word by word (`tokenize_word`), so
HF reads the words joined by single spaces; its offsets are mapped back to
the original text word by word. RoBERTa's tokenizer here is a byte-level BPE
trained by `tokenizers` (all 256 bytes, real merges); ALBERT's is the
fixture's SentencePiece model, read without ALBERT's digit-comma rule (which
transformers 5 does not apply, `tokenization/sentencepiece_tokenizer.py`).

The end-to-end tests fine-tune the tiny releases converted from
`tests/variants_fixture.py` with `run_squad` and `run_ner`, on text their
60-token vocabularies can write.
"""

import bisect
import json
import os

import numpy as np
import pytest

from keras_bert_impl.checkpoints.sources import find_release
from keras_bert_impl.cli import EXIT_BAD_INPUT, run_tool
from keras_bert_impl.data import conll, squad
from keras_bert_impl.jobs.make_figures import read_scalars
from keras_bert_impl.tokenization.from_files import tokenizer_from_files
from keras_bert_impl.tokenization.sentencepiece_tokenizer import SentencePieceTokenizer
from tests.test_squad import squad_dataset
from tests.test_variant_tasks import releases  # noqa: F401 (a pytest fixture: the converted tiny releases)
from tools import run_ner, run_squad

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

HARD_TEXTS = [
    "Héllo  wörld \t café — naïve",
    "東京タワー and 北京 ",
    "emoji 😀👍🏽 in the text, it's (1895-1943).",
    "Zürich’s Café Ünïcödé serves crème brûlée at 9\u00a0€ each; «Берёза» ﬁne Ｆull x,y",
    "  leading\nand trailing\r\n  newlines, don't STOP!!! ...",
    "1902.\u202fThe owner, Ngô Bảo Châu",
]
MAX_SEQ_LENGTH, DOC_STRIDE, MAX_QUERY_LENGTH = 48, 16, 12


@pytest.fixture(scope="module")
def oracle_tokenizers(tmp_path_factory):
    """`{model_type: (ours, Hugging Face's)}` over the same tokenizer files, trained on the test's texts."""
    import sentencepiece
    from tokenizers import ByteLevelBPETokenizer

    paragraphs = [p for article in squad_dataset() for p in article["paragraphs"]]
    corpus = HARD_TEXTS + [p["context"] for p in paragraphs] + [qa["question"] for p in paragraphs for qa in p["qas"]]
    roberta = tmp_path_factory.mktemp("byte_level_bpe")
    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(corpus * 3, vocab_size=600, min_frequency=2,
                                special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    trainer.save_model(str(roberta))
    albert = tmp_path_factory.mktemp("sentencepiece")
    with open(albert / "spiece.model", "wb") as model:  # ALBERT's special pieces: <pad> 0, <unk> 1
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(corpus), model_writer=model, vocab_size=300, model_type="unigram", pad_id=0,
            unk_id=1, bos_id=-1, eos_id=-1, user_defined_symbols=["[CLS]", "[SEP]", "[MASK]"],
            hard_vocab_limit=False, character_coverage=0.99, minloglevel=2)
    model_proto = (albert / "spiece.model").read_bytes()
    return {
        "roberta": (tokenizer_from_files(roberta), transformers.RobertaTokenizerFast.from_pretrained(str(roberta))),
        "albert": (SentencePieceTokenizer.from_model_proto(model_proto, split_digit_comma=False),
                   transformers.AlbertTokenizer.from_pretrained(str(albert))),
    }


def _joined_starts(words):
    """Where each word starts in `" ".join(words)`."""
    return np.cumsum([0] + [len(word) + 1 for word in words[:-1]]).tolist()


def _to_original(offset, joined_starts, starts, is_end=False):
    """A character offset in the joined words -> the same character in the original text."""
    word = bisect.bisect_right(joined_starts, offset - 1 if is_end and offset else offset) - 1
    return starts[word] + offset - joined_starts[word]


def _hf_offsets(encoding_offsets, joined_starts, starts):
    return [(_to_original(a, joined_starts, starts), _to_original(b, joined_starts, starts, is_end=b > a))
            for a, b in encoding_offsets]


def _our_words(tokenizer, words, starts):
    """Token ids, word ids and character offsets of `words`, cut word by word."""
    ids, word_ids, offsets = [], [], []
    for index, word in enumerate(words):
        tokens = tokenizer.tokenize_word(word, after_space=index > 0)
        ids += tokenizer.convert_tokens_to_ids(tokens)
        word_ids += [index] * len(tokens)
        offsets += [(starts[index] + a, starts[index] + b)
                    for a, b in tokenizer.word_token_spans(word, tokens, index > 0)]
    return ids, word_ids, offsets


@pytest.mark.parametrize("model_type", ["roberta", "albert"])
def test_words_are_cut_as_in_running_text(oracle_tokenizers, model_type):
    ours, theirs = oracle_tokenizers[model_type]
    for text in HARD_TEXTS:
        words, starts = squad.split_context(text)
        joined = " ".join(words)
        joined_starts = _joined_starts(words)
        encoding = theirs(joined, add_special_tokens=False, return_offsets_mapping=True)
        ids, word_ids, offsets = _our_words(ours, words, starts)
        assert ids == encoding["input_ids"], text
        hf_word_ids = [bisect.bisect_right(joined_starts, a) - 1 for a, _ in encoding["offset_mapping"]]
        assert word_ids == hf_word_ids, text
        assert offsets == _hf_offsets(encoding["offset_mapping"], joined_starts, starts), text
        # Every token's characters are the original text's.
        assert all(0 <= a <= b <= len(text) for a, b in offsets)


def test_pretokenized_words_as_hugging_face_token_classification(oracle_tokenizers):
    """`is_split_into_words=True`: ALBERT's words are cut alike; RoBERTa's too
    after the first, which Hugging Face (`add_prefix_space=True`) gives a
    space that running text does not."""
    words = squad.split_context(HARD_TEXTS[2] + " " + HARD_TEXTS[3])[0]
    ours, theirs = oracle_tokenizers["albert"]
    encoding = theirs(words, is_split_into_words=True, add_special_tokens=False)
    assert _our_words(ours, words, range(len(words)))[:2] == (encoding["input_ids"], encoding.word_ids())

    ours, theirs = oracle_tokenizers["roberta"]
    theirs = transformers.RobertaTokenizerFast.from_pretrained(theirs.name_or_path, add_prefix_space=True)
    encoding = theirs(words, is_split_into_words=True, add_special_tokens=False)
    ids, word_ids, _ = _our_words(ours, words, range(len(words)))
    after_first = [i for i, word in enumerate(encoding.word_ids()) if word > 0]
    assert [ids[i] for i, w in enumerate(word_ids) if w > 0] == [encoding["input_ids"][i] for i in after_first]
    first = [i for i, word in enumerate(encoding.word_ids()) if word == 0]
    assert [encoding["input_ids"][i] for i in first] == ours.convert_tokens_to_ids(ours.tokenize_word(words[0]))


def _hf_windows(theirs, example):
    """Hugging Face `run_qa`'s training windows of one example, on the words joined by spaces.

    Returns:
        List of `(input_ids, attention_mask, token_type_ids, context_offsets,
        start, end)`: `context_offsets` maps each context position to its
        characters in the original context; `start, end` as `run_qa` labels
        them (0, 0 when the window lacks the answer).
    """
    joined = " ".join(example.doc_tokens)
    joined_starts = _joined_starts(example.doc_tokens)
    question = example.question_text.lstrip()
    specials = theirs.num_special_tokens_to_add(pair=True)
    window = MAX_SEQ_LENGTH - len(theirs(question, add_special_tokens=False)["input_ids"]) - specials
    encoding = theirs(question, joined, truncation="only_second", max_length=MAX_SEQ_LENGTH,
                      stride=window - DOC_STRIDE, return_overflowing_tokens=True, return_offsets_mapping=True,
                      padding="max_length", return_token_type_ids=True)
    if not example.is_impossible:  # the answer's characters in the joined words
        answer_end = example.answer_start + len(example.orig_answer_text)
        word = bisect.bisect_right(example.word_starts, example.answer_start) - 1
        start_char = joined_starts[word] + example.answer_start - example.word_starts[word]
        word = bisect.bisect_right(example.word_starts, answer_end - 1) - 1
        end_char = joined_starts[word] + answer_end - example.word_starts[word]
    windows = []
    for index, offsets in enumerate(encoding["offset_mapping"]):
        context = [i for i, sequence in enumerate(encoding.sequence_ids(index)) if sequence == 1]
        first, last = context[0], context[-1]
        start = end = 0
        if not example.is_impossible and offsets[first][0] <= start_char and offsets[last][1] >= end_char:
            start = first  # run_qa: the last token starting at or before the answer...
            while start < last and offsets[start + 1][0] <= start_char:
                start += 1
            end = last  # ...and the first from there whose end reaches the answer's end
            while end > start and offsets[end - 1][1] >= end_char:
                end -= 1
        spans = _hf_offsets([offsets[i] for i in context], joined_starts, example.word_starts)
        windows.append((encoding["input_ids"][index], encoding["attention_mask"][index],
                        encoding["token_type_ids"][index], dict(zip(context, spans)), start, end))
    return windows


@pytest.mark.parametrize("model_type", ["roberta", "albert"])
def test_squad_windows_labels_and_answers_equal_hugging_faces_run_qa(oracle_tokenizers, model_type):
    ours, theirs = oracle_tokenizers[model_type]
    examples, skipped = squad.read_squad_examples("hand-made", True, True, data=squad_dataset())
    assert skipped == ["b12", "u2"]  # answers not found in their words: skipped as for WordPiece
    # Hugging Face never truncates a question; compare those that fit.
    examples = [e for e in examples if len(ours.tokenize(e.question_text)) <= MAX_QUERY_LENGTH]
    assert len(examples) > 20
    features = list(squad.convert_examples_to_features(examples, ours, MAX_SEQ_LENGTH, DOC_STRIDE,
                                                       MAX_QUERY_LENGTH, is_training=True))
    by_example = {}
    for feature in features:
        by_example.setdefault(feature.example_index, []).append(feature)
    results, expected = [], {}
    for index, example in enumerate(examples):
        windows = _hf_windows(theirs, example)
        assert len(by_example[index]) == len(windows), example.qas_id
        for feature, (ids, mask, types, spans, start, end) in zip(by_example[index], windows):
            assert feature.input_ids == ids, example.qas_id
            assert feature.input_mask == mask and feature.segment_ids == types, example.qas_id
            assert feature.token_spans == spans, example.qas_id
            assert (feature.start_position, feature.end_position) == (start, end), example.qas_id
            # Logits that pick Hugging Face's answer span where the window has it (and, as the
            # original asks, the answer's start has its most context there).
            logits = np.full((2, MAX_SEQ_LENGTH), -10.0)
            logits[:, 0] = -5.0
            if start and feature.token_is_max_context[start]:
                logits[0, start], logits[1, end] = 10.0, 10.0
                expected[example.qas_id] = example.context[spans[start][0]:spans[end][1]]
            results.append((feature.unique_id, logits[0], logits[1]))
    output = squad.postprocess_predictions(examples, features, results, 5, 30, do_lower_case=True)
    answerable = [e for e in examples if not e.is_impossible]
    assert len(expected) >= len(answerable) - 3
    assert {qid: output.predictions[qid] for qid in expected} == expected
    # Where the answer's ends fall on token ends, that is the answer as written.
    exact = sum(output.predictions[qid] == text for qid, text in expected.items())
    assert exact >= len(expected) - 3, output.predictions


def _hf_tagging(model_type, theirs, words, labels, max_seq_length):
    """Hugging Face token classification's inputs: a word's first token carries its label (-100 elsewhere)."""
    if model_type == "albert":
        encoding = theirs(words, is_split_into_words=True)
        word_ids = encoding.word_ids()
    else:  # Running text, as ours: the first word without a space.
        joined = " ".join(words)
        encoding = theirs(joined, return_offsets_mapping=True, return_special_tokens_mask=True)
        joined_starts = _joined_starts(words)
        word_ids = [None if special else bisect.bisect_right(joined_starts, a) - 1
                    for (a, _), special in zip(encoding["offset_mapping"], encoding["special_tokens_mask"])]
    label_ids = [-100 if word is None or word == previous else labels[word]
                 for word, previous in zip(word_ids, [None] + word_ids[:-1])]
    padding = max_seq_length - len(label_ids)
    return encoding["input_ids"] + [theirs.pad_token_id] * padding, label_ids + [-100] * padding


@pytest.mark.parametrize("model_type", ["roberta", "albert"])
def test_tagging_features_label_first_tokens_as_hugging_face(oracle_tokenizers, model_type):
    ours, theirs = oracle_tokenizers[model_type]
    sentences = []
    for index, text in enumerate(HARD_TEXTS):
        words = text.split()
        labels = [f"B-X{i % 3}" for i in range(len(words))]
        sentences.append(conll.TaggedSentence(words, labels, [[w, l] for w, l in zip(words, labels)], []))
    label_map = {f"B-X{i}": i for i in range(3)}
    features, counts = conll.convert_sentences_to_features(sentences, ours, 96, label_map, "hard")
    assert counts.windows == len(sentences) and not counts.empty_words
    for feature, sentence in zip(features, sentences):
        ids, label_ids = _hf_tagging(model_type, theirs, sentence.words, [label_map[l] for l in sentence.labels], 96)
        assert feature.input_ids == ids, sentence.words
        assert feature.label_weights == [int(label != -100) for label in label_ids]
        assert feature.label_ids == [max(label, 0) for label in label_ids]
        assert feature.segment_ids == [0] * 96


# ----------------------------------------------------------------------------
# run_squad and run_ner on the tiny converted releases.
# ----------------------------------------------------------------------------

# Words each tiny vocabulary writes: (filler, names, places). RoBERTa's words after the first
# start with a bare `Ġ` (its merges make few words), so its tagger must look at the next token.
WORDS = {
    "roberta": ("the he a b c d e f g".split(), ["zq", "qz", "zz"], ["vy", "yv", "vv"]),
    "albert": ("the a b d f h".split(), ["ipsum", "jumps"], ["again", "over", "lazy"]),
    "distilbert": ([f"w{i}" for i in range(5, 30)], ["w40", "w41", "w42"], ["w45", "w46", "w47"]),
}
VARIANTS = tuple(WORDS)


def generated_squad(model_type, num_questions, seed):
    """SQuAD `data`: filler words with one name, the answer; the name's place varies."""
    filler, names, _ = WORDS[model_type]
    rng = np.random.default_rng(seed)
    paragraphs = []
    for index in range(num_questions):
        words = list(rng.choice(filler, size=int(rng.integers(3, 7))))
        position = int(rng.integers(0, len(words) + 1))
        name = str(rng.choice(names))
        words.insert(position, name)
        start = len(" ".join(words[:position])) + (1 if position else 0)
        paragraphs.append({"context": " ".join(words), "qas": [{
            "id": f"{model_type}-{seed}-{index}", "question": "who is it",
            "answers": [{"text": name, "answer_start": start}],
        }]})
    return [{"title": "generated", "paragraphs": paragraphs}]


def generated_conll(model_type, path, num_sentences, seed):
    """CoNLL sentences of filler (O) with names (B-PER) and places (B-LOC)."""
    filler, names, places = WORDS[model_type]
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(num_sentences):
        tokens = [(str(w), "O") for w in rng.choice(filler, size=int(rng.integers(1, 5)))]
        for _ in range(int(rng.integers(1, 3))):
            kind, label = (names, "B-PER") if rng.random() < 0.5 else (places, "B-LOC")
            tokens.insert(int(rng.integers(0, len(tokens) + 1)), (str(rng.choice(kind)), label))
        lines += [f"{word} X {label}" for word, label in tokens] + [""]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _loss_falls(output_dir):
    losses = [value for _, value in read_scalars(str(output_dir), log=lambda message: None)["train/loss"]]
    assert len(losses) >= 4 and np.mean(losses[-2:]) < 0.8 * np.mean(losses[:2]), losses


def _is_variant_release(output_dir, release):
    """The fine-tuned output is a release with the variant's own tokenizer files."""
    fine_tuned, original = find_release(output_dir).vocab_file, find_release(release).vocab_file
    assert os.path.basename(fine_tuned) == os.path.basename(original)


# run_squad's epochs over the 64 questions (8 steps each): RoBERTa's tiny release answers 12 of 12 after 10 or 12
# (10 of 12 after 6); ALBERT's none after 15, nor after 10 at twice the learning rate: it keeps 30.
SQUAD_EPOCHS = {"roberta": 12, "albert": 30}
SQUAD_SHAPE = ["--max_seq_length=32", "--doc_stride=8", "--max_query_length=4", "--max_answer_length=6",
               "--n_best_size=4"]


@pytest.fixture(scope="module")
def squad_runs(releases, tmp_path_factory):  # noqa: F811
    """`{model_type: (output directory, dev file)}`: `run_squad` fine-tuned on each tiny release (64 generated
    questions, `SQUAD_EPOCHS`), predicting 12 others; the fine-tuned releases also teach the SQuAD students below."""
    runs = {}
    for model_type in ("roberta", "albert"):
        root = tmp_path_factory.mktemp(f"squad_{model_type}")
        train, dev = root / "train.json", root / "dev.json"
        train.write_text(json.dumps({"data": generated_squad(model_type, 64, seed=1)}), encoding="utf-8")
        dev.write_text(json.dumps({"data": generated_squad(model_type, 12, seed=2)}), encoding="utf-8")
        output_dir = root / "out"
        run_squad.main([f"--model_dir={releases[model_type]}", f"--output_dir={output_dir}", "--do_train",
                        "--do_predict", f"--train_file={train}", "--train_batch_size=8",
                        f"--num_train_epochs={SQUAD_EPOCHS[model_type]}",
                        "--learning_rate=1e-3", *SQUAD_SHAPE, f"--predict_file={dev}"])
        runs[model_type] = output_dir, dev
    return runs


# DistilBERT's features are WordPiece's, run end to end by the BERT tests.
@pytest.mark.parametrize("model_type", ["roberta", "albert"])
def test_run_squad_fine_tunes_and_predicts_a_variant_release(releases, squad_runs, model_type, tmp_path):  # noqa: F811
    output_dir, dev = squad_runs[model_type]
    _loss_falls(output_dir)
    _is_variant_release(output_dir, releases[model_type])
    predictions = json.loads((output_dir / "predictions.json").read_text(encoding="utf-8"))
    nbest = json.loads((output_dir / "nbest_predictions.json").read_text(encoding="utf-8"))
    contexts = {qa["id"]: p["context"] for p in json.loads(dev.read_text())["data"][0]["paragraphs"]
                for qa in p["qas"]}
    assert set(predictions) == set(nbest) == set(contexts)
    # Every answer is text of its context, cut at the characters of its tokens.
    assert all(entry["text"] in contexts[qid] for qid, entries in nbest.items() for entry in entries)
    results = dict(line.split(" = ") for line in (output_dir / "eval_results.txt").read_text().splitlines())
    assert set(results) == {"exact_match", "f1", "global_step"}
    assert results["global_step"] == str(8 * SQUAD_EPOCHS[model_type])  # 64 questions in batches of 8
    assert float(results["exact_match"]) >= 90.0, results  # the name, cut from the context as written

    # Predicting only, from the fine-tuned release as --model_dir: the same answers.
    again = tmp_path / "again"
    run_squad.main([f"--model_dir={output_dir}", f"--output_dir={again}", "--do_predict", *SQUAD_SHAPE,
                    f"--predict_file={dev}"])
    assert json.loads((again / "predictions.json").read_text(encoding="utf-8")) == predictions


# Moved from tests/test_variant_distillation.py, whose teachers were run_squad runs of their own (4 epochs):
# the fine-tuned releases above teach here. ALBERT's tiny tagger learns too slowly for a short test (run_ner
# trains it 20 epochs below); NER students take the same path after their features (run_ner's, tested for every
# variant below).
@pytest.mark.parametrize("model_type, task", [("roberta", "squad"), ("albert", "squad")])
def test_span_and_tagging_students_are_of_their_teachers_variant(squad_runs, model_type, task, tmp_path):
    """run_squad teachers of a byte-level BPE or SentencePiece release: the student is of the variant, its loss
    falls, and the task's tool predicts from its release what bert-distill predicted."""
    from tests.test_variant_distillation import (
        STUDENT_LAYERS,
        _config,
        _expected_student_config,
        _same_tokenizer_files,
    )
    from tools import distill

    teacher, _ = squad_runs[model_type]
    data = tmp_path / "train.json"
    data.write_text(json.dumps({"data": generated_squad(model_type, 48, seed=1)}), encoding="utf-8")
    files, predictions = [f"--train_file={data}", f"--predict_file={data}"], "predictions.json"
    student = tmp_path / "student"
    distill.main([f"--task={task}", f"--teacher_dir={teacher}", *files, *SQUAD_SHAPE, "--do_predict",
                  f"--num_hidden_layers={STUDENT_LAYERS[model_type]}", "--train_batch_size=8",
                  "--num_train_epochs=4", "--learning_rate=1e-3", f"--output_dir={student}"])
    assert _config(student) == _expected_student_config(teacher, STUDENT_LAYERS[model_type])
    _same_tokenizer_files(model_type, teacher, student)
    _loss_falls(student)
    again = tmp_path / "again"
    run_squad.main([f"--model_dir={student}", f"--output_dir={again}", "--do_predict", f"--predict_file={data}",
                    *SQUAD_SHAPE])
    assert (again / predictions).read_text() == (student / predictions).read_text()


# DistilBERT's features are WordPiece's, run end to end by the BERT tests.
@pytest.mark.parametrize("model_type", ["roberta", "albert"])
def test_run_ner_fine_tunes_and_predicts_a_variant_release(releases, model_type, tmp_path):  # noqa: F811
    train = generated_conll(model_type, tmp_path / "train.txt", 96, seed=1)
    dev = generated_conll(model_type, tmp_path / "dev.txt", 16, seed=2)
    output_dir = tmp_path / "out"
    run_ner.main([f"--model_dir={releases[model_type]}", f"--output_dir={output_dir}", "--do_train", "--do_eval",
                  "--do_predict", f"--train_file={train}", f"--eval_file={dev}", f"--predict_file={dev}",
                  "--max_seq_length=12", "--train_batch_size=8", "--num_train_epochs=20", "--learning_rate=1e-3"])
    _loss_falls(output_dir)
    _is_variant_release(output_dir, releases[model_type])
    results = dict(line.split(" = ") for line in (output_dir / "eval_results.txt").read_text().splitlines())
    assert float(results["accuracy"]) >= 0.85, results
    dev_lines = [line for line in dev.read_text().splitlines() if line]
    predicted = [line for line in (output_dir / "test_predictions.txt").read_text().splitlines() if line]
    assert len(predicted) == len(dev_lines)
    assert all(p.startswith(d + " ") and p.split()[-1] in ("O", "B-PER", "B-LOC") for d, p in zip(dev_lines, predicted))

    again = tmp_path / "again"
    run_ner.main([f"--model_dir={output_dir}", f"--output_dir={again}", "--do_predict", f"--predict_file={dev}",
                  "--max_seq_length=12"])
    assert (again / "test_predictions.txt").read_text() == (output_dir / "test_predictions.txt").read_text()


def test_bad_input_with_a_variant_release_is_one_line(releases, tmp_path, capsys):  # noqa: F811
    data = generated_squad("roberta", 2, seed=3)
    data[0]["paragraphs"][1]["qas"][0]["answers"][0]["answer_start"] = 500
    train = tmp_path / "train.json"
    train.write_text(json.dumps({"data": data}), encoding="utf-8")
    flags = [f"--model_dir={releases['roberta']}", f"--output_dir={tmp_path}/out", "--do_train",
             f"--train_file={train}", "--max_seq_length=32", "--doc_stride=8"]
    assert run_tool(run_squad.main, [*flags, "--max_query_length=4"], prog="run_squad") == EXIT_BAD_INPUT
    message = capsys.readouterr().err.strip()
    assert message.startswith(f"run_squad: error: {train}: question 'roberta-3-1': answer") and "\n" not in message
    # RoBERTa's windows take four special tokens: <s> question </s></s> context </s>.
    assert run_tool(run_squad.main, [*flags, "--max_query_length=28"], prog="run_squad") == EXIT_BAD_INPUT
    message = capsys.readouterr().err.strip()
    assert message == (f"run_squad: error: --max_seq_length (32) must be greater than --max_query_length (28) + 4, "
                       f"the special tokens of {find_release(releases['roberta']).vocab_file}'s windows")

    conll_file = generated_conll("albert", tmp_path / "train.txt", 4, seed=1)
    code = run_tool(run_ner.main, [f"--model_dir={releases['albert']}", f"--output_dir={tmp_path}/ner",
                                   "--do_train", f"--train_file={conll_file}", "--labels=O,B-PER",
                                   "--max_seq_length=12"], prog="run_ner")
    assert code == EXIT_BAD_INPUT
    message = capsys.readouterr().err.strip()
    assert f"run_ner: error: {conll_file}:" in message and "label 'B-LOC' is not one of the model's labels" in message


QA_QUESTIONS = ["Who serves crème?", "東京 or 北京?", "What is it?"]
QA_SEQ = 32  # the tiny releases' longest sequence


@pytest.fixture(scope="module")
def span_qa_served(releases, oracle_tokenizers, tmp_path_factory):  # noqa: F811
    """`{model_type: the served answer}`: per variant, the release's architecture at one layer (ALBERT's: one
    group of one) as a `BertSpanQA`, randomized, over the oracle's tokenizer files, exported and asked
    `serve_text_pair` for the hard texts; both exports answered by one process without our Python (`probe_many`:
    one TensorFlow start-up for both). The answers are the tokenizer's and the span search's, whatever the depth."""
    import dataclasses

    from keras_bert_impl.config import BertConfig
    from keras_bert_impl.models.span_qa import BertSpanQA
    from keras_bert_impl.serving.export import ExportOptions, export_saved_model
    from tests.helpers import randomize
    from tests.test_serving import probe_many

    root = tmp_path_factory.mktemp("span_qa")
    questions, contexts = _qa_requests()
    jobs = {}
    for model_type in ("roberta", "albert"):
        _, theirs = oracle_tokenizers[model_type]
        config = BertConfig.from_json_file(find_release(releases[model_type]).bert_config_file)
        one_layer = {"num_hidden_layers": 1}
        if model_type == "albert":
            one_layer.update(num_hidden_groups=1, inner_group_num=1)
        model = BertSpanQA(dataclasses.replace(config, vocab_size=len(theirs), **one_layer))
        randomize(model, seed=3, scale=0.5)
        export_saved_model(model, "span_qa", _qa_vocab_file(model_type, theirs), root / model_type,
                           ExportOptions(max_seq_length=QA_SEQ, precision="float32"))
        jobs[model_type] = (root / model_type / "1", [
            {"signature": "serve_text_pair", "inputs": {"text": questions, "text_b": contexts}}])
    return {model_type: served for model_type, (served,) in probe_many(jobs).items()}


def _qa_vocab_file(model_type, theirs):
    return os.path.join(theirs.name_or_path, "vocab.json" if model_type == "roberta" else "spiece.model")


def _qa_requests():
    """`(questions, contexts)` asked of the span QA exports."""
    questions = [QA_QUESTIONS[i % len(QA_QUESTIONS)] for i in range(len(HARD_TEXTS))]
    contexts = [" ".join(text.split()[:4]) for text in HARD_TEXTS]
    return questions, contexts


@pytest.mark.parametrize("model_type", ["roberta", "albert"])
def test_span_qa_export_of_a_bpe_or_sentencepiece_release_serves_its_best_span(span_qa_served, oracle_tokenizers,
                                                                                model_type):
    """The export answers in-graph, served without our Python: the best
    allowed span of its own logits, as text that Hugging Face's tokenizer
    (RoBERTa) or SentencePiece (ALBERT) decodes from the span's ids. The
    model is the release's architecture at one layer, randomized, over
    tokenizer files trained on the hard texts (the release's 60 tokens write
    them as unknown tokens); an ALBERT answer holding `<unk>` has no decoded
    text to match (6 of 6 decode for each variant today)."""
    import sentencepiece

    _, theirs = oracle_tokenizers[model_type]
    questions, contexts = _qa_requests()
    served = span_qa_served[model_type]

    if model_type == "albert":
        processor = sentencepiece.SentencePieceProcessor(model_file=_qa_vocab_file(model_type, theirs))
        decode = processor.decode
    else:
        decode = lambda ids: theirs.decode(ids, clean_up_tokenization_spaces=False)  # noqa: E731
    start_logits, end_logits = np.array(served["start_logits"]), np.array(served["end_logits"])
    max_answer_length = 30  # the export's default
    decoded = 0
    for row, (question, context) in enumerate(zip(questions, contexts)):
        encoding = theirs(question, context)
        ids = encoding["input_ids"]
        assert len(ids) <= QA_SEQ, (question, context)
        # The served request is Hugging Face's pair: as many real positions.
        assert int((start_logits[row] > -1000).sum()) == len(ids)
        in_context = np.array([sequence == 1 for sequence in encoding.sequence_ids()])  # None: the specials
        starts, ends = np.meshgrid(np.arange(len(ids)), np.arange(len(ids)), indexing="ij")
        allowed = in_context[:, None] & in_context[None, :] & (ends >= starts) & (ends - starts < max_answer_length)
        scores = np.where(allowed, start_logits[row, :len(ids), None] + end_logits[row, None, :len(ids)], -np.inf)
        best_start, best_end = np.unravel_index(np.argmax(scores), scores.shape)
        assert (served["answer_start"][row], served["answer_end"][row]) == (best_start, best_end), context
        answer = ids[best_start:best_end + 1]
        if theirs.unk_token_id in answer:  # SentencePiece decodes it as " ⁇ ", the export as its token
            continue
        assert served["answer_text"][row] == decode(answer).strip(), context
        decoded += 1
    assert decoded >= 4
