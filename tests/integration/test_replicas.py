"""Engine replicas (issue 13, §5; issue 34, §2): R full copies of one engine share its GPU
(fractional num_gpus) and generate disjoint chunks of the unit's problems; a setting on the
harness's random stream goes round them a chunk at a time, carrying its stream state; the
outputs are those of one replica, also when a replica dies mid-setting, and R replicas of one
engine are placed at once."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from orchestrator.cli import main
from storage.store import TEMP_PREFIX
from tests.processes import alive_with_env, left_behind, run_marker

ROOT = Path(__file__).resolve().parents[2]

COLUMNS = ["setting_key", "task_id", "sample_index", "continuation", "program", "output_token_ids"]


def generations(store: Path) -> pd.DataFrame:
    frame = pd.read_parquet(store / "generations", columns=COLUMNS)
    frame["output_token_ids"] = frame["output_token_ids"].map(list)
    return frame.sort_values(["setting_key", "task_id", "sample_index"]).reset_index(drop=True)


def run(args, capsys) -> dict:
    assert main(["run", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


# The chunks of greedy and per-sample settings go round the replicas by the path the harness
# stream's test below takes with a stream state too
@pytest.mark.slow
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


# One setting on the harness's sequential random stream (seed_policy=harness, sampled), a
# problem per chunk: its chunks go round the idle replicas, each restoring the stream state
# the chunk before it saved.
STREAM = [
    "model=tiny",
    "max_length=384",
    "template=instruct",
    "decoding=t0.8",
    "checkpoint.every_samples=1",
    "cluster.num_cpus=2",
]


def test_a_harness_stream_spread_over_two_replicas_gives_the_programs_of_one(
    env, capsys, caplog, tmp_path
):
    caplog.set_level(logging.DEBUG, logger="orchestrator.run.execute.units")
    grid = [*STREAM, "benchmark.limit=6"]
    one = run([*grid, "cluster.replicas=1", f"store={tmp_path / 'one'}"], capsys)
    caplog.clear()
    two = run([*grid, "cluster.replicas=2", f"store={tmp_path / 'two'}"], capsys)
    assert (one["engine_loads"], two["engine_loads"]) == (1, 2)
    # its six chunks went to both replicas, one at a time
    took = [int(m) for m in re.findall(r"chunk \d+ of setting \w+ to replica (\d+)", caplog.text)]
    assert len(took) == 6 and set(took) == {0, 1}
    a, b = generations(tmp_path / "one"), generations(tmp_path / "two")
    assert len(a) == 6
    pd.testing.assert_frame_equal(a, b)
    # the plan says how such a setting runs on several replicas
    assert main(["plan", *grid, "cluster.replicas=4", f"store={tmp_path / 's'}"]) == 0
    assert "one sequential random stream: one chunk at a time" in capsys.readouterr().out


def engine_workers(marker: tuple[str, str]) -> dict[int, str]:
    """The run's engine actor processes (pid -> command line, Ray's title of what it runs)."""
    found = {}
    for pid in alive_with_env(*marker):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "EngineWorker" in cmdline:
            found[pid] = cmdline
    return found


def committed_chunks(store: Path) -> int:
    folder = store / "generations"
    if not folder.is_dir():
        return 0
    return sum(1 for p in folder.glob("*~*.parquet") if not p.name.startswith(TEMP_PREFIX))


def test_a_replica_killed_mid_setting_leaves_its_chunk_to_the_other(env, tmp_path):
    """SIGKILL one of two replicas while they take turns on a harness stream, with no restart
    allowed (cluster.max_retries=0): its chunk goes to the other replica, which restores the
    stream state of the last committed chunk; the programs are those of one replica
    uninterrupted."""
    grid = [*STREAM, "benchmark.limit=10"]
    store, marker = tmp_path / "killed", run_marker()
    args = [*grid, "cluster.replicas=2", "cluster.max_retries=0", f"store={store}"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "run", *args],
        env={**env, "PYTHONPATH": str(ROOT), marker[0]: marker[1]},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 600
        while committed_chunks(store) < 2 or len(engine_workers(marker)) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()
            time.sleep(0.2)
        workers = engine_workers(marker)
        busy = [pid for pid, title in workers.items() if ".run" in title]
        os.kill((busy or list(workers))[0], signal.SIGKILL)
        out, _ = proc.communicate(timeout=900)
    finally:
        left_behind(*marker, timeout_s=30)
    assert proc.returncode == 0, out
    assert re.search(r"replica \d died", out), out
    fresh = tmp_path / "fresh"
    assert main(["run", *grid, "cluster.replicas=1", f"store={fresh}"]) == 0
    killed = generations(store)
    assert not killed.duplicated(["setting_key", "task_id", "sample_index"]).any()
    pd.testing.assert_frame_equal(killed, generations(fresh))


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
