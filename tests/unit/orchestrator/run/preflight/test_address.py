"""cluster.address is probed over TCP before Ray: against a real closed port and a real
listening socket."""

from __future__ import annotations

import socket

import pytest

from orchestrator.errors import ClusterError
from orchestrator.run.config.load import load_run_config
from orchestrator.run.preflight.address import (
    ADDRESS_FILE,
    CLIENT_PORT,
    GCS_PORT,
    parse_address,
    probe_address,
    probe_cluster,
    resolve_auto,
)


@pytest.fixture
def listening():
    """A real listening socket on 127.0.0.1; yields its port."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    yield server.getsockname()[1]
    server.close()


@pytest.fixture
def closed_port():
    """A port nothing listens on: bound once to get a free number, then closed."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


def test_a_closed_port_is_a_cluster_error_naming_the_address(closed_port):
    address = f"127.0.0.1:{closed_port}"
    with pytest.raises(ClusterError) as info:
        probe_address(address, timeout_s=5.0)
    assert f"cluster.address={address}" in str(info.value)
    assert "connection refused" in str(info.value)


def test_port_1_with_nothing_listening_is_refused():
    with pytest.raises(ClusterError, match=r"cluster.address=127.0.0.1:1: nothing listens"):
        probe_address("127.0.0.1:1", timeout_s=5.0)


def test_a_listening_socket_is_reached(listening):
    endpoint = probe_address(f"127.0.0.1:{listening}", timeout_s=5.0)
    assert endpoint is not None and (endpoint.host, endpoint.port) == ("127.0.0.1", listening)
    assert str(endpoint) == f"127.0.0.1:{listening}" and not endpoint.client


def test_a_ray_client_address_probes_its_port(listening, closed_port):
    endpoint = probe_address(f"ray://127.0.0.1:{listening}", timeout_s=5.0)
    assert endpoint is not None and endpoint.client
    assert str(endpoint) == f"ray://127.0.0.1:{listening}"
    with pytest.raises(ClusterError, match=rf"ray://127.0.0.1:{closed_port}"):
        probe_address(f"ray://127.0.0.1:{closed_port}", timeout_s=5.0)


def test_a_host_that_does_not_resolve_is_named():
    with pytest.raises(ClusterError, match="host 'no-such-host.invalid' does not resolve"):
        probe_address("no-such-host.invalid:6379", timeout_s=5.0)


@pytest.mark.parametrize(
    ("address", "host", "port", "client"),
    [
        ("head:6380", "head", 6380, False),
        ("head", "head", GCS_PORT, False),
        ("ray://head", "head", CLIENT_PORT, True),
        ("ray://head:10002/", "head", 10002, True),
        ("[::1]:6379", "::1", 6379, False),
    ],
)
def test_parse_address(address, host, port, client):
    endpoint = parse_address(address)
    assert (endpoint.host, endpoint.port, endpoint.client) == (host, port, client)


@pytest.mark.parametrize("address", ["head:port", "head:0", "head:70000", ":6379", "a/b:1"])
def test_malformed_addresses_are_errors_naming_them(address):
    with pytest.raises(ClusterError, match="is not HOST:PORT"):
        parse_address(address)


def test_auto_uses_ray_address_then_rays_address_file(tmp_path, listening, closed_port):
    assert resolve_auto(f"10.0.0.1:{listening}", None) == f"10.0.0.1:{listening}"
    assert resolve_auto(None, str(tmp_path)) is None  # nothing recorded: Ray decides
    (tmp_path / ADDRESS_FILE).write_text(f"127.0.0.1:{listening}\n")
    assert resolve_auto(None, str(tmp_path)) == f"127.0.0.1:{listening}"
    endpoint = probe_address("auto", 5.0, ray_temp_dir=str(tmp_path))
    assert endpoint is not None and endpoint.port == listening
    with pytest.raises(ClusterError, match=rf"cluster.address=auto \(127.0.0.1:{closed_port}\)"):
        probe_address("auto", 5.0, env_address=f"127.0.0.1:{closed_port}")
    assert probe_address("auto", 5.0, ray_temp_dir=str(tmp_path / "none")) is None


def test_probe_cluster_uses_the_configured_timeout_and_skips_a_local_instance(closed_port):
    local = load_run_config(["model=tiny"]).cluster
    assert local.address is None and probe_cluster(local) is None
    remote = load_run_config(
        ["model=tiny", f"cluster.address=127.0.0.1:{closed_port}", "cluster.connect_timeout_s=3"]
    ).cluster
    assert remote.connect_timeout_s == 3.0
    with pytest.raises(ClusterError, match=f"127.0.0.1:{closed_port}"):
        probe_cluster(remote)
