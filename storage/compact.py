"""Compaction: the small shards of finished work packed into few larger files, so that a store of
thousands of settings reads in about the time of its bytes (docs/store.md, "Compaction").

`compact(store)` (the writer, holding the lock: at the end of a run and by `reprogrid compact`)
first finishes whatever a kill left of an earlier compaction, then per table packs the loose
shards of finished work, together with the members of small packs, into packs of at most
`PackPolicy.max_members` shards (`storage.packing` does it, step by step), and finally records
in the manifest every loose shard it checked, so that readers trust it while it is unchanged.

Finished work is what no run rewrites: the settings, executions and scores shards of settings
the index calls complete, runs that are not running, every repeat check. Generations are never
packed: each setting's stay one file (a damaged pack would cost many settings' GPU time, and the
plan counts a setting's samples from its file's footer); the manifest records them instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from storage import packing
from storage.checks import check_file
from storage.errors import NotLockHolder
from storage.index import build_index
from storage.integrity import ShardDamaged, setting_key_of
from storage.layout import LivePack, StoredFile, TableView, same_file
from storage.manifest import FileRecord
from storage.packing import Recovery
from storage.schema import TABLES, RunStatus, SettingStatus
from storage.store import Store

logger = logging.getLogger(__name__)

PACKED_TABLES = ("settings", "executions", "scores", "runs", "repeat_checks")
# the tables whose packs hold a model's settings together (`cut`); the others are cut in key order
BY_MODEL = frozenset({"settings", "executions", "scores"})


@dataclass(frozen=True)
class PackPolicy:
    """How packs are cut."""

    # Shards per pack: 6,000 settings make 6 files per table; a pack is rewritten whole when
    # it is merged with newer shards while it holds fewer than half of this.
    max_members: int = 1000
    # Rows per row group (whole members only; at least one member). A damaged pack gives back
    # every row group whose digest still matches, so this is what a flipped bit can cost; but
    # every reader pays per row group (a group's metadata, its pages' headers, and files many
    # times larger with one group per setting). Executions are computed again by executing
    # again: big groups. A scores row is a whole setting's result: middling groups. Settings
    # rows hold provenance nothing recomputes: small groups.
    row_group_rows: int = 4096
    row_group_rows_of: Mapping[str, int] = field(
        default_factory=lambda: {"settings": 64, "scores": 256}
    )
    # Loose finished shards a table needs before it is packed (a table is packed only when
    # that makes fewer files: two loose shards, or one and a small pack, at least).
    min_loose: int = 1

    def group_rows(self, table: str) -> int:
        """The row-group target of `table`'s packs."""
        return self.row_group_rows_of.get(table, self.row_group_rows)


@dataclass(frozen=True)
class TableCompaction:
    table: str
    packs_written: int
    shards_packed: int  # loose shards and members of small packs, now in the new packs
    files_before: int  # shard files and packs readers read
    files_after: int

    def to_json(self) -> dict[str, Any]:
        return {
            "packs_written": self.packs_written,
            "shards_packed": self.shards_packed,
            "files_before": self.files_before,
            "files_after": self.files_after,
        }


@dataclass(frozen=True)
class CompactReport:
    store: str
    recovered: Recovery
    tables: tuple[TableCompaction, ...]
    recorded: int  # loose shards the manifest records as checked

    def to_json(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "recovered": {
                "revealed": self.recovered.revealed,
                "dropped": self.recovered.dropped,
                "removed": self.recovered.removed,
                "dissolved": self.recovered.dissolved,
                "manifest_rebuilt": self.recovered.manifest_rebuilt,
            },
            "tables": {t.table: t.to_json() for t in self.tables},
            "recorded": self.recorded,
        }


DEFAULT_POLICY = PackPolicy()


def compact(store: Store, policy: PackPolicy = DEFAULT_POLICY) -> CompactReport:
    """Pack the store's finished shards (the caller holds the writer lock). Idempotent: a second
    call right after the first changes nothing."""
    if not store.holds_writer_lock:
        raise NotLockHolder(f"compacting store {store.uri} needs its writer lock")
    recovered = packing.recover(store)
    finished = _finished(store)
    owner = _models(store)
    done = []
    for table in PACKED_TABLES:
        done.append(_compact_table(store, table, finished[table], policy, owner))
    recorded = _record_loose(store)
    report = CompactReport(store.uri, recovered, tuple(done), recorded)
    logger.info(
        "compacted %s: %s",
        store.uri,
        ", ".join(f"{t.table} {t.files_before}->{t.files_after} files" for t in done),
    )
    return report


def compact_if_due(store: Store, min_loose: int) -> CompactReport | None:
    """The end of a run: compact once some packed table holds `min_loose` loose shards (a
    listing, no reads); a small store is left as it is, shard per file, read as fast."""
    if max(len(store.view(table).loose) for table in PACKED_TABLES) < min_loose:
        return None
    return compact(store, replace(DEFAULT_POLICY, min_loose=min_loose))


def _finished(store: Store) -> Mapping[str, set[str]]:
    """The shard keys of each packed table that no run rewrites."""
    complete = {
        key
        for key, state in build_index(store).items()
        if state.complete and state.status is SettingStatus.COMPLETE
    }
    runs = {
        str(row["run_id"])
        for row in store.read_table("runs").select(["run_id", "status"]).to_pylist()
        if row["status"] != RunStatus.RUNNING.value
    }
    by_table: dict[str, set[str]] = {"runs": runs}
    for table in ("settings", "executions", "scores"):
        by_table[table] = {k for k in store.view(table).loose if setting_key_of(k) in complete}
    by_table["repeat_checks"] = set(store.view("repeat_checks").loose)
    return by_table


def _compact_table(
    store: Store, table: str, finished: set[str], policy: PackPolicy, owner: Mapping[str, str]
) -> TableCompaction:
    """`owner`: each setting's group (`_models`), for the tables packed BY_MODEL."""
    view = store.view(table)
    before = len(view.loose) + len(view.packs)
    loose = sorted(k for k in view.loose if k in finished)
    small = [p for p in view.packs if len(p.record.members) < policy.max_members // 2]
    if len(loose) < policy.min_loose or len(loose) + len(small) < 2:
        return TableCompaction(table, 0, 0, before, before)  # it would not make fewer files
    parts, retire = _gather(store, table, view, loose, small)
    if table in BY_MODEL:
        groups = cut(parts, lambda key: owner.get(setting_key_of(key), ""), policy.max_members)
    else:
        groups = cut(parts, lambda key: "", policy.max_members)
    records = packing.pack_files(store, table, groups, retire, policy.group_rows(table))
    after = store.view(table)
    return TableCompaction(
        table,
        len(records),
        len(parts),
        before,
        len(after.loose) + len(after.packs),
    )


def cut(
    parts: Sequence[tuple[str, pa.Table]], group_of: Callable[[str], str], max_members: int
) -> list[list[tuple[str, pa.Table]]]:
    """`parts` ((key, rows)) cut into packs of at most `max_members`, a group's members next to
    each other (in group, then key order) and each pack's members in key order (a pack's
    layout). Setting keys are hashes: cut in key order, every pack of a 100-model store held
    some settings of every model, and reading one model's rows (or the problems view's batch
    of ten) decoded row groups of every pack."""
    ordered = sorted(parts, key=lambda part: (group_of(part[0]), part[0]))
    packs = [ordered[i : i + max_members] for i in range(0, len(ordered), max_members)]
    return [sorted(pack, key=lambda part: part[0]) for pack in packs]


def _models(store: Store) -> dict[str, str]:
    """Each stored setting's model and benchmark (one string), the group its rows are packed
    with."""
    settings = store.read_table("settings", columns=["setting_key", "model_name", "benchmark"])
    return {
        str(key): f"{model}\0{benchmark}"
        for key, model, benchmark in zip(
            settings.column("setting_key").to_pylist(),
            settings.column("model_name").to_pylist(),
            settings.column("benchmark").to_pylist(),
            strict=True,
        )
    }


def _gather(
    store: Store, table: str, view: TableView, loose: Sequence[str], small: Sequence[LivePack]
) -> tuple[list[tuple[str, pa.Table]], list[StoredFile]]:
    """(key, rows) of the shards to pack, in key order, and the files they come from. A loose
    shard that does not read (damaged) is left where it is, for the quarantine."""
    parts: list[tuple[str, pa.Table]] = []
    retire: list[StoredFile] = []
    for key in loose:
        rows = store.read_shard(table, key)
        if rows is None:
            continue
        parts.append((key, rows))
        retire.append(view.loose[key])
    for pack in small:
        try:
            parts += store.read_pack(pack.record, [m.key for m in pack.members])
        except (OSError, ShardDamaged) as e:
            logger.warning("pack %s/%s not merged: %s", table, pack.file.name, e)
            continue
        retire.append(pack.file)
    parts.sort(key=lambda p: p[0])
    return parts, retire


def _record_loose(store: Store) -> int:
    """Record every loose shard that passes its seal in the manifest (kept while a file is
    unchanged; new ones checked now), so that readers need not read it."""
    current = store.manifest()
    files: dict[str, dict[str, FileRecord]] = {}
    for table in TABLES:
        known = current.files.get(table, {})
        records = {}
        for file in store.view(table, current).loose.values():
            old = known.get(file.name)
            if old is not None and same_file(file, old.size, old.mtime_ns):
                records[file.name] = old
                continue
            check = check_file(store, file)
            if check is not None and check.ok and file.mtime_ns is not None:
                records[file.name] = FileRecord(file.size, file.mtime_ns, check.num_rows)
        if records:
            files[table] = records
    if files != {t: dict(r) for t, r in current.files.items() if r}:
        store.commit_manifest(replace(current, files=files))
    return sum(len(r) for r in files.values())
