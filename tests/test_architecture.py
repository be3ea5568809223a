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


def module_name(path, root=PACKAGE):
    """`keras_bert_impl.inference.int8` for `keras_bert_impl/inference/int8.py` (a package for its `__init__.py`)."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root=PACKAGE):
    """{module: the package's modules it imports} over every `.py` under `root`.

    Every import counts, at the top of a file or inside a function: a
    function-local import defers loading a module, not depending on it (the
    three circles issue 60 found were each closed by one). `from package
    import name` counts as importing the module `package.name` where there
    is one, else `package` itself.
    """
    modules = {module_name(path, root): path for path in root.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    whole = f"{node.module}.{alias.name}"
                    imported.add(whole if whole in modules else node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
        graph[name] = {module for module in imported if module in modules and module != name}
    return graph


def import_cycle(graph):
    """One circle of imports in `graph` as a list of modules (its first module again at its end), or None."""
    done, path, on_path = set(), [], set()

    def visit(module):
        path.append(module)
        on_path.add(module)
        for imported in sorted(graph[module]):
            if imported in on_path:
                return path[path.index(imported):] + [imported]
            if imported not in done:
                found = visit(imported)
                if found:
                    return found
        on_path.discard(path.pop())
        done.add(module)
        return None

    for module in sorted(graph):
        if module not in done:
            found = visit(module)
            if found:
                return found
    return None


def test_no_module_imports_itself_through_others():
    cycle = import_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle)


def test_the_cycle_check_sees_a_circle_closed_inside_a_function(tmp_path):
    package = tmp_path / "keras_bert_impl"
    (package / "inference").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "inference" / "__init__.py").write_text("")
    (package / "inference" / "a.py").write_text("from keras_bert_impl.inference import b\n")
    (package / "inference" / "b.py").write_text("import os\n\ndef f():\n    from keras_bert_impl.inference.a import x\n")
    graph = import_graph(package)
    assert graph["keras_bert_impl.inference.a"] == {"keras_bert_impl.inference.b"}
    assert import_cycle(graph) == ["keras_bert_impl.inference.a", "keras_bert_impl.inference.b",
                                   "keras_bert_impl.inference.a"]
    (package / "inference" / "b.py").write_text("import os\n")
    assert import_cycle(import_graph(package)) is None


def test_core_layers_do_not_ask_the_machine():
    # The inference plan (inference/plan.py) reads the machine and tells the
    # layers (`layers.onednn_forms`); a layer that imported hardware would
    # branch on the machine again.
    asking = [f"{path.relative_to(REPO).as_posix()}:{line}"
              for path in sorted((PACKAGE / "layers").rglob("*.py"))
              for line, imported in imported_top_levels(path) if imported == "hardware"]
    assert not asking, "\n".join(asking)


# The fine-tuning skeleton's steps (training/fine_tuning.py): the job calls
# them, in one place; a task or tool that called them would be a second copy.
SKELETON_STEPS = {"read_release", "build_in_strategy", "fine_tune", "fit_for_steps",
                  "write_label_list", "save_release", "load_fine_tuned"}
SKELETON_HOMES = {"keras_bert_impl/training/fine_tuning.py", "keras_bert_impl/jobs/run_fine_tuning.py"}


def called_names(path):
    """(line, name) of every call of a plain name or attribute in `path`."""
    calls = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            function = node.func
            name = function.id if isinstance(function, ast.Name) else getattr(function, "attr", None)
            calls.append((node.lineno, name))
    return calls


def test_only_the_fine_tuning_job_runs_the_skeleton():
    copies = []
    for path in sorted([*PACKAGE.rglob("*.py"), *(REPO / "tools").glob("*.py")]):
        relative = path.relative_to(REPO).as_posix()
        if relative in SKELETON_HOMES:
            continue
        copies += [f"{relative}:{line} calls {name}" for line, name in called_names(path) if name in SKELETON_STEPS]
    assert not copies, "\n".join(copies)


def test_every_fine_tuning_tool_is_the_job_with_its_registered_spec():
    from keras_bert_impl.tasks.registry import FINE_TUNING
    from keras_bert_impl.tasks.spec import FineTuningSpec

    for name, spec in FINE_TUNING.items():
        assert spec.name == name and spec.head_description
        # The hooks every run takes (evaluate: where the tool has --do_eval).
        hooks = ["read_inputs", "training_data", "compile_options", "predict"]
        path = next(p for p in (REPO / "tools" / f"run_{name}.py", REPO / "tools" / f"{name}.py") if p.exists())
        tool = path.read_text(encoding="utf-8")
        if '"do_eval"' in tool:
            hooks.append("evaluate")
        missing = [hook for hook in hooks if getattr(spec, hook) is getattr(FineTuningSpec, hook)]
        assert not missing, f"{spec.__name__} does not define {missing}"
        calls = {called for _, called in called_names(path)}
        assert {"run_fine_tuning", spec.__name__, "fine_tuning_run"} <= calls, name


def test_the_skeleton_check_sees_a_copy(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def run(model):\n    model, _ = build_in_strategy(lambda: model)\n    fine_tuning.save_release(model)\n")
    assert [(line, name) for line, name in called_names(module) if name in SKELETON_STEPS] == [
        (2, "build_in_strategy"), (3, "save_release")]
