"""Python vs in-graph speed of the RoBERTa (byte-level BPE) and ALBERT (SentencePiece) tokenizers.

The vocabularies are trained here on the tests' small corpus; 1,000 texts
(10 distinct hard ones), the in-graph tokenizers in batches of 64.

Run: .venv/bin/python benchmarks/bench_variant_tokenizers.py
"""

import io
import pathlib
import sys
import tempfile
import time

import sentencepiece
import tensorflow as tf
import tokenizers

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))

from test_variant_tokenizers import CORPUS, HARD_TEXTS  # noqa: E402

from keras_bert_impl.hardware import cpu_description  # noqa: E402
from keras_bert_impl.tokenization.byte_level_bpe import (  # noqa: E402
    ByteLevelBpeTokenizer,
    InGraphByteLevelBpeTokenizer,
    read_byte_level_bpe_files,
)
from keras_bert_impl.tokenization.sentencepiece_tokenizer import (  # noqa: E402
    InGraphSentencePieceTokenizer,
    SentencePieceTokenizer,
    preprocess_text,
)

BATCH = 64


def trained_tokenizers(directory):
    """(name, Python tokenizer, in-graph tokenizer) for a BPE and a unigram model trained on `CORPUS`."""
    bpe = tokenizers.ByteLevelBPETokenizer()
    bpe.train_from_iterator(CORPUS * 5, vocab_size=500, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bpe.save_model(directory)
    vocab, merges = read_byte_level_bpe_files(directory)
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter([preprocess_text(text) for text in CORPUS] * 5), model_writer=model, vocab_size=220,
        pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"], minloglevel=2,
        hard_vocab_limit=False)
    return [
        ("byte-level BPE", ByteLevelBpeTokenizer.from_vocab(vocab, merges), InGraphByteLevelBpeTokenizer(vocab, merges)),
        ("SentencePiece", SentencePieceTokenizer.from_model_proto(model.getvalue()),
         InGraphSentencePieceTokenizer(model.getvalue())),
    ]


def main():
    print(f"CPU: {cpu_description()}")
    texts = HARD_TEXTS[3:13] * 100
    print("| tokenizer | Python, texts/s | in-graph (batches of 64), texts/s |\n|---|---:|---:|")
    with tempfile.TemporaryDirectory() as directory:
        for name, python_tokenizer, graph_tokenizer in trained_tokenizers(directory):
            tokenize = tf.function(graph_tokenizer.tokenize)
            batch = tf.constant(texts)
            tokenize(batch[:BATCH])
            start = time.perf_counter()
            for text in texts:
                python_tokenizer.encode(text)
            python_seconds = time.perf_counter() - start
            start = time.perf_counter()
            for i in range(0, len(texts), BATCH):
                tokenize(batch[i:i + BATCH])
            graph_seconds = time.perf_counter() - start
            print(f"| {name} | {len(texts) / python_seconds:,.0f} | {len(texts) / graph_seconds:,.0f} |")


if __name__ == "__main__":
    main()
