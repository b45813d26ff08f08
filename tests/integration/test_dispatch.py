"""Dispatch on a local Ray with fake GPUs (in this process): GPU scheduling (units and their
engine instances), a worker killed mid-unit, a forced per-setting failure."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

ray = pytest.importorskip("ray")

from orchestrator.run.config.load import load_run_config  # noqa: E402
from orchestrator.run.execute.runner import run_grid  # noqa: E402
from orchestrator.run.prepare.prepared import prepare  # noqa: E402


@pytest.fixture(scope="module")
def local_ray():
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(address="local", num_cpus=4, num_gpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def run(overrides, store: Path, **kwargs):
    prepared = prepare(load_run_config([*overrides, f"store={store}"]))
    return prepared, run_grid(prepared, **kwargs)


def intervals(store: Path) -> pd.DataFrame:
    frame = pd.read_parquet(store / "settings")
    frame["gpus"] = frame.engine_options_json.str.extract(r'"cuda_visible_devices":"([^"]*)"')
    return frame.groupby("engine_key").agg(
        start=("generation_started_at", "min"),
        end=("generation_finished_at", "max"),
        gpus=("gpus", "first"),
    )


FAKE = ["backend=fake", "model=tiny", "benchmark.limit=4", "grid.precision=fp32,bf16,fp16"]


def test_two_one_gpu_units_run_at_once(env, local_ray, tmp_path):
    _, outcome = run([*FAKE, "model.repo_id='fake://delay=0.4'"], tmp_path / "s")
    assert outcome.engine_loads == 3 and outcome.failed == 0
    units = intervals(tmp_path / "s").sort_values("start")
    first, second = units.iloc[0], units.iloc[1]
    assert second.start < first.end  # overlap: both fake GPUs busy
    assert {first.gpus, second.gpus} == {"0", "1"}


def test_a_two_gpu_model_waits_for_both(env, local_ray, tmp_path):
    overrides = [*FAKE, "model.repo_id='fake://delay=0.3'", "model.num_gpus=2"]
    _, outcome = run(overrides, tmp_path / "s")
    assert outcome.engine_loads == 3 and outcome.failed == 0
    units = intervals(tmp_path / "s").sort_values("start")
    for earlier, later in zip(
        units.iloc[:-1].itertuples(), units.iloc[1:].itertuples(), strict=True
    ):
        assert later.start >= earlier.end  # never two at once
    assert set(units.gpus) == {"0,1"}


def test_a_long_unit_takes_both_gpus_and_a_lone_chain_one(env, local_ray, tmp_path):
    """The rule of analysis/schedule.py in the dispatcher: once its first chunk has measured
    the unit, a second instance on the free GPU pays for its load; a unit that is one chain
    (a harness-seeded sampled setting) gets none, since one stream at a time runs a chain."""
    common = [
        "backend=fake",
        "model=tiny",
        "benchmark.limit=12",
        "model.repo_id='fake://delay=0.2'",
        "checkpoint.every_samples=1",
    ]
    _, shared = run([*common, "decoding=greedy", "template=own,instruct"], tmp_path / "a")
    assert shared.failed == 0 and shared.engine_loads == 2
    _, chain = run([*common, "decoding=t0.8", "template=own"], tmp_path / "b")
    assert chain.failed == 0 and chain.engine_loads == 1


def test_a_forced_failure_is_recorded_and_the_rest_complete(env, local_ray, tmp_path):
    overrides = [
        "backend=fake",
        "model=tiny",
        "benchmark.limit=3",
        "model.repo_id='fake://fail-on=[INST]'",
        "template=own,codellama,instruct",
    ]
    _, outcome = run(overrides, tmp_path / "s")
    settings = pd.read_parquet(tmp_path / "s" / "settings").set_index("template")
    assert outcome.failed == 1
    assert settings.loc["codellama", "status"] == "failed"
    assert settings.loc["codellama", "error_type"] == "FakeFailure"
    assert "[INST]" in settings.loc["codellama", "status_reason"]
    assert set(settings.drop("codellama").status) == {"complete"}
    assert not outcome.grid.done and (outcome.grid.failed, outcome.grid.complete) == (1, 2)
    # a plain re-run leaves the failure alone, and says the grid is still incomplete
    _, again = run(overrides, tmp_path / "s")
    assert again.generated == 0 and again.failed == 0
    assert not again.grid.done and again.grid.failed == 1
    _, retried = run(overrides, tmp_path / "s", retry_failed=True)
    assert retried.failed == 1 and retried.generated == 0
    assert (
        pd.read_parquet(tmp_path / "s" / "settings")
        .set_index("template")
        .loc["codellama", "attempts"]
        == 2
    )


def test_a_failed_load_fails_its_unit_once_with_its_own_error(env, local_ray, tmp_path, capfd):
    loads = tmp_path / "loads.txt"
    overrides = [
        *FAKE,
        f"model.repo_id='fake://fail-load={loads}'",
        "grid.precision=fp32",
        "template=own,codellama,instruct",
    ]
    _, outcome = run(overrides, tmp_path / "s")
    settings = pd.read_parquet(tmp_path / "s" / "settings")
    assert outcome.engine_loads == 1 and outcome.failed == 3
    assert set(settings.status) == {"failed"}
    # the cause, not Ray's ActorDiedError: a load error is not an infrastructure error that a
    # plain re-run would retry
    assert set(settings.error_type) == {"FakeFailure"}
    assert set(settings.status_reason) == {"forced load failure"}
    assert loads.read_text().count("\n") == 1  # loaded once for the unit's three settings
    # The engine actor takes no object refs in its constructor (ray#53727's restart hazard).
    assert "constructor arguments in the object store" not in capfd.readouterr().err


def engine_worker_pids(doing: str = "") -> list[int]:
    """EngineWorker processes of the Ray instance this test started (descendants of us), those
    whose title (Ray's: the method it runs) holds `doing`."""
    me, pids = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            pid = int(entry.name)
            parent = pid
            while parent > 1:
                parent = int((Path("/proc") / str(parent) / "stat").read_text().split()[3])
                if parent == me:
                    break
        except (OSError, ValueError, IndexError):
            continue
        if parent == me and f"EngineWorker{doing}" in cmdline:
            pids.append(pid)
    return pids


def generations(store: Path) -> pd.DataFrame:
    columns = ["setting_key", "task_id", "sample_index", "program", "output_token_ids"]
    frame = pd.read_parquet(store / "generations", columns=columns)
    frame["output_token_ids"] = frame["output_token_ids"].map(list)
    return frame.sort_values(columns[:3]).reset_index(drop=True)


def test_worker_killed_mid_unit_is_retried_and_the_grid_completes(env, local_ray, tmp_path):
    """SIGKILL the engine's process while it generates a chunk, on a live node: Ray restarts it
    (cluster.max_retries), the chunk it held goes back to the queue and to it again, the run
    records that, and the programs are those of an uninterrupted run."""
    store = tmp_path / "s"
    overrides = [
        "model=tiny",
        "benchmark.limit=12",
        "max_length=384",
        "template=own,instruct",
        "decoding=greedy,t0.2,t0.8",
    ]
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(outcome=run(overrides, store)[1]))
    thread.start()
    killed = None
    deadline = time.monotonic() + 300
    while killed is None and time.monotonic() < deadline and thread.is_alive():
        done = (
            list((store / "generations").glob("*.parquet"))
            if (store / "generations").exists()
            else []
        )
        pids = engine_worker_pids(".run")  # generating a chunk
        if done and pids:
            killed = pids[0]
            os.kill(killed, signal.SIGKILL)
        time.sleep(0.2)
    thread.join(600)
    assert killed is not None, "the engine finished before it could be killed"
    outcome = result["outcome"]
    assert outcome.failed == 0
    settings = pd.read_parquet(store / "settings")
    assert len(settings) == 6 and set(settings.status) == {"complete"}
    assert len(pd.read_parquet(store / "scores")) == 6
    assert len(set(settings.node_id)) >= 1
    # the run's row says what happened, as `status` shows it (one restart, its chunk requeued)
    from orchestrator.report.screens.status import store_status
    from storage.store import Store

    shown = store_status(Store(str(store)))["run"]
    assert shown is not None and shown["status"] == "finished"
    [fault] = shown["faults"]
    assert fault["kind"] == "engine_restarting" and fault["requeued_chunks"] >= 1
    assert set(fault["requeued_settings"]) <= set(settings.setting_key)
    run(overrides, tmp_path / "fresh")
    pd.testing.assert_frame_equal(generations(store), generations(tmp_path / "fresh"))


def test_an_engine_dead_beyond_its_restarts_gets_a_new_instance(env, local_ray, tmp_path):
    """cluster.max_retries=1: Ray restarts the engine's process after its first SIGKILL; the
    second leaves the unit without a replica, and the unit gets a new instance (one: the bound)
    that finishes it, with the programs of an uninterrupted run."""
    store = tmp_path / "s"
    overrides = [
        "model=tiny",
        "benchmark.limit=10",
        "max_length=384",
        "template=own,instruct",
        "checkpoint.every_samples=1",
        "cluster.max_retries=1",
    ]
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(outcome=run(overrides, store)[1]))
    thread.start()
    killed: list[int] = []
    deadline = time.monotonic() + 300
    while len(killed) < 2 and time.monotonic() < deadline and thread.is_alive():
        folder = store / "generations"
        done = len(list(folder.glob("*.parquet"))) if folder.exists() else 0
        pids = [pid for pid in engine_worker_pids(".run") if pid not in killed]
        if done > len(killed) and pids:  # a chunk committed since the last kill
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])
        time.sleep(0.2)
    thread.join(600)
    assert len(killed) == 2, "the unit finished before its engine was killed twice"
    outcome = result["outcome"]
    assert outcome.failed == 0 and outcome.engine_loads == 2  # the first instance and a new one
    settings = pd.read_parquet(store / "settings")
    assert set(settings.status) == {"complete"}
    from orchestrator.report.screens.status import store_status
    from storage.store import Store

    shown = store_status(Store(str(store)))["run"]
    assert shown is not None
    assert [f["kind"] for f in shown["faults"]] == ["engine_restarting", "unit_restarted"]
    run(overrides, tmp_path / "fresh")
    pd.testing.assert_frame_equal(generations(store), generations(tmp_path / "fresh"))


def test_a_stuck_setting_is_restarted_then_failed_as_timeout(env, local_ray, tmp_path):
    overrides = [
        "backend=fake",
        "model=tiny",
        "benchmark.limit=2",
        "model.repo_id='fake://delay=30'",
        "cluster.setting_timeout_s=3",
        "cluster.max_retries=1",
    ]
    started = time.monotonic()
    _, outcome = run(overrides, tmp_path / "s")
    assert time.monotonic() - started < 120
    assert outcome.failed == 1
    row = pd.read_parquet(tmp_path / "s" / "settings").iloc[0]
    assert row.status == "failed" and row.error_type == "Timeout"
    assert "no progress for 3s" in row.status_reason


def test_run_exits_1_while_the_grid_is_incomplete(env, local_ray, tmp_path, capsys):
    from orchestrator.cli import main

    store = tmp_path / "s"
    args = [
        "run",
        "backend=fake",
        "model=tiny",
        "benchmark.limit=2",
        "model.repo_id='fake://fail-on=[INST]'",
        "template=own,codellama",
        f"store={store}",
    ]
    for _ in range(2):  # the failing run, then a plain re-run that leaves the failure alone
        assert main(args) == 1
        err = capsys.readouterr().err
        assert "grid INCOMPLETE: 1 complete, 0 skipped, 1 failed, 0 pending" in err
        assert "--retry-failed" in err
    # skipped settings are reported, not failures
    skips = [
        "run",
        "backend=fake",
        "model=tiny",
        "benchmark.limit=2",
        "template=own,diff",
        f"store={tmp_path / 'skips'}",
    ]
    assert main(skips) == 0
    assert "skipped" in capsys.readouterr().out


def test_a_run_that_ends_packs_its_finished_shards_once_there_are_enough(env, local_ray, tmp_path):
    """compaction.after_run: the run that ends with that many loose shards in a table packs
    them (the manifest names the packs, the next plan finds every setting done, plain Parquet
    readers read each row once); below it the store stays a shard per file."""
    store = tmp_path / "s"
    overrides = [*FAKE, "template=own,instruct"]  # 6 settings
    _, small = run([*overrides, "compaction.after_run=7"], store)
    assert small.failed == 0 and not (store / "_manifest.json").exists()
    before = {t: pd.read_parquet(store / t) for t in ("settings", "executions", "scores")}
    assert len(list((store / "scores").glob("*.parquet"))) == 6

    _, again = run([*overrides, "compaction.after_run=6"], store)  # nothing to do, then packs
    assert again.generated == again.executed == 0
    assert (store / "_manifest.json").exists()
    for table, rows in before.items():
        files = list((store / table).glob("*.parquet"))
        assert [f.name.startswith("pack-") for f in files] == [True], table
        after = pd.read_parquet(store / table)
        assert len(after) == len(rows)
        assert sorted(after.setting_key) == sorted(rows.setting_key)
    _, third = run([*overrides, "compaction.after_run=6"], store)
    assert third.generated == third.executed == 0
    assert third.grid.complete == 6
