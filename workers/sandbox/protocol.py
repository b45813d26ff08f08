"""Messages between the driver and a fork server: one JSON object per datagram of a
SOCK_SEQPACKET socket pair, with file descriptors attached (SCM_RIGHTS).

Standard library only (imported by the fork server, see server.py). Program text and files
never travel here: they go through a per-run pipe read only inside the run (child.py), so the
long-lived server never holds one program's text while it forks the next.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Sequence

MAX_MESSAGE = 1 << 16  # control messages only: a few hundred bytes
MAX_FDS = 8


_BOOTSTRAP = """\
import json, sys, types
config = json.loads(sys.argv[1])
for name, path in zip(("workers", "workers.sandbox"), config["package_dirs"]):
    package = types.ModuleType(name)
    package.__path__ = [path]
    sys.modules[name] = package
from {module} import main
main(config)
"""


def bootstrap(module: str) -> str:
    """`python -I -B -c` source that imports `module` (a server-side module) without running
    the package __init__ files, and calls its main(config) with the JSON in argv[1] (whose
    "package_dirs" are the folders of the workers and workers.sandbox packages)."""
    return _BOOTSTRAP.format(module=module)


class ProtocolError(RuntimeError):
    """The peer sent something that is not a control message, or went away mid-exchange."""


def socket_pair() -> tuple[socket.socket, socket.socket]:
    """(driver end, server end), both close-on-exec."""
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)


def send(sock: socket.socket, message: dict, fds: Sequence[int] = ()) -> None:
    data = json.dumps(message, separators=(",", ":")).encode()
    if len(data) > MAX_MESSAGE:
        raise ProtocolError(f"control message of {len(data)} bytes (at most {MAX_MESSAGE})")
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.sendall(data)


def receive(sock: socket.socket) -> tuple[dict | None, list[int]]:
    """The next message and its fds; (None, []) once the peer has closed its end."""
    data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, MAX_FDS)
    if not data:
        for fd in fds:
            os.close(fd)
        return None, []
    try:
        message = json.loads(data)
    except ValueError as e:
        for fd in fds:
            os.close(fd)
        raise ProtocolError(f"not a control message: {data[:80]!r}") from e
    if not isinstance(message, dict):
        raise ProtocolError(f"not a control message: {data[:80]!r}")
    return message, fds
