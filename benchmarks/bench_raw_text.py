"""What raw text costs over token ids in our exports: `serving_default` (text, tokenized in the graph) against
`serve_ids` (the same text's ids, cut to its length), one request at a time.

Each export named on the command line is loaded with `tf.saved_model.load` in this one process; the sentences
(short review snippets, 9-16 tokens) are tokenized once in Python for `serve_ids`; every export and both
signatures are warmed up, then timed in interleaved passes (the exports' order reversed every other pass), one
request each, p50. Compare the overhead column within one run: absolute times move with what else the process
holds.

Usage:
    .venv/bin/python benchmarks/bench_raw_text.py --vocab_file vocab.txt [--passes 30] NAME=EXPORT_VERSION_DIR ...
"""

import argparse
import os
import pathlib
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import numpy as np  # noqa: E402

from keras_bert_impl.hardware import cpu_description, onednn_description  # noqa: E402

SENTENCES = (
    "a gripping, beautifully acted film that never loses its way",
    "the plot is thin and the jokes fall flat",
    "an ambitious mess, but a fascinating one",
    "i laughed, i cried, i checked my watch twice",
    "one of the year's best",
    "too long by half and not nearly as clever as it thinks it is",
)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("exports", nargs="+", help="NAME=path of an export's version directory")
    parser.add_argument("--vocab_file", required=True, help="the exports' vocabulary (for the ids)")
    parser.add_argument("--passes", type=int, default=30)
    return parser.parse_args()


def ids_of(text, tokenizer):
    """`serve_ids`' keyword arguments for one text: `[CLS] pieces [SEP]`, cut to its length."""
    import tensorflow as tf

    ids = np.array([tokenizer.convert_tokens_to_ids(["[CLS]"] + tokenizer.tokenize(text) + ["[SEP]"])], np.int32)
    return {"input_ids": tf.constant(ids), "input_mask": tf.ones_like(ids), "segment_ids": tf.zeros_like(ids)}


def main():
    args = parse_args()
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (the exports' tokenizer ops)

    from keras_bert_impl.tokenization.full_tokenizer import FullTokenizer

    tokenizer = FullTokenizer(args.vocab_file, do_lower_case=True)
    exports = dict(arg.split("=", 1) for arg in args.exports)
    signatures = {}
    for name, path in exports.items():
        loaded = tf.saved_model.load(path)
        signatures[name] = (loaded.signatures["serve_ids"], loaded.signatures["serving_default"], loaded)
    feeds = [ids_of(text, tokenizer) for text in SENTENCES]
    texts = [tf.constant([text]) for text in SENTENCES]

    def ids_call(signature, i):
        return [value.numpy() for value in signature(**feeds[i]).values()]

    def text_call(signature, i):
        return [value.numpy() for value in signature(texts[i]).values()]

    for ids_signature, text_signature, _ in signatures.values():
        for _ in range(5):
            for i in range(len(SENTENCES)):
                ids_call(ids_signature, i)
                text_call(text_signature, i)
    times = {name: {"ids": [], "text": []} for name in signatures}
    for step in range(args.passes):
        order = list(signatures.items()) if step % 2 == 0 else list(signatures.items())[::-1]
        for name, (ids_signature, text_signature, _) in order:
            for i in range(len(SENTENCES)):
                start = time.perf_counter()
                ids_call(ids_signature, i)
                times[name]["ids"].append(time.perf_counter() - start)
                start = time.perf_counter()
                text_call(text_signature, i)
                times[name]["text"].append(time.perf_counter() - start)

    print(f"CPU: {cpu_description()}; {onednn_description()}; TensorFlow {tf.__version__}")
    print(f"{len(SENTENCES)} sentences, {args.passes} interleaved passes, one request each, p50\n")
    print("| export | `serve_ids` | raw text | raw text over ids |")
    print("|---|---:|---:|---:|")
    for name, measured in times.items():
        ids, text = np.median(measured["ids"]) * 1e3, np.median(measured["text"]) * 1e3
        print(f"| {name} | {ids:.2f} ms | {text:.2f} ms | {100 * (text / ids - 1):+.1f} % |")


if __name__ == "__main__":
    main()
