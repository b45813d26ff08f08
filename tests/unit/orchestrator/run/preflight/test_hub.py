"""One probe of the Hub per command (orchestrator/run/preflight/hub.py): where it connects
(the endpoint, or its proxy), what it finds, and that a command facing an unreachable Hub makes
that one connect and no retry loop: `plan`'s weights check of several models (and
`plan --estimate-only`, which asks nothing), against a closed port as HF_ENDPOINT in a fresh
interpreter (huggingface_hub reads HF_ENDPOINT when imported)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from orchestrator.run.preflight.hub import (
    HubState,
    connect_target,
    offline_hub,
    probe_endpoint,
    probe_hub,
)
from tests.unit.orchestrator.run.preflight.hub_server import (
    cli_counting_connects,
    closed_port,
    hub_env,
    hub_server,
)

ROOT = Path(__file__).resolve().parents[5]


@pytest.mark.parametrize(
    ("endpoint", "proxies", "expected"),
    [
        ("https://huggingface.co", {}, ("huggingface.co", 443)),
        ("http://127.0.0.1:8080/", {}, ("127.0.0.1", 8080)),
        ("https://huggingface.co", {"https": "http://proxy.local:3128"}, ("proxy.local", 3128)),
        ("https://huggingface.co", {"https": "proxy.local:3128"}, ("proxy.local", 3128)),
        ("https://huggingface.co", {"http": "http://proxy.local:3128"}, ("huggingface.co", 443)),
    ],
)
def test_the_probe_connects_where_the_requests_would(endpoint, proxies, expected):
    assert connect_target(endpoint, proxies, lambda host: False) == expected


def test_a_host_the_proxy_settings_exempt_is_connected_to_directly():
    proxies = {"https": "http://proxy.local:3128"}
    assert connect_target("https://hub.internal", proxies, lambda h: h == "hub.internal") == (
        "hub.internal",
        443,
    )


def test_a_closed_port_is_unreachable_and_a_listening_one_reachable():
    port = closed_port()
    closed = probe_endpoint(f"http://127.0.0.1:{port}", 2.0)
    assert closed.state is HubState.UNREACHABLE and not closed.reachable
    assert f"127.0.0.1:{port}" in closed.detail
    assert closed.reason().startswith(f"the Hub (http://127.0.0.1:{port}) cannot be reached")
    with hub_server({}) as endpoint:
        answered = probe_endpoint(endpoint, 2.0)
    assert answered.reachable and answered.reason() == ""


def test_hf_hub_offline_is_offline_without_a_connect(monkeypatch):
    from huggingface_hub import constants

    def no_connect(*args, **kwargs):
        raise AssertionError("the probe connected although HF_HUB_OFFLINE is set")

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(socket, "create_connection", no_connect)
    probe = probe_hub(2.0)
    assert probe.state is HubState.OFFLINE and probe.reason() == "HF_HUB_OFFLINE is set"


def test_the_offline_switch_holds_for_its_block_only(monkeypatch):
    from huggingface_hub import constants, is_offline_mode

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    with offline_hub():
        assert is_offline_mode()  # what transformers asks before it sends a request
    assert not is_offline_mode()


MODELS = "model=deepseekcoder-1.3b-base,deepseekcoder-1.3b-instruct,codegemma-2b"


def test_plan_against_an_unreachable_hub_probes_once_and_estimate_only_asks_nothing(env, tmp_path):
    port = closed_port()
    cli_env = hub_env(os.environ, f"http://127.0.0.1:{port}", tmp_path / "hub", ROOT)
    base = ["plan", MODELS, "benchmark.limit=2", f"store={tmp_path / 'store'}"]
    checked, connects = cli_counting_connects(base, cli_env, port, ROOT)
    assert checked.returncode == 2
    assert connects == 1  # one probe for three models, and no request or retry after it
    for repo in ("deepseek-coder-1.3b-base", "deepseek-coder-1.3b-instruct", "codegemma-2b"):
        assert f"/{repo} at revision main: not in the HF cache and the Hub" in checked.stderr
    assert f"cannot be reached (127.0.0.1:{port}: " in checked.stderr
    asked, connects = cli_counting_connects(
        [*base, "--estimate-only", "--json"], cli_env, port, ROOT
    )
    assert asked.returncode == 0, asked.stderr
    assert connects == 0
    data = json.loads(asked.stdout)
    assert data["preflight"]["weights_checked"] is False and data["preflight"]["weights"] == []
    assert data["estimated_gpu_hours"] > 0 and data["preflight"]["blocking"] == 0
    text, connects = cli_counting_connects([*base, "--estimate-only"], cli_env, port, ROOT)
    assert text.returncode == 0 and connects == 0
    assert "weights: not checked (--estimate-only: nothing was asked of the Hub)" in text.stdout
