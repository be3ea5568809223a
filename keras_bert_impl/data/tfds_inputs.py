"""Prepared TensorFlow Datasets as fine-tuning input, never downloaded.

`run_classifier` (`glue/*`, or any text classification dataset with its
feature names given), `run_squad` (`squad/v1.1`, `squad/v2.0`, any dataset
with SQuAD's features) and `run_ner` (`conll2003`) read a TFDS dataset only
from a data directory where it is already prepared, e.g. by
`tfds build squad/v1.1 --data_dir <dir>`: `tfds.builder(name, data_dir=...)`
then `as_dataset`, which is what `tfds.load(..., download=False)` does. A
dataset whose code is not in the installed `tensorflow_datasets` (one of
your own) is read from its prepared files alone.

TFDS stores examples in the order of a hash of their keys, not in the order
of the files it was built from, and most datasets keep no row index; the
readers keep the stored order (the order `tfds.load` gives), so results
that do not depend on order (examples as a set, official scores) equal
those from the original files.

Example:
>>> split_names("train[:10%]+validation")
['train', 'validation']
>>> split_source("squad/v1.1", "validation")
'squad/v1.1[validation]'
"""

import re

from keras_bert_impl import extras
from keras_bert_impl.data.pipeline_options import without_autotune_thread
from keras_bert_impl.errors import InputFileError

# `train`, `train[:10%]`, `train[10:20]+validation`: the names before any slice.
_SPLIT_PART = re.compile(r"^\s*([^\[\]+\s]+)\s*(\[[^\[\]]*\])?\s*$")


def split_names(split):
    """The split names in a TFDS split expression (slices and `+` allowed).

    Raises:
        InputFileError: an expression TFDS would not parse.
    """
    names = []
    for part in split.split("+"):
        match = _SPLIT_PART.match(part)
        if not match:
            raise InputFileError(f"split {split!r}: expected name, name[slice] or parts joined by +")
        names.append(match.group(1))
    return names


def split_source(name, split):
    """How messages name one split of a TFDS dataset: `name[split]`."""
    return f"{name}[{split}]"


def open_prepared(name, data_dir):
    """The builder of `name` as prepared in `data_dir`; nothing is downloaded.

    Args:
        name: The TFDS name, with its config (`squad/v1.1`, `glue/mrpc`).
        data_dir: The TFDS data directory it was prepared in.

    Returns:
        A prepared `tfds.core.DatasetBuilder`.

    Raises:
        InputFileError: naming `data_dir` and `name` when no such dataset
            exists or it is not prepared there, with the command that
            prepares it.
    """
    tfds = extras.import_extra("tensorflow_datasets", "tfds", "--tfds_name")

    how = f"prepare it with `tfds build {name} --data_dir {data_dir}`"
    try:
        builder = tfds.builder(name, data_dir=str(data_dir))
    except ValueError as e:  # DatasetNotFoundError and unknown configs are ValueErrors
        reason = str(e).strip().splitlines()[0]
        raise InputFileError(f"{data_dir}: no TFDS dataset {name} there or installed ({reason}); {how}") from None
    if not builder.is_prepared():
        raise InputFileError(
            f"{data_dir}: TFDS dataset {name} is not prepared there (this tool never downloads; {how})"
        )
    return builder


def feature(builder, name, key):
    """The feature `key` of a prepared dataset `name`.

    Raises:
        InputFileError: the dataset has no such feature (its features listed).
    """
    features = builder.info.features
    if key not in features:
        raise InputFileError(
            f"{builder.data_dir}: TFDS dataset {name} has no feature {key!r} "
            f"(it has {', '.join(map(repr, features))})"
        )
    return features[key]


def class_names(feature_connector):
    """The class names of a `ClassLabel` (or a sequence of them); None for other features."""
    tfds = extras.import_extra("tensorflow_datasets", "tfds", "--tfds_name")

    if isinstance(feature_connector, tfds.features.Sequence):
        feature_connector = feature_connector.feature
    if isinstance(feature_connector, tfds.features.ClassLabel):
        return tuple(feature_connector.names)
    return None


def is_text(feature_connector):
    """Whether a feature holds one string per example."""
    import numpy as np

    return feature_connector.shape == () and np.dtype(feature_connector.np_dtype).kind in "OSU"


def read_split(builder, name, split):
    """The examples of one split as NumPy dicts (strings as `bytes`), in stored order.

    Args:
        builder: From `open_prepared`.
        name: The dataset's name, for messages.
        split: A split name or expression (`validation`, `train[:1000]`).

    Returns:
        A list of `{feature: value}`.

    Raises:
        InputFileError: a split the dataset does not have (its splits listed).
    """
    available = builder.info.splits
    for split_name in split_names(split):
        if split_name not in available:
            raise InputFileError(
                f"{builder.data_dir}: TFDS dataset {name} has no split {split_name!r} "
                f"(it has {', '.join(map(repr, available))})"
            )
    try:
        dataset = builder.as_dataset(split=split, shuffle_files=False)
    except (ValueError, AssertionError) as e:  # a malformed slice
        raise InputFileError(f"{split_source(name, split)}: {str(e).strip().splitlines()[0]}") from None
    return list(without_autotune_thread(dataset).as_numpy_iterator())


def text(value, source="a TFDS record"):
    """A TFDS string (`bytes`) as `str`; `str` values as they are.

    Raises:
        InputFileError: `value` is not UTF-8, naming `source` (e.g.
            `glue/mrpc validation idx 3`) and the byte.

    Example:
    >>> text(b"caf\\xc3\\xa9"), text("as is")
    ('café', 'as is')
    """
    if not isinstance(value, bytes):
        return str(value)
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputFileError(f"{source}: not valid UTF-8 (byte {error.start})") from None
