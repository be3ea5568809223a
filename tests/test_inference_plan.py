"""`inference.plan`: one plan per model and machine, made by the rules the other tests check one by one.

The rules table (`test_bert_model.py::test_xla_is_chosen_where_it_pays_for_inference`,
`test_serving_precision.py::test_precision_follows_the_cpus_matrix_units`) is
written out again here as the choices a plan holds for each machine, given
as facts (no machine is asked).
"""

import dataclasses

import pytest

from keras_bert_impl.inference.plan import (
    MAX_CONSTANT_BYTES,
    InferencePlan,
    Machine,
    cut_bucket_size,
    export_plan,
    features_plan,
    function_plan,
)
from keras_bert_impl.models.bert_model import BertModel
from tests.helpers import tiny_config

AMD_BF16 = dict(cpu_flags=frozenset({"avx2", "avx512f", "avx512_bf16"}), cpu_vendor="AuthenticAMD")
AVX2 = dict(cpu_flags=frozenset({"avx2"}), cpu_vendor="AuthenticAMD")


@pytest.mark.parametrize("dtype, accelerator, onednn_rewrites, jit, forms", [
    ("float32", True, True, True, False),         # a GPU or TPU: XLA, no oneDNN kernels
    ("mixed_bfloat16", True, None, True, False),
    ("float32", False, False, True, False),       # AVX2 CPU, rewrites off: XLA
    ("float32", False, True, False, True),        # rewrites on: oneDNN's products and forms
    ("mixed_bfloat16", False, True, False, True),
    ("mixed_bfloat16", False, False, False, False),
])
def test_function_plan_follows_the_rules_for_each_machine(dtype, accelerator, onednn_rewrites, jit, forms):
    model = BertModel(tiny_config(), dtype=dtype)
    machine = Machine(accelerator=accelerator, onednn_rewrites=onednn_rewrites)
    plan = function_plan(model, padding_free=True, bucket_size=16, machine=machine)
    assert (plan.jit_compile, plan.onednn_forms) == (jit, forms)
    assert plan.precision == ("float32" if dtype == "float32" else "bfloat16")
    assert plan.bucket_size == (16 if jit else 1)  # a plain graph computes the shapes as they come


@pytest.mark.parametrize("jit_compile, padding_free, rewrites, expected", [
    # (held_weights, frozen_kernels, constant_kernels, packed_kernels)
    (False, False, True, (True, False, False, True)),  # oneDNN's products pack the copy's variables once
    (False, True, True, (True, False, False, True)),
    (False, True, False, (True, False, True, False)),  # the rewrites off: constants
    (True, False, True, (True, False, False, False)),  # XLA compiles its own products: neither
    (True, True, True, (False, True, False, False)),   # XLA padding-free: the encoder kernels frozen
])
def test_freeze_kernels_becomes_one_way_of_holding_the_weights(jit_compile, padding_free, rewrites, expected):
    model = BertModel(tiny_config())
    machine = Machine(accelerator=False, onednn_rewrites=rewrites)
    plan = function_plan(model, jit_compile=jit_compile, padding_free=padding_free, freeze_kernels=True,
                         machine=machine)
    assert (plan.held_weights, plan.frozen_kernels, plan.constant_kernels, plan.packed_kernels) == expected
    unfrozen = function_plan(model, jit_compile=jit_compile, padding_free=padding_free, machine=machine)
    assert (unfrozen.held_weights, unfrozen.frozen_kernels, unfrozen.constant_kernels, unfrozen.packed_kernels) == \
        (False, False, False, False)


@pytest.mark.parametrize("facts, accelerator, rewrites, precision, skip_padding, constants, packed", [
    # Zen 4, rewrites on: bfloat16, real tokens only, the kernels variables that oneDNN packs once.
    (AMD_BF16, False, True, "bfloat16", True, False, True),
    (AVX2, False, True, "float32", True, False, True),
    # oneDNN's rewrites off: its products are not there to pack variables; constants.
    (AVX2, False, False, "float32", True, True, False),
    (AMD_BF16, True, True, "bfloat16", False, False, False),  # a GPU seen: no gathers, plain variables
])
def test_export_plan_follows_the_rules_for_each_machine(facts, accelerator, rewrites, precision, skip_padding,
                                                        constants, packed):
    model = BertModel(tiny_config())
    machine = Machine(accelerator=accelerator, onednn_rewrites=rewrites, **facts)
    # This CPU's form, asked for by name: the rules below. The default is the same plan on every machine.
    assert export_plan(model, machine=machine) == export_plan(model, "float32", machine=machine) == InferencePlan(
        precision="float32", padding_free=True, held_weights=True)
    this_cpu = dict(machine=machine, optimize_for="this_cpu")
    plan = export_plan(model, "auto" if rewrites else None, **this_cpu)
    forms = machine.onednn_runs_graphs
    assert plan == InferencePlan(precision=precision, padding_free=skip_padding, held_weights=True,
                                 constant_kernels=constants, packed_kernels=packed, onednn_forms=forms)
    assert export_plan(model, None if rewrites else "float32", **this_cpu).precision == precision
    # Variables asked for: packed where oneDNN runs the graph, unless that is refused too.
    assert export_plan(model, "float32", skip_padding=False, constant_kernels=False, **this_cpu) == \
        InferencePlan(precision="float32", held_weights=True, packed_kernels=packed, onednn_forms=forms)
    assert export_plan(model, "float32", skip_padding=False, constant_kernels=False, packed_kernels=False,
                       **this_cpu) == InferencePlan(precision="float32", held_weights=True, onednn_forms=forms)
    constant = export_plan(model, "float32", constant_kernels=True, machine=machine)  # asked for: a constant graph
    assert (constant.constant_kernels, constant.onednn_forms) == (True, False)
    constant = export_plan(model, "float32", constant_kernels=True, **this_cpu)
    assert (constant.constant_kernels, constant.packed_kernels) == (True, False)
    # int8: its products are oneDNN's wherever they run, so its int8 kernels are variables they pack, on every
    # machine, unless constants are asked for (by either switch).
    int8 = export_plan(model, "int8", **this_cpu)
    assert export_plan(model, "int8", machine=machine) == dataclasses.replace(int8, padding_free=True)
    assert int8 == InferencePlan(precision="int8", padding_free=skip_padding, held_weights=True,
                                 packed_kernels=True, onednn_forms=forms)
    for asked in (dict(constant_kernels=True), dict(packed_kernels=False), dict(constant_kernels=True,
                                                                                packed_kernels=False)):
        int8 = export_plan(model, "int8", **this_cpu, **asked)
        assert (int8.constant_kernels, int8.packed_kernels) == (True, False), asked


def test_export_plan_refuses_what_it_cannot_honour(monkeypatch):
    from keras_bert_impl.inference import plan

    model = BertModel(tiny_config())
    machine = Machine(accelerator=False, onednn_rewrites=True, **AVX2)
    with pytest.raises(ValueError, match="precision 'float16' is not one of auto, float32, bfloat16"):
        export_plan(model, "float16", machine=machine)
    with pytest.raises(ValueError, match="optimize_for 'gpu' is not one of portable, this_cpu"):
        export_plan(model, optimize_for="gpu", machine=machine)
    monkeypatch.setattr(plan, "MAX_CONSTANT_BYTES", 1)
    assert MAX_CONSTANT_BYTES == 1 << 30
    assert not export_plan(model, "float32", packed_kernels=False, machine=machine,
                           optimize_for="this_cpu").constant_kernels  # left out
    with pytest.raises(ValueError, match="kernels as constants would take"):
        export_plan(model, "float32", constant_kernels=True, packed_kernels=False, machine=machine)
    with pytest.raises(ValueError, match="either graph constants or packed variables, not both"):
        export_plan(model, "float32", constant_kernels=True, packed_kernels=True, machine=machine)
    with pytest.raises(ValueError, match="an int8 export holds its int8 kernels as variables that its products "
                                         "pack once .packed kernels. or as graph constants: leave one of them on"):
        export_plan(model, "int8", constant_kernels=False, packed_kernels=False, machine=machine)
    with pytest.raises(ValueError, match="either graph constants or packed variables, not both"):
        export_plan(model, "int8", constant_kernels=True, packed_kernels=True, machine=machine)


def test_features_plan_and_cut_buckets_follow_the_machine():
    cpu = Machine(accelerator=False, onednn_rewrites=True, **AMD_BF16)
    gpu = Machine(accelerator=True, onednn_rewrites=True, **AMD_BF16)
    assert features_plan("auto", cpu) == InferencePlan(precision="bfloat16", padding_free=True, held_weights=True,
                                                        packed_kernels=True, onednn_forms=True)
    no_rewrites = Machine(accelerator=False, onednn_rewrites=False, **AMD_BF16)
    assert features_plan("float32", no_rewrites) == InferencePlan(precision="float32", padding_free=True,
                                                                  constant_kernels=True)
    assert features_plan("float32", gpu) == InferencePlan(precision="float32")
    assert (cut_bucket_size(128, cpu), cut_bucket_size(128, gpu), cut_bucket_size(32, gpu)) == (8, 16, 8)


def test_building_a_model_asks_nothing_and_its_keras_graphs_take_the_plans_forms(monkeypatch):
    from keras_bert_impl.inference import plan as plan_module

    def forms_of(model):
        return {layer.onednn_forms for layer in model._flatten_layers() if hasattr(layer, "onednn_forms")}

    asked = []
    real_machine = plan_module.Machine
    monkeypatch.setattr(plan_module, "Machine", lambda *a, **k: asked.append(1) or real_machine(*a, **k))
    model = BertModel(tiny_config())
    assert asked == [] and forms_of(model) == {False}
    model.make_predict_function()
    assert asked and forms_of(model) == {real_machine().onednn_runs_graphs}
    monkeypatch.setattr(plan_module, "keras_graph_forms", lambda machine=None: False)
    model.make_test_function()
    assert forms_of(model) == {False}
