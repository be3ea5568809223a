"""Every docstring example in `keras_bert_impl` runs and shows what it says."""

import doctest
import importlib
import pkgutil

import pytest

import keras_bert_impl
from tests.helpers import load_benchmark

MODULES = sorted(
    name for _, name, _ in pkgutil.walk_packages(keras_bert_impl.__path__, "keras_bert_impl.")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    # No module imports an optional extra at import time (test_packaging), so an import error is a bug.
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (see stdout)"


@pytest.mark.parametrize("name", ["bench_finetune", "profile_forward", "bench_gelu_fusion"])
def test_benchmark_docstring_examples(name):
    # The benchmark scripts' pure helpers carry examples too.
    result = doctest.testmod(load_benchmark(name), optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted >= 3 and result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed"
