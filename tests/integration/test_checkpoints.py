"""Sweeps that survive: a setting is committed in chunks, so a driver killed in the middle of a
setting loses at most the chunks in flight and the resumed run continues from the stored ones,
with no duplicates and the outputs of an uninterrupted run (the harness's sequential random
stream included); SIGTERM and SIGINT stop a run cleanly (issue 13, §1, §2)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from storage.store import TEMP_PREFIX
from tests.fixtures_store import complete_keys
from tests.processes import alive_in_group, left_behind, run_marker

ROOT = Path(__file__).resolve().parents[2]
# Three settings of the tiny model, 10 problems each, committed every 2 samples (one problem for
# the greedy and harness settings, two samples of one problem for per_sample n_samples=2):
# greedy, the harness's sequential stream (t0.8, seed_policy=harness) and per-sample seeds.
GRID = [
    "model=tiny",
    "benchmark.limit=10",
    "max_length=384",
    "template=instruct",
    "decoding=greedy,t0.8",
    "checkpoint.every_samples=1",
    "cluster.num_cpus=2",
]
PER_SAMPLE = [
    *GRID[:4],
    "decoding=t0.8",
    "seed_policy=per_sample",
    "n_samples=2",
    "checkpoint.every_samples=2",
    "cluster.num_cpus=2",
]
# How long raylet's agents may outlive a SIGKILLed driver: Ray's 60 s timeout and a margin.
RAY_AGENTS_EXIT_S = 90
COLUMNS = ["setting_key", "task_id", "sample_index", "continuation", "program", "output_token_ids"]


def reprogrid(args, env) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", *args],
        env={**env, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def chunk_files(store: Path) -> dict[str, bytes]:
    """The committed chunk files (not a chunk in flight: its temporary file, which the next
    writer removes, is what a kill may lose)."""
    folder = store / "generations"
    if not folder.is_dir():
        return {}
    files = folder.glob("*~*.parquet")
    return {p.name: p.read_bytes() for p in files if not p.name.startswith(TEMP_PREFIX)}


def wait_for_chunks(proc: subprocess.Popen, store: Path, n: int, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while len(chunk_files(store)) < n:
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, "no chunks committed"
        time.sleep(0.2)


def finish(args, env) -> str:
    proc = reprogrid(args, env)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out
    return out


def generations(store: Path) -> pd.DataFrame:
    frame = pd.read_parquet(store / "generations", columns=COLUMNS)
    frame["output_token_ids"] = frame["output_token_ids"].map(list)
    return frame.sort_values(["setting_key", "task_id", "sample_index"]).reset_index(drop=True)


@pytest.mark.parametrize(
    "grid",
    [
        pytest.param(GRID, id="greedy-and-harness-stream"),
        # per-sample seeds resume through the same chunk path; the harness's stream is the
        # case only a stored state makes right
        pytest.param(PER_SAMPLE, id="per-sample", marks=pytest.mark.slow),
    ],
)
def test_sigkill_mid_setting_resumes_from_its_chunks_with_identical_outputs(grid, env, tmp_path):
    """The driver and its local Ray are SIGKILLed mid-setting. The dead run's record says it was
    interrupted; the next run reuses every stored chunk, generates and executes only what is
    missing, closes that record, and ends with the outputs of an uninterrupted run, each setting
    and sample stored once; nothing of the killed run's Ray survives it."""
    store, n_settings = tmp_path / "store", 2 if grid is GRID else 1
    marker = run_marker()  # in every process of the local Ray it starts, whatever its group
    proc = reprogrid(["run", *grid, f"store={store}"], {**env, marker[0]: marker[1]})
    wait_for_chunks(proc, store, 3)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its local Ray, mid-setting
    proc.wait(30)
    time.sleep(2)
    assert alive_in_group(proc.pid) == []
    kept = chunk_files(store)
    assert len(kept) >= 3
    before = complete_keys(store)
    killed = json.loads(finish(["status", "--store", str(store), "--json"], env))
    assert killed["run"]["status"] == "interrupted" and not killed["writer_active"]

    out = finish(["run", *grid, f"store={store}"], env)
    after = chunk_files(store)
    assert {name: after[name] for name in kept} == kept  # reused, not generated again
    resumed = generations(store)
    assert not resumed.duplicated(["setting_key", "task_id", "sample_index"]).any()
    runs = pd.read_parquet(store / "runs").sort_values("started_at")
    assert list(runs.status) == ["interrupted", "finished"]  # the next writer closed the record
    assert runs.iloc[-1].n_generated <= n_settings - len(before)
    assert runs.iloc[-1].n_executed == n_settings - len(before)
    assert f"{len(before)} done" in out

    fresh = tmp_path / "fresh"
    finish(["run", *grid, f"store={fresh}"], env)
    expected = generations(fresh)
    assert len(resumed) == len(expected) == 20
    pd.testing.assert_frame_equal(resumed, expected)
    settings = pd.read_parquet(store / "settings")
    scores = pd.read_parquet(store / "scores")
    assert len(settings) == n_settings and set(settings.status) == {"complete"}
    assert len(scores) == n_settings and scores.setting_key.is_unique
    if grid is GRID:  # the harness-seeded setting resumed its stream from a stored state
        states = pq.read_table(store / "generations", columns=["stream_state"]).column(0)
        assert states.null_count < len(states)
    # Ray's services and workers die with the killed driver: GCS and raylet at once
    # (PDEATHSIG), the workers with raylet, and raylet's two agents when their report of
    # raylet's death to the gone GCS times out (60 s in Ray's code). Checked last, so that the
    # runs above use that minute.
    assert left_behind(*marker, timeout_s=RAY_AGENTS_EXIT_S) == []


# test_interrupts.py stops real transformers runs the same way at every moment; this one is the
# fake backend's repeat of its mid-generation case
@pytest.mark.slow
def test_sigterm_commits_chunks_marks_the_run_interrupted_and_stops_its_ray(env, tmp_path):
    store = tmp_path / "store"
    grid = [
        "model=tiny",
        "backend=fake",
        "model.repo_id='fake://delay=0.3'",
        "benchmark.limit=30",
        "grid.precision=fp32,bf16",
        "checkpoint.every_samples=2",
        "cluster.num_cpus=2",
        f"store={store}",
    ]
    marker = run_marker()  # in every process of the local Ray it starts, whatever its group
    proc = reprogrid(["run", *grid], {**env, marker[0]: marker[1]})
    wait_for_chunks(proc, store, 2)
    stopped_at = time.monotonic()
    os.kill(proc.pid, signal.SIGTERM)  # what Slurm sends at preemption or time limit
    out, _ = proc.communicate(timeout=60)
    assert time.monotonic() - stopped_at < 30
    assert proc.returncode == 143, out
    assert "SIGTERM received" not in out and "will be retried" not in out, out  # no stack dump
    assert "interrupted by SIGTERM" in out
    assert left_behind(*marker, timeout_s=30) == []  # the local Ray it started is gone
    runs = pd.read_parquet(store / "runs")
    assert list(runs.status) == ["interrupted"]
    kept = chunk_files(store)
    assert kept
    finish(["run", *grid], env)
    assert {n: chunk_files(store)[n] for n in kept} == kept
    assert set(pd.read_parquet(store / "settings").status) == {"complete"}


def test_sigint_exits_130(env, tmp_path):
    store = tmp_path / "store"
    grid = [
        "model=tiny",
        "backend=fake",
        "model.repo_id='fake://delay=0.3'",
        "benchmark.limit=30",
        "checkpoint.every_samples=2",
        f"store={store}",
    ]
    proc = reprogrid(["run", *grid], env)
    wait_for_chunks(proc, store, 1)
    os.kill(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    assert list(pd.read_parquet(store / "runs").status) == ["interrupted"]


def test_executions_run_while_an_engine_holds_every_cpu(env, tmp_path):
    """2 CPUs, an engine reserving both: the first setting is executed and complete before the
    engine has generated the last one (executions hold their own resource, not CPUs)."""
    from orchestrator.cli import main

    store = tmp_path / "store"
    args = [
        "run",
        "model=tiny",
        "backend=fake",
        "model.repo_id='fake://delay=0.5'",
        "benchmark.limit=6",
        "template=own,instruct,starchat,octocoder",
        "cluster.num_cpus=2",
        "cluster.engine_cpus=2",
        f"store={store}",
    ]
    assert main(args) == 0
    settings = pd.read_parquet(store / "settings")
    last_generated = settings.generation_finished_at.max()
    first_complete = settings.updated_at.min()
    assert first_complete < last_generated
