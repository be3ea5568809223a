"""A loopback Hugging Face Hub on 127.0.0.1, serving repositories that the tests make.

It answers what `huggingface_hub`'s `model_info`, `snapshot_download` and
`hf_hub_download` ask (read in the client's `hf_api.py` and
`file_download.py`):

* `GET /api/models/{repo}/revision/{revision}`: the repository's id, commit
  `sha` and `siblings` (with `lfs` sha256 where `?blobs=True`);
* `GET /api/models/{repo}/tree/{revision}`: the file listing (`oid`, `lfs`);
* `HEAD`/`GET /{repo}/resolve/{revision}/{path}`: the file, with `ETag` (the
  sha256 of an LFS file, else the git blob sha1), `X-Repo-Commit` and
  `Content-Length`, and `Range: bytes=N-` for a resumed download;
* a repository or revision it does not have: 404 with `X-Error-Code`
  `RepoNotFound` or `RevisionNotFound`, as the Hub answers.

Faults are injected per file name (`HubServer.faults`): an HTTP status, a
body cut short (the connection closed after half of it), a body with bytes
flipped, a body that stalls half way. `requests` records what was asked.
"""

import contextlib
import hashlib
import http.server
import json
import re
import threading
import time

import numpy as np
from safetensors.numpy import save_file

from tests.variants_fixture import HEADS, HIDDEN, INTERMEDIATE, VOCAB, _bert_layer, _layer_norm, _linear

_LFS = re.compile(r"\.(safetensors|bin|model|h5)$")


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class HubRepository:
    """One repository: its files at one commit, and the branches or tags that name it."""

    def __init__(self, files, refs=("main",)):
        self.files = {name: bytes(data) for name, data in files.items()}
        listing = "".join(f"{name}:{hashlib.sha256(data).hexdigest()}\n" for name, data in sorted(self.files.items()))
        self.commit = hashlib.sha1(listing.encode()).hexdigest()
        self.refs = {ref: self.commit for ref in refs}

    def commit_of(self, revision):
        return self.commit if revision == self.commit else self.refs.get(revision)

    def entry(self, name):
        data = self.files[name]
        lfs = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
        return data, (lfs if _LFS.search(name) else None)


class HubServer:
    """The server; `url` goes into `HF_ENDPOINT`. Stop it with `stop()` (or use it as a context manager)."""

    def __init__(self):
        self.repos = {}
        self.faults = {}  # file name -> ("status", code) | ("truncate", times) | ("corrupt",) | ("stall", seconds)
        self.requests = []
        self.static = {}  # path -> bytes: plain files (release archives)
        self.ranges = []  # (file name, first byte) of each request that resumes a download
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def add(self, repo_id, files, refs=("main",)):
        """Serves `files` ({name: bytes}) as `repo_id`; returns its commit sha."""
        self.repos[repo_id] = HubRepository(files, refs)
        return self.repos[repo_id].commit

    def stop(self):
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def _handler(hub):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def end_headers(self):
            # One request a connection: a stopped server then refuses every later one, as a Hub gone offline.
            self.send_header("Connection", "close")
            self.close_connection = True
            super().end_headers()

        def _error(self, status, code=None):
            self.send_response(status)
            if code:
                self.send_header("X-Error-Code", code)
            body = json.dumps({"error": code or str(status)}).encode()
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, value, commit=None):
            body = json.dumps(value).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            if commit:
                self.send_header("X-Repo-Commit", commit)
            self.end_headers()
            self.wfile.write(body)

        def _repo(self, repo_id, revision):
            """`(repository, commit)`, or None after answering 404."""
            repo = hub.repos.get(repo_id)
            if repo is None:
                self._error(404, "RepoNotFound")
                return None
            commit = repo.commit_of(revision)
            if commit is None:
                self._error(404, "RevisionNotFound")
                return None
            return repo, commit

        def do_HEAD(self):
            self.do_GET()

        def do_GET(self):
            path, _, query = self.path.partition("?")
            hub.requests.append((self.command, path))
            api = re.fullmatch(r"/api/models/(.+)/(revision|tree)/([^/]+)", path)
            if api:
                found = self._repo(api.group(1), api.group(3))
                if found:
                    repo, commit = found
                    if api.group(2) == "revision":
                        siblings = []
                        for name in sorted(repo.files):
                            data, lfs = repo.entry(name)
                            sibling = {"rfilename": name}
                            if "blobs=" in query:
                                sibling.update(size=len(data), blobId=git_blob_sha1(data))
                                if lfs:
                                    sibling["lfs"] = {"size": lfs["size"], "sha256": lfs["oid"], "pointerSize": 134}
                            siblings.append(sibling)
                        self._json({"id": api.group(1), "sha": commit, "siblings": siblings, "private": False})
                    else:
                        entries = []
                        for name in sorted(repo.files):
                            data, lfs = repo.entry(name)
                            entries.append({"type": "file", "path": name, "size": len(data),
                                            "oid": git_blob_sha1(data), **({"lfs": lfs} if lfs else {})})
                        self._json(entries)
                return
            if path in hub.static:  # a plain file (a release archive), no Hub headers
                self._send_file(path.rsplit("/", 1)[-1], hub.static[path], None, None)
                return
            resolve = re.fullmatch(r"/(.+)/resolve/([^/]+)/(.+)", path)
            if not resolve:
                self._error(404)
                return
            found = self._repo(resolve.group(1), resolve.group(2))
            if not found:
                return
            repo, commit = found
            name = resolve.group(3)
            if name not in repo.files:
                self._error(404, "EntryNotFound")
                return
            data, lfs = repo.entry(name)
            self._send_file(name, data, lfs["oid"] if lfs else git_blob_sha1(data), commit)

        def _send_file(self, name, data, etag, commit):
            """`data`, from a `Range: bytes=N-`'s N where asked, with the fault injected for `name`."""
            fault = hub.faults.get(name)
            if fault and fault[0] == "status" and self.command == "GET":  # the body fails, after its metadata
                self._error(fault[1])
                return
            start = 0
            ranged = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
            if ranged and self.command == "GET":
                start = int(ranged.group(1))
                hub.ranges.append((name, start))
            body = data[start:]
            self.send_response(206 if start else 200)
            if etag:
                self.send_header("ETag", f'"{etag}"')
            if commit:
                self.send_header("X-Repo-Commit", commit)
            self.send_header("Content-Length", str(len(body)))
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.end_headers()
            if self.command == "HEAD":
                return
            if fault and fault[0] == "corrupt":
                body = bytes(byte ^ 0xFF for byte in body[:64]) + body[64:]
            if fault and fault[0] == "truncate" and fault[1] > 0 and len(body) > 1:
                hub.faults[name] = ("truncate", fault[1] - 1)
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(2)
                return
            if fault and fault[0] == "stall":
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                time.sleep(fault[1])
                self.close_connection = True
                return
            self.wfile.write(body)

    return Handler


# -- repositories ---------------------------------------------------------

BERT_POSITIONS = 64


def bert_config(architecture="BertModel", **overrides):
    """A tiny BERT `config.json` as transformers writes it.

    Its activation is `gelu_new` (the original's tanh GELU), which keras-hub's
    `BertBackbone`, the tests' oracle, computes whatever the config says.
    """
    return {
        "architectures": [architecture], "model_type": "bert", "vocab_size": VOCAB, "hidden_size": HIDDEN,
        "num_hidden_layers": 2, "num_attention_heads": HEADS, "intermediate_size": INTERMEDIATE,
        "hidden_act": "gelu_new", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": BERT_POSITIONS, "type_vocab_size": 2, "initializer_range": 0.02,
        "layer_norm_eps": 1e-12, "pad_token_id": 0, **overrides,
    }


def bert_tensors(rng, pooler=True, masked_lm=False, num_labels=0):
    """A state dict of `BertModel` (`pooler`), `BertForMaskedLM` (`masked_lm`: no pooler, `cls.predictions`)
    or `BertForSequenceClassification` (`num_labels`)."""
    t = {
        "bert.embeddings.word_embeddings.weight": rng.normal(0, 0.5, (VOCAB, HIDDEN)),
        "bert.embeddings.position_embeddings.weight": rng.normal(0, 0.5, (BERT_POSITIONS, HIDDEN)),
        "bert.embeddings.token_type_embeddings.weight": rng.normal(0, 0.5, (2, HIDDEN)),
    }
    _layer_norm(rng, "bert.embeddings.LayerNorm", HIDDEN, t)
    for index in range(2):
        _bert_layer(rng, f"bert.encoder.layer.{index}", t)
    if pooler:
        _linear(rng, "bert.pooler.dense", HIDDEN, HIDDEN, t)
    if masked_lm:
        _linear(rng, "cls.predictions.transform.dense", HIDDEN, HIDDEN, t)
        _layer_norm(rng, "cls.predictions.transform.LayerNorm", HIDDEN, t)
        t["cls.predictions.bias"] = rng.normal(0, 0.1, (VOCAB,))
    if num_labels:
        _linear(rng, "classifier", num_labels, HIDDEN, t)
    return {name: value.astype(np.float32) for name, value in t.items()}


def wordpiece_vocab():
    """`vocab.txt` of VOCAB tokens: the specials, then words a test can write."""
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    words = ["the", "a", "film", "good", "bad", "was", "is", "not", "very", "great"]
    tokens = specials + words + [f"w{i}" for i in range(VOCAB - len(specials) - len(words))]
    return "".join(f"{token}\n" for token in tokens).encode()


def safetensors_bytes(tensors, tmp_path, name="model.safetensors"):
    path = tmp_path / f"{name}.build"
    save_file(tensors, str(path), metadata={"format": "pt"})
    return path.read_bytes()


def directory_files(directory):
    """`{name: bytes}` of the files of a directory (an HF directory written by a fixture)."""
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir()) if path.is_file()}


def bert_repository(tmp_path, seed=0, architecture="BertModel", pooler=True, masked_lm=False, labels=None):
    """`({name: bytes}, tensors)` of a tiny BERT repository; `labels` makes it a sequence classifier."""
    rng = np.random.default_rng(seed)
    tensors = bert_tensors(rng, pooler=pooler or bool(labels), masked_lm=masked_lm, num_labels=len(labels or ()))
    overrides = {}
    if labels:
        architecture = "BertForSequenceClassification"
        overrides = {"id2label": {str(i): label for i, label in enumerate(labels)},
                     "label2id": {label: i for i, label in enumerate(labels)}}
    files = {
        "config.json": json.dumps(bert_config(architecture, **overrides)).encode(),
        "model.safetensors": safetensors_bytes(tensors, tmp_path),
        "vocab.txt": wordpiece_vocab(),
        "tokenizer_config.json": json.dumps({"do_lower_case": True, "model_max_length": BERT_POSITIONS}).encode(),
        "README.md": b"# a tiny BERT\n",
    }
    return files, tensors
