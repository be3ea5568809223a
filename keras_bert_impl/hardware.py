"""What this machine is: its CPU's name, flags and vendor, TensorFlow's oneDNN rewrites, a GPU or TPU.

Facts only, read from the machine (`/proc/cpuinfo`, TensorFlow); the rules
that turn them into inference choices (the serving precision, XLA,
padding-free rows, constant kernels) are `inference.plan`'s. Every
benchmark prints `cpu_description` and `onednn_description` in its header.

Example:
>>> "logical cores" in cpu_description()
True
"""

import os
import platform

# The instruction sets that decide a precision's speed, in the order printed.
MATRIX_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
CPUINFO = "/proc/cpuinfo"
ONEDNN_ENV = "TF_ENABLE_ONEDNN_OPTS"
FROZEN_WEIGHTS_ENV = "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"


def read_cpuinfo(path=CPUINFO):
    """`(model name, flags)` of the first CPU in `path` (Linux `/proc/cpuinfo`).

    Elsewhere (no such file) the name is `platform.processor()` and the flags
    are empty (no matrix instruction set).

    Returns:
        A string and a frozenset of flag names.
    """
    fallback = platform.processor() or platform.machine()
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            lines = file.read().splitlines()
    except OSError:
        return fallback, frozenset()
    name, flags = None, None
    for line in lines:  # One block per logical CPU: the first is taken.
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and name is None:
            name = value.strip()
        elif key == "flags" and flags is None:
            flags = frozenset(value.split())
    return name or fallback, flags or frozenset()


def read_cpu_vendor(path=CPUINFO):
    """The `vendor_id` of the first CPU in `path` ("GenuineIntel", "AuthenticAMD"), or "" where not known."""
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            for line in file:
                key, _, value = line.partition(":")
                if key.strip() == "vendor_id":
                    return value.strip()
    except OSError:
        pass
    return ""


def cpu_description(path=CPUINFO):
    """One line naming the CPU, its matrix instruction sets and core count.

    Every benchmark prints it in its header: numbers are compared only
    within one run on one machine.

    Example: "AMD EPYC (avx2; no avx512f, avx512_bf16, amx_bf16), 2 logical cores".
    """
    name, flags = read_cpuinfo(path)
    present = [flag for flag in MATRIX_FLAGS if flag in flags]
    absent = [flag for flag in MATRIX_FLAGS if flag not in flags]
    isa = "; ".join(part for part in (", ".join(present), absent and "no " + ", ".join(absent)) if part)
    return f"{name} ({isa}), {os.cpu_count()} logical cores"


def onednn_graph_rewrites():
    """Whether TensorFlow rewrites graphs for oneDNN in this process.

    With the rewrites, matrix products, softmax and transposes run as
    oneDNN (`_Mkl*`) kernels, with bias adds fused into the products.
    TensorFlow turns them on by default only on CPUs with AVX-512 VNNI,
    AVX-512 bf16, AVX-VNNI or AMX; `TF_ENABLE_ONEDNN_OPTS=1` (or `0`), set
    before TensorFlow loads, overrides that, in TF Serving as in Python.

    Returns:
        True or False; None where this TensorFlow build does not say.
    """
    try:
        from tensorflow.python.util import _pywrap_util_port
    except ImportError:  # Not in every build; the function is TensorFlow's own test helper.
        return None
    return bool(_pywrap_util_port.IsMklEnabled())


def onednn_assumes_frozen_weights(environ=None):
    """Whether TensorFlow's oneDNN products in this process pack each weight once, on their first call, and keep it.

    `TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1` (TensorFlow reads it once, as a
    boolean: `1` or `true`) tells every oneDNN product that its second
    operand never changes, whatever op it comes from: right in a server
    whose products all take weights, and it then packs variables once as it
    packs constants (docs/BENCHMARKS.md, "Memory that holds"); wrong in
    training, whose products would go on computing with the first step's
    weights. It acts only with the oneDNN rewrites on.

    Args:
        environ: The environment read; default this process's.

    Example:
    >>> onednn_assumes_frozen_weights({FROZEN_WEIGHTS_ENV: "0"})
    False
    """
    value = (os.environ if environ is None else environ).get(FROZEN_WEIGHTS_ENV, "")
    return value.strip().lower() in ("1", "true") and onednn_graph_rewrites() is True


def onednn_description():
    """One line for a benchmark header: the oneDNN rewrites' state and where it came from.

    Example: "oneDNN graph rewrites off (TensorFlow's default for this CPU)".
    """
    state = {True: "on", False: "off", None: "unknown"}[onednn_graph_rewrites()]
    setting = os.environ.get(ONEDNN_ENV)
    source = f"{ONEDNN_ENV}={setting}" if setting is not None else "TensorFlow's default for this CPU"
    return f"oneDNN graph rewrites {state} ({source})"


def accelerator_visible():
    """Whether TensorFlow sees a GPU or TPU in this process (else the CPU computes)."""
    import tensorflow as tf

    return bool(tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))
