"""The local Ray instance a run starts (run/execute/raycluster.py): its services outside the
driver's process group, so a signal to that group reaches the driver alone, and none that a
private instance never uses."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[5]

# A driver in a session of its own: it starts the local instance, sends SIGTERM to its whole
# process group (as a scheduler does to a job), waits until GCS would have exited had it been
# in that group, then submits the first task of a function (which Ray exports to GCS first)
# and stops the instance. With GCS dead the submission would block until Ray ended the
# process, 60 s later, with exit 1. The SIGTERM is recorded by the handler the driver had
# before it started Ray: ray.init's own (exit 15) is kept out.
DRIVER = textwrap.dedent(
    """
    import os, signal, time

    import ray

    from orchestrator.errors import Interrupted
    from orchestrator.run.config.load import load_run_config
    from orchestrator.run.execute.raycluster import start_ray, stop_ray
    from orchestrator.run.execute.signals import StopRequest, recording_signals

    cluster = load_run_config(["cluster.num_cpus=1"]).cluster
    try:
        with recording_signals(StopRequest()) as stop:
            start_ray(cluster)
            os.killpg(0, signal.SIGTERM)
            while not stop.requested:
                time.sleep(0.01)
            time.sleep(3)

            @ray.remote(num_cpus=0)
            def one():
                return 1

            print("task returned", ray.get(one.remote(), timeout=20), flush=True)
            stop_ray()
    except Interrupted as e:  # the recorded stop, raised as the block ends
        print("stopped after", e.name, flush=True)
    """
)


def test_a_signal_to_the_drivers_process_group_leaves_the_local_instance_running(tmp_path):
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "RAY_AUTH_MODE": "disabled",
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # the SIGTERM to its group stays away from pytest's
    )
    try:
        out, _ = proc.communicate(timeout=50)
    except subprocess.TimeoutExpired:
        proc.kill()  # Ray's services die with it (they are bound to their parent)
        out, _ = proc.communicate()
        pytest.fail(f"the driver hung after the signal to its group:\n{out}")
    assert proc.returncode == 0, out
    assert "task returned 1" in out, out
    assert "stopped after SIGTERM" in out, out


def test_the_services_start_outside_the_callers_process_group():
    """Every process the local instance starts, and only while it starts; the autoscaler's
    monitor and the log monitor are not among them, and tasks and actors run without them."""
    import ray
    from ray._private import parameter, services

    from orchestrator.run.config.load import load_run_config
    from orchestrator.run.execute.raycluster import start_ray, stop_ray

    original, params = services.ConsolePopen, parameter.RayParams
    if ray.is_initialized():
        pytest.skip("another test left Ray connected")
    before = set(_descendants(os.getpid()))
    info = start_ray(load_run_config(["cluster.num_cpus=1"]).cluster)
    try:
        assert info["started"]
        assert services.ConsolePopen is original  # put back after ray.init
        assert parameter.RayParams is params
        started = set(_descendants(os.getpid())) - before
        assert started, "the local instance started no process"
        in_my_group = [pid for pid in started if _pgid(pid) == os.getpgrp()]
        assert in_my_group == []
        scripts = {Path(arg).name for pid in started for arg in _cmdline(pid)}
        assert "gcs_server" in scripts and "raylet" in scripts, scripts
        assert not {"monitor.py", "log_monitor.py"} & scripts, scripts

        @ray.remote(num_cpus=0)
        class Echo:
            def echo(self, value):
                return value

        @ray.remote(num_cpus=0)
        def double(value):
            return 2 * value

        assert ray.get([Echo.remote().echo.remote(3), double.remote(4)], timeout=60) == [3, 8]
    finally:
        stop_ray()


class Service:
    def __init__(self, name: str, quiet: bool = False):
        self.name, self.quiet = name, quiet


def test_a_swapped_class_gets_its_defaults_unless_given_and_is_put_back(caplog):
    from types import SimpleNamespace

    from orchestrator.run.execute.raycluster import _constructed_with

    owner = SimpleNamespace(Service=Service)
    with _constructed_with(owner, "Service", {"quiet": True}, "unsupported"):
        assert owner.Service("a").quiet is True
        assert owner.Service("b", quiet=False).quiet is False
        assert isinstance(owner.Service("c"), Service)
    assert owner.Service is Service
    assert "unsupported" not in caplog.text


@pytest.mark.parametrize("name, defaults", [("Missing", {"quiet": True}), ("Service", {"loud": 1})])
def test_a_class_missing_or_without_the_argument_is_left_alone_and_said(caplog, name, defaults):
    from types import SimpleNamespace

    from orchestrator.run.execute.raycluster import _constructed_with

    owner = SimpleNamespace(Service=Service)
    with _constructed_with(owner, name, defaults, "this Ray version differs"):
        assert owner.Service is Service
    assert "this Ray version differs" in caplog.text


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if stat[0] != "Z":
            children.setdefault(int(stat[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().split("\0")
    except OSError:
        return []


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None
