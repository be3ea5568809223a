"""int8 calibration: each product's input range fixed on the task's own texts, and int8's agreement with float32.

`calibrate` runs calibration batches through the float32 model on their
real tokens only and returns the ranges (`calibrate_input_ranges`, at a
percentile) and the smoothing (`int8_smoothing.smoothing_factors`) that
`inference.int8.Int8Kernels` takes; `agreement` measures the int8 outputs
against float32's. Measured: docs/BENCHMARKS.md, "Calibrated ranges at a
percentile".

Example:
>>> values = np.arange(1, 10001, dtype="float32") - 1000.0  # -999 .. 9000
>>> [float(v) for v in calibration_ends([values], percentile=99.9)]
[-989.0, 8990.0]
"""

import numpy as np

from keras_bert_impl.inference.encoder_layers import encoder_dense_layers, observe_dense_inputs
from keras_bert_impl.inference.int8_arithmetic import MIN_RANGE
from keras_bert_impl.inference.int8_smoothing import DEFAULT_SMOOTHING_ALPHA, smoothing_factors

# Calibrated ranges end at this percentile of the values seen (docs/BENCHMARKS.md, "int8": measured on real text).
DEFAULT_CALIBRATION_PERCENTILE = 99.999


def calibrate_input_ranges(model, batches, percentile=DEFAULT_CALIBRATION_PERCENTILE, smoothing=None):
    """Each encoder Dense layer's input range over `batches`, run through `model` in float32.

    At `percentile=100` the range runs from the smallest to the largest value
    seen. Below it, each end is the value at that percentile of all the
    values the layer read: `lo` the (100 - p)th, `hi` the p-th (with the
    values sorted, `v[k]` and `v[n - 1 - k]`, `k = floor(n (100 - p) / 100)`),
    so that a few outliers do not widen the step of every other value;
    served, values beyond an end are clipped to it. That takes two passes
    over `batches` (one to count, one to keep the `k + 1` values at each
    end), exact whatever their number.

    Args:
        model: A float32 Keras model (as for `Int8Kernels`).
        batches: An iterable of its inputs (dicts of arrays); read twice
            below 100.
        percentile: In (50, 100]; 100 keeps the smallest and largest value.
        smoothing: Optional `smoothing_factors`: a layer's range is then
            that of its input divided by its factors.

    Returns:
        Dict of layer path -> (lo, hi), lo at most 0 and hi at least 0 (as
        `quantize_input` takes them), hi widened by `MIN_RANGE`.

    Example:
    >>> values = np.arange(1, 10001, dtype="float32") - 1000.0  # -999 .. 9000
    >>> ends = calibration_ends([values], percentile=99.9)
    >>> [float(v) for v in ends]
    [-989.0, 8990.0]
    """
    if not 50.0 < percentile <= 100.0:
        raise ValueError(f"the calibration percentile must be in (50, 100], not {percentile}")
    layers = encoder_dense_layers(model)
    batches = list(batches) if percentile < 100.0 else batches
    smoothing = smoothing or {}

    def run(observe):
        def divided(path, values):
            observe(path, values / smoothing[path] if path in smoothing else values)

        observe_dense_inputs(model, batches, divided)

    counts = {layer.path: 0 for layer in layers}
    if percentile < 100.0:
        run(lambda path, values: counts.__setitem__(path, counts[path] + values.size))
    collectors = {layer.path: _EndsCollector(counts[layer.path], percentile) for layer in layers}
    run(lambda path, values: collectors[path].add(values))
    ranges = {}
    for path, collector in collectors.items():
        lo, hi = collector.ends()
        ranges[path] = (min(lo, 0.0), max(hi, 0.0) + MIN_RANGE)
    return ranges


def calibrate(model, batches, percentile=DEFAULT_CALIBRATION_PERCENTILE, smoothing_alpha=DEFAULT_SMOOTHING_ALPHA):
    """`(input_ranges, smoothing)` for `Int8Kernels`, from `batches` run through `model` on their real tokens only.

    The encoders compute real tokens only while calibrating (as a
    padding-free graph and an export run them): padding positions, whose
    outputs nobody reads, do not widen a range.

    Args:
        model: A float32 Keras model (as for `Int8Kernels`).
        batches: An iterable of its inputs (dicts of arrays, with
            `input_mask`); read up to three times.
        percentile: As for `calibrate_input_ranges`.
        smoothing_alpha: As for `smoothing_factors`; 0 or None: no
            smoothing (`smoothing` is then None).

    Returns:
        `(input_ranges, smoothing)`: `calibrate_input_ranges`' dict and
        `smoothing_factors`' (or None).

    Raises:
        ValueError: no batch (ranges of nothing would quantize every value
            to one code).
    """
    from keras_bert_impl.inference.padding_free import real_tokens_only_set_to

    batches = list(batches)
    if not batches:
        raise ValueError("no calibration inputs: give a few hundred of the task's texts, as the model takes them")
    with real_tokens_only_set_to(model, True):
        smoothing = smoothing_factors(model, batches, smoothing_alpha) if smoothing_alpha else None
        return calibrate_input_ranges(model, batches, percentile, smoothing), smoothing


def _tail(count, percentile):
    """How many of `count` sorted values lie beyond each end of the `percentile` range: floor(count (100 - p) / 100).

    In integers (the percentile to 1e-7 of a point), so that no float
    rounding moves an exact boundary.
    """
    outside = round((100.0 - percentile) * 10**7)  # (100 - p) in units of 1e-7 of a point
    return count * outside // 10**9


class _EndsCollector:
    """The `k + 1` smallest and largest values seen (`k = _tail(count, percentile)`), kept as batches come."""

    def __init__(self, count, percentile):
        self.keep = _tail(count, percentile) + 1
        self.low = np.zeros([0], np.float32)
        self.high = np.zeros([0], np.float32)

    def add(self, values):
        values = values.reshape(-1).astype(np.float32)
        low, high = np.concatenate([self.low, values]), np.concatenate([self.high, values])
        if low.size > self.keep:
            low = np.partition(low, self.keep - 1)[:self.keep]
            high = np.partition(high, high.size - self.keep)[-self.keep:]
        self.low, self.high = low, high

    def ends(self):
        """(lo, hi): the k-th smallest and k-th largest values (0-based); (0, 0) when nothing was seen."""
        if self.low.size == 0:
            return 0.0, 0.0
        return float(self.low.max()), float(self.high.min())


def calibration_ends(batches_of_values, percentile=100.0):
    """`calibrate_input_ranges`' two ends for one layer, from its input values (arrays) directly.

    Args:
        batches_of_values: A list of arrays (one a batch).
        percentile: As `calibrate_input_ranges`.

    Returns:
        (lo, hi) as floats, before the range is made to hold 0.
    """
    collector = _EndsCollector(sum(values.size for values in batches_of_values), percentile)
    for values in batches_of_values:
        collector.add(np.asarray(values))
    return collector.ends()


def agreement(reference, quantized, labels):
    """How far int8 outputs are from float32's: a dict with one `summary` line.

    Args:
        reference, quantized: float arrays [examples, ...] (logits, or
            embeddings), the same inputs through float32 and int8.
        labels: Whether the last axis holds class scores: argmax agreement;
            else the cosine of each example's flattened output.

    Returns:
        For labels: `argmax_agreement` (fraction), `max_abs_difference`;
        else `mean_cosine`, `min_cosine`; and `summary`.

    Example:
    >>> agreement(np.array([[1.0, 2.0], [3.0, 0.0]]), np.array([[1.1, 2.0], [0.0, 3.0]]), labels=True)["summary"]
    'int8 vs float32 on 2 texts: argmax agrees on 50.0%, largest |difference| 3'
    """
    reference, quantized = np.asarray(reference, np.float64), np.asarray(quantized, np.float64)
    count = len(reference)
    if labels:
        agree = float(np.mean(np.argmax(reference, -1) == np.argmax(quantized, -1)))
        largest = float(np.abs(reference - quantized).max())
        return {"argmax_agreement": agree, "max_abs_difference": largest,
                "summary": f"int8 vs float32 on {count} texts: argmax agrees on {100 * agree:.1f}%, "
                           f"largest |difference| {largest:.3g}"}
    a, b = reference.reshape(count, -1), quantized.reshape(count, -1)
    cosine = np.sum(a * b, 1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-30)
    return {"mean_cosine": float(cosine.mean()), "min_cosine": float(cosine.min()),
            "summary": f"int8 vs float32 on {count} texts: cosine mean {cosine.mean():.4f}, min {cosine.min():.4f}"}
