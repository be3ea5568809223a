"""Python vs in-graph speed of the RoBERTa (byte-level BPE) and ALBERT (SentencePiece) tokenizers.

Vocabularies are trained here on the test corpus (tiny); 1000 texts, 10 distinct, batches of 64.
Run: .venv/bin/python benchmarks/bench_variant_tokenizers.py
"""
import io, pathlib, sys, tempfile, time
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))
import tensorflow as tf, tokenizers, sentencepiece as spm
from test_variant_tokenizers import CORPUS, HARD_TEXTS
from keras_bert_impl.tokenization.byte_level_bpe import *
from keras_bert_impl.tokenization.sentencepiece_tokenizer import *
texts = [t for t in (HARD_TEXTS[3:13] * 100)]  # 1000 short texts
OUT = tempfile.mkdtemp()
t = tokenizers.ByteLevelBPETokenizer(); t.train_from_iterator(CORPUS * 5, vocab_size=500, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"]); t.save_model(OUT)
vocab, merges = read_byte_level_bpe_files(OUT)
m = io.BytesIO(); spm.SentencePieceTrainer.train(sentence_iterator=iter([preprocess_text(c) for c in CORPUS]*5), model_writer=m, vocab_size=220, pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, control_symbols=["[CLS]","[SEP]","[MASK]"], minloglevel=2, hard_vocab_limit=False)
for name, py, g in [("byte-level BPE", ByteLevelBpeTokenizer.from_vocab(vocab, merges), InGraphByteLevelBpeTokenizer(vocab, merges)),
                    ("SentencePiece", SentencePieceTokenizer.from_model_proto(m.getvalue()), InGraphSentencePieceTokenizer(m.getvalue()))]:
    f = tf.function(g.tokenize); batch = tf.constant(texts); f(batch[:64])
    t0 = time.perf_counter(); [py.encode(x) for x in texts]; tp = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(0, len(texts), 64): f(batch[i:i+64])
    tg = time.perf_counter() - t0
    print(f"{name}: python {len(texts)/tp:.0f} texts/s, in-graph (batches of 64) {len(texts)/tg:.0f} texts/s")
