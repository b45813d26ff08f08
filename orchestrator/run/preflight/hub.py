"""Can the Hugging Face Hub be reached? One TCP connect, before any Hub request of a command.

huggingface_hub retries a request that cannot connect (five times, backing off up to 8 s),
and transformers asks for several files in turn, so on a machine without network every file
a command asks for waits through the whole retry loop before it fails. One short connect to
the endpoint huggingface_hub uses tells an unreachable Hub apart first, and the command then
takes the Hub as offline: the weights check says "no network" without a request, and a
tokenizer is looked up in the HF cache only (`offline_hub`).

The endpoint and the offline switch are huggingface_hub's own (`HF_ENDPOINT`,
`HF_HUB_OFFLINE`, read when it is imported); a proxy for the endpoint's scheme (`HTTPS_PROXY`,
`NO_PROXY`, as the standard library and httpx read them) is what the connect goes to, since
the requests would go there too.
"""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from urllib.parse import urlsplit

from workers.spec import ModelSpec

DEFAULT_PORTS = {"https": 443, "http": 80}


class HubState(StrEnum):
    REACHABLE = "reachable"  # a TCP connect to the endpoint (or its proxy) succeeded
    OFFLINE = "offline"  # HF_HUB_OFFLINE is set: huggingface_hub sends nothing
    UNREACHABLE = "unreachable"  # the connect failed: no network, refused, no answer


@dataclass(frozen=True)
class HubProbe:
    """The outcome of the one probe of a command."""

    endpoint: str  # the Hub as huggingface_hub addresses it ("https://huggingface.co")
    state: HubState
    detail: str  # what was connected to, or why it failed

    @property
    def reachable(self) -> bool:
        return self.state is HubState.REACHABLE

    def reason(self) -> str:
        """Why nothing is asked of the Hub, for messages ("" when it is reachable)."""
        if self.state is HubState.OFFLINE:
            return "HF_HUB_OFFLINE is set"
        if self.state is HubState.UNREACHABLE:
            return f"the Hub ({self.endpoint}) cannot be reached ({self.detail})"
        return ""


def connect_target(
    endpoint: str, proxies: Mapping[str, str], bypass: Callable[[str], bool]
) -> tuple[str, int]:
    """The host and port a request to `endpoint` connects to first: the proxy for its scheme
    unless `bypass` says the host needs none, else the endpoint (its scheme's default port
    when it names none)."""
    url = urlsplit(endpoint)
    host = url.hostname or ""
    proxy = proxies.get(url.scheme)
    if proxy and not bypass(host):
        via = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        return via.hostname or "", via.port or DEFAULT_PORTS.get(via.scheme, 80)
    return host, url.port or DEFAULT_PORTS.get(url.scheme, 443)


def probe_endpoint(endpoint: str, timeout_s: float) -> HubProbe:
    """One TCP connect to `endpoint` (or its proxy) within `timeout_s`; never raises."""
    host, port = connect_target(endpoint, urllib.request.getproxies(), urllib.request.proxy_bypass)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as e:  # refused, unresolvable, timed out, no route
        why = str(e).strip() or type(e).__name__
        return HubProbe(endpoint, HubState.UNREACHABLE, f"{host}:{port}: {why}")
    return HubProbe(endpoint, HubState.REACHABLE, f"{host}:{port}")


def probe_hub(timeout_s: float) -> HubProbe:
    """The Hub huggingface_hub would ask: offline when HF_HUB_OFFLINE is set (no connect),
    else `probe_endpoint` of its endpoint."""
    from huggingface_hub import constants

    if constants.is_offline_mode():
        return HubProbe(constants.ENDPOINT, HubState.OFFLINE, "HF_HUB_OFFLINE is set")
    return probe_endpoint(constants.ENDPOINT, timeout_s)


@contextmanager
def offline_hub() -> Iterator[None]:
    """huggingface_hub's offline switch (what HF_HUB_OFFLINE sets when it is imported) for the
    block: transformers then reads the HF cache only, and huggingface_hub sends nothing, its
    own side requests included. Restored after the block, so one command's finding does not
    outlive it in a process that runs several (the tests)."""
    from huggingface_hub import constants

    before = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = before


def needs_hub(model: ModelSpec) -> bool:
    """A model whose files come from the Hub: neither built nor a folder on this machine."""
    return model.builder is None and not Path(model.repo_id).exists()
