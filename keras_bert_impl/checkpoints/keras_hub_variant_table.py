"""Where keras-hub keeps RoBERTa, ALBERT and DistilBERT (`KERAS_HUB_VARIANTS`), as data that imports no
TensorFlow: a preset's `config.json` is checked against it (`kaggle_presets.our_backbones`) before any weights
are fetched, with no TensorFlow start-up; `keras_hub_variants` converts with it.

Example:
>>> sorted(variant.backbone for variant in KERAS_HUB_VARIANTS.values())
['AlbertBackbone', 'DistilBertBackbone', 'RobertaBackbone']
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class KerasHubVariant:
    """Where keras-hub keeps one variant, and what its backbone computes.

    Attributes:
        model_type: Our `BertConfig.model_type`.
        backbone, masked_lm, tokenizer, masked_lm_preprocessor,
        classifier_preprocessor: keras-hub class names.
        embeddings: Original name -> keras-hub variable path.
        block: keras-hub path of block `(group, inner)` or `(layer, 0)`.
        pooler: keras-hub path prefix of the pooler's dense layer, or None.
        hidden_act, layer_norm_eps: What the backbone computes.
        tokenizer_assets: keras-hub's tokenizer asset file -> our release file name.
    """

    model_type: str
    backbone: str
    masked_lm: str
    tokenizer: str
    masked_lm_preprocessor: str
    classifier_preprocessor: str
    embeddings: dict
    block: str
    pooler: str
    hidden_act: str
    layer_norm_eps: float
    tokenizer_assets: dict


KERAS_HUB_VARIANTS = {
    "roberta": KerasHubVariant(
        model_type="roberta", backbone="RobertaBackbone", masked_lm="RobertaMaskedLM",
        tokenizer="RobertaTokenizer", masked_lm_preprocessor="RobertaMaskedLMPreprocessor",
        classifier_preprocessor="RobertaTextClassifierPreprocessor",
        embeddings={
            "bert/embeddings/word_embeddings": "embeddings/token_embedding/embeddings",
            # Rows from `position_offset` on (`keras_hub_variants._ROWS_FROM_OFFSET`).
            "bert/embeddings/position_embeddings": "embeddings/position_embedding/embeddings",
            "bert/embeddings/LayerNorm/gamma": "embeddings_layer_norm/gamma",
            "bert/embeddings/LayerNorm/beta": "embeddings_layer_norm/beta",
        },
        block="transformer_layer_{layer}", pooler=None, hidden_act="gelu_exact", layer_norm_eps=1e-5,
        tokenizer_assets={"vocabulary.json": "vocab.json", "merges.txt": "merges.txt"},
    ),
    "albert": KerasHubVariant(
        model_type="albert", backbone="AlbertBackbone", masked_lm="AlbertMaskedLM",
        tokenizer="AlbertTokenizer", masked_lm_preprocessor="AlbertMaskedLMPreprocessor",
        classifier_preprocessor="AlbertTextClassifierPreprocessor",
        embeddings={
            "bert/embeddings/word_embeddings": "token_embedding/embeddings",
            "bert/embeddings/position_embeddings": "position_embedding/embeddings",
            "bert/embeddings/token_type_embeddings": "segment_embedding/embeddings",
            "bert/embeddings/LayerNorm/gamma": "embeddings_layer_norm/gamma",
            "bert/embeddings/LayerNorm/beta": "embeddings_layer_norm/beta",
            "bert/encoder/embedding_hidden_mapping_in/kernel": "embedding_projection/kernel",
            "bert/encoder/embedding_hidden_mapping_in/bias": "embedding_projection/bias",
        },
        block="group_{group}_inner_layer_{inner}", pooler="pooled_dense", hidden_act="gelu", layer_norm_eps=1e-12,
        tokenizer_assets={"vocabulary.spm": "spiece.model"},
    ),
    "distilbert": KerasHubVariant(
        model_type="distilbert", backbone="DistilBertBackbone", masked_lm="DistilBertMaskedLM",
        tokenizer="DistilBertTokenizer", masked_lm_preprocessor="DistilBertMaskedLMPreprocessor",
        classifier_preprocessor="DistilBertTextClassifierPreprocessor",
        embeddings={
            "bert/embeddings/word_embeddings": "token_and_position_embedding/token_embedding/embeddings",
            "bert/embeddings/position_embeddings": "token_and_position_embedding/position_embedding/embeddings",
            "bert/embeddings/LayerNorm/gamma": "embeddings_layer_norm/gamma",
            "bert/embeddings/LayerNorm/beta": "embeddings_layer_norm/beta",
        },
        block="transformer_layer_{layer}", pooler=None, hidden_act="gelu_exact", layer_norm_eps=1e-12,
        tokenizer_assets={"vocabulary.txt": "vocab.txt"},
    ),
}
VARIANTS_BY_BACKBONE = {variant.backbone: variant for variant in KERAS_HUB_VARIANTS.values()}
