"""The small file helpers every module shares.

* Atomic outputs: a file appears under its final name only when complete.
  Every writer goes through `temporary_path`, so partial files have one name
  style (`<path>.partial-<pid>-<hex>`), unique per writer, which a reader
  never mistakes for a finished file and `remove_partials` can clean up
  after a killed writer.
* UTF-8 line reading whose errors name `file:line` (line by line, or in
  blocks of whole lines for corpora).
* `key = value` result files (the original's `eval_results.txt`).
* The check that a sequence length fits the model's position embeddings.
* The check that an output directory flag names a place a directory can be.
* `exclusive_output`: one writer at a time for an output (a lock the kernel
  drops when its holder dies).

Example:
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "eval_results.txt")
>>> write_results(path, {"loss": 0.5, "global_step": 3})
>>> open(path).read()
'global_step = 3\\nloss = 0.5\\n'
>>> [line for line in read_utf8_lines(path)]
[(1, 'global_step = 3\\n'), (2, 'loss = 0.5\\n')]
"""

import contextlib
import os
import uuid

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; outputs are not locked there.
    fcntl = None

from keras_bert_impl import filesystem
from keras_bert_impl.errors import ConfigError, InputFileError, OutputPathError

PARTIAL_MARK = ".partial-"


def temporary_path(path):
    """Where `path` is written until it is complete; unique to this writer."""
    return f"{os.fspath(path)}{PARTIAL_MARK}{os.getpid()}-{uuid.uuid4().hex[:8]}"


def remove_partials(path):
    """Deletes what writers of `path` left behind when they were killed."""
    for leftover in filesystem.glob(filesystem.escape_glob(path) + PARTIAL_MARK + "*"):
        filesystem.remove(leftover, missing_ok=True)


def lock_path(path):
    """The lock file of output `path`: hidden beside it (`.name.lock`), so no
    glob of the outputs (`name*`) lists it."""
    path = os.path.abspath(os.fspath(path))
    return os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.lock")


@contextlib.contextmanager
def exclusive_output(path, wait=False):
    """Runs the block as the only writer of `path` (and the files named after it).

    The lock is an advisory `flock` on `lock_path(path)`, which the kernel
    releases when its holder exits, however it exits: a run killed with -9
    leaves no stale lock. Remote outputs (gs://...) are not locked.

    Args:
        path: The output.
        wait: Wait for another holder to leave (a cache entry that one
            process writes while the others wait to read it) instead of
            refusing.

    Raises:
        OutputPathError: another live process holds the lock (its pid named)
            and `wait` is false.

    Example:
    >>> import tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "data.tfrecord")
    >>> with exclusive_output(path):
    ...     with exclusive_output(path):
    ...         pass
    Traceback (most recent call last):
    ...
    keras_bert_impl.errors.OutputPathError: ...: another run (pid ...) is writing it; wait for it to end or choose another output
    """
    if fcntl is None or filesystem.is_remote(os.fspath(path)):
        yield
        return
    lock = lock_path(path)
    os.makedirs(os.path.dirname(lock), exist_ok=True)
    while True:
        fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise OutputPathError(
                f"{path}: another run (pid {holder}) is writing it; wait for it to end or choose another output"
            ) from None
        # The last holder unlinks the file on leaving: a lock taken on the
        # unlinked file would not exclude a process that creates a new one.
        try:
            current = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            current = False
        if current:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)
        os.close(fd)


@contextlib.contextmanager
def atomic_output(path):
    """Yields a temporary path to write; renames it to `path` on success.

    On an exception the temporary file is removed and `path` is untouched.

    Example:
    >>> import os, tempfile
    >>> target = os.path.join(tempfile.mkdtemp(), "out.txt")
    >>> with atomic_output(target) as partial:
    ...     _ = open(partial, "w").write("done\\n")
    >>> open(target).read()
    'done\\n'
    """
    partial = temporary_path(path)
    try:
        yield partial
        filesystem.rename(partial, path)
    finally:
        if filesystem.exists(partial):
            filesystem.remove(partial, missing_ok=True)


def write_text_atomically(path, text):
    """Writes `text` (UTF-8, `\\n` newlines) to `path` atomically."""
    with atomic_output(path) as partial:
        with filesystem.open_file(partial, "w", newline="") as f:
            f.write(text)


def write_bytes_atomically(path, data):
    """Writes `data` to `path` atomically."""
    with atomic_output(path) as partial:
        with filesystem.open_file(partial, "wb") as f:
            f.write(data)


def copy_atomically(source, target):
    """Copies `source` to `target` atomically; copying a file onto itself does nothing."""
    if not filesystem.is_remote(source) and not filesystem.is_remote(target):
        if os.path.abspath(source) == os.path.abspath(target):
            return
    elif os.fspath(source) == os.fspath(target):
        return
    with atomic_output(target) as partial:
        filesystem.copy(source, partial)


def read_utf8_lines(path, kind="input file"):
    """Yields `(line_number, text)` of a UTF-8 file (a BOM on line 1 is dropped).

    Args:
        path: The file.
        kind: What the file is, for the not-found message ("data file").

    Raises:
        InputFileError: missing file, a directory, or invalid UTF-8; the
            message names `path:line` and the offending byte.
    """
    try:
        with filesystem.open_file(path, "rb") as f:
            for line_number, raw in enumerate(f, start=1):
                try:
                    text = raw.decode("utf-8-sig" if line_number == 1 else "utf-8")
                except UnicodeDecodeError as e:
                    raise InputFileError(
                        f"{path}:{line_number}: not valid UTF-8 (byte {e.start}: {raw[e.start:e.start + 1]!r})"
                    ) from None
                yield line_number, text
    except FileNotFoundError:
        raise InputFileError(f"{path}: {kind} not found") from None
    except IsADirectoryError:
        raise InputFileError(f"{path}: is a directory, expected a {kind}") from None


def read_utf8_blocks(path, block_bytes=1 << 22, kind="input file"):
    """Yields `(first_line_number, text)` of a UTF-8 file in blocks of whole lines.

    For corpora read at speed: each block of about `block_bytes` (more where
    a line is longer) is decoded at once, with the errors of `read_utf8_lines`.

    Args:
        path: The file (local, or a `tf.io.gfile` URL).
        block_bytes: Bytes read at a time.
        kind: What the file is, for the not-found message.

    Raises:
        InputFileError: missing file, a directory, or invalid UTF-8; the
            message names `path:line` and the offending byte.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "corpus.txt")
    >>> _ = open(path, "wb").write("\\ufeffone\\ntwo\\nthree".encode("utf-8"))
    >>> list(read_utf8_blocks(path, block_bytes=5))
    [(1, 'one\\n'), (2, 'two\\n'), (3, 'three')]
    >>> _ = open(path, "wb").write(b"fine\\nbad \\xff here\\n")
    >>> list(read_utf8_blocks(path))
    Traceback (most recent call last):
    ...
    keras_bert_impl.errors.InputFileError: ...corpus.txt:2: not valid UTF-8 (byte 4: b'\\xff')
    """
    line_number, carry = 1, b""
    try:
        with filesystem.open_file(path, "rb") as f:
            while True:
                chunk = f.read(block_bytes)
                data = carry + chunk
                if chunk:
                    cut = data.rfind(b"\n") + 1
                    if cut == 0:  # No line ends yet: read on.
                        carry = data
                        continue
                    data, carry = data[:cut], data[cut:]
                elif not data:
                    return
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError as e:
                    bad_line = line_number + data.count(b"\n", 0, e.start)
                    line_start = data.rfind(b"\n", 0, e.start) + 1
                    raise InputFileError(
                        f"{path}:{bad_line}: not valid UTF-8 (byte {e.start - line_start}: {data[e.start:e.start + 1]!r})"
                    ) from None
                if line_number == 1 and text.startswith("\ufeff"):
                    text = text[1:]
                yield line_number, text
                line_number += data.count(b"\n")
                if not chunk:
                    return
    except FileNotFoundError:
        raise InputFileError(f"{path}: {kind} not found") from None
    except IsADirectoryError:
        raise InputFileError(f"{path}: is a directory, expected a {kind}") from None


def format_results(results, format_value=str):
    """`key = value` lines sorted by key, as the original's `eval_results.txt`."""
    return "".join(f"{key} = {format_value(results[key])}\n" for key in sorted(results))


def write_results(path, results, format_value=str):
    """Writes `format_results(results, format_value)` to `path` atomically."""
    write_text_atomically(path, format_results(results, format_value))


def check_max_seq_length(max_seq_length, config, config_file="bert_config.json"):
    """Raises unless `max_seq_length` fits `config.max_sequence_length` (`max_position_embeddings`
    less RoBERTa's `position_offset`).

    Raises:
        ConfigError: naming the config file and both numbers.
    """
    if max_seq_length > config.max_sequence_length:
        if config.position_offset:  # RoBERTa: 514 rows, two of them before the first position
            raise ConfigError(
                f"--max_seq_length {max_seq_length} exceeds the model's longest sequence {config.max_sequence_length} "
                f"(max_position_embeddings {config.max_position_embeddings} less position_offset "
                f"{config.position_offset}) of {config_file}"
            )
        raise ConfigError(
            f"--max_seq_length {max_seq_length} exceeds max_position_embeddings "
            f"{config.max_position_embeddings} of {config_file}"
        )


def check_output_dir(path, flag):
    """Raises unless `path` is, or can be made, a directory.

    Called on an output directory flag before any work, so that a path that
    is a file, or lies below one, is named with its flag instead of failing
    later with a bare "File exists" or "Not a directory". Of a remote path
    (`gs://...`) only the path itself is checked: object stores have no
    files that directories lie below.

    Args:
        path: The flag's value.
        flag: The flag's name as the user typed it, e.g. `"--export_dir"`.

    Raises:
        OutputPathError: naming the flag, the path and the file in the way.

    Example:
    >>> import os, tempfile
    >>> a_file = os.path.join(tempfile.mkdtemp(), "notes.txt")
    >>> _ = open(a_file, "w").write("x")
    >>> check_output_dir(os.path.join(a_file, "sentiment"), "--export_dir")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    keras_bert_impl.errors.OutputPathError: --export_dir .../notes.txt/sentiment: .../notes.txt is a file, not a directory
    """
    path = os.fspath(path)
    if filesystem.is_remote(path):
        if filesystem.exists(path) and not filesystem.isdir(path):
            raise OutputPathError(f"{flag} {path}: is a file, not a directory")
        return
    absolute = os.path.abspath(path)
    if os.path.exists(absolute) and not os.path.isdir(absolute):
        raise OutputPathError(f"{flag} {path}: is a file, not a directory")
    parent = os.path.dirname(absolute)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise OutputPathError(f"{flag} {path}: {parent} is a file, not a directory")


__all__ = [
    "atomic_output",
    "check_max_seq_length",
    "check_output_dir",
    "copy_atomically",
    "format_results",
    "read_utf8_blocks",
    "read_utf8_lines",
    "remove_partials",
    "temporary_path",
    "write_bytes_atomically",
    "write_results",
    "write_text_atomically",
]
