"""`.keras` model files read as original-layout weights.

Wherever a tool takes an original checkpoint prefix (`--init_checkpoint`) it
also takes a `.keras` file written by `model.save`: one of our models, or a
user's own model that wraps our `BertModel`. The file is loaded in Keras'
`safe_mode`, so nothing in it runs Python code (a `Lambda` layer is
refused), and its variables are named through
`name_map.original_variable_map`, the same map every checkpoint loader and
writer uses. Downstream (`original.load_original_checkpoint`,
`list_original_variables`, the head checks of the fine-tuning jobs) a
`.keras` file is one more checkpoint.

Example:
>>> is_keras_file("out/sentiment.keras"), is_keras_file("release/bert_model.ckpt")
(True, False)
"""

import dataclasses
import os
import types
import zipfile

from keras_bert_impl import filesystem
from keras_bert_impl.checkpoints.name_map import original_variable_map
from keras_bert_impl.errors import CheckpointError

KERAS_FILE_SUFFIX = ".keras"
_PACKAGE = __name__.split(".")[0]


def is_keras_file(path):
    """Whether `path` names a Keras model file rather than a checkpoint prefix.

    Args:
        path: A `--init_checkpoint` value (str or path-like), or None.

    Returns:
        True when it ends in `.keras`, the suffix `keras.saving.load_model`
        requires of the zip format.
    """
    return bool(path) and os.fspath(path).endswith(KERAS_FILE_SUFFIX)


@dataclasses.dataclass(frozen=True)
class KerasFile:
    """A `.keras` file's weights under original names, and what it says about itself.

    It answers the two questions `tf.train.CheckpointReader` answers
    (`get_tensor`, `get_variable_to_shape_map`), so the checkpoint loaders
    take it where they take a reader.

    Attributes:
        path: The file read.
        bert_config: The `BertConfig` of its `BertModel`.
        vocabularies: `(do_lower_case, vocabulary)` of every `BertPreprocessor`
            the model carries (a `TextClassifier`'s), else empty.
        tensors: Original name -> NumPy array for every variable of the
            original layout; the model's other weights (a user's own head)
            under their Keras paths, which loaders report as unexpected.
    """

    path: str
    bert_config: object
    vocabularies: tuple
    tensors: dict

    def get_tensor(self, name):
        """The array stored under `name`."""
        return self.tensors[name]

    def get_variable_to_shape_map(self):
        """`{name: shape}` of every stored array."""
        return {name: list(value.shape) for name, value in self.tensors.items()}


def read_keras_file(path):
    """Loads a `.keras` file in `safe_mode` and reads its weights in the original layout.

    Args:
        path: A `.keras` file saved by `model.save`. The model must hold
            exactly one `BertModel`: one of our models, or a user's model
            around one. Our heads (`OutputProjection`, `MaskedLMHead`) in a
            user's model are read under the classifier's unscoped
            `output_weights`/`output_bias` and `cls/predictions/*`.

    Returns:
        A `KerasFile`.

    Raises:
        CheckpointError: the file is missing, not a zip archive, refused by
            `safe_mode`, not loadable, or holds no (or more than one)
            `BertModel`. The message is one line naming the file.
    """
    import keras

    path = os.fspath(path)
    if not filesystem.isfile(path):
        raise CheckpointError(f"{path}: .keras model file not found")
    with filesystem.open_file(path, "rb") as f:
        is_zip = zipfile.is_zipfile(f)
    if not is_zip:
        raise CheckpointError(f"{path}: not a .keras model file (not a zip archive)")
    _import_named_classes(path)
    try:
        model = keras.saving.load_model(path, safe_mode=True, compile=False)
    # What Keras, h5py and zipfile raise for a bad file: safe_mode refusals
    # and unknown classes (ValueError, TypeError), absent entries (KeyError),
    # broken archives and weights (BadZipFile, OSError).
    except (ValueError, TypeError, KeyError, OSError, zipfile.BadZipFile) as e:
        raise CheckpointError(_load_failure(path, e)) from None

    layers = _all_layers(model)
    owner = _weights_owner(layers, path)
    variables = original_variable_map(owner)
    tensors = {name: variable.numpy() for name, variable in variables.items()}
    mapped = {id(variable) for variable in variables.values()}
    for variable in model.weights:
        if id(variable) not in mapped:
            tensors.setdefault(variable.path, variable.numpy())
    vocabularies = tuple(
        (preprocessor.do_lower_case, tuple(preprocessor.vocabulary)) for preprocessor in _preprocessors(layers)
    )
    return KerasFile(path, owner.bert.bert_config, vocabularies, tensors)


def check_keras_file_fits(path, config, bert_config_file, vocab_file, do_lower_case=None):
    """Reads a `.keras` file and checks it against the release flags beside it.

    Args:
        path: The `.keras` file (`--init_checkpoint`).
        config: The `BertConfig` read from `bert_config_file`.
        bert_config_file: `--bert_config_file`, named in messages.
        vocab_file: `--vocab_file`; where the model carries a vocabulary
            (a `TextClassifier`'s `BertPreprocessor`), the sizes must agree.
        do_lower_case: `--do_lower_case`; where the model carries a
            preprocessor, its casing must agree. None skips the check.

    Returns:
        The `KerasFile` read.

    Raises:
        CheckpointError: the file cannot be read (see `read_keras_file`), its
            `BertConfig` differs from `bert_config_file`'s, or its vocabulary
            or casing differs from the flags'.
    """
    from keras_bert_impl.tokenization import load_vocab

    keras_file = read_keras_file(path)
    if keras_file.bert_config != config:
        differences = ", ".join(
            f"{field.name} {getattr(keras_file.bert_config, field.name)!r} vs {getattr(config, field.name)!r}"
            for field in dataclasses.fields(config)
            if getattr(keras_file.bert_config, field.name) != getattr(config, field.name)
        )
        raise CheckpointError(f"{keras_file.path}: its BertConfig differs from {bert_config_file} ({differences})")
    if keras_file.vocabularies:
        vocab_size = max(load_vocab(vocab_file).values(), default=-1) + 1
        for preprocessor_lower_case, vocabulary in keras_file.vocabularies:
            if len(vocabulary) != vocab_size:
                raise CheckpointError(
                    f"{keras_file.path}: its preprocessor's vocabulary has {len(vocabulary)} tokens, "
                    f"{vocab_file} has {vocab_size}"
                )
            if do_lower_case is not None and preprocessor_lower_case != bool(do_lower_case):
                raise CheckpointError(
                    f"{keras_file.path}: its preprocessor has do_lower_case={preprocessor_lower_case}; "
                    f"pass --do_lower_case={preprocessor_lower_case}"
                )
    return keras_file


def _import_named_classes(path):
    """Imports the modules of this package that define the classes `path` names.

    In safe_mode Keras finds a custom class only in its registry, and a tool
    has imported only what it builds: `bert-export` reading a saved
    `TextClassifier` has not imported `tasks.text_classifier`, whose import
    registers it. Each class in the file's `config.json` says its `module`;
    only modules of this package are imported. An unreadable config is left
    to `keras.saving.load_model` to report.
    """
    import importlib
    import json

    try:
        with filesystem.open_file(path, "rb") as f, zipfile.ZipFile(f) as archive:
            config = json.loads(archive.read("config.json"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return
    stack, modules = [config], set()
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            module = node.get("module")
            if isinstance(module, str) and module.startswith(_PACKAGE + "."):
                modules.add(module)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    for module in sorted(modules):
        try:
            importlib.import_module(module)
        except ImportError:
            pass  # Keras then names the class it cannot locate.


def _load_failure(path, error):
    """One line saying why `keras.saving.load_model` refused `path`."""
    reason = " ".join(str(error).split()) or type(error).__name__
    if "safe_mode" in reason:
        # Keras' message: what it refused, then how to override; the first sentence is the what.
        return f"{path}: refused in safe_mode: {reason.split('. ')[0]} (loading it would run code stored in the file)"
    return f"{path}: not a loadable Keras model file ({reason})"


def _is_bert_model(layer):
    from keras_bert_impl.models.bert_model import BertModel

    return isinstance(layer, BertModel)


def _all_layers(model):
    """`model` and every layer below it (through `Model.layers`), each once, depth first."""
    seen, ordered, stack = set(), [], [model]
    while stack:
        layer = stack.pop()
        if id(layer) in seen:
            continue
        seen.add(id(layer))
        ordered.append(layer)
        stack.extend(reversed(getattr(layer, "layers", None) or []))
    return ordered


def _weights_owner(layers, path):
    """What `original_variable_map` reads: our model holding the `BertModel` as
    `.bert` with its heads, else the `BertModel` with the one `OutputProjection`
    and the one `MaskedLMHead` found beside it (a user's model, or a bare
    `BertModel`)."""
    from keras_bert_impl.layers.heads import MaskedLMHead, OutputProjection

    encoders = [layer for layer in layers if _is_bert_model(layer)]
    if not encoders:
        raise CheckpointError(f"{path}: holds no BertModel (keras_bert_impl), so it has no BERT weights to read")
    if len(encoders) > 1:
        names = ", ".join(layer.name for layer in encoders)
        raise CheckpointError(f"{path}: holds {len(encoders)} BertModels ({names}); cannot tell which is the encoder")
    bert = encoders[0]
    owner = next((layer for layer in layers if getattr(layer, "bert", None) is bert), None)
    if owner is not None:
        return owner
    heads = {}
    for attribute, kind in (("head", OutputProjection), ("masked_lm_head", MaskedLMHead)):
        found = [layer for layer in layers if isinstance(layer, kind)]
        if len(found) == 1:  # several of one kind: which original head each is cannot be told
            heads[attribute] = found[0]
    return types.SimpleNamespace(bert=bert, **heads)


def _preprocessors(layers):
    """Every `BertPreprocessor` in the model or held by one of its layers."""
    from keras_bert_impl.tokenization.preprocessor import BertPreprocessor

    found = {}
    for layer in layers:
        for candidate in (layer, getattr(layer, "preprocessor", None)):
            if isinstance(candidate, BertPreprocessor):
                found[id(candidate)] = candidate
    return list(found.values())
