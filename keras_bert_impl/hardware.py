"""What this machine's CPU is, and the precision a model is served in on it.

bfloat16 pays on a CPU only where it has instructions for it that outrun
float32's: TensorFlow's oneDNN multiplies bfloat16 with Intel AMX
(`amx_bf16`, Sapphire Rapids and later) several times faster than float32
(measured on a 2-core Xeon with AMX: 5.3x for BERT-base's products), and
with AVX-512 bf16 on AMD (`avx512_bf16`, Zen 4 and later) about twice as
fast (on a Zen 4 EPYC: 1.9x for the products, 1.5x an export's batch
throughput). On Intel, AVX-512 bf16 without AMX (Cooper Lake, or a virtual
machine that hides AMX) issues its bf16 dot products at the rate of its
float32 FMAs, and bfloat16 ran at 0.6x float32 (the products, on such a
Xeon); without either, every bfloat16 product is converted and computed
in float32, slower still (docs/BENCHMARKS.md). Both are reached only
through oneDNN's kernels, which TensorFlow runs only with its oneDNN graph
rewrites on (its default on such CPUs); with them off
(`TF_ENABLE_ONEDNN_OPTS=0`) a bfloat16 product is Eigen's contraction,
which uses neither. So an export defaults to bfloat16 only on a CPU with
`amx_bf16`, or `avx512_bf16` from AMD, and the rewrites on.

Example:
>>> flags = frozenset({"avx2", "avx512f", "avx512_bf16"})
>>> default_precision(flags, onednn_rewrites=True, vendor="AuthenticAMD")
'bfloat16'
>>> default_precision(flags, onednn_rewrites=True, vendor="GenuineIntel")
'float32'
>>> default_precision(flags | {"amx_bf16"}, onednn_rewrites=False, vendor="GenuineIntel")
'float32'
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
# The CPU flag of the bf16 instructions that beat float32 on any vendor's CPU
# (AMX), and the flag and vendors where AVX-512 bf16 does (AMD's, measured on Zen 4).
AMX_FLAG = "amx_bf16"
AVX512_BF16_FLAG = "avx512_bf16"
AVX512_BF16_VENDORS = ("AuthenticAMD",)
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


def onednn_description():
    """One line for a benchmark header: the oneDNN rewrites' state and where it came from.

    Example: "oneDNN graph rewrites off (TensorFlow's default for this CPU)".
    """
    state = {True: "on", False: "off", None: "unknown"}[onednn_graph_rewrites()]
    setting = os.environ.get(ONEDNN_ENV)
    source = f"{ONEDNN_ENV}={setting}" if setting is not None else "TensorFlow's default for this CPU"
    return f"oneDNN graph rewrites {state} ({source})"


def default_precision(flags=None, onednn_rewrites=None, vendor=None):
    """The serving precision for a CPU with `flags`: bfloat16 where its bf16 instructions outrun float32, else float32.

    Args:
        flags: CPU flag names; default this machine's.
        onednn_rewrites: Whether TensorFlow's oneDNN graph rewrites are on;
            default this process's state (`onednn_graph_rewrites`). Where a
            build does not say, the flags decide alone.
        vendor: The CPU's `vendor_id`; default this machine's. It decides
            for `avx512_bf16` without `amx_bf16` (see the module's notes).
    """
    if flags is None:
        flags = read_cpuinfo()[1]
    if vendor is None:
        vendor = read_cpu_vendor()
    fast_bf16 = AMX_FLAG in flags or (AVX512_BF16_FLAG in flags and vendor in AVX512_BF16_VENDORS)
    if not fast_bf16:
        return "float32"
    if onednn_rewrites is None:
        onednn_rewrites = onednn_graph_rewrites()
    return "float32" if onednn_rewrites is False else "bfloat16"


def resolve_precision(precision, flags=None, onednn_rewrites=None, vendor=None):
    """`precision` ("auto", "float32" or "bfloat16") as "float32" or "bfloat16".

    `flags`, `onednn_rewrites` and `vendor` decide "auto" (`default_precision`).

    Raises:
        ValueError: any other name.
    """
    if precision == "auto":
        return default_precision(flags, onednn_rewrites, vendor)
    if precision not in DTYPE_POLICIES:
        raise ValueError(f"precision {precision!r} is not one of {', '.join(PRECISION_CHOICES)}")
    return precision


def accelerator_visible():
    """Whether TensorFlow sees a GPU or TPU in this process (else the CPU computes)."""
    import tensorflow as tf

    return bool(tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))


def onednn_runs_traced_graph():
    """Whether the graph being traced now will run on TensorFlow's oneDNN CPU kernels.

    True while a `tf.function` is being traced (grappler and the oneDNN
    rewrites work on graphs, not eager ops) but not for XLA (which compiles
    its own kernels, and would compute those arrangements in bfloat16
    itself), with the rewrites on and no GPU or TPU visible. Layers then
    build the arrangements oneDNN has fused or bfloat16 kernels for
    (`layers.layer_norm`, `layers.attention`).
    """
    import tensorflow as tf
    from tensorflow.python.framework import ops
    from tensorflow.python.ops import control_flow_util

    if tf.executing_eagerly() or control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph()):
        return False
    return onednn_graph_rewrites() is True and not accelerator_visible()


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
