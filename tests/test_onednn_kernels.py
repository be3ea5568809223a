"""What a BERT inference graph runs with TensorFlow's oneDNN graph rewrites on and off (`TF_ENABLE_ONEDNN_OPTS`,
read when TensorFlow loads: one fresh process per setting, profiling every form once for all the tests here).

With the rewrites: one `_MklLayerNorm` per LayerNorm (`layers.layer_norm`; Keras' element-wise ops for a small
request), no transpose on oneDNN, a bfloat16 softmax without casts, and the model's `gelu` fused into its MatMul
(`layers.activations`: the arrangement `benchmarks/bench_gelu_fusion.py` finds fused). Without them: Keras'
element-wise LayerNorm and GELU ops, as before.
"""

import pytest

from tests.helpers import TINY_MODEL_PROFILE, X86_ONLY, run_with_onednn_rewrites

MODEL_OPS = TINY_MODEL_PROFILE + """
from keras_bert_impl.layers.attention import SelfAttention
# 16 x 12 tokens: past FUSED_MIN_ROWS; 2 x 12 (one small request): below it.
large = {k: tf.tile(v, [8, 1]) for k, v in inputs.items()}
for dtype in ("float32", "mixed_bfloat16"):
    for padding_free in (False, True):
        for size, batch in (("large", large), ("small", inputs)):
            inference = BertModel(config, dtype=dtype).make_inference_function(
                jit_compile=False, padding_free=padding_free, freeze_kernels=True)
            op_seconds, _ = profile_forward.profile(tf.function(lambda x: tuple(inference(x).values())), batch, steps=1)
            ops = {op for _, op in op_seconds}
            ran[f"{dtype} {padding_free} {size}"] = {
                "layer_norms": sum(op == "_MklLayerNorm" for _, op in op_seconds),
                "element_wise_layer_norm": sorted(ops & {"SquaredDifference", "Rsqrt"}),
                "onednn_transposes": sum(op == "_MklTranspose" for _, op in op_seconds),
                "gelu_ops": sorted(ops & {"Tanh", "Pow", "Square"}),
            }
# The dtype the attention's softmax takes, in inference and in training, with
# the forms the inference plan sets on this machine (as a model's constructor does).
from keras_bert_impl.inference.plan import Machine
from keras_bert_impl.layers.onednn_forms import set_onednn_forms
attention = SelfAttention(num_attention_heads=2, size_per_head=8, dtype="mixed_bfloat16")
set_onednn_forms(attention, Machine().onednn_runs_graphs)
heads = tf.cast(tf.random.normal([1, 2, 5, 8]), tf.bfloat16)
for training in (False, True):
    graph = tf.function(lambda q: attention.attend(q, q, q, training=training)).get_concrete_function(heads).graph
    ran[f"softmax training={training}"] = [op.get_attr("T").name for op in graph.get_operations() if op.type == "Softmax"]
print(json.dumps(ran))
"""


@pytest.fixture(scope="module")
def kernels_ran():
    """`kernels_ran(setting)`: what `MODEL_OPS` found in a process with `TF_ENABLE_ONEDNN_OPTS=setting`."""
    found = {}

    def get(setting):
        if setting not in found:
            found[setting] = run_with_onednn_rewrites(MODEL_OPS, setting)
        return found[setting]

    return get


@X86_ONLY
@pytest.mark.parametrize("setting", ["1", "0"])
def test_the_models_layer_norms_and_softmax_run_on_onednn_kernels_with_the_rewrites(kernels_ran, setting):
    found = kernels_ran(setting)
    # [_MklLayerNorm count, Keras' LayerNorm ops that ran, _MklTranspose count] per form.
    ran = {key: [value["layer_norms"], value["element_wise_layer_norm"], value["onednn_transposes"]]
           for key, value in found.items() if not key.startswith("softmax")}
    keras_ops = ["Rsqrt", "SquaredDifference"]
    for dtype in ("float32", "mixed_bfloat16"):
        for padding_free in (False, True):
            key = f"{dtype} {padding_free}"
            # Embeddings and two per layer: one kernel each with the rewrites (where the
            # rows are many: a small request takes Keras' element-wise ops), else Keras'
            # element-wise ops. No transpose runs on oneDNN with the rewrites (the heads
            # move as integer bits): Eigen's.
            if setting == "1":
                assert ran[f"{key} large"] == [5, [], 0], key
                assert ran[f"{key} small"] == [0, keras_ops, 0], key
            else:
                assert ran[f"{key} large"] == ran[f"{key} small"] == [0, keras_ops, 0], key
    # oneDNN's softmax takes bfloat16 (float32 inside): no casts around it, for inference only.
    assert found["softmax training=False"] == (["bfloat16"] if setting == "1" else ["float32"])
    assert found["softmax training=True"] == ["float32"]


@X86_ONLY
@pytest.mark.parametrize("setting", ["1", "0"])
def test_the_models_gelu_is_fused_with_the_rewrites(kernels_ran, setting):
    """Our `gelu` has the arrangement oneDNN fuses: with the rewrites on, no
    GELU op of the model's intermediate layers runs on its own."""
    ran = kernels_ran(setting)
    expected = [] if setting == "1" else ["Square", "Tanh"]  # pow(x, 3) runs as x * Square(x)
    for dtype in ("float32", "mixed_bfloat16"):
        for padding_free in (False, True):
            for size in ("large", "small"):
                assert ran[f"{dtype} {padding_free} {size}"]["gelu_ops"] == expected, (dtype, padding_free, size)
