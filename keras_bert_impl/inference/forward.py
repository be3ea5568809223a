"""An `InferencePlan` applied to a model: the model that runs, its Dense kernels held as the plan says.

The one place that turns a plan into what computes, for every caller that
needs a forward pass for inference: `make_inference_function`
(`inference.function`), the export's signatures (`serving.export`) and
`extract_features` (`jobs.extract_features`). `apply_plan`

- takes the weights as the plan holds them: a copy of the model rebuilt in
  the plan's precision with its weights rounded once (`held_weights`), or
  in the model's own dtype policy (`frozen_kernels`), or, asked for, a copy
  whatever it holds (a function that must not see later training);
- holds the Dense kernels as the plan says (`PlannedModel.kernels`): graph
  constants (`constant_kernels.ConstantKernels`), variables that oneDNN's
  products pack once (`packed_kernels.PackedKernels`), or int8 kernels
  (`int8.Int8Kernels`, with the calibration given);
- and gives the scope a caller traces its graph in (`PlannedModel.tracing`):
  those kernels read, and the LayerNorm and softmax in the forms the plan
  chose (`layers.onednn_forms`).

Example:
>>> import numpy as np
>>> from keras_bert_impl.config import BertConfig
>>> from keras_bert_impl.inference.plan import InferencePlan
>>> from keras_bert_impl.models.bert_model import BertModel
>>> model = BertModel(BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
...                              num_attention_heads=2, intermediate_size=16))
>>> planned = apply_plan(model, InferencePlan("float32", constant_kernels=True))
>>> type(planned.kernels).__name__, planned.model is model
('ConstantKernels', True)
>>> inputs = {"input_ids": np.array([[2, 5, 7]]), "input_mask": np.ones((1, 3), "int32"),
...           "segment_ids": np.zeros((1, 3), "int32")}
>>> @tf.function
... def forward(inputs):
...     with planned.tracing():
...         return planned.model(inputs, training=False)
>>> bool(np.allclose(forward(inputs)["pooled_output"], model(inputs)["pooled_output"], atol=1e-6))
True
"""

import contextlib
import dataclasses

import tensorflow as tf

from keras_bert_impl.inference.constant_kernels import ConstantKernels
from keras_bert_impl.inference.int8 import Int8Kernels
from keras_bert_impl.inference.packed_kernels import PackedKernels
from keras_bert_impl.inference.plan import DTYPE_POLICIES, INT8
from keras_bert_impl.inference.precision import (
    compute_precision,
    copy_weights,
    holds_weights_for,
    inference_dtype_policy,
    same_variable_layout,
)
from keras_bert_impl.layers.onednn_forms import onednn_forms_set_to


class RebuildError(ValueError):
    """A model rebuilt for a plan's precision does not hold the variables of the model it copies."""


@dataclasses.dataclass
class PlannedModel:
    """What runs for a plan: the model (a copy where the plan holds the weights otherwise) and its kernels.

    Attributes:
        model: The Keras model that computes.
        kernels: None (the Dense kernels read from their variables), a
            `ConstantKernels`, a `PackedKernels` or an `Int8Kernels` of `model`.
        onednn_forms: Trace the LayerNorms and softmax in the forms oneDNN
            runs as one kernel (`layers.onednn_forms`), as the plan chose.
    """

    model: object
    kernels: object = None
    onednn_forms: bool = False

    @contextlib.contextmanager
    def tracing(self):
        """Within it, while a `tf.function` is traced, `model` computes as the plan says (kernels and forms)."""
        with onednn_forms_set_to(self.model, self.onednn_forms):
            if self.kernels is None:
                yield
            else:
                with self.kernels.scope():
                    yield

    def saved_variables(self):
        """The variables a SavedModel of the traced graph must hold: `model`'s, less the kernels held
        otherwise, and the kernels' own (packed query/key/value, int8 kernels)."""
        variables = [variable.value for variable in self.model.variables
                     if not (self.kernels and self.kernels.holds(variable))]
        return variables + list(getattr(self.kernels, "variables", ()))


def apply_plan(model, plan, rebuild=None, snapshot=False, calibration=None):
    """`model` as `plan` runs it: a `PlannedModel`.

    Args:
        model: A Keras model holding `BertModel`s (a `BertModel`, a task model).
        plan: An `InferencePlan`.
        rebuild: `rebuild(dtype)` -> a new, empty model of `model`'s layout
            built with that dtype policy; needed where the plan holds the
            weights otherwise than `model` does (`held_weights` in another
            precision, `frozen_kernels`) or with `snapshot`.
        snapshot: Take the weights now, in a copy, even where `model` holds
            them as the plan says (what runs then never sees `model`'s later
            weights).
        calibration: For an int8 plan: `calibration(model that runs)` ->
            `(input_ranges, smoothing)` (`int8.calibrate`); None: input
            ranges per batch.

    Returns:
        A `PlannedModel`.

    Raises:
        RebuildError: the rebuilt model's variables do not match `model`'s.
    """
    precision = compute_precision(plan.precision)
    dtype = None
    if plan.held_weights and (snapshot or not holds_weights_for(model, precision)):
        dtype = inference_dtype_policy(model, precision)
    elif plan.frozen_kernels:
        # The encoder kernels are frozen where the function is made (`padding_free.frozen_kernels`); the rest
        # is this copy's.
        dtype = model.built_with_dtype
    if dtype is not None:
        copy = rebuild(dtype)
        if not same_variable_layout(model, copy) or (plan.held_weights and not holds_weights_for(copy, precision)):
            raise RebuildError(f"cannot rebuild {model.name!r} in {precision}: build it with "
                               f"dtype={DTYPE_POLICIES[precision]!r}")
        copy_weights(model, copy)
        model = copy
    kernels = None
    if plan.precision == INT8:
        # The encoder's kernels quantized: int8 variables of their own that the products pack once, or constants.
        ranges, smoothing = calibration(model) if calibration is not None else (None, None)
        kernels = Int8Kernels(model, ranges, smoothing, kernels_as_variables=plan.packed_kernels)
    elif plan.constant_kernels:
        kernels = ConstantKernels(model)
    elif plan.packed_kernels:
        # Variables nothing assigns: packed by oneDNN on the first call and kept.
        kernels = PackedKernels(model)
    return PlannedModel(model, kernels, plan.onednn_forms)


