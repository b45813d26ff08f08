"""preflight(prepared, plan): what would stop a grid, found before Ray starts."""

from __future__ import annotations

import json
import socket

import pytest

from orchestrator.errors import ConfigError
from orchestrator.run.config.load import load_run_config
from orchestrator.run.plan.planner import Plan
from orchestrator.run.plan.state import make_plan
from orchestrator.run.preflight.checks import (
    PreflightFailed,
    ProblemKind,
    Severity,
    preflight,
    raise_if_blocking,
)
from orchestrator.run.preflight.weights import WeightsStatus
from orchestrator.run.prepare.prepared import prepare
from storage.store import Store

TINY = ["model=tiny", "benchmark.limit=2", "template=instruct", "decoding=greedy"]


@pytest.fixture
def no_gpu(tmp_path, monkeypatch):
    """No nvidia-smi on PATH: a machine without GPUs."""
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def closed_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


def test_a_cpu_machine_runs_the_offline_model_when_cpu_engines_are_allowed(env, no_gpu):
    report = preflight(prepare(load_run_config(TINY)))
    assert report.blocking == ()
    assert [w.status for w in report.weights] == [WeightsStatus.BUILT_OFFLINE]
    (check,) = report.hardware
    assert check.placement.value == "cpu" and "runs on CPU" in check.reason
    assert report.gpus.count == 0
    json.dumps(report.to_json())  # JSON-native


def test_a_gpu_engine_on_a_cluster_without_gpus_is_blocking_unless_allowed(env, no_gpu):
    prepared = prepare(load_run_config([*TINY, "cluster.cpu_if_no_gpus=false"]))
    report = preflight(prepared)
    (problem,) = report.blocking
    assert (problem.kind, problem.severity) == (ProblemKind.HARDWARE, Severity.BLOCKING)
    assert "needs 1 GPU(s) and the cluster has none" in problem.message
    assert "cluster.cpu_if_no_gpus=true" in problem.message
    with pytest.raises(PreflightFailed) as info:
        raise_if_blocking(report, "run")
    assert isinstance(info.value, ConfigError)  # the CLI exits 2
    assert "run cannot start (1 blocking problem(s))" in str(info.value)
    data = report.to_json()
    assert data["blocking"] == 1 and data["problems"][0]["kind"] == "hardware"


def test_missing_weights_name_the_repo(env, no_gpu, tmp_path):
    folder = tmp_path / "no-such-model"
    prepared = prepare(load_run_config([*TINY, "model.builder=null", f"model.repo_id={folder}"]))
    (problem,) = preflight(prepared).blocking
    assert problem.kind is ProblemKind.WEIGHTS and str(folder) in problem.message


def test_an_unreachable_cluster_is_the_first_blocking_problem(env):
    port = closed_port()
    prepared = prepare(load_run_config([*TINY, f"cluster.address=127.0.0.1:{port}"]))
    report = preflight(prepared)
    assert report.cluster.reachable is False
    first = report.blocking[0]
    assert first.kind is ProblemKind.CLUSTER and f"127.0.0.1:{port}" in first.message
    assert report.to_json()["cluster"]["reachable"] is False
    # the remote cluster's GPUs are not known before Ray connects: not a problem yet
    assert [h.placement.value for h in report.hardware] == ["unknown"]


def test_with_a_plan_only_engines_still_to_generate_are_checked(env, no_gpu, tmp_path):
    prepared = prepare(load_run_config([*TINY, "cluster.cpu_if_no_gpus=false"]))
    nothing_left = Plan(settings=(), units=())
    report = preflight(prepared, nothing_left)
    assert report.hardware == () and report.weights == () and report.blocking == ()
    fresh = make_plan(Store(str(tmp_path / "store")), prepared)
    assert len(preflight(prepared, fresh).blocking) == 1
