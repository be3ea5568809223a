"""keras_bert_impl: BERT rebuilt as Keras 3 / TensorFlow layers.

Mirrors google-research/bert's `modeling.py` block for block, loads and writes
its checkpoints by name, and tokenizes exactly as its `tokenization.py`.

The top-level names are imported lazily, so `import keras_bert_impl.cli` or the
tokenizer does not start TensorFlow (tools quiet its logs first).

Example:
>>> from keras_bert_impl import BertConfig, BertModel  # doctest: +SKIP
>>> model = BertModel(BertConfig.from_json_file("bert_config.json"))  # doctest: +SKIP
"""

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "BertConfig": "keras_bert_impl.config",
    "BertModel": "keras_bert_impl.models.bert_model",
    "BertClassifier": "keras_bert_impl.models.classifier",
    "BertPretrainingModel": "keras_bert_impl.models.pretraining",
    "FullTokenizer": "keras_bert_impl.tokenization",
    "load_original_checkpoint": "keras_bert_impl.checkpoints.original",
    "save_original_checkpoint": "keras_bert_impl.checkpoints.original",
    "load_hf_checkpoint": "keras_bert_impl.checkpoints.hf",
    "BertError": "keras_bert_impl.errors",
    "CheckpointError": "keras_bert_impl.errors",
    "ConfigError": "keras_bert_impl.errors",
    "InputFileError": "keras_bert_impl.errors",
    "SequenceLengthError": "keras_bert_impl.errors",
    "VocabError": "keras_bert_impl.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'keras_bert_impl' has no attribute {name!r}")
