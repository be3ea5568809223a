"""`BertConfig`: the original `bert_config.json`, validated.

The eleven keys and their meaning are those of google-research/bert's
`modeling.BertConfig`. Validation happens once, here, so that every later error
about a bad configuration names the key and the file rather than surfacing as a
shape error deep inside TensorFlow.
"""

import dataclasses
import json
import os

from keras_bert_impl import filesystem
from keras_bert_impl.errors import ConfigError

# `gelu` is what the original `modeling.py` computes: the tanh approximation.
# Weights trained with the exact (erf) GELU, as HF-trained BERTs are, say
# `gelu_exact` so that a converted config records which function it needs.
ACTIVATIONS = ("gelu", "gelu_exact", "relu", "tanh", "linear")

# google-research/bert's `modeling.get_activation` accepts "gelu", "relu",
# "tanh" and "linear" (any case; "" or None for linear). Ours that it lacks,
# mapped to the nearest function it has: the exact GELU to its tanh "gelu".
_ORIGINAL_STAND_INS = {"gelu_exact": "gelu"}

_INT_KEYS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "type_vocab_size",
)
_PROB_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob")


def _validate(values, source):
    """Raises `ConfigError` naming `source` and the key for any bad value."""
    for key in _INT_KEYS:
        value = values[key]
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(
                f"{source}: '{key}' must be a positive integer, got {value!r}"
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
        type_vocab_size: Number of segment (token type) ids.
        initializer_range: Stddev of the truncated-normal initializer.

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

    def __post_init__(self):
        _validate(dataclasses.asdict(self), "BertConfig")

    @property
    def size_per_head(self):
        return self.hidden_size // self.num_attention_heads

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
                that lacks one is rejected rather than silently defaulted.
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
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in values]
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
        return dataclasses.asdict(self)

    def to_json_string(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path):
        """Writes the config as `bert_config.json` (atomically)."""
        from keras_bert_impl.io import write_text_atomically

        write_text_atomically(os.fspath(path), self.to_json_string())
