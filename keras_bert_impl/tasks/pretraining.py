"""Pretraining (masked LM + next sentence prediction): the original
`run_pretraining` model with both `cls/` heads.

It is trained by `tools/run_pretraining.py`, not exported as it is: the
`fill_mask` task serves its masked-LM head.

Example:
>>> PRETRAINING.head_variables[0]
'cls/predictions/transform/dense/kernel'
"""

from keras_bert_impl.checkpoints.name_map import MASKED_LM_VARIABLES, NEXT_SENTENCE_VARIABLES
from keras_bert_impl.tasks.spec import TaskSpec


def _build_pretraining(config, num_labels=None, dtype=None):
    from keras_bert_impl.models.pretraining import BertPretrainingModel

    return BertPretrainingModel(config, dtype=dtype)


PRETRAINING = TaskSpec(
    name="pretraining",
    description="Masked LM and next sentence prediction (cls/predictions, cls/seq_relationship).",
    build_model=_build_pretraining,
    head_variables=tuple(MASKED_LM_VARIABLES) + tuple(NEXT_SENTENCE_VARIABLES),
)
