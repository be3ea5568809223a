"""setup.py says what the code needs: install_requires is what keras_bert_impl
and tools/ import at run time (test oracles and benchmark peers are extras),
and python_requires admits no Python older than the code's syntax and
library calls need (vermin, since only one Python runs here)."""

import ast
import functools
import importlib.metadata
import json
import os
import re
import runpy
import subprocess
import sys

import pytest
import setuptools
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = ("keras_bert_impl", "tools")
OUR_PACKAGES = {"keras_bert_impl", "keras_bert_impl_tools", "tools", "tests"}

# Imported only inside the functions of one optional path, from the extra
# named here: the package imports and its other tools run without them.
OPTIONAL_IMPORTS = {
    "apache_beam": "beam",  # create_pretraining_data --beam
    "pyarrow": "beam",  # bert-predict --output_format=parquet (Beam installs it)
    "tensorflow_datasets": "tfds",  # run_classifier's TFDS inputs
    "matplotlib": "demo",  # bert-figures
    "sklearn": "demo",  # bert-tfidf-baseline
    "keras_hub": "keras-hub",  # bert-convert-keras-hub, keras-hub presets as sources
    "kagglehub": "keras-hub",  # kaggle:// handles and preset names (checkpoints/kaggle_presets.py)
    "kagglesdk": "keras-hub",  # the Kaggle API kagglehub asks (its KAGGLE_API_ENVIRONMENT)
    "sentencepiece": "keras-hub",  # the Python ALBERT tokenizer (tokenization/sentencepiece_tokenizer.py)
}
# What only the tests and benchmarks import: never a run-time requirement.
TEST_AND_BENCH_ONLY = {"tf-models-official", "keras-hub", "keras-nlp", "pytest", "hypothesis", "vermin", "seqeval"}


@pytest.fixture(scope="module")
def setup_arguments():
    """The keyword arguments setup.py passes to `setuptools.setup`."""
    captured = {}
    real_setup, cwd = setuptools.setup, os.getcwd()
    setuptools.setup = captured.update
    try:
        os.chdir(REPO)  # setup.py reads README.md from its own directory.
        runpy.run_path(os.path.join(REPO, "setup.py"), run_name="__main__")
    finally:
        setuptools.setup = real_setup
        os.chdir(cwd)
    return captured


def requirement_names(requirements):
    return {canonicalize_name(Requirement(r).name) for r in requirements}


def source_trees():
    """`(path relative to the repository, ast)` of every Python file of the package and the tools."""
    for source in SOURCES:
        for directory, _, names in os.walk(os.path.join(REPO, source)):
            for name in sorted(n for n in names if n.endswith(".py")):
                path = os.path.join(directory, name)
                with open(path, encoding="utf-8") as f:
                    yield os.path.relpath(path, REPO), ast.parse(f.read(), path)


def third_party_imports():
    """`{dotted module: [(path:line, inside a function or class)]}` of the
    absolute imports in keras_bert_impl/ and tools/ outside the standard library."""
    found = {}

    def visit(node, path, nested):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                modules = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom) and child.level == 0:
                modules = [child.module]
            else:
                modules = []
            for module in modules:
                top = module.split(".")[0]
                if top not in sys.stdlib_module_names and top not in OUR_PACKAGES:
                    found.setdefault(module, []).append((f"{path}:{child.lineno}", nested))
            inner = nested or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda))
            visit(child, path, inner)

    for path, tree in source_trees():
        visit(tree, path, False)
    return found


@functools.cache
def _installed_top_levels():
    """`{top-level module: [distribution]}` of the installed distributions: read once (it reads every
    distribution's file list, ~0.1 s a call; the tests ask for every import of the package)."""
    return importlib.metadata.packages_distributions()


@functools.cache
def _distribution_files(name):
    return tuple(str(f) for f in importlib.metadata.distribution(name).files or ())


def distributions_providing(module):
    """Canonical names of the installed distributions that hold `module`
    (for a namespace package such as `google`, those holding its subpackage)."""
    parts = module.split(".")
    names = _installed_top_levels().get(parts[0], [])
    if len(names) > 1 and len(parts) > 1:
        prefix = f"{parts[0]}/{parts[1]}"
        names = [
            name for name in names
            if any(f == prefix + ".py" or f.startswith(prefix + "/") for f in _distribution_files(name))
        ]
    return {canonicalize_name(name) for name in names}


def test_install_requires_holds_no_test_or_benchmark_package(setup_arguments):
    runtime = requirement_names(setup_arguments["install_requires"])
    extras = {extra: requirement_names(reqs) for extra, reqs in setup_arguments["extras_require"].items()}
    assert not runtime & TEST_AND_BENCH_ONLY
    assert {"tf-models-official", "keras-hub", "pytest", "hypothesis", "vermin"} <= extras["test"]
    assert {"tf-models-official", "keras-hub", "keras-nlp"} <= extras["bench"]
    # Nothing in an extra is also a run-time requirement: pip install . brings no oracle.
    for extra, names in extras.items():
        assert not runtime & names, f"[{extra}] repeats run-time requirements {sorted(runtime & names)}"


def read_pins(path):
    """`{canonical name: Version}` of a constraints file's `name==version` lines."""
    pins = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.split("#")[0].strip()
            if line:
                requirement = Requirement(line)
                (specifier,) = requirement.specifier
                assert specifier.operator == "==", f"{path}:{number}: {line} is not an exact pin"
                pins[canonicalize_name(requirement.name)] = Version(specifier.version)
    return pins


def test_every_requirement_is_pinned_to_a_version_it_admits(setup_arguments):
    """The Makefile installs every target under constraints.txt; a requirement it does not pin would resolve
    to whatever is newest on the day (how `make test` came to fail on a fresh machine: transformers moved)."""
    pins = read_pins(os.path.join(REPO, "constraints.txt"))
    requirements = list(setup_arguments["install_requires"])
    for extra in setup_arguments["extras_require"].values():
        requirements += extra
    for line in requirements:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{line}: not pinned in constraints.txt (make constraints)"
        assert requirement.specifier.contains(pins[name], prereleases=True), f"constraints.txt pins {name} " \
            f"{pins[name]}, which {line} does not admit"
    with open(os.path.join(REPO, "Makefile"), encoding="utf-8") as f:
        assert re.search(r"pip install .*-c \$\(CONSTRAINTS\)", f.read()), "the Makefile installs without the pins"


def test_the_installed_oracles_are_the_pinned_ones():
    """What this suite runs against is what constraints.txt says (a stale or hand-changed environment shows
    here, by name, rather than as an oracle's changed answer)."""
    pins = read_pins(os.path.join(REPO, "constraints.txt"))
    differing = {}
    for distribution in importlib.metadata.distributions():
        name = canonicalize_name(distribution.metadata["Name"])
        if name in pins and Version(distribution.version) != pins[name]:
            differing[name] = f"{distribution.version} installed, {pins[name]} pinned"
    assert not differing, f"reinstall with make test: {differing}"


def test_every_runtime_import_is_declared(setup_arguments):
    runtime = requirement_names(setup_arguments["install_requires"])
    extras = {extra: requirement_names(reqs) for extra, reqs in setup_arguments["extras_require"].items()}
    imports = third_party_imports()
    assert {"tensorflow", "keras", "tensorflow_text", "numpy", "absl"} <= set(imports)
    undeclared = {}
    for module, places in sorted(imports.items()):
        providers = distributions_providing(module)
        assert providers, f"{places[0][0]}: {module} is imported but no installed distribution provides it"
        optional_extra = OPTIONAL_IMPORTS.get(module.split(".")[0])
        if optional_extra is not None:
            top_level = [place for place, nested in places if not nested]
            assert not top_level, f"{top_level[0]}: optional {module} imported at module level"
            assert providers & extras[optional_extra], f"{module} ({sorted(providers)}) not in [{optional_extra}]"
        elif not providers & runtime:
            undeclared[module] = (places[0][0], sorted(providers))
    assert not undeclared, f"imported at run time but not in install_requires: {undeclared}"


def test_python_requires_admits_no_python_older_than_the_code_needs(setup_arguments):
    """vermin's minimum over keras_bert_impl/ and tools/ (annotations counted as
    evaluated: dataclass fields are) is at most python_requires' lower bound."""
    specifier = SpecifierSet(setup_arguments["python_requires"])
    floors = [Version(s.version) for s in specifier if s.operator in (">=", "~=", "==")]
    assert floors, f"python_requires {specifier} has no lower bound"
    lowest_allowed = max(floors)
    assert Version(f"{sys.version_info.major}.{sys.version_info.minor}") in specifier
    vermin = os.path.join(os.path.dirname(sys.executable), "vermin")
    if not os.path.exists(vermin):
        pytest.fail(f"{vermin} is missing: vermin is in the [test] extra (make test installs it)")
    result = subprocess.run(
        [vermin, "--no-tips", "--eval-annotations", "--format", "parsable", *SOURCES],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    # The last line of the parsable format is the verdict, e.g. ":::!2:3.10:".
    verdict = result.stdout.strip().splitlines()[-1]
    minimum = re.fullmatch(r":::[^:]*:(3\.\d+):", verdict)
    assert minimum, f"unexpected vermin verdict {verdict!r}"
    assert Version(minimum.group(1)) <= lowest_allowed, (
        f"the code needs Python {minimum.group(1)} (vermin), python_requires allows {specifier}"
    )


def extra_imports():
    """`[(module, extra, path:line)]` of every `import_extra("module", "extra", ...)` call."""
    found = []
    for path, tree in source_trees():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "import_extra"
                    and all(isinstance(a, ast.Constant) for a in node.args[:2])):
                found.append((node.args[0].value, node.args[1].value, f"{path}:{node.lineno}"))
    return found


def test_every_optional_import_names_the_extra_that_installs_it(setup_arguments):
    extras = {extra: requirement_names(reqs) for extra, reqs in setup_arguments["extras_require"].items()}
    found = extra_imports()
    assert {"sklearn", "matplotlib", "tensorflow_datasets", "apache_beam", "keras_hub"} <= {m.split(".")[0] for m, _, _ in found}
    for module, extra, place in found:
        assert OPTIONAL_IMPORTS[module.split(".")[0]] == extra, f"{place}: {module} is in [{OPTIONAL_IMPORTS[module.split('.')[0]]}], not [{extra}]"
        assert distributions_providing(module) & extras[extra], f"{place}: [{extra}] does not install {module}"


def test_a_missing_extra_is_one_line_naming_the_extra(tmp_path, monkeypatch, capsys):
    """bert-tfidf-baseline without scikit-learn: the bad-input exit code and the pip command, no traceback."""
    from keras_bert_impl.cli import EXIT_BAD_INPUT, run_tool
    from keras_bert_impl_tools import tfidf_baseline

    for split in ("train", "dev"):
        (tmp_path / f"{split}.csv").write_text("text,label\ngood film,1\nbad film,0\n", encoding="utf-8")
    for module in [m for m in sys.modules if m == "sklearn" or m.startswith("sklearn.")] + ["sklearn"]:
        monkeypatch.setitem(sys.modules, module, None)  # None in sys.modules: the import fails.
    code = run_tool(tfidf_baseline.main, [f"--data_dir={tmp_path}"], prog="bert-tfidf-baseline")
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT
    assert err == "bert-tfidf-baseline: error: bert-tfidf-baseline needs scikit-learn, which is not installed: pip install 'keras_bert_impl[demo]'\n"


# Every module of the package and every tool, imported in one process where the extras' and the tests' packages
# cannot be imported (tests/lean_install/sitecustomize.py); what failed, and which hidden ones got loaded anyway.
_LEAN_IMPORTS = """
import importlib, json, pkgutil, sys
import keras_bert_impl, keras_bert_impl_tools
names = [info.name for package in (keras_bert_impl, keras_bert_impl_tools)
         for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
# The TF Serving stand-in blocks our modules and Keras as it is imported (None in sys.modules): last.
names.sort(key=lambda name: name.endswith("predict_saved_model"))
failed = {}
for name in names:
    try:
        importlib.import_module(name)
    except Exception as error:
        failed[name] = repr(error)
hidden = sys.argv[1].split(",")
print(json.dumps({"failed": failed, "loaded": sorted(name for name in hidden if sys.modules.get(name) is not None)}))
"""


def test_every_module_and_tool_imports_without_the_extras():
    """The run-time check of `OPTIONAL_IMPORTS`: the package and its tools import where none of the extras'
    packages nor the tests' oracles is installed (the static checks above read `import` lines only; this also
    catches an import made by a module we import)."""
    hidden = sorted(set(OPTIONAL_IMPORTS) | {"pandas", "scipy", "official", "seqeval", "hypothesis", "tokenizers",
                                             "transformers", "safetensors", "cv2", "tf_keras", "tf_models"})
    environment = dict(os.environ, KERAS_BERT_IMPL_TESTS_HIDE=",".join(hidden), TF_CPP_MIN_LOG_LEVEL="3",
                       PYTHONPATH=os.path.join(REPO, "tests", "lean_install"))
    result = subprocess.run([sys.executable, "-c", _LEAN_IMPORTS, ",".join(hidden)], capture_output=True, text=True,
                            cwd="/", env=environment, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])
    assert report == {"failed": {}, "loaded": []}
