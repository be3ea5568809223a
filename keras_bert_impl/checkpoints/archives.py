"""Release archives by URL or by name: `https://.../NAME.zip[#sha256=HEX]` (or `.tar.gz`, `.tgz`) and
`google:NAME`, the google-research/bert releases (`google:uncased_L-12_H-768_A-12`, the 24 small BERTs
`google:uncased_L-4_H-256_A-4`, ...).

An archive is downloaded into the cache (resumed from where a cut download
stopped), checked against its `#sha256=` where given (the catalogue pins
none: we publish only digests we have computed from the files themselves, and
record the archive's sha256 in the release's manifest on first download),
extracted with every member inside its directory and no links or devices,
and published under `<cache>/releases/archives/<NAME>-<key>/` by one rename.

Example:
>>> archive_url("google:cased_L-12_H-768_A-12", base_url="https://storage.googleapis.com/bert_models")
'https://storage.googleapis.com/bert_models/2018_10_18/cased_L-12_H-768_A-12.zip'
"""

import hashlib
import http.client
import os
import re
import shutil
import stat
import sys
import tarfile
import urllib.error
import urllib.request
import zipfile

GOOGLE_SCHEME = "google:"
GOOGLE_BASE_URL = "https://storage.googleapis.com/bert_models"
# A mirror of GOOGLE_BASE_URL's tree (tests point it at a loopback server).
GOOGLE_BASE_URL_ENV = "KERAS_BERT_IMPL_GOOGLE_BERT_URL"
# google-research/bert's README: the release date (directory) of each archive.
GOOGLE_RELEASES = {
    "uncased_L-12_H-768_A-12": "2018_10_18",
    "uncased_L-24_H-1024_A-16": "2018_10_18",
    "cased_L-12_H-768_A-12": "2018_10_18",
    "cased_L-24_H-1024_A-16": "2018_10_18",
    "wwm_uncased_L-24_H-1024_A-16": "2019_05_30",
    "wwm_cased_L-24_H-1024_A-16": "2019_05_30",
    "multilingual_L-12_H-768_A-12": "2018_11_03",
    "multi_cased_L-12_H-768_A-12": "2018_11_23",
    "chinese_L-12_H-768_A-12": "2018_11_03",
}
# The 24 smaller BERTs (Turc et al. 2019); their 12-layer 768-wide one is the 2018 BERT-Base's name above.
GOOGLE_RELEASES = {**{f"uncased_L-{layers}_H-{hidden}_A-{hidden // 64}": "2020_02_20"
                      for layers in (2, 4, 6, 8, 10, 12) for hidden in (128, 256, 512, 768)}, **GOOGLE_RELEASES}
# Downloads cut short are resumed this many times in one load (and again by the next load).
_ATTEMPTS = 3
_ARCHIVE_URL = re.compile(r"^https?://[^#\s]+/([^/#\s]+?)(\.zip|\.tar\.gz|\.tgz)(?:#sha256=([0-9a-f]{64}))?$")


def is_archive_source(source):
    """True for `google:NAME` and an `http(s)://` URL of a `.zip` / `.tar.gz` archive."""
    return isinstance(source, str) and (source.startswith(GOOGLE_SCHEME) or source.startswith(("https://", "http://")))


def archive_url(source, base_url=None):
    """The URL (with its `#sha256=` fragment, if any) of an archive source.

    Raises:
        SourceError: an unknown `google:` name.
    """
    from keras_bert_impl.checkpoints.cached_release import SourceError

    if not source.startswith(GOOGLE_SCHEME):
        return source
    name = source[len(GOOGLE_SCHEME):]
    if name not in GOOGLE_RELEASES:
        raise SourceError(f"{source}: not one of google-research/bert's releases "
                          f"({', '.join(sorted(GOOGLE_RELEASES)[:4])}, ...: docs/SOURCES.md)")
    base = (base_url or os.environ.get(GOOGLE_BASE_URL_ENV) or GOOGLE_BASE_URL).rstrip("/")
    return f"{base}/{GOOGLE_RELEASES[name]}/{name}.zip"


def _download(url, partial, log, chunk=1 << 16):
    """Downloads `url` into `partial`, resuming from its length where a `Range` is answered with 206."""
    done = os.path.getsize(partial) if os.path.exists(partial) else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={done}-"} if done else {})
    with urllib.request.urlopen(request, timeout=60) as response:
        if done and response.status != 206:
            done = 0  # The server sends the whole file again.
        total = done + int(response.headers.get("Content-Length") or 0)
        if done:
            log(f"{url}: resuming at {done} of {total} bytes")
        tty = sys.stderr.isatty()
        with open(partial, "ab" if done else "wb") as out:
            while block := response.read(chunk):
                out.write(block)
                done += len(block)
                if tty:
                    print(f"\r{url.rsplit('/', 1)[-1]}: {done / 1e6:.1f} of {total / 1e6:.1f} MB", end="",
                          file=sys.stderr)
        if tty:
            print(file=sys.stderr)
    if total and done != total:
        raise OSError(f"{url}: {done} of {total} bytes arrived")


def _safe_members_zip(archive, source):
    from keras_bert_impl.checkpoints.cached_release import SourceError

    for info in archive.infolist():
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise SourceError(f"{source}: the archive holds a link, {info.filename}; links are not extracted")
        _check_name(info.filename, source)
    return archive.infolist()


def _check_name(name, source):
    from keras_bert_impl.checkpoints.cached_release import SourceError

    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name) or ".." in parts:
        raise SourceError(f"{source}: the archive's member {name} would land outside its directory; nothing extracted")


def _extract(path, target, source):
    """Extracts the archive at `path` into `target`: files and directories only, each inside `target`."""
    from keras_bert_impl.checkpoints.cached_release import SourceError

    os.makedirs(target)
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                for info in _safe_members_zip(archive, source):
                    archive.extract(info, target)
            return
        with tarfile.open(path, "r:*") as archive:
            members = archive.getmembers()
            for member in members:
                if not (member.isfile() or member.isdir()):
                    raise SourceError(f"{source}: the archive holds {member.name}, a link or device; "
                                      "only files and directories are extracted")
                _check_name(member.name, source)
            for member in members:
                archive.extract(member, target, set_attrs=False)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as e:
        raise SourceError(f"{source}: not a readable .zip or .tar.gz archive ({e})") from None


def _release_root(directory):
    """The extracted directory holding `bert_config.json`: the archive's root or its one top directory."""
    if os.path.exists(os.path.join(directory, "bert_config.json")):
        return directory
    entries = [os.path.join(directory, name) for name in os.listdir(directory)]
    subdirectories = [entry for entry in entries if os.path.isdir(entry)]
    if len(subdirectories) == 1 and os.path.exists(os.path.join(subdirectories[0], "bert_config.json")):
        return subdirectories[0]
    return None


def fetch_archive_release(source, root, log):
    """The cached release of an archive source, downloaded, checked and extracted where there is none.

    Args:
        source: `google:NAME` or `http(s)://.../NAME.zip[#sha256=HEX]`.
        root: Root of the named sources' cache.
        log: `log(line)`.

    Returns:
        The release directory.

    Raises:
        SourceError: an unknown name, a URL that is no archive, a digest that
            differs, an unsafe archive, no release inside, or no network and
            no cached copy.
    """
    from keras_bert_impl.checkpoints.cached_release import SourceError, checked_copy, write_manifest
    from keras_bert_impl.checkpoints.release import find_local_release
    from keras_bert_impl.io import exclusive_output

    url = archive_url(source)
    match = _ARCHIVE_URL.match(url)
    if match is None:
        raise SourceError(f"{source}: not the URL of a .zip or .tar.gz release archive "
                          "(http(s)://.../NAME.zip[#sha256=HEX])")
    name, pinned = match.group(1), match.group(3)
    location = url.split("#", 1)[0]
    key = hashlib.sha256(location.encode("utf-8")).hexdigest()[:16]
    archives_dir = os.path.join(root, "archives")
    release_dir = os.path.join(archives_dir, f"{name}-{key}")
    if checked_copy(release_dir, log):
        return release_dir
    os.makedirs(archives_dir, exist_ok=True)
    with exclusive_output(release_dir, wait=True):
        if checked_copy(release_dir, log):
            return release_dir
        partial = os.path.join(archives_dir, f".download-{name}-{key}{match.group(2)}")
        extract_dir = os.path.join(archives_dir, f".extract-{name}-{key}")
        log(f"{source}: downloading {location}")
        for attempt in range(_ATTEMPTS):
            try:
                _download(location, partial, log)
                break
            except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
                if attempt + 1 == _ATTEMPTS or isinstance(e, urllib.error.HTTPError):
                    why = (f"HTTP {e.code} {e.reason}" if isinstance(e, urllib.error.HTTPError)
                           else getattr(e, "reason", None) or repr(e))
                    raise SourceError(f"{source}: cannot download {location} ({why}) and the cache ({root}) holds "
                                      "no copy of it") from None
                log(f"{source}: the download stopped ({e!r}); resuming")
        from keras_bert_impl.checkpoints.pip_assets import file_sha256

        digest = file_sha256(partial)
        if pinned and digest != pinned:
            os.remove(partial)
            raise SourceError(f"{source}: the archive has sha256 {digest}, not the {pinned} given; nothing was cached")
        shutil.rmtree(extract_dir, ignore_errors=True)
        try:
            _extract(partial, extract_dir, source)
            found = _release_root(extract_dir)
            if found is None:
                raise SourceError(f"{source}: the archive holds no release (no bert_config.json at its root or in "
                                  "its one top directory)")
            find_local_release(found)  # A config, its tokenizer's files and a checkpoint, or one line saying which lacks.
            write_manifest(found, {"source": source, "url": location, "archive_sha256": digest})
            shutil.rmtree(release_dir, ignore_errors=True)  # A changed copy, found under the lock.
            os.replace(found, release_dir)
        finally:
            shutil.rmtree(extract_dir, ignore_errors=True)
        os.remove(partial)
    log(f"{source}: archive sha256 {digest}{' (as pinned)' if pinned else ''}, extracted into {release_dir}")
    return release_dir
