"""Weights by name: a source that names a release elsewhere, resolved to a
release directory in the cache.

A *source* is what every `from_release`, `--model_dir`, `--init_checkpoint`
and `--teacher_dir` takes (`find_release` resolves it, so every
caller takes every form):

* a release directory, or a checkpoint prefix in one, on the local disk or
  `gs://`/`s3://`: used where it is, as always;
* `hf://ORG/NAME[@REVISION]`, `hf://NAME[@REVISION]` (the Hub's legacy ids
  such as `bert-base-uncased`): a Hugging Face Hub repository at a branch,
  tag or commit (default `main`), fetched through `huggingface_hub`
  (`HF_ENDPOINT`, `HF_TOKEN`) and converted once by `checkpoints.hf` (a
  keras-hub preset kept on the Hub by `kaggle_presets.convert_preset`, as a
  Kaggle one);
* `google:NAME` (google-research/bert's archives) and `https://.../NAME.zip`
  or `.tar.gz` (`#sha256=HEX` checked where given): `checkpoints.archives`;
* `kaggle://OWNER/MODEL/keras/VARIATION[/VERSION]` and keras-hub's preset
  names (`bert_base_en_uncased`, `roberta_base_en`, ...): keras-hub presets
  fetched through its Kaggle loader, `checkpoints.kaggle_presets`.

Only `config.json`, `model.safetensors` (or its shards and their index) and
the tokenizer's files are fetched: never a pickle (`pytorch_model.bin`), never
remote code. The converted release is cached by repository and commit in
`<cache>/releases/hf/<ORG>--<NAME>/<commit>/`, where `<cache>` is
`$KERAS_BERT_IMPL_CACHE` (else `~/.cache/keras_bert_impl`, `pip_assets`'s):

* it is published by one rename once complete, with `source_manifest.json`
  (the sha256 of every file) written before it, so a download or conversion
  killed part way leaves nothing that is taken as complete;
* one process fetches a commit at a time (a `flock` the kernel drops when
  its holder dies); the others wait and then take its copy;
* every use checks the files against the manifest: a changed file is
  refused and the release fetched again;
* `refs/<revision>` records the commit a branch or tag named, so that with
  `HF_HUB_OFFLINE=1`, or when the Hub cannot be reached, the cached copy of
  that revision is used without the network.

Example:
>>> parse_hub_source("hf://google-bert/bert-base-uncased@v1.0")
HubSource(repo_id='google-bert/bert-base-uncased', revision='v1.0')
>>> is_named_source("uncased_L-12_H-768_A-12"), is_named_source("hf://bert-base-uncased")
(False, True)
"""

import dataclasses
import json
import os
import re
import shutil
import sys
import time

from keras_bert_impl.checkpoints.pip_assets import default_cache_dir, file_sha256
from keras_bert_impl.checkpoints.cached_release import (  # noqa: F401 (SourceError: this module's error too)
    MANIFEST_FILE,
    SourceError,
    checked_copy,
    corrupt_files,
    read_manifest,
    write_manifest,
)
from keras_bert_impl.checkpoints.release import find_local_release
from keras_bert_impl.errors import CheckpointError, ConfigError
from keras_bert_impl.io import exclusive_output, write_text_atomically

HF_SCHEME = "hf://"
DEFAULT_ENDPOINT = "https://huggingface.co"
# The model types `checkpoints.hf` converts (`release.TOKENIZER_FILES`' keys).
HUB_MODEL_TYPES = ("bert", "roberta", "albert", "distilbert")
# What a repository's weights may be besides safetensors, named when it has only those.
_OTHER_WEIGHTS = re.compile(r"(\.bin|\.pt|\.pth|\.ckpt\.index|\.h5|\.msgpack|\.onnx|\.gguf|\.pkl|\.keras)$")
# Never fetched from a keras-hub preset's repository: code and pickles.
_NOT_FETCHED = re.compile(r"(\.py|\.pyc|\.bin|\.pt|\.pth|\.pkl|\.pickle|\.msgpack)$")
_REPO_PART = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_HUB_ID = re.compile(rf"^({_REPO_PART}(?:/{_REPO_PART})?)(?:@([^\s@]+))?$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclasses.dataclass(frozen=True)
class HubSource:
    """A Hub repository at a revision.

    Args:
        repo_id: `ORG/NAME`, or a legacy `NAME`.
        revision: A branch, tag or commit sha.
    """

    repo_id: str
    revision: str = "main"

    def __str__(self):
        return f"{HF_SCHEME}{self.repo_id}" + ("" if self.revision == "main" else f"@{self.revision}")


@dataclasses.dataclass(frozen=True)
class CachedRelease:
    """One converted release in the cache.

    Args:
        source: The source it was fetched as (`hf://ORG/NAME@commit`).
        directory: The release directory.
        revisions: The branches or tags last seen naming its commit.
        size: Bytes of its files.
    """

    source: str
    directory: str
    revisions: tuple
    size: int


def is_named_source(path):
    """True for a source that names a release elsewhere (`hf://...`, `google:...`, an archive's URL,
    `kaggle://...`, a keras-hub preset name that is no path here), False for a path.

    Example:
    >>> is_named_source("gs://bucket/release"), is_named_source("hf://roberta-base")
    (False, True)
    >>> is_named_source("kaggle://keras/bert/keras/bert_tiny_en_uncased/2"), is_named_source("bert_tiny_en_uncased")
    (True, True)
    """
    from keras_bert_impl.checkpoints.archives import is_archive_source
    from keras_bert_impl.checkpoints.kaggle_presets import is_kaggle_source, is_preset_name

    return isinstance(path, str) and (path.startswith(HF_SCHEME) or is_archive_source(path)
                                      or is_kaggle_source(path) or is_preset_name(path))


def parse_hub_source(source):
    """The `HubSource` of `hf://ORG/NAME[@REVISION]` or `hf://NAME[@REVISION]`.

    Raises:
        SourceError: not of that form.

    Example:
    >>> parse_hub_source("hf://bert-base-uncased")
    HubSource(repo_id='bert-base-uncased', revision='main')
    >>> parse_hub_source("hf://a/b/c")
    Traceback (most recent call last):
    ...
    keras_bert_impl.checkpoints.cached_release.SourceError: hf://a/b/c: not a Hub repository id; write hf://ORG/NAME[@REVISION] or hf://NAME[@REVISION]
    """
    match = _HUB_ID.match(source[len(HF_SCHEME):]) if source.startswith(HF_SCHEME) else None
    if match is None:
        raise SourceError(f"{source}: not a Hub repository id; write hf://ORG/NAME[@REVISION] or hf://NAME[@REVISION]")
    return HubSource(match.group(1), match.group(2) or "main")


def default_releases_dir():
    """`<cache>/releases`: where named sources are kept (`pip_assets.default_cache_dir()`'s `releases/`)."""
    return os.path.join(default_cache_dir(), "releases")


def resolve_source(path, cache_dir=None, log=None):
    """The release directory of `path`: a named source fetched (or found in the cache), anything else unchanged.

    Args:
        path: A source (module docstring), str or path-like.
        cache_dir: Root of the named sources' cache (default `default_releases_dir()`).
        log: `log(line)` for what is fetched and converted (default: stderr).

    Returns:
        `path` itself, or the cached release directory of a named source.

    Raises:
        SourceError: a named source that cannot be had (one line says why).
    """
    if not is_named_source(path):
        return path
    if path.startswith(HF_SCHEME):
        return fetch_hub_release(parse_hub_source(path), cache_dir, log)
    from keras_bert_impl.checkpoints.archives import is_archive_source

    root, log = os.fspath(cache_dir or default_releases_dir()), log or _stderr_log
    if is_archive_source(path):
        from keras_bert_impl.checkpoints.archives import fetch_archive_release

        return fetch_archive_release(path, root, log)
    from keras_bert_impl.checkpoints.kaggle_presets import fetch_kaggle_release

    return fetch_kaggle_release(path, root, log)


def find_release(path, cache_dir=None, log=None):
    """The `release.ReleaseFiles` of `path`: a release directory or checkpoint prefix in one, or a named source
    fetched into the cache once (`resolve_source`).

    Args:
        path: A source (module docstring).
        cache_dir: As for `resolve_source`.
        log: As for `resolve_source`.

    Raises:
        CheckpointError: no config, vocabulary or checkpoint there; a named
            source that cannot be had (`SourceError`).
    """
    return find_local_release(resolve_source(path, cache_dir, log))


# -- the cache ------------------------------------------------------------


def _repo_dir(root, repo_id):
    return os.path.join(root, "hf", repo_id.replace("/", "--"))


def _ref_path(repo_dir, revision):
    return os.path.join(repo_dir, "refs", revision.replace("/", "%2F"))


def _cached_commit(repo_dir, revision):
    """The commit `revision` named when last fetched (itself for a commit sha), or None."""
    if _COMMIT.match(revision):
        return revision
    try:
        with open(_ref_path(repo_dir, revision), encoding="ascii") as f:
            commit = f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return commit if _COMMIT.match(commit) else None


def list_cached_releases(cache_dir=None):
    """The converted releases in the cache, as `CachedRelease`s sorted by source.

    Example:
    >>> import tempfile
    >>> list_cached_releases(tempfile.mkdtemp())
    []
    """
    root = os.fspath(cache_dir or default_releases_dir())
    found = []
    hub_root = os.path.join(root, "hf")
    for repo_name in sorted(os.listdir(hub_root)) if os.path.isdir(hub_root) else ():
        repo_dir = os.path.join(hub_root, repo_name)
        refs_dir = os.path.join(repo_dir, "refs")
        refs = {}
        for ref in sorted(os.listdir(refs_dir)) if os.path.isdir(refs_dir) else ():
            refs.setdefault(_cached_commit(repo_dir, ref.replace("%2F", "/")), []).append(ref.replace("%2F", "/"))
        for commit in sorted(os.listdir(repo_dir)):
            directory = os.path.join(repo_dir, commit)
            manifest = read_manifest(directory) if _COMMIT.match(commit) else None
            if manifest is None:
                continue
            size = _size(directory)
            source = f"{HF_SCHEME}{manifest.get('repository', repo_name.replace('--', '/'))}@{commit}"
            found.append(CachedRelease(source, directory, tuple(refs.get(commit, ())), size))
    archives_root = os.path.join(root, "archives")
    for name in sorted(os.listdir(archives_root)) if os.path.isdir(archives_root) else ():
        directory = os.path.join(archives_root, name)
        manifest = None if name.startswith(".") else read_manifest(directory)
        if manifest is not None:
            found.append(CachedRelease(manifest.get("source", name), directory, (), _size(directory)))
    kaggle_root = os.path.join(root, "kaggle")
    for name in sorted(os.listdir(kaggle_root)) if os.path.isdir(kaggle_root) else ():
        versions_dir = os.path.join(kaggle_root, name)
        latest = _read_ref(os.path.join(versions_dir, "refs", "latest"))
        for version in sorted(os.listdir(versions_dir)) if os.path.isdir(versions_dir) else ():
            manifest = read_manifest(os.path.join(versions_dir, version)) if version.isdigit() else None
            if manifest is not None:
                found.append(CachedRelease(manifest.get("source", f"{name}/{version}"),
                                           os.path.join(versions_dir, version), ("latest",) if latest == version else (),
                                           _size(os.path.join(versions_dir, version))))
    return sorted(found, key=lambda release: release.source)


def _read_ref(path):
    try:
        with open(path, encoding="ascii") as f:
            return f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _size(directory):
    return sum(os.path.getsize(os.path.join(directory, name)) for name in os.listdir(directory)
               if os.path.isfile(os.path.join(directory, name)))


def remove_cached_release(source, cache_dir=None):
    """Removes the cached copies of `source` (`hf://ORG/NAME`: every commit; `@REVISION`: that one; a Kaggle
    handle without a version: every version; an archive, a preset name: its one copy).

    Returns:
        The directories removed.

    Raises:
        SourceError: `source` is not a named source.

    Example:
    >>> import tempfile
    >>> remove_cached_release("hf://bert-base-uncased", tempfile.mkdtemp())
    []
    """
    if not is_named_source(source):
        raise SourceError(f"{source}: not a named source (hf://ORG/NAME[@REVISION], google:NAME, an archive's URL, "
                          "kaggle://OWNER/MODEL/keras/VARIATION[/VERSION], a keras-hub preset name)")
    from keras_bert_impl.checkpoints.archives import is_archive_source

    if not source.startswith(HF_SCHEME) and not is_archive_source(source):
        from keras_bert_impl.checkpoints.kaggle_presets import remove_cached_kaggle_release

        return remove_cached_kaggle_release(source, os.fspath(cache_dir or default_releases_dir()))
    if not source.startswith(HF_SCHEME):
        removed = [release.directory for release in list_cached_releases(cache_dir) if release.source == source]
        for directory in removed:
            shutil.rmtree(directory)
        return removed
    hub = parse_hub_source(source)
    repo_dir = _repo_dir(os.fspath(cache_dir or default_releases_dir()), hub.repo_id)
    if not os.path.isdir(repo_dir):
        return []
    whole = "@" not in source[len(HF_SCHEME):]
    with exclusive_output(repo_dir, wait=True):
        if whole:
            shutil.rmtree(repo_dir)
            return [repo_dir]
        commit = _cached_commit(repo_dir, hub.revision)
        directory = os.path.join(repo_dir, commit) if commit else None
        if directory is None or not os.path.isdir(directory):
            return []
        shutil.rmtree(directory)
        return [directory]


# -- the Hub ----------------------------------------------------------------


def _offline():
    """`HF_HUB_OFFLINE` as huggingface_hub reads it, but read on every call."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().upper() in ("1", "ON", "YES", "TRUE")


def _endpoint():
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def _stderr_log(line):
    print(line, file=sys.stderr)


class _ProgressBars:
    """huggingface_hub's progress bars only where stderr is a terminal (restored on leaving)."""

    def __enter__(self):
        from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars

        self.were_disabled = are_progress_bars_disabled()
        if not sys.stderr.isatty():
            disable_progress_bars()
        return self

    def __exit__(self, *exc):
        from huggingface_hub.utils import enable_progress_bars

        if not self.were_disabled:
            enable_progress_bars()


def _hub_error(error, hub, endpoint):
    """One line for a huggingface_hub error of `hub` where it is about the source; None for the network's."""
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    if isinstance(error, GatedRepoError):
        return (f"{hub}: a gated repository on {endpoint}: accept its terms on the Hub and set HF_TOKEN to a token "
                "of that account")
    if isinstance(error, RepositoryNotFoundError):
        return f"{hub}: no repository {hub.repo_id} on {endpoint} (a private one needs HF_TOKEN)"
    if isinstance(error, RevisionNotFoundError):
        return f"{hub}: {hub.repo_id} has no revision {hub.revision!r} on {endpoint}"
    return None


def _first_line(error):
    """What went wrong, in a line: the HTTP status and URL where a response (or one it was caused by) says it."""
    cause = error
    while cause is not None:
        response = getattr(cause, "response", None)
        if getattr(response, "status_code", None):
            return f"HTTP {response.status_code} from {getattr(response, 'url', '')}".strip()
        cause = cause.__cause__ or cause.__context__
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def _repository_files(hub, info):
    """`(names to fetch, {name: lfs sha256})` of a repository's listing, or a SourceError naming what it lacks."""
    names = {sibling.rfilename: sibling for sibling in info.siblings or ()}
    if "config.json" not in names:
        raise SourceError(f"{hub}: has no config.json, so it is no transformers model "
                          f"(it has {', '.join(sorted(names)) or 'no files'})")
    if "model.weights.h5" in names and "model.safetensors" not in names:
        # A keras-hub preset (config.json names its backbone class): its files but code and pickles.
        wanted = sorted(name for name in names if not _NOT_FETCHED.search(name))
        return wanted, {name: names[name].lfs.sha256 for name in wanted if names[name].lfs is not None}
    if "model.safetensors" in names:
        weights = ["model.safetensors"]
    elif "model.safetensors.index.json" in names:
        weights = ["model.safetensors.index.json"] + sorted(
            name for name in names if re.fullmatch(r"model-\d+-of-\d+\.safetensors", name))
    else:
        others = sorted(name for name in names if _OTHER_WEIGHTS.search(name))
        raise SourceError(f"{hub}: has no model.safetensors (its weights: {', '.join(others) or 'none'}); "
                          "pickled weights such as pytorch_model.bin are not loaded")
    from keras_bert_impl.checkpoints.release import TOKENIZER_EXTRAS, TOKENIZER_FILES

    tokenizer = sorted({name for files in TOKENIZER_FILES.values() for name in files} | set(TOKENIZER_EXTRAS))
    wanted = ["config.json"] + weights + [name for name in tokenizer if name in names]
    digests = {name: names[name].lfs.sha256 for name in wanted if names[name].lfs is not None}
    return wanted, digests


def _is_keras_hub_preset(config_path):
    """Whether `config.json` is a keras-hub preset's (a backbone class and its module), not transformers'."""
    with open(config_path, encoding="utf-8") as f:
        values = json.load(f)
    return isinstance(values, dict) and "keras_hub" in str(values.get("module", ""))


def _check_model_type(hub, config_path):
    try:
        with open(config_path, encoding="utf-8") as f:
            values = json.load(f)
        model_type = values.get("model_type", "bert")
    except (OSError, ValueError, AttributeError) as e:
        raise SourceError(f"{hub}: its config.json cannot be read ({e})") from None
    if _is_keras_hub_preset(config_path):
        from keras_bert_impl.checkpoints.kaggle_presets import check_preset_config

        check_preset_config(hub, values)
        return
    if model_type not in HUB_MODEL_TYPES:
        raise SourceError(f"{hub}: model_type {model_type!r} is not one we compute "
                          f"({', '.join(HUB_MODEL_TYPES)})")


def _check_digests(hub, directory, digests):
    """Refuses a downloaded file whose sha256 is not the one the Hub lists (and removes it)."""
    for name, expected in digests.items():
        path = os.path.join(directory, name)
        actual = file_sha256(path)
        if actual != expected:
            os.remove(path)
            raise SourceError(f"{hub}: the downloaded {name} has sha256 {actual}, not the {expected} the Hub lists; "
                              "nothing was cached (run again to download it anew)")


def _merge_shards(directory):
    """Writes the shards of `model.safetensors.index.json` as one `model.safetensors` (what the converter reads)."""
    from keras_bert_impl.checkpoints.hf import read_safetensors

    index_path = os.path.join(directory, "model.safetensors.index.json")
    if not os.path.exists(index_path):
        return
    with open(index_path, encoding="utf-8") as f:
        shards = sorted(set(json.load(f)["weight_map"].values()))
    tensors = {}
    for shard in shards:
        tensors.update(read_safetensors(os.path.join(directory, shard)))
    write_safetensors(tensors, os.path.join(directory, "model.safetensors"))


_SAFETENSORS_NAMES = {"float64": "F64", "float32": "F32", "float16": "F16", "int64": "I64", "int32": "I32",
                      "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL"}


def write_safetensors(tensors, path):
    """Writes `{name: numpy array}` as a safetensors file (an 8-byte header length, the JSON header, the data).

    Example:
    >>> import os, tempfile, numpy as np
    >>> from keras_bert_impl.checkpoints.hf import read_safetensors
    >>> path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
    >>> write_safetensors({"a": np.arange(3, dtype="float32")}, path)
    >>> read_safetensors(path)["a"].tolist()
    [0.0, 1.0, 2.0]
    """
    import numpy as np

    header, offset, arrays = {}, 0, []
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name])
        size = array.nbytes
        header[name] = {"dtype": _SAFETENSORS_NAMES[array.dtype.name], "shape": list(array.shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
        arrays.append(array)
    encoded = json.dumps(header, separators=(",", ":")).encode("utf-8")
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as f:
        f.write(len(encoded).to_bytes(8, "little"))
        f.write(encoded)
        for array in arrays:
            f.write(array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes())


def _convert(hub, download_dir, release_dir, log):
    """Converts the downloaded HF directory into a release (`checkpoints.hf`, as `bert-convert-hf` does)."""
    from keras_bert_impl.checkpoints.hf import classifier_release_files, load_hf_model, write_converted_release

    if _is_keras_hub_preset(os.path.join(download_dir, "config.json")):
        from keras_bert_impl.checkpoints.kaggle_presets import convert_preset

        return convert_preset(hub, download_dir, release_dir, log)  # keras-hub's loader: the [keras-hub] extra
    try:
        loaded = load_hf_model(download_dir)
    except (ConfigError, CheckpointError) as e:
        raise SourceError(f"{hub}: {str(e).replace(download_dir, 'the repository')}") from None
    if loaded.absent:
        log(f"{hub}: not in its weights, so not in the release: {', '.join(loaded.absent)}")
    if loaded.unconverted:
        log(f"{hub}: {len(loaded.unconverted)} tensors with no place in the original layout, not converted: "
            f"{', '.join(loaded.unconverted)}")
    if loaded.labels is not None:
        kind = "multi-label classifier" if loaded.multi_label else "sequence classifier"
        log(f"{hub}: a {kind} of {len(loaded.labels)} labels: {', '.join(loaded.labels)}")
    write_converted_release(loaded.model, loaded.config, download_dir, release_dir, loaded.absent,
                            classifier_release_files(loaded))
    return loaded.config


def _download(hub, commit, names, digests, download_dir, endpoint, token):
    from huggingface_hub import hf_hub_download, snapshot_download

    with _ProgressBars():
        config = hf_hub_download(hub.repo_id, "config.json", revision=commit, local_dir=download_dir,
                                 endpoint=endpoint, token=token)
        _check_model_type(hub, config)
        snapshot_download(hub.repo_id, revision=commit, allow_patterns=names, local_dir=download_dir,
                          endpoint=endpoint, token=token, max_workers=4)
    missing = [name for name in names if not os.path.isfile(os.path.join(download_dir, name))]
    if missing:
        raise SourceError(f"{hub}: the download lacks {', '.join(missing)}")
    _check_digests(hub, download_dir, digests)
    _merge_shards(download_dir)


def fetch_hub_release(hub, cache_dir=None, log=None):
    """The cached release of a Hub repository at a revision, fetched and converted where there is none.

    Args:
        hub: A `HubSource`.
        cache_dir: Root of the named sources' cache (default `default_releases_dir()`).
        log: `log(line)` for what is fetched and converted (default: stderr).

    Returns:
        The release directory (`<cache>/hf/<ORG>--<NAME>/<commit>`).

    Raises:
        SourceError: an unknown repository or revision, one without
            `model.safetensors`, a model type we do not compute, or no
            network (or `HF_HUB_OFFLINE=1`) and no cached copy.
    """
    log = log or _stderr_log
    root = os.fspath(cache_dir or default_releases_dir())
    repo_dir = _repo_dir(root, hub.repo_id)
    endpoint = _endpoint()
    commit = _cached_commit(repo_dir, hub.revision)
    if _COMMIT.match(hub.revision) and checked_copy(os.path.join(repo_dir, commit), log):
        return os.path.join(repo_dir, commit)  # A commit never changes: no need to ask the Hub.
    if _offline():
        cached = commit and checked_copy(os.path.join(repo_dir, commit), log)
        if not cached:
            raise SourceError(f"{hub}: HF_HUB_OFFLINE is set and the cache ({root}) holds no good copy of it; "
                              "load it once online")
        return cached
    from huggingface_hub import HfApi

    token = os.environ.get("HF_TOKEN") or None
    try:
        info = HfApi(endpoint=endpoint, token=token).model_info(hub.repo_id, revision=hub.revision,
                                                                files_metadata=True)
    except Exception as error:  # noqa: BLE001: the client's errors differ by its version and transport
        message = _hub_error(error, hub, endpoint)
        if message is not None:
            raise SourceError(message) from None
        cached = commit and checked_copy(os.path.join(repo_dir, commit), log)
        if not cached:
            raise SourceError(f"{hub}: cannot reach {endpoint} ({_first_line(error)}) and the cache ({root}) holds "
                              "no copy of it") from None
        log(f"{hub}: cannot reach {endpoint} ({_first_line(error)}): using the cached copy of commit {commit}")
        return cached
    commit = info.sha
    release_dir = os.path.join(repo_dir, commit)
    os.makedirs(os.path.join(repo_dir, "refs"), exist_ok=True)
    with exclusive_output(release_dir, wait=True):  # One process fetches a commit; the others then take its copy.
        if not checked_copy(release_dir, log):
            _fetch(hub, commit, info, repo_dir, release_dir, endpoint, token, log)
        if not _COMMIT.match(hub.revision):
            write_text_atomically(_ref_path(repo_dir, hub.revision), commit + "\n")
    return release_dir


def _fetch(hub, commit, info, repo_dir, release_dir, endpoint, token, log):
    """Downloads, converts and publishes `release_dir` (the caller holds its lock)."""
    names, digests = _repository_files(hub, info)
    # Fixed names under the lock: a killed download resumes from its partial
    # files; a killed conversion is started over.
    download_dir = os.path.join(repo_dir, f".download-{commit}")
    convert_dir = os.path.join(repo_dir, f".convert-{commit}")
    shutil.rmtree(convert_dir, ignore_errors=True)
    start = time.perf_counter()
    log(f"{hub}: fetching {', '.join(names)} of commit {commit} from {endpoint}")
    try:
        _download(hub, commit, names, digests, download_dir, endpoint, token)
    except SourceError:
        raise
    except Exception as error:  # noqa: BLE001: the client's errors differ by its version and transport
        message = _hub_error(error, hub, endpoint) or f"{hub}: download from {endpoint} failed ({_first_line(error)})"
        raise SourceError(f"{message}; nothing was cached") from None
    config = _convert(hub, download_dir, convert_dir, log)
    write_manifest(convert_dir, {"source": str(hub), "repository": hub.repo_id, "revision": hub.revision,
                                  "commit": commit, "endpoint": endpoint})
    shutil.rmtree(release_dir, ignore_errors=True)  # A corrupt copy, found under the lock.
    os.replace(convert_dir, release_dir)  # Published whole, or not at all.
    shutil.rmtree(download_dir, ignore_errors=True)
    log(f"{hub}: {config.model_type}, {config.num_hidden_layers} layers, hidden {config.hidden_size}: converted into "
        f"{release_dir} in {time.perf_counter() - start:.1f}s")
