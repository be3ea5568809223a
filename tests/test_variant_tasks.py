"""Every task on a variant release (issue 37 item 5): RoBERTa, ALBERT, DistilBERT.

Each release is converted with `bert-convert-hf` from a tiny Hugging Face
directory (`tests/variants_fixture.py`). The references share no task code:
the Python tokenizer of the release's files and the layout Hugging Face's
tokenizers write (`<s> a </s></s> b </s>` padded with `<pad>` = 1 for
RoBERTa; `[CLS] a [SEP] b [SEP]` for ALBERT and DistilBERT), run through the
converted `BertModel` / `BertPretrainingModel` loaded from the checkpoint.
"""

import numpy as np
import pytest

from keras_bert_impl.checkpoints.original import load_original_checkpoint
from keras_bert_impl.checkpoints.sources import find_release
from keras_bert_impl.config import BertConfig
from keras_bert_impl.models.bert_model import BertModel
from keras_bert_impl.models.pretraining import BertPretrainingModel
from keras_bert_impl.tasks.masked_lm import MaskedLM
from keras_bert_impl.tasks.text_classifier import TextClassifier
from keras_bert_impl.tasks.text_embedder import TextEmbedder
from keras_bert_impl.tokenization.from_files import tokenizer_from_files
from tests.test_serving import probe_many
from tests.variants_fixture import write_hf_directory
from tools.convert_hf_checkpoint import main as convert_main

VARIANTS = ("roberta", "albert", "distilbert")
SEQ = 16
HARD_TEXTS = [
    "the quick brown fox",
    "Héllo  wörld \t café — naïve",
    "東京タワー and 北京 ",
    "emoji 😀👍🏽 in the text",
    "see https://example.com/a?b=c&d=e#f",
    "   ",
    "the " * 30,  # past SEQ: cut
]
MASKS = {"roberta": "<mask>", "albert": "[MASK]", "distilbert": "[MASK]"}
# Two classes the variant's tiny vocabulary tells apart.
CLASS_TEXTS = {
    "roberta": ("the the he", "x q z k"),
    "albert": ("the quick brown fox", "lorem ipsum dolor"),
    "distilbert": ("w1 w2 w3", "w7 w8"),
}


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    root = tmp_path_factory.mktemp("variant_releases")
    paths = {}
    for model_type in VARIANTS:
        write_hf_directory(root / f"hf_{model_type}", model_type)
        convert_main([f"--hf_model_dir={root}/hf_{model_type}", f"--output_dir={root}/{model_type}"])
        paths[model_type] = root / model_type
    return paths


@pytest.fixture(scope="module")
def mean_embeddings(releases):
    """`mean_embeddings(variant)`: the release's mean-pooled `TextEmbedder`'s `predict(HARD_TEXTS)`, made once
    (by the first test that asks) for the tests that compare with it."""
    made = {}

    def get(model_type):
        if model_type not in made:
            embedder = TextEmbedder.from_release(releases[model_type], pooling="mean", max_seq_length=SEQ)
            made[model_type] = embedder.predict(HARD_TEXTS, verbose=0)
        return made[model_type]

    return get


@pytest.fixture(scope="module")
def filled_masks(releases):
    """`filled_masks(variant)`: `(MaskedLM.from_release's top 5 for "the quick <mask> fox" and "the fox", its
    vocabulary)`, made once for the Python test and the served export's."""
    made = {}

    def get(model_type):
        if model_type not in made:
            model = MaskedLM.from_release(releases[model_type], max_seq_length=SEQ)
            text = f"the quick {MASKS[model_type]} fox"
            made[model_type] = model.predict([text, "the fox"], top_k=5), model.preprocessor.vocabulary
        return made[model_type]

    return get


def _reference_inputs(release, model_type, texts, texts_b=None, seq=SEQ):
    """Hugging Face's layout of the Python tokenizer's ids, written out here."""
    tokenizer = tokenizer_from_files(release, do_lower_case=True)
    cls, sep, pad = {"roberta": ("<s>", "</s>", "<pad>"), "albert": ("[CLS]", "[SEP]", "<pad>"),
                     "distilbert": ("[CLS]", "[SEP]", "[PAD]")}[model_type]
    cls_id, sep_id, pad_id = tokenizer.convert_tokens_to_ids([cls, sep, pad])
    rows = {"input_ids": [], "input_mask": [], "segment_ids": []}
    def tokenize(text):
        if model_type != "distilbert":  # byte-level BPE and SentencePiece find their specials in text
            return tokenizer.tokenize(text)
        # Hugging Face's WordPiece tokenizers also read "[MASK]" in text as the token; FullTokenizer does not.
        parts = [tokenizer.tokenize(part) for part in text.split("[MASK]")]
        return [token for part in parts for token in part + ["[MASK]"]][:-1]

    for i, text in enumerate(texts):
        a = tokenizer.convert_tokens_to_ids(tokenize(text))
        b = tokenizer.convert_tokens_to_ids(tokenize(texts_b[i])) if texts_b else []
        if b:  # short pairs only here: no truncation
            middle = [sep_id, sep_id] if model_type == "roberta" else [sep_id]
            ids = [cls_id] + a + middle + b + [sep_id]
            second = 0 if model_type == "roberta" else 1  # RoBERTa has no token types
            segments = [0] * (len(a) + 1 + len(middle)) + [second] * (len(b) + 1)
        else:
            ids = [cls_id] + a[: seq - 2] + [sep_id]
            segments = [0] * len(ids)
        rows["input_ids"].append(ids + [pad_id] * (seq - len(ids)))
        rows["input_mask"].append([1] * len(ids) + [0] * (seq - len(ids)))
        rows["segment_ids"].append(segments + [0] * (seq - len(ids)))
    return {key: np.array(value, "int32") for key, value in rows.items()}


def _converted(release, model_class):
    files = find_release(release)
    config = BertConfig.from_json_file(files.bert_config_file)
    model = model_class(config)
    load_original_checkpoint(model, files.checkpoint, allow_fresh=("bert/pooler/", "cls/seq_relationship/"))
    return model


@pytest.mark.parametrize("model_type", VARIANTS)
def test_embedder_from_release_equals_the_converted_model_on_python_ids(releases, mean_embeddings, model_type):
    reference = _reference_inputs(releases[model_type], model_type, HARD_TEXTS)
    sequence = np.asarray(_converted(releases[model_type], BertModel)(reference)["sequence_output"], np.float64)
    mask = reference["input_mask"][:, :, None]
    expected = (sequence * mask).sum(1) / mask.sum(1)
    np.testing.assert_allclose(mean_embeddings(model_type), expected, atol=1e-5)
    # The preprocessor and encoder are the same for every pooling: the ids checked on the CLS embedder's.
    cls = TextEmbedder.from_release(releases[model_type], pooling="cls", max_seq_length=SEQ)
    ours = {key: value.numpy() for key, value in cls.preprocessor(HARD_TEXTS).items()}
    for key in reference:
        np.testing.assert_array_equal(ours[key], reference[key], err_msg=key)
    np.testing.assert_allclose(cls.predict(HARD_TEXTS[:2], verbose=0), sequence[:2, 0], atol=1e-5)


def test_pooled_embeddings_need_a_pooler(releases):
    with pytest.raises(ValueError, match="needs a pooler"):
        TextEmbedder.from_release(releases["distilbert"], pooling="pooled", max_seq_length=SEQ)


def test_roberta_pairs_have_no_token_types_and_pad_with_pad(releases):
    embedder = TextEmbedder.from_release(releases["roberta"], max_seq_length=SEQ)
    ours = embedder.preprocessor((["the"], ["he"]))
    reference = _reference_inputs(releases["roberta"], "roberta", ["the"], ["he"])
    for key in reference:
        np.testing.assert_array_equal(ours[key].numpy(), reference[key], err_msg=key)
    # <s> the </s></s> he </s> <pad>: the fixture's vocab.json has the 32, he 34
    assert ours["input_ids"].numpy()[0].tolist()[:7] == [0, 32, 2, 2, 34, 2, 1]


@pytest.mark.parametrize("model_type", VARIANTS)
def test_masked_lm_fills_the_variants_mask_token(releases, filled_masks, model_type):
    filled, vocabulary = filled_masks(model_type)
    text = f"the quick {MASKS[model_type]} fox"
    assert [len(masks) for masks in filled] == [1, 0] and len(filled[0][0]) == 5
    reference = _reference_inputs(releases[model_type], model_type, [text])
    mask_id = tokenizer_from_files(releases[model_type]).convert_tokens_to_ids([MASKS[model_type]])[0]
    position = int(np.flatnonzero(reference["input_ids"][0] == mask_id)[0])
    logits = _converted(releases[model_type], BertPretrainingModel)(
        {**reference, "masked_lm_positions": np.array([[position]], "int32")})["masked_lm_logits"]
    logits = np.asarray(logits, np.float64)[0, 0]
    probabilities = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    best = int(np.argmax(probabilities))
    token, probability = filled[0][0][0]
    assert token == vocabulary[best]
    assert abs(probability - probabilities[best]) < 1e-5


def _class_data(model_type, copies=8):
    positive, negative = CLASS_TEXTS[model_type]
    return [positive, negative] * copies, np.array([1, 0] * copies)


@pytest.fixture(scope="module")
def fine_tuned(releases):
    """`fine_tuned(variant)`: `(TextClassifier fine-tuned on the two classes, its fit history)`, trained by the
    test that first asks."""
    import keras

    made = {}

    def get(model_type):
        if model_type not in made:
            # Dropout and shuffling drew from the global state, so the run depended on what the worker ran before:
            # with one such state ALBERT's tiny model stayed at chance for 6 epochs (global seeds 0-5: one of six
            # did). Fixed.
            keras.utils.set_random_seed(2)
            model = TextClassifier.from_release(releases[model_type], num_classes=2, max_seq_length=SEQ, seed=1,
                                                learning_rate=1e-3, warmup_proportion=0.0)
            model.compile()
            texts, labels = _class_data(model_type)
            made[model_type] = model, model.fit(texts, labels, batch_size=4, epochs=6, verbose=0)
        return made[model_type]

    return get


@pytest.fixture(scope="module")
def served(releases, fine_tuned, tmp_path_factory):
    """The raw-text exports of this file but the int8 one, answered by one process without our Python
    (`probe_many`: one TensorFlow start-up for all): `{variant: {task: answers}}`.

    Per variant, `bert-export` of the release's embeddings and fill_mask; for RoBERTa also its fine-tuned
    classifier's export (its pair layout in the graph). Exported with --noverify: the probe loads each version
    as TF Serving does (a Session, its warmup requests replayed), and the tests compare its answers with the
    Python models', which the export's own check would compare them with.
    """
    from tools.export_saved_model import main as export_main

    root = tmp_path_factory.mktemp("saved_models")
    jobs = {}
    for model_type in VARIANTS:
        base = root / model_type
        for task in ("embeddings", "fill_mask"):
            export_main([f"--task={task}", f"--model_dir={releases[model_type]}", f"--export_dir={base}/{task}",
                         f"--max_seq_length={SEQ}", "--precision=float32", "--noverify"])
        masked = f"the quick {MASKS[model_type]} fox"
        jobs[model_type, "embeddings"] = (base / "embeddings" / "1",
                                          [{"signature": "serving_default", "inputs": {"text": HARD_TEXTS}}])
        jobs[model_type, "fill_mask"] = (base / "fill_mask" / "1",
                                         [{"signature": "serving_default", "inputs": {"text": [masked]}}])
    model, _ = fine_tuned("roberta")
    version = model.export(root / "roberta" / "classifier", label_names=["neg", "pos"], precision="float32",
                           verify=False)
    jobs["roberta", "classifier"] = (version, [
        {"signature": "serving_default", "inputs": {"text": HARD_TEXTS}},
        {"signature": "serve_text_pair", "inputs": {"text": ["the", "the fox"], "text_b": ["he", ""]}},
    ])
    answers = {}
    for (model_type, task), results in probe_many(jobs).items():
        answers.setdefault(model_type, {})[task] = results
    return answers


@pytest.mark.parametrize("model_type", VARIANTS)
def test_text_classifier_fine_tunes_saves_and_exports(fine_tuned, model_type, tmp_path, request):
    model, history = fine_tuned(model_type)
    assert model.bert_config.use_pooler  # a fresh pooler where the release has none
    losses = history.history["loss"]
    assert losses[-1] < losses[0]
    probabilities = model.predict(HARD_TEXTS + list(CLASS_TEXTS[model_type]), batch_size=4)
    assert probabilities.shape == (len(HARD_TEXTS) + 2, 2)
    assert probabilities[-2, 1] > probabilities[-1, 1]

    model.save_release(tmp_path / "fine_tuned")
    again = TextClassifier.from_release(tmp_path / "fine_tuned", num_classes=2, max_seq_length=SEQ)
    assert again.load_report.summary()  # everything loaded, the head included
    np.testing.assert_allclose(again.predict(HARD_TEXTS), model.predict(HARD_TEXTS), atol=1e-6)

    if model_type != "roberta":  # the raw-text export of each variant: test_raw_text_exports_...
        return
    # RoBERTa's pair layout in the graph (<s> a </s></s> b </s>, segment ids 0) against Python's.
    results = request.getfixturevalue("served")["roberta"]["classifier"]
    np.testing.assert_allclose(results[0]["probabilities"], model.predict(HARD_TEXTS), atol=1e-5)
    np.testing.assert_allclose(results[1]["probabilities"], model.predict((["the", "the fox"], ["he", ""])),
                               atol=1e-5)


@pytest.mark.parametrize("model_type", VARIANTS)
def test_raw_text_exports_of_a_release_serve_without_our_python(served, mean_embeddings, filled_masks, model_type):
    (embeddings,), (fill_mask,) = served[model_type]["embeddings"], served[model_type]["fill_mask"]
    # Python's answers: the release's mean-pooled TextEmbedder and MaskedLM on the same texts.
    np.testing.assert_allclose(embeddings["mean_pooled"], mean_embeddings(model_type), atol=1e-5)
    assert ("pooled_output" in embeddings) == (model_type == "albert")  # the only one with a trained pooler
    filled, _ = filled_masks(model_type)  # [0]: "the quick <mask> fox", the text served
    assert fill_mask["mask_count"] == [1]
    assert fill_mask["top_k_tokens"][0][0] == [token for token, _ in filled[0][0]]
    np.testing.assert_allclose(fill_mask["top_k_scores"][0][0], [p for _, p in filled[0][0]], atol=1e-5)


def test_a_calibrated_int8_export_of_albert_quantizes_every_application_of_its_shared_layers(releases, mean_embeddings,
                                                                                             tmp_path):
    # ALBERT's encoder applies one set of kernels again and again (here 4 x a group of 2 layers), calibrated on
    # every application: each product int8, in every application, and the served embeddings close to float32's.
    # (RoBERTa and DistilBERT convert to BERT's own layers: the int8 path of tests/test_int8.py.)
    model_type = "albert"
    import tensorflow as tf

    from tests.test_serving_precision import saved_graph_def
    from tests.variants_fixture import ALBERT_INNER, ALBERT_LAYERS
    from tools.export_saved_model import main as export_main

    calibration = tmp_path / "calibration.txt"
    calibration.write_text("".join(f"{text}\n" for text in CLASS_TEXTS[model_type] + tuple(HARD_TEXTS[:5])),
                           encoding="utf-8")
    export_dir = tmp_path / "saved_models" / "int8"
    export_main(["--task=embeddings", f"--model_dir={releases[model_type]}", f"--export_dir={export_dir}",
                 f"--max_seq_length={SEQ}", "--precision=int8", f"--calibration_file={calibration}"])
    graph = saved_graph_def(export_dir / "1")
    nodes = list(graph.node) + [node for f in graph.library.function for node in f.node_def]
    config = BertConfig.from_json_file(find_release(releases[model_type]).bert_config_file)
    # 4 applications of a group of 2 inner layers (2 groups share them out).
    applications = config.num_hidden_layers * config.inner_group_num
    assert applications == ALBERT_LAYERS * ALBERT_INNER == 8
    # Query/key/value as one product, and the three after, in every layer application.
    assert sum(node.op == "_QuantizedMatMul" for node in nodes) == 4 * applications
    serve = tf.saved_model.load(str(export_dir / "1")).signatures["serving_default"]
    quantized = serve(text=tf.constant(HARD_TEXTS))["mean_pooled"].numpy()
    # float32: the release's embedder (its raw-text export equals it: test_raw_text_exports_...).
    full = mean_embeddings(model_type)
    cosine = np.sum(full * quantized, -1) / (np.linalg.norm(full, axis=-1) * np.linalg.norm(quantized, axis=-1))
    # The tiny encoder applies its quantized kernels 8 times: rounding compounds (its blank text: 0.982).
    assert cosine.mean() > 0.995 and cosine.min() > 0.97 and np.abs(full - quantized).max() > 1e-6


def test_an_albert_classifier_made_before_other_seeded_models_still_predicts_and_exports(releases, fine_tuned,
                                                                                         tmp_path):
    # A notebook or a sweep: each model seeded as it is made (keras.utils.set_random_seed, as run_fine_tuning's jobs
    # do), the first exported and predicted after the others. Seeding empties TensorFlow's cache of eager kernels,
    # which TF Text's SentencePiece model belonged to: every ALBERT model made before lost its tokenizer
    # ("Resource .../_0_SentencepieceOp/... does not exist"; now `SentencePieceModel`). The first model: the
    # fine-tuned ALBERT classifier, made after `keras.utils.set_random_seed(2)`.
    import keras
    import tensorflow as tf

    classifier, _ = fine_tuned("albert")
    expected = classifier.predict(HARD_TEXTS)
    keras.utils.set_random_seed(2)
    embedder = TextEmbedder.from_release(releases["albert"], max_seq_length=SEQ)
    keras.utils.set_random_seed(3)
    version = classifier.export(tmp_path / "classifier", precision="float32", verify=False)
    reference = _reference_inputs(releases["albert"], "albert", HARD_TEXTS)
    for model in (classifier, embedder):
        np.testing.assert_array_equal(model.preprocessor(HARD_TEXTS)["input_ids"].numpy(), reference["input_ids"])
    np.testing.assert_allclose(classifier.predict(HARD_TEXTS), expected, atol=1e-6)
    served = tf.saved_model.load(str(version)).signatures["serving_default"](text=tf.constant(HARD_TEXTS))
    np.testing.assert_allclose(served["probabilities"].numpy(), expected, atol=1e-4)
