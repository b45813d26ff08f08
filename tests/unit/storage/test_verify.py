"""A finished store, damaged: `verify` finds every damage, readers only report, the writer
quarantines (never deletes), the index redoes exactly the damaged settings, and every table
still reads with pandas (the "Trust" issue, section 5)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from storage.errors import NotLockHolder
from storage.index import build_index
from storage.integrity import ProblemKind, Trust
from storage.schema import TABLES
from storage.store import QUARANTINE_DIR, REASON_FILE, Store
from storage.verify import verify_store
from tests.fixtures_store import RUN_ID, write_synthetic_store
from tests.unit.storage.damage import flip_data_page_bit, garbage_in_data, truncate

FIXTURE_V1 = Path(__file__).resolve().parents[2] / "fixtures" / "store_v1"


def flip(column: str) -> Callable[[bytes], bytes]:
    return lambda payload: flip_data_page_bit(payload, column)


# (id, table, damage, the problem verify must report); each hits its own complete setting.
MISMATCH = ProblemKind.CHECKSUM_MISMATCH
DAMAGES: list[tuple[str, str, Callable[[bytes], bytes], ProblemKind]] = [
    ("truncated", "generations", truncate, ProblemKind.TRUNCATED),
    ("garbage", "generations", garbage_in_data, MISMATCH),
    ("flip-settings", "settings", flip("status"), MISMATCH),
    ("flip-generations", "generations", flip("program"), MISMATCH),
    ("flip-executions", "executions", flip("passed"), MISMATCH),
    ("flip-scores", "scores", flip("value"), MISMATCH),
    ("flip-runs", "runs", flip("setting_keys"), MISMATCH),
]
FOREIGN = ("executions", "notes.txt")


@pytest.fixture
def finished(tmp_path) -> tuple[Store, list[str]]:
    """The synthetic store (real schemas, written by Store.write_rows): its complete keys."""
    specs = write_synthetic_store(str(tmp_path))
    complete = sorted(k for k, s in specs.items() if s.status == "complete")
    store = Store(str(tmp_path))
    assert {k for k, s in build_index(store).items() if s.complete} == set(complete)
    return store, complete


def damage(
    store: Store, complete: list[str], which: list[int]
) -> dict[tuple[str, str], str | None]:
    """Apply DAMAGES[i] for i in `which` (+ the foreign file for -1); returns
    {(table, file name): the setting it hits (None for runs and the foreign file)}."""
    hit = {}
    for i in which:
        if i == -1:
            (Path(store.table_dir(FOREIGN[0])) / FOREIGN[1]).write_text("my notes\n")
            hit[FOREIGN] = None
            continue
        _, table, how, _ = DAMAGES[i]
        key = RUN_ID if table == "runs" else complete[i]
        path = Path(store.shard_path(table, key))
        path.write_bytes(how(path.read_bytes()))
        hit[(table, path.name)] = None if table == "runs" else key
    return hit


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and p.name != ".lock"
    }


def complete_keys(store: Store) -> set[str]:
    return {k for k, s in build_index(store).items() if s.complete}


@pytest.mark.parametrize("i", [*range(len(DAMAGES)), -1], ids=[d[0] for d in DAMAGES] + ["foreign"])
def test_verify_finds_each_damage(finished, i):
    store, complete = finished
    [((table, name), key)] = damage(store, complete, [i]).items()
    report = verify_store(store)
    assert not report.ok
    found = [p for p in report.problems if p.file is not None]
    expected = ProblemKind.FOREIGN_FILE if i == -1 else DAMAGES[i][3]
    assert [(p.kind, p.table, p.file, p.setting_key) for p in found] == [
        (expected, table, name, key)
    ]
    assert list(report.settings_to_redo) == ([key] if key else [])
    assert json.loads(json.dumps(report.to_json()))["problems"][0]["kind"] == expected.value


def test_readers_report_damage_but_move_nothing(finished):
    store, complete = finished
    hit = damage(store, complete, [*range(len(DAMAGES)), -1])
    before = snapshot(Path(store.root))
    report = verify_store(store)
    assert {(p.table, p.file) for p in report.problems if p.file} == set(hit)
    damaged = {k for k in hit.values() if k}
    assert complete_keys(store) == set(complete) - damaged
    for table in TABLES:
        store.read_table(table)  # damaged shards are left out, with a warning
    assert snapshot(Path(store.root)) == before
    with pytest.raises(NotLockHolder):
        build_index(store, quarantine=True)
    with pytest.raises(NotLockHolder):
        verify_store(store, fix=True)
    assert snapshot(Path(store.root)) == before


def quarantined(root: Path) -> dict[tuple[str, str], tuple[bytes, dict]]:
    """{(table, name): (bytes, reason record)} of everything in the quarantine."""
    out = {}
    for reason_path in (root / QUARANTINE_DIR).rglob(REASON_FILE):
        reason = json.loads(reason_path.read_text())
        moved = root / reason["moved_to"]
        assert moved.is_relative_to(reason_path.parent)
        out[(reason["table"], reason["file"])] = (moved.read_bytes(), reason)
    return out


@pytest.mark.parametrize("writer", ["run", "verify --fix"])
def test_the_writer_quarantines_exactly_the_damaged_files(finished, writer):
    store, complete = finished
    root = Path(store.root)
    hit = damage(store, complete, [*range(len(DAMAGES)), -1])
    temp = root / "scores" / ".tmp-k-0123.parquet"
    temp.write_bytes(b"PAR1 half")
    before = snapshot(root)
    with store.writer_lock():
        if writer == "run":
            build_index(store, quarantine=True)
        else:
            report = verify_store(store, fix=True)
            assert {(q.table, q.file) for q in report.quarantined} == set(hit)
            assert report.removed_temporary == 1
    damaged = {k for k in hit.values() if k}
    assert complete_keys(store) == set(complete) - damaged
    for table in TABLES:
        frame = pd.read_parquet(root / table)
        assert len(frame) == store.read_table(table).num_rows
    # nothing deleted: each file is where it was, unchanged, or in the quarantine as it was
    moved = quarantined(root)
    assert set(moved) == set(hit)
    for (table, name), (payload, reason) in moved.items():
        assert payload == before[f"{table}/{name}"]
        assert reason["setting_key"] == hit[(table, name)] and reason["kind"]
    after = snapshot(root)
    kept = {k for k in before if not k.startswith(QUARANTINE_DIR)} - {f"{t}/{n}" for t, n in hit}
    kept -= {str(temp.relative_to(root))} if writer != "run" else set()
    assert all(after[k] == before[k] for k in kept)
    assert all(k.startswith(f"{QUARANTINE_DIR}/") for k in set(after) - kept)
    # left to do: the damaged complete settings, whose results are now missing (the one whose
    # settings row moved is pending: no row says it is complete)
    report = verify_store(store)
    row_moved = {k for (table, _), k in hit.items() if table == "settings"}
    assert set(report.settings_to_redo) == damaged - row_moved
    assert {p.kind for p in report.problems} <= {
        ProblemKind.MISSING_RESULT,
        ProblemKind.TEMPORARY_FILE,
    }


def test_a_damaged_chunk_is_quarantined_alone(finished):
    """Integrity is per file: a chunk `<setting_key>~<chunk>` maps to its setting."""
    store, complete = finished
    key = complete[0]
    rows = store.read_shard("generations", key).to_pylist()
    store.write_rows("generations", f"{key}~0001", [dict(rows[0], sample_index=99)])
    assert key in complete_keys(store)
    chunk = Path(store.shard_path("generations", f"{key}~0001"))
    chunk.write_bytes(flip_data_page_bit(chunk.read_bytes(), "program"))
    report = verify_store(store)
    assert [(p.file, p.setting_key) for p in report.problems] == [(chunk.name, key)]
    with store.writer_lock():
        index = build_index(store, quarantine=True)
    assert not index[key].complete and not index[key].has_generations
    assert set(quarantined(Path(store.root))) == {("generations", chunk.name)}
    assert Path(store.shard_path("generations", key)).is_file()


def test_the_v1_fixture_store_still_indexes_complete_and_verifies(tmp_path):
    """Written before checksums: trusted by reading every shard fully, and said so."""
    root = tmp_path / "store"
    shutil.copytree(FIXTURE_V1, root)
    store = Store(str(root))
    index = build_index(store)
    assert len(index) == 3 and all(s.complete for s in index.values())
    report = verify_store(store)
    assert report.ok and report.problems == ()
    written = [s for s in report.tables if s.files]
    assert all(s.trusted == {Trust.FULL_READ: s.files} for s in written)
    # tables added since (repeat_checks) are simply absent from an old store
    assert {s.table for s in report.tables if not s.files} == {"repeat_checks"}
    assert any("reading them fully" in n for n in report.notes)
    # a mixed store: one shard rewritten (sealed) next to the old ones
    key = next(iter(index))
    store.write_table("executions", key, store.read_shard("executions", key))
    summary = {s.table: s for s in verify_store(store).tables}["executions"]
    assert summary.trusted == {Trust.SHA256: 1, Trust.FULL_READ: 2}
    assert len(pd.read_parquet(root / "executions")) == store.read_table("executions").num_rows
    with store.writer_lock():
        assert complete_keys(store) == set(index)
        build_index(store, quarantine=True)
    assert not (root / QUARANTINE_DIR).exists()


def test_an_old_shard_with_page_checksums_is_trusted_by_them(finished):
    store, complete = finished
    key = complete[0]
    rows = store.read_shard("executions", key)
    path = Path(store.shard_path("executions", key))
    old = rows.replace_schema_metadata({"reprogrid.schema_version": "1"})  # as older writers
    pq.write_table(old, path, compression="zstd", write_page_checksum=True)  # no seal
    report = verify_store(store)
    assert report.ok
    assert {s.table: s for s in report.tables}["executions"].trusted[Trust.PAGE_CRC] == 1
    assert any("page checksums" in n for n in report.notes)
    path.write_bytes(flip_data_page_bit(path.read_bytes(), "passed"))
    report = verify_store(store)
    assert [(p.kind, p.setting_key) for p in report.problems] == [(ProblemKind.PAGE_CHECKSUM, key)]
    assert key not in complete_keys(store)


def test_all_null_columns_keep_the_schema_types_in_every_shard(tmp_path):
    """`Install and interoperate`: a dataset over any table folder reads with the schema's
    types, even when some shards hold only nulls in a column."""
    store = Store(str(tmp_path))
    for key in ("a", "b"):
        store.write_rows("settings", key, [{"setting_key": key, "status": "complete"}])
        store.write_rows("generations", key, [{"setting_key": key, "task_id": "t"}])
        store.write_rows("scores", key, [{"setting_key": key}])
        store.write_rows("runs", key, [{"run_id": key}])
        store.write_rows("repeat_checks", key, [{"run_id": key}])
    store.write_rows("executions", "a", [{"setting_key": "a"}])  # every other column null
    store.write_rows(
        "executions",
        "b",
        [
            {
                "setting_key": "b",
                "outcome": "failed",
                "passed": False,
                "error_type": "AssertionError",
                "details": "{}",
                "score": 0.0,
            }
        ],
    )
    for table, schema in TABLES.items():
        dataset = ds.dataset(str(tmp_path / table), format="parquet")
        for fragment in dataset.get_fragments():
            assert fragment.physical_schema.remove_metadata().equals(schema), fragment.path
        read = dataset.to_table()
        assert read.schema.remove_metadata().equals(schema) and read.num_rows == 2
    assert verify_store(store).ok
    # a shard whose all-null column has the null type is caught
    bad = pa.table(
        {
            **{f.name: pa.nulls(1, f.type) for f in TABLES["scores"]},
            "details": pa.nulls(1, pa.null()),
        }
    )
    pq.write_table(
        bad.replace_schema_metadata({"reprogrid.schema_version": "1"}),
        tmp_path / "scores" / "c.parquet",
    )
    [problem] = verify_store(store).problems
    assert problem.kind is ProblemKind.SCHEMA_MISMATCH and "details: null" in problem.detail


def test_quarantine_needs_the_writer_lock(finished):
    store, _ = finished
    [file] = [f for f in store.files("runs")]
    with pytest.raises(NotLockHolder, match="writer lock"):
        store.quarantine(file, {"kind": "test"})
    with store.writer_lock():
        moved = store.quarantine(file, {"kind": "test"})
    assert (Path(store.root) / moved).is_file() and not Path(file.path).exists()


def test_files_not_named_like_shards_are_foreign_and_readers_skip_them(finished):
    store, complete = finished
    folder = Path(store.table_dir("executions"))
    good = (folder / f"{complete[0]}.parquet").read_bytes()
    for name in ("~orphan.parquet", f"{complete[0]}~.parquet", "old/copy.parquet"):
        (folder / name).parent.mkdir(exist_ok=True)
        (folder / name).write_bytes(good)
    assert store.read_table("executions").num_rows == sum(
        store.read_shard("executions", k).num_rows for k in complete
    )
    found = {(p.kind, p.file) for p in verify_store(store).problems}
    assert found == {
        (ProblemKind.FOREIGN_FILE, n)
        for n in ("old/copy.parquet", "~orphan.parquet", f"{complete[0]}~.parquet")
    }
    with store.writer_lock():
        build_index(store, quarantine=True)
    assert {n for t, n in quarantined(Path(store.root))} == {n for _, n in found}
    assert verify_store(store).ok


def test_repeat_checks_are_named_by_their_run_and_checked_like_every_shard(finished):
    """A repeat-check shard belongs to its run id, not to a setting: a damaged one is found
    without asking to redo any setting, and rows of another run under its name are a key
    mismatch."""
    store, _ = finished
    report = verify_store(store)
    assert report.ok
    summary = next(s for s in report.tables if s.table == "repeat_checks")
    assert summary.files == 1 and sum(summary.trusted.values()) == 1
    (name,) = [n for n in store.shards("repeat_checks")]
    path = Path(store.shard_path("repeat_checks", name))
    original = path.read_bytes()
    path.write_bytes(flip_data_page_bit(original, "outcome_change_sum"))
    found = verify_store(store)
    assert [(p.table, p.setting_key) for p in found.problems] == [("repeat_checks", None)]
    assert found.settings_to_redo == ()
    path.write_bytes(original)
    rows = store.read_shard("repeat_checks", name).to_pylist()
    store.write_rows("repeat_checks", "another-run", rows)
    [problem] = verify_store(store).problems
    assert (problem.kind, problem.table) == (ProblemKind.KEY_MISMATCH, "repeat_checks")


# -- the same damage on a compacted store (docs/store.md, "Compaction") -------------------------
# Settings, executions and scores are packed (one member per row group here, so a flipped bit
# in row group 0 costs exactly the first setting); generations and the lone runs shard stay
# loose and are found as before.
PACKED = ("settings", "executions", "scores")
PACK_DAMAGES: list[tuple[str, str, Callable[[bytes], bytes], ProblemKind]] = [
    ("truncated-pack", "executions", truncate, ProblemKind.TRUNCATED),
    ("garbage-pack", "scores", garbage_in_data, MISMATCH),
]


def compact_finished(store: Store) -> None:
    from storage.compact import PackPolicy, compact

    with store.writer_lock():
        compact(store, PackPolicy(row_group_rows=1, row_group_rows_of={}))


def the_pack(store: Store, table: str) -> Path:
    [pack] = Path(store.table_dir(table)).glob("pack-*.parquet")
    return pack


@pytest.mark.parametrize("i", range(len(DAMAGES)), ids=[d[0] for d in DAMAGES])
def test_verify_finds_each_damage_on_compacted_files(finished, i):
    store, complete = finished
    compact_finished(store)
    _, table, how, kind = DAMAGES[i]
    if table in PACKED:
        path, key, redo = the_pack(store, table), None, [complete[0]]
    else:
        path = Path(store.shard_path(table, RUN_ID if table == "runs" else complete[i]))
        key = None if table == "runs" else complete[i]
        redo = [key] if key else []
    path.write_bytes(how(path.read_bytes()))
    report = verify_store(store)
    assert [(p.kind, p.table, p.file, p.setting_key) for p in report.problems] == [
        (kind, table, path.name, key)
    ]
    assert list(report.settings_to_redo) == redo
    with store.writer_lock():
        build_index(store, quarantine=True)
    assert complete_keys(store) == set(complete) - set(redo)
    for t in TABLES:
        assert len(pd.read_parquet(Path(store.root) / t)) == store.read_table(t).num_rows
    assert {p.kind for p in verify_store(store).problems} <= {ProblemKind.MISSING_RESULT}


@pytest.mark.parametrize("i", range(len(PACK_DAMAGES)), ids=[d[0] for d in PACK_DAMAGES])
def test_a_truncated_or_garbled_pack_costs_only_its_damaged_row_groups(finished, i):
    store, complete = finished
    compact_finished(store)
    _, table, how, kind = PACK_DAMAGES[i]
    path = the_pack(store, table)
    path.write_bytes(how(path.read_bytes()))
    report = verify_store(store)
    assert [(p.kind, p.file) for p in report.problems] == [(kind, path.name)]
    redo = set(report.settings_to_redo)
    if kind is ProblemKind.TRUNCATED:
        assert redo == set(complete)  # no footer: nothing can be vouched for
    else:
        assert redo and redo < set(complete)
    with store.writer_lock():
        build_index(store, quarantine=True)
    assert complete_keys(store) == set(complete) - redo
