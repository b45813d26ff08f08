"""A local stand-in for the Hugging Face Hub that serves real files: each repository is a folder
of this machine, at one branch (`main`) and the commit it points to. It answers what
huggingface_hub's downloads ask, the way the Hub does:

* `GET /api/models/<org>/<name>/revision/<revision>`: the repository at the revision (its commit
  and files);
* `GET /api/models/<org>/<name>/tree/<revision>`: its files with size and blob id (one page);
* `HEAD`/`GET /<org>/<name>/resolve/<revision>/<file>`: a file, with the commit, ETag and size
  headers;

and 404 with the Hub's `X-Error-Code` for an unknown repository, revision or file, so
huggingface_hub raises its real exceptions. `snapshot_download` against it fills an HF cache
exactly as it would from the Hub. Point HF_ENDPOINT at it (huggingface_hub reads it when
imported: a fresh interpreter). Every request is counted by method and path, so a test can tell
what a command fetched.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

BRANCH = "main"
_API = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/(?P<kind>revision|tree)/(?P<rev>[^/]+)")
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")


@dataclass(frozen=True)
class Repo:
    """A folder served as a Hub repository at `main` and its commit."""

    folder: Path

    @property
    def files(self) -> list[str]:
        return sorted(p.name for p in self.folder.iterdir() if p.is_file())

    @property
    def commit(self) -> str:
        """A commit hash that changes with the files (40 hex digits, as the Hub's)."""
        digest = hashlib.sha1()
        for name in self.files:
            digest.update(name.encode() + b"\0" + (self.folder / name).read_bytes())
        return digest.hexdigest()


def _blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git's


def _handler(repos: Mapping[str, Repo], requests: Counter) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _route(self, body: bool) -> None:
            path = unquote(urlsplit(self.path).path)
            requests[f"{self.command} {path}"] += 1
            api, resolve = _API.match(path), _RESOLVE.match(path)
            match = api or resolve
            repo = repos.get(match.group("repo")) if match else None
            if repo is None:
                return self._error("RepoNotFound", "Repository not found")
            if match.group("rev") not in (BRANCH, repo.commit):
                return self._error("RevisionNotFound", "Invalid rev id")
            if api and api.group("kind") == "revision":
                return self._json(self._info(api.group("repo"), repo), body)
            if api:
                return self._json(self._tree(repo), body)
            file = repo.folder / resolve.group("file")
            if resolve.group("file") not in repo.files:
                return self._error("EntryNotFound", "Entry not found")
            data = file.read_bytes()
            headers = {
                "X-Repo-Commit": repo.commit,
                "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
                "Content-Length": str(len(data)),
                "Content-Type": "application/octet-stream",
            }
            self._send(200, headers, data if body else b"")

        def _info(self, name: str, repo: Repo) -> dict:
            return {
                "id": name,
                "sha": repo.commit,
                "private": False,
                "siblings": [{"rfilename": f} for f in repo.files],
            }

        def _tree(self, repo: Repo) -> list[dict]:
            entries = []
            for name in repo.files:
                data = (repo.folder / name).read_bytes()
                entry = {"type": "file", "path": name, "size": len(data), "oid": _blob_id(data)}
                entries.append(entry)
            return entries

        def _json(self, value: object, body: bool) -> None:
            data = json.dumps(value).encode()
            headers = {"Content-Type": "application/json", "Content-Length": str(len(data))}
            self._send(200, headers, data if body else b"")

        def _error(self, code: str, message: str) -> None:
            data = json.dumps({"error": message}).encode()
            headers = {
                "X-Error-Code": code,
                "X-Error-Message": message,
                "Content-Type": "application/json",
                "Content-Length": str(len(data)),
            }
            self._send(404, headers, data)

        def _send(self, status: int, headers: Mapping[str, str], data: bytes) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            if data and self.command != "HEAD":
                self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802  (BaseHTTPRequestHandler's name)
            self._route(body=True)

        def do_HEAD(self) -> None:  # noqa: N802
            self._route(body=False)

        def log_message(self, format, *args):  # noqa: A002
            pass  # keep test output clean

    return Handler


@dataclass
class HubServer:
    endpoint: str  # for HF_ENDPOINT
    requests: Counter  # "METHOD path" -> how many times it was asked for


@contextmanager
def hub_with_repos(repos: Mapping[str, Path]) -> Iterator[HubServer]:
    """Serve each folder as the repository named by its key ("org/name") on 127.0.0.1."""
    served = {name: Repo(folder) for name, folder in repos.items()}
    requests: Counter = Counter()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(served, requests))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield HubServer(f"http://127.0.0.1:{server.server_address[1]}", requests)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
