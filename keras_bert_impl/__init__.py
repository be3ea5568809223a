"""keras_bert_impl: BERT rebuilt as Keras 3 / TensorFlow layers.

Mirrors google-research/bert's `modeling.py` block for block, loads and writes
its checkpoints by name, and tokenizes exactly as its `tokenization.py`.

The top-level names are imported lazily, so `import keras_bert_impl.cli` or the
tokenizer does not start TensorFlow (tools quiet its logs first).

Example:
>>> from keras_bert_impl import TextClassifier  # doctest: +SKIP
>>> model = TextClassifier.from_release("uncased_L-12_H-768_A-12", num_classes=2)  # doctest: +SKIP
>>> model.compile()  # the original AdamW, warmup and linear decay  # doctest: +SKIP
>>> model.fit(texts, labels, batch_size=32, epochs=3)  # doctest: +SKIP
"""

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    # Fine-tuning in Python: raw text in, Keras fit.
    "BertPreprocessor": "keras_bert_impl.tokenization.preprocessor",
    "TextClassifier": "keras_bert_impl.tasks.text_classifier",
    "MaskedLM": "keras_bert_impl.tasks.masked_lm",
    "NextSentencePredictor": "keras_bert_impl.tasks.masked_lm",
    "TextEmbedder": "keras_bert_impl.tasks.text_embedder",
    "TaskSpec": "keras_bert_impl.tasks.spec",
    "get_task": "keras_bert_impl.tasks.registry",
    # Training pieces: the original optimizer and schedule, callbacks.
    "create_optimizer": "keras_bert_impl.training.optimization",
    "AdamWeightDecay": "keras_bert_impl.training.optimization",
    "Lamb": "keras_bert_impl.training.optimization",
    "WarmupLinearDecay": "keras_bert_impl.training.optimization",
    "TrainingCheckpoint": "keras_bert_impl.training.checkpointing",
    "TrainingSummaries": "keras_bert_impl.training.callbacks",
    "StopAtStep": "keras_bert_impl.training.callbacks",
    # Serving.
    "export_saved_model": "keras_bert_impl.serving.export",
    "ExportOptions": "keras_bert_impl.serving.export",
    # The model and its checkpoints.
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
