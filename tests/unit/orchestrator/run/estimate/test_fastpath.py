"""`plan` prices the grid's fast path (backend=auto seed_policy=per_sample) on the cluster it
sizes, beside the grid as given (orchestrator/run/estimate/fastpath.py)."""

from __future__ import annotations

import json

from orchestrator.cli import main
from orchestrator.errors import ConfigError
from orchestrator.run.config.load import load_run_config
from orchestrator.run.estimate import fastpath
from orchestrator.run.plan.state import make_plan
from orchestrator.run.prepare.prepared import prepare
from storage.store import Store

GRID = ["model=tiny", "benchmark.limit=2", "decoding=greedy,t0.8", "cluster.gpus=2"]


def keys(overrides: list[str]) -> set[str]:
    prepared = prepare(load_run_config(overrides))
    return {i.key for i in make_plan(Store(prepared.config.store), prepared).settings}


def test_the_fast_path_of_a_faithful_grid_is_sized_on_the_same_cluster(env, tmp_path):
    grid = [*GRID, f"store={tmp_path / 's'}"]
    fast = fastpath.fast_path_json(grid, keys(grid))
    assert fast is not None and fast["overrides"] == ["backend=auto", "seed_policy=per_sample"]
    assert fast["gpus"] == 2 and fast["makespan_s"] > 0 and fast["settings"] == 2
    # a grid that is the fast path already has none beside it
    already = [*grid, "backend=auto", "seed_policy=per_sample"]
    assert fastpath.fast_path_json(already, keys(already)) is None


def test_a_grid_the_fast_path_cannot_apply_to_says_why(env, tmp_path, monkeypatch):
    def refuse(config):
        raise ConfigError("backend is an axis of this grid")

    monkeypatch.setattr(fastpath, "prepare", refuse)
    grid = [*GRID, f"store={tmp_path / 's'}"]
    assert fastpath.fast_path_json(grid, set()) == {
        "overrides": ["backend=auto", "seed_policy=per_sample"],
        "error": "backend is an axis of this grid",
    }


def test_plan_json_carries_it(env, tmp_path, capsys):
    assert main(["plan", "--json", "--estimate-only", *GRID, f"store={tmp_path / 's'}"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["fast_path"]["gpus"] == 2
