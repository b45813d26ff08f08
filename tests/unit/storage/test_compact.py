"""Compaction (docs/store.md, "Compaction"): packs hold the same rows the shards held, for the
store's readers and for plain Parquet readers; a kill between any two steps of a compaction or a
dissolve loses no row and counts none twice; the next writer finishes what a kill left; a
damaged pack gives back every row group that is intact."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from storage.compact import PackPolicy, compact
from storage.errors import NotLockHolder
from storage.index import build_index
from storage.integrity import ProblemKind, setting_key_of
from storage.layout import is_pack_name
from storage.schema import TABLES
from storage.store import QUARANTINE_DIR, REASON_FILE, Store
from storage.verify import verify_store
from tests.conftest import REPO_ROOT
from tests.fixtures_store import (
    BASE,
    INST,
    RUN_ID,
    Spec,
    _settings_row,
    _write_run,
    write_repeat_check,
    write_setting,
    write_synthetic_store,
)
from tests.unit.storage.crashes import KILL_SCRIPT, Crash, crash_before
from tests.unit.storage.damage import flip_data_page_bit

# one member per row group: a flipped bit costs exactly one setting
ONE_PER_GROUP = PackPolicy(row_group_rows=1, row_group_rows_of={})


def rows(store: Store) -> dict[str, list[str]]:
    """Every table's rows as the store reads them, order aside (each row as sorted JSON)."""
    return {
        table: sorted(json.dumps(r, sort_keys=True, default=str) for r in read.to_pylist())
        for table in TABLES
        for read in [store.read_table(table)]
    }


def plain_counts(root: Path) -> dict[str, int]:
    """Rows per table as pandas reads the table folders (what every Parquet engine sees)."""
    return {t: len(pd.read_parquet(root / t)) if (root / t).is_dir() else 0 for t in TABLES}


def complete(store: Store) -> set[str]:
    return {k for k, s in build_index(store).items() if s.complete}


def small_store(root: Path) -> list[str]:
    """Three complete settings, a failed one, a run and a repeat check; the complete keys."""
    store = Store(str(root))
    keys = [
        write_setting(store, Spec(BASE, "own", "greedy", 2048, "bf16", 30)),
        write_setting(store, Spec(INST, "own", "greedy", 2048, "bf16", 60)),
        write_setting(store, Spec(INST, "instruct", "greedy", 512, "fp16", 50)),
    ]
    failed = Spec(INST, "own", "greedy", 2048, "fp32", 0, status="failed", reason="OOM")
    store.write_rows("settings", "f" * 64, [_settings_row(failed, "f" * 64)])
    _write_run(store, keys)
    write_repeat_check(store, keys[0])
    return sorted(keys)


def compacted(store: Store, policy: PackPolicy = ONE_PER_GROUP):
    with store.writer_lock():
        return compact(store, policy)


def test_packs_hold_the_same_rows_for_every_reader(tmp_path):
    specs = write_synthetic_store(str(tmp_path))
    store = Store(str(tmp_path))
    before, counts, index = rows(store), plain_counts(tmp_path), build_index(store)
    shards = {t: set(store.shards(t)) for t in TABLES}
    report = compacted(store)
    assert {t.table: t.files_after for t in report.tables} == {
        "settings": 3,  # one pack of the 12 complete settings; the skipped and failed stay loose
        "executions": 1,
        "scores": 1,
        "runs": 1,
        "repeat_checks": 1,
    }
    assert all(is_pack_name(p.name) for p in (tmp_path / "scores").iterdir())
    store = Store(str(tmp_path))
    assert rows(store) == before and plain_counts(tmp_path) == counts
    assert build_index(store) == index
    assert {t: set(store.shards(t)) for t in TABLES} == shards
    key = next(k for k, s in specs.items() if s.status == "complete")
    assert store.read_shard("scores", key).to_pylist() == [
        r for r in store.read_table("scores").to_pylist() if r["setting_key"] == key
    ]
    assert verify_store(store).ok
    again = compacted(store)  # nothing new: nothing rewritten
    assert all(t.packs_written == 0 for t in again.tables)


def test_a_models_settings_are_packed_together(tmp_path):
    """Setting keys are hashes: packs cut in key order mixed every model into every pack."""
    store = Store(str(tmp_path))
    owner = {}
    for model in ("m-a", "m-b", "m-c"):
        for length in (256, 512, 1024, 2048):
            owner[write_setting(store, Spec(model, "own", "greedy", length, "bf16", 10))] = model
    _write_run(store, list(owner))
    with_model_order = sorted(owner, key=lambda k: (owner[k], k))
    assert with_model_order != sorted(owner)  # else key order would pass this test too
    compacted(store, PackPolicy(max_members=4))
    store = Store(str(tmp_path))
    for table in ("settings", "executions", "scores"):
        packs = store.view(table).packs
        assert len(packs) == 3 and not store.view(table).loose
        models = [{owner[setting_key_of(m.key)] for m in p.record.members} for p in packs]
        assert sorted(map(sorted, models)) == [["m-a"], ["m-b"], ["m-c"]], table
        for pack in packs:  # a pack's own layout: its members in key order
            keys = [m.key for m in pack.record.members]
            assert keys == sorted(keys)
    assert verify_store(store).ok


def test_new_settings_join_the_small_pack(tmp_path):
    keys = small_store(tmp_path)
    store = Store(str(tmp_path))
    compacted(store)
    added = write_setting(store, Spec(BASE, "instruct", "greedy", 512, "int4", 12))
    before = rows(store)
    report = compacted(store)
    assert {t.table: t.packs_written for t in report.tables}["scores"] == 1
    assert [p.name for p in (tmp_path / "scores").iterdir()] != []
    assert len(list((tmp_path / "scores").glob("*.parquet"))) == 1  # the old pack merged
    assert rows(Store(str(tmp_path))) == before
    assert complete(Store(str(tmp_path))) == {*keys, added}


def _kill_at_each(tmp_path: Path, monkeypatch, steps) -> None:
    """Kill a compaction of the small store before each of `steps` (None: all) in turn: the
    store's readers read exactly the rows of before; a plain reader that counts rows twice is
    told so by `verify`; the next writer finishes the compaction; then plain readers agree."""
    pristine = tmp_path / "pristine"
    small_store(pristine)
    before = rows(Store(str(pristine)))
    counts = plain_counts(pristine)
    with crash_before(monkeypatch, None) as taken:
        compacted(Store(str(shutil.copytree(pristine, tmp_path / "count"))))
    assert len(taken) > 20
    for n in steps or range(1, len(taken) + 1):
        n = n if n > 0 else len(taken) + n + 1  # -1: the last step
        root = shutil.copytree(pristine, tmp_path / f"kill-{n}")
        with pytest.raises(Crash), crash_before(monkeypatch, n):
            compacted(Store(str(root)))
        store = Store(str(root))
        assert rows(store) == before, f"killed before step {n} ({taken[n - 1]})"
        report = verify_store(store)
        if plain_counts(root) != counts:
            assert ProblemKind.COMPACTION_LEFTOVER in {p.kind for p in report.problems}
        with store.writer_lock():
            store.clean_temp()  # what every run does first: finish the compaction
        assert rows(store) == before and plain_counts(root) == counts
        assert verify_store(store).ok, f"after step {n}: {verify_store(store).problems}"
        compacted(store)
        assert rows(Store(str(root))) == before and plain_counts(root) == counts


def test_a_kill_at_each_step_of_a_table_loses_nothing(tmp_path, monkeypatch):
    # the first table's whole transaction (temporary pack, manifest, rename, the three
    # originals removed, manifest settled), the next table's first step, and the last step
    _kill_at_each(tmp_path, monkeypatch, [1, 2, 3, 4, 5, 6, 7, 8, -1])


@pytest.mark.heavy
def test_a_kill_at_any_step_loses_nothing(tmp_path, monkeypatch):
    _kill_at_each(tmp_path, monkeypatch, None)


def _kill_while_merging(tmp_path: Path, monkeypatch, steps) -> None:
    """A store compacted, then a new setting: the next compaction rewrites the small packs with
    it (the old packs retired by the new ones). Killed before each of `steps` (None: all),
    every row is read once; the next writer finishes."""
    pristine = tmp_path / "pristine"
    small_store(pristine)
    compacted(Store(str(pristine)))
    write_setting(Store(str(pristine)), Spec(BASE, "instruct", "greedy", 512, "int4", 12))
    before, counts = rows(Store(str(pristine))), plain_counts(pristine)
    with crash_before(monkeypatch, None) as taken:
        compacted(Store(str(shutil.copytree(pristine, tmp_path / "count"))))
    for n in steps or range(1, len(taken) + 1):
        n = n if n > 0 else len(taken) + n + 1
        root = shutil.copytree(pristine, tmp_path / f"kill-{n}")
        with pytest.raises(Crash), crash_before(monkeypatch, n):
            compacted(Store(str(root)))
        store = Store(str(root))
        assert rows(store) == before, f"killed before step {n} ({taken[n - 1]})"
        with store.writer_lock():
            store.clean_temp()
        assert rows(store) == before and plain_counts(root) == counts
        assert verify_store(store).ok


def test_a_kill_while_merging_a_small_pack_loses_nothing(tmp_path, monkeypatch):
    # the first table's merge: new pack, manifest, rename, old pack and new shard removed,
    # manifest settled; and the last step
    _kill_while_merging(tmp_path, monkeypatch, [1, 2, 3, 4, 5, 6, -1])


@pytest.mark.heavy
def test_a_kill_at_any_step_of_a_merge_loses_nothing(tmp_path, monkeypatch):
    _kill_while_merging(tmp_path, monkeypatch, None)


def test_rewriting_a_packed_shard_dissolves_its_pack(tmp_path):
    keys = small_store(tmp_path)
    store = Store(str(tmp_path))
    compacted(store)
    row = store.read_shard("scores", keys[0]).to_pylist()[0]
    with pytest.raises(NotLockHolder, match="in a pack"):
        store.write_rows("scores", keys[0], [{**row, "value": 0.5}])
    with store.writer_lock():
        store.write_rows("scores", keys[0], [{**row, "value": 0.5}])
    frame = pd.read_parquet(tmp_path / "scores")
    assert sorted(frame.setting_key) == keys  # each once: the pack was dissolved first
    assert frame.set_index("setting_key").value[keys[0]] == 0.5
    assert not any(is_pack_name(p.name) for p in (tmp_path / "scores").iterdir())
    assert Store(str(tmp_path)).read_shard("scores", keys[0]).to_pylist()[0]["value"] == 0.5
    assert verify_store(store).ok


def test_a_kill_while_dissolving_loses_nothing(tmp_path, monkeypatch):
    pristine = tmp_path / "pristine"
    keys = small_store(pristine)
    compacted(Store(str(pristine)))
    before, counts = rows(Store(str(pristine))), plain_counts(pristine)

    def rewrite(root: Path) -> None:
        store = Store(str(root))
        with store.writer_lock():
            store.write_table("executions", keys[1], store.read_shard("executions", keys[1]))

    with crash_before(monkeypatch, None) as taken:
        rewrite(shutil.copytree(pristine, tmp_path / "count"))
    for n in range(1, len(taken) + 1):
        root = shutil.copytree(pristine, tmp_path / f"kill-{n}")
        with pytest.raises(Crash), crash_before(monkeypatch, n):
            rewrite(root)
        store = Store(str(root))
        assert rows(store) == before, f"killed before step {n} ({taken[n - 1]})"
        with store.writer_lock():
            store.clean_temp()
        assert rows(store) == before and plain_counts(root) == counts
        assert verify_store(store).ok


@pytest.mark.parametrize("at", [2, 3, 5, 9])
def test_a_sigkilled_compaction_reads_the_same_rows(tmp_path, at):
    """A real SIGKILL in a child process (steps: 1 temp pack, 2 manifest, 3 reveal, 4+ the
    originals removed, then the manifest settled)."""
    small_store(tmp_path)
    before, counts = rows(Store(str(tmp_path))), plain_counts(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", KILL_SCRIPT, str(tmp_path), str(at), "compact"],
        env=env,
        capture_output=True,
        timeout=300,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-2000:]
    store = Store(str(tmp_path))
    assert rows(store) == before
    with store.writer_lock():
        store.clean_temp()
    assert rows(store) == before and plain_counts(tmp_path) == counts
    assert verify_store(store).ok


def test_a_damaged_pack_gives_back_its_intact_row_groups(tmp_path):
    keys = small_store(tmp_path)
    store = Store(str(tmp_path))
    compacted(store)
    [pack] = list((tmp_path / "executions").glob("pack-*.parquet"))
    pack.write_bytes(flip_data_page_bit(pack.read_bytes(), "passed"))  # row group 0: keys[0]
    report = verify_store(store)
    assert [(p.kind, p.table, p.file) for p in report.problems] == [
        (ProblemKind.CHECKSUM_MISMATCH, "executions", pack.name)
    ]
    assert report.settings_to_redo == (keys[0],)
    # readers (status, plan) trust what the last compaction wrote while its size holds; the
    # writer and verify read every byte
    assert complete(store) == set(keys)
    with store.writer_lock():
        index = build_index(store, quarantine=True)
    assert {k for k, s in index.items() if s.complete} == set(keys[1:])
    assert not index[keys[0]].has_executions and index[keys[0]].has_generations
    [reason] = (tmp_path / QUARANTINE_DIR).rglob(REASON_FILE)
    record = json.loads(reason.read_text())
    assert (record["lost"], record["restored"]) == ([keys[0]], keys[1:])
    assert sorted(pd.read_parquet(tmp_path / "executions").setting_key.unique()) == keys[1:]
    assert {p.kind for p in verify_store(store).problems} == {ProblemKind.MISSING_RESULT}


def test_a_damaged_manifest_is_reported_and_derived_again(tmp_path):
    small_store(tmp_path)
    store = Store(str(tmp_path))
    compacted(store)
    before = rows(store)
    manifest = tmp_path / "_manifest.json"
    manifest.write_bytes(manifest.read_bytes()[:-3] + b"xyz")
    store = Store(str(tmp_path))
    assert rows(store) == before  # readers fall back on the packs' own member lists
    assert [p.kind for p in verify_store(store).problems] == [ProblemKind.MANIFEST]
    with store.writer_lock():
        assert store.clean_temp() == 0
    assert verify_store(store).ok and rows(store) == before
    assert list((tmp_path / QUARANTINE_DIR / "store").rglob("_manifest.json"))
    (tmp_path / "_manifest.json").unlink()  # lost: readers use the packs' own lists
    store = Store(str(tmp_path))
    assert rows(store) == before
    assert [p.kind for p in verify_store(store).problems] == [ProblemKind.MANIFEST]
    with store.writer_lock():
        store.clean_temp()  # the next writer derives it from the packs
    assert verify_store(store).ok and rows(Store(str(tmp_path))) == before


def test_compaction_needs_the_lock_and_leaves_damaged_shards_loose(tmp_path):
    keys = small_store(tmp_path)
    store = Store(str(tmp_path))
    with pytest.raises(NotLockHolder):
        compact(store)
    path = Path(store.shard_path("scores", keys[0]))
    path.write_bytes(flip_data_page_bit(path.read_bytes(), "value"))
    compacted(store)
    assert path.is_file()  # never packed: left for the quarantine
    assert [p.file for p in verify_store(store).problems] == [path.name]
    assert complete(store) == set(keys[1:])
    assert store.read_table("runs").column("run_id").to_pylist() == [RUN_ID]
