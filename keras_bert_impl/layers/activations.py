"""The activations a `bert_config.json` can name, resolved to functions.

The original `modeling.py` defines `gelu` as the tanh approximation
`0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`; HF-trained weights use the
exact erf form, which we call `gelu_exact`. Keeping the two names distinct is
what lets converted checkpoints reproduce the numbers they were trained with.
"""

import math

import keras
from keras import ops

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu(x):
    """The original BERT GELU (tanh approximation).

    The original writes it `x * cdf` with `cdf = 0.5 (1 + tanh(...))`; this
    is Keras' (`tf.nn.gelu`'s) arrangement, `0.5 x (1 + tanh(...))`. The two
    round to the same bits wherever they run as separate ops (a product by
    0.5 is exact), and only this one is fused into the preceding MatMul by
    TensorFlow's oneDNN rewrites (on by default on CPUs with AVX-512 VNNI,
    bf16 or AMX); what that gains: docs/BENCHMARKS.md
    (`benchmarks/bench_gelu_fusion.py`).

    Args:
        x: A float tensor, any shape.

    Returns:
        A tensor of `x`'s shape and dtype.

    Example:
    >>> x = keras.ops.convert_to_tensor([-1.0, 0.0, 1.0])
    >>> cdf = 0.5 * (1.0 + keras.ops.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * keras.ops.power(x, 3))))
    >>> [round(float(v), 4) for v in gelu(x)], bool(keras.ops.all(gelu(x) == x * cdf))
    ([-0.1588, 0.0, 0.8412], True)
    """
    return ops.gelu(x, approximate=True)


def gelu_exact(x):
    """GELU with the exact Gaussian CDF: `0.5 x (1 + erf(x / sqrt(2)))`.

    The form HF-trained weights use; `gelu` is the original's tanh
    approximation of it.

    Args:
        x: A float tensor, any shape.

    Returns:
        A tensor of `x`'s shape and dtype.

    Example:
    >>> x = keras.ops.convert_to_tensor([-1.0, 0.0, 1.0])
    >>> [round(float(v), 4) for v in gelu_exact(x)]
    [-0.1587, 0.0, 0.8413]
    >>> round(float(gelu(keras.ops.convert_to_tensor(1.0))), 4)
    0.8412
    """
    return 0.5 * x * (1.0 + ops.erf(x / math.sqrt(2.0)))


_ACTIVATIONS = {
    "gelu": gelu,
    "gelu_exact": gelu_exact,
    "gelu_new": gelu,  # Hugging Face's name for the same tanh form (ALBERT's configs)
    "relu": keras.activations.relu,
    "tanh": keras.activations.tanh,
    "linear": None,
}


def get_activation(name):
    """Maps an activation name from `bert_config.json` to a callable (or None).

    Args:
        name: One of `gelu`, `gelu_exact`, `gelu_new` (= `gelu`), `relu`,
            `tanh`, `linear`.

    Returns:
        The activation function, or None for `linear` (a `Dense` layer's
        "no activation").

    Raises:
        ValueError: for an unknown name.

    Example:
    >>> get_activation("gelu_exact") is gelu_exact, get_activation("linear")
    (True, None)
    >>> get_activation("swish")
    Traceback (most recent call last):
    ...
    ValueError: unknown activation 'swish'; known: gelu, gelu_exact, gelu_new, relu, tanh, linear
    """
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ValueError(
            f"unknown activation {name!r}; known: {', '.join(_ACTIVATIONS)}"
        ) from None
