"""How a model runs for inference on this machine: one `InferencePlan`, chosen once.

`hardware` says what the machine is (its CPU's flags and vendor, whether
TensorFlow's oneDNN graph rewrites are on, whether a GPU or TPU is visible);
the rules here turn those facts and the model into the choices every
inference path makes: the precision, XLA or the plain graph, per-token work
on real tokens only, the bucket of real-token counts, weights held rounded,
Dense kernels as graph constants, and the LayerNorm and softmax forms that
oneDNN runs as one kernel. `make_inference_function`, `extract_features`,
the task models' `predict` and the export take a plan (or one of the rules)
rather than asking the machine themselves. An export is an artifact that
other machines run: its plan follows the rules below only when this CPU's
form is asked for by name (`export_plan(..., optimize_for="this_cpu")`);
by default it is the same on every machine (stock ops, CPU and GPU).

The rules, each measured (docs/BENCHMARKS.md, "Forward pass (inference),
CPU" and "Serving"):

- bfloat16 pays on a CPU only where it has instructions for it that outrun
  float32's: Intel AMX (`amx_bf16`, on any vendor's CPU) and AMD's AVX-512
  bf16 (`avx512_bf16`, Zen 4 and later). Intel's AVX-512 bf16 without AMX
  issues its bf16 dot products at the rate of its float32 FMAs and ran
  slower than float32, and a CPU with neither converts every bfloat16
  product to float32. Both are reached only through oneDNN's kernels, which
  TensorFlow runs only with its oneDNN graph rewrites on (its default on
  such CPUs; `TF_ENABLE_ONEDNN_OPTS=0` turns them off, and a bfloat16
  product is then Eigen's contraction, which uses neither). So "auto" is
  bfloat16 only on a CPU with `amx_bf16`, or `avx512_bf16` from AMD, and the
  rewrites on.
- XLA compiles its own products, which on a CPU use neither oneDNN's
  kernels nor bf16 instructions: it pays on a GPU or TPU, and on a CPU only
  for a float32 model with the oneDNN rewrites off.
- Padding-free rows, constant kernels and the oneDNN forms pay on a CPU;
  on a GPU or TPU the gathers can cost more than the padding they save, and
  there are no oneDNN kernels to pack constants for.

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
>>> Machine(accelerator=False, onednn_rewrites=True).onednn_runs_graphs
True
"""

import dataclasses
import functools

# Light to import (no TensorFlow): the tools read PRECISION_CHOICES for their flags.
from keras_bert_impl import hardware

# Serving precision -> the Keras dtype policy a model is built with: bfloat16
# computes in bfloat16 and keeps float32 variables, so a checkpoint loads as
# it is (an export then holds its weights but the LayerNorms' rounded to bfloat16:
# `inference.precision`).
DTYPE_POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16"}
PRECISION_CHOICES = ("auto",) + tuple(DTYPE_POLICIES)
# Int8 products (`inference.int8`) with everything else in float32 (its kernels quantized, held as int8
# variables that the products pack once, or as graph constants; the products oneDNN's, an op of stock x86
# TensorFlow builds).
INT8 = "int8"
EXPORT_PRECISION_CHOICES = PRECISION_CHOICES + (INT8,)
# The CPU flag of the bf16 instructions that beat float32 on any vendor's CPU
# (AMX), and the flag and vendors where AVX-512 bf16 does (AMD's, measured on Zen 4).
AMX_FLAG = "amx_bf16"
AVX512_BF16_FLAG = "avx512_bf16"
AVX512_BF16_VENDORS = ("AuthenticAMD",)
# Most bytes of kernel constants a SavedModel takes (it is one protocol
# buffer, which cannot pass 2 GiB; BERT-base's and BERT-large's sizes:
# docs/BENCHMARKS.md).
MAX_CONSTANT_BYTES = 1 << 30
# What `inference.packed_kernels` computes in.
PACKED_PRECISIONS = ("float32", "bfloat16")
# What an export is made for (`export_plan`): any machine that runs stock TensorFlow (its default), or the
# CPU that writes it, in that CPU's fastest form (asked for by name).
PORTABLE = "portable"
THIS_CPU = "this_cpu"
OPTIMIZE_FOR_CHOICES = (PORTABLE, THIS_CPU)
_UNSET = object()


class Machine:
    """The facts of the machine the rules read: each as given, or read from `hardware` when first needed.

    Args:
        accelerator: Whether TensorFlow sees a GPU or TPU.
        onednn_rewrites: Whether TensorFlow's oneDNN graph rewrites are on
            (None: this build does not say).
        cpu_flags: The CPU's flag names.
        cpu_vendor: The CPU's `vendor_id`.
    """

    def __init__(self, accelerator=None, onednn_rewrites=_UNSET, cpu_flags=None, cpu_vendor=None):
        if accelerator is not None:
            self.accelerator = accelerator
        if onednn_rewrites is not _UNSET:
            self.onednn_rewrites = onednn_rewrites
        if cpu_flags is not None:
            self.cpu_flags = cpu_flags
        if cpu_vendor is not None:
            self.cpu_vendor = cpu_vendor

    @functools.cached_property
    def accelerator(self):
        return hardware.accelerator_visible()

    @functools.cached_property
    def onednn_rewrites(self):
        return hardware.onednn_graph_rewrites()

    @functools.cached_property
    def cpu_flags(self):
        return hardware.read_cpuinfo()[1]

    @functools.cached_property
    def cpu_vendor(self):
        return hardware.read_cpu_vendor()

    @property
    def onednn_runs_graphs(self):
        """Whether traced graphs (not XLA's) run on oneDNN's CPU kernels: the rewrites on, no GPU or TPU."""
        return self.onednn_rewrites is True and not self.accelerator


def default_precision(flags=None, onednn_rewrites=None, vendor=None):
    """The serving precision for a CPU with `flags`: bfloat16 where its bf16 instructions outrun float32, else float32.

    Args:
        flags: CPU flag names; default this machine's.
        onednn_rewrites: Whether TensorFlow's oneDNN graph rewrites are on;
            default this process's state (`hardware.onednn_graph_rewrites`).
            Where a build does not say, the flags decide alone.
        vendor: The CPU's `vendor_id`; default this machine's. It decides
            for `avx512_bf16` without `amx_bf16` (see the module's notes).
    """
    if flags is None:
        flags = hardware.read_cpuinfo()[1]
    if vendor is None:
        vendor = hardware.read_cpu_vendor()
    fast_bf16 = AMX_FLAG in flags or (AVX512_BF16_FLAG in flags and vendor in AVX512_BF16_VENDORS)
    if not fast_bf16:
        return "float32"
    if onednn_rewrites is None:
        onednn_rewrites = hardware.onednn_graph_rewrites()
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


def xla_pays_for_inference(compute_dtype, accelerator=None, onednn_rewrites=None):
    """Whether a BERT forward pass for inference should be compiled with XLA here.

    On a GPU or TPU, yes. On a CPU XLA compiles its own products, which use
    neither oneDNN's kernels nor bf16 instructions: in bfloat16 it ran well
    below the plain graph, and in float32 it gained only where the oneDNN
    rewrites are off (docs/BENCHMARKS.md).

    Args:
        compute_dtype: What the model computes in ("float32", "bfloat16", ...).
        accelerator: Whether a GPU or TPU is visible; default: asks TensorFlow.
        onednn_rewrites: `hardware.onednn_graph_rewrites()` by default.

    Returns:
        True on an accelerator, or on a CPU for a float32 model with the
        oneDNN rewrites off; else False (the plain graph).
    """
    if accelerator is None:
        accelerator = hardware.accelerator_visible()
    if accelerator:
        return True
    if onednn_rewrites is None:
        onednn_rewrites = hardware.onednn_graph_rewrites()
    return compute_dtype == "float32" and onednn_rewrites is False


def cut_bucket_size(max_seq_length, machine=None):
    """The rounding of batches cut after their longest row: 8 on a CPU, `max_seq_length / 8` where XLA compiles.

    Keras compiles `fit` with XLA when TensorFlow sees a GPU: one program per
    width, so at most 8 widths there. On a CPU every width runs as it is,
    and 8 keeps the rounding waste to a few columns.

    Example:
    >>> cut_bucket_size(128, Machine(accelerator=False)), cut_bucket_size(128, Machine(accelerator=True))
    (8, 16)
    """
    if (machine or Machine()).accelerator:
        return max(8, max_seq_length // 8)
    return 8


def keras_graph_forms(machine=None):
    """Whether Keras' own `predict`/`evaluate` graphs, and `array_prediction`'s, trace LayerNorm and softmax in
    the forms oneDNN runs as one kernel (`layers.onednn_forms`): where traced graphs run on oneDNN here.

    Example:
    >>> keras_graph_forms(Machine(accelerator=False, onednn_rewrites=True))
    True
    >>> keras_graph_forms(Machine(accelerator=True, onednn_rewrites=True))
    False
    """
    return (machine or Machine()).onednn_runs_graphs


@dataclasses.dataclass(frozen=True)
class InferencePlan:
    """How one model runs for inference: every choice, made once.

    Attributes:
        precision: What the model computes in ("float32", "bfloat16", ...).
        jit_compile: Compile the forward pass with XLA (else a plain graph).
        padding_free: Run the per-token work on the real tokens only.
        bucket_size: Where XLA compiles, the shapes it compiles for are
            rounded up to a multiple of this, so that a bounded number of
            programs serves every request: the real-token rows with
            `padding_free`, else the sequence length (padded with masked
            columns). 1: shapes as they come (a plain graph).
        held_weights: Run a copy of the model holding its weights rounded to
            `precision` once (`inference.precision`), taken when the plan is
            applied.
        frozen_kernels: Run a copy in the model's own dtype policy whose
            encoder Dense kernels are taken once, rounded to the compute
            dtype (`padding_free.frozen_kernels`; XLA and padding-free).
        constant_kernels: Read the Dense kernels as graph constants, which
            oneDNN packs once (`inference.constant_kernels`).
        packed_kernels: Compute the Dense layers as oneDNN products that
            pack their variable kernels once (`inference.packed_kernels`):
            the speed of constant kernels, the memory of variables.
        onednn_forms: Trace LayerNorm and softmax in the forms oneDNN runs
            as one kernel (`layers.onednn_forms`).
        calling_thread: Run the traced graph in a Session of its own whose
            ops run in the thread that calls, as TF Serving runs an export
            with `--tensorflow_inter_op_parallelism=-1`
            (`inference.calling_thread`; a plain graph, on the CPU).
    """

    precision: str
    jit_compile: bool = False
    padding_free: bool = False
    bucket_size: int = 1
    held_weights: bool = False
    frozen_kernels: bool = False
    constant_kernels: bool = False
    packed_kernels: bool = False
    onednn_forms: bool = False
    calling_thread: bool = False

    def describe(self):
        """One line for a log: what the plan computes and how.

        Example:
        >>> InferencePlan("bfloat16", padding_free=True, constant_kernels=True).describe()
        'bfloat16, plain graph, padding-free rows, kernels as graph constants'
        """
        parts = [self.precision, "XLA" if self.jit_compile else "plain graph"]
        buckets = f" (buckets of {self.bucket_size})" if self.bucket_size > 1 else ""
        if self.padding_free:
            parts.append("padding-free rows" + buckets)
        elif buckets:
            parts.append("sequence lengths" + buckets)
        if self.held_weights:
            parts.append(f"weights held in {self.precision}")
        if self.frozen_kernels:
            parts.append("encoder kernels frozen")
        if self.constant_kernels:
            parts.append("kernels as graph constants")
        if self.packed_kernels:
            parts.append("variable kernels packed once")
        if self.onednn_forms:
            parts.append("oneDNN LayerNorm and softmax")
        if self.calling_thread:
            parts.append("a Session running ops in the calling thread")
        return ", ".join(parts)


def kernels_taken_once(taken_once, machine, precision):
    """`(constant_kernels, packed_kernels)` for Dense kernels read once by a function nothing trains.

    Packed variables (`inference.packed_kernels`) where TensorFlow's oneDNN
    kernels run the graphs, in their precisions; elsewhere graph constants.
    """
    packed = bool(taken_once and machine.onednn_runs_graphs and precision in PACKED_PRECISIONS)
    return bool(taken_once) and not packed, packed


def function_plan(model, jit_compile="auto", padding_free=False, bucket_size=16, freeze_kernels=False,
                  machine=None, precision=None, calling_thread=False):
    """The plan of `BertModel.make_inference_function` (see its arguments).

    `jit_compile="auto"` compiles where `xla_pays_for_inference`. With
    `freeze_kernels` the weights are taken once: under XLA with
    `padding_free` as frozen encoder kernels (XLA on a CPU widens bfloat16
    weights on every call, so they are held as float32 there); otherwise as
    a copy holding its weights as an export does, whose Dense kernels oneDNN
    packs once in a plain graph: variables of the copy packed by its
    products where oneDNN runs the graphs (`kernels_taken_once`), graph
    constants elsewhere (XLA compiles its own products: neither gains
    there).

    Args:
        model: A `BertModel`.
        jit_compile: True, False or "auto".
        padding_free, bucket_size, freeze_kernels: As for
            `make_inference_function`.
        machine: A `Machine`; default this one.
        precision: None (the model's own) or "int8": the encoder's products
            in int8 on oneDNN (`inference.int8`), its kernels taken now as
            int8 variables of the function that its products pack once (so
            `freeze_kernels` is implied), a plain graph.
        calling_thread: Run the plain graph in a Session whose ops run in
            the calling thread (`inference.calling_thread`): the weights
            taken now (`freeze_kernels` is implied), never XLA ("auto"
            chooses the plain graph).

    Returns:
        An `InferencePlan`.

    Raises:
        ValueError: int8 with XLA, or XLA with `calling_thread`.
    """
    from keras_bert_impl.inference.precision import model_precision

    machine = machine or Machine()
    if calling_thread:
        if jit_compile is True:
            raise ValueError("calling_thread runs the plain graph in a Session, not XLA: use jit_compile=False")
        plan = function_plan(model, jit_compile=False, padding_free=padding_free, freeze_kernels=True,
                             machine=machine, precision=precision)
        return dataclasses.replace(plan, calling_thread=True)
    if precision == INT8:
        if jit_compile is True:
            raise ValueError("int8 products run on oneDNN's kernels, not XLA's: use jit_compile=False")
        return InferencePlan(precision=INT8, padding_free=bool(padding_free), held_weights=True,
                             packed_kernels=True, onednn_forms=machine.onednn_runs_graphs)
    if precision is not None:
        raise ValueError(f"precision {precision!r}: only int8 is chosen here; build the model in the dtype "
                         f"policy to compute in (float32, mixed_bfloat16)")
    precision = model_precision(model)
    if jit_compile == "auto":
        jit_compile = xla_pays_for_inference(precision, machine.accelerator, machine.onednn_rewrites)
    jit_compile = bool(jit_compile)
    frozen_kernels = bool(freeze_kernels and padding_free and jit_compile)
    constant_kernels, packed_kernels = kernels_taken_once(freeze_kernels and not jit_compile, machine, precision)
    return InferencePlan(
        precision=precision,
        jit_compile=jit_compile,
        padding_free=bool(padding_free),
        bucket_size=bucket_size if jit_compile else 1,
        held_weights=bool(freeze_kernels) and not frozen_kernels,
        frozen_kernels=frozen_kernels,
        constant_kernels=constant_kernels,
        packed_kernels=packed_kernels,
        onednn_forms=machine.onednn_runs_graphs,
    )


def export_plan(model, precision=None, skip_padding=None, constant_kernels=None, machine=None, packed_kernels=None,
                optimize_for=PORTABLE):
    """The plan of a SavedModel export of `model` (a plain graph, its weights held in its precision).

    By default (`optimize_for="portable"`) the plan does not depend on the
    machine: the model's own precision, real tokens only for a batch with
    padding, the Dense kernels plain variables and Keras' own LayerNorm and
    softmax: stock TensorFlow ops that TF Serving runs on a CPU or a GPU.
    The machine's forms are asked for by name: a precision, packed or
    constant kernels, or `optimize_for="this_cpu"`, which chooses as this
    machine's fastest form (bfloat16 where its bf16 units outrun float32,
    the kernels packed where oneDNN runs the graphs, oneDNN's LayerNorm and
    softmax forms). An int8 export is oneDNN's wherever it is made.

    Args:
        model: The task model exported.
        precision: "float32", "bfloat16", "int8" (`inference.int8`: the
            encoder's products in int8, its kernels int8 variables that the
            products pack once, or graph constants) or "auto"
            (`default_precision`, this CPU's); None: the model's own, or
            with "this_cpu" "auto".
        skip_padding: Whether a batch with padding runs the encoder's
            per-token work on its real tokens only; None: portable, yes;
            "this_cpu", where no GPU or TPU is visible.
        constant_kernels: Whether the graph holds the Dense kernels as
            constants; None: portable, no; "this_cpu", where they are not
            packed (below), no GPU or TPU is visible and they (one copy,
            whichever `skip_padding`) take at most `MAX_CONSTANT_BYTES`.
        machine: A `Machine`; default this one.
        packed_kernels: Whether the Dense kernels stay variables that
            oneDNN's products pack once (`inference.packed_kernels`; float32
            and bfloat16; for int8 the int8 kernels as variables,
            `int8.Int8Kernels`); None: portable, no (int8: yes); "this_cpu",
            where oneDNN runs the graphs (`Machine.onednn_runs_graphs`; int8:
            always, its products are oneDNN's) and constants were not asked
            for.
        optimize_for: "portable" or "this_cpu" (`OPTIMIZE_FOR_CHOICES`).

    Returns:
        An `InferencePlan`.

    Raises:
        ValueError: an unknown precision or `optimize_for`, constant kernels
            asked for past `MAX_CONSTANT_BYTES` or together with packed ones,
            or int8 kernels neither packed nor constants.
    """
    from keras_bert_impl.inference.constant_kernels import dense_kernel_bytes
    from keras_bert_impl.inference.precision import model_precision

    if optimize_for not in OPTIMIZE_FOR_CHOICES:
        raise ValueError(f"optimize_for {optimize_for!r} is not one of {', '.join(OPTIMIZE_FOR_CHOICES)}")
    machine = machine or Machine()
    this_cpu = optimize_for == THIS_CPU
    if constant_kernels and packed_kernels:
        raise ValueError("the kernels are either graph constants or packed variables, not both")
    if skip_padding is None:
        skip_padding = not machine.accelerator if this_cpu else True
    skip_padding = bool(skip_padding)
    if precision == INT8:
        if constant_kernels is False and packed_kernels is False:
            raise ValueError("an int8 export holds its int8 kernels as variables that its products pack once "
                             "(packed kernels) or as graph constants: leave one of them on")
        # The products are oneDNN's on every machine that runs them: packed unless constants are asked for.
        packed_kernels = not constant_kernels if packed_kernels is None else packed_kernels
        return InferencePlan(precision=INT8, padding_free=skip_padding, held_weights=True,
                             constant_kernels=not packed_kernels, packed_kernels=packed_kernels,
                             onednn_forms=machine.onednn_runs_graphs)
    if precision or this_cpu:
        precision = resolve_precision(precision or "auto", machine.cpu_flags, machine.onednn_rewrites,
                                      machine.cpu_vendor)
    else:
        precision = model_precision(model)
    # The kernels as the export holds them: in its precision (`inference.precision`).
    total = dense_kernel_bytes(model, precision)
    if packed_kernels is None:
        packed_kernels = (this_cpu and machine.onednn_runs_graphs and not constant_kernels
                          and precision in PACKED_PRECISIONS)
    elif packed_kernels and precision not in PACKED_PRECISIONS:
        raise ValueError(f"packed kernels are for {' and '.join(PACKED_PRECISIONS)}, not {precision}")
    if packed_kernels:
        constant_kernels = False
    elif constant_kernels is None:
        constant_kernels = this_cpu and total <= MAX_CONSTANT_BYTES and not machine.accelerator
    elif constant_kernels and total > MAX_CONSTANT_BYTES:
        raise ValueError(f"the kernels as constants would take {total / 2**20:.0f} MiB of the SavedModel's graph, "
                         f"more than {MAX_CONSTANT_BYTES / 2**20:.0f} MiB: export without constant kernels")
    return InferencePlan(precision=precision, padding_free=skip_padding, held_weights=True,
                         constant_kernels=bool(constant_kernels), packed_kernels=bool(packed_kernels),
                         onednn_forms=this_cpu and machine.onednn_runs_graphs)


def export_needs(plan):
    """What an export made by `plan` needs to run well: one line, for its metadata and the tool's last line.

    Example:
    >>> export_needs(InferencePlan("float32", padding_free=True, held_weights=True))
    'portable: stock TensorFlow ops, CPU and GPU'
    >>> export_needs(InferencePlan("float32", held_weights=True, packed_kernels=True))
    'TensorFlow with oneDNN on x86 (CPU only): its products are oneDNN ops'
    """
    if plan.precision == INT8 or plan.packed_kernels:
        return "TensorFlow with oneDNN on x86 (CPU only): its products are oneDNN ops"
    if plan.constant_kernels or plan.onednn_forms or plan.precision == "bfloat16":
        made_for = []
        if plan.precision == "bfloat16":
            made_for.append("bfloat16 products (fast only on CPUs with AMX or AMD's AVX-512 bf16, or a GPU)")
        if plan.constant_kernels:
            made_for.append("the Dense kernels as graph constants (several copies in a server's memory)")
        if plan.onednn_forms:
            made_for.append("LayerNorm and softmax arranged for oneDNN's fused kernels")
        return "stock TensorFlow ops, CPU and GPU; made for this CPU: " + "; ".join(made_for)
    return "portable: stock TensorFlow ops, CPU and GPU"


def features_plan(precision, machine=None):
    """The plan of `extract_features`: on a CPU, real tokens only and the kernels packed once (`kernels_taken_once`).

    Args:
        precision: "float32", "bfloat16" or "auto" (`default_precision`).
        machine: A `Machine`; default this one.

    Raises:
        ValueError: an unknown precision.
    """
    machine = machine or Machine()
    precision = resolve_precision(precision, machine.cpu_flags, machine.onednn_rewrites, machine.cpu_vendor)
    on_cpu = not machine.accelerator
    constant_kernels, packed_kernels = kernels_taken_once(on_cpu, machine, precision)
    return InferencePlan(precision=precision, padding_free=on_cpu, held_weights=precision != "float32",
                         constant_kernels=constant_kernels, packed_kernels=packed_kernels,
                         onednn_forms=machine.onednn_runs_graphs)
