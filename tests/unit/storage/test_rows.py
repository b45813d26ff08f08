"""Reading a table's rows through the store (storage/rows.py): a few members of a pack read
the same rows, in the same order, as their loose shards did, and only those rows are kept."""

from __future__ import annotations

import pyarrow as pa
import pytest

from storage.compact import PackPolicy, compact
from storage.rows import members_only
from storage.store import Store
from tests.fixtures_store import write_synthetic_store


def test_members_only_copies_the_members_rows_and_says_where_they_are():
    data = pa.table({"row": list(range(10))})
    where = {"a": (2, 3), "b": (7, 1), "empty": (5, 0)}
    copied, at = members_only(data, where)
    assert copied.column("row").to_pylist() == [2, 3, 4, 7]
    assert at == {"a": (0, 3), "b": (3, 1), "empty": (3, 0)}
    for key, (first, n) in where.items():
        rows = copied.slice(*at[key]).column("row").to_pylist()
        assert rows == data.slice(first, n).column("row").to_pylist()


def test_members_only_keeps_a_table_that_is_all_members():
    data = pa.table({"row": list(range(4))})
    copied, at = members_only(data, {"a": (0, 1), "b": (1, 3)})
    assert copied is data and at == {"a": (0, 1), "b": (1, 3)}
    nothing, where = members_only(data, {"empty": (2, 0)})
    assert nothing.num_rows == 0 and where == {"empty": (0, 0)}


def test_a_few_members_of_shared_row_groups_read_as_their_loose_shards_did(tmp_path):
    write_synthetic_store(str(tmp_path))
    store = Store(str(tmp_path))
    keys = sorted(store.read_table("scores").column("setting_key").to_pylist())
    chosen = [keys[1], keys[4], keys[-1]]  # spread over the pack: its row groups hold others
    columns = ["setting_key", "task_id", "sample_index", "passed"]
    before = store.read_table("executions", chosen, columns=columns)
    assert 0 < before.num_rows < store.read_table("executions").num_rows
    with store.writer_lock():
        compact(store, PackPolicy())  # several settings per row group
    packed = Store(str(tmp_path))
    assert not any(packed.view("executions").loose)
    after = packed.read_table("executions", chosen, columns=columns)
    assert after.equals(before)
    assert packed.read_table("executions", chosen).select(columns).equals(before)


def test_a_read_that_alternates_packs_at_every_member_takes_the_same_rows(tmp_path, monkeypatch):
    """Packs cut model by model hold keys that alternate in key order: past MAX_SLICES slices
    the rows are gathered by one take, the same rows in the same (key) order."""
    from storage import rows as rows_module
    from tests.fixtures_store import BASE, INST, Spec, write_setting

    store = Store(str(tmp_path))
    for model in (BASE, INST, "third"):
        for length in (256, 512, 1024, 2048):
            write_setting(store, Spec(model, "own", "greedy", length, "bf16", 10))
    with store.writer_lock():
        compact(store, PackPolicy(max_members=4, row_group_rows=1, row_group_rows_of={}))
    loose = write_setting(Store(str(tmp_path)), Spec("fourth", "own", "greedy", 512, "fp16", 3))
    packed = Store(str(tmp_path))
    assert len(packed.view("executions").packs) == 3 and loose in packed.view("executions").loose
    taken_by: list[int] = []  # the rows each take gathers
    positions = rows_module.positions
    monkeypatch.setattr(rows_module, "positions", lambda i: taken_by.append(len(i)) or positions(i))
    some = sorted(packed.read_table("scores").column("setting_key").to_pylist())[::2]
    for keys, columns in ((None, None), (some, ["setting_key", "task_id", "passed"])):
        monkeypatch.setattr(rows_module, "MAX_SLICES", 10**9)  # one slice per run of members
        taken_by.clear()
        sliced = {
            t: packed.read_table(t, keys, columns=columns if t == "executions" else None)
            for t in ("settings", "executions", "scores")
        }
        assert not taken_by  # the slice path takes nothing
        monkeypatch.setattr(rows_module, "MAX_SLICES", 0)  # always taken
        for table, expected in sliced.items():
            taken = packed.read_table(
                table, keys, columns=columns if table == "executions" else None
            )
            assert taken.equals(expected), table
            order = taken.column("setting_key").to_pylist()
            assert order == sorted(order) and len(set(order)) > 4, table
            assert taken_by.pop() == taken.num_rows  # one take of every row, not slices


def test_reads_within_a_view_listed_once_take_the_same_rows(tmp_path):
    """Some keys' rows read within a view of more keys (listed once for several reads: the
    problems view's batch) are the rows a read that lists the table itself takes; a view of
    another table is refused."""
    write_synthetic_store(str(tmp_path))
    store = Store(str(tmp_path))
    keys = sorted(store.read_table("scores").column("setting_key").to_pylist())
    listed = store.view("generations", keys=keys[:6])
    assert len(listed.loose) >= 6
    for chosen in (keys[:2], keys[2:6], [keys[3]]):
        alone = store.read_table("generations", chosen)
        assert 0 < alone.num_rows < store.read_table("generations").num_rows
        assert store.read_table("generations", chosen, within=listed).equals(alone)
    with pytest.raises(ValueError, match="a view of 'generations' given to read 'executions'"):
        store.read_table("executions", keys[:2], within=listed)
