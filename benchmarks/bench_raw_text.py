"""What raw text costs over token ids in our exports: `serving_default` (text, tokenized in the graph) against
`serve_ids` (the same text's ids, cut to its length), one request at a time.

Each export named on the command line is loaded with `tf.saved_model.load` in this one process; the sentences
(short review snippets, 9-16 tokens) are tokenized once in Python for `serve_ids`; every export and both
signatures are warmed up, then timed in interleaved passes (the exports' order reversed every other pass), one
request each, p50. Compare the overhead column within one run: absolute times move with what else the process
holds. With `--session` each export is loaded as TF Serving's C++ server loads it (a `tf.compat.v1.Session` whose
variables the SavedModel's restore op sets, one callable per signature) with TF Serving's two thread flags, so
`--session --tensorflow_intra_op_parallelism=1 --tensorflow_inter_op_parallelism=-1` times the signatures as an
online TF Serving runs them (each request's ops in the thread that sent it).

Usage:
    .venv/bin/python benchmarks/bench_raw_text.py --vocab_file vocab.txt [--passes 30] [--session
        [--tensorflow_intra_op_parallelism N] [--tensorflow_inter_op_parallelism N]] NAME=EXPORT_VERSION_DIR ...
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
    parser.add_argument("--session", action="store_true", help="load as TF Serving does: a Session per export")
    parser.add_argument("--tensorflow_intra_op_parallelism", type=int, default=0, help="with --session")
    parser.add_argument("--tensorflow_inter_op_parallelism", type=int, default=0, help="with --session")
    return parser.parse_args()


def ids_of(text, tokenizer):
    """`serve_ids`' keyword arguments for one text: `[CLS] pieces [SEP]`, cut to its length (NumPy arrays)."""
    ids = np.array([tokenizer.convert_tokens_to_ids(["[CLS]"] + tokenizer.tokenize(text) + ["[SEP]"])], np.int32)
    return {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}


def loaded_signatures(path, feeds, texts):
    """`(ids_call, text_call)` of an export loaded with `tf.saved_model.load`: each of an index into `feeds` (ids
    dicts) or `texts` -> arrays, the inputs made tensors once, before any timing."""
    import tensorflow as tf

    loaded = tf.saved_model.load(path)
    ids_signature, text_signature = loaded.signatures["serve_ids"], loaded.signatures["serving_default"]
    id_tensors = [{name: tf.constant(value) for name, value in feed.items()} for feed in feeds]
    text_tensors = [tf.constant([text]) for text in texts]

    def ids_call(i, _loaded=loaded):  # the signatures need their object alive
        return [value.numpy() for value in ids_signature(**id_tensors[i]).values()]

    def text_call(i):
        return [value.numpy() for value in text_signature(text_tensors[i]).values()]

    return ids_call, text_call


def session_signatures(path, feeds, texts, intra_op_threads, inter_op_threads):
    """`(ids_call, text_call)` of an export loaded as TF Serving loads it, a Session with its two thread flags
    (`serving.session_model.SessionModel`): each of an index into `feeds` or `texts`, their arrays made once."""
    from keras_bert_impl.serving.session_model import SessionModel

    model = SessionModel(path, intra_op_threads, inter_op_threads)
    ids_run, text_run = model.callable("serve_ids"), model.callable("serving_default")
    (text_input,) = model.input_names("serving_default")
    text_arrays = [{text_input: np.array([text], object)} for text in texts]
    return lambda i: ids_run(**feeds[i]), lambda i: text_run(**text_arrays[i])


def main():
    args = parse_args()
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (the exports' tokenizer ops)

    from keras_bert_impl.tokenization.full_tokenizer import FullTokenizer

    tokenizer = FullTokenizer(args.vocab_file, do_lower_case=True)
    exports = dict(arg.split("=", 1) for arg in args.exports)
    feeds = [ids_of(text, tokenizer) for text in SENTENCES]
    # With --session no eager op runs before the first Session: its intra-op count then sizes the process' pool.
    signatures = {name: session_signatures(path, feeds, SENTENCES, args.tensorflow_intra_op_parallelism,
                                           args.tensorflow_inter_op_parallelism)
                  if args.session else loaded_signatures(path, feeds, SENTENCES) for name, path in exports.items()}

    for ids_call, text_call in signatures.values():
        for _ in range(5):
            for i in range(len(SENTENCES)):
                ids_call(i)
                text_call(i)
    times = {name: {"ids": [], "text": []} for name in signatures}
    for step in range(args.passes):
        order = list(signatures.items()) if step % 2 == 0 else list(signatures.items())[::-1]
        for name, (ids_call, text_call) in order:
            for i in range(len(SENTENCES)):
                start = time.perf_counter()
                ids_call(i)
                times[name]["ids"].append(time.perf_counter() - start)
                start = time.perf_counter()
                text_call(i)
                times[name]["text"].append(time.perf_counter() - start)

    loader = (f"TF Serving's loader (a Session; intra-op {args.tensorflow_intra_op_parallelism}, inter-op "
              f"{args.tensorflow_inter_op_parallelism})" if args.session else "tf.saved_model.load")
    print(f"CPU: {cpu_description()}; {onednn_description()}; TensorFlow {tf.__version__}")
    print(f"{len(SENTENCES)} sentences, {args.passes} interleaved passes, one request each, p50; {loader}\n")
    print("| export | `serve_ids` | raw text | raw text over ids |")
    print("|---|---:|---:|---:|")
    for name, measured in times.items():
        ids, text = np.median(measured["ids"]) * 1e3, np.median(measured["text"]) * 1e3
        print(f"| {name} | {ids:.2f} ms | {text:.2f} ms | {100 * (text / ids - 1):+.1f} % |")


if __name__ == "__main__":
    main()
