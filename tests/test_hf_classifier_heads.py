"""Hugging Face `*ForSequenceClassification` directories as fine-tuned classifier releases.

Each directory is written here: the encoder's tensors are those of the
directories `transformers` itself wrote (`tests/data/transformers_oracle`:
RoBERTa, ALBERT, DistilBERT) or `tests/test_faults_assets.py`'s tiny BERT,
less any masked-LM head, plus a random head under Hugging Face's names
(`modeling_*.py`: `nn.Linear` weights are [out, in]) and a `config.json`
naming the architecture and its labels. The reference logits are Hugging
Face's head formulas in float64 NumPy, written out below, on the last hidden
state that `transformers` computed (the oracle's `*_last_hidden_state.npy`)
or, for BERT, that `tests/numpy_bert.py` computes; nothing is shared with
the converter. The task tests then predict through `run_classifier
--do_predict --model_dir` and `TextClassifier.from_release`, unchanged.
A multi-label BERT head that transformers itself saved and ran
(the oracle's `bert_multi_label`) is compared with its recorded logits.
"""

import json

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from keras_bert_impl.checkpoints.original import list_original_variables, load_original_checkpoint
from keras_bert_impl.checkpoints.sources import find_release
from keras_bert_impl.cli import run_tool
from keras_bert_impl.config import BertConfig
from keras_bert_impl.models.classifier import BertClassifier
from tests import numpy_bert
from tests.test_faults_assets import TINY, write_tiny_hf_dir
from tests.test_transformers_oracle import ORACLE, _manifest, _with_tokenizer_files
from tests.variants_fixture import HIDDEN, write_hf_directory
from tools.convert_hf_checkpoint import main as convert_main

LABELS = ("negative", "neutral", "positive")
TOLERANCE = 1e-4
# Hugging Face's head of each architecture: (dense on the first token, its activation, output layer).
HEADS = {
    "bert": ("BertForSequenceClassification", "bert.pooler.dense", np.tanh, "classifier"),
    "albert": ("AlbertForSequenceClassification", "albert.pooler", np.tanh, "classifier"),
    "roberta": ("RobertaForSequenceClassification", "classifier.dense", np.tanh, "classifier.out_proj"),
    "distilbert": ("DistilBertForSequenceClassification", "pre_classifier", lambda x: np.maximum(x, 0.0),
                   "classifier"),
}
# The masked-LM heads a sequence classifier does not have.
MLM_HEADS = ("lm_head.", "predictions.", "vocab_transform.", "vocab_layer_norm.", "vocab_projector.", "cls.",
             "sop_classifier.")


def head_tensors(model_type, hidden, num_labels, seed=7):
    """`{HF name: float32 array}` of a random head of `model_type`'s `*ForSequenceClassification`."""
    _, dense, _, output = HEADS[model_type]
    rng = np.random.default_rng(seed)
    return {
        f"{dense}.weight": rng.normal(0, 0.3, (hidden, hidden)).astype(np.float32),  # [out, in]
        f"{dense}.bias": rng.normal(0, 0.1, (hidden,)).astype(np.float32),
        f"{output}.weight": rng.normal(0, 0.5, (num_labels, hidden)).astype(np.float32),
        f"{output}.bias": rng.normal(0, 0.1, (num_labels,)).astype(np.float32),
    }


def reference_logits(model_type, tensors, last_hidden_state):
    """Hugging Face's head on the first token's state, float64: [batch, num_labels]."""
    _, dense, activation, output = HEADS[model_type]
    w = {name: np.asarray(value, np.float64) for name, value in tensors.items()}
    first = np.asarray(last_hidden_state, np.float64)[:, 0]  # [batch, H]: [CLS] / <s>
    pooled = activation(first @ w[f"{dense}.weight"].T + w[f"{dense}.bias"])
    return pooled @ w[f"{output}.weight"].T + w[f"{output}.bias"]


def as_sequence_classifier(hf_dir, model_type, labels=LABELS, drop_head=(), **config_changes):
    """Rewrites an HF directory as `*ForSequenceClassification`: no masked-LM head, a random classifier head,
    `architectures` and `id2label`. Returns the head's tensors."""
    hidden = json.loads((hf_dir / "config.json").read_text()).get("hidden_size", HIDDEN)
    if model_type == "distilbert":
        hidden = json.loads((hf_dir / "config.json").read_text())["dim"]
    tensors = {name: np.array(value) for name, value in load_file(str(hf_dir / "model.safetensors")).items()
               if not name.startswith(MLM_HEADS + (f"{model_type}.pooler",))}
    head = head_tensors(model_type, hidden, len(labels))
    tensors.update({name: value for name, value in head.items() if name not in drop_head})
    save_file(tensors, str(hf_dir / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((hf_dir / "config.json").read_text())
    config.update(architectures=[HEADS[model_type][0]], id2label={str(i): label for i, label in enumerate(labels)},
                  label2id={label: i for i, label in enumerate(labels)}, **config_changes)
    (hf_dir / "config.json").write_text(json.dumps(config, indent=2))
    return head


def convert(capsys, hf_dir, release):
    code = run_tool(convert_main, [f"--hf_model_dir={hf_dir}", f"--output_dir={release}"], prog="bert-convert-hf")
    return code, capsys.readouterr().err.strip().splitlines()


def converted_classifier(release, num_labels):
    """The release loaded, every variable from its checkpoint (none fresh)."""
    files = find_release(release)
    model = BertClassifier(BertConfig.from_json_file(files.bert_config_file), num_labels=num_labels)
    report = load_original_checkpoint(model, files.checkpoint)
    assert not report.fresh and not report.unexpected
    return model


def _oracle_batch(model_type, batch):
    """`(load, inputs)` of one recorded batch: `load(key)` reads its arrays, `inputs` our model's int32 features."""
    def load(key):
        return np.load(ORACLE / model_type / f"{batch}_{key}.npy")

    token_types = ORACLE / model_type / f"{batch}_token_type_ids.npy"
    inputs = {"input_ids": load("input_ids").astype("int32"), "input_mask": load("attention_mask").astype("int32"),
              "segment_ids": (np.load(token_types) if token_types.exists()
                              else np.zeros_like(load("input_ids"))).astype("int32")}
    return load, inputs


@pytest.mark.parametrize("model_type", sorted(_manifest()["models"]) or ["albert", "distilbert", "roberta"])
def test_a_variant_classifier_computes_transformers_logits(model_type, tmp_path, capsys):
    """The encoder as transformers computed it (the oracle's last hidden state),
    Hugging Face's head on its first token, against our converted classifier."""
    if not (ORACLE / "manifest.json").is_file():
        pytest.skip("no transformers oracle directory")
    hf_dir = _with_tokenizer_files(model_type, tmp_path)
    head = as_sequence_classifier(hf_dir, model_type)
    code, lines = convert(capsys, hf_dir, tmp_path / "release")
    assert code == 0, lines
    assert f"convert_hf_checkpoint: a sequence classifier of 3 labels: {', '.join(LABELS)}" in lines
    assert (tmp_path / "release" / "label_list.txt").read_text() == "".join(f"{label}\n" for label in LABELS)
    config = BertConfig.from_json_file(str(tmp_path / "release" / "bert_config.json"))
    assert config.model_type == model_type and config.use_pooler
    assert config.pooler_act == ("relu" if model_type == "distilbert" else "tanh")
    written = json.loads((tmp_path / "release" / "bert_config.json").read_text())
    assert ("pooler_act" in written) == (model_type == "distilbert")  # the default is not written
    model = converted_classifier(tmp_path / "release", len(LABELS))
    for batch in _manifest()["models"][model_type]["batches"]:
        load, inputs = _oracle_batch(model_type, batch)
        ours = np.asarray(model(inputs, training=False), np.float64)
        expected = reference_logits(model_type, head, load("last_hidden_state"))
        assert np.max(np.abs(ours - expected)) < TOLERANCE, (model_type, batch, np.max(np.abs(ours - expected)))


def test_a_bert_classifier_computes_the_numpy_logits_and_keeps_its_labels(tmp_path, capsys):
    weights = write_tiny_hf_dir(tmp_path / "hf", seed=3)
    head = as_sequence_classifier(tmp_path / "hf", "bert", labels=("no", "yes"))
    code, lines = convert(capsys, tmp_path / "hf", tmp_path / "release")
    assert code == 0, lines
    assert (tmp_path / "release" / "label_list.txt").read_text() == "no\nyes\n"
    # The pooler in the checkpoint is the head's, not the encoder's random one.
    weights["bert/pooler/dense/kernel"] = head["bert.pooler.dense.weight"].T
    weights["bert/pooler/dense/bias"] = head["bert.pooler.dense.bias"]
    rng = np.random.default_rng(0)
    ids = rng.integers(0, TINY["vocab_size"], (3, 9)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    segments = np.zeros_like(ids)
    segments[:, 5:] = 1
    layers, _, _ = numpy_bert.bert_forward(weights, dict(TINY, hidden_act="gelu_exact"), ids, mask, segments)
    expected = reference_logits("bert", head, layers[-1])
    model = converted_classifier(tmp_path / "release", 2)
    ours = np.asarray(model({"input_ids": ids, "input_mask": mask, "segment_ids": segments}), np.float64)
    np.testing.assert_allclose(ours, expected, atol=TOLERANCE)


def _csv(directory, texts, labels):
    directory.mkdir(parents=True, exist_ok=True)
    rows = "".join(f'"{text}",{label}\n' for text, label in zip(texts, labels))
    for split in ("dev", "test"):
        (directory / f"{split}.csv").write_text("sentence,label\n" + rows, encoding="utf-8")
    return directory


TEXTS = {"roberta": ["the the he", "x q z k", "the"], "albert": ["the quick brown fox", "lorem ipsum", "hello"],
         "distilbert": ["w1 w2 w3", "w7 w8", "w4"], "bert": ["[unused5] [unused7]", "[unused9]", "[unused11]"]}


@pytest.mark.parametrize("model_type", ["roberta", "albert", "distilbert"])
def test_run_classifier_and_text_classifier_predict_with_a_converted_head(model_type, tmp_path, capsys):
    """Text in: the variant's tokenizer, the converted encoder, Hugging Face's head
    (NumPy, on the encoder's first-token state); run_classifier and
    TextClassifier take the release as it is."""
    from keras_bert_impl.models.bert_model import BertModel
    from keras_bert_impl.probabilities import softmax
    from keras_bert_impl.tasks.text_classifier import TextClassifier
    from tests.test_variant_tasks import _reference_inputs
    from tools.run_classifier import main as run_classifier

    hf_dir = tmp_path / "hf"
    write_hf_directory(hf_dir, model_type)
    head = as_sequence_classifier(hf_dir, model_type)
    code, lines = convert(capsys, hf_dir, tmp_path / "release")
    assert code == 0, lines
    release = tmp_path / "release"
    texts = TEXTS[model_type]

    files = find_release(release)
    encoder = BertModel(BertConfig.from_json_file(files.bert_config_file))
    load_original_checkpoint(encoder, files.checkpoint, allow_fresh=("bert/pooler/",))
    inputs = _reference_inputs(release, model_type, texts)
    sequence = np.asarray(encoder(inputs, training=False)["sequence_output"], np.float64)
    expected = softmax(reference_logits(model_type, head, sequence))

    classifier = TextClassifier.from_release(release, num_classes=len(LABELS), max_seq_length=16)
    assert not classifier.load_report.fresh  # the head is the converted one
    np.testing.assert_allclose(classifier.predict(texts), expected, atol=1e-5)

    data = _csv(tmp_path / "data", texts, ["positive", "negative", "neutral"])
    out = tmp_path / "predicted"
    run_classifier(["--task_name=csv", f"--data_dir={data}", "--text_a_column=sentence", "--label_column=label",
                    f"--model_dir={release}", f"--output_dir={out}", "--do_eval", "--do_predict",
                    "--max_seq_length=16"])
    predicted = np.loadtxt(out / "test_results.tsv", delimiter="\t", ndmin=2)
    np.testing.assert_allclose(predicted, expected, atol=1e-5)
    # The labels are id2label's: class 2 is "positive", whatever order the data list them in.
    accuracy = dict(line.split(" = ") for line in (out / "eval_results.txt").read_text().splitlines())
    truth = np.array([2, 0, 1])
    assert float(accuracy["eval_accuracy"]) == pytest.approx(np.mean(expected.argmax(-1) == truth))


def test_a_regression_head_converts_without_labels(tmp_path, capsys):
    write_tiny_hf_dir(tmp_path / "hf")
    as_sequence_classifier(tmp_path / "hf", "bert", labels=("LABEL_0",), problem_type="regression")
    code, lines = convert(capsys, tmp_path / "hf", tmp_path / "release")
    assert code == 0, lines
    assert not (tmp_path / "release" / "label_list.txt").exists()
    assert list_original_variables(find_release(tmp_path / "release").checkpoint)["output_weights"] == [1, 16]


@pytest.mark.parametrize("model_type, change, message", [
    ("roberta", {"drop_head": ("classifier.dense.bias",)},
     "{weights}: no tensor classifier.dense.bias, which the head of RobertaForSequenceClassification has "
     "(classifier.dense.weight + classifier.dense.bias + classifier.out_proj.weight + classifier.out_proj.bias)"),
    ("distilbert", {"reshape": ("pre_classifier.weight", (16, 8))},
     "{weights}: tensor pre_classifier.weight has shape [16, 8], not [16, 16] (hidden_size 16): not the head of "
     "DistilBertForSequenceClassification"),
    ("albert", {"reshape": ("classifier.weight", (3, 8))},
     "{weights}: tensor classifier.weight has shape [3, 8], not [num_labels, hidden_size] (hidden_size 16): not "
     "the head of AlbertForSequenceClassification"),
    ("roberta", {"labels": ("a", "b")},
     "{weights}: tensor classifier.out_proj.weight has 3 rows (one per label) but {config} names 2 labels"),
    ("distilbert", {"id2label": {"0": "a", "2": "b", "1": "c", "5": "d"}},
     "{config}: id2label's keys must be the class ids 0..3, got 0, 1, 2, 5"),
    ("albert", {"id2label": {"0": "a", "1": "two\nlines", "2": "c"}},
     "{config}: id2label[1] is 'two\\nlines': a label must be text without line breaks or leading and trailing "
     "spaces"),
    ("roberta", {"pooler": True},
     "{weights}: tensors classifier.dense.bias and roberta.pooler.dense.bias are both "
     "bert/pooler/dense/bias: two heads where the model has a place for one"),
])
def test_a_head_that_is_not_the_architectures_is_one_line(model_type, change, message, tmp_path, capsys):
    hf_dir = tmp_path / "hf"
    write_hf_directory(hf_dir, model_type)
    labels = change.get("labels", LABELS)
    as_sequence_classifier(hf_dir, model_type, drop_head=change.get("drop_head", ()))
    tensors = {name: np.array(value) for name, value in load_file(str(hf_dir / "model.safetensors")).items()}
    if "reshape" in change:
        name, shape = change["reshape"]
        tensors[name] = np.zeros(shape, np.float32)
    if change.get("pooler"):
        tensors.update({"roberta.pooler.dense.weight": np.zeros((HIDDEN, HIDDEN), np.float32),
                        "roberta.pooler.dense.bias": np.zeros(HIDDEN, np.float32)})
    save_file(tensors, str(hf_dir / "model.safetensors"))
    config = json.loads((hf_dir / "config.json").read_text())
    config["id2label"] = change.get("id2label", {str(i): label for i, label in enumerate(labels)})
    if "problem_type" in change:
        config["problem_type"] = change["problem_type"]
    (hf_dir / "config.json").write_text(json.dumps(config))
    code, lines = convert(capsys, hf_dir, tmp_path / "release")
    expected = message.format(weights=hf_dir / "model.safetensors", config=hf_dir / "config.json")
    assert code == 1 and lines == [f"bert-convert-hf: error: {expected}"], lines
    assert not (tmp_path / "release").exists()


def test_a_token_classifier_of_bert_is_converted_as_before(tmp_path, capsys):
    """BERT's `classifier` without the pooler, not declared a sequence classifier:
    the head converts, no label list (the token tagger's labels are its own)."""
    write_tiny_hf_dir(tmp_path / "hf")
    tensors = {name: np.array(value) for name, value in load_file(str(tmp_path / "hf" / "model.safetensors")).items()
               if not name.startswith("bert.pooler.")}
    tensors.update({"classifier.weight": np.ones((5, TINY["hidden_size"]), np.float32),
                    "classifier.bias": np.zeros(5, np.float32)})
    save_file(tensors, str(tmp_path / "hf" / "model.safetensors"))
    code, lines = convert(capsys, tmp_path / "hf", tmp_path / "release")
    assert code == 0, lines
    assert not (tmp_path / "release" / "label_list.txt").exists()
    assert list_original_variables(find_release(tmp_path / "release").checkpoint)["output_weights"] == [5, 16]


@pytest.mark.parametrize("pooler_act", ["tanh", "relu"])
def test_a_bert_model_pools_with_the_configs_activation(pooler_act):
    # `pooler_act` reaches every model built from the config (TextEmbedder's "pooled", the embeddings
    # export), not only the classifier: the [CLS] state through the dense layer and that activation.
    from keras_bert_impl.models.bert_model import BertModel

    config = BertConfig(vocab_size=40, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, pooler_act=pooler_act)
    model = BertModel(config)
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 40, size=(3, 5)).astype("int32")
    outputs = model({"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)})
    kernel, bias = (w.numpy() for w in model.pooler.dense.weights)
    pre = outputs["sequence_output"].numpy()[:, 0].astype(np.float64) @ kernel + bias
    expected = np.tanh(pre) if pooler_act == "tanh" else np.maximum(pre, 0.0)
    np.testing.assert_allclose(outputs["pooled_output"].numpy(), expected, atol=1e-5)
    assert (pre < 0).any()  # the two activations differ on this input


# -- multi-label heads (`problem_type: multi_label_classification`) ------------------------------------

TAGS = ("toxic", "insult", "threat")
# The tiny BERT's vocabulary with BERT's special tokens, so that raw text goes in; ids written out by hand below.
TINY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{k}" for k in range(5, TINY["vocab_size"])]
TAG_TEXTS = ["w7 w9 w12", "w20", "w5 w6 w7 w8 w9 w30", "w39 w11"]


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


def multi_label_bert_release(tmp_path, capsys):
    """A tiny BERT `BertForSequenceClassification` with `problem_type: multi_label_classification`,
    converted: `(release, probabilities of TAG_TEXTS)`, those of NumPy (tests/numpy_bert.py and Hugging Face's
    head, a sigmoid per label)."""
    weights = write_tiny_hf_dir(tmp_path / "hf", seed=5)
    (tmp_path / "hf" / "vocab.txt").write_text("".join(f"{token}\n" for token in TINY_VOCAB))
    head = as_sequence_classifier(tmp_path / "hf", "bert", labels=TAGS, problem_type="multi_label_classification")
    code, lines = convert(capsys, tmp_path / "hf", tmp_path / "release")
    assert code == 0, lines
    assert f"convert_hf_checkpoint: a multi-label classifier of 3 labels: {', '.join(TAGS)}" in lines
    weights["bert/pooler/dense/kernel"] = head["bert.pooler.dense.weight"].T
    weights["bert/pooler/dense/bias"] = head["bert.pooler.dense.bias"]
    ids = np.zeros((len(TAG_TEXTS), 8), "int32")  # [CLS] words [SEP], each word's row in TINY_VOCAB, padded
    for row, text in enumerate(TAG_TEXTS):
        tokens = [2] + [TINY_VOCAB.index(word) for word in text.split()] + [3]
        ids[row, :len(tokens)] = tokens
    layers, _, _ = numpy_bert.bert_forward(weights, dict(TINY, hidden_act="gelu_exact"), ids, (ids > 0).astype("int32"),
                                           np.zeros_like(ids))
    return tmp_path / "release", sigmoid(reference_logits("bert", head, layers[-1]))


def test_a_multi_label_bert_head_converts_into_a_multi_label_release(tmp_path, capsys):
    """A sigmoid per label of the converted head's logits, through `TextClassifier.from_release` and
    `run_classifier --multi_label --do_predict`, equals NumPy's; the release says it is multi-label."""
    from keras_bert_impl.tasks.text_classifier import TextClassifier
    from tools.run_classifier import main as run_classifier

    release, expected = multi_label_bert_release(tmp_path, capsys)
    assert (release / "label_list.txt").read_text() == "".join(f"{tag}\n" for tag in TAGS)
    assert json.loads((release / "multi_label.json").read_text()) == {"labels": list(TAGS),
                                                                       "thresholds": [0.5, 0.5, 0.5]}
    classifier = TextClassifier.from_release(release, max_seq_length=16)
    assert classifier.multi_label and classifier.label_names == TAGS and classifier.threshold == (0.5, 0.5, 0.5)
    assert not classifier.load_report.fresh
    probabilities = classifier.predict(TAG_TEXTS, verbose=0)
    np.testing.assert_allclose(probabilities, expected, atol=TOLERANCE)
    assert ((expected > 0.5) & (expected < 0.95)).any() and (expected < 0.5).any()  # a sigmoid, not a softmax
    np.testing.assert_array_equal(classifier.predict_labels(TAG_TEXTS, verbose=0), expected >= 0.5)

    data = tmp_path / "data"
    data.mkdir()
    (data / "test.csv").write_text("text\n" + "".join(f"{text}\n" for text in TAG_TEXTS))
    (data / "dev.csv").write_text("text,labels\n" + "".join(f"{text},toxic\n" for text in TAG_TEXTS))
    out = tmp_path / "predicted"
    run_classifier(["--task_name=csv", f"--data_dir={data}", f"--model_dir={release}", f"--output_dir={out}",
                    "--multi_label", "--do_predict", "--max_seq_length=16"])
    np.testing.assert_allclose(np.loadtxt(out / "test_results.tsv", ndmin=2), expected, atol=TOLERANCE)
    capsys.readouterr()
    # Without --multi_label its softmax would be no answer of this model: one line, before any output.
    code = run_tool(run_classifier, ["--task_name=csv", f"--data_dir={data}", f"--model_dir={release}",
                                     f"--output_dir={tmp_path / 'single'}", "--do_eval", "--label_column=labels",
                                     "--max_seq_length=16"], prog="bert-run-classifier")
    assert code == 1 and capsys.readouterr().err.strip().splitlines() == [
        f"bert-run-classifier: error: {release / 'multi_label.json'}: the fine-tuned release is a multi-label "
        "classifier (a sigmoid per label); pass --multi_label"]
    assert not (tmp_path / "single").exists()
    # Thresholds tuned on dev, recorded in the release that was evaluated (given as --output_dir), then used.
    from keras_bert_impl.data.multi_label import tune_thresholds

    run_classifier(["--task_name=csv", f"--data_dir={data}", f"--model_dir={release}", f"--output_dir={release}",
                    "--multi_label", "--do_eval", "--tune_threshold", "--max_seq_length=16"])
    tuned = tune_thresholds(expected, np.array([[1, 0, 0]] * len(TAG_TEXTS)))
    assert tuned[0] != 0.5 and tuned[1:] == (0.5, 0.5)  # toxic: every text; the others: none in dev
    assert json.loads((release / "multi_label.json").read_text())["thresholds"] == pytest.approx(list(tuned))
    assert TextClassifier.from_release(release, max_seq_length=16).threshold == pytest.approx(tuned)


def test_bert_export_of_a_converted_multi_label_head_answers_its_sigmoids(tmp_path, capsys):
    import tensorflow as tf

    from keras_bert_impl.serving.export import read_export_metadata
    from tools.export_saved_model import main as export_main

    release, expected = multi_label_bert_release(tmp_path, capsys)
    flags = [f"--model_dir={release}", "--max_seq_length=16", f"--export_dir={tmp_path / 'saved' / 'tags'}"]
    code = run_tool(export_main, flags + ["--task=classifier"], prog="bert-export")
    assert code == 1 and capsys.readouterr().err.strip().splitlines()[-1] == (
        f"bert-export: error: {release / 'multi_label.json'}: the release is a multi-label classifier (a sigmoid "
        "per label); export it with --task=multi_label, not classifier")
    # --noverify: its answers are checked below (a multi-label bert-export verified as TF Serving loads it:
    # test_multi_label.py's test_tuned_thresholds_go_into_the_release_and_the_export).
    assert run_tool(export_main, flags + ["--task=multi_label", "--noverify"], prog="bert-export") == 0
    version = tmp_path / "saved" / "tags" / "1"
    assert (version / "assets" / "labels.txt").read_text().split() == list(TAGS)
    assert read_export_metadata(str(version))["thresholds"] == [0.5, 0.5, 0.5]
    outputs = tf.saved_model.load(str(version)).signatures["serving_default"](tf.constant(TAG_TEXTS))
    np.testing.assert_allclose(outputs["probabilities"].numpy(), expected, atol=TOLERANCE)
    np.testing.assert_array_equal(outputs["label_mask"].numpy(), expected >= 0.5)


def test_transformers_multi_label_bert_converts_into_a_multi_label_release_of_its_logits(tmp_path, capsys):
    """The multi-label `BertForSequenceClassification` that transformers itself saved and ran in float64
    (`tests/transformers_oracle.py`: `bert_multi_label`, exact GELU), converted: a multi-label release
    of its labels whose logits, and their sigmoids, are transformers' (through `TextClassifier.from_release`)."""
    from keras_bert_impl.tasks.text_classifier import TextClassifier

    head = _manifest().get("heads", {}).get("bert_multi_label")
    if head is None:
        pytest.skip("the transformers oracle directory has no bert_multi_label")
    hf_dir = _with_tokenizer_files("bert_multi_label", tmp_path)  # a copy, with a vocab.txt
    hf_config = json.loads((hf_dir / "config.json").read_text())
    assert hf_config["problem_type"] == "multi_label_classification" and hf_config["hidden_act"] == "gelu"
    labels = tuple(hf_config["id2label"][str(i)] for i in range(len(hf_config["id2label"])))
    code, lines = convert(capsys, hf_dir, tmp_path / "release")
    assert code == 0, lines
    release = tmp_path / "release"
    assert BertConfig.from_json_file(str(release / "bert_config.json")).hidden_act == "gelu_exact"
    assert (release / "label_list.txt").read_text() == "".join(f"{label}\n" for label in labels)
    assert json.loads((release / "multi_label.json").read_text()) == {"labels": list(labels),
                                                                       "thresholds": [0.5] * len(labels)}
    load, inputs = _oracle_batch("bert_multi_label", head["batches"][0])
    assert (inputs["input_mask"] == 0).any() and (inputs["segment_ids"] == 1).any()
    classifier = TextClassifier.from_release(release, max_seq_length=inputs["input_ids"].shape[1])
    assert classifier.multi_label and classifier.label_names == labels and not classifier.load_report.fresh
    expected = load("logits").astype(np.float64)  # [batch, 3]
    ours = np.asarray(classifier(inputs, training=False), np.float64)
    assert np.max(np.abs(ours - expected)) < TOLERANCE, np.max(np.abs(ours - expected))
    assert np.max(np.abs(sigmoid(ours) - sigmoid(expected))) < TOLERANCE
    model = converted_classifier(release, len(labels))  # the same release as a plain BertClassifier
    ours = np.asarray(model(inputs, training=False), np.float64)
    assert np.max(np.abs(ours - expected)) < TOLERANCE, np.max(np.abs(ours - expected))


@pytest.mark.parametrize("model_type", sorted(_manifest()["models"]) or ["albert", "distilbert", "roberta"])
def test_a_variant_multi_label_head_computes_the_sigmoids_of_transformers_logits(model_type, tmp_path, capsys):
    """The oracle's last hidden state (transformers), Hugging Face's head, a sigmoid per label; against
    the converted release loaded as `TextClassifier.from_release` loads it."""
    from keras_bert_impl.tasks.text_classifier import TextClassifier

    if not (ORACLE / "manifest.json").is_file():
        pytest.skip("no transformers oracle directory")
    hf_dir = _with_tokenizer_files(model_type, tmp_path)
    head = as_sequence_classifier(hf_dir, model_type, labels=TAGS, problem_type="multi_label_classification")
    code, lines = convert(capsys, hf_dir, tmp_path / "release")
    assert code == 0, lines
    classifier = TextClassifier.from_release(tmp_path / "release", max_seq_length=8)
    assert classifier.multi_label and classifier.label_names == TAGS and classifier.threshold == (0.5, 0.5, 0.5)
    for batch in _manifest()["models"][model_type]["batches"]:
        load, inputs = _oracle_batch(model_type, batch)
        ours = sigmoid(classifier(inputs, training=False))
        expected = sigmoid(reference_logits(model_type, head, load("last_hidden_state")))
        assert np.max(np.abs(ours - expected)) < TOLERANCE, (model_type, batch, np.max(np.abs(ours - expected)))
