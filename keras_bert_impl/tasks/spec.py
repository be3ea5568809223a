"""`TaskSpec`: everything the tools, export and serving need to know of a task.

A task is described once: how to build its model from a `BertConfig`, which
original checkpoint variables make its head (from `checkpoints/name_map.py`),
which variables an export may leave untrained, and what its SavedModel
returns. Tools, `serving/` and the Python API look a task up in
`tasks.registry`; none of them switch on task names.

Example:
>>> from keras_bert_impl.tasks.registry import get_task
>>> spec = get_task("classifier")
>>> spec.head_variables
('output_weights', 'output_bias')
"""

import dataclasses
from typing import Callable, Optional


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """One task.

    Attributes:
        name: The name tools and `bert-export --task` use.
        description: One line for `--help`.
        build_model: `build_model(config, num_labels, dtype=None) ->
            keras.Model`; `dtype` is a Keras dtype policy.
        head_variables: Original names of the head's variables; a
            fine-tuned checkpoint for this task holds them.
        export_optional: Variable-name patterns an export may leave
            untrained (e.g. the NSP head of a fill-mask model).
        serving_outputs: `serving_outputs(serving, inputs, padded_length)`
            -> dict of output tensors, where `serving` is the
            `BertServingModule` (model, tokenizer ids, label table) and
            `inputs` the batch cut to its longest request; None when the
            task is not exported.
        uses_labels: The model has a class per label (`num_labels`, label
            names in the export's `assets/labels.txt`).
        masks_in_text: "[MASK]" written in a request is the mask token.
        warmup_pairs: Warm TF Serving up through the text-pair signature too.
    """

    name: str
    description: str
    build_model: Callable
    head_variables: tuple = ()
    export_optional: tuple = ()
    serving_outputs: Optional[Callable] = None
    uses_labels: bool = False
    masks_in_text: bool = False
    warmup_pairs: bool = False

    @property
    def required_tokens(self):
        """Vocabulary tokens the task's preprocessing and outputs rely on."""
        return ("[UNK]", "[CLS]", "[SEP]") + (("[MASK]",) if self.masks_in_text else ())
