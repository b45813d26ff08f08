"""Is `cluster.address` reachable? A TCP connect to the Ray head before `ray.init`.

`ray.init` to an address where nothing answers keeps retrying the GCS connection and logs
reconnect lines for minutes without saying what is wrong (measured: killed after 300 s). A plain
TCP connect answers in milliseconds (refused) or after `cluster.connect_timeout_s` (silently
dropped), so the driver can name the address and exit 2 before anything is started or written.
It checks the port only: a listening port that is not a Ray head is left to `ray.init`.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from orchestrator.errors import ClusterError
from orchestrator.run.config.specs import ClusterSpec

GCS_PORT = 6379  # `ray start --head` default port (the GCS), for an address without a port
CLIENT_PORT = 10001  # Ray client server default, for `ray://host` without a port
ADDRESS_FILE = "ray_current_cluster"  # Ray writes the latest local cluster's address here


@dataclass(frozen=True)
class Endpoint:
    """Where the driver will connect."""

    host: str
    port: int
    client: bool  # ray:// (Ray client) rather than a direct GCS connection
    source: str  # the address as configured, or how `auto` found it

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'ray://' if self.client else ''}{host}:{self.port}"


def parse_address(address: str) -> Endpoint:
    """`host:port`, `host` (port 6379), `ray://host[:port]` (port 10001), `[v6]:port`.
    ClusterError naming the address when it has none of these forms."""
    text = address.strip()
    client = text.startswith("ray://")
    rest = text[len("ray://") :] if client else text
    rest = rest.rstrip("/")
    default = CLIENT_PORT if client else GCS_PORT
    if rest.startswith("["):  # IPv6 literal
        host, _, tail = rest[1:].partition("]")
        port_text = tail[1:] if tail.startswith(":") else ""
    elif rest.count(":") == 1:
        host, port_text = rest.split(":")
    else:
        host, port_text = rest, ""
    try:
        port = int(port_text) if port_text else default
    except ValueError:
        port = -1
    if not host or not 0 < port < 65536 or "/" in host:
        raise ClusterError(
            f"cluster.address={address!r} is not HOST:PORT, HOST or ray://HOST[:PORT]"
        )
    return Endpoint(host, port, client, address)


def resolve_auto(env_address: str | None, ray_temp_dir: str | None) -> str | None:
    """What Ray's `auto` connects to: RAY_ADDRESS, else the address the latest `ray start` on
    this machine recorded (None: neither; Ray then looks for a local head process itself)."""
    if env_address and env_address != "auto":
        return env_address
    folder = ray_temp_dir or os.path.join(_system_temp(), "ray")
    try:
        with open(os.path.join(folder, ADDRESS_FILE), encoding="utf-8") as fh:
            recorded = fh.read().strip()
    except OSError:
        return None
    return recorded or None


def _system_temp() -> str:
    import tempfile

    return tempfile.gettempdir()


def probe_address(
    address: str,
    timeout_s: float,
    *,
    env_address: str | None = None,
    ray_temp_dir: str | None = None,
) -> Endpoint | None:
    """Connect to the Ray head of `address` over TCP and close again; the endpoint reached, or
    None for `auto` when no cluster address can be found here (Ray then fails fast itself).
    Raises ClusterError naming the address when the host does not resolve, nothing listens
    (refused), or nothing answers within `timeout_s` seconds."""
    target = address
    if address.strip() == "auto":
        found = resolve_auto(env_address, ray_temp_dir)
        if found is None:
            return None
        target = found
    endpoint = parse_address(target)
    shown = address if target == address else f"{address} ({target})"
    try:
        with socket.create_connection((endpoint.host, endpoint.port), timeout=timeout_s):
            pass
    except socket.gaierror as e:
        raise ClusterError(
            f"cluster.address={shown}: host {endpoint.host!r} does not resolve ({e.strerror})"
        ) from e
    except ConnectionRefusedError as e:
        raise ClusterError(
            f"cluster.address={shown}: nothing listens at {endpoint.host}:{endpoint.port} "
            "(connection refused); is the Ray head running, and is this its port?"
        ) from e
    except TimeoutError as e:
        raise ClusterError(
            f"cluster.address={shown}: no answer from {endpoint.host}:{endpoint.port} within "
            f"{timeout_s:g} s (cluster.connect_timeout_s); a firewall or the wrong host?"
        ) from e
    except OSError as e:
        raise ClusterError(
            f"cluster.address={shown}: cannot reach {endpoint.host}:{endpoint.port} ({e})"
        ) from e
    return Endpoint(endpoint.host, endpoint.port, endpoint.client, target)


def probe_cluster(cluster: ClusterSpec) -> Endpoint | None:
    """`probe_address` for a configured cluster; None for a private local instance (no
    address) and for an `auto` that finds nothing to probe."""
    if not cluster.address:
        return None
    return probe_address(
        cluster.address,
        cluster.connect_timeout_s,
        env_address=cluster.env_address,
        ray_temp_dir=cluster.ray_temp_dir,
    )
