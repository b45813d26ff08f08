"""A tiny local stand-in for the Hugging Face Hub's file endpoint, for weights-check tests.

It answers `HEAD/GET /<org>/<name>/resolve/<revision>/<file>` the way the Hub does: 200 with an
ETag and the commit for a known repo at a known revision, and 404/401 with the Hub's
`X-Error-Code` header otherwise, so huggingface_hub raises its real exceptions
(RepositoryNotFoundError, RevisionNotFoundError, GatedRepoError). Point HF_ENDPOINT at it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_PATH = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<revision>[^/]+)/(?P<file>.+)$")
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _handler(repos: Mapping[str, set[str]], gated: set[str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            match = _PATH.match(self.path.split("?")[0])
            repo = match.group("repo") if match else ""
            if repo in gated:
                self._send(401, {"X-Error-Code": "GatedRepo", "X-Error-Message": "gated"})
            elif repo not in repos:
                self._send(404, {"X-Error-Code": "RepoNotFound", "X-Error-Message": "no repo"})
            elif match is None or match.group("revision") not in repos[repo]:
                self._send(404, {"X-Error-Code": "RevisionNotFound", "X-Error-Message": "rev"})
            else:
                self._send(200, {"ETag": '"etag"', "X-Repo-Commit": COMMIT})

        def _send(self, status: int, headers: Mapping[str, str]) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_HEAD = _answer
        do_GET = _answer

        def log_message(self, format, *args):  # noqa: A002  (BaseHTTPRequestHandler's name)
            pass  # keep test output clean

    return Handler


@contextmanager
def hub_server(repos: Mapping[str, set[str]], gated: set[str] = frozenset()) -> Iterator[str]:
    """Serve on 127.0.0.1; yields the endpoint URL (for HF_ENDPOINT)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(repos, set(gated)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
