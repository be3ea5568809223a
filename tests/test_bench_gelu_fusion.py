"""`benchmarks/bench_gelu_fusion.py` tells fused from unfused by what TensorFlow
ran: with the oneDNN graph rewrites on, `tf.nn.gelu`'s arrangement of the GELU
is fused into the MatMul and the original's is not; with them off, neither."""

import pytest

from tests.helpers import TINY_MODEL_PROFILE, X86_ONLY, run_with_onednn_rewrites

MEASURE = """
import json, sys
sys.path.insert(0, "benchmarks")
import bench_gelu_fusion
rows = bench_gelu_fusion.measure(tokens=32, hidden=16, intermediate=64, steps=2, precisions=("fp32",))
print(json.dumps({row["arrangement"]: row["fused"] for row in rows}))
"""


@X86_ONLY
@pytest.mark.parametrize("setting, tf_nn_gelu_fused", [("1", True), ("0", False)])
def test_only_tf_nn_gelus_arrangement_is_fused_and_only_with_the_rewrites(setting, tf_nn_gelu_fused):
    fused = run_with_onednn_rewrites(MEASURE, setting)
    assert fused == {"original (x * cdf)": False, "tf.nn.gelu": tf_nn_gelu_fused, "matmul + bias only": None}


MODEL_OPS = TINY_MODEL_PROFILE + """
for dtype in ("float32", "mixed_bfloat16"):
    inference = BertModel(config, dtype=dtype).make_inference_function(jit_compile=False, freeze_kernels=True)
    op_seconds, _ = profile_forward.profile(tf.function(lambda x: tuple(inference(x).values())), inputs, steps=1)
    ran[dtype] = sorted({op_type for _, op_type in op_seconds} & {"Tanh", "Pow", "Square"})
print(json.dumps(ran))
"""


@X86_ONLY
@pytest.mark.parametrize("setting", ["1", "0"])
def test_the_models_gelu_is_fused_with_the_rewrites(setting):
    """Our `gelu` has the arrangement oneDNN fuses: with the rewrites on, no
    GELU op of the model's intermediate layers runs on its own."""
    ran = run_with_onednn_rewrites(MODEL_OPS, setting)
    expected = [] if setting == "1" else ["Square", "Tanh"]  # pow(x, 3) runs as x * Square(x)
    assert ran == {"float32": expected, "mixed_bfloat16": expected}
