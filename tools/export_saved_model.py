#!/usr/bin/env python
"""Exports a BERT task model as a versioned SavedModel for TF Serving.

Writes `<export_dir>/<version>/` (next free integer version unless --version;
never overwrites) with signatures `serving_default` (raw `text`, tokenized
in-graph), `serve_text_pair` (`text`, `text_b`), `serve_ids` (ids/mask/segments)
and `serve_examples` (serialized tf.Example, tf-models feature names), for a
classifier `classify` and for a regression `regress` (TF Serving's `:classify`
and `:regress` methods; for --task=multiple_choice `serving_default` takes
`context` [batch] and `choices` [batch, num_choices] and `serve_ids` ids
[batch, num_choices, seq_length]), warmup requests in `assets.extra/`, and rewrites
`models.config` in the parent of --export_dir listing every model there, each
at `<serving_base_path>/<name>`. By default the export is float32 in stock
TensorFlow ops, which TF Serving runs on any CPU or GPU, whatever machine wrote
it; `--precision=bfloat16|int8` and `--optimize_for=this_cpu` (this CPU's
fastest form: bfloat16 where its bf16 units outrun float32, Dense kernels that
oneDNN packs once) are asked for by name. `assets.extra/export_metadata.json`
and the tool's last line say what the export needs to run well.
For `--task=multi_label`, `label_mask` holds the labels at or over each label's
threshold as the release records them (`multi_label.json`, written by
`bert-run-classifier --multi_label [--tune_threshold]`, `TextClassifier.save_release`
and `bert-convert-hf`), else 0.5, or `--threshold` (one probability for every
label, or one per label in label order: `--threshold=0.5,0.3,0.7`); a release
that records multi-label is refused as `--task=classifier`.

Example:
    bert-export --bert_config_file=release/bert_config.json \
      --init_checkpoint=out/model.ckpt-1000 --vocab_file=release/vocab.txt \
      --task=classifier --num_labels=2 --label_names=negative,positive \
      --max_seq_length=128 --export_dir=saved_models/sentiment
"""

import sys

from absl import flags

from keras_bert_impl.cli import (
    FlagError,
    define_long_text_flags,
    flag_values,
    long_text_flag_options,
    parse_flags,
    quiet_tensorflow,
    require,
    run_tool,
)
from keras_bert_impl.io import check_output_dir


def define_flags(fv):
    from keras_bert_impl.inference.plan import EXPORT_PRECISION_CHOICES, OPTIMIZE_FOR_CHOICES, PORTABLE
    from keras_bert_impl.tasks.spec import EXPORTED_TASKS  # not the registry: --help starts no TensorFlow

    define = dict(flag_values=fv)
    flags.DEFINE_string("bert_config_file", None, "bert_config.json (or give --model_dir).", **define)
    flags.DEFINE_string(
        "init_checkpoint", None,
        "Original-format checkpoint of the trained model, or a .keras model file holding our BertModel, "
        "loaded in safe_mode (or give --model_dir).", **define,
    )
    flags.DEFINE_string("vocab_file", None, "vocab.txt (or give --model_dir).", **define)
    flags.DEFINE_string("model_dir", None, "A directory written by our tools: bert_config.json, vocab.txt and its latest checkpoint; or a named "
                        "release such as hf://ORG/NAME[@REVISION] (docs/SOURCES.md).", **define)
    flags.DEFINE_boolean("do_lower_case", True, "Lower-case in the in-graph tokenizer; must match the model.", **define)
    flags.DEFINE_integer("max_seq_length", 128, "Padded length of every request.", **define)
    tasks = "; ".join(f"{name}: {description}" for name, description in EXPORTED_TASKS.items())
    flags.DEFINE_enum("task", None, list(EXPORTED_TASKS), f"What the SavedModel computes ({tasks}).", **define)
    flags.DEFINE_integer("num_labels", 2, "Classes of a classifier or tagger (where neither --label_names nor the "
                         "release's label_list.txt gives them).", **define)
    flags.DEFINE_list("label_names", None, "Comma-separated class names in class-id order (default: the "
                      "label_list.txt beside the checkpoint, which the fine-tuning tools and bert-distill write; "
                      "else 0..num_labels-1).", **define)
    flags.DEFINE_string("export_dir", None, "saved_models/<model_name>; versions are written below it.", **define)
    flags.DEFINE_integer("version", None, "Version number (default: the next free one).", **define)
    flags.DEFINE_enum(
        "precision", None, list(EXPORT_PRECISION_CHOICES),
        "What the export computes in (default float32, or with --optimize_for=this_cpu auto): float32; bfloat16 "
        "(weights held in bfloat16 but the LayerNorms', bfloat16 products; faster on CPUs with Intel AMX or AMD's "
        "AVX-512 bf16, slower than float32 without them, Intel's AVX-512 bf16 without AMX included); auto: "
        "bfloat16 where this CPU has amx_bf16 (or avx512_bf16 on AMD) and TensorFlow's oneDNN rewrites are on, "
        "else float32. int8: the encoder's Dense kernels in int8 (a scale per output channel), products on the "
        "CPU's int8 units through oneDNN (an op of stock x86 TensorFlow builds, CPU only); prints its agreement "
        "with float32. The choice is written to assets.extra/export_metadata.json.", **define,
    )
    flags.DEFINE_enum(
        "optimize_for", PORTABLE, list(OPTIMIZE_FOR_CHOICES),
        "portable: a graph of stock TensorFlow ops that TF Serving runs on any CPU or GPU, the same whatever "
        "machine exports it. this_cpu: this CPU's fastest form (--precision auto, the Dense kernels packed once "
        "by oneDNN or graph constants, LayerNorm and softmax in oneDNN's fused forms): export on the kind of CPU "
        "that will serve; it may need TensorFlow with oneDNN on x86 and no GPU (export_metadata.json's \"needs\").",
        **define,
    )
    flags.DEFINE_string(
        "calibration_file", None,
        "With --precision=int8: texts of the task, one a line, whose activations fix the input range of each int8 "
        "product (without it each batch's own range is used); the agreement with float32 is measured on them.",
        **define,
    )
    flags.DEFINE_float(
        "calibration_percentile", 99.999,
        "With --calibration_file: each int8 product's input range runs from this percentile of the values it took "
        "on the calibration texts to its complement (a few outliers then do not coarsen every other value's step; "
        "values beyond are clipped); 100: from the smallest to the largest value.", **define,
    )
    flags.DEFINE_float(
        "smoothing_alpha", 0.7,
        "With --calibration_file: how much of each input channel's spread the int8 products move into their "
        "kernels' rows before quantizing (SmoothQuant: x W = (x / s)(s W), folded into the export, no op more); "
        "0 turns it off. Its effect on agreement with float32: docs/BENCHMARKS.md, \"Smoothed activations\".",
        **define,
    )
    flags.DEFINE_float(
        "min_int8_agreement", None,
        "With --precision=int8: the least agreement with float32, measured on texts the calibration did not see "
        "(the warmup texts and built-in sentences), that is published: for a classifier the share of answers int8 "
        "keeps (default 0.95; a class float32 rates within 0.1 of its own counts as kept), else the mean cosine "
        "(default 0.98); below it no version is written. 0 publishes any.", **define,
    )
    flags.DEFINE_boolean(
        "skip_padding", None,
        "Run the encoder's per-token work on real tokens only when a batch has padding (a tf.cond per batch, "
        "stock ops; faster batches on a CPU, the same for one request: docs/BENCHMARKS.md). Default: on; with "
        "--optimize_for=this_cpu, on where no GPU or TPU is visible (there the gathers can cost more than the padding). Written to assets.extra/export_metadata.json.", **define,
    )
    flags.DEFINE_boolean(
        "constant_kernels", None,
        "Hold the Dense kernels as constants of the graph: oneDNN then packs them once and multiplies with its "
        "blocked kernels, on AMX tiles where the CPU has them (a larger saved_model.pb: the kernels in it; a process "
        "that loads it holds several copies of them: a float32 BERT-base 4.2 GB in TF Serving's loader, 6.8 GB in "
        "Python). Variables packed once (--packed_kernels) are as fast in a fraction of that. Default: off; "
        "with --optimize_for=this_cpu, on where no GPU or TPU is visible, they take at most 1 GiB and they are not "
        "packed. Written to assets.extra/export_metadata.json.", **define,
    )
    flags.DEFINE_boolean(
        "packed_kernels", None,
        "Keep the Dense kernels as variables and compute each Dense layer as oneDNN's fused product marked to pack "
        "its kernel once (_MklNativeFusedMatMul, is_filter_const): the speed of constant kernels in the memory of "
        "variables, with no server setting (docs/BENCHMARKS.md, 'Memory that holds'). The export then needs "
        "TensorFlow's oneDNN kernels, which every stock x86 TensorFlow and TF Serving has, on a CPU (no GPU "
        "kernel); the default (plain variables) is a graph of stock ops only, whose variables TF Serving started with "
        "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 packs once (only where every model the server runs is as ours, never "
        "where one trains). With --precision=int8 the int8 kernels are variables that its products "
        "(_QuantizedMatMul) pack once (--constant_kernels: int8 graph constants, several copies in memory). "
        "Default: on for int8, unless --constant_kernels; with --optimize_for=this_cpu also where TensorFlow's "
        "oneDNN kernels run this machine's graphs, in float32 and bfloat16. Written to assets.extra/export_metadata.json.", **define,
    )
    flags.DEFINE_boolean(
        "verify", True,
        "Before the new version is published, load it as TF Serving's loader does (a Session filled by the "
        "SavedModel's own restore op), run its warmup requests and compare their answers with the model's: a "
        "version TF Serving would refuse, or that answers otherwise, is not published. A few seconds, and the "
        "weights once more in memory meanwhile (--noverify skips it).", **define,
    )
    define_long_text_flags(fv, "Default: what the release records (its long_text.json, written by bert-run-classifier "
                               "--long_text and TextClassifier.save_release), else cut. The raw-text signature reads "
                               "texts so (windows: all of a request's windows in one batch, each text's logits "
                               "pooled); classifier, regression and multi_label only.")
    flags.DEFINE_list(
        "threshold", None,
        "--task=multi_label only: the probability at or over which a label is in label_mask, in place of the "
        "release's (multi_label.json, else 0.5): one number for every label, or one per label, comma-separated in "
        "label order, each in (0, 1). Written to assets.extra/export_metadata.json.", **define,
    )
    flags.DEFINE_string(
        "serving_base_path", "/models",
        "Where TF Serving sees the parent of --export_dir: models.config names each model's base_path "
        "<serving_base_path>/<name> (the tensorflow/serving docker image mounts models under /models).", **define,
    )


def main(argv=None):
    fv = parse_flags(define_flags, argv, prog="export_saved_model", description=__doc__)
    if fv.max_seq_length < 3:
        raise FlagError("--max_seq_length must be at least 3")
    if fv.calibration_file and fv.precision != "int8":
        raise FlagError("--calibration_file is for --precision=int8")
    if fv["calibration_percentile"].present and not fv.calibration_file:
        raise FlagError("--calibration_percentile is for --calibration_file")
    if fv["smoothing_alpha"].present and not fv.calibration_file:
        raise FlagError("--smoothing_alpha is for --calibration_file")
    if not 0.0 <= fv.smoothing_alpha <= 1.0:
        raise FlagError(f"--smoothing_alpha={fv.smoothing_alpha:g}: must be in [0, 1] (0: no smoothing)")
    if not 50.0 < fv.calibration_percentile <= 100.0:
        raise FlagError(f"--calibration_percentile={fv.calibration_percentile:g}: must be in (50, 100]")
    if fv.min_int8_agreement is not None and fv.precision != "int8":
        raise FlagError("--min_int8_agreement is for --precision=int8")
    if fv.min_int8_agreement is not None and not 0.0 <= fv.min_int8_agreement <= 1.0:
        raise FlagError(f"--min_int8_agreement={fv.min_int8_agreement:g}: must be in [0, 1]")
    long_text = long_text_flag_options(fv)  # A task that cuts long texts refuses it: ExportError.
    threshold = threshold_flag(fv)
    quiet_tensorflow()

    from keras_bert_impl.serving.export import ExportOptions, export_checkpoint, read_export_metadata, release_files
    from keras_bert_impl.training.fine_tuning import log_to_stderr

    fv.bert_config_file, fv.vocab_file, fv.init_checkpoint = release_files(
        fv.model_dir, fv.bert_config_file, fv.vocab_file, fv.init_checkpoint
    )
    require(fv, "bert_config_file", "init_checkpoint", "vocab_file", "task", "export_dir")
    check_output_dir(fv.export_dir, "--export_dir")
    log = log_to_stderr("export_saved_model")
    calibration_texts = None
    if fv.calibration_file:
        from keras_bert_impl.inference.int8_files import read_calibration_texts

        calibration_texts = read_calibration_texts(fv.calibration_file)
    options = ExportOptions(calibration_texts=calibration_texts, calibration_percentile=fv.calibration_percentile,
                            smoothing_alpha=fv.smoothing_alpha, long_text=long_text, threshold=threshold,
                            **flag_values(fv, (
        "do_lower_case", "max_seq_length", "label_names", "version", "serving_base_path", "precision", "skip_padding",
        "constant_kernels", "packed_kernels", "verify", "min_int8_agreement", "optimize_for",
    )))
    path = export_checkpoint(fv.task, fv.bert_config_file, fv.init_checkpoint, fv.vocab_file, fv.export_dir, options,
                             num_labels=fv.num_labels, log=log)
    log(f"wrote {path}: it needs {read_export_metadata(path)['needs']}")


def threshold_flag(fv):
    """`--threshold` as one float or a tuple of one per label; None where not given.

    Raises:
        FlagError: given for another task than multi_label, not numbers, or one outside (0, 1). (A count
            other than the labels' is refused by the export, which knows them.)
    """
    if fv.threshold is None:
        return None
    if fv.task not in (None, "multi_label"):  # None: --task is required, and said so below
        raise FlagError(f"--threshold is for --task=multi_label (a sigmoid per label), not --task={fv.task}")
    try:
        values = tuple(float(value) for value in fv.threshold)
    except ValueError:
        raise FlagError(f"--threshold={','.join(fv.threshold)}: give one number, or one per label, "
                        "comma-separated") from None
    outside = [value for value in values if not 0.0 < value < 1.0]
    if not values or outside:
        raise FlagError(f"--threshold={','.join(fv.threshold)}: each threshold is a probability in (0, 1)")
    return values[0] if len(values) == 1 else values


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
