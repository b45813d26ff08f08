"""The runner's end-of-run compaction (packed when due, skipped after a stop signal) and its
wait for the writer lock (cut short by a stop signal)."""

from __future__ import annotations

import signal
import threading

import pytest

from orchestrator.run.execute.runner import _compact
from orchestrator.run.execute.signals import StopRequest
from storage.store import Store, StoreLocked
from tests.unit.storage.test_compact import small_store


def test_a_run_that_ended_packs_its_finished_shards_when_due(tmp_path):
    small_store(tmp_path)  # three complete settings
    store = Store(str(tmp_path))
    with store.writer_lock():
        _compact(store, None, StopRequest())  # never
        assert store.manifest().packs == ()
        _compact(store, 3, StopRequest())
        assert store.manifest().packs != ()


def test_a_stop_signal_after_the_last_setting_leaves_compaction_to_the_next_writer(tmp_path):
    small_store(tmp_path)
    store = Store(str(tmp_path))
    stop = StopRequest()
    stop.record(signal.SIGTERM)
    with store.writer_lock():
        _compact(store, 1, stop)
    assert Store(str(tmp_path)).manifest().packs == ()
    assert len(list((tmp_path / "scores").glob("*.parquet"))) == 3  # loose, as written


def test_a_stop_while_waiting_for_the_writer_lock_ends_the_wait(tmp_path):
    """`--wait-lock`: the wait for another writer's lock is cut short by a stop signal (the
    store's own wait knows nothing of signals and would wait it out)."""
    from orchestrator.errors import Interrupted
    from orchestrator.run.execute.runner import _writer_lock
    from tests.processes import lock_held_elsewhere

    store = Store(str(tmp_path))
    stop = StopRequest()
    with lock_held_elsewhere(tmp_path, hold_s=120):
        timer = threading.Timer(1.5, stop.record, args=(signal.SIGINT,))
        timer.start()
        try:
            with pytest.raises(Interrupted) as stopped, _writer_lock(store, 600, stop):
                pytest.fail("the lock was taken while another process held it")
        finally:
            timer.cancel()
    assert stopped.value.exit_code == 130


def test_the_writer_lock_is_waited_for_as_long_as_asked_and_no_longer(tmp_path):
    from orchestrator.run.execute.runner import _writer_lock
    from tests.processes import lock_held_elsewhere

    store = Store(str(tmp_path))
    with lock_held_elsewhere(tmp_path, hold_s=60):
        with pytest.raises(StoreLocked), _writer_lock(store, 0.0, StopRequest()):
            pytest.fail("the lock was taken while another process held it")
    with _writer_lock(store, 0.0, StopRequest()):
        assert store.holds_writer_lock


def test_the_run_record_compares_executions_with_the_environment_it_planned(tmp_path):
    """`run`'s writer gets the driver's execution environment, the one `plan` keys with, so a
    worker that executed in another one is told about (test_plan.py has the warning)."""
    from orchestrator.run.config.load import load_run_config
    from orchestrator.run.execute.runner import _record
    from orchestrator.run.plan.state import make_plan
    from orchestrator.run.prepare.prepared import prepare

    prepared = prepare(load_run_config(["model=tiny", "benchmark.limit=2"]))
    store = Store(str(tmp_path))
    record = _record(store, prepared, make_plan(store, prepared), "reprogrid run")
    assert record.writer.planned_environment == prepared.execution_environment()
    assert set(record.writer.planned_environment) == {"isolation", "python"}
