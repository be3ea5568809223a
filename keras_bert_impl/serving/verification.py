"""A staged export checked as TF Serving will load it, before its version is published.

`tf.saved_model.save` writes what Python's loader reads back; TF Serving's
C++ loader reads the same files otherwise: a graph whose variables the
SavedModel's own restore op sets, its warmup requests replayed before the
version serves. A fault between the two (a variable the restore op does not
set, an op the server's TensorFlow lacks, an input the warmup file names
wrongly) shows only there, as a version TF Serving never loads or one that
answers otherwise than the model (docs/FAULTS.md). `check_as_tf_serving`
loads the staged version that way (`session_model.SessionModel`), runs each
warmup request, and compares every floating-point answer with the model's
own signature on the same inputs: the norm of their difference against the
norm of the model's answer.

Example:
>>> line = check_as_tf_serving(staging_dir, module.signatures())  # doctest: +SKIP
>>> line  # doctest: +SKIP
'loaded as TF Serving loads it: 1 warmup request answered as the model, within a relative difference of 3.1e-07'
"""

import numpy as np

from keras_bert_impl.serving.session_model import SessionModel, SessionModelError, error_reason, warmup_requests

# A Session orders int8's and bfloat16's rounding otherwise than a TF2 function does (docs/FINDINGS.md), a few
# thousandths of an answer; a restore that leaves weights unset or mixes them up moves answers by far more.
MAX_RELATIVE_DIFFERENCE = 0.05


def check_as_tf_serving(version_dir, signatures, max_difference=MAX_RELATIVE_DIFFERENCE):
    """Loads `version_dir` as TF Serving does and checks its warmup requests' answers against `signatures`.

    Args:
        version_dir: A written (staged) version directory, with its warmup
            file.
        signatures: `{signature name: function of the inputs' tensors}`: the
            model's own signatures, as they were saved.
        max_difference: The largest `relative_difference` of an answer to
            the model's, per floating-point output (all its values as one
            vector).

    Returns:
        One line for the export's log: how many requests, the largest
        difference.

    Raises:
        SessionModelError: The version does not load (its variables cannot be
            restored), a warmup request fails, or an answer is not the
            model's (the request, signature, output and difference named).
    """
    import tensorflow as tf

    largest = 0.0
    with SessionModel(version_dir) as served:
        requests = warmup_requests(version_dir)
        for index, (name, arrays) in enumerate(requests):
            where = f"{version_dir}: warmup request {index} ({name})"
            try:
                answer = served.predict(arrays, name)
            except (SessionModelError, tf.errors.OpError) as error:
                raise SessionModelError(f"{where} fails as TF Serving runs it: {error_reason(error)}") from error
            expected = signatures[name](**{key: tf.constant(value) for key, value in arrays.items()})
            for key, value in expected.items():
                if not value.dtype.is_floating:
                    continue
                difference = relative_difference(answer[key], tf.cast(value, tf.float64).numpy())
                largest = max(largest, difference)
                if not difference <= max_difference:  # NaN too
                    raise SessionModelError(
                        f"{where}, output {key!r}: {difference:.3g} of the model's own answer apart (at most "
                        f"{max_difference} expected): TF Serving would not compute what the model does")
    agreement = "identically" if largest == 0.0 else f"within a relative difference of {largest:.2g}"
    return (f"loaded as TF Serving loads it: {len(requests)} warmup request{'s' * (len(requests) != 1)} "
            f"answered as the model, {agreement}")


def relative_difference(answer, expected):
    """`|answer - expected| / |expected|`, each array taken as one vector; 0 where both are zero, inf where only
    `expected` is.

    Example:
    >>> round(relative_difference(np.array([0.45, 0.55]), np.array([0.55, 0.45])), 3)  # a decision flipped
    0.199
    >>> relative_difference(np.zeros(2), np.zeros(2))
    0.0
    """
    answer, expected = np.asarray(answer, np.float64).ravel(), np.asarray(expected, np.float64).ravel()
    difference, scale = np.linalg.norm(answer - expected), np.linalg.norm(expected)
    if scale == 0.0:
        return 0.0 if difference == 0.0 else float("inf")
    return float(difference / scale)
