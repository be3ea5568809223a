#!/usr/bin/env python
r"""Distills a fine-tuned model into a shallower, faster one (DistilBERT's recipe).

The teacher is a release given by `--teacher_dir`: what `bert-run-classifier`,
`bert-run-squad`, `bert-run-ner` or `bert-run-multiple-choice --do_train`
wrote for `--task=classifier` (the default), `squad`, `ner` or
`multiple_choice`, or any release for `--task=general`. The
student is the teacher's configuration with `--num_hidden_layers` layers
(default: half; a RoBERTa, ALBERT or DistilBERT teacher's student is of that
variant, with its tokenizer files), starting from the teacher's embeddings,
every (n/k)-th layer (ALBERT: its groups), pooler and head, and trained on
the task's training data (the data flags are those of the task's own tool)
against the teacher's outputs at `--temperature` (class distribution;
start/end positions; tag per word), the labels, and the teacher's top-layer
states (cosine distance):

* `--task=classifier`: run_classifier's data flags, plus `--unlabeled_file`
  (one text per line: the teacher labels them). The teacher's targets are
  computed once, before training. A multi-label teacher (its release has
  `multi_label.json`: `bert-run-classifier --multi_label`) reads csv, tsv or
  jsonl files as `--multi_label` does (`--label_column` of names joined by
  `--label_delimiter`, or 0/1 `--label_columns`), of its labels only; its
  student learns each label's sigmoid at `--temperature` and the 0/1 labels,
  records the teacher's labels and thresholds (`multi_label.json`), and
  `--do_eval` writes micro/macro F1 and per-label scores at them.
* `--task=squad`, `--task=ner`: run_squad's / run_ner's data flags; the
  teacher runs beside the student on each batch.
* `--task=multiple_choice`: run_multiple_choice's data flags (`--data_dir`
  or the files, the column flags); the teacher's choice distributions and
  [CLS] states are computed once, before training.
* `--task=general`: `--input_file`, raw text as create_pretraining_data reads
  it (one sentence per line, a blank line between documents), masked as it
  masks: every student layer learns the states of a teacher layer, and where
  the teacher has `cls/predictions`, its masked-LM distribution and the
  masked words. Training only; the student fine-tunes as any release.

`--output_dir` then holds a release of the student (`model.ckpt`, its own
`bert_config.json`, `vocab.txt`, and `label_list.txt` for tasks with labels),
which the task's tool (`--do_eval/--do_predict`), `bert-export` and
`from_release` take as any other. `--do_eval` (classifier, ner) and
`--do_predict` write the student's results as the task's tool does, and with
`--do_eval` (or SQuAD's `--do_predict`) the teacher's on the same data in
`--output_dir/teacher/`. Rerunning the same command after an interruption,
even kill -9, continues from the newest `model.ckpt-<step>`; until the run
ends, `--output_dir` holds no `bert_config.json`, so it is never taken for a
release.

Example:
    bert-distill --teacher_dir=/tmp/sentiment --task_name=csv \
      --data_dir=data/sentiment --unlabeled_file=more_reviews.txt \
      --num_hidden_layers=3 --do_eval --output_dir=/tmp/sentiment_3_layers

    bert-distill --task=squad --teacher_dir=/tmp/squad_base \
      --train_file=$SQUAD_DIR/train-v1.1.json --do_predict \
      --predict_file=$SQUAD_DIR/dev-v1.1.json --output_dir=/tmp/squad_6

    bert-distill --task=general --teacher_dir=$BERT --input_file=corpus.txt \
      --num_hidden_layers=6 --output_dir=/tmp/bert_6_layers
"""

import os
import sys

from absl import flags

from keras_bert_impl.cli import (
    FlagError,
    check_fine_tuning_flags,
    classification_dataset_options,
    choice_columns,
    define_choice_column_flags,
    define_classification_data_flags,
    define_fine_tuning_flags,
    define_multi_label_data_flags,
    fine_tuning_run,
    multi_label_dataset,
    parse_flags,
    parse_label_list,
    quiet_tensorflow,
    require,
    require_finite_positive,
    require_positive,
    run_tool,
)

# The release flags that --teacher_dir fills in.
_TEACHER_FILES = ("bert_config_file", "vocab_file", "init_checkpoint")
# Each --task's data flags (the fields of its spec, but the classifier's: its dataset is made of them).
TASK_FLAGS = {
    "classifier": ("task_name", "data_dir", "unlabeled_file", "text_a_column", "text_b_column", "label_column",
                   "labels", "tfds_text_feature", "tfds_text_b_feature", "tfds_label_feature", "train_split",
                   "eval_split", "predict_split", "label_columns", "label_delimiter"),
    "squad": ("train_file", "predict_file", "doc_stride", "max_query_length", "n_best_size", "max_answer_length",
              "verbose_logging", "version_2_with_negative", "null_score_diff_threshold", "tfds_name", "data_dir",
              "train_split", "predict_split"),
    "ner": ("train_file", "eval_file", "predict_file", "labels", "tfds_name", "data_dir", "train_split",
            "eval_split", "predict_split"),
    "multiple_choice": ("data_dir", "train_file", "eval_file", "predict_file", "context_column", "choice_columns",
                        "choices_column", "choice_prefix_column", "label_column"),
    "general": ("input_file", "max_predictions_per_seq", "masked_lm_prob", "short_seq_prob", "dupe_factor",
                "do_whole_word_mask"),
}
# What each task's run can do (run_squad has no --do_eval: its prediction is scored).
TASK_STEPS = {"squad": ("do_train", "do_predict"), "general": ("do_train",)}


def define_flags(fv):
    define = dict(flag_values=fv)
    flags.DEFINE_string("task", "classifier", "What the teacher was fine-tuned for: classifier, squad, ner, "
                        "multiple_choice; or general: a student of any release, from raw text.", **define)
    flags.DEFINE_string("teacher_dir", None, "The teacher: a release directory (what bert-run-classifier, "
                        "bert-run-squad or bert-run-ner --do_train writes; any release for --task=general), or a "
                        "checkpoint prefix in one, or a named release such as hf://ORG/NAME (docs/SOURCES.md).", **define)
    flags.DEFINE_string("task_name", None, "As run_classifier's: the dataset whose train split the student learns "
                        "from (cola, mrpc, ..., csv, tsv, jsonl, glue/<name>, a TFDS dataset).", **define)
    flags.DEFINE_string("data_dir", None, "The dataset's directory (the TFDS data directory for TFDS datasets).",
                        **define)
    flags.DEFINE_string("unlabeled_file", None, "More training texts, one per line (UTF-8), without labels: the "
                        "teacher labels them.", **define)
    # --task=squad and ner: run_squad's and run_ner's flags; unset, the spec's defaults (those tools' own).
    flags.DEFINE_string("train_file", None, "squad, ner, multiple_choice: SQuAD json / CoNLL file / SWAG-format "
                        "file to train on.", **define)
    flags.DEFINE_string("eval_file", None, "ner, multiple_choice: CoNLL file / SWAG-format file with gold labels to "
                        "evaluate.", **define)
    flags.DEFINE_string("predict_file", None, "squad, ner, multiple_choice: SQuAD json / CoNLL file / SWAG-format "
                        "file to predict.", **define)
    flags.DEFINE_string("tfds_name", None, "squad, ner: instead of the files, a TFDS dataset prepared in "
                        "--data_dir.", **define)
    flags.DEFINE_integer("doc_stride", None, "squad: stride between a document's windows (default 128).", **define)
    flags.DEFINE_integer("max_query_length", None, "squad: tokens of a question at most (default 64).", **define)
    flags.DEFINE_integer("n_best_size", None, "squad: answers per question in nbest_predictions.json (default 20).",
                         **define)
    flags.DEFINE_integer("max_answer_length", None, "squad: pieces of an answer at most (default 30).", **define)
    flags.DEFINE_boolean("verbose_logging", False, "squad: list every skipped training question.", **define)
    flags.DEFINE_boolean("version_2_with_negative", False, "squad: SQuAD v2.0.", **define)
    flags.DEFINE_float("null_score_diff_threshold", None, "squad v2.0: predict no answer above it (default 0).",
                       **define)
    # --task=general: create_pretraining_data's flags.
    flags.DEFINE_string("input_file", None, "general: raw text, one sentence per line, a blank line between "
                        "documents (UTF-8).", **define)
    flags.DEFINE_integer("max_predictions_per_seq", None, "general: masked positions per sequence at most "
                         "(default 20).", **define)
    flags.DEFINE_float("masked_lm_prob", None, "general: share of the tokens masked (default 0.15).", **define)
    flags.DEFINE_float("short_seq_prob", None, "general: share of shorter sequences (default 0.1).", **define)
    flags.DEFINE_integer("dupe_factor", None, "general: passes over the text, each masked anew (default 1).",
                         **define)
    flags.DEFINE_boolean("do_whole_word_mask", False, "general: mask whole words.", **define)
    flags.DEFINE_integer("num_hidden_layers", None, "The student's layers (default: half the teacher's).", **define)
    flags.DEFINE_float("temperature", 2.0, "Temperature of the teacher's soft targets.", **define)
    flags.DEFINE_float("soft_weight", 1.0, "Weight of the soft-target loss (0: none).", **define)
    flags.DEFINE_float("hard_weight", 1.0, "Weight of the labels' loss (0: none).", **define)
    flags.DEFINE_float("hidden_weight", 1.0, "Weight of the hidden-state cosine loss (0: none).", **define)
    flags.DEFINE_boolean("do_train", True, "Distill (--nodo_train: evaluate or predict the student in "
                         "--output_dir).", **define)
    flags.DEFINE_boolean("do_eval", False, "classifier, ner, multiple_choice: evaluate the student and the teacher on the dev "
                         "split.", **define)
    flags.DEFINE_boolean("do_predict", False, "classifier, ner, multiple_choice, squad: predict the test split (squad: "
                         "--predict_file, the teacher too) with the student.", **define)
    define_fine_tuning_flags(fv)
    flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.", **define)
    flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.", **define)
    define_classification_data_flags(fv)
    define_multi_label_data_flags(fv, "A multi-label teacher (classifier)")
    # --task=multiple_choice: run_multiple_choice's columns (--label_column is the classification flag's).
    define_choice_column_flags(fv, label_column=False)


def main(argv=None):
    fv = parse_flags(define_flags, argv, prog="distill", description=__doc__)
    if fv.task not in TASK_FLAGS:
        raise FlagError(f"--task must be one of {', '.join(TASK_FLAGS)}, got {fv.task!r}")
    misplaced = [name for flags_of_task in TASK_FLAGS.values() for name in flags_of_task
                 if fv[name].present and name not in TASK_FLAGS[fv.task]]
    if misplaced:
        raise FlagError(f"--{misplaced[0]} does not apply to --task={fv.task}")
    steps = TASK_STEPS.get(fv.task, ("do_train", "do_eval", "do_predict"))
    for step in ("do_eval", "do_predict"):
        if fv[step].value and step not in steps:
            raise FlagError(f"--{step} does not apply to --task={fv.task}")
    require(fv, "teacher_dir", "output_dir", *task_required_flags(fv))
    given = [f"--{name}" for name in _TEACHER_FILES if fv[name].present]
    if given:
        raise FlagError(f"{', '.join(given)}: the teacher's files come from --teacher_dir")
    if not (fv.do_train or fv.do_eval or fv.do_predict):
        raise FlagError("at least one of --do_train, --do_eval or --do_predict must be true")
    if fv.num_hidden_layers is not None and fv.num_hidden_layers < 1:
        raise FlagError(f"--num_hidden_layers must be at least 1, got {fv.num_hidden_layers}")
    require_finite_positive(fv, "temperature")
    for name in ("soft_weight", "hard_weight", "hidden_weight"):
        if not 0 <= fv[name].value < float("inf"):
            raise FlagError(f"--{name} must be a finite number >= 0, got {fv[name].value}")
    require_positive(fv, "eval_batch_size", "predict_batch_size")
    options = classification_dataset_options(fv) if fv.task == "classifier" else None
    columns = choice_columns(fv) if fv.task == "multiple_choice" else None
    quiet_tensorflow()  # The task registry imports TensorFlow.

    from keras_bert_impl.checkpoints.release import infer_do_lower_case, read_release_multi_label
    from keras_bert_impl.checkpoints.sources import find_release
    from keras_bert_impl.tasks.distillation import check_student_directory
    from keras_bert_impl.tasks.registry import get_distillation

    spec_class = get_distillation(fv.task)
    if not fv["max_seq_length"].present:
        fv.max_seq_length = spec_class.default_max_seq_length
    if fv.task == "squad" and fv.max_seq_length <= (fv.max_query_length or 64) + 3:
        raise FlagError(f"--max_seq_length ({fv.max_seq_length}) must be greater than --max_query_length "
                        f"({fv.max_query_length or 64}) + 3")
    teacher = find_release(fv.teacher_dir)
    multi_label = fv.task == "classifier" and read_release_multi_label(os.path.dirname(teacher.checkpoint))
    if not multi_label:
        given = [f"--{name}" for name in ("label_columns", "label_delimiter") if fv[name].present]
        if given:
            raise FlagError(f"{given[0]} applies to a multi-label teacher only (a release with multi_label.json)")
    dataset = multi_label_dataset(fv, options, "a multi-label teacher's student") if multi_label else None
    check_student_directory(fv.output_dir, teacher.bert_config_file)
    fv.bert_config_file, fv.vocab_file, fv.init_checkpoint = (
        teacher.bert_config_file, teacher.vocab_file, teacher.checkpoint)
    if not fv["do_lower_case"].present:
        from keras_bert_impl.tokenization.from_files import WORDPIECE, release_do_lower_case, vocab_file_kind

        if vocab_file_kind(teacher.vocab_file) == WORDPIECE:
            fv.do_lower_case = infer_do_lower_case(teacher.vocab_file, teacher.checkpoint)
        else:  # RoBERTa's byte-level BPE, ALBERT's SentencePiece: as their tokenizer_config.json says.
            fv.do_lower_case = release_do_lower_case(os.path.dirname(teacher.vocab_file))
    check_fine_tuning_flags(fv)

    from keras_bert_impl.data.classification_datasets import get_dataset
    from keras_bert_impl.jobs.run_fine_tuning import run_fine_tuning
    from keras_bert_impl.tasks.distillation import ClassifierDistillation, DistillationOptions, MultiLabelDistillation
    from keras_bert_impl.training.fine_tuning import log_to_stderr

    distillation = DistillationOptions(
        num_hidden_layers=fv.num_hidden_layers, temperature=fv.temperature, soft_weight=fv.soft_weight,
        hard_weight=fv.hard_weight, hidden_weight=fv.hidden_weight,
    )
    if multi_label:  # Its dataset is made of run_classifier --multi_label's data flags, its labels the teacher's.
        spec = MultiLabelDistillation(dataset, fv.data_dir, unlabeled_file=fv.unlabeled_file, options=distillation)
    elif spec_class is ClassifierDistillation:  # Its dataset is made of run_classifier's data flags.
        spec = ClassifierDistillation(get_dataset(fv.task_name, **options), fv.data_dir,
                                      unlabeled_file=fv.unlabeled_file, options=distillation)
    elif fv.task == "multiple_choice":  # Its files by split, and its columns, as run_multiple_choice takes them.
        files = {"train": fv.train_file, "dev": fv.eval_file, "test": fv.predict_file}
        spec = spec_class(fv.data_dir, {split: path for split, path in files.items() if path}, columns,
                          options=distillation)
    else:
        values = {name: fv[name].value for name in TASK_FLAGS[fv.task] if fv[name].present}
        if "labels" in values:
            values["labels"] = tuple(parse_label_list(values["labels"]))
        spec = spec_class(options=distillation, **values)
    run_fine_tuning(spec, fine_tuning_run(fv), log=log_to_stderr("distill"))


def task_required_flags(fv):
    """The data flags `--task` cannot do without, for the steps asked."""
    if fv.task == "classifier":
        return ("task_name", "data_dir")
    if fv.task == "general":
        return ("input_file",)
    if fv.tfds_name or (fv.task == "multiple_choice" and fv.data_dir):  # the split files in the directory
        return ("data_dir",)
    files = {"do_train": "train_file", "do_eval": "eval_file", "do_predict": "predict_file"}
    return tuple(files[step] for step in TASK_STEPS.get(fv.task, files) if fv[step].value)


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
