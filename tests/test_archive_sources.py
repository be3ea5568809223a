"""Release archives by name (`google:NAME`) and by URL (`.zip`, `.tar.gz`, `#sha256=`), from a loopback
server on 127.0.0.1 (`tests/hub_fixture.py`): the release inside loads as the one archived, a cut download
resumes where it stopped, a digest that differs and an archive whose members would land outside its
directory (or are links) are refused with nothing cached, and a second load needs no server.
"""

import hashlib
import io
import os
import tarfile
import zipfile

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.checkpoints.archives import GOOGLE_BASE_URL_ENV, archive_url
from keras_bert_impl.checkpoints.original import save_original_checkpoint
from keras_bert_impl.checkpoints.sources import find_release
from keras_bert_impl.checkpoints.sources import SourceError, list_cached_releases, remove_cached_release
from keras_bert_impl.models.bert_model import BertModel
from tests.helpers import randomize, tiny_config
from tests.hub_fixture import HubServer, wordpiece_vocab

NAME = "uncased_L-2_H-128_A-2"


@pytest.fixture
def server(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_BERT_IMPL_CACHE", str(tmp_path / "cache"))
    hub = HubServer()
    monkeypatch.setenv(GOOGLE_BASE_URL_ENV, f"{hub.url}/bert_models")
    yield hub
    hub.stop()


@pytest.fixture(scope="module")
def release_files(tmp_path_factory):
    """`{name: bytes}` of a tiny original-layout release, and its word embeddings."""
    directory = tmp_path_factory.mktemp("release")
    config = tiny_config(vocab_size=60)
    model = BertModel(config)
    randomize(model, seed=3)
    save_original_checkpoint(model, str(directory / "bert_model.ckpt"))
    config.to_json_file(str(directory / "bert_config.json"))
    (directory / "vocab.txt").write_bytes(wordpiece_vocab())
    files = {path.name: path.read_bytes() for path in directory.iterdir() if path.is_file()}
    # Larger than two of the downloader's 64 KB blocks, so that half of it is whole blocks.
    files["README.txt"] = np.random.default_rng(0).bytes(300_000)
    embeddings = tf.train.load_checkpoint(str(directory / "bert_model.ckpt")).get_tensor("bert/embeddings/word_embeddings")
    return files, embeddings


def _zip(files, top=NAME, extra=()):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, data in files.items():
            archive.writestr(f"{top}/{name}" if top else name, data)
        for name, data in extra:
            archive.writestr(name, data)
    return buffer.getvalue()


def _tar_gz(files, links=()):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{NAME}/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        for name, target in links:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            archive.addfile(info)
    return buffer.getvalue()


def _embeddings(release):
    return tf.train.load_checkpoint(release.checkpoint).get_tensor("bert/embeddings/word_embeddings")


def test_a_google_release_by_name_loads_resumes_and_needs_no_server_the_second_time(server, release_files):
    files, embeddings = release_files
    assert archive_url(f"google:{NAME}").endswith(f"/bert_models/2020_02_20/{NAME}.zip")
    archive = _zip(files)
    server.static[f"/bert_models/2020_02_20/{NAME}.zip"] = archive
    server.faults[f"{NAME}.zip"] = ("truncate", 1)
    release = find_release(f"google:{NAME}")
    assert np.array_equal(_embeddings(release), embeddings)
    (resumed,) = server.ranges
    assert resumed[0] == f"{NAME}.zip" and 0 < resumed[1] < len(archive)  # the rest asked for, not all again
    (cached,) = list_cached_releases()
    assert cached.source == f"google:{NAME}" and cached.directory == os.path.dirname(release.checkpoint)
    server.stop()
    assert find_release(f"google:{NAME}") == release
    assert remove_cached_release(f"google:{NAME}") == [cached.directory] and list_cached_releases() == []


def test_a_tar_gz_url_with_its_sha256_loads_and_another_digest_is_refused(server, release_files):
    files, embeddings = release_files
    archive = _tar_gz(files)
    server.static["/models/tiny.tar.gz"] = archive
    digest = hashlib.sha256(archive).hexdigest()
    with pytest.raises(SourceError, match=rf"the archive has sha256 {digest}, not the {'0' * 64} given; nothing was "
                                          "cached"):
        find_release(f"{server.url}/models/tiny.tar.gz#sha256={'0' * 64}")
    assert list_cached_releases() == []
    release = find_release(f"{server.url}/models/tiny.tar.gz#sha256={digest}")
    assert np.array_equal(_embeddings(release), embeddings)


@pytest.mark.parametrize("shape", ["zip_parent", "zip_absolute", "tar_symlink"])
def test_an_archive_reaching_outside_its_directory_is_refused(server, release_files, tmp_path, shape):
    files, _ = release_files
    archive = {
        "zip_parent": lambda: _zip(files, extra=[("../../escaped.txt", b"x")]),
        "zip_absolute": lambda: _zip(files, extra=[("/tmp/escaped.txt", b"x")]),
        "tar_symlink": lambda: _tar_gz(files, links=[(f"{NAME}/vocab_link.txt", "/etc/passwd")]),
    }[shape]()
    suffix = ".zip" if shape.startswith("zip") else ".tar.gz"
    server.static[f"/models/evil{suffix}"] = archive
    with pytest.raises(SourceError, match="would land outside its directory|a link or device"):
        find_release(f"{server.url}/models/evil{suffix}")
    assert list_cached_releases() == []
    assert not [path for path in tmp_path.rglob("escaped.txt")]


def test_bad_archive_sources_are_one_line_each(server, release_files):
    files, _ = release_files
    server.static["/models/flat.zip"] = _zip({"notes.txt": b"no release here"}, top="")
    cases = {
        "google:uncased_L-3_H-100_A-1": r"^google:uncased_L-3_H-100_A-1: not one of google-research/bert's releases",
        f"{server.url}/models/flat.zip": r"the archive holds no release \(no bert_config\.json at its root or in its "
                                         r"one top directory\)$",
        f"{server.url}/models/missing.zip": r"cannot download .*missing\.zip \(.*404.*\) and the cache \(.*\) holds no "
                                            r"copy of it$",
        f"{server.url}/models/weights.bin": r"not the URL of a \.zip or \.tar\.gz release archive",
    }
    for source, message in cases.items():
        with pytest.raises(SourceError, match=message):
            find_release(source)
    assert list_cached_releases() == []
