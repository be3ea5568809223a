"""A cached release kept whole: the manifest of its files' sha256, written before it is published and checked
on every use (`sources` and `archives` keep their releases so).

Example:
>>> import os, tempfile
>>> d = tempfile.mkdtemp()
>>> _ = open(os.path.join(d, "vocab.txt"), "w").write("[PAD]\\n")
>>> write_manifest(d, {"source": "example"})
>>> corrupt_files(d)
[]
>>> _ = open(os.path.join(d, "vocab.txt"), "w").write("changed\\n")
>>> corrupt_files(d)
['vocab.txt']
"""

import json
import os

from keras_bert_impl.checkpoints.pip_assets import file_sha256
from keras_bert_impl.errors import CheckpointError
from keras_bert_impl.io import write_text_atomically

MANIFEST_FILE = "source_manifest.json"


class SourceError(CheckpointError):
    """A named source that cannot be had: unknown, unreachable without a cached copy, or not a model we compute."""


def read_manifest(directory):
    try:
        with open(os.path.join(directory, MANIFEST_FILE), encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and isinstance(manifest.get("files"), dict) else None


def corrupt_files(directory):
    """Files of a cached release that differ from its manifest (missing, or another sha256); `[MANIFEST_FILE]`
    where the manifest itself is missing or unreadable."""
    manifest = read_manifest(directory)
    if manifest is None:
        return [MANIFEST_FILE]
    corrupt = []
    for name, digest in sorted(manifest["files"].items()):
        path = os.path.join(directory, name)
        if not os.path.isfile(path) or file_sha256(path) != digest:
            corrupt.append(name)
    return corrupt


def write_manifest(directory, fields):
    """Writes `MANIFEST_FILE` into a release about to be published: `fields` and the sha256 of every file."""
    files = {name: file_sha256(os.path.join(directory, name))
             for name in sorted(os.listdir(directory)) if os.path.isfile(os.path.join(directory, name))}
    write_text_atomically(os.path.join(directory, MANIFEST_FILE),
                          json.dumps(dict(fields, files=files), indent=2, sort_keys=True) + "\n")


def checked_copy(directory, log):
    """`directory` where it is a complete, unchanged release; None where it is absent or changed."""
    if not os.path.isdir(directory):
        return None
    corrupt = corrupt_files(directory)
    if corrupt:
        log(f"{directory}: {', '.join(corrupt)} differ(s) from {MANIFEST_FILE}: the cached copy is fetched again")
        return None
    return directory
