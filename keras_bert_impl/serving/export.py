"""Versioned SavedModel export for TF Serving: the model's inference graph, as one `ExportOptions` asks.

`export_saved_model` writes `saved_models/<name>/<version>/` (SavedModel,
`assets/labels.txt`, `assets.extra/tf_serving_warmup_requests`,
`assets.extra/export_metadata.json`) through `serving.versions` (a version
is published whole and never overwritten) and lists the model in the export
base's `models.config` (`serving.tf_serving_files`).

How the graph computes is an `inference.plan.InferencePlan`
(`plan.export_plan`). By default it does not depend on the machine that
writes it: the model's own precision (float32 from a checkpoint), per-token
work on real tokens only for a batch with padding, the Dense kernels plain
variables: stock TensorFlow ops that TF Serving runs on a CPU or a GPU.
This CPU's fastest form is asked for by name (`optimize_for="this_cpu"`:
bfloat16 where its bf16 units outrun float32, Dense kernels as variables
that oneDNN's products pack once, `inference.packed_kernels`, or as graph
constants), as are a precision and each kernel form; `export_metadata.json`
says which, what the export needs to run ("needs") and the CPU it was
written on. TF Serving ignores that file;
the bfloat16 graph holds its weights in bfloat16 but
for the LayerNorms' (`inference.precision`). An int8 export
(`inference.int8`) holds the encoder's Dense kernels as int8 variables (or,
asked for, int8 constants) and multiplies them with oneDNN's fused int8
product (`_QuantizedMatMul`, an op of stock x86 TensorFlow builds, with the
oneDNN rewrites on or off), which packs each kernel once; its
activations are quantized per batch, or over ranges calibrated on
`calibration_texts`. The export measures how far int8 is from float32 on
texts the calibration did not see (`export_metadata.json`, "int8") and
publishes no version below `min_int8_agreement` (`serving.int8_gate`).
"""

import dataclasses
import json
import os
import tempfile

import numpy as np
import tensorflow as tf

from keras_bert_impl import filesystem, hardware
from keras_bert_impl.inference import int8
from keras_bert_impl.inference import plan as inference_plan
from keras_bert_impl.inference.forward import RebuildError, apply_plan
from keras_bert_impl.inference.padding_free import real_tokens_only_set_to
from keras_bert_impl.inference.precision import compute_precision
from keras_bert_impl.serving import int8_gate
from keras_bert_impl.serving.session_model import SessionModelError
from keras_bert_impl.serving.signatures import SIGNATURE_METHODS, BertServingModule
from keras_bert_impl.serving.tf_serving_files import (
    DEFAULT_SERVING_BASE_PATH,
    WARMUP_FILE,
    read_models_config,
    set_method_names,
    write_models_config,
    write_warmup_requests,
)
from keras_bert_impl.serving.verification import check_as_tf_serving
from keras_bert_impl.serving.versions import (
    ExportError,
    check_version_free,
    publish_version,
    remove_stale_staging,
    staging_name,
)
from keras_bert_impl.tasks.registry import exported_task_names, get_task
from keras_bert_impl.tasks.spec import TEXT_REQUESTS
from keras_bert_impl.tokenization import check_special_tokens, check_vocab_fits, load_vocab
from keras_bert_impl.tokenization.in_graph import InGraphTokenizer
from keras_bert_impl.tokenization.long_text import CUT, LongTextOptions
from keras_bert_impl.tokenization.preprocessor import shared_tables

METADATA_FILE = "export_metadata.json"
# Said after every export, by the model's width (measured per form and size: docs/BENCHMARKS.md, "Portable export
# against this CPU's form"): one intra-op thread per request paid for a MiniLM-sized model in every form and cost
# a BERT-base-sized one a third to two thirds more time per text, whose products are worth splitting across cores.
ONLINE_THREADS_MAX_WIDTH = 384
ONLINE_THREADS_HINT = (
    "for online traffic on a CPU (a text or a few a request, several clients at once) start TF Serving with "
    "--tensorflow_intra_op_parallelism=1 --tensorflow_inter_op_parallelism=-1: each request keeps a core and runs "
    "its ops in the thread that received it, with no hand-offs between threads (a model this narrow: one text "
    "faster so in every form measured); a server whose requests are batches keeps both defaults")
DEFAULT_THREADS_HINT = (
    "on a CPU, keep TF Serving's default threads, online traffic included: each product of a model this wide "
    "gains from every core, and --tensorflow_intra_op_parallelism=1 made one text of a BERT-base-sized export "
    "slower (docs/BENCHMARKS.md, \"Portable export against this CPU's form\")")


def threads_hint(bert_config):
    """The TF Serving thread settings that fit an export of a model with `bert_config` (one line, measured).

    Example:
    >>> from keras_bert_impl.config import BertConfig
    >>> threads_hint(BertConfig(vocab_size=30, hidden_size=768)) == DEFAULT_THREADS_HINT
    True
    """
    return ONLINE_THREADS_HINT if bert_config.hidden_size <= ONLINE_THREADS_MAX_WIDTH else DEFAULT_THREADS_HINT


@dataclasses.dataclass(frozen=True)
class ExportOptions:
    """How a model is exported: its in-graph preprocessing, version, TF Serving files and inference choices.

    Attributes:
        do_lower_case: As for the Python tokenizer.
        max_seq_length: Every request is padded/truncated to this.
        label_names: Class names for a classifier (default "0".."n-1").
        version: Integer version; default the next free one when the export
            is complete. An existing version is never overwritten.
        warmup_texts: Real requests stored in `assets.extra` for warmup.
        tables: Optional precomputed `in_graph.build_tables()`.
        serving_base_path: Where TF Serving sees the export base, for
            `models.config` (see `tf_serving_files.write_models_config`).
        precision: "float32", "bfloat16", "int8" or "auto" (this CPU's
            fastest, `inference.plan.default_precision`: bfloat16 on a CPU
            with AMX or AMD's AVX-512 bf16 that TensorFlow's oneDNN kernels
            run); a model in another precision is rebuilt in this one
            (`in_precision`). Default: the model's own ("auto" with
            `optimize_for="this_cpu"`).
        optimize_for: "portable" (the default: a graph of stock ops that
            does not depend on the exporting machine, CPU or GPU) or
            "this_cpu": this machine's fastest form, as
            `inference.plan.export_plan` chooses it (its precision, packed
            or constant kernels, oneDNN's LayerNorm and softmax forms).
            Written to the export's metadata with what it needs to run.
        skip_padding: Whether a batch with padding runs the encoder's
            per-token work on its real tokens only (`BertServingModule`);
            default: on (stock ops); with "this_cpu", on a CPU, not where a
            GPU or TPU is visible, where the gathers can cost more than the
            padding (docs/BENCHMARKS.md).
            Written to the export's metadata.
        constant_kernels: Whether the graph holds the Dense kernels as
            constants, which oneDNN packs once and multiplies with its
            blocked kernels, on AMX tiles where the CPU has them
            (`inference.constant_kernels`, docs/BENCHMARKS.md). Default:
            off; with "this_cpu", where no GPU or TPU is visible and they
            (one copy) take at most `inference.plan.MAX_CONSTANT_BYTES`,
            unless packed (below).
            Written to the export's metadata.
        packed_kernels: Whether the Dense kernels stay variables that
            oneDNN's products pack once, as it packs constants (as fast, in
            a fraction of the memory; `inference.packed_kernels`): the
            export then needs TensorFlow's oneDNN kernels (any stock x86
            TensorFlow or TF Serving; CPU only). Default: for int8 (its int8
            kernels as variables) unless `constant_kernels` is on; with
            "this_cpu" also where TensorFlow's oneDNN kernels run this
            machine's graphs (no GPU or TPU visible), in float32 and
            bfloat16.
            Written to the export's metadata.
        calibration_texts: For precision "int8": texts of the task (one
            request each) whose activations fix each product's input range
            (static quantization), and on which int8 is compared with
            float32. None: ranges found per batch, compared on
            `warmup_texts`.
        calibration_percentile: With `calibration_texts`: each range runs
            between this percentile of the values a product's input took
            on them and its complement (`int8.calibrate_input_ranges`);
            100 keeps the smallest and largest.
        smoothing_alpha: With `calibration_texts`: how much of each input
            channel's spread moves into the kernel's row before quantizing
            (`int8.smoothing_factors`, SmoothQuant); 0 or None: none.
        verify: Before the version is published, load it as TF Serving
            does, run its warmup requests and compare their answers with
            the model's (`verification.check_as_tf_serving`): a version that
            fails is not published. A few seconds, and the export's weights
            once more in memory meanwhile. `bert-export` does it by default.
        min_int8_agreement: For precision "int8": the least agreement with
            float32, on texts the calibration did not see, that is published
            (`int8_gate.check_agreement`: the share of answers int8 keeps for
            a classifier, the mean cosine else); None:
            `int8_gate.DEFAULT_MIN_AGREEMENT`; 0: any.
        long_text: How the raw-text signature reads a text longer than
            `max_seq_length` (`tokenization.long_text.LongTextOptions`:
            head + tail, or windows whose logits are pooled), for a
            classifier, regression or multi-label export; None: cut, as the
            original. Written to the export's metadata.
        threshold: For a multi-label export, the probability at or over
            which a label is in `label_mask`: one number or one per label;
            None: the model's own (`TextClassifier.threshold`), else 0.5
            (`export_checkpoint`: the release's `multi_label.json`).
            Written to the export's metadata, one per label.
    """

    do_lower_case: bool = True
    max_seq_length: int = 128
    label_names: tuple = None
    version: int = None
    warmup_texts: tuple = ("The weather is lovely today.", "He drove to the stadium.")
    tables: object = None
    serving_base_path: str = DEFAULT_SERVING_BASE_PATH
    precision: str = None
    optimize_for: str = inference_plan.PORTABLE
    skip_padding: bool = None
    constant_kernels: bool = None
    packed_kernels: bool = None
    calibration_texts: tuple = None
    calibration_percentile: float = int8.DEFAULT_CALIBRATION_PERCENTILE
    smoothing_alpha: float = int8.DEFAULT_SMOOTHING_ALPHA
    verify: bool = False
    min_int8_agreement: float = None
    long_text: object = None
    threshold: object = None


def label_thresholds(model, task, threshold):
    """A multi-label export's `label_mask` thresholds, one float per label: `threshold`, else the model's own
    `threshold`, else 0.5; None for another task.

    Raises:
        ExportError: a threshold for another task, or not a number or one
            per label, each in (0, 1).
    """
    from keras_bert_impl.data.multi_label import per_label_thresholds

    if task != "multi_label":
        if threshold is not None:
            raise ExportError(f"a threshold is for a multi_label export, not task {task}")
        return None
    value = getattr(model, "threshold", 0.5) if threshold is None else threshold
    try:
        return per_label_thresholds(value, int(model.num_labels), "threshold")
    except ValueError as error:
        raise ExportError(str(error)) from None


def planned_export_model(model, spec, plan, calibration=None):
    """`model` as the export's `plan` runs it (`inference.forward.apply_plan`): a `PlannedModel`.

    Where the plan holds the weights otherwise than `model` (bfloat16), the
    copy is `spec.build_model` in the plan's precision (the weights held
    rounded: no conversion on each request), `model`'s variables matched one
    to one by path and shape.

    Args:
        model: The task model exported.
        spec: Its `tasks.spec.TaskSpec`.
        plan: The export's `InferencePlan`.
        calibration: For int8, as `apply_plan` takes it.

    Raises:
        ExportError: the rebuilt model's variables do not match `model`'s.
    """
    num_labels = int(model.outputs[0].shape[-1]) if spec.uses_labels else None
    try:
        return apply_plan(model, plan, rebuild=lambda dtype: spec.build_model(model.bert_config, num_labels,
                                                                              dtype=dtype),
                          calibration=calibration)
    except RebuildError:
        precision = compute_precision(plan.precision)
        raise ExportError(f"cannot rebuild {model.name!r} in {precision}: its variables are not a "
                          f"{spec.name} model's; build it with dtype={inference_plan.DTYPE_POLICIES[precision]!r}"
                          ) from None


def in_precision(model, spec, precision):
    """`model` as an export in `precision` computes: itself, or a copy built for it (`planned_export_model`).

    Raises:
        ExportError: the rebuilt model's variables do not match `model`'s.
    """
    return planned_export_model(model, spec, inference_plan.InferencePlan(precision, held_weights=True)).model


def export_metadata(task, plan, options, int8_report=None):
    """What `assets.extra/export_metadata.json` says of an export (a dict).

    Args:
        task: The task name.
        plan: The export's `InferencePlan`.
        options: Its `ExportOptions`.
        int8_report: For an int8 export, what `int8_agreement` found.
    """
    from keras_bert_impl import __version__

    name, flags = hardware.read_cpuinfo()
    precision = plan.precision
    weights = {"float32": "float32", "int8": "int8 encoder Dense kernels (a scale per output channel), float32 else"}
    metadata = {
        "task": task,
        "precision": precision,
        "dtype_policy": inference_plan.DTYPE_POLICIES[compute_precision(precision)],
        "weights_dtype": weights.get(precision, "bfloat16 (LayerNorm float32)"),
        "optimized_for": options.optimize_for,
        "needs": inference_plan.export_needs(plan),
        "skips_padding": plan.padding_free,
        "onednn_forms": plan.onednn_forms,
        "kernels": ("graph constants" if plan.constant_kernels
                    else "int8 variables, packed once by oneDNN's _QuantizedMatMul"
                    if plan.packed_kernels and precision == inference_plan.INT8
                    else "variables, packed once by oneDNN's _MklNativeFusedMatMul" if plan.packed_kernels
                    else "variables"),
        "max_seq_length": options.max_seq_length,
        "long_text": (options.long_text or LongTextOptions()).resolved(options.max_seq_length).to_json(),
        "do_lower_case": options.do_lower_case,
        **({"thresholds": list(options.threshold)} if options.threshold is not None else {}),
        "exported_on_cpu": name,
        "exported_on_cpu_flags": [flag for flag in hardware.MATRIX_FLAGS if flag in flags],
        "exported_with_onednn_rewrites": hardware.onednn_graph_rewrites(),
        "keras_bert_impl": __version__,
        "tensorflow": tf.__version__,
    }
    if int8_report is not None:
        metadata["int8"] = int8_report
    return metadata


def read_export_metadata(version_dir):
    """The `assets.extra/export_metadata.json` of an export's version directory, as a dict.

    Args:
        version_dir: `saved_models/<name>/<version>`.
    """
    with filesystem.open_file(filesystem.join(version_dir, "assets.extra", METADATA_FILE)) as f:
        return json.load(f)


def int8_calibration(module, model, texts, percentile, smoothing_alpha=None, batch_size=32):
    """`(input_ranges, smoothing)` of `model`'s encoder Dense inputs on `texts`, as the module computes them.

    The texts are tokenized by the module and run through `model` on their
    real tokens only (`int8.calibrate`), as the export's graph runs them.

    Args:
        module: A `BertServingModule` of `model` (its `encode`).
        model: The float32 model.
        texts: Strings.
        percentile: As for `int8.calibrate_input_ranges`.
        smoothing_alpha: As for `int8.smoothing_factors`; 0 or None: no
            smoothing (`smoothing` is then None).
    """
    batches = [module.encode(tf.constant(list(texts[start:start + batch_size])))
               for start in range(0, len(texts), batch_size)]
    return int8.calibrate(model, batches, percentile, smoothing_alpha)


def int8_agreement(module, model, texts, input_ranges, batch_size=32, percentile=100, smoothing_alpha=None,
                   num_calibration_texts=None):
    """How far the int8 module's outputs are from float32 `model`'s on `texts` (`int8.agreement`'s dict).

    Both run on the module's own tokenization of each text; a classifier is
    compared by argmax, other tasks by the cosine of their first output
    (`pooled_output` for embeddings).

    Args:
        module: The int8 `BertServingModule` (its `forward` is traced with
            the int8 products).
        model: The float32 model it was made from.
        texts: Strings.
        input_ranges: The calibrated ranges, or None (dynamic); recorded.
        batch_size: Texts per forward pass.
        percentile: The calibration's percentile; recorded.
        smoothing_alpha: The calibration's smoothing (None: none); recorded.
        num_calibration_texts: How many texts the ranges were calibrated on
            (default: `texts`); recorded.
    """

    def first(outputs):
        if isinstance(outputs, dict):
            return outputs.get("pooled_output", next(iter(outputs.values())))
        return tf.nest.flatten(outputs)[0]

    reference, quantized = [], []
    for start in range(0, len(texts), batch_size):
        inputs = module.encode(tf.constant(list(texts[start:start + batch_size])))
        with real_tokens_only_set_to(model, True):
            reference.append(first(model(inputs, training=False)).numpy())
        quantized.append(first(module.forward(inputs)).numpy())
    reference, quantized = np.concatenate(reference), np.concatenate(quantized)
    labels = module.spec.uses_labels and reference.ndim == 2 and reference.shape[-1] > 1
    report = int8.agreement(reference, quantized, labels)
    if labels:  # what `int8_gate.check_agreement` compares: ties between classes are no changed answer
        report.update(int8_gate.kept_answers(reference, quantized))
    if input_ranges is None:
        report["activation_ranges"] = "per batch (dynamic)"
    else:
        ends = "smallest to largest value" if percentile == 100 else f"{percentile:g}th percentile"
        count = len(texts) if num_calibration_texts is None else num_calibration_texts
        report["activation_ranges"] = f"calibrated on {count} texts, {ends}"
        report["calibration_percentile"] = percentile
        report["smoothing_alpha"] = smoothing_alpha or None
        if smoothing_alpha:
            report["activation_ranges"] += f", inputs smoothed per channel (alpha {smoothing_alpha:g})"
    return report


def _labels_file(model, spec, label_names, work):
    """Writes `labels.txt` in `work` for a task with labels; returns its path (None without labels).

    Raises:
        ExportError: `label_names` has another count than the model's labels,
            or a name that is empty or holds a line break.
    """
    if not spec.uses_labels:
        return None
    num_labels = int(model.outputs[0].shape[-1]) if hasattr(model, "outputs") else None
    names = list(label_names) if label_names else [str(i) for i in range(num_labels)]
    if num_labels is not None and len(names) != num_labels:
        raise ExportError(f"--label_names has {len(names)} names for a {num_labels}-label classifier")
    broken = [name for name in names if not isinstance(name, str) or not name.strip() or "\n" in name or "\r" in name]
    if broken:  # labels.txt holds one name a line: class ids would shift
        raise ExportError(f"label name {broken[0]!r}: a label name is one line of text, not empty")
    path = filesystem.join(work, "labels.txt")
    with filesystem.open_file(path, "w") as f:
        f.write("\n".join(names) + "\n")
    return path


def _check_int8_requests(spec, precision):
    """Refuses int8 for a task whose requests are not texts: its calibration and agreement run on texts.

    Raises:
        ExportError: naming the task and what to export instead.
    """
    if precision == inference_plan.INT8 and spec.requests != TEXT_REQUESTS:
        raise ExportError(f"--precision=int8 exports tasks whose requests are texts; {spec.name}'s are a context "
                          "and its choices: export it in float32 or bfloat16")


def export_saved_model(model, task, vocab_file, export_dir, options=None, log=None):
    """Exports `model` as `export_dir/<version>/` for TF Serving, and lists
    it in the export base's `models.config`.

    Args:
        model: A built task model (see `BertServingModule`).
        task: A task name of `tasks.registry` with serving outputs.
        vocab_file: The model's `vocab.txt` (tokenization happens in-graph), or
            a variant's first tokenizer file (`vocab.json` with `merges.txt`
            beside it, `spiece.model`): its in-graph tokenizer and special
            tokens (`tokenization.from_files`) go into the graph.
        export_dir: `saved_models/<model_name>`; the model name is its
            basename, `saved_models` the export base. May be remote.
        options: `ExportOptions`; default `ExportOptions()`.
        log: Optional `log(message)`: an int8 export's agreement with float32.

    Returns:
        The path of the version directory written.

    Raises:
        ExportError: existing version, unknown task, label count mismatch,
            unknown precision, a model that cannot be rebuilt in it, a
            `max_seq_length` below 3 or past the model's position embeddings,
            constant kernels asked for past `inference.plan.MAX_CONSTANT_BYTES`,
            int8 kernels neither packed nor constants,
            empty `calibration_texts`, a calibration percentile outside
            (50, 100], a smoothing alpha outside [0, 1]; an int8 version
            that agrees with float32 below `min_int8_agreement` on texts
            the calibration did not see (not published).
    """
    options = options or ExportOptions()
    if task not in exported_task_names():
        raise ExportError(f"--task {task!r} is not one of {', '.join(exported_task_names())}")
    spec = get_task(task)
    # Checked here, not by the first long request TF Serving gets.
    positions = model.bert_config.max_sequence_length  # RoBERTa: its position rows less 2
    if not 3 <= options.max_seq_length <= positions:
        what = "max_position_embeddings" if not model.bert_config.position_offset else "longest sequence"
        raise ExportError(f"--max_seq_length {options.max_seq_length}: must be at least 3 ([CLS] and two [SEP]s) "
                          f"and at most the model's {what} {positions}")
    try:
        long_text = (options.long_text or LongTextOptions()).resolved(options.max_seq_length)
    except ValueError as error:
        raise ExportError(str(error)) from None
    if long_text.mode != CUT and not spec.long_texts:
        raise ExportError(f"long_text={long_text.mode} is for a classifier, regression or multi_label export; "
                          f"task {task} cuts long texts")
    options = dataclasses.replace(options, threshold=label_thresholds(model, task, options.threshold))
    if options.precision is not None and options.precision not in inference_plan.EXPORT_PRECISION_CHOICES:
        raise ExportError(f"precision {options.precision!r} is not one of "
                          f"{', '.join(inference_plan.EXPORT_PRECISION_CHOICES)}")  # int8 too, where predict has none
    try:
        plan = inference_plan.export_plan(model, options.precision, options.skip_padding, options.constant_kernels,
                                          packed_kernels=options.packed_kernels, optimize_for=options.optimize_for)
    except ValueError as error:
        raise ExportError(str(error)) from None
    _check_int8_requests(spec, plan.precision)
    calibration = int8_gate.calibration_text_tuple(options.calibration_texts)
    if calibration is not None and plan.precision != inference_plan.INT8:
        raise ExportError("calibration texts are for an int8 export (--precision=int8)")
    if calibration is not None and not [text for text in calibration if text.strip()]:
        raise ExportError("the calibration texts hold no text")
    if not 50.0 < options.calibration_percentile <= 100.0:
        raise ExportError(f"--calibration_percentile {options.calibration_percentile:g}: must be in (50, 100] "
                          "(100: from the smallest to the largest value seen)")
    if options.min_int8_agreement is not None and not 0.0 <= options.min_int8_agreement <= 1.0:
        raise ExportError(f"min_int8_agreement {options.min_int8_agreement:g}: must be in [0, 1] (0: publish any)")
    if options.smoothing_alpha is not None and not 0.0 <= options.smoothing_alpha <= 1.0:
        raise ExportError(f"--smoothing_alpha {options.smoothing_alpha:g}: must be in [0, 1] (0: no smoothing)")
    export_dir = os.fspath(export_dir).rstrip("/")
    remote = filesystem.is_remote(export_dir)
    if not remote:
        export_dir = os.path.abspath(export_dir)
    model_name = filesystem.basename(export_dir)
    version = check_version_free(export_dir, options.version)
    variant = _variant_tokenizer(vocab_file, options.do_lower_case, model.bert_config.vocab_size)
    if variant is None:
        vocab = load_vocab(vocab_file)
        check_special_tokens(vocab, vocab_file, required=spec.required_tokens)
        check_vocab_fits(vocab, vocab_file, model.bert_config.vocab_size, "the model's config")
        tokens = [""] * (max(vocab.values()) + 1)
        for token, index in vocab.items():
            tokens[index] = token

    read_models_config(filesystem.dirname(export_dir))  # One this export cannot merge into: refused before the work.
    filesystem.makedirs(export_dir)
    remove_stale_staging(export_dir)  # What exports killed before their clean-up left.
    work = tempfile.mkdtemp(prefix="export-assets-")  # local scratch: the labels file, a remote export's staging
    # A local staging directory sits beside the versions, so that publishing is a rename.
    staging = filesystem.join(work if remote else export_dir, staging_name())
    try:
        labels_path = _labels_file(model, spec, options.label_names, work)
        if variant is None:
            tokenizer = InGraphTokenizer(tokens, do_lower_case=options.do_lower_case,
                                         tables=options.tables or shared_tables())
            special_ids = {"cls": vocab["[CLS]"], "sep": vocab["[SEP]"], "mask": vocab.get("[MASK]", 0)}
            special_tokens, mask_token = None, "[MASK]"
        else:
            tokenizer, special_ids, special_tokens, tokens = variant
            mask_token = special_tokens.mask

        def serving_module(planned):
            return BertServingModule(
                planned, task, tokenizer, options.max_seq_length, special_ids,
                labels_path=labels_path, skip_padding=plan.padding_free,
                special_tokens=special_tokens, vocabulary=tokens, long_text=long_text, threshold=options.threshold,
            )

        int8_report = None
        texts = [text for text in calibration if text.strip()] if calibration else list(options.warmup_texts)
        calibrate_on_texts = None
        if plan.precision == inference_plan.INT8 and calibration:
            # Tokenized as the export tokenizes, run through the model that the export runs.
            calibrate_on_texts = lambda served: int8_calibration(  # noqa: E731
                serving_module(served), served, texts, options.calibration_percentile, options.smoothing_alpha)
        planned = planned_export_model(model, spec, plan, calibrate_on_texts)
        module = serving_module(planned)
        kernels = planned.kernels
        if plan.precision == inference_plan.INT8:
            # Measured on texts the calibration did not see, and refused below the threshold (`int8_gate`).
            held_out = int8_gate.held_out_texts(texts if calibration else (), options.warmup_texts)
            int8_report = int8_agreement(module, planned.model, held_out, kernels.input_ranges,
                                         percentile=options.calibration_percentile,
                                         smoothing_alpha=options.smoothing_alpha,
                                         num_calibration_texts=len(texts) if calibration else None)
            if log:
                log(int8_report["summary"] + f" on texts the calibration did not see (activation ranges "
                    f"{int8_report['activation_ranges']})")
                warning = int8_gate.calibration_warning(texts if calibration else None)
                if warning:
                    log(warning)
            int8_gate.check_agreement(int8_report, options.min_int8_agreement)
        else:
            if log and plan.packed_kernels:
                log("Dense kernels as variables that oneDNN's products pack once (_MklNativeFusedMatMul): the export "
                    "needs TensorFlow's oneDNN kernels, as every stock x86 TensorFlow and TF Serving has "
                    "(--nopacked_kernels: a graph of stock ops only)")
            if log and kernels is None:
                log(f"Dense kernels as variables: on a CPU whose TensorFlow runs oneDNN's kernels, a server started "
                    f"with {hardware.FROZEN_WEIGHTS_ENV}=1 packs them "
                    f"once, as constants are (about as fast, in less memory; never in a process that trains; "
                    f"docs/BENCHMARKS.md, 'Memory that holds')")
        if log:
            log(threads_hint(model.bert_config))
        signatures = module.signatures()
        tf.saved_model.save(module, staging, signatures=signatures)
        if task in SIGNATURE_METHODS:
            set_method_names(staging, SIGNATURE_METHODS[task])
        extra = filesystem.join(staging, "assets.extra")
        filesystem.makedirs(extra)
        texts = [f"{t} {mask_token} ." if spec.masks_in_text else t for t in options.warmup_texts]
        write_warmup_requests(filesystem.join(extra, WARMUP_FILE), model_name, module.warmup_inputs(texts))
        with filesystem.open_file(filesystem.join(extra, METADATA_FILE), "w") as f:
            json.dump(export_metadata(task, plan, options, int8_report), f, indent=2)
            f.write("\n")
        if options.verify:
            try:
                checked = check_as_tf_serving(staging, signatures)
            except SessionModelError as error:
                reason = str(error).replace(staging, "the staged version")
                raise ExportError(f"{export_dir}: the new version is not published: {reason}") from error
            if log:
                log(checked)
        final = publish_version(staging, export_dir, version)
    finally:
        filesystem.rmtree(staging, missing_ok=True)
        filesystem.rmtree(work, missing_ok=True)
    write_models_config(filesystem.dirname(export_dir), options.serving_base_path)
    return final


def _variant_tokenizer(vocab_file, do_lower_case, vocab_size):
    """For a variant's tokenizer file, `(in-graph tokenizer, special ids, SpecialTokens, vocabulary)`; None for WordPiece.

    Raises:
        VocabError: the tokenizer files are missing or bad, or hold more
            tokens than the model's embeddings.
    """
    from keras_bert_impl.tokenization.from_files import (
        SPECIAL_TOKENS,
        WORDPIECE,
        in_graph_tokenizer,
        read_tokenizer_files,
        release_tokenizer,
        token_ids,
        vocab_file_kind,
        vocabulary,
    )

    if vocab_file_kind(vocab_file) == WORDPIECE:
        return None
    release_tokenizer(vocab_file, vocab_size, do_lower_case)  # the checks
    files = read_tokenizer_files(filesystem.dirname(os.fspath(vocab_file)) or ".")
    specials = SPECIAL_TOKENS[files["kind"]]
    ids = dict(zip(("cls", "sep", "pad", "mask"),
                   token_ids(files, [specials.cls, specials.sep, specials.pad, specials.mask])))
    return in_graph_tokenizer(files, do_lower_case=do_lower_case), ids, specials, vocabulary(files)


def _lacks_pooler(config, init_checkpoint):
    """Whether a variant's config has a pooler that its original-layout checkpoint does not hold."""
    from keras_bert_impl.checkpoints.keras_file import is_keras_file

    if config.model_type == "bert" or not config.use_pooler or not init_checkpoint or is_keras_file(init_checkpoint):
        return False
    return not any(name.startswith("bert/pooler/") for name, _ in tf.train.list_variables(init_checkpoint))


def release_files(model_dir, bert_config_file=None, vocab_file=None, init_checkpoint=None):
    """`(bert_config_file, vocab_file, init_checkpoint)`, filled in from a
    release directory written by our tools (its latest checkpoint, else
    `bert_model.ckpt`) where not given; a named `model_dir` (`hf://ORG/NAME`) is fetched into the cache first."""
    if model_dir:
        from keras_bert_impl.checkpoints.release import TOKENIZER_FILES, release_model_type
        from keras_bert_impl.checkpoints.sources import resolve_source

        model_dir = resolve_source(model_dir)

        bert_config_file = bert_config_file or filesystem.join(model_dir, "bert_config.json")
        # A variant's release: its first tokenizer file (vocab.json, spiece.model).
        vocab_name = (TOKENIZER_FILES[release_model_type(bert_config_file)][0]
                      if filesystem.exists(bert_config_file) else "vocab.txt")
        vocab_file = vocab_file or filesystem.join(model_dir, vocab_name)
        init_checkpoint = init_checkpoint or tf.train.latest_checkpoint(model_dir) or filesystem.join(
            model_dir, "bert_model.ckpt"
        )
    return bert_config_file, vocab_file, init_checkpoint


def release_label_names(init_checkpoint, log=print):
    """The label names a fine-tuned release records beside `init_checkpoint` (`label_list.txt`, in class-id order,
    as the fine-tuning tools and `bert-distill` write it), as a tuple; None where there is none."""
    from keras_bert_impl.training.fine_tuning import recorded_labels

    labels, path = recorded_labels(filesystem.dirname(init_checkpoint))
    if not labels:
        return None
    log(f"label names from {path}: {', '.join(labels)}")
    return tuple(labels)


def release_long_text(init_checkpoint, log=print):
    """How a fine-tuned release beside `init_checkpoint` read long texts (its `long_text.json`, written by
    `bert-run-classifier --long_text` and `TextClassifier.save_release`): a `LongTextOptions`, or None (cut).

    Raises:
        ExportError: the file is not long-text options.
    """
    from keras_bert_impl.checkpoints.release import LONG_TEXT_FILE, read_release_long_text
    from keras_bert_impl.errors import CheckpointError

    directory = filesystem.dirname(init_checkpoint)
    try:
        options = read_release_long_text(directory)
    except CheckpointError as error:
        raise ExportError(str(error)) from None
    if options is not None:
        log(f"long texts as {filesystem.join(directory, LONG_TEXT_FILE)} says: {options.to_json()}")
    return options


def release_multi_label(init_checkpoint, task, log=print):
    """The `checkpoints.release.MultiLabelRecord` of a multi-label release beside `init_checkpoint` (its
    `multi_label.json`, written by `bert-run-classifier --multi_label`, `TextClassifier.save_release` and
    `bert-convert-hf`), or None.

    Raises:
        ExportError: the file is not a record; or the release is multi-label
            and `task` is a single-label classifier or regression, whose
            softmax (or score) would not be the model's answer.
    """
    from keras_bert_impl.checkpoints.release import MULTI_LABEL_FILE, read_release_multi_label
    from keras_bert_impl.errors import CheckpointError

    directory = filesystem.dirname(init_checkpoint)
    try:
        record = read_release_multi_label(directory)
    except CheckpointError as error:
        raise ExportError(str(error)) from None
    path = filesystem.join(directory, MULTI_LABEL_FILE)
    if record is not None and task in ("classifier", "regression"):
        raise ExportError(f"{path}: the release is a multi-label classifier (a sigmoid per label); export it with "
                          f"--task=multi_label, not {task}")
    if record is not None and task == "multi_label":
        log(f"thresholds from {path}: {', '.join(f'{t:g}' for t in record.thresholds)}")
        return record
    return None


def export_checkpoint(task, bert_config_file, init_checkpoint, vocab_file, export_dir, options=None, num_labels=2,
                      log=print):
    """Builds the `task` model, loads an original-layout checkpoint and exports it.

    Args:
        task: A task name with serving outputs (`tasks.registry`).
        bert_config_file, init_checkpoint, vocab_file: The release;
            `init_checkpoint` may be a `.keras` model file
            (`checkpoints.keras_file`), whose config must equal
            `bert_config_file`'s.
        export_dir: `saved_models/<model_name>`.
        options: `ExportOptions`; default `ExportOptions()` (portable,
            float32). Its `precision` (None: float32, or with
            `optimize_for="this_cpu"` "auto"; "auto":
            `inference.plan.default_precision`, bfloat16 on a CPU with AMX or
            AMD's AVX-512 bf16 and TensorFlow's oneDNN rewrites on, else
            float32; "int8": built in float32, its encoder's products
            exported in int8) is what the model is built and exported in;
            its `long_text` None takes the release's (`release_long_text`),
            its `threshold` None a multi-label release's
            (`release_multi_label`).
        num_labels: Classes, where the task has labels (`options.label_names`
            wins, and without them the `label_list.txt` beside
            `init_checkpoint`: `release_label_names`).
        log: `log(message)`.

    Returns:
        The version directory written.

    Raises:
        ExportError: unknown task, existing version, unknown precision.
        CheckpointError: a checkpoint (or `.keras` file) that is unreadable
            or does not fit the release.
    """
    from keras_bert_impl.checkpoints.keras_file import check_keras_file_fits, is_keras_file
    from keras_bert_impl.checkpoints.original import load_original_checkpoint
    from keras_bert_impl.config import BertConfig
    from keras_bert_impl.io import check_max_seq_length

    options = options or ExportOptions()
    if task not in exported_task_names():
        raise ExportError(f"--task {task!r} is not one of {', '.join(exported_task_names())}")
    version = options.version
    if version is not None and filesystem.exists(filesystem.join(export_dir, str(version))):
        # Checked before any work: versions are never overwritten.
        raise ExportError(f"{filesystem.join(export_dir, str(version))}: version {version} already exists")
    config = BertConfig.from_json_file(bert_config_file)
    check_max_seq_length(options.max_seq_length, config, bert_config_file)
    if is_keras_file(init_checkpoint):
        check_keras_file_fits(init_checkpoint, config, bert_config_file, vocab_file, options.do_lower_case)
    spec = get_task(task)
    _check_int8_requests(spec, options.precision)  # before the checkpoint is read
    if _lacks_pooler(config, init_checkpoint):
        # A variant's masked-LM release (RoBERTa's): built without the pooler
        # it never trained, so an export has no untrained output.
        config = dataclasses.replace(config, use_pooler=False)
    try:
        precision = options.precision
        if precision != inference_plan.INT8:
            this_cpu = options.optimize_for == inference_plan.THIS_CPU
            precision = inference_plan.resolve_precision(precision or ("auto" if this_cpu else "float32"))
    except ValueError as error:
        raise ExportError(str(error)) from None
    label_names = options.label_names
    if not label_names and spec.uses_labels:
        label_names = release_label_names(init_checkpoint, log)
        options = dataclasses.replace(options, label_names=label_names)
    multi_label = release_multi_label(init_checkpoint, task, log)
    if multi_label is not None:
        if options.threshold is None:
            options = dataclasses.replace(options, threshold=multi_label.thresholds)
        else:
            log(f"thresholds given, in place of the release's: {options.threshold}")
        if not label_names and multi_label.labels:
            label_names = multi_label.labels
            options = dataclasses.replace(options, label_names=label_names)
    if options.long_text is None and spec.long_texts:
        options = dataclasses.replace(options, long_text=release_long_text(init_checkpoint, log))
    model = spec.build_model(config, len(label_names) if label_names else num_labels,
                             dtype=inference_plan.DTYPE_POLICIES[compute_precision(precision)])
    report = load_original_checkpoint(model, init_checkpoint, allow_fresh=spec.export_optional)
    log(f"{init_checkpoint}: {report.summary()}")
    log(f"computing in {precision} (CPU: {hardware.cpu_description()}; {hardware.onednn_description()})")
    return export_saved_model(model, task, vocab_file, export_dir, dataclasses.replace(options, precision=precision),
                              log=log)
