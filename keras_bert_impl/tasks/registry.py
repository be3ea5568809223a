"""The tasks, by name: the one place that lists them.

Adding a task is one new module with its `TaskSpec` and one entry below.

Example:
>>> exported_task_names()
('classifier', 'regression', 'span_qa', 'token_tagging', 'embeddings', 'fill_mask')
"""

from keras_bert_impl.errors import BertError
from keras_bert_impl.tasks import classifier, embeddings, fill_mask, pretraining, span_qa, token_tagging

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
    )
}


class UnknownTaskError(BertError, ValueError):
    """A task name that no spec has."""


def get_task(name):
    """The `TaskSpec` called `name`.

    Raises:
        UnknownTaskError: naming the tasks there are.
    """
    if name not in TASKS:
        raise UnknownTaskError(f"task {name!r} is not one of {', '.join(TASKS)}")
    return TASKS[name]


def exported_task_names():
    """Names of the tasks a SavedModel can be exported for."""
    return tuple(name for name, spec in TASKS.items() if spec.serving_outputs is not None)
