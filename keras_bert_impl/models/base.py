"""What every model here shares: built from a `BertConfig`, serialized by it."""

import keras


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
