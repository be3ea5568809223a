"""`BertModel`: the original `modeling.BertModel` as a functional Keras model."""

import keras

from keras_bert_impl.config import BertConfig
from keras_bert_impl.inference import function, plan
from keras_bert_impl.layers.embeddings import EmbeddingPostprocessor, WordEmbedding
from keras_bert_impl.layers.pooler import Pooler
from keras_bert_impl.layers.transformer import TransformerEncoder
from keras_bert_impl.models.base import BertConfigModel, sequence_inputs

_PACKAGE = "keras_bert_impl"


def as_bert_config(bert_config):
    """Accepts a `BertConfig`, or the dict form stored in Keras configs.

    Args:
        bert_config: A `BertConfig` (returned as is), or a mapping with all
            eleven `bert_config.json` keys, as `get_config` stores it.

    Returns:
        A `BertConfig`.

    Raises:
        ConfigError: the mapping has unknown or missing keys, or invalid
            values (see `BertConfig.from_dict`).
    """
    if isinstance(bert_config, BertConfig):
        return bert_config
    return BertConfig.from_dict(dict(bert_config))


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertModel(BertConfigModel):
    """The BERT encoder: embeddings, transformer stack and pooler.

    Inputs are a dict of `input_ids`, `input_mask` and `segment_ids`, each
    [batch_size, seq_length] int; outputs a dict with `sequence_output`
    [batch_size, seq_length, H], `pooled_output` [batch_size, H] (not for a
    config without a pooler, `use_pooler=False`: DistilBERT) and, when
    asked, `encoder_outputs` (one [batch, seq, H] per layer, as the
    original's `get_all_encoder_layers`) and `attention_probs` (one
    [batch, heads, seq, seq] per layer).

    RoBERTa, ALBERT and DistilBERT are this model under their configs
    (`BertConfig`'s variant keys, docs/VARIANTS.md): the embeddings' width,
    position offset, token types and projection (`EmbeddingPostprocessor`),
    shared layer groups (`TransformerEncoder`), LayerNorm epsilon and
    whether there is a pooler.

    Args:
        bert_config: A `BertConfig` (or its dict).
        output_all_encoder_layers: Also output every layer's hidden states.
        output_attention_probs: Also output every layer's attention
            probabilities.
        dtype: Keras dtype policy, e.g. `"mixed_bfloat16"`.

    Example:
    >>> import numpy as np
    >>> config = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=2,
    ...                     num_attention_heads=2, intermediate_size=16)
    >>> model = BertModel(config)
    >>> outputs = model({"input_ids": np.ones((1, 5), "int32"),
    ...                  "input_mask": np.ones((1, 5), "int32"),
    ...                  "segment_ids": np.zeros((1, 5), "int32")})
    >>> tuple(outputs["pooled_output"].shape)
    (1, 8)
    """

    def __init__(
        self,
        bert_config,
        output_all_encoder_layers=False,
        output_attention_probs=False,
        dtype=None,
        name="bert",
        **kwargs,
    ):
        config = as_bert_config(bert_config)

        # === Layers ===
        word_embedding = WordEmbedding(
            config.vocab_size,
            config.embedding_width,
            initializer_range=config.initializer_range,
            dtype=dtype,
            name="word_embeddings",
        )
        embedding_postprocessor = EmbeddingPostprocessor(
            config.embedding_width,
            type_vocab_size=config.type_vocab_size,
            max_position_embeddings=config.max_position_embeddings,
            dropout_rate=config.hidden_dropout_prob,
            initializer_range=config.initializer_range,
            position_offset=config.position_offset,
            layer_norm_epsilon=config.layer_norm_eps,
            # ALBERT's embedding_hidden_mapping_in, E -> H.
            projection_size=config.hidden_size if config.embedding_size is not None else None,
            dtype=dtype,
            name="embeddings",
        )
        encoder = TransformerEncoder(
            config.num_hidden_layers,
            config.hidden_size,
            config.num_attention_heads,
            config.intermediate_size,
            hidden_act=config.hidden_act,
            hidden_dropout_prob=config.hidden_dropout_prob,
            attention_probs_dropout_prob=config.attention_probs_dropout_prob,
            initializer_range=config.initializer_range,
            layer_norm_epsilon=config.layer_norm_eps,
            num_hidden_groups=config.num_hidden_groups,
            inner_group_num=config.inner_group_num,
            dtype=dtype,
            name="encoder",
        )
        pooler = None
        if config.use_pooler:
            pooler = Pooler(
                config.hidden_size,
                initializer_range=config.initializer_range,
                activation=config.pooler_act,
                dtype=dtype,
                name="pooler",
            )

        # === Functional model ===
        inputs = sequence_inputs("input_ids", "input_mask", "segment_ids")
        # [batch_size, seq_length, H]
        embedded = word_embedding(inputs["input_ids"])
        embedded = embedding_postprocessor(embedded, inputs["segment_ids"])
        all_outputs, all_probs = encoder(embedded, inputs["input_mask"])
        sequence_output = all_outputs[-1]
        outputs = {"sequence_output": sequence_output}
        if pooler is not None:
            outputs["pooled_output"] = pooler(sequence_output)
        if output_all_encoder_layers:
            outputs["encoder_outputs"] = all_outputs
        if output_attention_probs:
            outputs["attention_probs"] = all_probs
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, name=name, **kwargs)

        # === Config ===
        self.bert_config = config
        self.output_all_encoder_layers = output_all_encoder_layers
        self.output_attention_probs = output_attention_probs
        self.word_embedding = word_embedding
        self.embedding_postprocessor = embedding_postprocessor
        self.encoder = encoder
        self.pooler = pooler

    def make_inference_function(self, jit_compile="auto", padding_free=False, bucket_size=16, freeze_kernels=False,
                                precision=None, calibration_inputs=None, calling_thread=False):
        """The forward pass for inference, `self(inputs, training=False)`, as a `tf.function`.

        The choices below are folded into one `inference.plan.InferencePlan`
        (`plan.function_plan`) and the function is built from it
        (`inference.function`). Compiled with XLA, the element-wise work
        between the matrix products (GELU, softmax, LayerNorm, residual
        adds) is fused; on a CPU, though, XLA's own products use neither
        TensorFlow's oneDNN kernels nor bfloat16 instructions, so
        `jit_compile="auto"` compiles only where that pays
        (`plan.xla_pays_for_inference`: on a GPU or TPU, and on a CPU for
        float32 with the oneDNN rewrites off; measured: docs/BENCHMARKS.md).
        The outputs agree with the eager model to fp32 rounding. Build the
        function once and call it many times: it is traced once, for inputs
        of any shape (`inference.function.AnyShapeFunction`), and under XLA
        compiled once per shape; a sequence longer than
        `max_position_embeddings` raises an `InvalidArgumentError` naming
        that limit.

        With `padding_free=True`, every per-token operation runs on the real
        tokens only (`inference.padding_free`): the same outputs at real
        positions, zeros at padded ones (so `pooled_output`, read at
        position 0, is the full model's only where position 0 is real, as
        every BERT input's [CLS] is), and the time saved is at most the
        share of padding in the batch. It pays on a CPU at any batch size; on
        a GPU, where the matrix products are faster, the gathers between the
        two layouts can cost more than the padding they save (in mixed
        bfloat16 at smaller batches, docs/BENCHMARKS.md): measure on your
        batches before choosing it on a GPU.

        Args:
            jit_compile: True compiles with XLA, False gives the plain graph,
                "auto" (the default) chooses by the machine and the
                model's compute dtype, as above.
            padding_free: Skip the padded positions
                (`padding_free.make_padding_free_function`).
            bucket_size: With `jit_compile`, XLA compiles once per multiple
                of this: of the real-token count with `padding_free`, else of
                the sequence length (the inputs padded with masked columns,
                the outputs cut back), so varied request lengths meet a
                bounded number of programs.
            freeze_kernels: Take the weights as they are now, rounded to the
                compute dtype once rather than on every call; the function
                then ignores later changes to them. In a plain graph: a copy
                of the model holding its weights as an export does
                (`inference.precision`: under mixed_bfloat16 every weight but
                the LayerNorms' in bfloat16), without the weight conversions
                (a large share of a single request's time under
                mixed_bfloat16 on a CPU), whose Dense kernels oneDNN packs
                once and multiplies with its blocked kernels, on AMX tiles
                where the CPU has them (docs/BENCHMARKS.md): where oneDNN's
                products run the graph, the copy's variables, each product
                marked to pack its kernel (`inference.packed_kernels`);
                elsewhere constants of the graph
                (`inference.constant_kernels`). With XLA and
                `padding_free`: a copy of the model in its own dtype policy,
                whose encoder Dense kernels are held as float32 on a CPU (see
                `padding_free.make_padding_free_function`), as XLA on a CPU
                widens bfloat16 weights on every call.
            precision: None (the model's own) or "int8": the encoder's
                products in int8 on the CPU's int8 units through oneDNN
                (`inference.int8`; kernels quantized per output channel,
                activations per batch), everything else in float32; the
                weights taken now, as with `freeze_kernels` (int8 variables
                of the function, packed once by its products). A plain graph;
                about twice float32's batch throughput, and faster for one
                text with calibrated ranges (docs/BENCHMARKS.md, "int8").
            calibration_inputs: With precision "int8": an iterable of input
                dicts (a few hundred of the task's texts, as the model
                takes them) on which each product's input range is fixed
                (its 99.999th percentile) and its wide channels smoothed
                into the kernels, as `bert-export --calibration_file` does
                (`inference.int8.calibrate`): fewer ops and closer to
                float32 than ranges per batch (None).
            calling_thread: For a Python process answering requests (one
                at a time, or each of several threads its own): the
                function's graph runs as TF Serving runs an export started
                with `--tensorflow_inter_op_parallelism=-1`, in a
                `tf.compat.v1.Session` of its own whose ops run in the
                thread that calls, with no hand-offs to TensorFlow's
                inter-op pool (`inference.calling_thread`): a short request
                answers sooner, where batches can lose what the pool ran
                side by side (docs/BENCHMARKS.md). The weights are taken
                now (`freeze_kernels` is implied), the graph is plain (not
                XLA) and runs on the CPU, and the outputs are NumPy arrays.
                Each op's own threads are the process' intra-op pool, which
                TensorFlow sizes once, at its first op: for short int8 or
                bfloat16 requests one thread answers sooner (as TF Serving's
                `--tensorflow_intra_op_parallelism=1`), set by
                `tf.config.threading.set_intra_op_parallelism_threads(1)`
                before anything else runs. The Session holds more than the
                TF2 function does (a float32 BERT-base: 0.88 against 0.51
                GB over the model): where memory is short, keep the latter.

        Returns:
            A function of the inputs dict (as for calling the model) that
            returns the outputs dict.

        Raises:
            ValueError: int8 or `calling_thread` with `jit_compile=True`,
                `calibration_inputs` without int8.
        """
        chosen = plan.function_plan(self, jit_compile=jit_compile, padding_free=padding_free,
                                    bucket_size=bucket_size, freeze_kernels=freeze_kernels, precision=precision,
                                    calling_thread=calling_thread)
        if calibration_inputs is not None and chosen.precision != plan.INT8:
            raise ValueError("calibration_inputs are for precision='int8'")
        return function.make_inference_function(self, chosen, calibration_inputs)

    def get_config(self):
        return {
            **super().get_config(),
            "output_all_encoder_layers": self.output_all_encoder_layers,
            "output_attention_probs": self.output_attention_probs,
        }

