from __future__ import annotations

import os

import pandas as pd
import pytest

from storage.index import build_index
from storage.integrity import ShardDamaged
from storage.schema import SettingStatus
from storage.store import SchemaMismatch, Store, StoreLocked, UnknownTable
from tests.processes import lock_held_elsewhere


def execution(key: str, task: str, passed: bool) -> dict:
    return {
        "setting_key": key,
        "task_id": task,
        "sample_index": 0,
        "outcome": "passed" if passed else "failed",
        "passed": passed,
        "score": float(passed),
    }


def test_tables_read_with_pandas_and_rewrites_replace(tmp_path):
    store = Store(str(tmp_path))
    store.write_rows("executions", "k1", [execution("k1", "Python/0", True)])
    store.write_rows("executions", "k2", [execution("k2", "Python/0", False)])
    store.write_rows(
        "executions", "k1", [execution("k1", "Python/0", False), execution("k1", "Python/1", True)]
    )
    frame = pd.read_parquet(tmp_path / "executions")
    assert len(frame) == 3  # k1 replaced, not duplicated
    assert sorted(frame[frame.setting_key == "k1"].task_id) == ["Python/0", "Python/1"]


def test_unknown_columns_and_tables_are_rejected(tmp_path):
    store = Store(str(tmp_path))
    with pytest.raises(SchemaMismatch, match="no column"):
        store.write_rows("executions", "k", [{"setting_key": "k", "bogus": 1}])
    with pytest.raises(UnknownTable, match="tables: settings"):
        store.write_rows("nope", "k", [])


def test_temp_files_are_invisible_and_cleaned(tmp_path):
    store = Store(str(tmp_path))
    store.write_rows("executions", "k1", [execution("k1", "Python/0", True)])
    half = tmp_path / "executions" / ".tmp-k2-deadbeef.parquet"
    half.write_bytes(b"PAR1 half a file")
    assert len(pd.read_parquet(tmp_path / "executions")) == 1
    assert set(store.shards("executions")) == {"k1"}
    assert store.clean_temp() == 1
    assert not half.exists()


def test_a_corrupt_shard_counts_as_missing(tmp_path):
    store = Store(str(tmp_path))
    for table in ("generations", "executions", "scores"):
        (tmp_path / table).mkdir()
    store.write_rows("executions", "k1", [execution("k1", "Python/0", True)])
    (tmp_path / "executions" / "k1.parquet").write_bytes(b"truncated")
    assert store.read_shard("executions", "k1") is None
    with pytest.raises(ShardDamaged):
        store.inspect_shard("executions", "k1")


def test_second_writer_is_refused_with_a_clear_message(tmp_path):
    with lock_held_elsewhere(tmp_path):
        with pytest.raises(StoreLocked, match="being written by another reprogrid process"):
            with Store(str(tmp_path)).writer_lock(wait_s=0.5):
                pass
    with Store(str(tmp_path)).writer_lock():  # released when the holder ends
        pass


def test_lock_is_released_when_the_holder_is_killed(tmp_path):
    with lock_held_elsewhere(tmp_path) as holder:
        os.kill(holder.pid, 9)
        holder.join(10)
    with Store(str(tmp_path)).writer_lock(wait_s=2):
        pass


def test_index_requires_every_result_shard(tmp_path):
    store = Store(str(tmp_path))
    row = {"setting_key": "k1", "status": SettingStatus.COMPLETE.value}
    store.write_rows("settings", "k1", [row])
    assert not build_index(store)["k1"].complete
    store.write_rows(
        "generations", "k1", [{"setting_key": "k1", "task_id": "t", "sample_index": 0}]
    )
    store.write_rows("executions", "k1", [execution("k1", "t", True)])
    store.write_rows("scores", "k1", [{"setting_key": "k1", "value": 1.0}])
    assert build_index(store)["k1"].complete
    (tmp_path / "scores" / "k1.parquet").write_bytes(b"garbage")
    state = build_index(store)["k1"]
    assert not state.complete and state.has_generations and state.has_executions


def test_writer_active_sees_a_holder_without_taking_the_lock(tmp_path):
    store = Store(str(tmp_path))
    assert not store.writer_active()
    with lock_held_elsewhere(tmp_path):
        assert store.writer_active()
    assert not store.writer_active()
