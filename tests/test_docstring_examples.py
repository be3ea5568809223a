"""Every docstring example in `keras_bert_impl` runs and shows what it says."""

import doctest
import importlib
import pkgutil

import pytest

import keras_bert_impl

MODULES = sorted(
    name for _, name, _ in pkgutil.walk_packages(keras_bert_impl.__path__, "keras_bert_impl.")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as e:  # An optional extra, e.g. apache-beam.
        pytest.skip(f"{name} needs {e.name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (see stdout)"
