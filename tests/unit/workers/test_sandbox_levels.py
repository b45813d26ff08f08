"""The sandbox's decisions without running programs: what the view binds, which level a
host's facts make, `limits.require`, and the control protocol."""

from __future__ import annotations

import logging
import os

import pytest

from workers import execution
from workers.execspec import ExecJob, IsolationLevel, SandboxLimits
from workers.sandbox import IsolationBelowRequired, capabilities, protocol
from workers.sandbox.probe import ALL_STEPS
from workers.sandbox.view import covered_binds, plan_view

FULL_FACTS = {
    **dict.fromkeys(
        (
            "mount_namespace",
            "filesystem_view",
            "pid_namespace",
            "own_proc",
            "ipc_namespace",
            "disk_quota",
            "no_new_privs",
            "capabilities_dropped",
            "network_namespace",
            "drop_privileges",
            "memory_cgroup",
            "pids_cgroup",
            "root",
        ),
        True,
    ),
    "user_namespace": False,
    "mode": "namespaces",
}


@pytest.fixture
def host(monkeypatch):
    """Replace the probed facts; returns the dict to edit."""
    facts = dict(FULL_FACTS)
    monkeypatch.setattr(capabilities, "host_facts", lambda: dict(facts))
    return facts


def test_view_binds_the_targets_of_symlink_chains_and_recreates_the_links(tmp_path):
    (tmp_path / "opt" / "tool-1.0" / "bin").mkdir(parents=True)
    exe = tmp_path / "opt" / "tool-1.0" / "bin" / "tool"
    exe.write_text("#!/bin/sh\n")
    (tmp_path / "alternatives").mkdir()
    (tmp_path / "alternatives" / "tool").symlink_to(exe)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "tool").symlink_to("../alternatives/tool")
    plan = plan_view([str(tmp_path / "bin" / "tool")])
    binds = dict(plan.binds)
    links = dict(plan.links)
    assert binds[str(exe)] is False
    assert links[str(tmp_path / "bin" / "tool")] == "../alternatives/tool"
    assert links[str(tmp_path / "alternatives" / "tool")] == str(exe)
    assert "/" not in binds and binds["/usr"] is True  # the system, never the host's root


def test_view_keeps_one_bind_per_tree_and_never_the_root(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    plan = plan_view([str(tmp_path / "a"), str(tmp_path / "a" / "b"), "/", str(tmp_path / "gone")])
    paths = [p for p, _ in plan.binds]
    assert str(tmp_path / "a") in paths
    assert str(tmp_path / "a" / "b") not in paths and "/" not in paths
    assert str(tmp_path / "gone") not in paths  # missing paths are left out


def test_binds_under_tmp_are_kept_over_each_runs_own_tmp(tmp_path):
    if not str(tmp_path).startswith("/tmp/"):
        pytest.skip("the temporary folder is not under /tmp here")
    plan = plan_view([str(tmp_path)])
    assert str(tmp_path) in covered_binds(plan)
    assert "/usr" not in covered_binds(plan)


@pytest.mark.parametrize(
    ("missing", "network", "level"),
    [
        ((), False, IsolationLevel.FULL),
        (("memory_cgroup", "pids_cgroup"), False, IsolationLevel.NAMESPACES),
        (("drop_privileges",), False, IsolationLevel.NAMESPACES),
        (("network_namespace",), False, IsolationLevel.PROCESS),  # the program keeps network
        (("network_namespace",), True, IsolationLevel.FULL),  # network was asked for
        (("filesystem_view",), False, IsolationLevel.PROCESS),
        (("own_proc",), False, IsolationLevel.PROCESS),
    ],
)
def test_level_follows_the_facts(host, missing, network, level):
    for name in missing:
        host[name] = False
    report = capabilities.sandbox_isolation(SandboxLimits(network=network))
    assert report.level is level
    assert set(report.facts["missing"]) == set(missing) - (
        {"network_namespace"} if network else set()
    )
    assert report.facts["level"] == level.value


def test_process_mode_is_the_process_level(host):
    host["mode"] = "process"
    assert capabilities.sandbox_isolation().level is IsolationLevel.PROCESS


def test_require_fails_below_the_level_and_names_what_is_missing(host):
    host["memory_cgroup"] = host["pids_cgroup"] = False
    limits = SandboxLimits(require=IsolationLevel.FULL)
    with pytest.raises(IsolationBelowRequired, match="'namespaces', below the required 'full'"):
        capabilities.check_isolation(limits)
    with pytest.raises(IsolationBelowRequired, match="memory_cgroup, pids_cgroup"):
        capabilities.check_isolation(limits)
    assert capabilities.check_isolation(SandboxLimits(require=IsolationLevel.NAMESPACES)).level == (
        IsolationLevel.NAMESPACES
    )


def test_a_weaker_level_is_stated_once(host, caplog, monkeypatch):
    monkeypatch.setattr(capabilities, "_WARNED", set())
    host["memory_cgroup"] = host["pids_cgroup"] = False
    with caplog.at_level(logging.WARNING, logger=capabilities.__name__):
        for _ in range(3):
            capabilities.check_isolation(SandboxLimits())
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "'namespaces'" in lines[0] and "RLIMIT_AS" in lines[0]


def test_root_without_the_uid_switch_runs_nothing(host):
    host["drop_privileges"] = False
    with pytest.raises(capabilities.SandboxUnavailable, match="refusing"):
        capabilities.check_isolation(SandboxLimits())


def test_execute_jobs_fails_as_a_whole_below_require(host, monkeypatch):
    host["mode"] = "process"
    ran = []
    monkeypatch.setattr(execution, "run_python_program", lambda job, limits: ran.append(job))
    with pytest.raises(IsolationBelowRequired):
        execution.execute_jobs([ExecJob("a", "pass", 1.0)], SandboxLimits(require="namespaces"))
    assert ran == []


def test_protocol_carries_messages_and_fds():
    driver, server = protocol.socket_pair()
    r, w = os.pipe()
    try:
        protocol.send(driver, {"op": "run", "fds": ["payload"]}, [r])
        message, fds = protocol.receive(server)
        assert message == {"op": "run", "fds": ["payload"]} and len(fds) == 1
        os.write(w, b"x")
        assert os.read(fds[0], 1) == b"x"
        os.close(fds[0])
        driver.close()
        assert protocol.receive(server) == (None, [])
    finally:
        server.close()
        os.close(r)
        os.close(w)


def _probes(monkeypatch, *runs):
    """Make the probe answer `runs` in turn (the steps each found); returns the calls made."""
    answers = iter(runs)
    calls = []

    def one():
        found = next(answers)
        calls.append(found)
        return {step: step in found for step in ALL_STEPS}

    monkeypatch.setattr(capabilities, "_run_probe", one)
    return calls


ROOT_STEPS = frozenset(ALL_STEPS) - {"user_namespace"}


def test_a_probe_that_missed_a_step_once_is_run_again_and_the_fuller_run_kept(monkeypatch, caplog):
    calls = _probes(monkeypatch, ROOT_STEPS - {"network_namespace"}, ROOT_STEPS)
    with caplog.at_level("WARNING", logger=capabilities.__name__):
        found = capabilities._steady_probe(root=True)
    assert len(calls) == 2
    assert found == {step: step in ROOT_STEPS for step in ALL_STEPS}
    assert "network_namespace missing in some" in caplog.text


def test_a_host_that_lacks_a_step_is_probed_up_to_the_tries_and_keeps_lacking_it(
    monkeypatch, caplog
):
    lacking = ROOT_STEPS - {"network_namespace"}
    calls = _probes(monkeypatch, lacking, lacking, lacking, ROOT_STEPS)
    with caplog.at_level("WARNING", logger=capabilities.__name__):
        found = capabilities._steady_probe(root=True)
    assert len(calls) == capabilities.PROBE_TRIES == 3
    assert found["network_namespace"] is False and found["pid_namespace"] is True
    assert "disagreed" not in caplog.text  # every run found the same


def test_a_complete_probe_is_run_once(monkeypatch):
    calls = _probes(monkeypatch, ROOT_STEPS)
    assert capabilities._steady_probe(root=True) == {s: s in ROOT_STEPS for s in ALL_STEPS}
    assert len(calls) == 1
    # not root: the user namespace is a step it has, the uid switch is not
    calls = _probes(monkeypatch, frozenset(ALL_STEPS) - {"drop_privileges"})
    assert capabilities._steady_probe(root=False)["user_namespace"] is True
    assert len(calls) == 1
