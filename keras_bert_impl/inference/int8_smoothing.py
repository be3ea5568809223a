"""SmoothQuant's per-input-channel smoothing of the int8 products (Xiao et al. 2023): `x W = (x / s)(diag(s) W)`.

`smoothing_factors` measures each input's channels on calibration batches;
`inference.int8.Int8Kernels` folds `1 / s` into the quantization's
multiplier and `s` into the int8 kernel's rows (`smoothed`). Measured:
docs/BENCHMARKS.md, "Smoothed activations".

Example:
>>> smoothed(np.ones((2, 2), np.float32), [2.0, 0.5]).tolist()
[[2.0, 2.0], [0.5, 0.5]]
"""

import numpy as np

from keras_bert_impl.inference.encoder_layers import (
    encoder_dense_layers,
    input_groups,
    observe_dense_inputs,
    requantized_pairs,
)

# How much of each input channel's spread moves into the kernel's row (0: none; docs/BENCHMARKS.md, "Smoothed
# activations": measured on real text).
DEFAULT_SMOOTHING_ALPHA = 0.7
# Channel maxima below this count as this (a channel that was always 0, a kernel row of zeros).
_MIN_CHANNEL_MAX = 1e-5
# An input channel's observed maximum counts as at least this fraction of the median channel's when smoothing: a
# channel (nearly) silent on every calibration text would otherwise get a tiny factor, and any value it takes when
# serving would be multiplied past the calibrated range and clipped. Below the quietest channel of the measured
# models (0.245 of its median; docs/BENCHMARKS.md, "Smoothed activations"): it leaves their factors as they were.
SMOOTHING_FLOOR = 0.2


def smoothed(kernel, channel_scales):
    """`diag(channel_scales) kernel` (each input row times its scale), or `kernel` without scales."""
    return kernel if channel_scales is None else kernel * np.asarray(channel_scales, np.float32)[:, None]


def smoothing_scales(channel_max, kernel, alpha=DEFAULT_SMOOTHING_ALPHA):
    """SmoothQuant's per-input-channel scales: `s[c] = channel_max[c]^alpha / max_j |kernel[c, j]|^(1 - alpha)`.

    Dividing the input by `s` and multiplying the kernel's rows by it leaves
    the product as it is and evens out the channels' ranges: alpha 1 moves
    all of each channel's spread into the kernel, 0 none of it (then `s`
    only evens out the kernel's rows).

    Args:
        channel_max: float [in]: the largest |value| each input channel took.
        kernel: float [in, out] (the kernels that read the input, side by side).
        alpha: In [0, 1].

    Returns:
        float32 [in], positive. A channel's maximum counts as at least
        `SMOOTHING_FLOOR` times the median channel's (one silent on every
        calibration text is scaled as a quiet one, not divided by ~0), and
        maxima below `_MIN_CHANNEL_MAX` count as it.

    Example (the third channel was silent: its maximum counts as a fifth
    of the median's, 5):
    >>> channel_max = np.array([16.0, 5.0, 0.0])
    >>> smoothing_scales(channel_max, np.array([[1.0, -0.5], [5.0, 0.0], [1.0, 1.0]]), alpha=0.5).tolist()
    [4.0, 1.0, 1.0]
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"the smoothing alpha must be in [0, 1], not {alpha}")
    activation = np.asarray(channel_max, np.float64)
    activation = np.maximum(activation, max(SMOOTHING_FLOOR * float(np.median(activation)), _MIN_CHANNEL_MAX))
    weight = np.maximum(np.abs(np.asarray(kernel, np.float64)).max(axis=1), _MIN_CHANNEL_MAX)
    return (activation ** alpha / weight ** (1.0 - alpha)).astype(np.float32)


def smoothing_factors(model, batches, alpha=DEFAULT_SMOOTHING_ALPHA):
    """`smoothing_scales` of each input `Int8Kernels` quantizes (`input_groups`), from `batches` run through `model`.

    Args:
        model: A float32 Keras model (as for `Int8Kernels`).
        batches: An iterable of its inputs (dicts of arrays), read once.
        alpha: As for `smoothing_scales`.

    Returns:
        Dict of layer path -> float32 [in]; the layers of a group share
        one array, from their kernels side by side.
    """
    layers = {layer.path: layer for layer in encoder_dense_layers(model)}
    groups = input_groups(model)
    channel_max = {group[0]: 0.0 for group in groups}
    first = {path: group[0] for group in groups for path in group}

    def observe(path, values):
        if first.get(path) == path:  # each input once
            channel_max[path] = np.maximum(channel_max[path], np.abs(values.reshape(-1, values.shape[-1])).max(0))

    observe_dense_inputs(model, batches, observe)
    factors = {}
    for group in groups:
        kernel = np.concatenate([layers[path].kernel.numpy() for path in group], axis=1)
        scales = smoothing_scales(np.broadcast_to(channel_max[group[0]], kernel.shape[:1]), kernel, alpha)
        factors.update({path: scales for path in group})
    return factors


def checked_smoothing(model, smoothing, input_ranges):
    """`smoothing` as float32 arrays by path, checked as `Int8Kernels` takes it; {} for None."""
    if not smoothing:
        return {}
    if input_ranges is None:
        raise ValueError("smoothing is for calibrated ranges: give input_ranges (from the same smoothing) too")
    smoothing = {path: np.asarray(scales, np.float32) for path, scales in smoothing.items()}
    requantized = set(requantized_pairs(model).values()) & set(smoothing)
    if requantized:
        raise ValueError(f"{sorted(requantized)[0]}: its input comes quantized from the intermediate product "
                         "and cannot be smoothed")
    for group in input_groups(model):
        given = [smoothing.get(path) for path in group]
        if any(scales is None for scales in given) != all(scales is None for scales in given) or (
                given[0] is not None and any(not np.array_equal(given[0], scales) for scales in given[1:])):
            raise ValueError(f"{', '.join(group)} read one input: give them the same smoothing")
    return smoothing
