"""RoBERTa's byte-level BPE and ALBERT's SentencePiece: Python and graph against independent oracles.

The vocabularies are trained here, on text written here (no model hub):
`tokenizers` trains the byte-level BPE, `sentencepiece` the unigram model.
The oracles are Hugging Face's `transformers` RobertaTokenizer / AlbertTokenizer
(the `tokenizers` Rust library underneath, no torch), `tokenizers`' own
ByteLevel pre-tokenizer and RobertaProcessing, and tf-models' copy of
google-research/albert's `preprocess_text` / `encode_ids` over the
`sentencepiece` package.
"""

import gc
import io
import json
import unicodedata

import pytest
import tensorflow as tf

tokenizers = pytest.importorskip("tokenizers")
spm = pytest.importorskip("sentencepiece")
transformers = pytest.importorskip("transformers")

from official.nlp.tools import tokenization as albert_original  # noqa: E402

from keras_bert_impl.tokenization import from_files  # noqa: E402
from keras_bert_impl.tokenization.byte_level_bpe import (  # noqa: E402
    ByteLevelBpeTokenizer,
    InGraphByteLevelBpeTokenizer,
    pretokenization_regex,
    read_byte_level_bpe_files,
)
from keras_bert_impl.tokenization.preprocessor import BertPreprocessor  # noqa: E402
from keras_bert_impl.tokenization.sentencepiece_tokenizer import (  # noqa: E402
    InGraphSentencePieceTokenizer,
    SentencePieceTokenizer,
    preprocess_text,
    sentencepiece_ops,
)
from keras_bert_impl.tokenization.text_preprocessor import TextPreprocessor  # noqa: E402

CORPUS = [
    "Hello world! It's a test, isn't it? Don't we'll they've I'm you'd.",
    "Café naïve résumé Ångström über straße 東京 中文 日本語 한국어 😀👍🏽 ☃",
    "https://example.com/a?b=1&c=%20 visit www.test.org/path#frag e-mail: a.b@c.de",
    "numbers 12345 and 3.14, 1,000,000 in 1990, 2000, 9, 10, x9, a1, £5 €6 (x) - y.",
    "\t tabs\n\nnewlines   spaces ``quoted'' and 'single' \"double\"",
    "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX.",
]
HARD_TEXTS = [
    "",
    " ",
    "   leading and trailing   ",
    "Hello world! It's a test.",
    "Don't we'll they've I'm you'd 'S 'sa ''s  's \n's x'RE",
    "Café naïve résumé Ångström ÅNGSTRÖM über STRASSE",
    "東京 中文 日本語 한국어 ｱｲｳ",
    "😀👍🏽 👨‍👩‍👧 ☃ 🇩🇪",
    "tabs\tand\nnewlines\r\n\n  mixed \t\n runs\u3000ideographic\u00a0nbsp\u2028sep\x85nel\x1cfs",
    "https://example.com/a?b=1&c=%20#x www.test.org user@mail.de",
    "in 1990, 2000, 9, 10, x9, a1, 12,345,678, ٣, ²,",
    "``quoted'' (x) - y. £5 €6 ﬁ ǅ ½",
    "zero\u200bwidth soft\u00adhyphen combining a\u0301\u0327b",
    " ".join(CORPUS) * 8,  # long
]
ROBERTA_MASK_TEXTS = [
    "Hello <mask> world",
    "Hello<mask>world",
    "Hello  \t<mask>.",
    "Hello\u3000<mask>",
    "<mask><mask>  <mask>",
    "a <s> b </s> c <pad> <unk>",
    "<mask> starts",
    "<MASK> is text",
]
ALBERT_MASK_TEXTS = [
    "Hello [MASK] world",
    "Hello[MASK]world",
    "The capital is [MASK]. [MASK]",
    "a [CLS] b [SEP] <pad> <unk>",
    "[mask] is text",
]


@pytest.fixture(scope="module")
def roberta_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("roberta")
    trainer = tokenizers.ByteLevelBPETokenizer()
    trainer.train_from_iterator(
        CORPUS * 5, vocab_size=500, min_frequency=1, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    )
    trainer.save_model(str(directory))
    return directory


@pytest.fixture(scope="module")
def roberta_oracle(roberta_dir):
    # roberta-base's tokenizer files give <mask> lstrip=True; a bare vocab.json + merges.txt does not.
    mask = tokenizers.AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False, special=True)
    return transformers.RobertaTokenizer.from_pretrained(str(roberta_dir), mask_token=mask)


@pytest.fixture(scope="module")
def roberta_ours(roberta_dir):
    vocab, merges = read_byte_level_bpe_files(roberta_dir)
    return (ByteLevelBpeTokenizer(roberta_dir / "vocab.json", roberta_dir / "merges.txt"),
            InGraphByteLevelBpeTokenizer(vocab, merges))


def _albert_preprocess(text):
    return " ".join(text.strip().split()).replace("``", '"').replace("''", '"')


def _train_albert(directory, user_defined_symbols):
    model = io.BytesIO()
    sentences = [albert_original.preprocess_text(_albert_preprocess(text), lower=True) for text in CORPUS] * 5
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=model, vocab_size=220, model_type="unigram",
        pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        user_defined_symbols=user_defined_symbols, minloglevel=2, hard_vocab_limit=False,
    )
    (directory / "spiece.model").write_bytes(model.getvalue())
    return directory


@pytest.fixture(scope="module")
def albert_dir(tmp_path_factory):
    # ALBERT's own model also holds user-defined pieces for punctuation.
    return _train_albert(tmp_path_factory.mktemp("albert"), ["(", ")", '"', "-", ".", "–", "£", "€"])


@pytest.fixture(scope="module")
def albert_plain_dir(tmp_path_factory):
    return _train_albert(tmp_path_factory.mktemp("albert_plain"), [])


@pytest.fixture(scope="module")
def albert_sp(albert_dir):
    return spm.SentencePieceProcessor(model_file=str(albert_dir / "spiece.model"))


def _albert_original_ids(sp_model, text):
    """google-research/albert: preprocess_text (remove_space, quotes, NFKD, lower) + encode_ids."""
    return albert_original.encode_ids(sp_model, albert_original.preprocess_text(_albert_preprocess(text), lower=True))


def _graph_ids(tokenizer, texts):
    return tf.function(tokenizer.tokenize)(tf.constant(texts)).to_list()


# ----------------------------------------------------------------------------
# Byte-level BPE.
# ----------------------------------------------------------------------------


def test_byte_level_bpe_equals_transformers_roberta(roberta_oracle, roberta_ours):
    python, graph = roberta_ours
    texts = HARD_TEXTS + ROBERTA_MASK_TEXTS
    expected = [roberta_oracle(text, add_special_tokens=False)["input_ids"] for text in texts]
    assert [python.encode(text) for text in texts] == expected
    assert _graph_ids(graph, texts) == expected
    # The vocabulary is small enough that words split: the merges really run.
    assert len(expected[3]) > len("Hello world! It's a test.".split())


def test_pretokenization_equals_tokenizers_byte_level_on_many_code_points():
    byte_level = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    to_bytes = {c: b for b, c in _byte_chars().items()}
    # Every assigned code point below U+3100 (all scripts' letters, digits, marks,
    # spaces, punctuation and symbols), interleaved with spaces and apostrophes.
    chars = [chr(cp) for cp in range(0x20, 0x3100) if unicodedata.category(chr(cp)) not in ("Cn", "Cs", "Co")]
    text = "".join(c + (" " if i % 3 == 0 else "'s" if i % 7 == 0 else "  " if i % 11 == 0 else "")
                   for i, c in enumerate(chars))
    expected = [bytes(to_bytes[c] for c in word).decode("utf-8") for word, _ in byte_level.pre_tokenize_str(text)]
    assert pretokenization_regex().findall(text) == expected


def _byte_chars():
    from keras_bert_impl.tokenization.byte_level_bpe import bytes_to_unicode

    return bytes_to_unicode()


def test_in_graph_words_equal_python_regex(roberta_ours):
    _, graph = roberta_ours
    texts = HARD_TEXTS + ["a  b", "a \n b", "x'll'd", "' 's", "  's", "\n\n'", "9'm"]
    words = graph.pretokenize(tf.constant(texts)).to_list()
    assert [[w.decode("utf-8") for w in row] for row in words] == [pretokenization_regex().findall(t) for t in texts]


def test_add_prefix_space_equals_tokenizers(roberta_dir):
    oracle = tokenizers.ByteLevelBPETokenizer(str(roberta_dir / "vocab.json"), str(roberta_dir / "merges.txt"),
                                              add_prefix_space=True)
    vocab, merges = read_byte_level_bpe_files(roberta_dir)
    python = ByteLevelBpeTokenizer.from_vocab(vocab, merges, add_prefix_space=True)
    graph = InGraphByteLevelBpeTokenizer(vocab, merges, add_prefix_space=True)
    texts = ["Hello world", " already spaced", "", "tabs\tfirst"]
    expected = [oracle.encode(text).ids for text in texts]
    assert [python.encode(text) for text in texts] == expected
    assert _graph_ids(graph, texts) == expected


def test_roberta_packing_equals_roberta_processing(roberta_dir):
    oracle = tokenizers.ByteLevelBPETokenizer(str(roberta_dir / "vocab.json"), str(roberta_dir / "merges.txt"))
    vocab = json.loads((roberta_dir / "vocab.json").read_text(encoding="utf-8"))
    oracle.post_processor = tokenizers.processors.RobertaProcessing(("</s>", vocab["</s>"]), ("<s>", vocab["<s>"]))
    oracle.enable_truncation(16, strategy="longest_first")
    oracle.enable_padding(pad_id=vocab["<pad>"], length=16)
    preprocessor = TextPreprocessor(roberta_dir, max_seq_length=16)
    pairs = [("Hello world!", "It's a test."), ("The quick brown fox jumps over the lazy dog.", "Café 東京"), ("a", "b")]
    outputs = preprocessor(([a for a, _ in pairs], [b for _, b in pairs]))
    expected = [oracle.encode(a, b) for a, b in pairs]
    assert outputs["input_ids"].numpy().tolist() == [e.ids for e in expected]
    assert outputs["input_mask"].numpy().tolist() == [e.attention_mask for e in expected]
    assert outputs["segment_ids"].numpy().tolist() == [[0] * 16] * len(pairs)  # no token types
    single = preprocessor(["Hello world!"])["input_ids"].numpy().tolist()[0]
    assert single[:1] == [vocab["<s>"]] and single.count(vocab["</s>"]) == 1 and single[-1] == vocab["<pad>"]


# ----------------------------------------------------------------------------
# SentencePiece (ALBERT).
# ----------------------------------------------------------------------------


def test_sentencepiece_equals_original_albert(albert_dir, albert_sp):
    python = SentencePieceTokenizer(albert_dir / "spiece.model")
    graph = InGraphSentencePieceTokenizer((albert_dir / "spiece.model").read_bytes())
    texts = HARD_TEXTS + ["ΟΔΟΣ ΣΑΣ. İstanbul हिन्दी"]
    expected = [_albert_original_ids(albert_sp, text) for text in texts]
    assert [python.encode(text) for text in texts] == expected
    assert _graph_ids(graph, texts) == expected
    # The digit-comma rule really applied: plain SentencePiece keeps "0," pieces.
    text = "in 1990, 2000, 9, 10, x9, a1, 12,345,678,"
    plain = albert_sp.encode(albert_original.preprocess_text(text, lower=True))
    assert plain != _albert_original_ids(albert_sp, text)


def test_sentencepiece_models_outlive_tensorflows_kernel_cache_and_each_is_freed_with_its_tokenizer(
        albert_dir, albert_sp, tmp_path):
    # tf.random.set_seed (keras.utils.set_random_seed, clear_session) empties TensorFlow's cache of eager kernels;
    # TF Text's own SentencePiece model belonged to its cached kernel and was deleted with it ("does not exist").
    import keras

    texts = HARD_TEXTS[3:7]
    expected = [_albert_original_ids(albert_sp, text) for text in texts]
    proto = (albert_dir / "spiece.model").read_bytes()
    graph, other = InGraphSentencePieceTokenizer(proto), InGraphSentencePieceTokenizer(proto)
    traced = tf.function(graph.tokenize)
    assert traced(tf.constant(texts)).to_list() == expected
    module = tf.Module()
    module.tokenizer = graph
    module.tokenize = tf.function(lambda text: graph.tokenize(text).to_tensor(default_value=-1),
                                  input_signature=[tf.TensorSpec([None], tf.string)])
    tf.saved_model.save(module, str(tmp_path / "tokenizer"))
    first, second = (tf.saved_model.load(str(tmp_path / "tokenizer")) for _ in range(2))

    tf.random.set_seed(1)
    keras.utils.set_random_seed(1)
    assert graph.tokenize(tf.constant(texts)).to_list() == expected  # eager
    assert traced(tf.constant(texts)).to_list() == expected  # a function traced before
    handle = other.sentencepiece.resource_handle
    del other
    gc.collect()
    with pytest.raises(tf.errors.NotFoundError, match="does not exist"):
        sentencepiece_ops.sentencepiece_vocab_size_op(handle)
    assert traced(tf.constant(texts)).to_list() == expected  # the same model bytes, a model of its own
    # Each load of an export owns its model: one freed leaves the other and the tokenizer it was saved from.
    del first
    gc.collect()
    served = tf.RaggedTensor.from_tensor(second.tokenize(tf.constant(texts)), padding=-1).to_list()
    assert served == expected
    assert graph.tokenize(tf.constant(texts)).to_list() == expected


# Text on which transformers' AlbertTokenizer and the original agree (the next test checks the rest against the
# original alone).
TRANSFORMERS_ALBERT_TEXTS = [text.replace("한국어 ", "").replace(" ｱｲｳ", "").replace("\x1c", "") for text in HARD_TEXTS]


def test_sentencepiece_masks_in_text_and_packing_equal_transformers_albert(albert_plain_dir):
    albert_dir = albert_plain_dir
    oracle = transformers.AlbertTokenizer.from_pretrained(str(albert_dir))
    # transformers 5's AlbertTokenizer has no digit-comma rule: compare with it switched off.
    python = SentencePieceTokenizer(albert_dir / "spiece.model", split_digit_comma=False)
    graph = InGraphSentencePieceTokenizer((albert_dir / "spiece.model").read_bytes(), split_digit_comma=False)
    texts = TRANSFORMERS_ALBERT_TEXTS + ALBERT_MASK_TEXTS
    expected = [oracle(text, add_special_tokens=False)["input_ids"] for text in texts]
    assert [python.encode(text) for text in texts] == expected
    assert _graph_ids(graph, texts) == expected

    preprocessor = TextPreprocessor(albert_dir, max_seq_length=20)
    pairs = [("Hello [MASK] world!", "It's a test."), ("The quick brown fox jumps over the lazy dog.", "Café")]
    outputs = preprocessor(([a for a, _ in pairs], [b for _, b in pairs]))
    for row, (a, b) in enumerate(pairs):
        packed = oracle(a, b, truncation="longest_first", max_length=20, padding="max_length",
                        return_token_type_ids=True)
        ours = [python.encode(a), python.encode(b)]  # no digit-comma text here: the defaults agree
        assert ours == [oracle(a, add_special_tokens=False)["input_ids"], oracle(b, add_special_tokens=False)["input_ids"]]
        assert outputs["input_ids"].numpy()[row].tolist() == packed["input_ids"]
        assert outputs["segment_ids"].numpy()[row].tolist() == packed["token_type_ids"]
        assert outputs["input_mask"].numpy()[row].tolist() == packed["attention_mask"]


def test_sentencepiece_keeps_the_original_rules_on_text_where_rust_normalizers_differ(albert_dir, albert_sp):
    # The original (tf-models' copy of google-research/albert over the sentencepiece
    # package) is the reference here, never transformers: on these texts the Rust
    # normalizers of some transformers releases have differed from it, and which
    # ones do changes from release to release.
    # The digit-comma rule; Mc vowel signs; final sigma; Hangul (NFKD jamo);
    # U+001C (a space to str.split); user-defined pieces after a word.
    python = SentencePieceTokenizer(albert_dir / "spiece.model")
    graph = InGraphSentencePieceTokenizer((albert_dir / "spiece.model").read_bytes())
    texts = ["in 1990, x", "한국어", "a\x1cb", "x (y) z.", "हिन्दी", "ΟΔΟΣ"]
    expected = [_albert_original_ids(albert_sp, text) for text in texts]
    assert [python.encode(text) for text in texts] == expected
    assert _graph_ids(graph, texts) == expected
    # Hand-computed: Devanagari's vowel sign i (Mc, combining class 0) is kept while
    # the virama (Mn) goes; a final capital sigma lower-cases to ς (str.lower).
    assert preprocess_text("हिन्दी") == "हिनदी"
    assert preprocess_text("ΟΔΟΣ") == "οδος"


# ----------------------------------------------------------------------------
# Choosing by files.
# ----------------------------------------------------------------------------


def test_the_files_pick_the_tokenizer(roberta_dir, albert_dir, tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "!"]) + "\n",
                                        encoding="utf-8")
    assert [from_files.tokenizer_kind(d) for d in (roberta_dir, albert_dir, tmp_path)] == [
        "byte_level_bpe", "sentencepiece", "wordpiece"]
    assert type(from_files.tokenizer_from_files(roberta_dir)).__name__ == "ByteLevelBpeTokenizer"
    assert type(from_files.tokenizer_from_files(albert_dir)).__name__ == "SentencePieceTokenizer"
    assert from_files.tokenizer_from_files(tmp_path).tokenize("Hello!") == ["hello", "!"]
    # WordPiece through TextPreprocessor packs exactly as BertPreprocessor.
    pair = (["Hello! hello", "hello"], ["hello", ""])
    ours = TextPreprocessor(tmp_path, max_seq_length=6)(pair)
    bert = BertPreprocessor(str(tmp_path / "vocab.txt"), max_seq_length=6)(pair)
    for name in ("input_ids", "input_mask", "segment_ids"):
        assert ours[name].numpy().tolist() == bert[name].numpy().tolist()
