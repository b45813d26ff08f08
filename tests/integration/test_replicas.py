"""Engine replicas (issue 13, §5): R full copies of one engine share its GPU (fractional
num_gpus) and generate disjoint chunks of the unit's problems; the outputs are those of one
replica, and R replicas of one engine are placed at once."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from orchestrator.cli import main

COLUMNS = ["setting_key", "task_id", "sample_index", "continuation", "program", "output_token_ids"]


def generations(store: Path) -> pd.DataFrame:
    frame = pd.read_parquet(store / "generations", columns=COLUMNS)
    frame["output_token_ids"] = frame["output_token_ids"].map(list)
    return frame.sort_values(["setting_key", "task_id", "sample_index"]).reset_index(drop=True)


def run(args, capsys) -> dict:
    assert main(["run", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_two_replicas_give_the_outputs_of_one(env, capsys, tmp_path):
    """Greedy and per-sample-seeded sampling on the tiny model, chunks of one problem spread
    over two replicas, against one replica."""
    grid = [
        "model=tiny",
        "benchmark.limit=6",
        "max_length=384",
        "template=instruct",
        "decoding=greedy,t0.8",
        "seed_policy=per_sample",
        "n_samples=2",
        "checkpoint.every_samples=1",
        "cluster.num_cpus=2",
    ]
    one = run([*grid, "cluster.replicas=1", f"store={tmp_path / 'one'}"], capsys)
    two = run([*grid, "cluster.replicas=2", f"store={tmp_path / 'two'}"], capsys)
    assert (one["engine_loads"], two["engine_loads"]) == (1, 2)
    a, b = generations(tmp_path / "one"), generations(tmp_path / "two")
    assert len(a) == 2 * 6 * 2  # two settings x 6 problems x 2 samples
    pd.testing.assert_frame_equal(a, b)


def test_a_harness_stream_setting_runs_on_one_replica_and_plan_says_so(env, capsys, tmp_path):
    grid = ["model=tiny", "benchmark.limit=2", "decoding=t0.8", "cluster.replicas=4"]
    assert main(["plan", *grid, f"store={tmp_path / 's'}"]) == 0
    assert "one sequential random stream: replica 0 only" in capsys.readouterr().out


def test_eight_replicas_of_one_engine_share_one_gpu_at_once(env, capsys, tmp_path):
    """A fake GPU, 8 replicas at num_gpus=0.125: every replica's first request waits until all
    8 engines have started it, which only happens when Ray places all 8 at once."""
    barrier = tmp_path / "barrier"
    grid = [
        "model=tiny",
        "backend=fake",
        f"model.repo_id='fake://barrier={barrier}:8'",
        "benchmark.limit=16",
        "checkpoint.every_samples=1",
        "cluster.num_gpus=1",
        "cluster.num_cpus=8",
        "cluster.engine_cpus=0",
        "cluster.replicas=8",
        "cluster.cpu_if_no_gpus=false",
        f"store={tmp_path / 's'}",
    ]
    outcome = run(grid, capsys)
    assert outcome["engine_loads"] == 8 and outcome["failed"] == 0
    pids = list(barrier.iterdir())
    assert len(pids) == 8
    assert {p.read_text() for p in pids} == {"0"}  # all on the one (fake) GPU
