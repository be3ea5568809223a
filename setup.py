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
    packages=find_packages(include=["keras_bert_impl", "keras_bert_impl.*"]),
    py_modules=[],
    install_requires=[
        "tensorflow~=2.20.0",
        "keras>=3.15,<4",
        "keras-nlp==0.32.*",
        "tensorflow-text~=2.20.1",
        "tensorflow-datasets",
        # tensorflow-datasets imports it without declaring it.
        "importlib_resources",
        "tf-models-official==2.20.*",
        "numpy",
    ],
    extras_require={
        "test": ["pytest", "hypothesis"],
    },
    entry_points={
        "console_scripts": [
            "bert-extract-features=keras_bert_impl.cli.extract_features:main",
        ],
    },
)
