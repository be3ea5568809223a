"""Multiple choice (SWAG): the reader, the head against an independent NumPy
reference, the Python API, and tools/run_multiple_choice.py end to end
(learning a learnable rule above chance, its files checked against a
recomputation, one-line errors)."""

import csv
import json
import os
import random

import numpy as np
import pytest

from keras_bert_impl.checkpoints.original import load_original_checkpoint, original_weights, save_original_checkpoint
from keras_bert_impl.data.multiple_choice import ChoiceColumns, read_multiple_choice_file
from keras_bert_impl.errors import InputFileError
from keras_bert_impl.models.bert_model import BertModel
from keras_bert_impl.models.multiple_choice import BertMultipleChoice
from tests.helpers import random_inputs, randomize, run_tool_here, tiny_config
from tests.numpy_bert import bert_forward, softmax
from tools import run_multiple_choice

SWAG_HEADER = ["video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
               "ending0", "ending1", "ending2", "ending3", "label"]

POSITIVE = ["great", "good", "excellent", "wonderful", "superb"]
NEGATIVE = ["bad", "awful", "terrible", "poor", "dull"]
FILLER = "the a movie film plot actor scene story was is very quite and".split()


def write_swag(path, rows):
    """A SWAG CSV as released: its 11 columns, `rows` of (sent1, sent2, endings, label)."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(SWAG_HEADER)
        for index, (sent1, sent2, endings, label) in enumerate(rows):
            writer.writerow([f"v{index}", index, f"{sent1} {sent2}", sent1, sent2, "gold", *endings, label])


def swag_questions(rng, count):
    """Questions whose right ending alone holds a positive word (the others a negative one): learnable."""
    rows = []
    for _ in range(count):
        label = rng.randrange(4)
        endings = [" ".join([rng.choice(FILLER), rng.choice(POSITIVE if i == label else NEGATIVE), rng.choice(FILLER)])
                   for i in range(4)]
        rows.append((" ".join(rng.choice(FILLER) for _ in range(4)) + ".", "It", endings, label))
    return rows


# -- the reader ----------------------------------------------------------------


def test_swag_csv_as_released(tmp_path):
    path = tmp_path / "val.csv"
    write_swag(path, [("A man sits.", "He", ["eats.", "runs, fast.", "sings \"loud\".", "sleeps."], 2)])
    [example] = read_multiple_choice_file(str(path))
    assert example.context == "A man sits."
    assert example.choices == ("He eats.", "He runs, fast.", 'He sings "loud".', "He sleeps.")
    assert example.label == 2 and example.source == f"{path}:2"


def test_named_columns_any_number_of_choices(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in [
        {"question": "Sky?", "options": ["blue", "green", "red", "grey", "pink"], "answer": 4},
        {"question": "Grass?", "options": ["green", "blue", "red", "grey", "pink"], "answer": 0},
    ]) + "\n", encoding="utf-8")
    columns = ChoiceColumns(context_column="question", choice_columns=(), choices_column="options",
                            choice_prefix_column=None, label_column="answer")
    examples = read_multiple_choice_file(str(path), columns)
    assert [len(e.choices) for e in examples] == [5, 5] and [e.label for e in examples] == [4, 0]
    tsv = tmp_path / "dev.tsv"
    tsv.write_text("ctx\ta\tb\tgold\nX\tone\ttwo\t1\n", encoding="utf-8")
    [example] = read_multiple_choice_file(str(tsv), ChoiceColumns("ctx", ("a", "b"), None, None, "gold"))
    assert example.choices == ("one", "two") and example.label == 1


@pytest.mark.parametrize("endings, label, message", [
    (["a.", "b.", "", "d."], 0, ":3: ending2: empty"),
    (["a.", "b.", "c.", "d."], 4, ":3: label: '4' is not the index of one of the 4 choices (0..3)"),
    (["a.", "b.", "c.", "d."], "x", ":3: label: 'x' is not the index"),
    (["a.", "b.", "c.", "d."], "", ":3: label: missing"),
])
def test_bad_rows_name_file_line_and_field(tmp_path, endings, label, message):
    path = tmp_path / "train.csv"
    write_swag(path, [("Ok.", "He", ["a.", "b.", "c.", "d."], 0), ("Bad.", "He", endings, label)])
    with pytest.raises(InputFileError) as raised:
        read_multiple_choice_file(str(path))
    assert f"{path}{message}" in str(raised.value)


def test_rows_with_different_numbers_of_choices_are_refused(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text('{"c": "x", "o": ["a", "b"], "l": 0}\n{"c": "y", "o": ["a", "b", "c"], "l": 0}\n',
                    encoding="utf-8")
    with pytest.raises(InputFileError, match=r"train.jsonl:2: 3 choices, but .*train.jsonl:1 has 2"):
        read_multiple_choice_file(str(path), ChoiceColumns("c", (), "o", None, "l"))


def test_a_test_file_needs_no_label(tmp_path):
    path = tmp_path / "test.csv"
    write_swag(path, [("Ok.", "He", ["a.", "b.", "c.", "d."], "")])
    assert read_multiple_choice_file(str(path), labelled=False)[0].label is None


# -- the head ------------------------------------------------------------------


def test_choice_logits_match_numpy_reference():
    """Every pair's pooled output (an independent float64 BERT), times output_weights
    [1, H] plus output_bias, reshaped to [questions, choices]: HF's BertForMultipleChoice."""
    config = tiny_config()
    model = BertMultipleChoice(config)
    randomize(model, seed=3)
    flat = random_inputs(config, batch=6, seq=10, seed=5)  # 2 questions x 3 choices, some rows padded
    inputs = {name: value.reshape(2, 3, 10) for name, value in flat.items()}
    logits = np.asarray(model(inputs, training=False))
    w = original_weights(model)
    assert w["output_weights"].shape == (1, config.hidden_size) and w["output_bias"].shape == (1,)
    _, pooled, _ = bert_forward(w, config.to_dict(), flat["input_ids"], flat["input_mask"], flat["segment_ids"])
    expected = (pooled @ np.asarray(w["output_weights"], np.float64).T + w["output_bias"]).reshape(2, 3)
    np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-5)
    # The order of the choices is the order of the logits: swapping two choices swaps their logits.
    swapped = {name: value[:, [2, 1, 0]] for name, value in inputs.items()}
    np.testing.assert_allclose(np.asarray(model(swapped, training=False)), logits[:, [2, 1, 0]], rtol=1e-5, atol=1e-6)


def test_loss_is_cross_entropy_over_the_choices():
    import keras

    config = tiny_config()
    model = BertMultipleChoice(config)
    randomize(model, seed=4)
    inputs = {name: value.reshape(3, 2, 8) for name, value in random_inputs(config, batch=6, seq=8).items()}
    labels = np.array([1, 0, 1])
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    logits = np.asarray(model(inputs, training=False), np.float64)
    expected = -np.mean(np.log(softmax(logits)[np.arange(3), labels]))
    assert model.evaluate(inputs, labels, batch_size=3, verbose=0) == pytest.approx(expected, rel=1e-5)


# -- the Python API --------------------------------------------------------------


@pytest.fixture(scope="module")
def release(tmp_path_factory, bert_vocab_file):
    """A small original-format release: fresh weights, the real bert-base-uncased vocab."""
    import keras

    directory = tmp_path_factory.mktemp("release")
    keras.utils.set_random_seed(0)
    config = tiny_config(vocab_size=30522, hidden_size=64, num_hidden_layers=1, num_attention_heads=4,
                         intermediate_size=128, max_position_embeddings=64)
    save_original_checkpoint(BertModel(config), str(directory / "bert_model.ckpt"))
    config.to_json_file(directory / "bert_config.json")
    (directory / "vocab.txt").write_bytes(bert_vocab_file.read_bytes())
    return directory


def test_python_api_encodes_pairs_as_the_original(release, bert_vocab_file):
    from official.nlp.data import classifier_data_lib as lib
    from official.nlp.tools import tokenization

    from keras_bert_impl.tasks.text_multiple_choice import MultipleChoice

    model = MultipleChoice.from_release(str(release), max_seq_length=12)
    contexts = ["The chef tasted the soup.", "A dog ran"]
    choices = [["It was salty and far too hot to eat.", "It flew.", "Nobody."],
               ["after the ball.", "into the sea", "home"]]
    features = model.encode((contexts, choices))
    assert features["input_ids"].shape == (2, 3, 12)
    tokenizer = tokenization.FullTokenizer(str(bert_vocab_file), do_lower_case=True)
    for q, context in enumerate(contexts):
        for c, choice in enumerate(choices[q]):
            reference = lib.convert_single_example(0, lib.InputExample("0", context, choice, "0"), ["0"], 12, tokenizer)
            assert features["input_ids"][q, c].tolist() == reference.input_ids
            assert features["segment_ids"][q, c].tolist() == reference.segment_ids
    probabilities = model.predict((contexts, choices), verbose=0)
    logits = np.asarray(model(features, training=False), np.float64)
    np.testing.assert_allclose(probabilities, softmax(logits), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
    with pytest.raises(ValueError, match="context 1 has 2 choices, context 0 has 3"):
        model.predict((contexts, [choices[0], choices[1][:2]]))
    with pytest.raises(ValueError):
        model.fit((contexts, choices), [0, 3])


def test_python_api_learns_and_round_trips_a_release(release, tmp_path):
    from keras_bert_impl.tasks.text_multiple_choice import MultipleChoice

    rng = random.Random(1)
    rows = swag_questions(rng, 240)
    dev = swag_questions(rng, 60)

    def as_x(questions):
        return [r[0] for r in questions], [[f"{r[1]} {e}" for e in r[2]] for r in questions]

    model = MultipleChoice.from_release(str(release), max_seq_length=16, learning_rate=1e-3, warmup_proportion=0.5)
    model.compile()
    model.fit(as_x(rows), [r[3] for r in rows], batch_size=16, epochs=3, verbose=0)
    probabilities = model.predict(as_x(dev), verbose=0)
    accuracy = float(np.mean(probabilities.argmax(1) == [r[3] for r in dev]))
    # chance: 0.25. Three epochs give 1.0 here and with the questions of seeds 2 and 3 (six gave 1.0 too).
    assert accuracy >= 0.8, accuracy
    prefix = model.save_release(str(tmp_path / "mc"))
    again = MultipleChoice.from_release(os.path.dirname(prefix), max_seq_length=16)
    np.testing.assert_allclose(again.predict(as_x(dev[:5]), verbose=0), probabilities[:5], atol=1e-5)


# -- the tool ------------------------------------------------------------------


def tool_flags(release_dir, output_dir, **extra):
    values = {
        "vocab_file": release_dir / "vocab.txt",
        "bert_config_file": release_dir / "bert_config.json",
        "init_checkpoint": release_dir / "bert_model.ckpt",
        "output_dir": output_dir,
        "max_seq_length": 16,
        "train_batch_size": 16,
        "eval_batch_size": 8,
        "predict_batch_size": 4,
    }
    values.update(extra)
    return [f"--{key}={value}" for key, value in values.items() if value is not None]


CHOICE_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "it"] + sorted(set(POSITIVE + NEGATIVE + FILLER))


@pytest.fixture(scope="module")
def swag_run(tmp_path_factory):
    """bert-run-multiple-choice --do_train --do_eval --do_predict of a 2-layer release of the questions' words
    on the learnable rule: (data dir, release). Also the teacher of the distilled student (one trained model)."""
    from tests.test_distillation_tasks import two_layer_release

    root = tmp_path_factory.mktemp("swag_run")
    base = two_layer_release(root / "base", CHOICE_VOCAB, max_position_embeddings=32)
    data_dir, output_dir = root / "swag", root / "out"
    data_dir.mkdir()
    rng = random.Random(0)
    write_swag(data_dir / "train.csv", swag_questions(rng, 240))
    write_swag(data_dir / "val.csv", swag_questions(rng, 80))
    write_swag(data_dir / "test.csv", [(s1, s2, endings, "") for s1, s2, endings, _ in swag_questions(rng, 6)])
    run_multiple_choice.main(
        tool_flags(base, output_dir, data_dir=data_dir, learning_rate=2e-3, warmup_proportion=0.5,
                   num_train_epochs=6, save_checkpoints_steps=50)
        + ["--do_train", "--do_eval", "--do_predict"]
    )
    return data_dir, output_dir


def reference_logits(output_dir, path, vocab_file, labelled=True):
    """The fine-tuned checkpoint's logits on features that tf-models' original code builds."""
    from official.nlp.data import classifier_data_lib as lib
    from official.nlp.tools import tokenization

    from keras_bert_impl.config import BertConfig

    tokenizer = tokenization.FullTokenizer(str(vocab_file), do_lower_case=True)
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    features = [
        lib.convert_single_example(0, lib.InputExample("0", row["sent1"], f"{row['sent2']} {row[f'ending{i}']}", "0"),
                                   ["0"], 16, tokenizer)
        for row in rows for i in range(4)
    ]
    model = BertMultipleChoice(BertConfig.from_json_file(output_dir / "bert_config.json"))
    load_original_checkpoint(model, str(output_dir / "model.ckpt"))
    inputs = {key: np.array([getattr(f, key) for f in features], np.int32).reshape(len(rows), 4, 16)
              for key in ("input_ids", "input_mask", "segment_ids")}
    labels = np.array([int(row["label"]) for row in rows]) if labelled else None
    return np.asarray(model(inputs, training=False), np.float64), labels


def test_tool_learns_the_rule_above_chance(swag_run):
    from sklearn import metrics

    data_dir, output_dir = swag_run
    values = dict(line.split(" = ") for line in (output_dir / "eval_results.txt").read_text().splitlines())
    assert sorted(values) == ["eval_accuracy", "eval_loss", "global_step"]
    assert values["global_step"] == str(int(240 / 16 * 6))
    assert float(values["eval_accuracy"]) >= 0.8, values  # chance: 0.25
    logits, labels = reference_logits(output_dir, data_dir / "val.csv", output_dir / "vocab.txt")
    assert float(values["eval_accuracy"]) == pytest.approx(metrics.accuracy_score(labels, logits.argmax(1)), abs=1e-6)
    assert float(values["eval_loss"]) == pytest.approx(
        metrics.log_loss(labels, softmax(logits), labels=[0, 1, 2, 3]), rel=1e-4, abs=1e-6)


def test_tool_writes_choice_probabilities_and_a_release(swag_run):
    import tensorflow as tf

    data_dir, output_dir = swag_run
    rows = [line.split("\t") for line in (output_dir / "test_results.tsv").read_text().splitlines()]
    assert len(rows) == 6 and {len(row) for row in rows} == {4}
    logits, _ = reference_logits(output_dir, data_dir / "test.csv", output_dir / "vocab.txt", labelled=False)
    np.testing.assert_allclose(np.array(rows, np.float64), softmax(logits), atol=1e-5)
    shapes = tf.train.load_checkpoint(str(output_dir / "model.ckpt")).get_variable_to_shape_map()
    assert (shapes["output_weights"], shapes["output_bias"]) == ([1, 32], [1])


def test_tool_reads_named_columns_and_five_choices(release, tmp_path):
    data = tmp_path / "train.jsonl"
    rng = random.Random(2)
    lines = []
    for _ in range(16):
        label = rng.randrange(5)
        options = [rng.choice(POSITIVE if i == label else NEGATIVE) for i in range(5)]
        lines.append(json.dumps({"q": "which one", "options": options, "answer": label}))
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run_multiple_choice.main(tool_flags(release, tmp_path / "out", train_file=data, eval_file=data,
                                        context_column="q", choices_column="options", label_column="answer",
                                        num_train_epochs=1, train_batch_size=8) + ["--do_train", "--do_eval"])
    values = dict(line.split(" = ") for line in (tmp_path / "out" / "eval_results.txt").read_text().splitlines())
    assert values["global_step"] == "2"


def test_tool_bad_row_is_one_line(release, tmp_path, capfd):
    """The tool as its console script runs it, in this process (test_tools_cli starts each tool's script)."""
    data_dir = tmp_path / "swag"
    data_dir.mkdir()
    write_swag(data_dir / "train.csv", [("Ok.", "He", ["a.", "b.", "c.", "d."], 0),
                                        ("Bad.", "He", ["a.", "b.", "c.", "d."], 7)])
    result = run_tool_here(run_multiple_choice.main, [*tool_flags(release, tmp_path / "out", data_dir=data_dir),
                                                      "--do_train"], capfd, "bert-run-multiple-choice")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"{data_dir / 'train.csv'}:3: label: '7' is not the index of one of the 4 choices" in lines[0]
    assert not (tmp_path / "out" / "model.ckpt.index").exists()


# -- Hugging Face's BertForMultipleChoice ------------------------------------------


def test_hf_bert_for_multiple_choice_converts_and_gives_its_logits(tmp_path, capsys):
    """A `BertForMultipleChoice` directory as transformers saves it (`classifier` [1, H] on the pooler,
    `id2label` its default two labels), converted; our MultipleChoice's logits against Hugging Face's
    head formula in float64 NumPy on `tests/numpy_bert.py`'s pooled output."""
    from safetensors.numpy import load_file, save_file

    from tests.test_faults_assets import write_tiny_hf_dir
    from tests.test_hf_classifier_heads import convert

    hf_dir = tmp_path / "hf"
    weights = write_tiny_hf_dir(hf_dir, seed=5)
    rng = np.random.default_rng(1)
    hidden = weights["bert/pooler/dense/kernel"].shape[0]
    tensors = dict(load_file(str(hf_dir / "model.safetensors")))
    tensors["classifier.weight"] = rng.normal(0, 0.5, (1, hidden)).astype(np.float32)  # nn.Linear: [out, in]
    tensors["classifier.bias"] = rng.normal(0, 0.1, (1,)).astype(np.float32)
    save_file(tensors, str(hf_dir / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((hf_dir / "config.json").read_text())
    config.update(architectures=["BertForMultipleChoice"], id2label={"0": "LABEL_0", "1": "LABEL_1"},
                  label2id={"LABEL_0": 0, "LABEL_1": 1})
    (hf_dir / "config.json").write_text(json.dumps(config))
    code, lines = convert(capsys, hf_dir, tmp_path / "release")
    assert code == 0, lines
    from keras_bert_impl.checkpoints.sources import find_release
    from keras_bert_impl.config import BertConfig

    files = find_release(str(tmp_path / "release"))
    model = BertMultipleChoice(BertConfig.from_json_file(files.bert_config_file))
    report = load_original_checkpoint(model, files.checkpoint)  # every variable, none fresh
    assert not report.fresh and not report.unexpected
    flat = random_inputs(model.bert_config, batch=6, seq=10, seed=2)
    flat["input_ids"] %= 40
    ours = np.asarray(model({k: v.reshape(2, 3, 10) for k, v in flat.items()}, training=False), np.float64)
    _, pooled, _ = bert_forward(weights, dict(config, hidden_act="gelu_exact"), flat["input_ids"], flat["input_mask"],
                                flat["segment_ids"])
    expected = (pooled @ tensors["classifier.weight"].astype(np.float64).T + tensors["classifier.bias"]).reshape(2, 3)
    assert np.max(np.abs(ours - expected)) < 1e-4, np.max(np.abs(ours - expected))
    # A head of two rows is not a multiple-choice head.
    tensors["classifier.weight"] = np.zeros((2, hidden), np.float32)
    tensors["classifier.bias"] = np.zeros((2,), np.float32)
    save_file(tensors, str(hf_dir / "model.safetensors"), metadata={"format": "pt"})
    code, lines = convert(capsys, hf_dir, tmp_path / "release2")
    assert code == 1 and len(lines) == 1 and "has 2 rows; the head of BertForMultipleChoice scores each choice" in lines[0]


def test_transformers_bert_for_multiple_choice_converts_and_gives_its_recorded_logits(tmp_path, capsys):
    """The `BertForMultipleChoice` that transformers itself saved and ran in float64
    (`tests/transformers_oracle.py`: `bert_multiple_choice`, exact GELU, a padded choice, two
    segments), converted; `BertMultipleChoice` and `MultipleChoice.from_release` give its logits."""
    from keras_bert_impl.checkpoints.sources import find_release
    from keras_bert_impl.config import BertConfig
    from keras_bert_impl.tasks.text_multiple_choice import MultipleChoice
    from tests.test_hf_classifier_heads import convert
    from tests.test_transformers_oracle import ORACLE, _manifest, _with_tokenizer_files

    if "bert_multiple_choice" not in _manifest().get("heads", {}):
        pytest.skip("the transformers oracle directory has no bert_multiple_choice")
    hf_dir = _with_tokenizer_files("bert_multiple_choice", tmp_path)  # a copy, with a vocab.txt
    assert json.loads((hf_dir / "config.json").read_text())["hidden_act"] == "gelu"  # exact, erf
    code, lines = convert(capsys, hf_dir, tmp_path / "release")
    assert code == 0, lines
    config = BertConfig.from_json_file(find_release(str(tmp_path / "release")).bert_config_file)
    assert config.hidden_act == "gelu_exact"

    def load(key):
        return np.load(ORACLE / "bert_multiple_choice" / f"choices_{key}.npy")

    inputs = {"input_ids": load("input_ids").astype("int32"), "input_mask": load("attention_mask").astype("int32"),
              "segment_ids": load("token_type_ids").astype("int32")}  # [batch, num_choices, seq]
    expected = load("logits").astype(np.float64)  # [batch, num_choices]
    assert expected.shape == inputs["input_ids"].shape[:2] and (inputs["input_mask"] == 0).any()
    model = BertMultipleChoice(config)
    report = load_original_checkpoint(model, find_release(str(tmp_path / "release")).checkpoint)
    assert not report.fresh and not report.unexpected
    ours = np.asarray(model(inputs, training=False), np.float64)
    assert np.max(np.abs(ours - expected)) < 1e-4, np.max(np.abs(ours - expected))
    task = MultipleChoice.from_release(str(tmp_path / "release"), max_seq_length=inputs["input_ids"].shape[-1])
    assert not task.load_report.fresh
    ours = np.asarray(task(inputs, training=False), np.float64)
    assert np.max(np.abs(ours - expected)) < 1e-4, np.max(np.abs(ours - expected))
    np.testing.assert_array_equal(np.argmax(ours, -1), np.argmax(expected, -1))


# -- the export ------------------------------------------------------------------

EXPORT_CONTEXTS = ["The chef tasted the soup.", "A dog ran across the wide, muddy field towards",
                   "Après la pluie, she opened the umbrella"]
EXPORT_CHOICES = [["It was salty.", "It flew over the moon and never came back to the kitchen again.", ""],
                  ["its owner.", "the sea", "a café"],
                  ["and walked home.", "slowly", "The umbrella sang."]]


@pytest.fixture(scope="module")
def scored_model(release):
    """A MultipleChoice on the release whose every weight is random: its choices' probabilities are far apart."""
    from keras_bert_impl.tasks.text_multiple_choice import MultipleChoice

    model = MultipleChoice.from_release(str(release), max_seq_length=16)
    randomize(model, seed=7, scale=0.3)
    return model


def served_outputs(signature, **inputs):
    import tensorflow as tf

    return {key: value.numpy() for key, value in signature(**{k: tf.constant(v) for k, v in inputs.items()}).items()}


def test_export_serves_predicts_probabilities_and_choice(scored_model, tmp_path):
    """The raw-text SavedModel (verified as TF Serving loads it), loaded back by TensorFlow alone: a context
    and its choices give `predict`'s probabilities (any number of choices, pairs cut to the length as the
    preprocessor cuts them) and the most probable choice; its ids signature gives them from `encode`'s ids."""
    import tensorflow as tf

    from keras_bert_impl.serving.export import read_export_metadata
    from keras_bert_impl.serving.session_model import warmup_requests

    probabilities = scored_model.predict((EXPORT_CONTEXTS, EXPORT_CHOICES), verbose=0)
    assert np.ptp(probabilities, axis=1).min() > 0.05, probabilities  # choices the model tells apart
    version = scored_model.export(tmp_path / "saved_models" / "swag")
    assert version == str(tmp_path / "saved_models" / "swag" / "1")
    served = tf.saved_model.load(version)
    assert sorted(served.signatures) == ["serve_ids", "serving_default"]
    outputs = served_outputs(served.signatures["serving_default"], context=EXPORT_CONTEXTS, choices=EXPORT_CHOICES)
    assert outputs["probabilities"].shape == (3, 3) and outputs["probabilities"].dtype == np.float32
    np.testing.assert_allclose(outputs["probabilities"], probabilities, atol=1e-4)
    assert outputs["choice"].dtype == np.int32 and outputs["choice"].tolist() == probabilities.argmax(1).tolist()
    # Five choices, one context: the signature takes any number.
    five = ["its owner.", "the sea", "a café", "home", "the ball"]
    np.testing.assert_allclose(
        served_outputs(served.signatures["serving_default"], context=EXPORT_CONTEXTS[1:2], choices=[five])[
            "probabilities"], scored_model.predict((EXPORT_CONTEXTS[1:2], [five]), verbose=0), atol=1e-4)
    features = scored_model.encode((EXPORT_CONTEXTS, EXPORT_CHOICES))
    by_ids = served_outputs(served.signatures["serve_ids"], **features)
    np.testing.assert_allclose(by_ids["probabilities"], probabilities, atol=1e-4)
    with pytest.raises(tf.errors.InvalidArgumentError, match="context and choices must have the same batch size"):
        served.signatures["serving_default"](context=tf.constant(EXPORT_CONTEXTS[:2]),
                                             choices=tf.constant(EXPORT_CHOICES))
    bad_mask = dict(features, input_mask=np.roll(features["input_mask"], 1, axis=-1))  # padding first
    with pytest.raises(tf.errors.InvalidArgumentError, match="input_mask must be 1 at position 0"):
        served_outputs(served.signatures["serve_ids"], **bad_mask)
    metadata = read_export_metadata(version)
    assert (metadata["task"], metadata["precision"], metadata["optimized_for"]) == (
        "multiple_choice", "float32", "portable")
    [(name, request)] = warmup_requests(version)
    assert name == "serving_default" and request["choices"].shape == (2, 2)


def test_export_tool_writes_a_served_version_and_refuses_int8(scored_model, tmp_path, capsys):
    import tensorflow as tf

    from keras_bert_impl.cli import EXIT_BAD_INPUT, run_tool
    from tools import export_saved_model

    release_dir = tmp_path / "release"
    scored_model.save_release(str(release_dir))
    flags = [f"--model_dir={release_dir}", "--task=multiple_choice", "--max_seq_length=16"]
    # --noverify: what is checked here is what the tool writes (a multiple-choice export verified as TF Serving
    # loads it: test_export_serves_predicts_probabilities_and_choice).
    export_saved_model.main(flags + [f"--export_dir={tmp_path / 'saved_models' / 'swag'}", "--noverify"])
    served = tf.saved_model.load(str(tmp_path / "saved_models" / "swag" / "1"))
    outputs = served_outputs(served.signatures["serving_default"], context=EXPORT_CONTEXTS, choices=EXPORT_CHOICES)
    np.testing.assert_allclose(outputs["probabilities"],
                               scored_model.predict((EXPORT_CONTEXTS, EXPORT_CHOICES), verbose=0), atol=1e-4)
    assert "/models/swag" in (tmp_path / "saved_models" / "models.config").read_text()
    capsys.readouterr()
    code = run_tool(export_saved_model.main, flags + ["--precision=int8", f"--export_dir={tmp_path / 'int8'}"],
                    prog="bert-export")
    error = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_BAD_INPUT and len(error) == 1, error
    assert error[0] == ("bert-export: error: --precision=int8 exports tasks whose requests are texts; "
                        "multiple_choice's are a context and its choices: export it in float32 or bfloat16")
    assert not (tmp_path / "int8").exists()


# -- a distilled student -----------------------------------------------------------


def test_a_distilled_student_learns_from_its_teacher_and_loads(swag_run, tmp_path):
    """bert-distill --task=multiple_choice: a 1-layer student of the 2-layer teacher, its training loss
    falling, its eval as good as the teacher's (which it writes beside, in teacher/), and a release that
    bert-run-multiple-choice and MultipleChoice.from_release load to the same answers."""
    from keras_bert_impl.checkpoints.original import list_original_variables
    from keras_bert_impl.config import BertConfig
    from keras_bert_impl.jobs.make_figures import read_scalars
    from keras_bert_impl.tasks.text_multiple_choice import MultipleChoice
    from tools import distill

    data_dir, teacher = swag_run
    out = tmp_path / "student"
    distill.main(["--task=multiple_choice", f"--teacher_dir={teacher}", f"--data_dir={data_dir}",
                  "--max_seq_length=16", "--num_hidden_layers=1", "--train_batch_size=16", "--learning_rate=2e-3",
                  "--num_train_epochs=3", "--save_checkpoints_steps=1000", "--do_eval", f"--output_dir={out}"])

    def results(path):
        return dict(line.split(" = ") for line in path.read_text().splitlines())

    teacher_results, student = results(teacher / "eval_results.txt"), results(out / "eval_results.txt")
    assert float(teacher_results["eval_accuracy"]) >= 0.8, teacher_results  # chance: 0.25
    assert float(student["eval_accuracy"]) >= float(teacher_results["eval_accuracy"]) - 0.05, (student,
                                                                                              teacher_results)
    assert student["global_step"] == str(240 // 16 * 3)
    assert results(out / "teacher" / "eval_results.txt")["eval_accuracy"] == teacher_results["eval_accuracy"]
    # The distillation loss (soft targets + right choices + [CLS] states) falls as the student trains.
    losses = [value for _, value in sorted(read_scalars(str(out), log=lambda message: None)["train/loss"])]
    assert len(losses) >= 6, losses
    assert np.mean(losses[-3:]) < 0.7 * np.mean(losses[:3]), losses
    # The student is a 1-layer multiple-choice release of its own.
    assert BertConfig.from_json_file(str(out / "bert_config.json")).num_hidden_layers == 1
    names = list_original_variables(str(out / "model.ckpt"))
    assert "output_weights" in names and not any("layer_1/" in name for name in names)
    again = tmp_path / "again"
    run_multiple_choice.main([f"--vocab_file={out / 'vocab.txt'}", f"--bert_config_file={out / 'bert_config.json'}",
                              f"--init_checkpoint={out / 'model.ckpt'}", f"--data_dir={data_dir}",
                              "--max_seq_length=16", "--do_eval", f"--output_dir={again}"])
    assert results(again / "eval_results.txt")["eval_accuracy"] == student["eval_accuracy"]
    model = MultipleChoice.from_release(str(out), max_seq_length=16)
    assert not model.load_report.fresh
    from keras_bert_impl.data.multiple_choice import read_multiple_choice_file

    dev = read_multiple_choice_file(str(data_dir / "val.csv"))
    probabilities = model.predict(([e.context for e in dev], [list(e.choices) for e in dev]), verbose=0)
    accuracy = float(np.mean(probabilities.argmax(1) == [e.label for e in dev]))
    assert accuracy == pytest.approx(float(student["eval_accuracy"]), abs=1e-6)
