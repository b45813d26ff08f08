"""`doctor`: the machine, and with a grid whether it can start here."""

from __future__ import annotations

import json
import socket

from orchestrator.cli import main
from orchestrator.tools.doctor import render_doctor


def closed_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


def test_doctor_without_a_grid_describes_the_machine(env, capsys):
    assert main(["doctor", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "grid" not in data
    assert set(data["gpu"]) == {"count", "names", "source"}


def test_doctor_with_a_grid_reports_its_blocking_problems(env, capsys):
    port = closed_port()
    assert main(["doctor", "--json", "model=tiny", f"cluster.address=127.0.0.1:{port}"]) == 2
    data = json.loads(capsys.readouterr().out)
    grid = data["grid"]
    assert grid["blocking"] == 1 and grid["cluster"]["reachable"] is False
    text = render_doctor(data)
    assert f"cluster 127.0.0.1:{port}: UNREACHABLE" in text
    assert "weights tiny: built offline" in text
    assert f"BLOCKING cluster: cluster.address=127.0.0.1:{port}: nothing listens" in text
    assert main(["doctor", "model=tiny"]) == 0  # the local instance: nothing blocks
    assert "blocking problems: 0" in capsys.readouterr().out
