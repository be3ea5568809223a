"""Token classification: CoNLL reading, first-sub-token features against
tf-models' tagging library, entity scores against seqeval, the tagger model
and loss against NumPy, and tools/run_ner.py end to end."""

import os
import subprocess
import sys

import numpy as np
import pytest
from official.nlp.data import tagging_data_lib
from seqeval import metrics as seqeval_metrics

from keras_bert_impl.checkpoints.original import list_original_variables, save_original_checkpoint
from keras_bert_impl.data import conll
from keras_bert_impl.errors import InputFileError
from keras_bert_impl.models.bert_model import BertModel
from keras_bert_impl.models.token_classifier import BertTokenClassifier, token_classification_loss
from keras_bert_impl.tasks.token_tagging import weighted_loss
from keras_bert_impl.tokenization import FullTokenizer
from tests.helpers import random_inputs, randomize, tiny_config
from tools import run_ner

SAMPLE = (
    "-DOCSTART- -X- -X- O\n"
    "\n"
    "EU NNP B-NP B-ORG\n"
    "rejects VBZ B-VP O\n"
    "German JJ B-NP B-MISC\n"
    "call NN I-NP O\n"
    ".\t.  O   O\r\n"
    "\n"
    "\n"
    "Peter NNP B-NP B-PER\n"
    "Blackburn NNP I-NP I-PER\n"
    "-DOCSTART- -X- -X- O\n"
    "Zürich NNP B-NP B-LOC\n"
)


def test_read_conll(tmp_path):
    path = tmp_path / "sample.txt"
    path.write_text(SAMPLE, encoding="utf-8")
    sentences = conll.read_conll(path)
    assert [s.words for s in sentences] == [["EU", "rejects", "German", "call", "."], ["Peter", "Blackburn"], ["Zürich"]]
    assert [s.labels for s in sentences] == [["B-ORG", "O", "B-MISC", "O", "O"], ["B-PER", "I-PER"], ["B-LOC"]]
    assert sentences[1].line_numbers == [10, 11]
    assert sentences[0].columns[4] == [".", ".", "O", "O"]
    assert conll.label_list(sentences) == ["O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-PER"]

    words_only = tmp_path / "words.txt"
    words_only.write_text("Peter\nBlackburn\n\nZürich\n", encoding="utf-8")
    assert [s.labels for s in conll.read_conll(words_only, require_labels=False)] == [None, None]


@pytest.mark.parametrize(
    "text, message",
    [
        ("EU NNP B-NP B-ORG\nrejects VBZ O\n", "bad.txt:2: 3 columns, but line 1 has 4"),
        ("-DOCSTART- -X- O\n\nEU B-ORG\n\nPeter NNP B-PER\n", "bad.txt:5: 3 columns, but line 3 has 2"),
        ("EU\nrejects\n", "bad.txt:1: needs a label column (word ... label), found 1 column"),
        ("-DOCSTART- -X- -X- O\n\n\n", "bad.txt: no sentences (an empty file, or only -DOCSTART- lines)"),
    ],
)
def test_bad_conll_names_file_and_line(tmp_path, text, message):
    path = tmp_path / "bad.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputFileError) as error:
        conll.read_conll(path)
    assert str(error.value) == f"{tmp_path}/{message}"


def test_not_utf8_and_unknown_label_name_the_line(tmp_path, bert_vocab_file):
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"EU B-ORG\n\nZ\xfcrich B-LOC\n")
    with pytest.raises(InputFileError, match=r"latin1.txt:3: not valid UTF-8"):
        conll.read_conll(path)
    path.write_text("EU B-ORG\n\nParis B-CITY\n", encoding="utf-8")
    sentences = conll.read_conll(path)
    tokenizer = FullTokenizer(bert_vocab_file)
    with pytest.raises(InputFileError, match=r"latin1.txt:3: label 'B-CITY' is not one of the model's labels \(O, B-ORG\)"):
        conll.convert_sentences_to_features(sentences, tokenizer, 16, {"O": 0, "B-ORG": 1}, path)


WORDS = (
    "Johannesburg Anschluss unaffable Tschaikowsky Zürich's 1,250,000 e-mail Ångström "
    "東京 Москва naïve O'Neill \u200b the a of ⭐".split(" ")
)


@pytest.mark.parametrize("max_seq_length", [8, 12, 64])
def test_features_equal_tf_models_tagging(bert_vocab_file, max_seq_length):
    """Word pieces, first-piece labels, ignored other pieces and the split of
    long sentences into windows, as tf-models' tagging_data_lib makes them."""
    rng = np.random.default_rng(max_seq_length)
    labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    sentences = []
    for index in range(12):
        words = list(rng.choice(WORDS, size=int(rng.integers(1, 25))))
        sentence_labels = list(rng.choice(labels, size=len(words)))
        sentences.append(conll.TaggedSentence(words, sentence_labels, [[w, t] for w, t in zip(words, sentence_labels)],
                                              list(range(len(words)))))
    tokenizer = FullTokenizer(bert_vocab_file, do_lower_case=False)
    label_map = {label: i for i, label in enumerate(labels)}
    features, counts = conll.convert_sentences_to_features(sentences, tokenizer, max_seq_length, label_map, "f")

    expected = []
    for index, sentence in enumerate(sentences):
        example = tagging_data_lib.InputExample(index, words=sentence.words,
                                                label_ids=[label_map[t] for t in sentence.labels])
        for window in tagging_data_lib._tokenize_example(example, max_seq_length, tokenizer):
            proto = tagging_data_lib._convert_single_example(window, max_seq_length, tokenizer)
            expected.append({k: list(v.int64_list.value) for k, v in proto.features.feature.items()})
    assert len(features) == len(expected) == counts.windows
    assert counts.empty_words > 0  # the zero-width space
    assert (counts.split_sentences > 0) == (max_seq_length < 64)
    for ours, theirs in zip(features, expected):
        assert ours.input_ids == theirs["input_ids"]
        assert ours.input_mask == theirs["input_mask"]
        assert ours.segment_ids == theirs["segment_ids"]
        assert [i if w else -1 for i, w in zip(ours.label_ids, ours.label_weights)] == theirs["label_ids"]
        assert ours.sentence_index == theirs["sentence_id"][0]


def test_word_longer_than_a_sequence_is_cut_not_dropped(bert_vocab_file):
    sentence = conll.TaggedSentence(["a", "supercalifragilistic", "b"], ["O", "B-X", "O"], [], [1, 2, 3])
    tokenizer = FullTokenizer(bert_vocab_file)
    features, counts = conll.convert_sentences_to_features([sentence], tokenizer, 5, {"O": 0, "B-X": 1}, "f")
    assert counts.cut_words == 1 and counts.windows == 3
    assert tokenizer.convert_ids_to_tokens(features[1].input_ids) == ["[CLS]"] + tokenizer.tokenize("supercalifragilistic")[:3] + ["[SEP]"]
    assert features[1].label_ids[:2] == [0, 1] and features[1].label_weights == [0, 1, 0, 0, 0]
    predicted = conll.word_label_ids(features, np.array([[0, 7, 0, 0, 0], [0, 1, 0, 0, 0], [0, 5, 0, 0, 0]]), [sentence])
    assert predicted == [[7, 1, 5]]


def test_format_predictions():
    sentences = [conll.TaggedSentence(["EU", "rejects"], ["B-ORG", "O"], [["EU", "NNP", "B-ORG"], ["rejects", "VBZ", "O"]], [1, 2])]
    assert conll.format_predictions(sentences, [["B-ORG", "B-PER"]]) == "EU NNP B-ORG B-ORG\nrejects VBZ O B-PER\n\n"


def _random_tags(rng, length, scheme):
    prefixes = {"iob1": "BI", "iob2": "BI", "iobes": "BIES"}[scheme]
    tags = []
    for _ in range(length):
        if rng.random() < 0.35:
            tags.append("O")
        else:
            tags.append(f"{rng.choice(list(prefixes))}-{rng.choice(['PER', 'LOC', 'ORG'])}")
    return tags


@pytest.mark.parametrize("scheme", ["iob1", "iob2", "iobes"])
def test_entity_scores_equal_seqeval(scheme):
    """Random (often ill-formed) tag sequences: conlleval's chunking, as seqeval's default mode."""
    rng = np.random.default_rng({"iob1": 0, "iob2": 1, "iobes": 2}[scheme])
    gold = [_random_tags(rng, int(rng.integers(1, 15)), scheme) for _ in range(60)]
    predicted = [[t if rng.random() < 0.7 else _random_tags(rng, 1, scheme)[0] for t in s] for s in gold]
    ours = conll.entity_scores(gold, predicted)
    assert ours["precision"] == pytest.approx(seqeval_metrics.precision_score(gold, predicted), abs=1e-12)
    assert ours["recall"] == pytest.approx(seqeval_metrics.recall_score(gold, predicted), abs=1e-12)
    assert ours["f1"] == pytest.approx(seqeval_metrics.f1_score(gold, predicted), abs=1e-12)
    assert ours["accuracy"] == pytest.approx(seqeval_metrics.accuracy_score(gold, predicted), abs=1e-12)
    report = seqeval_metrics.classification_report(gold, predicted, output_dict=True)
    for entity_type in ("PER", "LOC", "ORG"):
        assert ours[f"{entity_type}_f1"] == pytest.approx(report[entity_type]["f1-score"], abs=1e-12)
        assert ours[f"{entity_type}_support"] == report[entity_type]["support"]
    assert 0.2 < ours["f1"] < 0.95


def test_tagger_logits_and_loss_follow_numpy(tmp_path):
    config = tiny_config()
    model = BertTokenClassifier(config, num_labels=5)
    randomize(model, seed=4)
    inputs = random_inputs(config, batch=3, seq=10)
    logits = model(inputs, training=False).numpy()
    sequence_output = model.bert(inputs)["sequence_output"].numpy()
    expected = sequence_output @ model.token_head.output_weights.numpy().T + model.token_head.output_bias.numpy()
    np.testing.assert_allclose(logits, expected, atol=1e-5)

    rng = np.random.default_rng(0)
    label_ids = rng.integers(0, 5, (3, 10))
    weights = (rng.random((3, 10)) < 0.4).astype("float32")
    log_probs = logits - logits.max(-1, keepdims=True)
    log_probs -= np.log(np.exp(log_probs).sum(-1, keepdims=True))
    picked = np.take_along_axis(log_probs, label_ids[..., None], -1)[..., 0]
    expected_loss = -(picked * weights).sum() / weights.sum()
    model.compile(loss=token_classification_loss())
    got = model.evaluate(inputs, label_ids, sample_weight=weights, batch_size=3, verbose=0)
    assert got == pytest.approx(expected_loss, rel=1e-5)
    assert weighted_loss(logits, label_ids, weights) == pytest.approx(expected_loss, rel=1e-5)

    save_original_checkpoint(model, str(tmp_path / "tagger.ckpt"))
    names = list_original_variables(str(tmp_path / "tagger.ckpt"))
    assert names["output_weights"] == [5, 16] and names["output_bias"] == [5]


# ----------------------------------------------------------------------------
# tools/run_ner.py
# ----------------------------------------------------------------------------

PEOPLE = [("Ada", "Lovelace"), ("Alan", "Turing"), ("Grace", "Hopper"), ("Tim", "Berners-Lee")]
CITIES = ["Paris", "Zürich", "London", "Kyoto"]
FILLER = "the a visited from met in with later then and saw".split()


def generated_conll(path, num_sentences, seed):
    """Sentences of filler words with people (B-PER I-PER) and cities (B-LOC)."""
    rng = np.random.default_rng(seed)
    lines = ["-DOCSTART- -X- -X- O", ""]
    for _ in range(num_sentences):
        tokens = [(w, "O") for w in rng.choice(FILLER, size=int(rng.integers(2, 12)))]
        for _ in range(int(rng.integers(1, 3))):
            position = int(rng.integers(0, len(tokens) + 1))
            if rng.random() < 0.5:
                first, last = PEOPLE[rng.integers(len(PEOPLE))]
                tokens[position:position] = [(first, "B-PER"), (last, "I-PER")]
            else:
                tokens.insert(position, (CITIES[rng.integers(len(CITIES))], "B-LOC"))
        lines.extend(f"{word} X X {label}" for word, label in tokens)
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def ner_release(tmp_path_factory):
    directory = tmp_path_factory.mktemp("ner_release")
    words = {w.lower() for w in FILLER + CITIES} | {p.lower() for pair in PEOPLE for p in pair}
    words |= {"berners", "lee", "zurich"}
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "-"] + sorted(words)
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = tiny_config(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1, intermediate_size=64,
                         max_position_embeddings=32)
    config.to_json_file(directory / "bert_config.json")
    save_original_checkpoint(BertModel(config), str(directory / "bert_model.ckpt"))
    return directory


def ner_flags(release, output_dir, **extra):
    values = {
        "vocab_file": release / "vocab.txt",
        "bert_config_file": release / "bert_config.json",
        "init_checkpoint": release / "bert_model.ckpt",
        "output_dir": output_dir,
        "max_seq_length": 12,
    }
    values.update(extra)
    return [f"--{k}={v}" for k, v in values.items()]


def test_run_ner_learns_and_writes_predictions_back(ner_release, tmp_path):
    train = generated_conll(tmp_path / "train.txt", 200, seed=1)
    dev = generated_conll(tmp_path / "dev.txt", 40, seed=2)
    output_dir = tmp_path / "out"
    run_ner.main(ner_flags(
        ner_release, output_dir, do_train=True, do_eval=True, do_predict=True, train_file=train,
        eval_file=dev, predict_file=dev, train_batch_size=16, learning_rate=3e-3, num_train_epochs=4,
    ))
    results = dict(line.strip().split(" = ") for line in open(output_dir / "eval_results.txt"))
    assert float(results["f1"]) >= 0.9, results
    assert {"PER_f1", "LOC_f1", "precision", "recall", "accuracy", "eval_loss", "global_step"} <= set(results)

    # Every word comes back with its columns and a predicted label, sentences intact.
    dev_lines = [line for line in dev.read_text().splitlines() if line and not line.startswith("-DOCSTART-")]
    predicted_lines = [line for line in (output_dir / "test_predictions.txt").read_text().splitlines() if line]
    assert len(predicted_lines) == len(dev_lines)
    assert all(p.startswith(d + " ") for d, p in zip(dev_lines, predicted_lines))
    assert (output_dir / "eval_predictions.txt").read_text() == (output_dir / "test_predictions.txt").read_text()
    pairs = [line.split()[-2:] for line in predicted_lines]
    predicted = conll.entity_scores([[g for g, _ in pairs]], [[p for _, p in pairs]])
    assert predicted["f1"] >= 0.9
    assert (output_dir / "label_list.txt").read_text() == "O\nB-LOC\nB-PER\nI-PER\n"

    # Prediction only, from --output_dir's model.ckpt and label_list.txt: the same labels.
    (output_dir / "test_predictions.txt").unlink()
    run_ner.main(ner_flags(ner_release, output_dir, do_predict=True, predict_file=dev, init_checkpoint=""))
    assert (output_dir / "test_predictions.txt").read_text() == (output_dir / "eval_predictions.txt").read_text()
    # Another order would swap the classes: refused, naming the recorded list.
    with pytest.raises(InputFileError, match=r"label_list.txt: the weights were trained with the labels O,B-LOC,B-PER,I-PER"):
        run_ner.main(ner_flags(ner_release, output_dir, do_predict=True, predict_file=dev, init_checkpoint="",
                               labels="O,B-PER,B-LOC,I-PER"))


def test_run_ner_ragged_file_is_one_line(ner_release, tmp_path):
    train = tmp_path / "train.txt"
    train.write_text("Ada X X B-PER\nLovelace X I-PER\n", encoding="utf-8")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "tools/run_ner.py", *ner_flags(ner_release, tmp_path / "out", do_train=True, train_file=train)],
        capture_output=True, text=True, env=env, timeout=120,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )
    assert result.returncode == 1
    assert result.stderr.strip() == f"run_ner.py: error: {train}:2: 3 columns, but line 1 has 4"
