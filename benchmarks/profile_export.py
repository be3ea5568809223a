"""Where one request to an export goes: TensorFlow's op profile and oneDNN's primitives.

`bench_cpu_inference.py` times an export against the peers; this script
says where one request's time goes inside it (`tf.saved_model.load`, one
signature; with `--session` as TF Serving runs it, a Session filled by the
export's restore op, `serving.session_model.SessionModel`, its thread flags
the Session's): it loads the SavedModel, sends
`--batch_size` texts of `--length` tokens (or, for a raw-text signature,
`--text`) a few times to warm it up, then

- records TensorFlow's profile of `--steps` calls (`profile_forward.profile`;
  with `--session`, the Session's step statistics of each run) and prints the
  wall time, how many ops one call runs, and the op time by kind and by op
  type (summed over threads, so it can exceed the wall time; the profiler's
  own cost inflates small ops);
- with `--lengths`, times one request at each of those lengths (interleaved
  rounds, p50) and fits time = fixed + per token: what a request costs
  whatever its length, against what grows with it (the products);
- in a child process with `ONEDNN_VERBOSE=1`, sums the oneDNN primitives one
  call runs, by kind and implementation (`amx` in the name where AMX
  multiplies, `vnni` where VNNI does): what the products themselves take,
  and, by difference with the wall time, what the ops around them take.
  The timed calls follow a marker line, as in `onednn_primitives.py`, whose
  parsing and table this script shares.

    .venv/bin/python benchmarks/profile_export.py --export_dir saved_models/sentiment \\
        [--signature serve_ids] [--length 25] [--batch_size 1] [--steps 10] [--top 15] [--no_onednn]
        [--session --intra_op_threads 1 --inter_op_threads -1] [--lengths 12,25,48]

`--export_dir` is a model's base path (its newest version is taken) or one
version directory. Ids are drawn from [1000, 2000), valid in every BERT
vocabulary. Run it on a quiet machine; `--inter_op_threads` and
`--intra_op_threads` set TensorFlow's pools as TF Serving's flags of those
names would (-1 inter-op threads, with `--session`: each request's ops in
the calling thread).
"""

import argparse
import collections
import os
import pathlib
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
BENCHMARKS = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCHMARKS.parent))  # For `keras_bert_impl` from a checkout.
sys.path.insert(0, str(BENCHMARKS))  # For `profile_forward` and `onednn_primitives` beside this script.

import numpy as np  # noqa: E402

def version_directory(export_dir):
    """`export_dir` itself where it holds a `saved_model.pb`, else its newest numbered version."""
    path = pathlib.Path(export_dir)
    if (path / "saved_model.pb").is_file():
        return path
    versions = sorted((child for child in path.iterdir() if child.name.isdigit()), key=lambda child: int(child.name))
    if not versions:
        raise SystemExit(f"{export_dir}: neither a saved_model.pb nor a numbered version directory in it")
    return versions[-1]


def request(input_names, batch_size, length, text, seed=0):
    """The inputs of one request to a signature taking `input_names`: token ids [batch_size, length], or `text`
    batch_size times (NumPy arrays)."""
    names = set(input_names)
    if names == {"text"}:
        return {"text": np.array([text] * batch_size, object)}
    if names == {"text", "text_b"}:
        return {"text": np.array([text] * batch_size, object), "text_b": np.array([text] * batch_size, object)}
    if names == {"input_ids", "input_mask", "segment_ids"}:
        ids = np.random.default_rng(seed).integers(1000, 2000, (batch_size, length)).astype("int32")
        return {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
    raise SystemExit(f"this script sends token ids or raw text; the signature takes {sorted(names)}")


def prepared_request(args, names, length, seed=0):
    """`request`'s inputs as the loader takes them, made once: arrays for a Session, tensors for a TF2 signature."""
    import tensorflow as tf

    inputs = request(names, args.batch_size, length, args.text, seed)
    return inputs if args.session else {name: tf.constant(value) for name, value in inputs.items()}


def load(args):
    """(the loaded export, `call(inputs) -> output arrays`, its input names), warmed up on one request.

    The loaded object owns the variables its signatures read: the caller keeps it.
    """
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the in-graph tokenizer's ops)

    path = str(version_directory(args.export_dir))
    if args.session:
        from keras_bert_impl.serving.session_model import SessionModel

        loaded = SessionModel(path, args.intra_op_threads, args.inter_op_threads)
        if args.signature not in loaded.signature_defs:
            raise SystemExit(f"no signature {args.signature!r}; the export has {', '.join(sorted(loaded.signature_defs))}")
        serve, names = loaded.callable(args.signature), loaded.input_names(args.signature)

        def call(inputs):
            return list(serve(**inputs).values())
    else:
        if args.inter_op_threads:
            tf.config.threading.set_inter_op_parallelism_threads(args.inter_op_threads)
        if args.intra_op_threads:
            tf.config.threading.set_intra_op_parallelism_threads(args.intra_op_threads)
        loaded = tf.saved_model.load(path)
        if args.signature not in loaded.signatures:
            raise SystemExit(f"no signature {args.signature!r}; the export has {', '.join(sorted(loaded.signatures))}")
        signature = loaded.signatures[args.signature]
        names = sorted(signature.structured_input_signature[1])

        def call(inputs):
            return [value.numpy() for value in signature(**inputs).values()]
    for _ in range(3):
        call(prepared_request(args, names, args.length))
    return loaded, call, names


def session_profile(model, signature_name, inputs, steps):
    """`{(node, op type): seconds}` over `steps` runs of a `SessionModel`'s signature, from the Session's step
    statistics (each op's start to end, as `profile_forward.profile` gives them for a TF2 function)."""
    import tensorflow as tf

    signature = model.signature_defs[signature_name]
    fetches = [info.name for info in signature.outputs.values()]
    feeds = {signature.inputs[name].name: value for name, value in inputs.items()}
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    seconds = collections.Counter()
    for _ in range(steps):
        metadata = tf.compat.v1.RunMetadata()
        model.session.run(fetches, feeds, options=options, run_metadata=metadata)
        for device in metadata.step_stats.dev_stats:
            for node in device.node_stats:
                # "name = OpType(inputs)"; the executor's own entries (_SOURCE) have no type.
                op_type = node.timeline_label.partition(" = ")[2].partition("(")[0] or node.node_name
                seconds[node.node_name, op_type] += node.all_end_rel_micros * 1e-6
    return seconds


def length_scan(call, names, args):
    """Markdown rows of one request's p50 at each of `--lengths`, and the line fixed + per token through them."""
    lengths = [int(length) for length in args.lengths.split(",")]
    requests = {length: prepared_request(args, names, length, seed=length) for length in lengths}
    times = {length: [] for length in lengths}
    for round_ in range(5):
        for length in lengths if round_ % 2 == 0 else lengths[::-1]:
            call(requests[length])
            for _ in range(max(4, args.steps)):
                start = time.perf_counter()
                call(requests[length])
                times[length].append(time.perf_counter() - start)
    p50 = [statistics.median(times[length]) * 1e3 for length in lengths]
    per_token, fixed = np.polyfit(lengths, p50, 1)
    rows = [f"| {length} | {ms:.2f} | {fixed + per_token * length:.2f} |" for length, ms in zip(lengths, p50)]
    return rows, fixed, per_token


def onednn_child(args):
    """In a process with `ONEDNN_VERBOSE=1`: warmed up, then `onednn_primitives.MARKER`, then `--steps` calls."""
    import onednn_primitives

    _loaded, call, names = load(args)
    inputs = prepared_request(args, names, args.length)
    sys.stdout.flush()
    os.write(1, f"{onednn_primitives.MARKER}\n".encode())  # unbuffered, so it lands between oneDNN's lines
    for _ in range(args.steps):
        call(inputs)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--export_dir", required=True, help="A model's base path or one version directory.")
    parser.add_argument("--signature", default="serve_ids")
    parser.add_argument("--length", type=int, default=25, help="Tokens per text (token-id signatures).")
    parser.add_argument("--text", default="a gorgeous , deeply moving film with wonderful performances .",
                        help="The text of a raw-text signature's request.")
    parser.add_argument("--batch_size", type=int, default=1)
    parser.add_argument("--steps", type=int, default=10, help="Profiled (then timed) calls.")
    parser.add_argument("--top", type=int, default=15, help="Op types listed.")
    parser.add_argument("--no_onednn", action="store_true", help="Skip the oneDNN primitive summary.")
    parser.add_argument("--inter_op_threads", type=int, default=0,
                        help="0: TensorFlow's default; with --session, -1: the calling thread.")
    parser.add_argument("--session", action="store_true", help="Load as TF Serving does (a Session).")
    parser.add_argument("--lengths", help="Comma-separated request lengths to time and fit (token-id signatures).")
    parser.add_argument("--intra_op_threads", type=int, default=0, help="0: TensorFlow's default.")
    parser.add_argument("--onednn_child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.onednn_child:
        onednn_child(args)
        return

    import profile_forward
    from keras_bert_impl.hardware import cpu_description

    loaded, call, names = load(args)
    inputs = prepared_request(args, names, args.length)
    shape = {name: tuple(value.shape) for name, value in inputs.items()}
    threads = f"intra-op {args.intra_op_threads}, inter-op {args.inter_op_threads}"
    print(f"{version_directory(args.export_dir)}, signature {args.signature}, request {shape}, "
          f"{'a Session (TF Serving' + chr(39) + 's loader)' if args.session else 'tf.saved_model.load'}, {threads}; "
          f"CPU: {cpu_description()}", flush=True)
    if args.session:
        seconds = session_profile(loaded, args.signature, inputs, args.steps)
    else:
        seconds, _ = profile_forward.profile(lambda x: loaded.signatures[args.signature](**x).values(), inputs,
                                             args.steps)
    walls = []
    for _ in range(3 * args.steps):
        start = time.perf_counter()
        call(inputs)
        walls.append(time.perf_counter() - start)
    wall = statistics.median(walls)
    print(f"\nwall time per request, p50 of {len(walls)}: {wall * 1e3:.2f} ms; ops a request: {len(seconds)}\n")
    print("| kind | ms per request | share of op time |\n|---|---:|---:|")
    print("\n".join(profile_forward.kind_table(seconds, args.steps, wall)))
    print("\n| op type | kind | nodes | ms per request |\n|---|---|---:|---:|")
    print("\n".join(profile_forward.top_types(seconds, args.steps, args.top)), flush=True)
    if args.lengths:
        rows, fixed, per_token = length_scan(call, names, args)
        print(f"\none request by length, p50 of 5 interleaved rounds: {fixed:.2f} ms whatever the length + "
              f"{per_token:.3f} ms a token\n\n| tokens | p50 ms | the line |\n|---|---:|---:|")
        print("\n".join(rows), flush=True)
    if args.no_onednn:
        return

    import onednn_primitives

    child = subprocess.run([sys.executable, __file__, "--onednn_child", *(argv if argv is not None else sys.argv[1:])],
                           env={**os.environ, "ONEDNN_VERBOSE": "1"}, capture_output=True, text=True)
    lines = child.stdout.splitlines()
    if child.returncode or onednn_primitives.MARKER not in lines:
        sys.exit(f"the oneDNN child failed (exit {child.returncode}):\n{child.stderr[-2000:]}")
    calls = onednn_primitives.parse_exec_lines(lines[lines.index(onednn_primitives.MARKER) + 1:])
    if not calls:
        print("\noneDNN ran no primitives here (its rewrites are off on this CPU, or this build has none)")
        return
    print(f"\noneDNN's primitives, per request ({args.steps} requests; their own times, without TensorFlow's op "
          "around each):\n\n| primitive | implementation | calls | ms | GFLOP/s |\n|---|---|---:|---:|---:|")
    print("\n".join(onednn_primitives.summary_rows(calls, args.steps)))
    primitives_ms = sum(milliseconds for *_, milliseconds in calls) / args.steps
    print(f"\nper request: {wall * 1e3:.2f} ms = {primitives_ms:.2f} ms in oneDNN's primitives + "
          f"{wall * 1e3 - primitives_ms:.2f} ms for the rest of its {len(seconds)} ops")


if __name__ == "__main__":
    main()
