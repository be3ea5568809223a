"""Writes constraints.txt: one exact version for every package that any of our extras installs.

The tests compare us with oracles (tf-models-official, keras-hub, transformers,
tokenizers, ...) and the benchmarks with peers; left unpinned, a fresh machine
resolves newer releases than the last one did, and a test that passed yesterday
fails on an upstream change. `make` installs every target under these pins;
`make constraints` re-resolves them on purpose (then run `make test` and commit
the new file with what changed).

The union of the extras is resolved at once, so any one target's subset is
consistent too. The versions are the ones pip picks for this machine's Python
and platform (CPython 3.11 on Linux x86_64 when written); pip ignores a pin for
a package that a target does not install.

Usage: python .ci/pin_versions.py [OUTPUT] (default: constraints.txt beside .ci/)
"""

import json
import os
import subprocess
import sys
import tempfile

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXTRAS = "demo,test,beam,bench"
# Ours, and the installer's own tools, which a new venv brings (pip-tools leaves them out too).
UNPINNED = {"keras-bert-impl", "pip", "setuptools", "wheel"}
HEADER = """\
# Exact versions for every package `make demo`, `make test` and `make bench`
# install (pip -c): what the tests compare against installs the same tomorrow as
# today. Written by `make constraints` (.ci/pin_versions.py) from one resolution
# of .[{extras}]; bump on purpose, run `make test`, commit.
"""


def canonical(name):
    return name.lower().replace("_", "-").replace(".", "-")


def resolve(extras):
    """`{canonical name: version}` that pip would install for `.[extras]` into an empty environment."""
    with tempfile.TemporaryDirectory() as scratch:
        report = os.path.join(scratch, "report.json")
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--dry-run",
             "--ignore-installed", "--report", report, f".[{extras}]"],
            cwd=REPOSITORY, check=True)
        with open(report, encoding="utf-8") as f:
            installs = json.load(f)["install"]
    return {canonical(item["metadata"]["name"]): item["metadata"]["version"] for item in installs}


def constraints_text(versions):
    lines = [f"{name}=={version}" for name, version in sorted(versions.items()) if name not in UNPINNED]
    return HEADER.format(extras=EXTRAS) + "\n".join(lines) + "\n"


def main(argv):
    output = argv[1] if len(argv) > 1 else os.path.join(REPOSITORY, "constraints.txt")
    text = constraints_text(resolve(EXTRAS))
    partial = output + ".partial"
    with open(partial, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(partial, output)
    print(f"{output}: {text.count(chr(10)) - HEADER.count(chr(10))} pins")


if __name__ == "__main__":
    main(sys.argv)
