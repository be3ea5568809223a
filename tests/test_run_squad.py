"""tools/run_squad.py end to end: a tiny model learns generated SQuAD data
(features -> fit -> post-processing -> official metrics), the span head keeps
the original names, the model and its loss match the original formulas, and
bad input ends in one clear line."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import scipy.special

from keras_bert_impl.checkpoints.original import (
    list_original_variables,
    load_original_checkpoint,
    save_original_checkpoint,
)
from keras_bert_impl.models.bert_model import BertModel
from keras_bert_impl.models.span_qa import BertSpanQA, span_qa_losses
from keras_bert_impl.tasks.span_qa import read_training_examples
from keras_bert_impl.training.fine_tuning import log_to_stderr
from tests.helpers import random_inputs, randomize, tiny_config
from tools import run_squad

FIRST_NAMES = ["Ada", "Alan", "Grace", "Edsger", "Barbara", "Donald", "Frances", "John", "Radia", "Tim"]
LAST_NAMES = ["Lovelace", "Turing", "Hopper", "Dijkstra", "Liskov", "Knuth", "Allen", "McCarthy", "Perlman", "Berners-Lee"]
FILLER = (
    "the a river city old new green small market bridge morning evening rain sun road house "
    "walked saw built opened closed found near over under with from into and then later".split()
)
QUESTION = "Who is mentioned in the text?"
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def generated_squad(num_questions, seed, impossible_fraction=0.0):
    """SQuAD `data`: filler text with, in most contexts, one person named once.

    The answer is the name as written ("Grace Hopper," in the text gives
    "Grace Hopper"); a context without a person is unanswerable (v2.0).
    """
    rng = np.random.default_rng(seed)
    paragraphs = []
    for index in range(num_questions):
        words = list(rng.choice(FILLER, size=int(rng.integers(25, 60))))
        qa = {"id": f"q{seed}-{index}", "question": QUESTION, "answers": [], "is_impossible": True}
        if rng.random() >= impossible_fraction:
            name = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
            position = int(rng.integers(0, len(words)))
            words.insert(position, name + rng.choice([",", "", "."]))
            context = " ".join(words)
            start = len(" ".join(words[:position])) + (1 if position else 0)
            qa.update(answers=[{"text": name, "answer_start": start}], is_impossible=False)
        else:
            context = " ".join(words)
        paragraphs.append({"context": context, "qas": [qa]})
    return [{"title": "generated", "paragraphs": paragraphs}]


def vocab_words():
    words = set(FILLER) | {w.lower() for w in FIRST_NAMES} | set(QUESTION.lower().rstrip("?").split())
    for name in LAST_NAMES:
        words.update(name.lower().split("-"))
    return SPECIALS + sorted(words) + [",", ".", "?", "-"]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """A tiny original-format release: config, random pre-trained checkpoint, vocab."""
    directory = tmp_path_factory.mktemp("release")
    vocab = vocab_words()
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = tiny_config(
        vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )
    config.to_json_file(directory / "bert_config.json")
    bert = BertModel(config)
    save_original_checkpoint(bert, str(directory / "bert_model.ckpt"))
    return directory


def write_squad(path, data):
    path.write_text(json.dumps({"version": "generated", "data": data}), encoding="utf-8")
    return path


def flags(release, output_dir, **extra):
    values = {
        "vocab_file": release / "vocab.txt",
        "bert_config_file": release / "bert_config.json",
        "init_checkpoint": release / "bert_model.ckpt",
        "output_dir": output_dir,
        "max_seq_length": 48,
        "doc_stride": 16,
        "max_query_length": 12,
        "max_answer_length": 8,
        "n_best_size": 5,
    }
    values.update(extra)
    return [f"--{k}={v}" for k, v in values.items()]


def read_results(path):
    return dict(line.strip().split(" = ") for line in open(path, encoding="utf-8"))


@pytest.mark.parametrize("version_2", [False, True], ids=["v1.1", "v2.0"])
def test_tiny_model_learns_generated_squad(release, tmp_path, version_2):
    """200 steps on 240 generated questions, then unseen questions: high official EM."""
    impossible = 0.3 if version_2 else 0.0
    train = write_squad(tmp_path / "train.json", generated_squad(240, seed=1, impossible_fraction=impossible))
    dev = write_squad(tmp_path / "dev.json", generated_squad(60, seed=2, impossible_fraction=impossible))
    output_dir = tmp_path / "out"
    run_squad.main(flags(
        release, output_dir, do_train=True, do_predict=True, train_file=train, predict_file=dev,
        train_batch_size=16, learning_rate=2e-3, num_train_epochs=13.34, warmup_proportion=0.1,
        version_2_with_negative=version_2, save_checkpoints_steps=100,
    ))

    predictions = json.loads((output_dir / "predictions.json").read_text())
    nbest = json.loads((output_dir / "nbest_predictions.json").read_text())
    results = read_results(output_dir / "eval_results.txt")
    assert len(predictions) == len(nbest) == 60
    assert results["global_step"] == "200"
    gold = {qa["id"]: (qa["answers"][0]["text"] if qa["answers"] else "")
            for p in json.loads(dev.read_text())["data"][0]["paragraphs"] for qa in p["qas"]}
    # The answers come back as written in the context ("Grace Hopper" from
    # "Grace Hopper,"), so most match the gold text exactly, before normalisation.
    assert sum(predictions[q] == gold[q] for q in gold) >= 54
    if version_2:
        null_odds = json.loads((output_dir / "null_odds.json").read_text())
        assert set(null_odds) == set(predictions)
        assert float(results["exact"]) >= 90.0, results
        assert float(results["HasAns_exact"]) >= 85.0 and float(results["NoAns_exact"]) >= 85.0, results
        assert "best_f1_thresh" in results
    else:
        assert not (output_dir / "null_odds.json").exists()
        assert float(results["exact_match"]) >= 90.0 and float(results["f1"]) >= 90.0, results
    assert all(len(entries) <= 5 for entries in nbest.values())
    # The fine-tuned model is an original-format release with the run_squad head.
    names = list_original_variables(str(output_dir / "model.ckpt"))
    assert names["cls/squad/output_weights"] == [2, 32] and names["cls/squad/output_bias"] == [2]
    assert (output_dir / "bert_config.json").exists() and (output_dir / "vocab.txt").exists()
    assert (output_dir / "model.ckpt-100.index").exists()
    if version_2:
        # Predicting into the same directory, v1.1, questions without answers: the v2.0
        # run's null_odds.json and eval_results.txt do not stay to describe these predictions.
        questions = json.loads(dev.read_text())
        for paragraph in questions["data"][0]["paragraphs"]:
            for qa in paragraph["qas"]:
                del qa["answers"], qa["is_impossible"]
        unanswered = write_squad(tmp_path / "questions.json", questions["data"])
        run_squad.main(flags(release, output_dir, do_predict=True, predict_file=unanswered, init_checkpoint=""))
        assert set(json.loads((output_dir / "predictions.json").read_text())) == set(predictions)
        assert not (output_dir / "null_odds.json").exists() and not (output_dir / "eval_results.txt").exists()
        return
    # Predicting again from --output_dir's model.ckpt (no training) gives the same answers.
    run_squad.main(flags(release, output_dir, do_predict=True, predict_file=dev, init_checkpoint=""))
    assert json.loads((output_dir / "predictions.json").read_text()) == predictions


def test_span_head_and_loss_follow_the_original(tmp_path):
    """Logits = sequence_output · Wᵀ + b split in start/end; loss = mean of
    the two softmax cross-entropies over all positions (NumPy transcription)."""
    config = tiny_config()
    model = BertSpanQA(config)
    randomize(model, seed=3)
    inputs = random_inputs(config, batch=3, seq=10)
    outputs = model(inputs)
    sequence_output = model.bert(inputs)["sequence_output"].numpy()
    weights = model.span_head.output_weights.numpy()
    bias = model.span_head.output_bias.numpy()
    logits = sequence_output @ weights.T + bias
    np.testing.assert_allclose(outputs["start_logits"].numpy(), logits[..., 0], atol=1e-5)
    np.testing.assert_allclose(outputs["end_logits"].numpy(), logits[..., 1], atol=1e-5)

    starts, ends = np.array([0, 4, 9]), np.array([0, 6, 9])

    def original_loss(values, positions):  # run_squad's compute_loss
        log_probs = scipy.special.log_softmax(values.astype(np.float64), axis=-1)
        return -np.mean(log_probs[np.arange(len(positions)), positions])

    expected = (original_loss(logits[..., 0], starts) + original_loss(logits[..., 1], ends)) / 2
    loss, loss_weights = span_qa_losses()
    model.compile(loss=loss, loss_weights=loss_weights)
    got = model.evaluate(inputs, {"start_logits": starts, "end_logits": ends}, batch_size=3, verbose=0, return_dict=True)
    assert got["loss"] == pytest.approx(expected, rel=1e-5)

    # Round trip through the original layout, and through .keras.
    save_original_checkpoint(model, str(tmp_path / "squad.ckpt"))
    assert {"cls/squad/output_weights", "cls/squad/output_bias"} <= set(list_original_variables(str(tmp_path / "squad.ckpt")))
    reloaded = BertSpanQA(config)
    load_original_checkpoint(reloaded, str(tmp_path / "squad.ckpt"))
    np.testing.assert_array_equal(reloaded(inputs)["start_logits"].numpy(), outputs["start_logits"].numpy())
    model.save(tmp_path / "span_qa.keras")
    restored = keras.saving.load_model(tmp_path / "span_qa.keras")
    np.testing.assert_array_equal(restored(inputs)["end_logits"].numpy(), outputs["end_logits"].numpy())


def test_pretrained_checkpoint_refused_for_prediction_only(release, tmp_path, capsys):
    dev = write_squad(tmp_path / "dev.json", generated_squad(2, seed=3))
    code = run_squad.run_tool(run_squad.main, flags(release, tmp_path / "out", do_predict=True, predict_file=dev))
    assert code == 1
    # Refused for the reason that matters, before any prediction is written.
    assert "has no cls/squad/output_weights or cls/squad/output_bias, so it is not fine-tuned" in capsys.readouterr().err
    assert not (tmp_path / "out" / "predictions.json").exists()


def _run(argv):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run(
        [sys.executable, "tools/run_squad.py", *argv], capture_output=True, text=True, env=env,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), timeout=120,
    )


def test_bad_input_is_one_line(release, tmp_path):
    """A training answer outside its context: one stderr line naming the file
    and question, exit 1, before TensorFlow starts; bad flags exit 2."""
    data = generated_squad(3, seed=4)
    data[0]["paragraphs"][1]["qas"][0]["answers"][0]["answer_start"] = 10_000
    train = write_squad(tmp_path / "train.json", data)
    result = _run(flags(release, tmp_path / "out", do_train=True, train_file=train))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "train.json: question 'q4-1': answer" in lines[0] and "lies outside its context" in lines[0]

    result = _run(flags(release, tmp_path / "out", do_predict=True, max_seq_length=16, max_query_length=13,
                        predict_file=train))
    assert result.returncode == 2
    assert "--max_seq_length (16) must be greater than --max_query_length (13) + 3" in result.stderr


def test_skipped_training_questions_are_counted(release, tmp_path, capsys):
    data = generated_squad(40, seed=5)
    data[0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = 0  # now points at other words
    train = write_squad(tmp_path / "train.json", data)
    log = log_to_stderr("run_squad")
    examples = read_training_examples(str(train), False, seed=12345, verbose_logging=False, log=log)
    assert len(examples) == 39 and "q5-0" not in {e.qas_id for e in examples}
    assert ("skipped 1 of 40 questions whose answer text is not at answer_start (as the original): q5-0"
            in capsys.readouterr().err)


@pytest.mark.parametrize("version_2", [False, True])
def test_predictions_are_those_of_full_width_logits(tmp_path, version_2):
    """The original ranks every position's logit, padding included, for its
    n-best candidates; so prediction runs at full width whatever
    `real_tokens_only` says (cut batches gave other answers and scores)."""
    from keras_bert_impl.data.squad import convert_examples_to_features, postprocess_predictions, read_squad_examples
    from keras_bert_impl.models.span_qa import BertSpanQA
    from keras_bert_impl.tasks.span_qa import feature_arrays, predict
    from keras_bert_impl.tokenization import FullTokenizer
    from keras_bert_impl.training.fine_tuning import FineTuningSettings

    vocab = vocab_words()
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    config = tiny_config(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=64, max_position_embeddings=128)
    model = BertSpanQA(config)
    randomize(model, seed=3, scale=0.5)
    tokenizer = FullTokenizer(str(tmp_path / "vocab.txt"), do_lower_case=True)
    data = generated_squad(20, seed=2, impossible_fraction=0.3 if version_2 else 0.0)
    examples = read_squad_examples("dev.json", False, data=data)[0]
    # The reference first, on the model as built (every position computed).
    features = list(convert_examples_to_features(examples, tokenizer, 128, 64, 12, is_training=False))
    inputs, _ = feature_arrays(features, is_training=False)
    logits = model.predict(inputs, batch_size=8, verbose=0)
    results = zip([f.unique_id for f in features], logits["start_logits"], logits["end_logits"])
    expected = postprocess_predictions(examples, features, results, 5, 8, True, version_2, 0.0).predictions

    predict(model, examples, tokenizer, 0, str(tmp_path), "dev.json", 128, 64, 12, 8, 5, 8, True, version_2, 0.0,
            lambda message: None, FineTuningSettings(real_tokens_only=True), data)
    assert json.loads((tmp_path / "predictions.json").read_text()) == json.loads(json.dumps(expected))


@pytest.mark.parametrize("version_2, data", [
    (False, []),
    (True, [{"title": "t", "paragraphs": []}]),
    (False, [{"title": "t", "paragraphs": [{"context": "a b", "qas": []}]}]),
])
def test_a_file_without_questions_predicts_nothing_and_is_not_scored(tmp_path, version_2, data):
    """As the original: empty prediction files, no evaluation (was: a
    ZeroDivisionError in the official metrics after the files were written)."""
    from keras_bert_impl.models.span_qa import BertSpanQA
    from keras_bert_impl.tasks.span_qa import predict
    from keras_bert_impl.tokenization import FullTokenizer

    vocab = vocab_words()
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    model = BertSpanQA(tiny_config(vocab_size=len(vocab), max_position_embeddings=64))
    tokenizer = FullTokenizer(str(tmp_path / "vocab.txt"), do_lower_case=True)
    messages = []
    result = predict(model, [], tokenizer, 0, str(tmp_path), "dev.json", 64, 32, 12, 8, 5, 8, True, version_2, 0.0,
                     messages.append, dataset=data)
    assert result == {} and not (tmp_path / "eval_results.txt").exists()
    assert json.loads((tmp_path / "predictions.json").read_text()) == {}
    assert any("no gold answers" in message for message in messages)


def test_a_question_with_an_empty_context_is_predicted_empty_as_the_original(tmp_path):
    """No window, so the original's n-best list is its placeholder "empty";
    the other questions are predicted as without it (was: the run refused)."""
    from keras_bert_impl.data.squad import read_squad_examples
    from keras_bert_impl.models.span_qa import BertSpanQA
    from keras_bert_impl.tasks.span_qa import predict
    from keras_bert_impl.tokenization import FullTokenizer

    vocab = vocab_words()
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    model = BertSpanQA(tiny_config(vocab_size=len(vocab), max_position_embeddings=128))
    tokenizer = FullTokenizer(str(tmp_path / "vocab.txt"), do_lower_case=True)
    data = generated_squad(3, seed=4)
    outputs = {}
    for name, dataset in (("plain", data), ("with_empty", data + [{"title": "blank", "paragraphs": [
            {"context": " \n\t", "qas": [{"id": "blank-1", "question": "what?", "answers": []}]}]}])):
        examples = read_squad_examples("dev.json", False, data=dataset)[0]
        (tmp_path / name).mkdir()
        predict(model, examples, tokenizer, 0, str(tmp_path / name), "dev.json", 128, 64, 12, 8, 5, 8, True, False,
                0.0, lambda message: None, dataset=dataset)
        outputs[name] = json.loads((tmp_path / name / "predictions.json").read_text())
    assert outputs["with_empty"].pop("blank-1") == "empty"
    assert outputs["with_empty"] == outputs["plain"]
