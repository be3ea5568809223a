"""The in-graph tokenizer's full (non-ASCII) path: equal to `FullTokenizer` on
batches dense in the characters each of its steps treats specially, traced as
served and eagerly, cased and uncased; and small enough a graph to trace and
load quickly (every raw-text export holds it)."""

import collections
import random

import pytest
import tensorflow as tf

from keras_bert_impl.tokenization import FullTokenizer
from keras_bert_impl.tokenization.in_graph import InGraphTokenizer, build_tables

# Final sigma against cased, uncased and case-ignorable neighbours; combining marks of
# different classes (canonical reordering, then removal); characters that decompose or
# lower to something else; CJK; removed characters (controls, NUL, U+FFFD, a format
# character); whitespace the original maps to a space; punctuation.
PIECES = ["Σ", "σ", "ς", "ΟΔΥΣΣΕΥΣ", "A", "a", "1", "'", "\u0301", "\u0327", "\u0323", "\u0308", "\u0345",
          "\u05b0", "\u0591", "e", "é", "ẹ́", "ᾳ", "Å", "İ", "ß", "ǅ", "ﬁ", "Ⅷ", "東", "京", " ", "\t", "\n",
          "\u2028", "\x00", "\ufffd", "\x7f", "\u200b", "!", ","]


def texts(count, seed=0):
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12))) for _ in range(count)]


@pytest.fixture(scope="module")
def tables():
    return build_tables()


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_full_path_equals_full_tokenizer_on_special_characters(bert_vocab_file, tables, do_lower_case):
    python = FullTokenizer(str(bert_vocab_file), do_lower_case=do_lower_case)
    tokenizer = InGraphTokenizer([python.inv_vocab[i] for i in range(len(python.inv_vocab))],
                                 do_lower_case=do_lower_case, tables=tables)
    traced = tf.function(tokenizer.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
    samples = texts(1000)
    for start in range(0, len(samples), 7):  # batches with empty rows, rows of only removed characters
        batch = samples[start:start + 7]
        expected = [python.convert_tokens_to_ids(python.tokenize(text)) for text in batch]
        assert traced(tf.constant([text.encode() for text in batch])).to_list() == expected, batch
    batch = samples[:60]
    expected = [python.convert_tokens_to_ids(python.tokenize(text)) for text in batch]
    assert tokenizer.tokenize(tf.constant([text.encode() for text in batch])).to_list() == expected


def test_the_traced_tokenizer_is_a_small_graph(tables):
    # Each step on flat code points and their rows, not on RaggedTensors: `value_rowids()`
    # and `tf.boolean_mask` add 30-75 ops each, and the ragged form held 1,249 ops (843
    # in the full path's branch); now ~510. The bound leaves room for TensorFlow's versions.
    tokenizer = InGraphTokenizer(["[PAD]", "[UNK]", "a", "##b"], tables=tables)
    graph = tf.function(tokenizer.tokenize, input_signature=[tf.TensorSpec([None], tf.string)]) \
        .get_concrete_function().graph.as_graph_def()
    ops = collections.Counter(node.op for node in graph.node)
    ops.update(node.op for function in graph.library.function for node in function.node_def)
    assert sum(ops.values()) < 700, ops.most_common(10)
    assert ops["Where"] <= 12  # one per selection: no `boolean_mask` shape logic around them
