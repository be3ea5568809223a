"""What this machine's CPU is, and the precision a model is served in on it.

bfloat16 pays on a CPU only where it has instructions for it: TensorFlow's
oneDNN multiplies bfloat16 with Intel AMX (`amx_bf16`, Sapphire Rapids and
later) several times faster than float32, and with AVX-512 bf16
(`avx512_bf16`: Cooper Lake, AMD Zen 4 and later) about twice as fast
(measured on a Zen 4 EPYC: 1.9x for BERT-base's products, 1.5x an
export's batch throughput and 8-12 % off its single-request p50,
docs/BENCHMARKS.md); without either, every bfloat16 product is converted
and computed in float32, slower than float32 itself. Both are reached only
through oneDNN's kernels, which TensorFlow runs only with its oneDNN graph
rewrites on (its default on such CPUs); with them off
(`TF_ENABLE_ONEDNN_OPTS=0`) a bfloat16 product is Eigen's contraction,
which uses neither. So an export defaults to bfloat16 only on a CPU with
`amx_bf16` or `avx512_bf16` and the rewrites on.

Example:
>>> flags = frozenset({"avx2", "avx512f", "avx512_bf16"})
>>> default_precision(flags, onednn_rewrites=True), default_precision(flags, onednn_rewrites=False)
('bfloat16', 'float32')
>>> resolve_precision("auto", frozenset({"avx2"})), DTYPE_POLICIES["bfloat16"]
('float32', 'mixed_bfloat16')
>>> xla_pays_for_inference("bfloat16", accelerator=False, onednn_rewrites=True)
False
"""

import os
import platform

# Serving precision -> the Keras dtype policy a model is built with: bfloat16
# computes in bfloat16 and keeps float32 variables, so a checkpoint loads as
# it is (an export then holds its weights but the LayerNorms' rounded to bfloat16:
# `models.precision`).
DTYPE_POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16"}
PRECISION_CHOICES = ("auto",) + tuple(DTYPE_POLICIES)
# The instruction sets that decide a precision's speed, in the order printed.
MATRIX_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
# The CPU flags of the bf16 instructions that oneDNN multiplies bfloat16 with.
BF16_SERVING_FLAGS = ("amx_bf16", "avx512_bf16")
CPUINFO = "/proc/cpuinfo"
ONEDNN_ENV = "TF_ENABLE_ONEDNN_OPTS"


def read_cpuinfo(path=CPUINFO):
    """`(model name, flags)` of the first CPU in `path` (Linux `/proc/cpuinfo`).

    Elsewhere (no such file) the name is `platform.processor()` and the flags
    are empty, which serves float32.

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


def onednn_description():
    """One line for a benchmark header: the oneDNN rewrites' state and where it came from.

    Example: "oneDNN graph rewrites off (TensorFlow's default for this CPU)".
    """
    state = {True: "on", False: "off", None: "unknown"}[onednn_graph_rewrites()]
    setting = os.environ.get(ONEDNN_ENV)
    source = f"{ONEDNN_ENV}={setting}" if setting is not None else "TensorFlow's default for this CPU"
    return f"oneDNN graph rewrites {state} ({source})"


def default_precision(flags=None, onednn_rewrites=None):
    """The serving precision for a CPU with `flags`: bfloat16 where its bf16 instructions run it, else float32.

    Args:
        flags: CPU flag names; default this machine's.
        onednn_rewrites: Whether TensorFlow's oneDNN graph rewrites are on;
            default this process's state (`onednn_graph_rewrites`). Where a
            build does not say, the flags decide alone.
    """
    if flags is None:
        flags = read_cpuinfo()[1]
    if not any(flag in flags for flag in BF16_SERVING_FLAGS):
        return "float32"
    if onednn_rewrites is None:
        onednn_rewrites = onednn_graph_rewrites()
    return "float32" if onednn_rewrites is False else "bfloat16"


def resolve_precision(precision, flags=None, onednn_rewrites=None):
    """`precision` ("auto", "float32" or "bfloat16") as "float32" or "bfloat16".

    `flags` and `onednn_rewrites` decide "auto" (`default_precision`).

    Raises:
        ValueError: any other name.
    """
    if precision == "auto":
        return default_precision(flags, onednn_rewrites)
    if precision not in DTYPE_POLICIES:
        raise ValueError(f"precision {precision!r} is not one of {', '.join(PRECISION_CHOICES)}")
    return precision


def accelerator_visible():
    """Whether TensorFlow sees a GPU or TPU in this process (else the CPU computes)."""
    import tensorflow as tf

    return bool(tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))


def xla_pays_for_inference(compute_dtype, accelerator=None, onednn_rewrites=None):
    """Whether a BERT forward pass for inference should be compiled with XLA here.

    On a GPU or TPU, yes. On a CPU XLA compiles its own products, which use
    neither oneDNN's kernels nor bf16 instructions: measured on BERT-base
    (docs/BENCHMARKS.md), in bfloat16 it ran at 0.48-0.56x the plain graph on a
    Zen 4 EPYC (AVX-512 bf16, rewrites on), and in float32 it gained 10 %
    only where the oneDNN rewrites are off (AVX2), and nothing with them on.

    Args:
        compute_dtype: What the model computes in ("float32", "bfloat16", ...).
        accelerator: Whether a GPU or TPU is visible; default: asks TensorFlow.
        onednn_rewrites: `onednn_graph_rewrites()` by default.

    Returns:
        True on an accelerator, or on a CPU for a float32 model with the
        oneDNN rewrites off; else False (the plain graph).
    """
    if accelerator is None:
        accelerator = accelerator_visible()
    if accelerator:
        return True
    if onednn_rewrites is None:
        onednn_rewrites = onednn_graph_rewrites()
    return compute_dtype == "float32" and onednn_rewrites is False
