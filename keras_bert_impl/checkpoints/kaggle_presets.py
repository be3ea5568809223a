"""keras-hub presets by name: Kaggle handles (`kaggle://OWNER/MODEL/keras/VARIATION[/VERSION]`) and the bare
preset names keras-hub accepts (`bert_base_en_uncased`, `roberta_base_en`, `albert_base_en_uncased`,
`distil_bert_base_en_uncased`, ...), fetched and converted once into the cache.

A bare name is looked up in keras-hub's own preset registry (the `presets`
of its `BertBackbone`, `RobertaBackbone`, `AlbertBackbone` and
`DistilBertBackbone`), which gives its Kaggle handle at a version; a name of
another keras-hub model is refused there, before anything is fetched. A
handle is fetched through `kagglehub`, keras-hub's own Kaggle loader (the
`[keras-hub]` extra; `KAGGLE_USERNAME`/`KAGGLE_KEY` or `KAGGLE_API_TOKEN`
for private or gated models): first `config.json` alone, whose backbone
class is checked, then every file of that version into the cache, converted
by `keras_hub_variants.preset_to_release` (keras-hub's loader reads the
preset) and published as `sources` publishes a Hub release:
`<cache>/releases/kaggle/<OWNER>--<MODEL>--<FRAMEWORK>--<VARIATION>/<VERSION>/`,
by one rename, with `source_manifest.json`, under a lock. A handle without
a version asks Kaggle for the newest one and records it in `refs/latest`;
when Kaggle cannot be reached, the copy that `refs/latest` names is used. A
version never changes, so a cached handle with a version (every bare name's)
is used without the network.

Example:
>>> parse_kaggle_source("kaggle://keras/bert/keras/bert_base_en_uncased/3")
KaggleHandle(owner='keras', model='bert', framework='keras', variation='bert_base_en_uncased', version=3)
>>> str(parse_kaggle_source("kaggle://keras/bert/keras/bert_tiny_en_uncased"))
'kaggle://keras/bert/keras/bert_tiny_en_uncased'
>>> is_preset_name("bert_base_en_uncased"), is_preset_name("runs/release"), is_preset_name("bert_model.ckpt")
(True, False, False)
"""

import contextlib
import dataclasses
import difflib
import importlib.util
import io
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import time

from keras_bert_impl import extras
from keras_bert_impl.checkpoints.cached_release import SourceError, checked_copy, write_manifest
from keras_bert_impl.errors import CheckpointError, ConfigError
from keras_bert_impl.io import exclusive_output, write_text_atomically

KAGGLE_SCHEME = "kaggle://"
# The preset names of the models we compute: lower-case words joined by `_` (`bert_base_en_uncased`); no `.`,
# so a checkpoint prefix such as `bert_model.ckpt` is never taken for one.
_PRESET_NAME = re.compile(r"^[a-z0-9]+(?:_[a-z0-9]+)+$")
_SLUG = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
_HANDLE = re.compile(rf"^({_SLUG})/({_SLUG})/({_SLUG})/({_SLUG})(?:/(\d+))?$")
_LATEST = "latest"


@dataclasses.dataclass(frozen=True)
class KaggleHandle:
    """A model variation on Kaggle, at a version (None: the newest).

    Args:
        owner, model, framework, variation: The handle's parts.
        version: A version number, or None.
    """

    owner: str
    model: str
    framework: str
    variation: str
    version: int = None

    def __str__(self):
        version = "" if self.version is None else f"/{self.version}"
        return f"{KAGGLE_SCHEME}{self.owner}/{self.model}/{self.framework}/{self.variation}{version}"

    def kagglehub_handle(self):
        """The handle as `kagglehub` writes it (no scheme)."""
        return str(self)[len(KAGGLE_SCHEME):]

    def cache_key(self):
        """The directory name of its versions in the cache."""
        return "--".join((self.owner, self.model, self.framework, self.variation))


def is_kaggle_source(source):
    """True for `kaggle://...`."""
    return isinstance(source, str) and source.startswith(KAGGLE_SCHEME)


def is_preset_name(source):
    """True for what may be one of keras-hub's preset names: a bare lower-case name that is no existing path
    (nor checkpoint prefix). Whether keras-hub has it is `preset_handle`'s to say.
    """
    return (isinstance(source, str) and bool(_PRESET_NAME.match(source)) and not os.path.exists(source)
            and not os.path.exists(source + ".index"))


def parse_kaggle_source(source):
    """The `KaggleHandle` of `kaggle://OWNER/MODEL/keras/VARIATION[/VERSION]`.

    Raises:
        SourceError: not of that form, or of another framework than keras-hub's.

    Example:
    >>> parse_kaggle_source("kaggle://keras/bert/tensorFlow2/en-uncased/1")
    Traceback (most recent call last):
    ...
    keras_bert_impl.checkpoints.cached_release.SourceError: kaggle://keras/bert/tensorFlow2/en-uncased/1: a tensorFlow2 model, not a keras-hub preset; write kaggle://OWNER/MODEL/keras/VARIATION[/VERSION]
    """
    match = _HANDLE.match(source[len(KAGGLE_SCHEME):]) if is_kaggle_source(source) else None
    if match is None or (match.group(5) is not None and int(match.group(5)) == 0):
        raise SourceError(f"{source}: not a Kaggle model handle; write kaggle://OWNER/MODEL/keras/VARIATION[/VERSION] "
                          "(VERSION a number from 1)")
    owner, model, framework, variation, version = match.groups()
    if framework.lower() != "keras":
        raise SourceError(f"{source}: a {framework} model, not a keras-hub preset; "
                          "write kaggle://OWNER/MODEL/keras/VARIATION[/VERSION]")
    return KaggleHandle(owner, model, framework.lower(), variation, None if version is None else int(version))


def _keras_hub(needed_by):
    return extras.import_extra("keras_hub", "keras-hub", needed_by)


def our_backbones():
    """keras-hub's backbone class names whose presets we compute: BERT's and `keras_hub_variant_table`'s."""
    from keras_bert_impl.checkpoints.keras_hub_variant_table import KERAS_HUB_VARIANTS  # Data: no TensorFlow.

    return ("BertBackbone",) + tuple(variant.backbone for variant in KERAS_HUB_VARIANTS.values())


def preset_handle(name):
    """The Kaggle handle of one of keras-hub's preset names of a model we compute.

    Returns:
        A `KaggleHandle` (at the version keras-hub's registry names).

    Raises:
        SourceError: keras-hub has no such preset, it is another model's, or
            keras-hub is not installed.
    """
    if importlib.util.find_spec("keras_hub") is None:
        raise SourceError(f"{name}: no such file or directory (as one of keras-hub's preset names, it needs the "
                          "[keras-hub] extra: pip install 'keras_bert_impl[keras-hub]')")
    keras_hub = _keras_hub(name)
    ours = {}
    for backbone in our_backbones():
        ours.update(getattr(keras_hub.models, backbone).presets)
    every = keras_hub.models.Backbone.presets
    if name in ours:
        return parse_kaggle_source(ours[name]["kaggle_handle"])
    if name in every:
        family = every[name].get("metadata", {}).get("path", "another model")
        raise SourceError(f"{name}: a keras-hub preset of {family} ({every[name]['kaggle_handle']}), not a model we "
                          "compute (keras-hub's BERT, RoBERTa, ALBERT and DistilBERT presets)")
    close = difflib.get_close_matches(name, sorted(ours), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else f" ({', '.join(sorted(ours)[:4])}, ...)"
    raise SourceError(f"{name}: no such file or directory, and not one of keras-hub's BERT, RoBERTa, ALBERT or "
                      f"DistilBERT preset names{hint}")


def check_preset_config(source, values):
    """Refuses a preset's `config.json` (its parsed dict) whose backbone is not one we compute.

    Raises:
        SourceError: not a keras-hub backbone's config, or another model's.
    """
    if not isinstance(values, dict) or "keras_hub" not in str(values.get("module", "")):
        raise SourceError(f"{source}: its config.json is no keras-hub preset's (it names no keras_hub backbone class)")
    if values.get("class_name") not in our_backbones():
        raise SourceError(f"{source}: a keras-hub preset of a {values.get('class_name')!r}, not one we compute "
                          f"({', '.join(our_backbones())})")


def convert_preset(source, preset_dir, release_dir, log):
    """Converts a downloaded keras-hub preset into a release (keras-hub's loader reads it).

    Returns:
        The release's `BertConfig`.

    Raises:
        SourceError: keras-hub cannot load it, or its files do not fit together.
    """
    from keras_bert_impl.checkpoints.keras_hub_variants import preset_to_release

    try:
        conversion = preset_to_release(preset_dir, release_dir)
    except (ConfigError, CheckpointError) as e:
        raise SourceError(f"{source}: {str(e).replace(os.fspath(preset_dir), 'the preset')}") from None
    for note in conversion.notes:
        log(f"{source}: {note}")
    return conversion.config


# -- Kaggle -------------------------------------------------------------------


def kaggle_endpoint(needed_by="kaggle://"):
    """The Kaggle API that `kagglehub` asks (`KAGGLE_API_ENVIRONMENT` picks it)."""
    kaggle_env = extras.import_extra("kagglesdk.kaggle_env", "keras-hub", needed_by)
    try:
        return kaggle_env.get_endpoint(kaggle_env.get_env())
    except Exception as e:  # noqa: BLE001: kagglesdk raises a bare Exception for an unknown environment
        raise SourceError(f"KAGGLE_API_ENVIRONMENT: {e}") from None


@contextlib.contextmanager
def _quiet_unless_terminal():
    """kagglehub's progress bars only where stderr is a terminal; its info lines (on stdout) never."""
    logger = logging.getLogger("kagglehub")
    level = logger.level
    logger.setLevel(logging.WARNING)  # "Downloading to ..." on stdout: our log line says what is fetched.
    try:
        if sys.stderr.isatty():
            yield
        else:
            # kagglehub draws tqdm bars on sys.stderr with no switch to turn them off.
            with contextlib.redirect_stderr(io.StringIO()):
                yield
    finally:
        logger.setLevel(level)


def _in_a_thread_of_its_own(function, *args):
    """`function(*args)` run in a new thread: its result, or its exception raised here."""
    outcome = {}

    def run():
        try:
            outcome["result"] = function(*args)
        except BaseException as error:  # noqa: BLE001: raised again in the caller's thread
            outcome["error"] = error

    thread = threading.Thread(target=run, name="kagglehub", daemon=True)  # daemon: an interrupt ends the process
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def _resolve(handle, path, output_dir):
    from kagglehub import registry
    from kagglehub.handle import parse_model_handle

    return registry.model_resolver(parse_model_handle(handle.kagglehub_handle()), path, output_dir=output_dir)


def _kaggle_download(handle, path, output_dir):
    """`(local path, version)` of `path` (None: every file) of `handle`, downloaded into `output_dir`.

    Through kagglehub's model resolver, which `kagglehub.model_download` calls and which also says the
    version it resolved (a handle without one is asked for the newest). In a thread of its own: for its
    user agent, kagglehub looks for libraries in the whole call stack with `inspect.stack()` (each frame's
    source line read, its module looked up among all those loaded) six times a request: under a deep stack
    with TensorFlow loaded, as a test runner's, most of the CPU a fetch takes. A new thread's stack is the
    few frames from `_resolve` on, whose module (keras_bert_impl) it names as before ("keras").
    """
    extras.import_extra("kagglehub", "keras-hub", str(handle))
    with _quiet_unless_terminal():
        return _in_a_thread_of_its_own(_resolve, handle, path, output_dir)


def _status(error):
    cause = error
    while cause is not None:
        status = getattr(getattr(cause, "response", None), "status_code", None)
        if status:
            return status, getattr(cause.response, "url", "") or ""
        cause = cause.__cause__ or cause.__context__
    return None, ""


def _is_unreachable(error):
    # requests' connection errors and timeouts are OSErrors without a response (its HTTPError has one) and
    # without the errno of a local file's error (a full or read-only cache is not Kaggle out of reach).
    return isinstance(error, OSError) and error.errno is None and _status(error)[0] is None


def _first_line(error):
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def _kaggle_error(error, handle, endpoint):
    """One line for a kagglehub error about `handle`; None where Kaggle could not be reached."""
    if _is_unreachable(error):
        return None
    status, url = _status(error)
    if status in (401, 403):
        return (f"{handle}: Kaggle ({endpoint}) refuses it (HTTP {status}): a private or gated model needs "
                "KAGGLE_USERNAME and KAGGLE_KEY (or KAGGLE_API_TOKEN) of an account that accepted its terms")
    if status == 404 and url.endswith("/GetModelInstance"):
        return f"{handle}: no such model on Kaggle ({endpoint})"
    if status == 404:
        return (f"{handle}: Kaggle ({endpoint}) has no config.json in it: no such model or version, or not a "
                "keras-hub preset")
    return f"{handle}: Kaggle ({endpoint}) failed ({f'HTTP {status}' if status else _first_line(error)})"


def _versions_dir(root, handle):
    return os.path.join(root, "kaggle", handle.cache_key())


def _cached_version(versions_dir):
    """The version `refs/latest` names (the newest when last asked), or None."""
    try:
        with open(os.path.join(versions_dir, "refs", _LATEST), encoding="ascii") as f:
            version = f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(version) if version.isdigit() else None


def fetch_kaggle_release(source, root, log):
    """The cached release of a Kaggle handle or a keras-hub preset name, fetched and converted where there is none.

    Args:
        source: `kaggle://OWNER/MODEL/keras/VARIATION[/VERSION]` or a preset name (`bert_base_en_uncased`).
        root: Root of the named sources' cache.
        log: `log(line)` for what is fetched and converted.

    Returns:
        The release directory (`<root>/kaggle/<OWNER>--<MODEL>--<FRAMEWORK>--<VARIATION>/<VERSION>`).

    Raises:
        SourceError: a malformed handle, an unknown preset, model or version,
            another model than those we compute, or Kaggle out of reach and
            no cached copy.
        MissingExtraError: keras-hub (and kagglehub) not installed.
    """
    handle = parse_kaggle_source(source) if is_kaggle_source(source) else preset_handle(source)
    label = source if is_kaggle_source(source) else f"{source} ({handle})"
    versions_dir = _versions_dir(root, handle)
    if handle.version is not None:
        cached = checked_copy(os.path.join(versions_dir, str(handle.version)), log)
        if cached:
            return cached  # A version never changes: no need to ask Kaggle.
    endpoint = kaggle_endpoint(label)
    os.makedirs(versions_dir, exist_ok=True)
    probe_dir = tempfile.mkdtemp(prefix=".config-", dir=versions_dir)
    try:
        config_path, version = _kaggle_download(handle, "config.json", probe_dir)
        with open(config_path, encoding="utf-8") as f:
            values = json.load(f)
    except ValueError as e:
        raise SourceError(f"{label}: its config.json is not JSON ({e})") from None
    except Exception as error:  # noqa: BLE001: kagglehub's errors are requests' and its own
        message = _kaggle_error(error, label, endpoint)
        if message is not None:
            raise SourceError(message) from None
        latest = None if handle.version is not None else _cached_version(versions_dir)
        cached = latest and checked_copy(os.path.join(versions_dir, str(latest)), log)
        if not cached:
            raise SourceError(f"{label}: cannot reach Kaggle ({endpoint}: {_first_line(error)}) and the cache "
                              f"({root}) holds no copy of it") from None
        log(f"{label}: cannot reach Kaggle ({endpoint}): using the cached copy of version {latest}")
        return cached
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)
    check_preset_config(label, values)
    versioned = dataclasses.replace(handle, version=version)
    release_dir = os.path.join(versions_dir, str(version))
    with exclusive_output(release_dir, wait=True):  # One process fetches a version; the others then take its copy.
        if not checked_copy(release_dir, log):
            _fetch(versioned, label, versions_dir, release_dir, endpoint, log)
        if handle.version is None:
            os.makedirs(os.path.join(versions_dir, "refs"), exist_ok=True)
            write_text_atomically(os.path.join(versions_dir, "refs", _LATEST), f"{version}\n")
    return release_dir


def _fetch(handle, label, versions_dir, release_dir, endpoint, log):
    """Downloads, converts and publishes `release_dir` (the caller holds its lock)."""
    download_dir = os.path.join(versions_dir, f".download-{handle.version}")
    convert_dir = os.path.join(versions_dir, f".convert-{handle.version}")
    # kagglehub refuses a non-empty output directory it did not mark complete: a killed download starts over.
    shutil.rmtree(download_dir, ignore_errors=True)
    shutil.rmtree(convert_dir, ignore_errors=True)
    start = time.perf_counter()
    log(f"{label}: fetching version {handle.version} from Kaggle ({endpoint})")
    try:
        _kaggle_download(handle, None, download_dir)
    except Exception as error:  # noqa: BLE001: kagglehub's errors are requests' and its own
        message = _kaggle_error(error, label, endpoint) or f"{label}: download from Kaggle failed ({_first_line(error)})"
        raise SourceError(f"{message}; nothing was cached") from None
    config = convert_preset(label, download_dir, convert_dir, log)
    write_manifest(convert_dir, {"source": str(handle), "handle": handle.kagglehub_handle(),
                                 "version": handle.version, "endpoint": endpoint})
    shutil.rmtree(release_dir, ignore_errors=True)  # A changed copy, found under the lock.
    os.replace(convert_dir, release_dir)  # Published whole, or not at all.
    shutil.rmtree(download_dir, ignore_errors=True)
    log(f"{label}: {config.model_type}, {config.num_hidden_layers} layers, hidden {config.hidden_size}: converted "
        f"into {release_dir} in {time.perf_counter() - start:.1f}s")


def remove_cached_kaggle_release(source, root):
    """Removes the cached copies of `source` (a handle without a version: every version; with one: that one).

    Returns:
        The directories removed.
    """
    handle = parse_kaggle_source(source) if is_kaggle_source(source) else preset_handle(source)
    versions_dir = _versions_dir(root, handle)
    if not os.path.isdir(versions_dir):
        return []
    with exclusive_output(versions_dir, wait=True):
        if handle.version is None:
            shutil.rmtree(versions_dir)
            return [versions_dir]
        directory = os.path.join(versions_dir, str(handle.version))
        if not os.path.isdir(directory):
            return []
        shutil.rmtree(directory)
        return [directory]
