"""keras_bert_impl.data.squad and squad_metrics against independent references.

The oracles are tf-models-official's SQuAD library (`official/nlp/data/
squad_lib.py`, its own port of the original `run_squad.py`, with its own
tokenizer) and its copies of the official evaluation scripts
(`official/nlp/tools/squad_evaluate_v1_1.py`, `squad_evaluate_v2_0.py`). The
SQuAD files are written here by hand: long contexts cut into many windows,
answers on window edges, unanswerable questions, answers inside words and
inside punctuation, non-ASCII text and the original's own whitespace rules.
"""

import bisect
import json

import numpy as np
import pytest
from official.nlp.data import squad_lib
from official.nlp.tools import squad_evaluate_v1_1, squad_evaluate_v2_0
from official.nlp.tools import tokenization as orig_tokenization

from keras_bert_impl.data import squad, squad_metrics
from keras_bert_impl.errors import InputFileError
from keras_bert_impl.tokenization import BasicTokenizer, FullTokenizer

MAX_SEQ_LENGTH = 48
DOC_STRIDE = 16
MAX_QUERY_LENGTH = 12

LONG_CONTEXT = (
    "The history of the bridge begins in 1820, when a ferryman named Elias Brandt "
    "proposed a crossing of stone. His plan was rejected twice by the council, "
    "which preferred a wooden design; the wooden bridge (1831-1877) burned in a "
    "summer fire. Brandt's grandson, the engineer Margarethe Brandt, finally "
    "built the stone arches between 1880 and 1886, using granite from the "
    "Japanese-owned quarry at Kirkby. Traffic grew quickly: by 1900 about 4,000 "
    "carts crossed every day, and the toll — two pennies — paid for the whole "
    "structure within nineteen years. During the war the central arch was "
    "damaged, repaired in 1947, and widened again in 1968 for motor traffic. "
    "Today the bridge carries a tram line, two footpaths and a cycle lane, and "
    "it was listed as a protected monument in 1991 after a long campaign by "
    "local historians, teachers and the river guild of boatmen."
)

NON_ASCII_CONTEXT = (
    "Zürich’s Café Ünïcödé serves crème brûlée at 9\u00a0€ each; its façade "
    "dates from 1902.\u202fThe owner, Ngô Bảo Châu, also runs a shop in 東京 "
    "called 「さくら」 — and a stall in Москва named «Берёза». Visitors rate it "
    "5⭐, often writing “naïve but délicieux”."
)


def _qa(qid, question, context=None, answer=None, occurrence=0, impossible=False, answer_start=None):
    """A question; the answer's `answer_start` is found in `context`."""
    qa = {"id": qid, "question": question, "answers": []}
    if impossible:
        qa["is_impossible"] = True
        qa["plausible_answers"] = []
        return qa
    start = -1
    for _ in range(occurrence + 1):
        start = context.index(answer, start + 1)
    qa["answers"] = [{"text": answer, "answer_start": start if answer_start is None else answer_start}]
    qa["is_impossible"] = False
    return qa


def squad_dataset():
    """The hand-made SQuAD v2.0 `data` list (v1.1 drops the impossible ones)."""
    short = "Ada Lovelace (1815-1852) wrote the first program, for Babbage's engine."
    return [
        {
            "title": "Bridge",
            "paragraphs": [
                {
                    "context": LONG_CONTEXT,
                    "qas": [
                        _qa("b1", "Who proposed a crossing of stone?", LONG_CONTEXT, "Elias Brandt"),
                        _qa("b2", "When did the wooden bridge burn?", LONG_CONTEXT, "1877"),
                        _qa("b3", "Which country owned the quarry?", LONG_CONTEXT, "Japan"),
                        _qa("b4", "How many carts crossed every day by 1900?", LONG_CONTEXT, "about 4,000"),
                        _qa("b5", "What was the toll?", LONG_CONTEXT, "two pennies"),
                        _qa("b6", "When was the arch repaired?", LONG_CONTEXT, "1947"),
                        _qa("b7", "What does the bridge carry today?", LONG_CONTEXT,
                            "a tram line, two footpaths and a cycle lane"),
                        _qa("b8", "Who campaigned for the listing?", LONG_CONTEXT,
                            "local historians, teachers and the river guild of boatmen"),
                        _qa("b9", "Who built the stone arches, and when exactly did the very long "
                            "construction work of the engineer begin and end?", LONG_CONTEXT, "Margarethe Brandt"),
                        _qa("b10", "What colour is the tram?", impossible=True),
                        _qa("b11", "What burned?", LONG_CONTEXT, "bridge", occurrence=2),
                        # Same question length: windows of 42 pieces every 16, so these
                        # answers end / start exactly on window edges.
                        _qa("b13", "What happened?", LONG_CONTEXT, "grandson, the engineer"),
                        _qa("b14", "What happened?", LONG_CONTEXT, "summer fire"),
                        _qa("b15", "What happened?", LONG_CONTEXT, "two pennies"),
                        # Points at the wrong words: the original skips it for training.
                        _qa("b12", "Who was the ferryman?", LONG_CONTEXT, "Elias Brandt", answer_start=5),
                    ],
                },
                {
                    "context": short,
                    "qas": [
                        _qa("s1", "When was Ada Lovelace born?", short, "1815"),
                        _qa("s2", "Whose engine?", short, "Babbage"),
                        _qa("s3", "Who wrote the first program?", short, "Ada Lovelace"),
                        _qa("s4", "Who wrote the last program?", impossible=True),
                    ],
                },
            ],
        },
        {
            "title": "Café",
            "paragraphs": [
                {
                    "context": NON_ASCII_CONTEXT,
                    "qas": [
                        _qa("u1", "What does the café serve?", NON_ASCII_CONTEXT, "crème brûlée"),
                        _qa("u2", "How much does it cost?", NON_ASCII_CONTEXT, "9\u00a0€"),
                        _qa("u3", "Who is the owner?", NON_ASCII_CONTEXT, "Ngô Bảo Châu"),
                        _qa("u4", "In which city is the shop?", NON_ASCII_CONTEXT, "東京"),
                        _qa("u5", "What is the stall named?", NON_ASCII_CONTEXT, "Берёза"),
                        _qa("u6", "When does the façade date from?", NON_ASCII_CONTEXT, "1902"),
                        _qa("u7", "What do visitors write?", NON_ASCII_CONTEXT, "naïve but délicieux"),
                        _qa("u8", "Who founded Zürich?", impossible=True),
                    ],
                },
            ],
        },
    ]


def write_squad(path, data, version_2=True):
    if not version_2:
        data = json.loads(json.dumps(data))
        for article in data:
            for paragraph in article["paragraphs"]:
                paragraph["qas"] = [qa for qa in paragraph["qas"] if not qa.get("is_impossible")]
                for qa in paragraph["qas"]:
                    qa.pop("is_impossible", None)
                    qa.pop("plausible_answers", None)
    path.write_text(json.dumps({"version": "v2.0" if version_2 else "1.1", "data": data}, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def squad_files(tmp_path_factory):
    directory = tmp_path_factory.mktemp("squad")
    data = squad_dataset()
    return {
        "v1": write_squad(directory / "v1.json", data, version_2=False),
        "v2": write_squad(directory / "v2.json", data, version_2=True),
    }


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def tokenizers(request, bert_vocab_file):
    ours = FullTokenizer(bert_vocab_file, do_lower_case=request.param)
    theirs = orig_tokenization.FullTokenizer(str(bert_vocab_file), do_lower_case=request.param)
    return ours, theirs, request.param


def oracle_features(path, tokenizer, is_training, version_2, max_seq_length=MAX_SEQ_LENGTH):
    examples = squad_lib.read_squad_examples(str(path), is_training, version_2)
    features = []

    def collect(feature, is_padding=False):
        if not is_padding:
            features.append(feature)

    squad_lib.convert_examples_to_features(
        examples, tokenizer, max_seq_length, DOC_STRIDE, MAX_QUERY_LENGTH, is_training, collect, batch_size=4
    )
    return examples, features


def our_features(path, tokenizer, is_training, version_2, max_seq_length=MAX_SEQ_LENGTH):
    examples, skipped = squad.read_squad_examples(path, is_training, version_2)
    features = list(
        squad.convert_examples_to_features(examples, tokenizer, max_seq_length, DOC_STRIDE, MAX_QUERY_LENGTH, is_training)
    )
    return examples, skipped, features


FEATURE_FIELDS = (
    "unique_id", "example_index", "doc_span_index", "tokens", "token_to_orig_map",
    "token_is_max_context", "input_ids", "input_mask", "segment_ids",
)


@pytest.mark.parametrize("version", ["v1", "v2"])
@pytest.mark.parametrize("is_training", [True, False], ids=["train", "predict"])
def test_features_equal_tf_models(squad_files, tokenizers, version, is_training):
    ours_tokenizer, their_tokenizer, _ = tokenizers
    version_2 = version == "v2"
    path = squad_files[version]
    their_examples, their_features = oracle_features(path, their_tokenizer, is_training, version_2)
    examples, skipped, features = our_features(path, ours_tokenizer, is_training, version_2)

    # b12 points at the wrong words; u2 ("9\\u00a0€") is the original's Unicode case.
    assert skipped == (["b12", "u2"] if is_training else [])
    assert [e.qas_id for e in examples] == [e.qas_id for e in their_examples]
    for ours, theirs in zip(examples, their_examples):
        assert (ours.question_text, ours.doc_tokens) == (theirs.question_text, theirs.doc_tokens)
        assert (ours.orig_answer_text, ours.start_position, ours.end_position, ours.is_impossible) == (
            theirs.orig_answer_text, theirs.start_position, theirs.end_position, theirs.is_impossible)

    assert len(features) == len(their_features) > 40
    for ours, theirs in zip(features, their_features):
        for field in FEATURE_FIELDS:
            assert getattr(ours, field) == getattr(theirs, field), (ours.unique_id, field)
        if is_training:
            assert (ours.start_position, ours.end_position) == (theirs.start_position, theirs.end_position)
            # The original stores the example's flag; tf-models stores "window lacks the answer".
            assert ours.is_impossible == examples[ours.example_index].is_impossible
        else:
            assert ours.start_position is None and ours.end_position is None


def test_hand_made_file_covers_the_hard_cases(squad_files, bert_vocab_file):
    """The oracle comparison above sees answers starting on a window's first
    context piece and ending on its last, windows that cut an answer, many
    windows per question and a truncated question."""
    tokenizer = FullTokenizer(bert_vocab_file, do_lower_case=True)
    examples, _, features = our_features(squad_files["v2"], tokenizer, True, True)
    windows = {}
    at_first_piece = at_last_piece = cut = 0
    for feature in features:
        windows[feature.example_index] = windows.get(feature.example_index, 0) + 1
        positions = sorted(feature.token_to_orig_map)
        if feature.start_position == positions[0]:
            at_first_piece += 1
        if feature.end_position == positions[-1]:
            at_last_piece += 1
        if feature.start_position == 0 and not examples[feature.example_index].is_impossible:
            cut += 1
    assert at_first_piece and at_last_piece and cut
    assert max(windows.values()) >= 8
    b9_index = next(i for i, e in enumerate(examples) if e.qas_id == "b9")
    truncated = tokenizer.tokenize(examples[b9_index].question_text)
    assert len(truncated) > MAX_QUERY_LENGTH
    b9 = next(f for f in features if f.example_index == b9_index)
    assert b9.tokens[1 : MAX_QUERY_LENGTH + 2] == truncated[:MAX_QUERY_LENGTH] + ["[SEP]"]


def test_improved_answer_span(bert_vocab_file):
    tokenizer = FullTokenizer(bert_vocab_file, do_lower_case=True)
    pieces = tokenizer.tokenize("(1895-1943).")
    assert squad.improve_answer_span(pieces, 0, len(pieces) - 1, tokenizer, "1895") == (1, 1)
    pieces = tokenizer.tokenize("Japanese")
    assert squad.improve_answer_span(pieces, 0, len(pieces) - 1, tokenizer, "Japan") == (0, len(pieces) - 1)


def test_context_split_on_the_originals_whitespace_only():
    text = "a\u00a0b  c\u202fd\te\u3000f\n"
    words, starts = squad.split_context(text)
    assert words == ["a\u00a0b", "c", "d", "e\u3000f"]
    # The original's char_to_word_offset, character by character.
    offsets, count, previous_space = [], 0, True
    for char in text:
        if char in " \t\r\n\u202f":
            previous_space = True
        else:
            count += previous_space
            previous_space = False
        offsets.append(count - 1)
    assert [bisect.bisect_right(starts, i) - 1 for i in range(len(text))] == offsets


def random_results(features, seed, answer_bias=None):
    """Logits as the original passes them (Python floats from float32),
    sometimes peaked at the gold span so the n-best holds real answers."""
    rng = np.random.default_rng(seed)
    results = []
    for feature in features:
        start = rng.normal(0, 2, MAX_SEQ_LENGTH).astype(np.float32)
        end = rng.normal(0, 2, MAX_SEQ_LENGTH).astype(np.float32)
        if answer_bias is not None and feature.start_position:
            start[feature.start_position] += answer_bias
            end[feature.end_position] += answer_bias
        # Exact ties exercise the ordering of equal scores.
        start[5] = start[6] = start[7]
        results.append(squad.RawResult(feature.unique_id, start.tolist(), end.tolist()))
    return results


@pytest.mark.parametrize("version", ["v1", "v2"])
@pytest.mark.parametrize("seed", [0, 1])
def test_postprocessing_equals_tf_models(squad_files, tokenizers, version, seed):
    ours_tokenizer, their_tokenizer, do_lower_case = tokenizers
    version_2 = version == "v2"
    path = squad_files[version]
    examples, _, features = our_features(path, ours_tokenizer, False, version_2)
    # Training-mode positions tell where to put the peaks.
    training_examples, _, training_features = our_features(path, ours_tokenizer, True, version_2)
    positions = {(training_examples[f.example_index].qas_id, f.doc_span_index): f for f in training_features}
    for feature in features:
        key = (examples[feature.example_index].qas_id, feature.doc_span_index)
        if key in positions:
            feature.start_position = positions[key].start_position
            feature.end_position = positions[key].end_position
    results = random_results(features, seed, answer_bias=8.0 if seed else None)
    for feature in features:
        feature.start_position = feature.end_position = None
    their_examples, their_features = oracle_features(path, their_tokenizer, False, version_2)
    kwargs = dict(n_best_size=7, max_answer_length=6, do_lower_case=do_lower_case,
                  version_2_with_negative=version_2, null_score_diff_threshold=0.5)
    theirs = squad_lib.postprocess_output(their_examples, their_features, results, **kwargs)
    ours = squad.postprocess_predictions(examples, features, results, **kwargs)

    assert ours.predictions == theirs[0]
    assert json.dumps(ours.nbest) == json.dumps(theirs[1])
    assert json.dumps(ours.null_odds) == json.dumps(theirs[2])
    if seed:  # Peaked logits: the spans come back as the original text.
        recovered = {v for v in ours.predictions.values() if v}
        assert {"Elias Brandt", "1877", "Ada Lovelace", "crème brûlée"} <= recovered, ours.predictions


def test_final_text_recovery():
    lower = BasicTokenizer(do_lower_case=True)
    assert squad.get_final_text("steve smith", "Steve Smith's", lower) == "Steve Smith"
    assert squad.get_final_text("1895", "(1895-1943).", lower) == "1895"
    assert squad.get_final_text("creme brulee", "crème brûlée,", lower) == "crème brûlée"
    # Alignment impossible (the prediction is not in the words): the words come back.
    assert squad.get_final_text("zzz", "Steve Smith's", lower) == "Steve Smith's"


def test_question_without_windows_gets_the_originals_placeholder(bert_vocab_file, tmp_path):
    """A context whose words all tokenize to nothing has no window."""
    path = tmp_path / "f.json"
    path.write_text(json.dumps({"data": [{"paragraphs": [{"context": "\u200b \u200b", "qas": [
        {"id": "q", "question": "What?", "answers": []}]}]}]}))
    tokenizer = FullTokenizer(bert_vocab_file)
    examples, _ = squad.read_squad_examples(path, False)
    features = list(squad.convert_examples_to_features(examples, tokenizer, 32, 8, 8, False))
    assert features == []
    v1 = squad.postprocess_predictions(examples, features, [], 5, 5, True)
    assert v1.predictions == {"q": "empty"}
    v2 = squad.postprocess_predictions(examples, features, [], 5, 5, True, version_2_with_negative=True)
    assert (v2.predictions, v2.null_odds) == ({"q": ""}, {"q": 1000000})


# ----------------------------------------------------------------------------
# Bad input.
# ----------------------------------------------------------------------------


def _write(tmp_path, payload):
    path = tmp_path / "bad.json"
    path.write_text(payload if isinstance(payload, str) else json.dumps(payload), encoding="utf-8")
    return path


def _paragraph(qa, context="Some context here."):
    return {"data": [{"paragraphs": [{"context": context, "qas": [qa]}]}]}


@pytest.mark.parametrize(
    "payload, is_training, message",
    [
        ('{"data": [\n  {"paragraphs": [}\n]}', False, "bad.json:2:19: not valid JSON"),
        ({"version": "1.1"}, False, 'no top-level "data" list'),
        ({"data": [{"title": "x"}]}, False, 'data[0]: missing "paragraphs"'),
        ({"data": [{"paragraphs": [{"qas": []}]}]}, False, 'data[0].paragraphs[0]: missing "context"'),
        (_paragraph({"question": "Why?"}), False, 'data[0].paragraphs[0].qas[0]: missing "id"'),
        (_paragraph({"id": "q7", "question": 3}), False, "question 'q7': \"question\" must be of type str, got int"),
        (_paragraph({"id": "q8", "question": "Why?", "answers": [{"text": "a", "answer_start": 0}]}, context=" \n\t"),
         True, "question 'q8': its context is empty, so it holds no answer to train on"),
        (_paragraph({"id": "q9", "question": "Why?"}), True, "question 'q9': missing \"answers\""),
        (_paragraph({"id": "q10", "question": "Why?", "answers": []}), True,
         "question 'q10': training needs exactly 1 answer per question, found 0"),
        (_paragraph({"id": "q11", "question": "Why?", "answers": [{"text": "here", "answer_start": 40}]}), True,
         "question 'q11': answer 'here' at answer_start 40 lies outside its context (18 characters)"),
        (_paragraph({"id": "q12", "question": "Why?", "answers": [{"text": "here", "answer_start": "5"}]}), True,
         "question 'q12': \"answer_start\" must be of type int, got str"),
        (_paragraph({"id": "q13", "question": "Why?", "answers": [{"text": "", "answer_start": 0}]}), True,
         "question 'q13': the answer text is empty"),
    ],
)
def test_bad_squad_files_name_the_question(tmp_path, payload, is_training, message):
    path = _write(tmp_path, payload)
    with pytest.raises(InputFileError) as error:
        squad.read_squad_examples(path, is_training)
    assert message in str(error.value)
    assert str(path) in str(error.value)


def test_v2_training_needs_is_impossible(tmp_path):
    path = _write(tmp_path, _paragraph({"id": "q1", "question": "Why?", "answers": [{"text": "here", "answer_start": 13}]}))
    assert squad.read_squad_examples(path, True)[0][0].orig_answer_text == "here"
    with pytest.raises(InputFileError, match="question 'q1': missing \"is_impossible\""):
        squad.read_squad_examples(path, True, version_2_with_negative=True)


def test_duplicate_question_ids_refused_for_prediction(tmp_path):
    data = {"data": [{"paragraphs": [{"context": "x y", "qas": [
        {"id": "d", "question": "a?"}, {"id": "d", "question": "b?"}]}]}]}
    with pytest.raises(InputFileError, match="question 'd': the id is used by an earlier question"):
        squad.read_squad_examples(_write(tmp_path, data), False)


def test_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"data": [\n{"paragraphs": [{"context": "caf\xe9"}]}]}')
    with pytest.raises(InputFileError, match=r"latin1.json:2: not valid UTF-8"):
        squad.read_squad_examples(path, False)


# ----------------------------------------------------------------------------
# Official evaluation.
# ----------------------------------------------------------------------------

PREDICTION_VARIANTS = [
    lambda gold: gold,  # exact
    lambda gold: "The " + gold + "!",  # same after normalisation
    lambda gold: gold.split()[0] if gold else "",  # partial
    lambda gold: "",  # empty
    lambda gold: "something else entirely",  # wrong
    lambda gold: gold + " and an extra the a",
]


def _predictions(data, seed):
    rng = np.random.default_rng(seed)
    predictions = {}
    na_probs = {}
    for article in data:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                gold = qa["answers"][0]["text"] if qa["answers"] else ""
                predictions[qa["id"]] = PREDICTION_VARIANTS[rng.integers(len(PREDICTION_VARIANTS))](gold)
                na_probs[qa["id"]] = float(np.round(rng.normal(0, 2), 1))  # rounding makes ties
    return predictions, na_probs


@pytest.mark.parametrize("seed", range(4))
def test_v1_metrics_equal_official(seed):
    data = json.loads(json.dumps(squad_dataset()))
    for article in data:  # v1.1 questions have answers; give some several
        for paragraph in article["paragraphs"]:
            paragraph["qas"] = [qa for qa in paragraph["qas"] if qa["answers"]]
            paragraph["qas"][0]["answers"].append({"text": "a cycle lane", "answer_start": 0})
    predictions, _ = _predictions(data, seed)
    del predictions[next(iter(predictions))]  # an unanswered question scores 0
    ours = squad_metrics.evaluate_v1(data, predictions)
    theirs = squad_evaluate_v1_1.evaluate(data, predictions)
    assert ours["exact_match"] == pytest.approx(100 * theirs["exact_match"], abs=1e-9)
    assert ours["f1"] == pytest.approx(100 * theirs["final_f1"], abs=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_v2_metrics_equal_official(seed):
    data = squad_dataset()
    predictions, na_probs = _predictions(data, seed)
    ours = squad_metrics.evaluate_v2(data, predictions, na_probs)
    theirs = squad_evaluate_v2_0.evaluate(data, predictions, na_probs)
    renamed = {"final_exact": "best_exact", "final_exact_thresh": "best_exact_thresh",
               "final_f1": "best_f1", "final_f1_thresh": "best_f1_thresh"}
    expected = {renamed.get(k, k): v for k, v in theirs.items() if not k.startswith("pr_")}
    assert list(ours) == list(expected)
    for key, value in expected.items():
        assert ours[key] == pytest.approx(value, abs=1e-9), key
    assert 0 < ours["HasAns_total"] < ours["total"]


def test_v2_metrics_without_na_probs():
    data = squad_dataset()
    predictions = {qa["id"]: (qa["answers"][0]["text"] if qa["answers"] else "")
                   for a in data for p in a["paragraphs"] for qa in p["qas"]}
    result = squad_metrics.evaluate_v2(data, predictions)
    assert (result["exact"], result["f1"], result["NoAns_exact"]) == (100.0, 100.0, 100.0)
    assert "best_f1" not in result


def test_normalisation_and_f1_values():
    assert squad_metrics.normalize_answer("An  Apple, the pear!") == "apple pear"
    assert squad_metrics.f1_v1("the cat sat", "a cat sat down") == pytest.approx(2 * 1.0 * (2 / 3) / (1 + 2 / 3))
    assert squad_metrics.f1_v1("", "") == 0.0  # v1.1: no common token, 0
    assert squad_metrics.f1_v2("", "") == 1  # v2.0: both unanswerable agree
