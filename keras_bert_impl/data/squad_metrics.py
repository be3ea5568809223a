"""The official SQuAD evaluation: exact match and F1, v1.1 and v2.0.

Written from the definitions of the official scripts (`evaluate-v1.1.py`,
`evaluate-v2.0.py`): answers are compared after lower-casing and removing
punctuation, the articles a/an/the and extra whitespace; F1 is over the bag
of remaining words; a question scores the maximum over its gold answers.
v2.0 adds unanswerable questions (gold answer ""), scores split into
`HasAns_*`/`NoAns_*`, and, given no-answer probabilities (our
`null_odds.json`), the best threshold on them.
"""

import collections
import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text):
    """Lower case, drop ASCII punctuation and the articles, squeeze whitespace.

    Example:
    >>> normalize_answer("The  Eiffel-Tower!")
    'eiffeltower'
    """
    text = "".join(char for char in text.lower() if char not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _bag_f1(prediction_tokens, gold_tokens):
    common = collections.Counter(prediction_tokens) & collections.Counter(gold_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(prediction_tokens)
    recall = num_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _questions(dataset):
    for article in dataset:
        for paragraph in article["paragraphs"]:
            yield from paragraph["qas"]


# ----------------------------------------------------------------------------
# v1.1
# ----------------------------------------------------------------------------


def exact_match_v1(prediction, gold):
    """1.0 if the normalised texts are equal (v1.1's `exact_match_score`)."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_v1(prediction, gold):
    """Word-bag F1 of the normalised texts (v1.1's `f1_score`: 0 if either is empty)."""
    return _bag_f1(normalize_answer(prediction).split(), normalize_answer(gold).split())


def evaluate_v1(dataset, predictions):
    """The official v1.1 scores.

    Args:
        dataset: The `data` list of the SQuAD file (with `answers`).
        predictions: Question id -> predicted text. A question without a
            prediction scores 0 (as the official script).

    Returns:
        `{"exact_match": ..., "f1": ...}` in percent.
    """
    exact_match = f1 = 0.0
    total = 0
    for qa in _questions(dataset):
        total += 1
        if qa["id"] not in predictions:
            continue
        golds = [answer["text"] for answer in qa["answers"]]
        prediction = predictions[qa["id"]]
        exact_match += max(exact_match_v1(prediction, gold) for gold in golds)
        f1 += max(f1_v1(prediction, gold) for gold in golds)
    return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total}


# ----------------------------------------------------------------------------
# v2.0
# ----------------------------------------------------------------------------


def exact_v2(gold, prediction):
    """v2.0's `compute_exact`: 1 if the normalised texts are equal."""
    return int(normalize_answer(gold) == normalize_answer(prediction))


def f1_v2(gold, prediction):
    """v2.0's `compute_f1`: as v1.1, except that two empty answers agree (1)."""
    gold_tokens = normalize_answer(gold).split()
    prediction_tokens = normalize_answer(prediction).split()
    if not gold_tokens or not prediction_tokens:
        return int(gold_tokens == prediction_tokens)
    return _bag_f1(prediction_tokens, gold_tokens)


def raw_scores_v2(dataset, predictions):
    """Per-question exact and F1 before any no-answer threshold.

    The gold answers are those that normalise to something non-empty, or
    `[""]` when there are none (an unanswerable question). Questions
    without a prediction are left out, as the official script does.

    Returns:
        `(exact_scores, f1_scores, has_answer)`: dicts keyed by question id;
        `has_answer` covers every question of the dataset.
    """
    exact_scores = {}
    f1_scores = {}
    has_answer = {}
    for qa in _questions(dataset):
        qid = qa["id"]
        has_answer[qid] = bool(qa["answers"])
        golds = [answer["text"] for answer in qa["answers"] if normalize_answer(answer["text"])] or [""]
        if qid not in predictions:
            continue
        exact_scores[qid] = max(exact_v2(gold, predictions[qid]) for gold in golds)
        f1_scores[qid] = max(f1_v2(gold, predictions[qid]) for gold in golds)
    return exact_scores, f1_scores, has_answer


def apply_no_answer_threshold(scores, na_probs, has_answer, na_prob_thresh):
    """Questions whose no-answer probability exceeds the threshold count as
    predicted unanswerable: 1 if they are, 0 if not."""
    return {
        qid: float(not has_answer[qid]) if na_probs[qid] > na_prob_thresh else score
        for qid, score in scores.items()
    }


def _percentages(exact_scores, f1_scores, qids):
    return collections.OrderedDict(
        exact=100.0 * sum(exact_scores[q] for q in qids) / len(qids),
        f1=100.0 * sum(f1_scores[q] for q in qids) / len(qids),
        total=len(qids),
    )


def find_best_threshold(predictions, scores, na_probs, has_answer):
    """The no-answer threshold that maximises the score, and that score.

    Starting from "every question predicted unanswerable" (score: the number
    of unanswerable ones), questions are switched to their prediction in
    increasing order of `na_probs`; the best running score wins.

    Returns:
        `(best_score_percent, threshold)`.
    """
    score = best_score = sum(1 for answerable in has_answer.values() if not answerable)
    best_threshold = 0.0
    for qid in sorted(na_probs, key=na_probs.get):
        if qid not in scores:
            continue
        if has_answer[qid]:
            score += scores[qid]
        elif predictions[qid]:
            score -= 1
        if score > best_score:
            best_score = score
            best_threshold = na_probs[qid]
    return 100.0 * best_score / len(scores), best_threshold


def evaluate_v2(dataset, predictions, na_probs=None, na_prob_thresh=1.0):
    """The official v2.0 scores (`evaluate-v2.0.py`, with `--na-prob-file`).

    Args:
        dataset: The `data` list of the SQuAD v2.0 file.
        predictions: Question id -> predicted text ("" for no answer).
        na_probs: Question id -> no-answer score (`null_odds.json`), or None
            (all 0, and no best-threshold search).
        na_prob_thresh: The script's `--na-prob-thresh` (default 1.0).

    Returns:
        Ordered dict: `exact`, `f1`, `total`, then `HasAns_*` and `NoAns_*`
        (when there are such questions), then `best_exact`,
        `best_exact_thresh`, `best_f1`, `best_f1_thresh` (with `na_probs`).
        Scores in percent, over the questions that have a prediction.
    """
    exact_raw, f1_raw, has_answer = raw_scores_v2(dataset, predictions)
    given_na_probs = na_probs is not None
    if not given_na_probs:
        na_probs = {qid: 0.0 for qid in predictions}
    exact = apply_no_answer_threshold(exact_raw, na_probs, has_answer, na_prob_thresh)
    f1 = apply_no_answer_threshold(f1_raw, na_probs, has_answer, na_prob_thresh)
    result = _percentages(exact, f1, list(exact))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [qid for qid in exact if has_answer[qid] == wanted]
        if qids:
            for key, value in _percentages(exact, f1, qids).items():
                result[f"{prefix}_{key}"] = value
    if given_na_probs:
        result["best_exact"], result["best_exact_thresh"] = find_best_threshold(predictions, exact_raw, na_probs, has_answer)
        result["best_f1"], result["best_f1_thresh"] = find_best_threshold(predictions, f1_raw, na_probs, has_answer)
    return result
