#!/usr/bin/env python
r"""Distills a fine-tuned classifier into a shallower, faster one (DistilBERT's recipe).

The teacher is what `bert-run-classifier --do_train` wrote (or any release
with a classification head and its `label_list.txt`), given by
`--teacher_dir`. The student is the teacher's configuration with
`--num_hidden_layers` layers (default: half), starting from the teacher's
embeddings, every (n/k)-th layer, pooler and head, and trained on the
dataset's train split (the data flags are run_classifier's) plus the lines
of `--unlabeled_file`, against the teacher's class distribution at
`--temperature`, the labels, and the teacher's last-layer [CLS] state.

`--output_dir` then holds a release of the student (`model.ckpt`, its own
`bert_config.json`, `vocab.txt`, `label_list.txt`), which
`bert-run-classifier --do_eval/--do_predict`, `bert-export` and
`TextClassifier.from_release` take as any other; with `--do_eval`,
`eval_results.txt` (the student, run_classifier's metrics) and
`teacher_eval_results.txt` (the teacher, on the same dev split). Rerunning
the same command after an interruption, even kill -9, continues from the
newest `model.ckpt-<step>`.

Example:
    bert-distill --teacher_dir=/tmp/sentiment --task_name=csv \
      --data_dir=data/sentiment --unlabeled_file=more_reviews.txt \
      --num_hidden_layers=3 --do_eval --output_dir=/tmp/sentiment_3_layers
"""

import sys

from absl import flags

from keras_bert_impl.cli import (
    FlagError,
    check_fine_tuning_flags,
    classification_dataset_options,
    define_classification_data_flags,
    define_fine_tuning_flags,
    fine_tuning_run,
    parse_flags,
    quiet_tensorflow,
    require,
    require_finite_positive,
    require_positive,
    run_tool,
)

# The release flags that --teacher_dir fills in.
_TEACHER_FILES = ("bert_config_file", "vocab_file", "init_checkpoint")


def define_flags(fv):
    define = dict(flag_values=fv)
    flags.DEFINE_string("teacher_dir", None, "The fine-tuned classifier: a release directory with label_list.txt "
                        "(what bert-run-classifier --do_train writes), or a checkpoint prefix in one.", **define)
    flags.DEFINE_string("task_name", None, "As run_classifier's: the dataset whose train split the student learns "
                        "from (cola, mrpc, ..., csv, tsv, jsonl, glue/<name>, a TFDS dataset).", **define)
    flags.DEFINE_string("data_dir", None, "The dataset's directory (the TFDS data directory for TFDS datasets).",
                        **define)
    flags.DEFINE_string("unlabeled_file", None, "More training texts, one per line (UTF-8), without labels: the "
                        "teacher labels them.", **define)
    flags.DEFINE_integer("num_hidden_layers", None, "The student's layers (default: half the teacher's).", **define)
    flags.DEFINE_float("temperature", 2.0, "Temperature of the teacher's soft targets.", **define)
    flags.DEFINE_float("soft_weight", 1.0, "Weight of the soft-target loss (0: none).", **define)
    flags.DEFINE_float("hard_weight", 1.0, "Weight of the labels' loss (0: none).", **define)
    flags.DEFINE_float("hidden_weight", 1.0, "Weight of the [CLS]-state cosine loss (0: none).", **define)
    flags.DEFINE_boolean("do_train", True, "Distill (--nodo_train: evaluate or predict the student in "
                         "--output_dir).", **define)
    flags.DEFINE_boolean("do_eval", False, "Evaluate the student and the teacher on the dev split.", **define)
    flags.DEFINE_boolean("do_predict", False, "Predict the test split with the student.", **define)
    define_fine_tuning_flags(fv)
    flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.", **define)
    flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.", **define)
    define_classification_data_flags(fv)


def main(argv=None):
    fv = parse_flags(define_flags, argv, prog="distill", description=__doc__)
    require(fv, "teacher_dir", "task_name", "data_dir", "output_dir")
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
    options = classification_dataset_options(fv)

    from keras_bert_impl.checkpoints.release import find_release, infer_do_lower_case

    teacher = find_release(fv.teacher_dir)
    fv.bert_config_file, fv.vocab_file, fv.init_checkpoint = (
        teacher.bert_config_file, teacher.vocab_file, teacher.checkpoint)
    if not fv["do_lower_case"].present:
        fv.do_lower_case = infer_do_lower_case(teacher.vocab_file, teacher.checkpoint)
    check_fine_tuning_flags(fv)
    quiet_tensorflow()

    from keras_bert_impl.data.classification_datasets import get_dataset
    from keras_bert_impl.jobs.run_fine_tuning import run_fine_tuning
    from keras_bert_impl.tasks.distillation import ClassifierDistillation, DistillationOptions
    from keras_bert_impl.training.fine_tuning import log_to_stderr

    run_fine_tuning(
        ClassifierDistillation(
            get_dataset(fv.task_name, **options), fv.data_dir, unlabeled_file=fv.unlabeled_file,
            options=DistillationOptions(
                num_hidden_layers=fv.num_hidden_layers, temperature=fv.temperature, soft_weight=fv.soft_weight,
                hard_weight=fv.hard_weight, hidden_weight=fv.hidden_weight,
            ),
        ),
        fine_tuning_run(fv),
        log=log_to_stderr("distill"),
    )


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
