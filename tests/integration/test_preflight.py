"""Fail early, end to end: `reprogrid plan` and `doctor` as a user runs them (a subprocess with
its own environment), against a closed cluster port, an offline Hub, and a local Hub stand-in
that answers 404 as the Hub does; and the cost estimate of a fresh store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.orchestrator.run.preflight.hub_server import hub_server

ROOT = Path(__file__).resolve().parents[2]
# An upper bound for a command that must fail fast: a hang (Ray's reconnect loop) fails here.
FAIL_FAST_S = 30


@pytest.fixture
def cli_env(env, tmp_path):
    """The test environment for a `reprogrid` subprocess, with a private, empty HF cache."""
    clean = {k: v for k, v in env.items() if not k.startswith("HF_")}
    clean.update(PYTHONPATH=str(ROOT), HF_HUB_CACHE=str(tmp_path / "hf-cache"))
    return clean


def reprogrid(args, env, timeout=FAIL_FAST_S * 4) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.mark.parametrize("command", ["plan", "run"])
def test_an_unreachable_cluster_address_exits_2_naming_it(cli_env, tmp_path, command):
    store = tmp_path / "store"
    done = reprogrid(
        [
            command,
            "model=tiny",
            "benchmark.limit=2",
            "cluster.address=127.0.0.1:1",
            f"store={store}",
        ],
        cli_env,
        timeout=FAIL_FAST_S,
    )
    assert done.returncode == 2, done.stderr
    assert "cluster.address=127.0.0.1:1: nothing listens at 127.0.0.1:1" in done.stderr
    assert not (store / "runs").exists()  # nothing written


def test_doctor_checks_a_grid(cli_env):
    done = reprogrid(["doctor", "--json", "model=tiny", "cluster.address=127.0.0.1:1"], cli_env)
    assert done.returncode == 2
    grid = json.loads(done.stdout)["grid"]
    assert grid["cluster"]["reachable"] is False
    assert [w["status"] for w in grid["weights"]] == ["built offline"]
    assert grid["problems"][0]["kind"] == "cluster"


def test_a_fresh_store_gets_an_estimate_and_an_offline_hub_model_is_blocking(cli_env, tmp_path):
    env = {**cli_env, "HF_HUB_OFFLINE": "1"}
    args = ["plan", "--json", "grid=paper60", "model=deepseekcoder-6.7b-instruct"]
    done = reprogrid([*args, f"store={tmp_path / 'store'}"], env)
    data = json.loads(done.stdout)
    assert data["estimated_gpu_hours"] is not None and data["estimated_gpu_hours"] > 1.0
    assert data["estimated_s"] > 0 and data["estimate_basis"] == "model"
    settings = [s for e in data["engines"] for s in e["settings"]]
    assert len(settings) == 60
    assert {(s["generated_samples"], s["total_samples"]) for s in settings} == {(0, 164)}
    # no network for a local run: blocking, naming the repo id and the revision
    assert done.returncode == 2
    assert "deepseek-ai/deepseek-coder-6.7b-instruct at revision main" in done.stderr
    assert "HF_HUB_OFFLINE" in done.stderr


def test_a_repository_the_hub_does_not_have_is_named(cli_env, tmp_path):
    with hub_server({"org/present": {"main"}}) as endpoint:
        env = {**cli_env, "HF_ENDPOINT": endpoint}
        base = [
            "plan",
            "model=deepseekcoder-1.3b-base",
            "benchmark.limit=2",
            f"store={tmp_path / 'store'}",
        ]
        missing = reprogrid([*base, "model.repo_id=org/missing"], env)
        bad_revision = reprogrid([*base, "model.repo_id=org/present", "model.revision=v2"], env)
        present = reprogrid([*base, "model.repo_id=org/present"], env)
    assert missing.returncode == 2
    assert "repository org/missing (revision main) not found" in missing.stderr
    assert bad_revision.returncode == 2
    assert "revision v2 not found in repository org/present" in bad_revision.stderr
    assert present.returncode == 0, present.stderr
    assert "weights deepseekcoder-1.3b-base: downloadable" in present.stdout


def test_a_gpu_engine_without_gpus_is_a_plan_error_unless_cpu_is_allowed(cli_env, tmp_path):
    empty = tmp_path / "bin"  # a PATH without nvidia-smi: a machine without GPUs
    empty.mkdir()
    env = {**cli_env, "PATH": str(empty)}
    base = ["plan", "model=tiny", "benchmark.limit=2", f"store={tmp_path / 'store'}"]
    refused = reprogrid([*base, "cluster.cpu_if_no_gpus=false"], env)
    assert refused.returncode == 2
    assert "needs 1 GPU(s) and the cluster has none" in refused.stderr
    allowed = reprogrid(base, env)
    assert allowed.returncode == 0
    assert "none here: runs on CPU (cluster.cpu_if_no_gpus=true)" in allowed.stdout
    assert "(1 GPU)" not in allowed.stdout
