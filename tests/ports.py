"""Free TCP ports for the servers the tests start (Ray nodes, moto, an OpenAI-compatible
server)."""

from __future__ import annotations

import contextlib
import socket


def free_ports(n: int) -> list[int]:
    """`n` distinct ports free now. Each socket stays bound until all are chosen: a port
    released at once can be the kernel's next answer too, and Ray refuses a port given to two
    of its components."""
    with contextlib.ExitStack() as held:
        ports = []
        for _ in range(n):
            s = held.enter_context(socket.socket())
            s.bind(("127.0.0.1", 0))
            ports.append(int(s.getsockname()[1]))
    return ports


def free_port() -> int:
    return free_ports(1)[0]
