"""Version directories of a model for TF Serving: `<export_dir>/<version>/`, each published whole.

A version directory is written under a temporary name and renamed into place
only when complete, so TF Serving, which watches the base path for new
integer versions, never loads half an export, and an existing version is
never overwritten. The rename also claims the version number: exports
started side by side on one base path get one version each.

Every path goes through `keras_bert_impl.filesystem`, so `export_dir` may be
remote (`gs://`, `ram://`). There a directory cannot be renamed into place:
the version is written on the local disk and copied up, `saved_model.pb`
last, TF Serving's sign of a SavedModel; claiming a number there is a check
then a copy, not atomic as the local rename is.

Example:
>>> import tempfile
>>> base = tempfile.mkdtemp()
>>> existing_versions(base), next_version(base)
([], 1)
"""

import os
import re
import socket
import uuid

from keras_bert_impl import filesystem
from keras_bert_impl.errors import BertError

SAVED_MODEL_FILE = "saved_model.pb"
# A local export's staging directory beside the versions: `.tmp-<host>-<pid>-<random>`,
# so a later export can tell the ones of dead processes on this host.
_STAGING = re.compile(r"^\.tmp-(?P<host>[A-Za-z0-9_.-]+)-(?P<pid>\d+)-[0-9a-f]{32}$")


class ExportError(BertError, ValueError):
    """An export request that cannot be honoured (bad version, task, labels)."""


def existing_versions(export_dir):
    """Integer version directories present under `export_dir`, ascending."""
    if not filesystem.isdir(export_dir):
        return []
    # ASCII digits only: TF Serving parses version names with strtoll.
    return sorted(int(name) for name in filesystem.listdir(export_dir) if name.isascii() and name.isdigit())


def next_version(export_dir):
    """The next free integer version (1 for a new model)."""
    versions = existing_versions(export_dir)
    return versions[-1] + 1 if versions else 1


def copy_to_new_directory(source, target):
    """Copies directory `source` to `target`, which must not exist; files of
    subdirectories first and the top-level `saved_model.pb` last. A copy
    that fails part way is removed again, so no version directory is left
    that TF Serving would try (and fail) to load, or that blocks a retry.

    Raises:
        FileExistsError: `target` exists.
    """
    if filesystem.exists(target):
        raise FileExistsError(f"{target}: already exists")

    def copy(relative):
        for name in filesystem.listdir(filesystem.join(source, *relative)):
            if filesystem.isdir(filesystem.join(source, *relative, name)):
                filesystem.makedirs(filesystem.join(target, *relative, name))
                copy(relative + (name,))
            elif relative or name != SAVED_MODEL_FILE:
                filesystem.copy(filesystem.join(source, *relative, name), filesystem.join(target, *relative, name))

    filesystem.makedirs(target)
    try:
        copy(())
        filesystem.copy(filesystem.join(source, SAVED_MODEL_FILE), filesystem.join(target, SAVED_MODEL_FILE))
    except BaseException:
        filesystem.rmtree(target)
        raise


def staging_name():
    """A new staging directory name for this process: `.tmp-<host>-<pid>-<random>`.

    Example:
    >>> _STAGING.match(staging_name()) is not None
    True
    """
    host = re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname()) or "host"
    return f".tmp-{host}-{os.getpid()}-{uuid.uuid4().hex}"


def remove_stale_staging(export_dir, log=None):
    """Removes the staging directories that exports killed on this host left in `export_dir`.

    Only those of this host whose process is gone: a live export's (here or
    on another host sharing the directory) is left alone, and so is any other
    hidden entry.

    Returns:
        The names removed.
    """
    if filesystem.is_remote(export_dir) or not filesystem.isdir(export_dir):
        return []
    host = re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname()) or "host"
    removed = []
    for name in filesystem.listdir(export_dir):
        match = _STAGING.match(name)
        if match and match["host"] == host and not _alive(int(match["pid"])):
            filesystem.rmtree(filesystem.join(export_dir, name), missing_ok=True)
            removed.append(name)
    if removed and log:
        log(f"{export_dir}: removed {len(removed)} staging directories of killed exports ({', '.join(removed)})")
    return removed


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def publish_version(staging, export_dir, version=None):
    """Moves the complete export `staging` to `export_dir/<version>`.

    On a local disk the move is a rename, and the rename is the claim on the
    version number: it fails when that directory exists and is not empty, so
    of several exports racing for one number exactly one gets it. Without a
    `version` the others move on to the next free number; with one they
    fail. A remote `export_dir` gets a copy (`copy_to_new_directory`), which
    fails when the version exists.

    Args:
        staging: The finished export: a directory beside the versions, or
            on the local disk for a remote `export_dir`.
        export_dir: The model's base path.
        version: The integer version asked for, or None for the next free one.

    Returns:
        The version directory, `export_dir/<version>`.

    Raises:
        ExportError: `version` was given and exists.
    """
    candidate = next_version(export_dir) if version is None else version
    while True:
        final = filesystem.join(export_dir, str(candidate))
        try:
            if filesystem.is_remote(final):
                copy_to_new_directory(staging, final)
            else:
                filesystem.rename(staging, final, overwrite=False)
            return final
        except FileExistsError:
            pass
        if version is not None:
            raise ExportError(f"{final}: version {version} already exists; versions are never overwritten")
        # Another export took `candidate` since it was chosen; each retry
        # follows a version that appeared, so the loop ends.
        candidate = max(candidate + 1, next_version(export_dir))


def check_version_free(export_dir, version):
    """`version` as an int, refused where it is negative or exists under `export_dir` (None passes).

    Checked before any work; `publish_version` decides a race.

    Raises:
        ExportError: a negative version, or one that exists.
    """
    if version is None:
        return None
    if isinstance(version, bool) or not float(version).is_integer():
        raise ExportError(f"version {version!r}: a version is a non-negative integer")
    version = int(version)
    if version < 0:  # TF Serving would read "-1" as a version; our own scans would not
        raise ExportError(f"version {version}: a version is a non-negative integer")
    final = filesystem.join(export_dir, str(version))
    if filesystem.exists(final):
        raise ExportError(f"{final}: version {version} already exists; versions are never overwritten")
    return version
