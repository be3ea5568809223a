"""Packaging for keras_bert_impl: BERT as Keras 3 layers with original-checkpoint fidelity."""

from setuptools import find_packages, setup

# What keras_bert_impl and tools/ import at run time (tests/test_packaging.py
# checks that every third-party import outside the optional paths below is here).
RUNTIME = [
    # TF Text's kernels are built against one TensorFlow minor version.
    "tensorflow~=2.20.0",
    # The training workarounds (docs in README) are for 3.15's behaviour.
    "keras>=3.15,<4",
    # In-graph WordPiece; 2.20.1 is the first 2.20 with Python 3.13 wheels.
    "tensorflow-text~=2.20.1",
    # PredictionLog / PredictionService protos for warmup files and the gRPC
    # client, generated for TensorFlow 2.20's protos.
    "tensorflow-serving-api~=2.20.0",
    # The floors below are TensorFlow 2.20's own; we import these directly.
    "numpy>=1.26",
    "absl-py>=1.0",  # the tools' flags
    "protobuf>=5.28",  # tf.train.Example parsing errors
    "grpcio>=1.24.3,<2",  # the TF Serving gRPC client
    # hf://ORG/NAME sources (checkpoints/sources.py): a runtime requirement, not
    # an extra, so that from_release("hf://...") and every tool's --model_dir
    # take a Hub id as installed: a small client (transformers' own; it brings
    # httpx2, filelock, fsspec, pyyaml, tqdm and the hf-xet wheel: 25 MB
    # installed, beside TensorFlow's 1.8 GB). 2.4 is the
    # version whose requests tests/hub_fixture.py answers.
    "huggingface_hub>=2.4,<3",
]

EXTRAS = {
    # bert-figures (matplotlib) and bert-tfidf-baseline (scikit-learn), both
    # run by bert-demo; the floors are the first releases built for NumPy 2.
    "demo": ["matplotlib>=3.8.4", "scikit-learn>=1.4.2"],
    # The TFDS inputs of run_classifier (glue/*, any text classification set),
    # run_squad (squad/*) and run_ner (conll2003).
    "tfds": [
        "tensorflow-datasets>=4.9",
        # tensorflow-datasets imports it without declaring it.
        "importlib_resources",
    ],
    # bert-convert-keras-hub and keras-hub presets as sources: presets in keras-hub 0.32's format.
    "keras-hub": [
        "keras-hub==0.32.*",
        # 0.2.3's generated protos need protobuf >= 7.36 (not declared), and
        # the [beam] extra holds protobuf below 7: 0.2.2's load under 6 and 7.
        "sentencepiece<0.2.3",
        # Its Hugging Face preset loader imports it without declaring it.
        "safetensors>=0.4",
        # kaggle:// handles and preset names (checkpoints/kaggle_presets.py): keras-hub's Kaggle
        # loader, whose model resolver and KAGGLE_API_ENVIRONMENT are 1.0's (kagglesdk: keras-hub's pin).
        "kagglehub==1.0.*",
        "kagglesdk==0.1.28",
    ],
    # create_pretraining_data --beam (DirectRunner here; Dataflow/Flink/Spark by
    # options). It caps protobuf below 7 and pyarrow below 26, which TensorFlow
    # 2.20 and the rest accept (measured in docs/PACKAGING.md).
    "beam": ["apache-beam>=2.77", "pyarrow>=14"],  # pyarrow: bert-predict --output_format=parquet
}
# The oracles the tests compare against (tf-models-official: the original's
# tokenizer, processors, squad_lib and encoder; keras-hub's BertBackbone;
# seqeval, scipy, scikit-learn and pandas for metrics and CSV parsing), the
# optional paths they test, and vermin for the minimum-Python check.
EXTRAS["test"] = EXTRAS["demo"] + EXTRAS["tfds"] + EXTRAS["keras-hub"] + [
    "pytest",
    # make test runs the files on 2 workers (-n 2 --dist loadfile).
    "pytest-xdist>=3.5",
    "hypothesis",
    "tf-models-official==2.20.*",
    "scipy",
    "seqeval",
    "pandas",
    "vermin",
    # The RoBERTa / ALBERT tokenizer oracles (tests/test_variant_tokenizers.py):
    # Hugging Face's tokenizers (Rust) and transformers' tokenizer classes, no torch.
    "tokenizers>=0.22",
    "transformers>=5,<6",
]
# The benchmarks' peers; keras-nlp is the design card's name for keras-hub.
EXTRAS["bench"] = EXTRAS["demo"] + EXTRAS["tfds"] + EXTRAS["keras-hub"] + [
    "tf-models-official==2.20.*",
    "keras-nlp==0.32.*",
    "psutil",
    # bench_cpu_inference's peers on our weights (benchmarks/onnx_bert.py
    # writes the graph): ONNX Runtime, whose transformer optimizer needs
    # sympy for its shape inference, and OpenVINO. The floors are the
    # versions whose fusions of our graph were checked (onnx 1.23 needs
    # protobuf >= 6.31.1, which TensorFlow 2.20 accepts).
    "onnx>=1.23",
    "onnxruntime>=1.32",
    "sympy",
    "openvino>=2026.4",
    # bench_vocab's peer: Hugging Face's WordPieceTrainer (also a test oracle).
    "tokenizers>=0.22",
]

setup(
    name="keras_bert_impl",
    version="0.1.0",
    description=(
        "BERT rebuilt in Keras 3 / TensorFlow: original-checkpoint compatible "
        "layers, exact WordPiece tokenizer, training and serving tools."
    ),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    # 3.11: keras 3.15's floor; 3.13: the last TensorFlow 2.20 and TF Text
    # 2.20.1 have wheels for.
    python_requires=">=3.11,<3.14",
    # The thin scripts in tools/ are installed as the package
    # `keras_bert_impl_tools` so that they can be console scripts too.
    packages=find_packages(include=["keras_bert_impl", "keras_bert_impl.*"])
    + ["keras_bert_impl_tools"],
    package_dir={"keras_bert_impl_tools": "tools"},
    install_requires=RUNTIME,
    extras_require=EXTRAS,
    entry_points={
        "console_scripts": [
            "bert-extract-features=keras_bert_impl_tools.extract_features:console_main",
            "bert-convert-hf=keras_bert_impl_tools.convert_hf_checkpoint:console_main",
            "bert-convert-keras-hub=keras_bert_impl_tools.convert_keras_hub:console_main",
            "bert-demo=keras_bert_impl_tools.demo:console_main",
            "bert-run-squad=keras_bert_impl_tools.run_squad:console_main",
            "bert-run-ner=keras_bert_impl_tools.run_ner:console_main",
            "bert-run-pretraining=keras_bert_impl_tools.run_pretraining:console_main",
            "bert-export=keras_bert_impl_tools.export_saved_model:console_main",
            "bert-create-pretraining-data=keras_bert_impl_tools.create_pretraining_data:console_main",
            "bert-build-vocab=keras_bert_impl_tools.build_vocab:console_main",
            "bert-run-classifier=keras_bert_impl_tools.run_classifier:console_main",
            "bert-run-multiple-choice=keras_bert_impl_tools.run_multiple_choice:console_main",
            "bert-distill=keras_bert_impl_tools.distill:console_main",
            "bert-prepare-data=keras_bert_impl_tools.prepare_data:console_main",
            "bert-tfidf-baseline=keras_bert_impl_tools.tfidf_baseline:console_main",
            "bert-figures=keras_bert_impl_tools.make_figures:console_main",
            "bert-predict-saved-model=keras_bert_impl_tools.predict_saved_model:console_main",
            "bert-cache=keras_bert_impl_tools.cache:console_main",
            "bert-predict=keras_bert_impl_tools.predict:console_main",
        ],
    },
)
