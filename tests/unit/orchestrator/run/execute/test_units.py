"""The dispatcher's start queue: units start in plan order as their GPUs free up, a narrow
unit passing a wide one that does not fit (the rule the plan's wall time replays)."""

from __future__ import annotations

import pytest

from orchestrator.errors import ClusterError
from orchestrator.run.config.load import load_run_config
from orchestrator.run.execute.units import StartQueue, Waiting, replica_gpus, unit_replicas
from orchestrator.run.plan.planner import plan_settings
from orchestrator.run.prepare.grid import Environment, expand_grid
from storage.index import build_index
from storage.store import Store


@pytest.fixture
def units(tmp_path):
    config = load_run_config(["model=tiny", "precision=bf16,fp16,fp32", "benchmark.limit=1"])
    cells = expand_grid(config, "hash", Environment())
    return plan_settings(cells, build_index(Store(str(tmp_path)))).units


def test_units_start_as_their_gpus_free_up(units):
    a, b, c = units
    queue = StartQueue(2, [Waiting(a, 1, 1.0), Waiting(b, 1, 2.0), Waiting(c, 4, 0.25)])
    # b needs both GPUs: c (one GPU as 4 replicas of a quarter) passes it
    assert [w.unit for w in queue.due()] == [a, c]
    assert queue.held == {a.engine_key: 1, c.engine_key: 1} and queue.due() == []
    queue.release(a.engine_key)
    assert queue.due() == []  # one GPU free, b needs two
    queue.release(c.engine_key)
    assert [w.unit for w in queue.due()] == [b] and not queue.waiting


def test_cpu_engines_all_start_at_once(units):
    queue = StartQueue(0, [Waiting(u, 1, 0.0) for u in units])
    assert len(queue.due()) == 3


def test_replicas_and_their_share_of_the_gpu(units):
    cluster = load_run_config(["model=tiny", "cluster.replicas=4"]).cluster
    assert unit_replicas(units[0], cluster) == 4
    assert replica_gpus(units[0], 8.0, 4, cluster) == 0.25
    no_cpu = load_run_config(["model=tiny", "cluster.cpu_if_no_gpus=false"]).cluster
    with pytest.raises(ClusterError, match="the cluster has none"):
        replica_gpus(units[0], 0.0, 1, no_cpu)
