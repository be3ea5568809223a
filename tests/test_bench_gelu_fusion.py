"""`benchmarks/bench_gelu_fusion.py` tells fused from unfused by what TensorFlow
ran: with the oneDNN graph rewrites on, `tf.nn.gelu`'s arrangement of the GELU
is fused into the MatMul and the original's is not; with them off, neither.
(The model's own GELU: tests/test_onednn_kernels.py.)"""

import pytest

from tests.helpers import X86_ONLY, run_with_onednn_rewrites

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
