"""The package's dependencies point one way, in the order docs/ARCHITECTURE.md lists.

The order is read from the document itself, so the test and the page cannot
drift apart: a module may import only modules listed above its own (or its
own package's), at the top of a file or inside a function alike. The one
documented exception is `TextClassifier.export`, which imports `serving/`
when called.
"""

import ast
import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = REPO / "keras_bert_impl"
# (importing module, imported top-level module): allowed upward imports, each named in ARCHITECTURE.md.
DOCUMENTED_EXCEPTIONS = {("keras_bert_impl/tasks/text_classifier.py", "serving")}


def documented_order():
    """Top-level modules of keras_bert_impl in ARCHITECTURE.md's layer list, top first."""
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    block = text.split("```\n", 2)[1]  # the first fenced block: the layers
    names = [match.group(1) for match in re.finditer(r"^([a-z_]+)(?:\.py|/)\s", block, re.MULTILINE)]
    return names[: names.index("tools")]


def imported_top_levels(path):
    """(line, top-level keras_bert_impl module) for every import of the package in `path`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] != "keras_bert_impl":
                continue
            if len(parts) > 1:
                found.append((node.lineno, parts[1]))
            else:  # from keras_bert_impl import filesystem, ...
                found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name.split(".")[1]) for alias in node.names
                         if alias.name.startswith("keras_bert_impl."))
    return found


def test_the_documented_order_names_every_module():
    order = documented_order()
    assert order[:2] == ["errors", "filesystem"] and order[-1] == "jobs"
    on_disk = {p.stem if p.suffix == ".py" else p.name for p in PACKAGE.iterdir()
               if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())}
    assert set(order) == on_disk


def test_imports_point_up_the_documented_order():
    rank = {name: i for i, name in enumerate(documented_order())}
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        own = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        if own == "__init__":
            continue  # The package's own __init__ re-exports its public API.
        for line, imported in imported_top_levels(path):
            if imported in rank and rank[imported] > rank[own] and (relative, imported) not in DOCUMENTED_EXCEPTIONS:
                upward.append(f"{relative}:{line} imports {imported} (listed below {own})")
    assert not upward, "\n".join(upward)


def test_the_check_sees_an_upward_import(tmp_path):
    # The checker itself: a lazy import inside a function is found.
    module = tmp_path / "m.py"
    module.write_text("import os\n\ndef f():\n    from keras_bert_impl.serving.export import x\n"
                      "from keras_bert_impl import io, config\nimport keras_bert_impl.jobs.demo\n")
    assert sorted(imported_top_levels(module)) == [(4, "serving"), (5, "config"), (5, "io"), (6, "jobs")]
