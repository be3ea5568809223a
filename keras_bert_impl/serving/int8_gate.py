"""Whether an int8 version agrees with float32 well enough to be published.

Agreement measured on the calibration texts says little: the ranges were
fitted to them, so one calibration line reports 100 % while the served model
turns an empty request's "neg 0.995" into "pos 0.993". An int8 export is
therefore compared with float32 on texts the calibration did not see
(`held_out_texts`: the export's warmup texts and `BUILT_IN_TEXTS`, real
sentences of many kinds and lengths, an empty request among them), warns
when it was calibrated on a handful of texts (`calibration_warning`), and
is refused below a threshold (`check_agreement`; `ExportOptions.
min_int8_agreement`, `bert-export --min_int8_agreement`, lowers it).

Example:
>>> check_agreement({"kept_answers": 0.5, "summary": "int8 vs float32 on 2 texts: argmax agrees on 50.0%"})
Traceback (most recent call last):
...
keras_bert_impl.serving.versions.ExportError: int8 vs float32 on 2 texts: argmax agrees on 50.0%: int8 keeps ...
"""

from keras_bert_impl.serving.versions import ExportError

# Below this many calibration texts the ranges fit those texts and little else.
MIN_CALIBRATION_TEXTS = 32
# Two classes whose float32 probabilities lie within this of each other are a
# tie: int8 answering either is no changed answer (an untrained head's classes
# all lie within 0.01, and flip at int8's first rounding).
TIE_PROBABILITY = 0.1
# The least agreement published by default: of a classifier, the share of
# texts whose answer int8 keeps (`kept_answers`; a well calibrated MiniLM's
# argmax agrees on 97-99 % of held-out texts, a range cut too short on 86 %:
# docs/BENCHMARKS.md); of other outputs, the mean cosine.
DEFAULT_MIN_AGREEMENT = {"kept_answers": 0.95, "mean_cosine": 0.98}

# Texts no calibration file holds: requests of every length and kind a
# server meets (an empty one, a word, questions, reviews, news, code, other
# scripts), written for this check.
BUILT_IN_TEXTS = (
    "",
    "ok",
    "Thanks!",
    "Where is the nearest train station?",
    "The film was far too long, but the last half hour made up for it.",
    "I would not recommend this hotel to anyone: the rooms were dirty and the staff rude.",
    "Absolutely loved it, will buy again.",
    "The central bank left interest rates unchanged on Thursday, citing slowing inflation.",
    "Heavy rain is expected across the north of the country over the weekend.",
    "She scored twice in the second half as her team came back from two goals down.",
    "How do I reset my password if I no longer have access to my email account?",
    "The package arrived two weeks late and the box was crushed.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "def add(a, b): return a + b",
    "Meeting moved to 3pm tomorrow, room 204.",
    "not bad at all",
    "This is the worst customer service I have ever experienced.",
    "The museum reopens next month after a two-year renovation of its east wing.",
    "Can you recommend a good book about the history of mathematics?",
    "The battery lasts all day and the screen is bright enough to read in sunlight.",
    "Le service était lent mais la nourriture excellente.",
    "Das Wetter ist heute schön.",
    "東京は日本の首都です。",
    "After years of delays, the bridge finally opened to traffic on Monday morning.",
    "Mix the flour and butter, then add the eggs one at a time.",
    "The sequel is louder, dumber and somehow less fun than the original.",
    "Researchers found no link between the supplement and improved memory in older adults.",
    "Why does my code crash when the list is empty?",
    "A quiet, moving portrait of a family falling apart.",
    "Shares fell 4% after the company cut its forecast for the year.",
    "I waited an hour on hold and then the call dropped.",
    "The committee will publish its findings in the spring.",
    "Great value for the price, though the instructions were confusing.",
    "Is it safe to drink tap water in this city?",
    "The plot twists are predictable, yet the acting keeps you watching.",
    "Volunteers planted more than two thousand trees along the river bank.",
    "NEVER AGAIN.",
    "The update fixed the crash but the app is still slow to start.",
    "He has lived in the same small village by the sea for eighty years.",
    "What time does the pharmacy close on Sundays?",
)


def calibration_text_tuple(texts):
    """`calibration_texts` as a tuple of strings: one string is one text, as `predict` takes it.

    Raises:
        ExportError: an item that is not a string, named by its index.

    Example:
    >>> calibration_text_tuple("good film")
    ('good film',)
    """
    if texts is None:
        return None
    texts = (texts,) if isinstance(texts, str) else tuple(texts)
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise ExportError(f"calibration_texts[{index}] is {text!r}, not a string: each is one text of the task")
    return texts


def held_out_texts(calibration_texts, warmup_texts):
    """The texts int8 is compared with float32 on: the warmup texts and `BUILT_IN_TEXTS`, less any the
    calibration saw (and repeats).

    Example:
    >>> texts = held_out_texts(["ok", "Thanks!"], ["A warmup text."])
    >>> texts[:2], "ok" in texts
    (['A warmup text.', ''], False)
    """
    seen = set(calibration_texts or ())
    texts = []
    for text in (*warmup_texts, *BUILT_IN_TEXTS):
        if text not in seen:
            seen.add(text)
            texts.append(text)
    return texts


def calibration_warning(calibration_texts):
    """A line to log when the calibration set is tiny, else None.

    Example:
    >>> calibration_warning(["good film"])[:60]
    'int8 calibrated on 1 text: ranges fitted to so few texts cli'
    """
    count = len(calibration_texts or ())
    if not calibration_texts or count >= MIN_CALIBRATION_TEXTS:
        return None
    return (f"int8 calibrated on {count} text{'s' if count != 1 else ''}: ranges fitted to so few texts clip other "
            f"requests; give at least {MIN_CALIBRATION_TEXTS} (a few hundred) of the task's texts")


def kept_answers(reference_logits, quantized_logits):
    """`{"kept_answers": fraction}`: the texts whose int8 class float32 rates within `TIE_PROBABILITY` of its own.

    Args:
        reference_logits, quantized_logits: [texts, classes], float32's and int8's.

    Example:
    >>> kept_answers([[0.0, 0.01], [5.0, 0.0]], [[0.01, 0.0], [0.0, 5.0]])
    {'kept_answers': 0.5}
    """
    import numpy as np

    logits = np.asarray(reference_logits, np.float64)
    probabilities = np.exp(logits - logits.max(-1, keepdims=True))
    probabilities /= probabilities.sum(-1, keepdims=True)
    chosen = probabilities[np.arange(len(logits)), np.argmax(np.asarray(quantized_logits), -1)]
    return {"kept_answers": float(np.mean(probabilities.max(-1) - chosen <= TIE_PROBABILITY))}


def check_agreement(report, min_agreement=None):
    """Refuses an int8 version that agrees with float32 less than `min_agreement`.

    Args:
        report: `int8.agreement`'s dict on held-out texts, with `kept_answers`
            for a classifier; else its `mean_cosine` is compared.
        min_agreement: The least fraction published; None:
            `DEFAULT_MIN_AGREEMENT` of the report's measure; 0: any.

    Raises:
        ExportError: naming the agreement, the threshold and how to lower it.
    """
    measure = "kept_answers" if "kept_answers" in report else "mean_cosine"
    required = DEFAULT_MIN_AGREEMENT[measure] if min_agreement is None else min_agreement
    if report[measure] < required:
        what = ("int8 keeps float32's answer (or one it rates within 0.1) on" if measure == "kept_answers"
                else "the mean cosine is")
        raise ExportError(
            f"{report['summary']}: {what} {100 * report[measure]:.1f}%, below the {100 * required:g}% required on "
            "texts the calibration did not see: the version is not published (calibrate on more of the task's "
            "texts, or at a percentile nearer 100; --min_int8_agreement lowers the threshold)")
