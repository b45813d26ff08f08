"""The runner's end-of-run compaction: packed when due, skipped after a stop signal."""

from __future__ import annotations

import signal

from orchestrator.run.execute.runner import _compact
from orchestrator.run.execute.signals import StopRequest
from storage.store import Store
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
