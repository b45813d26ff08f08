"""A tiny local stand-in for the Hugging Face Hub's file endpoint, for weights-check tests.

It answers `HEAD/GET /<org>/<name>/resolve/<revision>/<file>` the way the Hub does: 200 with an
ETag and the commit for a known repo at a known revision, and 404/401 with the Hub's
`X-Error-Code` header otherwise, so huggingface_hub raises its real exceptions
(RepositoryNotFoundError, RevisionNotFoundError, GatedRepoError). Point HF_ENDPOINT at it.
`closed_port` is a Hub that cannot be reached, and `cli_counting_connects` runs the command
line counting the connects to it (one probe, no retry loop).
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

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


def closed_port() -> int:
    """A local port nothing listens on (bound, then released): a Hub that cannot be reached."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


# `reprogrid ARGS` in this interpreter, counting the TCP connects to one port: every connect
# huggingface_hub (httpcore) and the Hub probe make goes through socket.create_connection.
_COUNTED_CLI = """
import socket, sys
from orchestrator.cli import main
port = int(sys.argv[1])
real = socket.create_connection
tries = []
def counted(address, *args, **kwargs):
    if address[1] == port:
        tries.append(address)
    return real(address, *args, **kwargs)
socket.create_connection = counted
code = main(sys.argv[2:])
sys.stderr.write(f"\\nconnects to the Hub's port: {len(tries)}\\n")
sys.exit(code)
"""
_COUNT = re.compile(r"connects to the Hub's port: (\d+)")


def hub_env(base: Mapping[str, str], endpoint: str, cache: Path, root: Path) -> dict[str, str]:
    """`base` without its HF_* and proxy variables, with HF_ENDPOINT and an empty HF cache:
    huggingface_hub reads them when imported, hence a fresh interpreter."""
    env = {k: v for k, v in base.items() if not k.startswith("HF_") and "proxy" not in k.lower()}
    env.update(HF_ENDPOINT=endpoint, HF_HUB_CACHE=str(cache), PYTHONPATH=str(root))
    return env


def cli_counting_connects(
    args: Sequence[str], env: Mapping[str, str], port: int, root: Path
) -> tuple[subprocess.CompletedProcess, int]:
    """Run the command line in a fresh interpreter; its result and the connects to `port`."""
    done = subprocess.run(
        [sys.executable, "-c", _COUNTED_CLI, str(port), *args],
        capture_output=True,
        text=True,
        env=dict(env),
        cwd=root,
        timeout=600,
    )
    found = _COUNT.search(done.stderr)
    assert found is not None, done.stderr
    return done, int(found.group(1))
