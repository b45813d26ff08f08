"""`storage.damage`: what a command that answers from a store finds damaged among the files it
reads (every seal checked, packs included), limited to some settings' files when asked; files
readers never read are no damage; the refusal names each file and the way out."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.checks import Depth, scan_table
from storage.compact import PackPolicy, compact
from storage.damage import check_damage, find_damage
from storage.errors import StoreDamaged
from storage.store import Store
from tests.fixtures_store import RUN_ID, write_synthetic_store
from tests.unit.storage.damage import garbage_in_data

TABLES = ("settings", "generations", "executions", "scores", "runs", "repeat_checks")


@pytest.fixture
def store(tmp_path) -> tuple[Store, list[str]]:
    specs = write_synthetic_store(str(tmp_path))
    return Store(str(tmp_path)), sorted(k for k, s in specs.items() if s.status == "complete")


def damage(path: Path) -> None:
    path.write_bytes(garbage_in_data(path.read_bytes(), n=40))


def test_a_damaged_shard_is_found_with_its_setting_and_only_among_its_keys(store):
    store, complete = store
    key = complete[2]
    damage(Path(store.root, "executions", f"{key}.parquet"))
    assert not find_damage(store, ("settings", "scores", "generations")).files
    (found,) = find_damage(store, TABLES).files
    assert (found.table, found.file, found.settings) == ("executions", f"{key}.parquet", (key,))
    assert found.kind.value == "checksum_mismatch"
    assert find_damage(store, TABLES, keys=[key]).files == (found,)
    assert not find_damage(store, TABLES, keys=[complete[0], complete[1]]).files


def test_a_pack_with_a_flipped_byte_is_found_though_its_size_is_recorded(store):
    store, complete = store
    with store.writer_lock():
        compact(store, PackPolicy())
    (record,) = store.manifest().packs_of("scores")
    damage(Path(store.root, "scores", record.file))
    # what `status` trusts (a pack by its recorded size) cannot see it; a reader's check can
    recorded = scan_table(store, "scores", Depth.RECORDED)
    assert not [c for c in recorded if c.problem is not None]
    (found,) = find_damage(store, ("scores",)).files
    assert found.file == record.file and set(found.settings) == set(complete)
    assert find_damage(store, ("scores",), keys=[complete[0]]).files == (found,)


def test_a_runs_file_holds_no_setting_and_is_named_as_rows_left_out(store):
    store, _ = store
    damage(Path(store.root, "runs", f"{RUN_ID}.parquet"))
    damaged = find_damage(store, TABLES)
    (found,) = damaged.files
    assert found.settings == () and not damaged.settings
    assert damaged.left_out() == (f"left out the rows of {found.describe()}",)


def test_files_readers_never_read_are_no_damage(store):
    store, complete = store
    folder = Path(store.root, "scores")
    (folder / ".tmp-interrupted.parquet").write_bytes(b"half a shard")
    (folder / "notes.txt").write_text("not a shard")
    assert not find_damage(store, TABLES).files


def test_the_refusal_names_every_file_its_settings_and_the_way_out(store):
    store, complete = store
    for table in ("settings", "scores"):
        damage(Path(store.root, table, f"{complete[1]}.parquet"))
    with pytest.raises(StoreDamaged) as refused:
        check_damage(store, TABLES, skip=False)
    message = str(refused.value)
    for table in ("settings", "scores"):
        assert f"{table}/{complete[1]}.parquet: checksum_mismatch" in message
    assert complete[1][:12] in message and f"reprogrid verify --fix --store {store.uri}" in message
    skipped = check_damage(store, TABLES, skip=True)
    assert skipped.settings == {complete[1]}
    (line,) = skipped.left_out()
    assert line.startswith(f"left out setting {complete[1][:12]}: damaged settings/")
    assert f"scores/{complete[1]}.parquet" in line
