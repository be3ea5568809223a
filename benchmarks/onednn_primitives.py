"""Which oneDNN kernels a BERT forward pass runs, and how fast each is: `ONEDNN_VERBOSE`, summed.

`profile_forward.py` says how long each TensorFlow op took; this script says
what oneDNN did inside them: for every primitive it ran (matmul,
inner_product, softmax, reorder, eltwise, ...) the implementation it chose
(`brg_matmul:avx512_core_amx` multiplies with AMX tiles,
`brg_matmul:avx512_core_bf16` with AVX-512 bf16 dot products,
`x64:gemm:jit` with oneDNN's packed GEMM, `ref` with no vector code at all),
its calls and milliseconds per batch and, for the products, the rate it
reached in GFLOP/s. A reorder is a layout or dtype conversion (a weight
repacked for the kernel on every call, say), pure overhead.

Each variant runs in a child process with `ONEDNN_VERBOSE=1` (oneDNN reads
it once, when it starts): the child builds the variant as
`profile_forward.build_variant` does, calls it once to trace and warm up,
prints a marker, and runs `--steps` batches; only the lines after the marker
are summed.

Usage:
    .venv/bin/python benchmarks/onednn_primitives.py [--config base] [--batch_size 8]
        [--seq_length 128] [--steps 2] [--precisions bf16]
        [--variants serving,padding_free_frozen,keras_hub,matmul_floor] [--top 12]
        [--log_dir DIR]
"""

import argparse
import collections
import os
import pathlib
import re
import subprocess
import sys

BENCHMARKS = pathlib.Path(__file__).resolve().parent
MARKER = "#### timed batches follow"
# "onednn_verbose,v1,primitive,exec,cpu,<primitive>,<implementation>,<prop kind>,
#  <memory descriptors>,<attributes>,<auxiliary>,<problem>,<ms>"
_EXEC = "onednn_verbose,v1,primitive,exec,cpu,"
PRODUCTS = ("matmul", "inner_product")


def product_flops(primitive, problem):
    """Floating-point operations of one matmul or inner_product call, from its problem string.

    Args:
        primitive: "matmul" or "inner_product" (anything else gives 0).
        problem: oneDNN's problem description: "1024x768:768x3072" (matmul,
            leading dimensions are a batch, "8x12x128x64:8x12x64x128") or
            "mb1024ic768oc3072" (inner product).

    Returns:
        2 * M * N * K * batch, or 0 where the string does not parse.

    Example:
    >>> product_flops("matmul", "8x12x128x64:8x12x64x128")
    25165824
    >>> product_flops("inner_product", "mb1024ic768oc3072")
    4831838208
    """
    if primitive == "inner_product":
        sizes = dict(re.findall(r"(mb|ic|oc)(\d+)", problem))
        if set(sizes) != {"mb", "ic", "oc"}:
            return 0
        return 2 * int(sizes["mb"]) * int(sizes["ic"]) * int(sizes["oc"])
    if primitive != "matmul" or ":" not in problem:
        return 0
    try:
        source, weights = (list(map(int, part.split("x"))) for part in problem.split(":")[:2])
    except ValueError:
        return 0
    batch = 1
    for size in source[:-2]:
        batch *= size
    return 2 * batch * source[-2] * source[-1] * weights[-1]


def parse_exec_lines(lines):
    """Each executed primitive in oneDNN's verbose lines: (primitive, implementation, problem, ms).

    Args:
        lines: Text lines; those not of an executed CPU primitive are skipped.

    Returns:
        A list of tuples (str, str, str, float).

    Example:
    >>> line = ("onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx512_core_amx,undef,"
    ...         "src:bf16::blocked:ab::f0 wei:bf16::blocked:ab::f0,attr-scratchpad:user,,1024x768:768x768,0.25")
    >>> parse_exec_lines([line, "something else"])
    [('matmul', 'brg_matmul:avx512_core_amx', '1024x768:768x768', 0.25)]
    """
    calls = []
    for line in lines:
        if not line.startswith(_EXEC):
            continue
        fields = line.rstrip("\n").split(",")
        try:
            milliseconds = float(fields[-1])
        except ValueError:
            continue
        calls.append((fields[5], fields[6], fields[-2], milliseconds))
    return calls


def summary_rows(calls, batches, by_problem=False):
    """Markdown rows: primitive | implementation | [problem |] calls per batch | ms per batch | GFLOP/s.

    Largest time first; the rate is given for products only.
    """
    time, count, flops = collections.Counter(), collections.Counter(), collections.Counter()
    for primitive, implementation, problem, milliseconds in calls:
        key = (primitive, implementation, problem) if by_problem else (primitive, implementation)
        time[key] += milliseconds
        count[key] += 1
        flops[key] += product_flops(primitive, problem)
    rows = []
    for key, milliseconds in time.most_common():
        rate = f"{flops[key] / milliseconds / 1e6:.0f}" if flops[key] else ""
        rows.append(f"| {' | '.join(key)} | {count[key] / batches:.0f} | {milliseconds / batches:.1f} | {rate} |")
    total = sum(time.values())
    columns = 3 if by_problem else 2
    rows.append(f"| all primitives{' |' * (columns - 1)} {sum(count.values()) / batches:.0f} "
                f"| {total / batches:.1f} | |")
    return rows


def run_child(args):
    """In a child process: build one variant, warm it up, print the marker, run the timed batches."""
    sys.path.insert(0, str(BENCHMARKS.parent))
    sys.path.insert(0, str(BENCHMARKS))
    import numpy as np
    import tensorflow as tf

    import bench_forward
    import profile_forward

    inputs = {key: tf.constant(value) for key, value in bench_forward.make_inputs(
        args.batch_size, args.seq_length, np.random.default_rng(args.seed)).items()}
    forward, names = profile_forward.build_variant(args.variants, args.precisions, args.config)
    model_inputs = {names.get(key, key): value for key, value in inputs.items()}

    def call():
        for output in forward(model_inputs):
            output.numpy()

    call()
    sys.stdout.flush()
    os.write(1, f"{MARKER}\n".encode())  # unbuffered, so it lands between oneDNN's lines
    for _ in range(args.steps):
        call()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="base")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=2, help="Batches summed, after one warm-up.")
    parser.add_argument("--precisions", default="bf16", help="Comma-separated: fp32, bf16.")
    parser.add_argument("--variants", default="serving,padding_free_frozen,keras_hub,matmul_floor",
                        help="Comma-separated, from profile_forward.VARIANTS.")
    parser.add_argument("--top", type=int, default=12, help="Rows of the per-shape table.")
    parser.add_argument("--log_dir", help="Also keep each child's whole verbose log here.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return run_child(args)

    env = dict(os.environ, ONEDNN_VERBOSE="1", TF_CPP_MIN_LOG_LEVEL="3")
    header_printed = False
    for precision in args.precisions.split(","):
        for variant in args.variants.split(","):
            command = [sys.executable, __file__, "--child", f"--config={args.config}",
                       f"--batch_size={args.batch_size}", f"--seq_length={args.seq_length}",
                       f"--steps={args.steps}", f"--precisions={precision}", f"--variants={variant}",
                       f"--seed={args.seed}"]
            result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
            lines = result.stdout.splitlines()
            if args.log_dir:
                path = pathlib.Path(args.log_dir, f"onednn_{variant}_{precision}.log")
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(result.stdout + result.stderr)
            if result.returncode or MARKER not in lines:
                print(f"\n### {variant}, {precision}: failed (exit {result.returncode})\n"
                      f"{result.stderr[-2000:]}")
                continue
            if not header_printed:
                sys.path.insert(0, str(BENCHMARKS.parent))
                from keras_bert_impl.hardware import cpu_description

                info = [line.split(",", 4)[-1] for line in lines if line.startswith("onednn_verbose,v1,info,cpu,")]
                print(f"BERT-{args.config}, batch {args.batch_size} x seq {args.seq_length}, "
                      f"{args.steps} batches summed per variant after a warm-up\nCPU: {cpu_description()}; "
                      f"oneDNN {'; '.join(info)}")
                header_printed = True
            calls = parse_exec_lines(lines[lines.index(MARKER) + 1:])
            print(f"\n### {variant}, {precision}\n")
            print("| primitive | implementation | calls per batch | ms per batch | GFLOP/s |\n"
                  "|---|---|---:|---:|---:|")
            print("\n".join(summary_rows(calls, args.steps)))
            rows = summary_rows(calls, args.steps, by_problem=True)
            print("\n| primitive | implementation | problem | calls per batch | ms per batch | GFLOP/s |\n"
                  "|---|---|---|---:|---:|---:|")
            print("\n".join(rows[:args.top] + rows[-1:]), flush=True)


if __name__ == "__main__":
    main()
