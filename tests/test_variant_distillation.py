"""`bert-distill` students of a RoBERTa, ALBERT or DistilBERT teacher: of the teacher's variant.

The teachers are `tests/test_variant_tasks.py`'s releases (the tiny Hugging
Face directories of `tests/variants_fixture.py`, converted with
`bert-convert-hf`), fine-tuned with `run_classifier`. A student's config must be its teacher's
but for the depth (and ALBERT's group count where the student has fewer
layers than groups), with the same tokenizer files; its release must load
into `TextClassifier.from_release` with nothing fresh and predict what
`bert-distill --do_predict` wrote. The general student's distance to its
teacher (the cosine distance of each student layer to its matched teacher
layer, computed here in NumPy from the encoders' outputs on ids laid out by
hand) must fall from where the student starts. SQuAD students of `run_squad`
teachers are of the variant too, and the task's tool predicts from the
student's release what `bert-distill` predicted: those are tested in
`tests/test_variant_span_tagging.py`, whose `run_squad` runs are the teachers.
"""

import json
import os

import numpy as np
import pytest

from keras_bert_impl.checkpoints.original import list_original_variables, load_original_checkpoint
from keras_bert_impl.checkpoints.sources import find_release
from keras_bert_impl.config import BertConfig
from keras_bert_impl.models.bert_model import BertModel
from keras_bert_impl.tasks.text_classifier import TextClassifier
from tests.test_variant_tasks import CLASS_TEXTS, _reference_inputs, releases  # noqa: F401 (a fixture)
from tools import distill
from tools.run_classifier import main as run_classifier

VARIANTS = ("roberta", "albert", "distilbert")
SEQ = 16
TOKENIZER_FILES = {"roberta": ("vocab.json", "merges.txt"), "albert": ("spiece.model",),
                   "distilbert": ("vocab.txt",)}
# ALBERT's teacher has 4 layers in 2 groups: a student of 2 keeps both groups.
STUDENT_LAYERS = {"roberta": 1, "albert": 2, "distilbert": 1}
# The general students' epochs: each student's distance to its teacher falls far below the test's 0.8 of where it
# started (seeds fixed: ALBERT 0.35 after 2 epochs, 0.25 after 4 and 8; RoBERTa 0.44 after 4, 0.35 after 8, 0.67
# after 2); DistilBERT's needs 8 (0.59; 0.78 after 4). A higher learning rate does not make them faster (5e-3:
# RoBERTa 0.68 after 2, DistilBERT 0.96 after 2).
GENERAL_EPOCHS = {"roberta": 4, "albert": 2, "distilbert": 8}
CORPUS = {
    "roberta": ["the the he", "he the", "x q z k", "the x", "k z he the"],
    "albert": ["the quick brown fox", "lorem ipsum dolor", "hello world again", "a b c d", "the lazy dog"],
    "distilbert": ["w1 w2 w3", "w7 w8", "w4 w5 w6", "w9 w1", "w2 w8 w3"],
}


def _csv(directory, model_type):
    directory.mkdir(parents=True, exist_ok=True)
    positive, negative = CLASS_TEXTS[model_type]
    rows = "".join(f'"{text}",{label}\n' for text, label in [(positive, "pos"), (negative, "neg")] * 6)
    for split in ("train", "dev", "test"):
        (directory / f"{split}.csv").write_text("sentence,label\n" + rows, encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def teachers(releases, tmp_path_factory):
    """`{variant: (converted release, fine-tuned classifier release, csv data directory)}`; the converted
    releases are `tests/test_variant_tasks.py`'s, fine-tuned by `bert-run-classifier` (checked as such by
    `test_run_classifier_trains_on_a_csv_with_a_variant_release`)."""
    root = tmp_path_factory.mktemp("variant_teachers")
    made = {}
    for model_type in VARIANTS:
        data = _csv(root / f"data_{model_type}", model_type)
        run_classifier(["--task_name=csv", f"--data_dir={data}", "--text_a_column=sentence", "--label_column=label",
                        f"--model_dir={releases[model_type]}", f"--output_dir={root}/teacher_{model_type}",
                        "--do_train", "--do_eval", f"--max_seq_length={SEQ}", "--train_batch_size=4",
                        "--num_train_epochs=2", "--learning_rate=1e-3"])
        made[model_type] = (releases[model_type], root / f"teacher_{model_type}", data)
    return made


@pytest.fixture(scope="module")
def teacher_classifiers(teachers):
    """`teacher_classifiers(variant)`: `TextClassifier.from_release` of the fine-tuned teacher, made once (by the
    first test that asks) for the test of the release and the Python distillation's teacher."""
    made = {}

    def get(model_type):
        if model_type not in made:
            _, output, _ = teachers[model_type]
            made[model_type] = TextClassifier.from_release(output, num_classes=2, max_seq_length=SEQ, seed=1)
        return made[model_type]

    return get


def _config(directory):
    return json.loads((directory / "bert_config.json").read_text())


def _expected_student_config(teacher_dir, num_layers, **changes):
    """The teacher's `bert_config.json` at `num_layers` (ALBERT: at most one group a layer)."""
    config = dict(_config(teacher_dir), num_hidden_layers=num_layers, **changes)
    if "num_hidden_groups" in config:
        config["num_hidden_groups"] = min(config["num_hidden_groups"], num_layers)
    return config


def _same_tokenizer_files(model_type, teacher, student):
    for name in TOKENIZER_FILES[model_type]:
        assert (student / name).read_bytes() == (teacher / name).read_bytes(), name


@pytest.mark.parametrize("model_type", VARIANTS)
def test_run_classifier_trains_on_a_csv_with_a_variant_release(teachers, teacher_classifiers, model_type):
    # The teachers are run_classifier's runs on a CSV (moved from tests/test_variant_tasks.py, which ran the
    # same tool on the same rows again).
    release, output, data = teachers[model_type]
    positive, _ = CLASS_TEXTS[model_type]
    results = dict(line.split(" = ") for line in (output / "eval_results.txt").read_text().splitlines())
    assert int(results["global_step"]) == 6
    # The output directory is a release of the variant: its tokenizer files, a pooler.
    fine_tuned = find_release(output)
    assert os.path.basename(fine_tuned.vocab_file) == os.path.basename(find_release(release).vocab_file)
    assert BertConfig.from_json_file(fine_tuned.bert_config_file).use_pooler
    model = teacher_classifiers(model_type)
    assert not model.load_report.fresh  # the head included
    assert model.predict([positive]).shape == (1, 2)


@pytest.mark.parametrize("model_type", VARIANTS)
def test_a_classifier_student_is_a_release_of_its_teachers_variant(teachers, model_type, tmp_path):
    _, teacher, data = teachers[model_type]
    student = tmp_path / "student"
    layers = STUDENT_LAYERS[model_type]
    distill.main(["--task_name=csv", f"--data_dir={data}", "--text_a_column=sentence", "--label_column=label",
                  f"--teacher_dir={teacher}", f"--output_dir={student}", f"--max_seq_length={SEQ}",
                  "--train_batch_size=4", "--num_train_epochs=2", "--learning_rate=1e-3",
                  f"--num_hidden_layers={layers}", "--do_eval", "--do_predict"])
    assert _config(student) == _expected_student_config(teacher, layers)
    _same_tokenizer_files(model_type, teacher, student)
    assert (student / "label_list.txt").read_text() == (teacher / "label_list.txt").read_text()
    names = list_original_variables(find_release(student).checkpoint)
    if model_type == "albert":  # both groups, each from the teacher's group its first layer runs
        assert {"bert/encoder/transformer/group_1/inner_group_1/LayerNorm_1/gamma",
                "bert/encoder/embedding_hidden_mapping_in/kernel"} <= set(names)
    else:
        assert "bert/encoder/layer_0/output/dense/kernel" in names and not any("layer_1/" in n for n in names)
    assert ("bert/embeddings/token_type_embeddings" in names) == (model_type != "distilbert")

    model = TextClassifier.from_release(student, num_classes=2, max_seq_length=SEQ)
    assert not model.load_report.fresh and model.bert_config.model_type == model_type
    texts = list(CLASS_TEXTS[model_type]) * 6
    predicted = np.loadtxt(student / "test_results.tsv", delimiter="\t", ndmin=2)
    np.testing.assert_allclose(model.predict(texts), predicted, atol=1e-5)


# ALBERT's student config (its groups at the student's depth) is checked through the tool above (the same
# `student_config`), and an ALBERT `TextClassifier` fits in test_variant_tasks.py; its run here took ~30 s of the
# suite for no path of its own.
@pytest.mark.parametrize("model_type", ("roberta", "distilbert"))
def test_text_classifier_distill_keeps_the_variant_and_its_loss_falls(teachers, teacher_classifiers, model_type):
    _, teacher_dir, _ = teachers[model_type]
    teacher = teacher_classifiers(model_type)
    texts = [text for text in CLASS_TEXTS[model_type] for _ in range(8)]
    labels = [1] * 8 + [0] * 8
    student = teacher.distill(texts, labels, num_hidden_layers=STUDENT_LAYERS[model_type], batch_size=4, epochs=4,
                              learning_rate=1e-3, verbose=0)
    losses = student.history.history["loss"]
    assert losses[-1] < losses[0], losses
    config = _expected_student_config(teacher_dir, STUDENT_LAYERS[model_type])
    assert student.bert_config.to_dict() == config
    assert student.predict(texts[:1]).shape == (1, 2)


def _layer_states(config, weights, inputs):
    """Each layer's output [batch, seq, H] of an encoder of `config` holding `weights`, float64.

    ALBERT's encoder gives one output per block run; a layer's is its last
    block's (`inner_group_num` a layer), as Hugging Face returns them.
    """
    model = BertModel(config, output_all_encoder_layers=True)
    model.set_weights(weights)
    states = [np.asarray(s, np.float64) for s in model(inputs, training=False)["encoder_outputs"]]
    return states[config.inner_group_num - 1::config.inner_group_num]


def _distance(teacher_states, student_states, mask):
    """Mean cosine distance of each student layer to its matched teacher layer, at the real tokens."""
    from keras_bert_impl.tasks.distillation import matched_teacher_layers

    matched = matched_teacher_layers(len(teacher_states), len(student_states))
    distances = []
    for s, t in zip(student_states, [teacher_states[i] for i in matched]):
        cosine = (s * t).sum(-1) / (np.linalg.norm(s, axis=-1) * np.linalg.norm(t, axis=-1))
        distances.append((1.0 - cosine)[mask].mean())
    return float(np.mean(distances))


@pytest.mark.parametrize("model_type", VARIANTS)
def test_a_general_student_is_of_its_teachers_variant_and_moves_toward_it(releases, model_type, tmp_path):
    from keras_bert_impl.models.pretraining import BertPretrainingModel
    from keras_bert_impl.tasks.distillation import evenly_spaced_layers, initialise_from_teacher, student_config

    release = releases[model_type]
    corpus = tmp_path / "corpus.txt"
    rng = np.random.default_rng(0)
    words = " ".join(CORPUS[model_type]).split()
    documents = ["\n".join(" ".join(rng.choice(words, size=int(rng.integers(3, 7)))) for _ in range(3))
                 for _ in range(40)]
    corpus.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    student = tmp_path / "student"
    layers = STUDENT_LAYERS[model_type]
    distill.main(["--task=general", f"--teacher_dir={release}", f"--input_file={corpus}",
                  f"--max_seq_length={SEQ}", "--max_predictions_per_seq=3", "--dupe_factor=2",
                  f"--num_hidden_layers={layers}", "--train_batch_size=8", "--learning_rate=2e-3",
                  f"--num_train_epochs={GENERAL_EPOCHS[model_type]}", f"--output_dir={student}"])
    # RoBERTa's *ForMaskedLM has no pooler: nor has its student (a classifier gets a fresh one).
    no_pooler = {"use_pooler": False} if model_type == "roberta" else {}
    assert _config(student) == _expected_student_config(release, layers, **no_pooler)
    _same_tokenizer_files(model_type, release, student)
    names = list_original_variables(find_release(student).checkpoint)
    assert "cls/predictions/output_bias" in names
    assert ("bert/pooler/dense/kernel" in names) == (model_type == "albert")

    # Where the student started: the teacher's chosen layers, as the tool starts it.
    teacher_config = BertConfig.from_json_file(str(release / "bert_config.json"))
    teacher_config = BertConfig.from_dict({**teacher_config.to_dict(), **no_pooler})
    teacher_net = BertPretrainingModel(teacher_config)
    load_original_checkpoint(teacher_net, find_release(release).checkpoint,
                             allow_fresh=("cls/seq_relationship/",))
    start_config = student_config(teacher_config, layers)
    start = BertPretrainingModel(start_config)
    initialise_from_teacher(start, teacher_net, evenly_spaced_layers(teacher_config.num_hidden_layers, layers))
    trained_config = BertConfig.from_json_file(str(student / "bert_config.json"))
    trained = BertPretrainingModel(trained_config)
    load_original_checkpoint(trained, find_release(student).checkpoint, allow_fresh=("cls/seq_relationship/",))

    # Laid out as the student learnt: ALBERT's sentence pairs; RoBERTa's and DistilBERT's full sentences, a
    # document's sentences one after another up to SEQ tokens.
    lines = [document.splitlines() for document in documents[:8]]
    if model_type == "albert":
        held_out = [" ".join(line.split()[:2]) for document in lines for line in document[:2]]
        inputs = _reference_inputs(release, model_type, held_out[0::2], held_out[1::2], seq=2 * SEQ)
    else:
        held_out = [" ".join(document) for document in lines]
        inputs = _reference_inputs(release, model_type, held_out)
    mask = inputs["input_mask"].astype(bool)
    teacher_states = _layer_states(teacher_config, teacher_net.bert.get_weights(), inputs)
    before = _distance(teacher_states, _layer_states(start_config, start.bert.get_weights(), inputs), mask)
    after = _distance(teacher_states, _layer_states(trained_config, trained.bert.get_weights(), inputs), mask)
    assert after < 0.8 * before, (before, after)

    classifier = TextClassifier.from_release(student, num_classes=2, max_seq_length=SEQ)
    assert classifier.bert_config.model_type == model_type
    assert classifier.predict(held_out[:2]).shape == (2, 2)


def test_general_instances_of_a_byte_level_bpe_teacher_mask_whole_words_in_its_layout(releases, tmp_path):
    """`--do_whole_word_mask` with RoBERTa's tokenizer: words by the "Ġ" rule (a text's first token starts one),
    RoBERTa's layout (`<s> ... </s>`, segment ids 0) and `<pad>` padding, as the generator makes them."""
    import types

    from keras_bert_impl.tasks.general_distillation import GeneralDistillation
    from keras_bert_impl.training.fine_tuning import FineTuningSettings, read_release

    files = find_release(releases["roberta"])
    corpus = tmp_path / "corpus.txt"  # one line a document: every line starts after <s> or </s>
    lines = ["the he xylophone zebra", "quartz the he", "he jumps over the lazy dog", "the end of the word games"]
    corpus.write_text("\n\n".join(lines * 2) + "\n", encoding="utf-8")  # byte-level BPE cuts rare words in pieces
    release = read_release(files.bert_config_file, files.vocab_file, None, files.checkpoint, SEQ)
    spec = GeneralDistillation(input_file=str(corpus), max_predictions_per_seq=6, masked_lm_prob=0.3,
                               do_whole_word_mask=True, dupe_factor=4)
    run = types.SimpleNamespace(max_seq_length=SEQ, training=FineTuningSettings(seed=3))
    arrays = spec.read_instances(release, run, log=lambda message: None)
    tokenizer = release.tokenizer
    tokens = {index: token for token, index in tokenizer.vocab.items()}
    special = tokenizer.special_tokens
    cls, sep, pad = (tokenizer.vocab[token] for token in (special.cls, special.sep, special.pad))
    pieces_of_masked_words = []
    for ids, mask, segments, positions, originals, weights in zip(
            *(arrays[name] for name in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                                        "masked_lm_ids", "masked_lm_weights"))):
        length = int(mask.sum())
        assert ids[0] == cls and ids[length - 1] == sep and (ids[length:] == pad).all() and not segments.any()
        real = weights > 0
        text = ids[:length].copy()
        text[positions[real]] = originals[real]  # the text before masking
        masked = set(positions[real].tolist())
        assert not masked & {i for i in range(length) if text[i] in (cls, sep)}
        starts = [i for i in range(1, length) if text[i] not in (cls, sep)
                  and (text[i - 1] in (cls, sep) or tokens[int(text[i])].startswith("\u0120"))]
        ends = starts[1:] + [length]
        for start, end in zip(starts, ends):
            word = [i for i in range(start, end) if text[i] not in (cls, sep)]
            assert len(masked.intersection(word)) in (0, len(word)), (start, word, sorted(masked))
            if masked.intersection(word):
                pieces_of_masked_words.append(len(word))
    assert max(pieces_of_masked_words) > 1  # some masked word has more than one piece: the rule was used


# The SQuAD students of RoBERTa and ALBERT teachers: tests/test_variant_span_tagging.py, whose run_squad runs
# teach them.
