"""Packaging for keras_bert_impl: BERT as Keras 3 layers with original-checkpoint fidelity."""

from setuptools import find_packages, setup

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
    python_requires=">=3.11,<3.12",
    # The thin scripts in tools/ are installed as the package
    # `keras_bert_impl_tools` so that they can be console scripts too.
    packages=find_packages(include=["keras_bert_impl", "keras_bert_impl.*"])
    + ["keras_bert_impl_tools"],
    package_dir={"keras_bert_impl_tools": "tools"},
    install_requires=[
        "tensorflow~=2.20.0",
        "keras>=3.15,<4",
        "keras-nlp==0.32.*",
        "tensorflow-text~=2.20.1",
        "tensorflow-datasets",
        # tensorflow-datasets imports it without declaring it.
        "importlib_resources",
        "tf-models-official==2.20.*",
        # PredictionLog / PredictionService protos for warmup files and the client.
        "tensorflow-serving-api~=2.20.0",
        "numpy",
    ],
    extras_require={
        # safetensors: keras-hub needs it to read HF checkpoints (test oracle).
        # seqeval: oracle of the NER entity scores.
        "test": ["pytest", "hypothesis", "safetensors", "scipy", "seqeval", "scikit-learn"],
        # create_pretraining_data --beam (DirectRunner here; Dataflow/Flink/Spark by options).
        "beam": ["apache-beam>=2.50"],
    },
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
            "bert-run-classifier=keras_bert_impl_tools.run_classifier:console_main",
            "bert-prepare-data=keras_bert_impl_tools.prepare_data:console_main",
            "bert-tfidf-baseline=keras_bert_impl_tools.tfidf_baseline:console_main",
            "bert-figures=keras_bert_impl_tools.make_figures:console_main",
            "bert-predict-saved-model=keras_bert_impl_tools.predict_saved_model:console_main",
        ],
    },
)
