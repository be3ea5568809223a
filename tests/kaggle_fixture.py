"""A loopback stand-in for Kaggle's model API on 127.0.0.1, serving keras-hub presets that the tests make.

`kagglehub` asks its one endpoint, chosen by `KAGGLE_API_ENVIRONMENT`
(`kagglesdk.kaggle_env`: `LOCALHOST` is `http://localhost`, on port 80), and
sends every request through the `requests` session, which takes the
standard `HTTP_PROXY` variable. So `KaggleServer.environment()` names
`LOCALHOST` and this server as the proxy: each request arrives with its
absolute URL (`POST http://localhost/api/v1/...`) on an ephemeral port,
and nothing else of the machine is touched. It answers what kagglehub 1.0's
`ModelHttpResolver` asks (read in `kagglehub/http_resolver.py` and
`kagglesdk/models/services/model_api_service.py`), each a JSON `POST`:

* `models.ModelApiService/GetModelInstance` (`ownerSlug`, `modelSlug`,
  `framework` as its enum's name, `MODEL_FRAMEWORK_KERAS`, `instanceSlug`): `{"versionNumber": N}`, the newest version;
* `models.ModelApiService/ListModelInstanceVersionFiles` (and
  `versionNumber`): `{"files": [{"name", "size"}], "nextPageToken": ""}`;
* `models.ModelApiService/DownloadModelInstanceVersion` (and `path`): the
  file's bytes (`application/octet-stream`, `Content-Length`);
* a model, version or file it does not have: 404 with a JSON error body, as
  Kaggle answers.

`requests` records `(endpoint name, body)` of each request; `stalls` names
the files whose body stops half way for a number of seconds (a download to
kill part way).
"""

import http.server
import json
import threading
import time
import urllib.parse

API_PREFIX = "/api/v1/models.ModelApiService/"


class KaggleServer:
    """The server. `add(handle, files, version)` serves a model version; `stop()` stops it."""

    def __init__(self):
        self.models = {}  # "owner/model/framework/variation" -> {version: {path: bytes}}
        self.requests = []
        self.stalls = {}  # file path -> seconds its body stalls half way
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.proxy = f"http://127.0.0.1:{self._server.server_address[1]}"

    def environment(self):
        """The variables that point kagglehub at this server: `http://localhost` through it, while other loopback
        servers (a Hub stand-in at `http://127.0.0.1:PORT`) are reached directly."""
        return {"KAGGLE_API_ENVIRONMENT": "LOCALHOST", "HTTP_PROXY": self.proxy, "http_proxy": self.proxy,
                "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}

    def add(self, handle, files, version=1):
        """Serves `files` ({path: bytes}) as version `version` of `handle` (`owner/model/framework/variation`)."""
        self.models.setdefault(handle, {})[version] = {path: bytes(data) for path, data in files.items()}

    def downloads(self, name=None):
        """The paths asked of DownloadModelInstanceVersion (those ending in `/name`, or `name`, if given)."""
        paths = [body.get("path", "") for endpoint, body in self.requests if endpoint == "DownloadModelInstanceVersion"]
        return [path for path in paths if name is None or path == name or path.endswith("/" + name)]

    def stop(self):
        self._server.shutdown()
        self._server.server_close()


def _handler(server):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _send(self, status, body, content_type, stall=0):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.close_connection = True
            self.end_headers()
            if stall:
                self.wfile.write(body[:len(body) // 2])
                self.wfile.flush()
                time.sleep(stall)
                return
            self.wfile.write(body)

        def _json(self, value, status=200):
            self._send(status, json.dumps(value).encode(), "application/json")

        def _not_found(self, what):
            self._json({"code": 404, "message": f"{what} not found"}, status=404)

        def do_POST(self):  # noqa: N802: http.server's name
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            path = urllib.parse.urlsplit(self.path).path  # the absolute URL a proxy is sent
            if not path.startswith(API_PREFIX):
                return self._not_found(path)
            endpoint = path[len(API_PREFIX):]
            server.requests.append((endpoint, body))
            framework = str(body.get("framework", "")).lower().removeprefix("model_framework_")  # the enum's name
            handle = f"{body.get('ownerSlug')}/{body.get('modelSlug')}/{framework}/{body.get('instanceSlug')}"
            versions = server.models.get(handle)
            if versions is None:
                return self._not_found(f"model {handle}")
            if endpoint == "GetModelInstance":
                return self._json({"slug": body.get("instanceSlug"), "versionNumber": max(versions)})
            files = versions.get(body.get("versionNumber"))
            if files is None:
                return self._not_found(f"version {body.get('versionNumber')} of {handle}")
            if endpoint == "ListModelInstanceVersionFiles":
                return self._json({"files": [{"name": name, "size": len(data)} for name, data in sorted(files.items())],
                                   "nextPageToken": ""})
            if endpoint == "DownloadModelInstanceVersion":
                if body.get("path") not in files:
                    return self._not_found(f"file {body.get('path')!r} of {handle}")
                return self._send(200, files[body["path"]], "application/octet-stream",
                                  stall=server.stalls.get(body["path"], 0))
            return self._not_found(endpoint)

    return Handler
