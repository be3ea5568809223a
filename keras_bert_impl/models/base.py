"""What every model here shares: built from a `BertConfig`, serialized by it."""

import keras


def sequence_inputs(*names):
    """int32 `keras.Input`s of shape [batch, seq], named and keyed by `names`.

    Example:
    >>> sorted(sequence_inputs("input_ids", "input_mask"))
    ['input_ids', 'input_mask']
    """
    return {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in names}


class BertConfigModel(keras.Model):
    """Base of our functional models: `get_config` holds the `BertConfig` (as
    the dict of `bert_config.json`), the dtype policy, name and trainability;
    subclasses add their own constructor arguments to it."""

    def get_config(self):
        return {
            "bert_config": self.bert_config.to_dict(),
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
            "name": self.name,
            "trainable": self.trainable,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)
