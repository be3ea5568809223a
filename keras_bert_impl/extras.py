"""Optional dependencies, imported where they are used, with the extra that installs them.

The lean install (`pip install keras_bert_impl`) holds what every tool
needs; a few paths need more: plots and the TF-IDF baseline (`[demo]`),
TFDS inputs (`[tfds]`), keras-hub presets (`[keras-hub]`) and the Beam
pipeline (`[beam]`). `require` imports such a module and, when it is
missing, raises one `MissingExtraError` line that says what needs it and
the command that installs it, instead of a bare `ModuleNotFoundError`.

Example:
>>> math = import_extra("math", "demo", "the example")
>>> math.sqrt(4.0)
2.0
>>> import_extra("no_such_module_here", "demo", "bert-figures")
Traceback (most recent call last):
...
keras_bert_impl.extras.MissingExtraError: bert-figures needs no_such_module_here, which is not installed: pip install 'keras_bert_impl[demo]'
"""

import importlib

from keras_bert_impl.errors import BertError

# The extras of setup.py that hold optional imports.
EXTRAS = ("demo", "tfds", "keras-hub", "beam")
# What pip calls the distributions whose module names differ.
DISTRIBUTIONS = {
    "apache_beam": "apache-beam",
    "keras_hub": "keras-hub",
    "sklearn": "scikit-learn",
    "tensorflow_datasets": "tensorflow-datasets",
}


class MissingExtraError(BertError, ImportError):
    """An optional dependency is not installed; the message names the extra."""


def import_extra(module, extra, needed_by):
    """Imports `module`, or says which extra installs it.

    Args:
        module: The dotted module name, e.g. `"sklearn.linear_model"`.
        extra: The extra of setup.py that installs it, one of `EXTRAS`.
        needed_by: What needs it, as the user knows it: a tool
            (`"bert-figures"`) or a flag (`"--tfds_name"`).

    Returns:
        The imported module.

    Raises:
        MissingExtraError: `module` (or a module it imports) is missing.
    """
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; known: {', '.join(EXTRAS)}")
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        missing = (e.name or module).split(".")[0]
        missing = DISTRIBUTIONS.get(missing, missing)
        raise MissingExtraError(
            f"{needed_by} needs {missing}, which is not installed: pip install 'keras_bert_impl[{extra}]'"
        ) from None


__all__ = ["EXTRAS", "MissingExtraError", "import_extra"]
