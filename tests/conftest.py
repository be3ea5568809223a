"""Shared pytest fixtures: real assets, fetched once and cached under `.cache/assets/`."""

import os

# Before anything imports TensorFlow: keep its C++ start-up chatter out of test output.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# `make test` runs one worker per core (`-n 2`): each worker's TensorFlow, and the tools it starts (they inherit
# the environment), runs an op on one thread, rather than every process's pool contending for both cores (six of
# the slowest files: 252 -> 224 s). Ops still run side by side (the inter-op pool is left as it is).
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

# The float32 parity tests hold to 1e-5. On an Ampere or newer GPU TensorFlow
# runs float32 matrix products in TF32 (10-bit mantissa) unless told not to:
# on an H100 the XLA paths of test_bert_model and test_padding_free then
# differed from their references by 1.7e-3, and passed with TF32 off. No
# effect on a CPU.
tf.config.experimental.enable_tensor_float_32_execution(False)

from keras_bert_impl.checkpoints.pip_assets import BERT_BASE_UNCASED_VOCAB, MINILM_L6_V2  # noqa: E402
from tests.assets import fetch_or_skip  # noqa: E402
from tests.lean_install.collector import collect_less_often  # noqa: E402

# Tracing builds and drops thousands of graph objects per test: Python's cyclic collector, at its default
# thresholds, ran ~2,000 times a file, each pass also walking the ~1M objects TensorFlow's import made.
collect_less_often()


@pytest.fixture(scope="session")
def bert_vocab_file():
    """Path of the real bert-base-uncased `vocab.txt` (30522 tokens)."""
    return fetch_or_skip(BERT_BASE_UNCASED_VOCAB) / "vocab.txt"


@pytest.fixture(scope="session")
def minilm_dir():
    """Directory with the real all-MiniLM-L6-v2 `config.json`, `model.safetensors`, `vocab.txt`."""
    return fetch_or_skip(MINILM_L6_V2)


@pytest.fixture(scope="session")
def tiny_classifier():
    """A tiny `BertClassifier` (the real vocabulary's size, 3 labels, random weights of seed 3) that
    test_serving_precision, test_int8 and test_constant_kernels export and compare with; read, never changed."""
    from keras_bert_impl.models.classifier import BertClassifier
    from tests.helpers import randomize, tiny_config

    model = BertClassifier(tiny_config(vocab_size=30522, max_position_embeddings=64), num_labels=3)
    randomize(model, seed=3, scale=0.2)
    return model


@pytest.fixture(scope="session")
def tiny_classifier_float32_export(tmp_path_factory, bert_vocab_file, tiny_classifier):
    """`tiny_classifier` exported once per process (a worker of `make test`) in float32, portable, its kernels
    plain variables (max_seq_length 24): `(version directory, the lines the export logged)`. The files above
    only read it (an export costs ~4 s of CPU, most of it tracing the signatures)."""
    from keras_bert_impl.serving.export import ExportOptions, export_saved_model

    said = []
    path = export_saved_model(
        tiny_classifier, "classifier", bert_vocab_file, tmp_path_factory.mktemp("tiny_classifier") / "float32",
        ExportOptions(max_seq_length=24, precision="float32", constant_kernels=False, packed_kernels=False),
        log=said.append,
    )
    return path, tuple(said)


# The files that take longest (per-file sums of `--durations`, full suite), longest first. `make test` hands
# whole files to two workers in collection order (`--no-loadscope-reorder`: xdist's default reorders files by
# their number of tests), each its next file when it finishes one: a long file collected late would run alone
# at the end while the other worker idles. Files not named (each under ~15 s) follow in their own order.
LONGEST_FILES_FIRST = (
    "test_variant_distillation.py",
    "test_variant_tasks.py",
    "test_text_classifier.py",
    "test_run_pretraining.py",
    "test_variant_span_tagging.py",
    "test_predict_corpus.py",
    "test_serving.py",
    "test_int8.py",
    "test_constant_kernels.py",
    "test_sources.py",
    "test_faults_serving.py",
    "test_real_tokens.py",
    "test_distillation_tasks.py",
    "test_serving_precision.py",
    "test_tutorials.py",
    "test_multi_label.py",
    "test_run_classifier.py",
    "test_kaggle_sources.py",
    "test_multiple_choice.py",
    "test_packed_kernels.py",
    "test_distillation.py",
    "test_keras_files.py",
    "test_long_text.py",
    "test_onednn_kernels.py",
    "test_multi_label_distillation.py",
    "test_packaging.py",
    "test_padding_free.py",
    "test_faults_assets.py",
    "test_tools_cli.py",
    "test_session_model.py",
    "test_inference_memory.py",
    "test_bert_model.py",
    "test_python_tasks.py",
    "test_docstring_examples.py",
    "test_faults_pretraining.py",
    "test_hf_classifier_heads.py",
    "test_run_fine_tuning.py",
    "test_verification.py",
    "test_build_vocab.py",
    "test_variant_pretraining_data.py",
    "test_filesystem_chain.py",
    "test_run_squad.py",
    "test_variants_keras_hub.py",
    "test_variant_tokenizers.py",
    "test_docs.py",
    "test_training_checkpoints.py",
)


LEAN_INSTALL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lean_install")


def pytest_configure(config):
    """The processes the tests start see a lean install's packages.

    `tests/lean_install/sitecustomize.py` hides the extras' packages that
    `import keras` would load (each TensorFlow start-up: 4.4 -> 2.8 s of
    CPU), and a tool that imports one outside `keras_bert_impl.extras`
    fails as it would for a user without them; tests of the tools that need
    one clear `KERAS_BERT_IMPL_TESTS_HIDE`. Set in the process that runs the
    tests (an xdist worker, or pytest itself without workers), not in the
    xdist controller, whose environment the workers, which test with those
    packages as oracles, inherit.
    """
    if not hasattr(config, "workerinput") and config.getoption("dist", default="no") != "no":
        return
    os.environ.setdefault("KERAS_BERT_IMPL_TESTS_HIDE", "sklearn,matplotlib,pandas,cv2")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [LEAN_INSTALL, os.environ.get("PYTHONPATH")]))


def pytest_collection_modifyitems(config, items):
    """Puts `LONGEST_FILES_FIRST` ahead; the other files and every file's own tests keep their order."""
    rank = {name: position for position, name in enumerate(LONGEST_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
