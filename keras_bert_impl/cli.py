"""What every command-line tool shares: absl flags, as the original scripts
use them, and bad input reported as one line on stderr with an exit code.

Each tool defines its flags on a fresh `absl.flags.FlagValues` (never the
process-wide `FLAGS`), so tools can run one after another, or side by side
in one process (as the tests do), with no state carried over. absl gives
`--flagfile`, `--undefok`, `--noflag` booleans and exact flag names (no
prefixes); `--help`/`--helpfull` list every flag with its default.

Example:
>>> from absl import flags
>>> def define(fv):
...     flags.DEFINE_integer("max_seq_length", 128, "Sequence length.", flag_values=fv)
...     flags.DEFINE_boolean("do_train", False, "Train.", flag_values=fv)
>>> fv = parse_flags(define, ["--max_seq_length=64", "--do_train"], prog="tool")
>>> fv.max_seq_length, fv.do_train
(64, True)
"""

import os
import sys

from absl import flags

from keras_bert_impl.errors import BertError
from keras_bert_impl.io import check_output_dir

# Exit codes: 2 for a bad flag, 1 for bad input data or files.
EXIT_BAD_FLAG = 2
EXIT_BAD_INPUT = 1
_HELP_FLAGS = ("help", "helpshort", "helpfull")
# The original scripts' TPU flags: accepted so their command lines run as
# they are; a TPU is reached through --strategy=tpu (or --use_tpu).
TPU_FLAG_HELP = "Accepted for the original's command lines; no effect here."


class FlagError(BertError, ValueError):
    """A flag that is unknown, missing, or has a value the tool cannot take."""


def quiet_tensorflow():
    """Silences TensorFlow's C++ start-up logs unless the user set the level."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def parse_flags(define, argv=None, prog=None, description=""):
    """Defines a tool's flags on a fresh `FlagValues` and parses `argv`.

    Args:
        define: `define(flag_values)` adds the tool's flags.
        argv: The arguments without the program name (default `sys.argv[1:]`).
        prog: The tool's name, for help and messages.
        description: What the tool does, printed above `--help`.

    Returns:
        The parsed `FlagValues`; read values as attributes (`fv.output_dir`).

    Raises:
        FlagError: an unknown flag, a bad value, or a positional argument.
        SystemExit: (0) after printing the help for `--help`/`--helpfull`.
    """
    prog = prog or os.path.basename(sys.argv[0])
    argv = list(sys.argv[1:] if argv is None else argv)
    fv = flags.FlagValues()
    define(fv)
    for name in _HELP_FLAGS:
        flags.DEFINE_boolean(name, False, "Show the flags of this tool and exit.", flag_values=fv)
    if "-h" in argv or "-?" in argv:
        argv = ["--help"]
    try:
        rest = fv([prog] + argv)
    except flags.Error as error:
        raise FlagError(str(error).splitlines()[0]) from None
    if any(fv[name].value for name in _HELP_FLAGS):
        print(f"{prog}: {description}\n\nflags:\n{fv.get_help(include_special_flags=True)}")
        sys.exit(0)
    if len(rest) > 1:
        raise FlagError(f"unexpected positional arguments: {' '.join(rest[1:])}")
    return fv


def parse_flags_with_pipeline_args(define, argv=None, prog=None, description=""):
    """`parse_flags` for a tool with `--beam`: with `--beam`, the flags the tool does not define are Beam's.

    Returns:
        `(flag values, pipeline args)`: the flags the tool does not know
        (`--runner=DataflowRunner --project=...`) as Beam pipeline options
        with `--beam`; without it they are refused as by `parse_flags`.
    """
    prog = prog or os.path.basename(sys.argv[0])
    argv = list(sys.argv[1:] if argv is None else argv)
    probe = flags.FlagValues()
    define(probe)
    try:
        rest = probe([prog] + argv, known_only=True)[1:]
    except flags.Error as error:
        raise FlagError(str(error).splitlines()[0]) from None
    help_asked = any(arg.lstrip("-").split("=")[0] in (*_HELP_FLAGS, "h", "?") for arg in rest)
    if not probe.beam or help_asked:
        return parse_flags(define, argv, prog=prog, description=description), []
    return probe, rest


def require(fv, *names):
    """Raises `FlagError` naming every flag of `names` left unset or empty."""
    missing = [f"--{name}" for name in names if fv[name].value in (None, "")]
    if missing:
        raise FlagError(f"missing required flag(s): {', '.join(missing)}")


def require_positive(fv, *names):
    """Raises `FlagError` for the first flag of `names` whose value is below 1."""
    for name in names:
        if fv[name].value < 1:
            raise FlagError(f"--{name} must be positive, got {fv[name].value}")


def parse_label_list(value, flag="--labels"):
    """A comma-separated list of two or more distinct, non-empty labels."""
    labels = [label.strip() for label in value.split(",")]
    if len(labels) < 2 or len(set(labels)) != len(labels) or not all(labels):
        raise FlagError(f"{flag} must list two or more distinct labels, got {value!r}")
    return labels


def define_tpu_flags(fv, names=("tpu_zone", "gcp_project", "master", "num_tpu_cores", "iterations_per_loop")):
    """The original's TPU flags that have no effect here, with their types and defaults."""
    for name in names:
        if name in ("num_tpu_cores", "iterations_per_loop"):
            flags.DEFINE_integer(name, 8 if name == "num_tpu_cores" else 1000, TPU_FLAG_HELP, flag_values=fv)
        else:
            flags.DEFINE_string(name, None, TPU_FLAG_HELP, flag_values=fv)


_COLUMN_FLAGS = ("text_a_column", "text_b_column", "label_column", "labels")
# TFDS flag -> get_dataset option.
_TFDS_FEATURE_FLAGS = {
    "tfds_text_feature": "text_a_feature",
    "tfds_text_b_feature": "text_b_feature",
    "tfds_label_feature": "label_feature",
}
_SPLIT_FLAGS = {"train_split": "train", "eval_split": "dev", "predict_split": "test"}


def define_classification_data_flags(fv):
    """run_classifier's flags for a dataset's columns, TFDS features and splits
    (`--task_name` and `--data_dir` are the tool's own), shared by the tools
    that read classification data (run_classifier, distill)."""
    define = dict(flag_values=fv)
    flags.DEFINE_string("text_a_column", None, "csv/tsv/jsonl tasks: column of the first text (default: text).", **define)
    flags.DEFINE_string("text_b_column", None, "csv/tsv/jsonl tasks: column of the second text (default: none).", **define)
    flags.DEFINE_string("label_column", None, "csv/tsv/jsonl tasks: column of the label (default: label).", **define)
    flags.DEFINE_string("labels", None, "csv/tsv/jsonl and --tfds_text_feature tasks: comma-separated label list (default: the ClassLabel's names for TFDS, else the train split's labels, sorted).", **define)
    flags.DEFINE_string("tfds_text_feature", None, "Makes --task_name a TFDS text classification dataset: the feature of its (first) text.", **define)
    flags.DEFINE_string("tfds_text_b_feature", None, "With --tfds_text_feature: the feature of the second text of pairs (default: none).", **define)
    flags.DEFINE_string("tfds_label_feature", None, "With --tfds_text_feature: the label's feature (default: label); a ClassLabel gives the label list, a float feature a regression.", **define)
    flags.DEFINE_string("train_split", None, "TFDS tasks: the split (or expression, e.g. train[:90%]) trained on (default: train).", **define)
    flags.DEFINE_string("eval_split", None, "TFDS tasks: the split evaluated (default: validation; glue/mnli: validation_matched).", **define)
    flags.DEFINE_string("predict_split", None, "TFDS tasks: the split predicted (default: test; glue/mnli: test_matched).", **define)


def classification_dataset_options(fv):
    """`get_dataset` options from the flags of `define_classification_data_flags`; flags that
    do not fit the dataset named by `--task_name` are refused."""
    from keras_bert_impl.data.classification_datasets import COLUMN_FORMATS, TFDS_DATASETS

    name = fv.task_name.strip().lower()

    def given(names):
        return [flag for flag in names if fv[flag].value is not None]

    tfds_text = fv.tfds_text_feature is not None
    if given(_TFDS_FEATURE_FLAGS) and not tfds_text:
        raise FlagError(f"--{given(_TFDS_FEATURE_FLAGS)[0]} needs --tfds_text_feature")
    if tfds_text and name in COLUMN_FORMATS:
        raise FlagError(f"--tfds_text_feature names a TFDS feature; --task_name {fv.task_name} reads files")
    # --labels also fixes the label list of a TFDS text task.
    column_flags = given(_COLUMN_FLAGS)
    misplaced = [flag for flag in column_flags if not (tfds_text and flag == "labels")]
    if misplaced and name not in COLUMN_FORMATS:
        raise FlagError(f"--{misplaced[0]} applies to --task_name csv, tsv or jsonl only")
    if given(_SPLIT_FLAGS) and not (tfds_text or name in TFDS_DATASETS):
        raise FlagError(f"--{given(_SPLIT_FLAGS)[0]} applies to TFDS tasks only (glue/<name> or --tfds_text_feature)")
    options = {flag: fv[flag].value for flag in column_flags}
    options.update({option: fv[flag].value for flag, option in _TFDS_FEATURE_FLAGS.items() if fv[flag].value is not None})
    if "labels" in options:
        options["labels"] = tuple(parse_label_list(options["labels"]))
    splits = {split: fv[flag].value for flag, split in _SPLIT_FLAGS.items() if fv[flag].value is not None}
    if splits:
        options["splits"] = splits
    return options


def define_multi_label_data_flags(fv, applies):
    """run_classifier's flags for how multi-label files name their labels, shared by the tools that read
    them (run_classifier --multi_label, distill of a multi-label teacher); `applies`: when, for the help."""
    define = dict(flag_values=fv)
    flags.DEFINE_list("label_columns", None, f"{applies}: one 0/1 column per label, named as the labels (instead of --label_column).", **define)
    flags.DEFINE_string("label_delimiter", ",", f"{applies}: between the label names in --label_column (default: labels; a JSON list in jsonl).", **define)


def multi_label_dataset(fv, options, reader="--multi_label"):
    """The `data.multi_label.MultiLabelDataset` that `define_multi_label_data_flags`' flags and
    `classification_dataset_options`' columns name (a csv/tsv/jsonl task); `reader`: what reads it, for
    the error.

    Raises:
        FlagError: another task, the labels named two ways, an empty delimiter.
    """
    from keras_bert_impl.data.classification_datasets import COLUMN_FORMATS
    from keras_bert_impl.data.multi_label import MultiLabelDataset

    name = fv.task_name.strip().lower()
    if name not in COLUMN_FORMATS:
        raise FlagError(f"{reader} reads csv, tsv or jsonl files; --task_name is {fv.task_name}")
    if fv.label_columns and fv.label_column:
        raise FlagError("--label_columns (0/1 columns) and --label_column (delimited names) name the labels two "
                        "ways: give one")
    if not fv.label_delimiter:
        raise FlagError("--label_delimiter must not be empty")
    columns = {key: value for key, value in options.items()
               if key in ("text_a_column", "text_b_column", "label_column", "labels")}
    return MultiLabelDataset(name, label_columns=tuple(fv.label_columns or ()), delimiter=fv.label_delimiter,
                             **columns)


def define_choice_column_flags(fv, label_column=True):
    """run_multiple_choice's flags for a file's context, choice and label columns, shared by the tools that read
    multiple-choice files (run_multiple_choice, distill); `label_column=False` where the tool defines
    `--label_column` already (distill, for classification data)."""
    define = dict(flag_values=fv)
    flags.DEFINE_string("context_column", None, "Column of the context (default: sent1).", **define)
    flags.DEFINE_list("choice_columns", None, "Columns of the choices, in order (default: ending0,...,ending3).", **define)
    flags.DEFINE_string("choices_column", None, "JSON lines: a column holding the list of choices (instead of --choice_columns).", **define)
    flags.DEFINE_string("choice_prefix_column", None, "Column put before each choice (default: sent2 for SWAG's columns, else none; \"\" for none).", **define)
    if label_column:
        flags.DEFINE_string("label_column", None, "Column of the right choice's index (default: label).", **define)


def choice_columns(fv):
    """The `ChoiceColumns` the flags of `define_choice_column_flags` name: SWAG's, with the flags given in place
    of its columns.

    Raises:
        FlagError: the choices named two ways.
    """
    from keras_bert_impl.data.multiple_choice import SWAG, ChoiceColumns

    if fv.choice_columns is not None and fv.choices_column is not None:
        raise FlagError("--choice_columns and --choices_column name the choices two ways: give one")
    own_choices = fv.choice_columns is not None or fv.choices_column is not None
    prefix = fv.choice_prefix_column if fv.choice_prefix_column is not None else (None if own_choices else
                                                                                   SWAG.choice_prefix_column)
    return ChoiceColumns(
        context_column=fv.context_column or SWAG.context_column,
        choice_columns=() if fv.choices_column else tuple(fv.choice_columns or SWAG.choice_columns),
        choices_column=fv.choices_column,
        choice_prefix_column=prefix or None,
        label_column=fv.label_column or SWAG.label_column,
    )


LONG_TEXT_FLAGS = ("long_text", "head_tokens", "window_stride", "window_pooling")


def define_long_text_flags(fv, default_help):
    """`--long_text`, `--head_tokens`, `--window_stride`, `--window_pooling` (`tokenization.long_text`),
    shared by run_classifier and export; `default_help` says what an unset `--long_text` means."""
    from keras_bert_impl.tokenization.long_text import LONG_TEXT_MODES, WINDOW_POOLINGS

    define = dict(flag_values=fv)
    flags.DEFINE_enum(
        "long_text", None, list(LONG_TEXT_MODES),
        "How a text longer than --max_seq_length is read: cut (the original: its first max_seq_length-2 word "
        "pieces), head_tail (its first --head_tokens and its last word pieces: Sun et al. 2019) or windows (windows "
        "of max_seq_length-2 word pieces every --window_stride, each trained with the text's label, their logits "
        f"pooled by --window_pooling at evaluation and prediction). Single texts only. {default_help}", **define)
    flags.DEFINE_integer("head_tokens", None, "With --long_text=head_tail: word pieces kept from the start, 0 to "
                         "max_seq_length-2; the tail is the rest (default max_seq_length/4: 128 of 510 at 512).",
                         **define)
    flags.DEFINE_integer("window_stride", None, "With --long_text=windows: word pieces from one window's start to the "
                         "next's, 1 to max_seq_length-2 (default max_seq_length/2).", **define)
    flags.DEFINE_enum("window_pooling", None, list(WINDOW_POOLINGS), "With --long_text=windows: how a text's "
                      "windows' logits are pooled (default mean).", **define)


def long_text_flag_options(fv):
    """The `LongTextOptions` the long-text flags give, checked against `--max_seq_length`; None where
    `--long_text` is not given (the tool's default applies then).

    Raises:
        FlagError: one line naming the flag (an option of another mode, a value out of range).
    """
    from keras_bert_impl.tokenization.long_text import LongTextOptions

    if fv.long_text is None:
        stray = [name for name in LONG_TEXT_FLAGS[1:] if fv[name].value is not None]
        if stray:
            raise FlagError(f"--{stray[0]} needs --long_text (head_tail or windows)")
        return None
    options = LongTextOptions(fv.long_text, fv.head_tokens, fv.window_stride, fv.window_pooling)
    try:
        options.resolved(fv.max_seq_length, flag_prefix="--")
    except ValueError as error:
        raise FlagError(str(error)) from None
    return options


def define_fine_tuning_flags(fv, default_max_seq_length=128):
    """The original fine-tuning scripts' release and training flags, plus
    `--strategy` and `--seed`, shared by run_classifier, run_squad and
    run_ner."""
    define = dict(flag_values=fv)
    flags.DEFINE_string("bert_config_file", None, "The original bert_config.json.", **define)
    flags.DEFINE_string("vocab_file", None, "vocab.txt the model was trained on.", **define)
    flags.DEFINE_string("output_dir", None, "Where checkpoints, logs and results are written.", **define)
    flags.DEFINE_string("model_dir", None, "A release directory (a variant's from bert-convert-hf too), or a named "
        "release such as hf://ORG/NAME[@REVISION] (docs/SOURCES.md): fills in "
        "--bert_config_file, --vocab_file (its tokenizer's first file: vocab.txt, vocab.json or spiece.model) and "
        "--init_checkpoint where not given.", **define)
    flags.DEFINE_string("init_checkpoint", None, "Original-format checkpoint to start from (e.g. bert_model.ckpt), or a .keras model file holding our "
        "BertModel (loaded in safe_mode), or a named release such as hf://ORG/NAME (docs/SOURCES.md), which fills in "
        "--bert_config_file and --vocab_file too.", **define)
    flags.DEFINE_boolean("do_lower_case", True, "Lower-case the input; must match the checkpoint.", **define)
    flags.DEFINE_integer("max_seq_length", default_max_seq_length, "Sequence length after WordPiece.", **define)
    flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.", **define)
    flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.", **define)
    flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.", **define)
    flags.DEFINE_float("warmup_proportion", 0.1, "Proportion of training for linear learning rate warmup.", **define)
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.", **define)
    flags.DEFINE_boolean("use_tpu", False, "Same as --strategy=tpu.", **define)
    flags.DEFINE_string("tpu_name", None, "TPU name or grpc:// address for --strategy=tpu.", **define)
    define_tpu_flags(fv)
    flags.DEFINE_string("strategy", "default", "default, one_device, mirrored, multi_worker_mirrored or tpu.", **define)
    flags.DEFINE_integer("seed", 12345, "Seed of initialisation, dropout and shuffling.", **define)
    flags.DEFINE_boolean(
        "real_tokens_only", True,
        "Cut each batch after its longest row, so training, evaluation and prediction compute on real "
        "tokens, wherever the results equal the full-width ones (classification and tagging; SQuAD keeps "
        "the full width: its training loss covers the padding, and its n-best search ranks the padding's logits). "
        "--noreal_tokens_only computes every batch at --max_seq_length as the original.", **define,
    )
    flags.DEFINE_boolean(
        "allow_changed_settings", False,
        "Resume from the checkpoints in --output_dir even though they were trained with other settings "
        "(learning rate, batch size, epochs, data size, sequence length, seed); without it such a rerun is "
        "refused, naming each change.", **define,
    )


def require_finite_positive(fv, *names):
    """Refuses NaN, infinite, zero or negative values of the float flags `names`.

    Example:
    >>> fv = flags.FlagValues()
    >>> _ = flags.DEFINE_float("learning_rate", float("nan"), "", flag_values=fv)
    >>> fv(["prog"]) and require_finite_positive(fv, "learning_rate")
    Traceback (most recent call last):
    ...
    keras_bert_impl.cli.FlagError: --learning_rate must be a finite number above 0, got nan
    """
    import math

    for name in names:
        value = fv[name].value
        if not (math.isfinite(value) and value > 0):
            raise FlagError(f"--{name} must be a finite number above 0, got {value}")


def fill_release_flags(fv, source=None):
    """Fills in `--bert_config_file`, `--vocab_file` and `--init_checkpoint`, where not given, from the
    release `source` names (a directory, or a named source such as `hf://ORG/NAME`, fetched into the cache).

    Without `source`, an `--init_checkpoint` that is a named source names the release.
    """
    from keras_bert_impl.checkpoints.sources import is_named_source

    if not source:
        if not is_named_source(fv.init_checkpoint):
            return
        source, fv.init_checkpoint = fv.init_checkpoint, None
    from keras_bert_impl.checkpoints.sources import find_release

    files = find_release(source)
    fv.bert_config_file = fv.bert_config_file or files.bert_config_file
    fv.vocab_file = fv.vocab_file or files.vocab_file
    fv.init_checkpoint = fv.init_checkpoint or files.checkpoint


def check_fine_tuning_flags(fv):
    """Values the original would only trip over later; `--use_tpu` selects the TPU strategy;
    `--model_dir` fills in the release's files."""
    fill_release_flags(fv, fv.model_dir)
    require(fv, "vocab_file", "bert_config_file", "output_dir")
    check_output_dir(fv.output_dir, "--output_dir")
    require_positive(fv, "train_batch_size", "save_checkpoints_steps")
    require_finite_positive(fv, "learning_rate")
    if not fv.num_train_epochs > 0:
        raise FlagError(f"--num_train_epochs must be positive, got {fv.num_train_epochs}")
    if not 0.0 <= fv.warmup_proportion <= 1.0:
        raise FlagError(f"--warmup_proportion must lie in [0, 1], got {fv.warmup_proportion}")
    if fv.use_tpu:
        fv.strategy = "tpu"


def fine_tuning_run(fv):
    """The `FineTuningRun` of a fine-tuning tool's flags (those it defines: run_squad has no `--do_eval`)."""
    import dataclasses

    from keras_bert_impl.training.fine_tuning import FineTuningRun, FineTuningSettings

    names = [field.name for field in dataclasses.fields(FineTuningRun) if field.name in fv]
    return FineTuningRun(
        training=FineTuningSettings(**flag_values(fv, FineTuningSettings.field_names())), **flag_values(fv, names)
    )


def flag_values(fv, names):
    """`{name: value}` of the flags `names`, to pass on as keyword arguments."""
    return {name: fv[name].value for name in names}


# TensorFlow's error codes for what the machine, not the program, did wrong:
# a full disk (RESOURCE_EXHAUSTED), a file gone or not allowed, a damaged
# file, a file system that did not answer.
_ENVIRONMENT_ERROR_CODES = ("RESOURCE_EXHAUSTED", "PERMISSION_DENIED", "NOT_FOUND", "DATA_LOSS", "UNAVAILABLE")


def _environment_error(error):
    """The first line of a TensorFlow file-system error's message, or None for any other error."""
    tf = sys.modules.get("tensorflow")
    errors = getattr(tf, "errors", None)
    if errors is None or not isinstance(error, errors.OpError):
        return None
    codes = {getattr(errors, name) for name in _ENVIRONMENT_ERROR_CODES}
    if error.error_code not in codes:
        return None
    lines = [line.strip() for line in (error.message or "").splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def run_tool(main, argv=None, prog=None):
    """Runs `main(argv)`; a `BertError`, an OS error or a TensorFlow file-system
    error (a full disk while a checkpoint is written) becomes one stderr line.

    Returns:
        The process exit code: 0, `EXIT_BAD_FLAG` for a `FlagError`,
        `EXIT_BAD_INPUT` for any other bad input, 130 when interrupted.
    """
    prog = prog or os.path.basename(sys.argv[0])
    try:
        main(argv)
    except FlagError as e:
        print(f"{prog}: error: {e} (see --help)", file=sys.stderr)
        return EXIT_BAD_FLAG
    except BertError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as e:
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        print(f"{prog}: error: {where}{e.strerror or e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as e:  # noqa: BLE001: TensorFlow's file-system errors are no OSError
        message = _environment_error(e)
        if message is None:
            raise
        print(f"{prog}: error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    return 0
