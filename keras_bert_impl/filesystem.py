"""Paths on any TensorFlow file system: the local disk, `gs://`, `s3://`, `hdfs://`, `ram://`.

Every file the package reads or writes goes through these functions. A path
with a scheme (`gs://bucket/dir`) goes to `tf.io.gfile`, which serves every
file system TensorFlow has registered (tensorflow-io adds `s3://`); a local
path goes to the standard library, so the data workers that never import
TensorFlow (the pretraining-data processes, Beam workers on a local disk)
can use the same calls without paying for the import.

Errors are the standard library's whatever the file system:
`FileNotFoundError`, `FileExistsError`, `IsADirectoryError`,
`PermissionError`, else `OSError`, so callers handle one set (reads and
writes on an open remote file may still raise `tf.errors.OpError`).

Atomic writes: `rename(..., overwrite=False)` is the one way a finished file
or directory appears under its final name. Local disks and `ram://` rename
atomically; object stores (`gs://`, `s3://`) copy then delete, so the final
name appears only once its copy is complete, and what a killed writer leaves
is under its temporary name (see `keras_bert_impl.io.temporary_path`).

Example:
>>> path = "ram://filesystem-doc/out/notes.txt"
>>> makedirs(dirname(path))
>>> with open_file(path, "w") as f:
...     _ = f.write("hello\\n")
>>> listdir("ram://filesystem-doc/out"), getsize(path)
(['notes.txt'], 6)
>>> rmtree("ram://filesystem-doc")
>>> exists(path)
False
"""

import builtins
import contextlib
import glob as local_glob
import os
import posixpath
import shutil


def is_remote(path):
    """True for a path with a scheme (`gs://...`, `ram://...`), served by `tf.io.gfile`."""
    return "://" in os.fspath(path)


def _gfile():
    import tensorflow as tf  # Only for remote paths: local workers stay TF-free.

    return tf.io.gfile


@contextlib.contextmanager
def _standard_errors(path):
    """Turns TensorFlow's file errors into the standard library's."""
    import tensorflow as tf

    try:
        yield
    except tf.errors.NotFoundError:
        raise FileNotFoundError(f"{path}: not found") from None
    except tf.errors.AlreadyExistsError:
        raise FileExistsError(f"{path}: already exists") from None
    except tf.errors.PermissionDeniedError as error:
        raise PermissionError(f"{path}: permission denied ({error.message})") from None
    except tf.errors.OpError as error:
        raise OSError(f"{path}: {error.message}") from None


def join(path, *parts):
    """`os.path.join` for local paths, `/`-joined for remote ones."""
    path = os.fspath(path)
    return posixpath.join(path, *parts) if is_remote(path) else os.path.join(path, *parts)


def dirname(path):
    """The directory part of `path` (`gs://b/d` for `gs://b/d/f`, `gs://` for `gs://b`)."""
    path = os.fspath(path)
    if not is_remote(path):
        return os.path.dirname(path)
    scheme, rest = path.split("://", 1)
    return f"{scheme}://{posixpath.dirname(rest)}"


def basename(path):
    """The last part of `path`."""
    path = os.fspath(path).rstrip("/")
    return posixpath.basename(path) if is_remote(path) else os.path.basename(path)


def open_file(path, mode="r", encoding="utf-8", newline=None):
    """Opens `path` like `open` (text modes are UTF-8 unless `encoding` says otherwise).

    Remote text files are read and written as UTF-8 with `\\n` newlines.

    Raises:
        FileNotFoundError: reading a file that is not there.
        IsADirectoryError: `path` is a directory.
    """
    path = os.fspath(path)
    if not is_remote(path):
        if "b" in mode:
            return builtins.open(path, mode)
        return builtins.open(path, mode, encoding=encoding, newline=newline)
    gfile = _gfile()
    with _standard_errors(path):
        if isdir(path):
            raise IsADirectoryError(f"{path}: is a directory")
        if "r" in mode and not exists(path):
            raise FileNotFoundError(f"{path}: not found")
        if "r" not in mode:
            _make_ram_parents(path)
        return gfile.GFile(path, mode)


def _make_ram_parents(path):
    """Creates the directories above a file about to be written on `ram://`.

    TensorFlow's `ram://` lists, walks and deletes only directories made with
    `makedirs`, not those that a file's name implies (as object stores do).
    """
    if path.startswith("ram://"):
        makedirs_for(path)


def exists(path):
    """True when `path` is a file or a directory."""
    path = os.fspath(path)
    if not is_remote(path):
        return os.path.exists(path)
    gfile = _gfile()
    return gfile.exists(path) and (not gfile.isdir(path) or isdir(path))


def isdir(path):
    """True when `path` is a directory."""
    path = os.fspath(path)
    if not is_remote(path):
        return os.path.isdir(path)
    gfile = _gfile()
    if not gfile.isdir(path):
        return False
    if not path.startswith("ram://"):
        return True
    # TensorFlow's ram:// takes any string prefix of a file's name for a
    # directory (`d/model.ckpt-2` of `d/model.ckpt-2.index`): a real one has
    # something below it, or is listed in its parent (made by `makedirs`).
    path = path.rstrip("/")
    if gfile.glob(escape_glob(path) + "/*"):
        return True
    try:
        return basename(path) in listdir(dirname(path))
    except FileNotFoundError:
        return False


def isfile(path):
    """True when `path` is a file."""
    return exists(path) and not isdir(path)


def makedirs(path):
    """Creates `path` and its parents; an existing directory is fine."""
    path = os.fspath(path)
    if is_remote(path):
        with _standard_errors(path):
            _gfile().makedirs(path)
    else:
        os.makedirs(path, exist_ok=True)


def makedirs_for(path):
    """Creates the directory that file `path` goes in (nothing for a bare file name)."""
    directory = dirname(path)
    if directory and not directory.endswith("://"):
        makedirs(directory)


def listdir(path):
    """The names in directory `path`, sorted.

    Raises:
        FileNotFoundError: `path` is not there.
    """
    path = os.fspath(path)
    if is_remote(path):
        with _standard_errors(path):
            return sorted(name.rstrip("/") for name in _gfile().listdir(path))
    return sorted(os.listdir(path))


def glob(pattern):
    """Paths matching `pattern` (`*`, `?`, `[...]`), sorted."""
    pattern = os.fspath(pattern)
    if is_remote(pattern):
        with _standard_errors(pattern):
            return sorted(_gfile().glob(pattern))
    return sorted(local_glob.glob(pattern))


def escape_glob(path):
    """`path` with its glob characters matched literally."""
    path = os.fspath(path)
    if is_remote(path):
        return "".join(f"[{c}]" if c in "*?[" else c for c in path)
    return local_glob.escape(path)


def getsize(path):
    """The size of file `path` in bytes."""
    path = os.fspath(path)
    if is_remote(path):
        with _standard_errors(path):
            return _gfile().stat(path).length
    return os.path.getsize(path)


def getmtime(path):
    """When file `path` was last modified, in seconds since the epoch."""
    path = os.fspath(path)
    if is_remote(path):
        with _standard_errors(path):
            return _gfile().stat(path).mtime_nsec / 1e9
    return os.path.getmtime(path)


def remove(path, missing_ok=False):
    """Deletes file `path`."""
    path = os.fspath(path)
    try:
        if is_remote(path):
            with _standard_errors(path):
                _gfile().remove(path)
        else:
            os.remove(path)
    except FileNotFoundError:
        if not missing_ok:
            raise


def rmtree(path, missing_ok=True):
    """Deletes directory `path` and everything below it."""
    path = os.fspath(path)
    if missing_ok and not exists(path):
        return
    if path.startswith("ram://"):
        with _standard_errors(path):
            _ram_rmtree(path.rstrip("/"))
    elif is_remote(path):
        with _standard_errors(path):
            _gfile().rmtree(path)
    else:
        shutil.rmtree(path)


def _ram_rmtree(path):
    """`rmtree` on `ram://`, whose own lists a sibling `d.x` as `.x` in `d` (and then fails to delete it)."""
    gfile = _gfile()
    for name in listdir(path):
        child = f"{path}/{name}"
        if isdir(child):
            _ram_rmtree(child)
        elif exists(child):
            gfile.remove(child)
    if gfile.exists(path):
        gfile.remove(path)  # The directory's own entry (ram:// deletes it like a file).


def rename(source, target, overwrite=True):
    """Moves file or directory `source` to `target`.

    Args:
        source: What to move.
        target: Its new name, on the same file system.
        overwrite: Replace an existing file `target`. A directory `target`
            is never replaced unless it is empty (local disks).

    Raises:
        FileExistsError: `target` exists and `overwrite` is False, or it is
            a directory that is not empty.
    """
    source, target = os.fspath(source), os.fspath(target)
    if is_remote(source) or is_remote(target):
        with _standard_errors(target):
            _gfile().rename(source, target, overwrite=overwrite)
        return
    if not overwrite and os.path.lexists(target) and not os.path.isdir(target):
        raise FileExistsError(f"{target}: already exists")
    try:
        os.replace(source, target) if overwrite else os.rename(source, target)
    except OSError as e:
        if isinstance(e, (FileExistsError, IsADirectoryError)) or e.errno in (39, 66):  # ENOTEMPTY
            raise FileExistsError(f"{target}: already exists") from None
        raise


def copy(source, target, overwrite=True):
    """Copies file `source` to `target`, across file systems too."""
    source, target = os.fspath(source), os.fspath(target)
    if is_remote(source) or is_remote(target):
        with _standard_errors(source):
            _make_ram_parents(target)
            _gfile().copy(source, target, overwrite=overwrite)
        return
    if not overwrite and os.path.exists(target):
        raise FileExistsError(f"{target}: already exists")
    shutil.copyfile(source, target)


__all__ = [
    "basename",
    "copy",
    "dirname",
    "escape_glob",
    "exists",
    "getmtime",
    "getsize",
    "glob",
    "is_remote",
    "isdir",
    "isfile",
    "join",
    "listdir",
    "makedirs",
    "makedirs_for",
    "open_file",
    "remove",
    "rename",
    "rmtree",
]
