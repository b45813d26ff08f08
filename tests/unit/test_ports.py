"""tests/ports.py: the ports a Ray node's components are given are distinct."""

from __future__ import annotations

import socket

from tests.ports import free_port, free_ports


def test_free_ports_are_distinct_and_bindable():
    ports = free_ports(64)
    assert len(set(ports)) == 64
    with socket.socket() as s:
        s.bind(("127.0.0.1", free_port()))
