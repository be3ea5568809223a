"""The tasks, by name: the one place that lists them.

Adding a task is one new module with its `TaskSpec` and one entry below in
`TASKS` (and, when it is fine-tuned by `jobs.run_fine_tuning`, its
`FineTuningSpec` in `FINE_TUNING`).

Example:
>>> exported_task_names()
('classifier', 'regression', 'span_qa', 'token_tagging', 'embeddings', 'fill_mask', 'multi_label', 'multiple_choice')
>>> tuple(FINE_TUNING)
('classifier', 'squad', 'ner', 'distill', 'multiple_choice')
>>> tuple(DISTILLATION)
('classifier', 'squad', 'ner', 'general', 'multiple_choice')
"""

from keras_bert_impl.errors import BertError
from keras_bert_impl.tasks import (
    classifier,
    distillation,
    embeddings,
    fill_mask,
    general_distillation,
    multi_label,
    multiple_choice,
    pretraining,
    span_qa,
    token_tagging,
)

TASKS = {
    spec.name: spec
    for spec in (
        classifier.CLASSIFIER,
        classifier.REGRESSION,
        span_qa.SPAN_QA,
        token_tagging.TOKEN_TAGGING,
        embeddings.EMBEDDINGS,
        fill_mask.FILL_MASK,
        pretraining.PRETRAINING,
        multi_label.MULTI_LABEL,
        multiple_choice.MULTIPLE_CHOICE,
    )
}

# The fine-tuning specs, by the name of the tool that runs them
# (bert-run-classifier, bert-run-squad, bert-run-ner, bert-distill, bert-run-multiple-choice;
# `multi_label.MultiLabelFineTuning` is bert-run-classifier's with --multi_label).
FINE_TUNING = {
    spec.name: spec
    for spec in (classifier.ClassifierFineTuning, span_qa.SquadFineTuning, token_tagging.TaggingFineTuning,
                 distillation.ClassifierDistillation, multiple_choice.MultipleChoiceFineTuning)
}

# The students bert-distill makes, by its --task: each a `DistillationSpec`
# on the task's fine-tuning spec ("distill" above is the first, the tool's default).
DISTILLATION = {
    spec.task: spec
    for spec in (distillation.ClassifierDistillation, span_qa.SquadDistillation, token_tagging.TaggingDistillation,
                 general_distillation.GeneralDistillation, multiple_choice.MultipleChoiceDistillation)
}


class UnknownTaskError(BertError, ValueError):
    """A task name that no spec has."""


def get_task(name):
    """The `TaskSpec` called `name`.

    Raises:
        UnknownTaskError: naming the tasks there are.
    """
    return _look_up(TASKS, name, "task")


def exported_task_names():
    """Names of the tasks a SavedModel can be exported for."""
    return tuple(name for name, spec in TASKS.items() if spec.serving_outputs is not None)


def get_fine_tuning(name):
    """The `FineTuningSpec` class of the fine-tuning task called `name`.

    Raises:
        UnknownTaskError: naming the fine-tuning tasks there are.
    """
    return _look_up(FINE_TUNING, name, "fine-tuning task")


def get_distillation(task):
    """The `DistillationSpec` class of `bert-distill --task=<task>`.

    Raises:
        UnknownTaskError: naming the tasks there are.
    """
    return _look_up(DISTILLATION, task, "distillation task")


def _look_up(registry, name, kind):
    if name not in registry:
        raise UnknownTaskError(f"{kind} {name!r} is not one of {', '.join(registry)}")
    return registry[name]
