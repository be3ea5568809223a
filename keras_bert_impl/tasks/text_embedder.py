"""`TextEmbedder`: BERT as a frozen feature extractor on raw text.

One vector per text, to put a small classifier on top (scikit-learn, or a
Keras model trained on the vectors): the pooled output (`bert/pooler`, the
[CLS] vector through the pooler's tanh layer, what the original classifiers
read), the mean of the final layer over the real tokens (what
sentence-transformers' mean pooling computes, e.g. for all-MiniLM-L6-v2),
or the final layer's [CLS] (RoBERTa: `<s>`) vector itself, which needs no
pooler (DistilBERT has none; RoBERTa's masked-LM releases none trained).
"""

import keras
import numpy as np

from keras_bert_impl.models.base import BertConfigModel, sequence_inputs
from keras_bert_impl.models.bert_model import BertModel, as_bert_config
from keras_bert_impl.tasks.embeddings import mean_over_tokens
from keras_bert_impl.tasks.text_classifier import load_from_release
from keras_bert_impl.tasks.text_data import num_texts, predict_token_ids, text_tensor, tokenized

_PACKAGE = "keras_bert_impl"
POOLINGS = ("mean", "pooled", "cls")
POOLER_KERNEL = "bert/pooler/dense/kernel"


@keras.saving.register_keras_serializable(package=_PACKAGE)
class MeanOverTokens(keras.layers.Layer):
    """`sequence_output` [batch, seq, H] averaged over `input_mask`'s real tokens -> [batch, H].

    Example:
    >>> import numpy as np
    >>> sequence = np.array([[[1.0, 2.0], [3.0, 4.0], [9.0, 9.0]]], "float32")
    >>> MeanOverTokens()(sequence, np.array([[1, 1, 0]], "int32")).numpy().tolist()
    [[2.0, 3.0]]
    """

    def call(self, sequence_output, input_mask):
        return mean_over_tokens(sequence_output, input_mask)

    def compute_output_shape(self, sequence_output_shape, input_mask_shape):
        return (sequence_output_shape[0], sequence_output_shape[2])


@keras.saving.register_keras_serializable(package=_PACKAGE)
class TextEmbedder(BertConfigModel):
    """Texts (or text pairs) -> one float32 vector each, from a BERT encoder.

    Args:
        bert_config: A `BertConfig` (or its dict).
        preprocessor: The `BertPreprocessor` of the model's vocabulary.
        pooling: `"mean"` (the final layer averaged over the real tokens),
            `"pooled"` (the pooled output) or `"cls"` (the final layer at
            the first token).
        dtype: Keras dtype policy.

    Example:
    >>> from keras_bert_impl.config import BertConfig
    >>> from keras_bert_impl.tokenization.preprocessor import BertPreprocessor
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "good", "bad", "film"]
    >>> config = BertConfig(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=1,
    ...                     num_attention_heads=2, intermediate_size=16)
    >>> embedder = TextEmbedder(config, BertPreprocessor(vocab, max_seq_length=8), pooling="mean")
    >>> embeddings = embedder.predict(["good film", "bad film", "film"], verbose=0)
    >>> embeddings.shape, embeddings.dtype
    ((3, 8), dtype('float32'))
    """

    def __init__(self, bert_config, preprocessor, pooling="mean", dtype=None, name="text_embedder", **kwargs):
        if isinstance(preprocessor, dict):
            preprocessor = keras.layers.deserialize(preprocessor)
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        config = as_bert_config(bert_config)
        if pooling == "pooled" and not config.use_pooler:
            raise ValueError(f"pooling 'pooled' needs a pooler, and this {config.model_type} config has none "
                             "(use_pooler false): take pooling 'mean' or 'cls'")

        # === Layers ===
        bert = BertModel(config, dtype=dtype, name="bert")

        # === Functional model ===
        inputs = sequence_inputs("input_ids", "input_mask", "segment_ids")
        outputs = bert(inputs)
        if pooling == "pooled":
            embeddings = outputs["pooled_output"]  # [batch_size, H]
        elif pooling == "cls":
            embeddings = outputs["sequence_output"][:, 0]  # [batch_size, H]
        else:
            pool = MeanOverTokens(dtype=dtype, name="mean_over_tokens")
            embeddings = pool(outputs["sequence_output"], inputs["input_mask"])  # [batch_size, H]
        super().__init__(inputs=inputs, outputs=embeddings, dtype=dtype, name=name, **kwargs)

        # === Config ===
        self.bert_config = config
        self.bert = bert
        self.preprocessor = preprocessor
        self.pooling = pooling
        # Every pooling reads real positions only (the mean is over `input_mask`, [CLS] is real), so on a CPU
        # the encoder skips the padding's per-token work, as `TextClassifier`'s does; decided where the model
        # is built or loaded.
        from keras_bert_impl.training.fine_tuning import FineTuningSettings, compute_on_real_tokens

        compute_on_real_tokens(self, FineTuningSettings())

    @classmethod
    def from_release(cls, path, pooling="mean", max_seq_length=128, do_lower_case=None, **kwargs):
        """An embedder on the encoder of a release (its `cls/` heads, if any, are left out).

        A release without the pooler (Hugging Face's `BertForMaskedLM`
        saves none) loads for `"mean"` and `"cls"`, which never read it.

        Args:
            path: A release directory (`bert_config.json`, the tokenizer's
                files, `bert_model.ckpt` or `model.ckpt`), or a checkpoint
                prefix in one, or a named source (`hf://ORG/NAME[@REVISION]`:
                docs/SOURCES.md); a variant's (RoBERTa, ALBERT, DistilBERT)
                tokenizes with its own tokenizer.
            pooling: `"mean"`, `"pooled"` or `"cls"`.
            max_seq_length: Padded length of the inputs; longer texts are cut.
            do_lower_case: None follows the release.
            **kwargs: Passed to the constructor.

        Returns:
            The model; `model.load_report` says what was loaded.

        Raises:
            CheckpointError: `pooling="pooled"` and the release has no pooler.
        """
        from keras_bert_impl.checkpoints.original import list_original_variables
        from keras_bert_impl.checkpoints.sources import find_release
        from keras_bert_impl.config import BertConfig
        from keras_bert_impl.errors import CheckpointError

        files = find_release(path)
        has_pooler = BertConfig.from_json_file(files.bert_config_file).use_pooler  # else the constructor says so
        if pooling == "pooled" and has_pooler and POOLER_KERNEL not in list_original_variables(files.checkpoint):
            raise CheckpointError(f"{files.checkpoint}: has no pooler ({POOLER_KERNEL}; a *ForMaskedLM saves none), "
                                  "which pooling 'pooled' reads: take pooling 'mean' or 'cls'")
        unread = () if pooling == "pooled" else ("bert/pooler/",)
        return load_from_release(cls, files.checkpoint, max_seq_length, do_lower_case, fresh=unread, pooling=pooling,
                                 **kwargs)

    def predict(self, x, batch_size=None, **kwargs):
        """Embeddings float32 [num_texts, hidden_size].

        Args:
            x: Texts (a list of strings, or one string), or a tuple
                `(texts_a, texts_b)` of pairs.
            batch_size: Texts per forward pass (default 32).
            **kwargs: `verbose=0` shows no progress bar; with `callbacks`,
                all go to Keras `predict`, which then runs every batch at
                the full width.
        """
        texts = text_tensor(x)
        if num_texts(texts) == 0:
            return np.zeros((0, self.bert_config.hidden_size), np.float32)
        inputs = tokenized(self.preprocessor, texts)  # [num_texts, max_seq_length] each, as in `MaskedLM`
        return np.asarray(predict_token_ids(self, inputs, batch_size, **kwargs), np.float32)

    def get_config(self):
        config = super().get_config()
        config.pop("real_tokens_only_layers", None)  # the constructor decides on the machine that loads it
        return {
            **config,
            "preprocessor": keras.layers.serialize(self.preprocessor),
            "pooling": self.pooling,
        }


__all__ = ["MeanOverTokens", "TextEmbedder"]
