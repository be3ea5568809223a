"""`benchmarks/bench_gelu_fusion.py` tells fused from unfused by what TensorFlow
ran: with the oneDNN graph rewrites on, `tf.nn.gelu`'s arrangement of the GELU
is fused into the MatMul and the original's is not; with them off, neither."""

import json
import os
import platform
import subprocess
import sys

import pytest

from tests.test_serving import REPO

MEASURE = """
import json, sys
sys.path.insert(0, "benchmarks")
import bench_gelu_fusion
rows = bench_gelu_fusion.measure(tokens=32, hidden=16, intermediate=64, steps=2, precisions=("fp32",))
print(json.dumps({row["arrangement"]: row["fused"] for row in rows}))
"""


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                    reason="TensorFlow's oneDNN graph rewrites are an x86 build's")
@pytest.mark.parametrize("setting, tf_nn_gelu_fused", [("1", True), ("0", False)])
def test_only_tf_nn_gelus_arrangement_is_fused_and_only_with_the_rewrites(setting, tf_nn_gelu_fused):
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS=setting, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", MEASURE], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    fused = json.loads(result.stdout.strip().splitlines()[-1])
    assert fused == {"original (x * cdf)": False, "tf.nn.gelu": tf_nn_gelu_fused, "matmul + bias only": None}
