"""The dispatcher's start queue and units: first instances in plan order as GPUs free up (a
narrow unit passing a wide one), then more instances of a long running unit, by
analysis/schedule.py's rule (the plan replays it); replicas per instance, capped by the memory
of the GPU Ray names; which idle replica takes the next chunk."""

from __future__ import annotations

import pytest

from orchestrator.errors import ClusterError
from orchestrator.run.config.load import load_run_config
from orchestrator.run.config.specs import ChunkPolicy
from orchestrator.run.execute.chunks import Stored, UnitQueue, resume
from orchestrator.run.execute.units import (
    Replica,
    RunningUnit,
    StartQueue,
    Waiting,
    engine_label,
    gpu_memory_gb,
    replica_gpus,
    unit_replicas,
)
from orchestrator.run.plan.planner import plan_settings
from orchestrator.run.prepare.grid import Environment, expand_grid
from storage.index import build_index
from storage.store import Store

TASKS = tuple(f"Python/{i}" for i in range(20))


def planned(tmp_path, *overrides: str):
    config = load_run_config(["model=tiny", "benchmark.limit=1", *overrides])
    cells = expand_grid(config, "hash", Environment())
    return plan_settings(cells, build_index(Store(str(tmp_path)))).units


@pytest.fixture
def units(tmp_path):
    return planned(tmp_path, "precision=bf16,fp16,fp32")


def running(unit, replicas: int = 1, rate: float | None = None, load: float | None = None):
    """A started unit of `unit`'s settings over 20 problems, with one instance."""
    works = [resume(i.key, i.setting, TASKS, Stored())[0] for i in unit.settings]
    queue = UnitQueue(works, ChunkPolicy(), batched=False)
    if rate is not None:
        queue.measured(samples=10, seconds=10 / rate)
    items = {i.key: i for i in unit.settings}
    unit_run = RunningUnit(unit, queue, items, Waiting(unit, replicas, 1 / replicas))
    unit_run.instances, unit_run.load_s = 1, load
    for _ in range(replicas):
        unit_run.add(0, object(), 0.0)
    return unit_run


def test_first_instances_start_as_their_gpus_free_up(units):
    a, b, c = units
    queue = StartQueue(2, [Waiting(a, 1, 1.0), Waiting(b, 1, 2.0), Waiting(c, 4, 0.25)])
    # b needs both GPUs: c (one GPU as 4 replicas of a quarter) passes it
    assert [w.unit for w in queue.due([])] == [a, c]  # type: ignore[union-attr]
    queue.hold(a.engine_key, 0, 1)
    queue.hold(c.engine_key, 0, 1)
    assert queue.due([]) == []
    queue.release(a.engine_key, 0)
    assert queue.due([]) == []  # one GPU free, b needs two
    queue.release(c.engine_key, 0)
    assert [w.unit for w in queue.due([])] == [b] and not queue.waiting  # type: ignore[union-attr]


def test_units_that_can_never_start_are_each_named_with_the_gpus_they_need(units):
    a, b, c = units
    queue = StartQueue(2, [Waiting(b, 1, 2.0), Waiting(c, 2, 1.0)])
    queue.hold(a.engine_key, 0, 1)  # a holds one GPU; the other node's GPU was lost
    queue.capacity = 1
    message = queue.never_starts()
    assert message.startswith("2 unit(s) can never start: the cluster has 0 of 1 GPU(s) free")
    assert f"{engine_label(b)} needs 2 GPU(s); {engine_label(c)} needs 2 GPU(s)" in message
    assert engine_label(a) not in message
    assert "what is stored is kept" in message


def test_cpu_engines_all_start_at_once(units):
    queue = StartQueue(0, [Waiting(u, 1, 0.0) for u in units])
    assert len(queue.due([])) == 3


def test_a_measured_long_unit_gets_more_instances_on_free_gpus(tmp_path):
    [unit] = planned(tmp_path, "decoding=greedy,t0.8", "template=instruct,yi")
    queue = StartQueue(4)
    queue.hold(unit.engine_key, 0, 1)
    # its first chunk is not back: nothing says another instance would pay for its load
    assert queue.due([running(unit)]) == []
    # 80 samples at 0.1 samples/s is 800 s for one stream against a 5 s load: one more
    # instance for each free GPU
    long = running(unit, rate=0.1, load=5.0)
    assert long.state().shared_s == pytest.approx(400.0)  # two greedy settings' 40 samples
    assert long.state().chains_s == (200.0, 200.0)  # a chain per harness-seeded setting
    assert queue.due([long]) == [long, long, long]
    # at 100 samples/s the unit ends in under a second: no load pays for itself
    assert queue.due([running(unit, rate=100.0, load=5.0)]) == []


def test_idle_replicas_take_chunks_oldest_instance_first_longest_idle_first(tmp_path):
    [unit] = planned(tmp_path)
    unit_run = running(unit, replicas=2)
    unit_run.add(1, object(), 0.0)  # a second instance
    first, second, newer = unit_run.replicas
    first.idle_since, second.idle_since = 5.0, 3.0
    assert unit_run.feed_order() == [second, first, newer]
    second.in_flight = "ref"
    assert unit_run.feed_order() == [first, newer]
    assert unit_run.open_instances() == [0, 1]


def test_replicas_and_their_share_of_the_gpu(units):
    cluster = load_run_config(["model=tiny", "cluster.replicas=4"]).cluster
    assert unit_replicas(units[0], cluster, None) == 4
    assert replica_gpus(units[0], 8.0, 4, cluster) == 0.25
    no_cpu = load_run_config(["model=tiny", "cluster.cpu_if_no_gpus=false"]).cluster
    with pytest.raises(ClusterError, match="the cluster has none"):
        replica_gpus(units[0], 0.0, 1, no_cpu)


def test_replicas_are_capped_by_the_memory_of_the_gpu_ray_names(tmp_path):
    [fp32] = planned(tmp_path, "model=deepseekcoder-6.7b-instruct", "precision=fp32")
    cluster = load_run_config(["model=tiny", "cluster.replicas=8"]).cluster
    # 31 GB per replica (docs/cluster.md's table): 4 fit an H200, 2 an H100
    assert unit_replicas(fp32, cluster, 141.0) == 4
    assert unit_replicas(fp32, cluster, 80.0) == 2
    assert unit_replicas(fp32, cluster, None) == 8  # a GPU Ray cannot name: as asked
    assert gpu_memory_gb({"GPU": 8.0, "accelerator_type:H100": 1.0}) == 80.0
    assert gpu_memory_gb({"accelerator_type:H200": 1.0, "accelerator_type:H100": 1.0}) == 80.0
    assert gpu_memory_gb({"accelerator_type:A100": 1.0}) == 40.0  # its size unknown: the smaller
    assert gpu_memory_gb({"GPU": 64.0}) is None
    assert gpu_memory_gb({"accelerator_type:B200": 1.0}) is None


def test_a_replica_reports_progress_by_new_samples_or_tokens(tmp_path):
    replica = Replica(0, 0, object(), last_progress=0.0)
    replica.saw({"samples": 1, "tokens": 5}, 10.0)
    replica.saw({"samples": 1, "tokens": 5}, 20.0)
    assert replica.last_progress == 10.0
