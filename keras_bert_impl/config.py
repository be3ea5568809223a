"""`BertConfig`: the original `bert_config.json`, validated.

The eleven keys and their meaning are those of google-research/bert's
`modeling.BertConfig`. Validation happens once, here, so that every later error
about a bad configuration names the key and the file rather than surfacing as a
shape error deep inside TensorFlow.

The variants (RoBERTa, ALBERT, DistilBERT) are the same model with a few more
keys (`VARIANT_KEYS`), each defaulting to what the original computes; a config
at those defaults is written without them, so an original `bert_config.json`
reads, computes and writes back exactly as before (docs/VARIANTS.md).
"""

import dataclasses
import json
import os

from keras_bert_impl import filesystem
from keras_bert_impl.errors import ConfigError

# `gelu` is what the original `modeling.py` computes: the tanh approximation.
# Weights trained with the exact (erf) GELU, as HF-trained BERTs are, say
# `gelu_exact` so that a converted config records which function it needs.
# `gelu_new` is Hugging Face's name for that same tanh form (ALBERT's
# configs say it): the same function as `gelu`, kept under its own name.
ACTIVATIONS = ("gelu", "gelu_exact", "gelu_new", "relu", "tanh", "linear")

# google-research/bert's `modeling.get_activation` accepts "gelu", "relu",
# "tanh" and "linear" (any case; "" or None for linear). Ours that it lacks,
# mapped to the nearest function it has: the exact GELU to its tanh "gelu",
# and `gelu_new` to `gelu`, the very same function.
_ORIGINAL_STAND_INS = {"gelu_exact": "gelu", "gelu_new": "gelu"}

MODEL_TYPES = ("bert", "roberta", "albert", "distilbert")

# The keys beyond the original eleven, with the values that compute the
# original BERT. A config leaves out those at these values when written.
VARIANT_DEFAULTS = {
    "model_type": "bert",
    "embedding_size": None,
    "num_hidden_groups": None,
    "inner_group_num": 1,
    "position_offset": 0,
    "use_pooler": True,
    "layer_norm_eps": 1e-12,
    "pooler_act": "tanh",
}
VARIANT_KEYS = tuple(VARIANT_DEFAULTS)

_INT_KEYS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
)
_PROB_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob")


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _validate(values, source):
    """Raises `ConfigError` naming `source` and the key for any bad value."""
    values = {**VARIANT_DEFAULTS, **values}
    for key in _INT_KEYS:
        value = values[key]
        if not _is_int(value) or value <= 0:
            raise ConfigError(
                f"{source}: '{key}' must be a positive integer, got {value!r}"
            )
    # 0: no token types at all (DistilBERT); the original's configs say 2 or 16.
    if not _is_int(values["type_vocab_size"]) or values["type_vocab_size"] < 0:
        raise ConfigError(
            f"{source}: 'type_vocab_size' must be a non-negative integer, got {values['type_vocab_size']!r}"
        )
    for key in _PROB_KEYS:
        value = values[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not 0.0 <= value < 1.0
        ):
            raise ConfigError(
                f"{source}: '{key}' must be a probability in [0, 1), got {value!r}"
            )
    init = values["initializer_range"]
    if isinstance(init, bool) or not isinstance(init, (int, float)) or init <= 0:
        raise ConfigError(
            f"{source}: 'initializer_range' must be a positive number, got {init!r}"
        )
    if values["hidden_act"] not in ACTIVATIONS:
        raise ConfigError(
            f"{source}: 'hidden_act' is {values['hidden_act']!r}; "
            f"known activations are {', '.join(ACTIVATIONS)}"
        )
    if values["hidden_size"] % values["num_attention_heads"]:
        raise ConfigError(
            f"{source}: 'hidden_size' ({values['hidden_size']}) is not a multiple of "
            f"'num_attention_heads' ({values['num_attention_heads']})"
        )
    _validate_variant(values, source)


def _validate_variant(values, source):
    """The checks of `VARIANT_KEYS` (`values` has them all)."""
    if values["model_type"] not in MODEL_TYPES:
        raise ConfigError(
            f"{source}: 'model_type' is {values['model_type']!r}; known model types are {', '.join(MODEL_TYPES)}"
        )
    for key in ("embedding_size", "num_hidden_groups"):
        value = values[key]
        if value is not None and (not _is_int(value) or value <= 0):
            raise ConfigError(f"{source}: '{key}' must be a positive integer or null, got {value!r}")
    if not _is_int(values["inner_group_num"]) or values["inner_group_num"] <= 0:
        raise ConfigError(f"{source}: 'inner_group_num' must be a positive integer, got {values['inner_group_num']!r}")
    groups, layers = values["num_hidden_groups"], values["num_hidden_layers"]
    if groups is not None and groups > layers:
        raise ConfigError(
            f"{source}: 'num_hidden_groups' ({groups}) exceeds 'num_hidden_layers' ({layers}): a group would go unused"
        )
    if groups is None and values["inner_group_num"] != 1:
        raise ConfigError(f"{source}: 'inner_group_num' is {values['inner_group_num']} but 'num_hidden_groups' "
                          "is null: inner groups exist only in ALBERT's shared layer groups")
    if values["model_type"] == "albert" and groups is None:
        raise ConfigError(f"{source}: model_type 'albert' needs 'num_hidden_groups' (1 in every released ALBERT)")
    offset = values["position_offset"]
    if not _is_int(offset) or not 0 <= offset < values["max_position_embeddings"]:
        raise ConfigError(
            f"{source}: 'position_offset' must be an integer in [0, max_position_embeddings), got {offset!r}"
        )
    if not isinstance(values["use_pooler"], bool):
        raise ConfigError(f"{source}: 'use_pooler' must be true or false, got {values['use_pooler']!r}")
    eps = values["layer_norm_eps"]
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < 1:
        raise ConfigError(f"{source}: 'layer_norm_eps' must be a number in (0, 1), got {eps!r}")
    if values["pooler_act"] not in ACTIVATIONS:
        raise ConfigError(f"{source}: 'pooler_act' is {values['pooler_act']!r}; known activations are "
                          f"{', '.join(ACTIVATIONS)}")


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """Hyper-parameters of a BERT model, exactly the keys of `bert_config.json`.

    Args:
        vocab_size: Size of the WordPiece vocabulary.
        hidden_size: Width of every encoder layer (`H`).
        num_hidden_layers: Number of transformer layers (`L`).
        num_attention_heads: Attention heads per layer (`A`); must divide
            `hidden_size`.
        intermediate_size: Width of the feed-forward ("intermediate") layer.
        hidden_act: One of `ACTIVATIONS`. `"gelu"` is the original's tanh
            approximation, `"gelu_exact"` the erf form.
        hidden_dropout_prob: Dropout on embeddings and every sub-layer output.
        attention_probs_dropout_prob: Dropout on attention probabilities.
        max_position_embeddings: Longest sequence the model accepts.
        type_vocab_size: Number of segment (token type) ids; 0 for a model
            without token-type embeddings (DistilBERT).
        initializer_range: Stddev of the truncated-normal initializer.

    The variants' keys (docs/VARIANTS.md), each defaulting to the original:

        model_type: `"bert"`, `"roberta"`, `"albert"` or `"distilbert"`: which
            tokenizer and which Hugging Face / keras-hub names go with the
            weights; the computation is set by the keys below.
        embedding_size: Width `E` of the embeddings when it is not `H`
            (ALBERT's factorised embeddings): the embeddings are `E` wide and
            `bert/encoder/embedding_hidden_mapping_in` projects them to `H`.
            None (the original): `H` wide, no projection.
        num_hidden_groups: ALBERT's cross-layer sharing: the transformer
            layers are `num_hidden_groups` groups of weights, layer `i`
            running group `int(i / num_hidden_layers * num_hidden_groups)`
            (`bert/encoder/transformer/group_G/inner_group_J/...`). None
            (the original): every layer its own weights (`layer_N`).
        inner_group_num: Blocks per ALBERT group, run one after another.
        position_offset: Position `i` reads row `i + position_offset` of the
            position table (RoBERTa: 2, its `padding_idx + 1`); the longest
            sequence is `max_position_embeddings - position_offset`.
        use_pooler: Whether the model has the `bert/pooler` (DistilBERT has none).
        layer_norm_eps: Epsilon of every LayerNorm (RoBERTa 1e-5).
        pooler_act: The pooler's activation: the original's tanh, or ReLU
            for DistilBERT's `pre_classifier` (a converted
            `DistilBertForSequenceClassification`).

    Example:
    >>> config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
    ...                     num_attention_heads=4, intermediate_size=64)
    >>> config.size_per_head
    8
    """

    vocab_size: int
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 16
    initializer_range: float = 0.02
    model_type: str = "bert"
    embedding_size: int = None
    num_hidden_groups: int = None
    inner_group_num: int = 1
    position_offset: int = 0
    use_pooler: bool = True
    layer_norm_eps: float = 1e-12
    pooler_act: str = "tanh"

    def __post_init__(self):
        _validate(dataclasses.asdict(self), "BertConfig")

    @property
    def size_per_head(self):
        return self.hidden_size // self.num_attention_heads

    @property
    def embedding_width(self):
        """Width of the embedding tables: `embedding_size`, else `hidden_size`."""
        return self.embedding_size or self.hidden_size

    @property
    def max_sequence_length(self):
        """The longest sequence the model accepts: `max_position_embeddings - position_offset`.

        Example:
        >>> BertConfig(vocab_size=10, hidden_size=8, num_attention_heads=2, max_position_embeddings=514,
        ...            model_type="roberta", position_offset=2).max_sequence_length
        512
        """
        return self.max_position_embeddings - self.position_offset

    @property
    def masked_lm_act(self):
        """The activation of the masked-LM head's transform: `hidden_act`, but
        always the exact GELU for RoBERTa (its `lm_head` hard-codes it)."""
        return "gelu_exact" if self.model_type == "roberta" else self.hidden_act

    def original_compatible(self):
        """This config with a `hidden_act` that google-research/bert's `modeling.py` accepts.

        `"gelu_exact"` becomes the original's `"gelu"` (its tanh
        approximation): the same model up to that approximation, not
        bit-identical outputs. Any other config is returned unchanged.

        Example:
        >>> config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
        ...                     num_attention_heads=4, intermediate_size=64, hidden_act="gelu_exact")
        >>> config.original_compatible().hidden_act
        'gelu'
        """
        stand_in = _ORIGINAL_STAND_INS.get(self.hidden_act, self.hidden_act)
        return dataclasses.replace(self, hidden_act=stand_in)

    # -- (de)serialization --------------------------------------------------

    @classmethod
    def from_dict(cls, values, source="BertConfig"):
        """Builds a config from a dict with the original's keys.

        Args:
            values: Mapping with all eleven `bert_config.json` keys. A file
                that lacks one is rejected rather than silently defaulted;
                the variant keys (`VARIANT_KEYS`) may be left out.
            source: Name used in error messages (usually the file path).

        Raises:
            ConfigError: unknown or missing keys, or invalid values.
        """
        if not isinstance(values, dict):
            raise ConfigError(f"{source}: expected a JSON object, got {type(values).__name__}")
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - fields)
        if unknown:
            raise ConfigError(f"{source}: unknown key(s) {', '.join(unknown)}")
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in values and f.name not in VARIANT_DEFAULTS]
        if missing:
            raise ConfigError(f"{source}: missing key(s) {', '.join(missing)}")
        _validate(values, source)
        return cls(**values)

    @classmethod
    def from_json_file(cls, path):
        """Reads an original `bert_config.json`.

        Raises:
            ConfigError: the file is missing, not JSON, or not a valid config.
        """
        path = os.fspath(path)
        try:
            with filesystem.open_file(path, "rb") as f:
                text = f.read().decode("utf-8")
        except FileNotFoundError:
            raise ConfigError(f"{path}: config file not found") from None
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path}: cannot read config file ({e})") from None
        try:
            values = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(
                f"{path}:{e.lineno}: malformed JSON ({e.msg})"
            ) from None
        return cls.from_dict(values, source=path)

    def to_dict(self):
        """The config's keys; the variant keys only where they differ from the original's.

        Example:
        >>> sorted(BertConfig(vocab_size=10, hidden_size=8, num_attention_heads=2,
        ...                   layer_norm_eps=1e-5).to_dict())[:3]
        ['attention_probs_dropout_prob', 'hidden_act', 'hidden_dropout_prob']
        >>> "model_type" in BertConfig(vocab_size=10).to_dict()
        False
        """
        values = dataclasses.asdict(self)
        for key, default in VARIANT_DEFAULTS.items():
            if values[key] == default and type(values[key]) is type(default):
                del values[key]
        return values

    def to_json_string(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path):
        """Writes the config as `bert_config.json` (atomically)."""
        from keras_bert_impl.io import write_text_atomically

        write_text_atomically(os.fspath(path), self.to_json_string())
