"""The plan on a cluster: replicas change a unit's time and GPU-hours, more GPUs shorten the
wall time past the longest unit (it runs on several instances), memory caps replicas, and the
cluster is `cluster.gpus` or the target's GPUs (orchestrator/run/estimate/sizing.py)."""

from __future__ import annotations

import pytest

from orchestrator.run.config.load import load_run_config
from orchestrator.run.estimate.estimator import plan_json
from orchestrator.run.estimate.sizing import cluster_target
from orchestrator.run.plan.state import make_plan
from orchestrator.run.preflight.hardware import GpuInventory, GpuSource
from orchestrator.run.prepare.prepared import prepare
from storage.store import Store

# one 7B model, paper60's 60 settings (5 engines) on 2 problems, on H200s
GRID = [
    "model=deepseekcoder-6.7b-instruct",
    "grid=paper60",
    "benchmark.limit=2",
    "estimate.gpu=h200",
    "cluster.num_gpus=1",  # a local instance with one GPU: engines estimated on the H200
]


def plan(tmp_path, *overrides: str) -> dict:
    prepared = prepare(load_run_config([*GRID, *overrides, f"store={tmp_path}"]))
    store = Store(str(tmp_path))
    return plan_json(make_plan(store, prepared), prepared, store)


def engines(data: dict) -> dict[str, dict]:
    return {e["dtype"] + "/" + e["quant"]: e for e in data["engines"]}


def test_replicas_change_the_wall_time_and_the_gpu_hours(env, tmp_path):
    by_r = {r: plan(tmp_path, f"cluster.replicas={r}", "cluster.gpus=8") for r in (1, 4, 8)}
    walls = {r: d["cluster"]["makespan_s"] for r, d in by_r.items()}
    hours = {r: d["estimated_gpu_hours"] for r, d in by_r.items()}
    assert walls[4] < walls[1] and walls[8] != walls[1]
    assert hours[4] < hours[1]
    # one replica: each unit is one stream, the plan's estimate of the engine
    for e in by_r[1]["engines"]:
        model = e["model_estimate"]
        assert e["device"] == "h200" and e["replicas_running"] == 1
        assert e["cluster_s"] == pytest.approx(model["load_s"] + model["generate_s"])
    bf16 = engines(by_r[4])["bf16/none"]
    assert bf16["replicas_running"] == 4 and bf16["replica_gain"] == 4.0
    # 8 of its 12 settings are on the harness's random stream (seed_policy=harness), each a
    # chain of its own that any replica continues: 4 replicas make the unit nearly 4x faster
    seq, par = bf16["sequential_s"], bf16["parallel_s"]
    assert seq == pytest.approx(2 * par, rel=0.3) and len(bf16["chains_s"]) == 8
    one_bf16 = engines(by_r[1])["bf16/none"]
    load = bf16["cluster_load_s"]
    gain = (one_bf16["cluster_s"] - load) / (bf16["cluster_s"] - load)
    assert 3.6 < gain <= 4.0 + 1e-9


def test_per_sample_seeds_let_every_replica_share_the_work(env, tmp_path):
    data = plan(tmp_path, "seed_policy=per_sample", "cluster.replicas=4", "cluster.gpus=8")
    bf16 = engines(data)["bf16/none"]
    assert bf16["sequential_s"] == 0.0
    load = bf16["model_estimate"]["load_s"]
    assert bf16["cluster_s"] == pytest.approx(load + bf16["parallel_s"] / 4)


def test_memory_caps_the_replicas_with_a_warning(env, tmp_path):
    data = plan(tmp_path, "cluster.replicas=8", "cluster.gpus=8")
    fp32 = engines(data)["fp32/none"]
    assert fp32["replicas_fit"] == 4 and fp32["replicas_running"] == 4  # 31 GB each
    assert any("fp32/none: 8 replicas of 31.0 GB do not fit h200" in w for w in data["warnings"])


def test_the_local_gpus_are_the_default_cluster(env, tmp_path):
    cluster = plan(tmp_path)["cluster"]
    assert cluster["gpus"] == 1 and cluster["gpus_source"].startswith("this cluster: 1 GPU")


def test_more_gpus_shorten_the_wall_time_past_the_longest_unit(env, tmp_path):
    walls = {n: plan(tmp_path, f"cluster.gpus={n}")["cluster"] for n in (1, 2, 5, 64)}
    units = [e["cluster_s"] for e in plan(tmp_path, "cluster.gpus=1")["engines"]]
    assert walls[1]["makespan_s"] == pytest.approx(sum(units))  # one unit after another
    assert walls[1]["makespan_s"] > walls[2]["makespan_s"] > walls[5]["makespan_s"]
    # the longest unit runs on several instances once the others are done
    assert walls[5]["makespan_s"] < max(units) and walls[64]["makespan_s"] < max(units)
    assert walls[64]["instances"] > 5
    for wall in walls.values():
        assert wall["makespan_s"] >= wall["lower_bound_s"] - 1e-6
    # extra instances add their loads to the GPU-hours, little against the work
    work = walls[1]["gpu_hours"]
    assert all(work <= w["gpu_hours"] <= 1.2 * work for w in walls.values())


def test_without_gpus_the_plan_asks_for_cluster_gpus(env, tmp_path):
    data = plan(tmp_path, "cluster.num_gpus=0")
    assert data["cluster"]["makespan_s"] is None and data["cluster"]["gpu_hours"] > 0
    assert "set cluster.gpus=N" in data["cluster"]["gpus_source"]
    assert all(e["start_s"] is None for e in data["engines"])


def test_the_cluster_target():
    spec = load_run_config(["model=tiny"]).cluster
    two = GpuInventory(2, ("NVIDIA H200",) * 2, GpuSource.NVIDIA_SMI)
    assert cluster_target(spec, two).gpus == 2
    remote = GpuInventory(None, (), GpuSource.REMOTE)
    assert cluster_target(spec, remote).gpus is None
    given = load_run_config(["model=tiny", "cluster.gpus=64"]).cluster
    assert cluster_target(given, remote).gpus == 64
    assert cluster_target(given, remote).source == "cluster.gpus=64"
