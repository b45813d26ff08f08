"""Checking a table's files one by one, and moving what fails to the quarantine (docs/store.md).

`scan_table` classifies and checks every file of a table folder, at one of three depths:
`build_index` for readers (`status`, `plan`) at RECORDED, the writer at run start at SEAL, and
`verify_store` at DECODE. Integrity and quarantine are per file: a chunk `<setting_key>~<chunk>`
maps to its setting by `setting_key_of`, and a pack's check covers each of its members.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage import packing
from storage.errors import NotLockHolder
from storage.integrity import (
    QUARANTINED,
    ProblemKind,
    ShardDamaged,
    Trust,
    inspect,
    is_shard_key,
    setting_key_of,
)
from storage.layout import LivePack, StoredFile, is_pack_name, same_file
from storage.manifest import Manifest, Member
from storage.packs import compare, intact_groups, record_of
from storage.schema import RUN_TABLES, TABLES
from storage.store import TEMP_PREFIX, Store

RESULT_TABLES = ("generations", "executions", "scores")
# the column that names a shard's rows; else "setting_key"
KEY_COLUMN = dict.fromkeys(RUN_TABLES, "run_id")


class Depth(StrEnum):
    """How deep `scan_table` checks."""

    # Readers: what the last compaction wrote or checked is trusted by the manifest's record
    # while it is unchanged (a pack: its size; a loose shard: its size and mtime); every other
    # file by its seal (SHA-256 of all its bytes).
    RECORDED = "recorded"
    SEAL = "seal"  # the writer: every file's seal
    DECODE = "decode"  # verify: every seal, every row decoded, every row's key


@dataclass(frozen=True)
class FileCheck:
    """One file of a table folder and what its check found."""

    file: StoredFile
    shard_key: str | None  # None for a file that is not named like a shard
    setting_key: str | None  # the setting it belongs to; None for run-keyed and foreign files
    trust: Trust | None = None  # set when the shard passed
    problem: ProblemKind | None = None
    detail: str = ""
    gone: bool = False  # listed, but deleted before it was read (a lagging listing)
    num_rows: int = 0  # rows of a shard that passed (its footer's count)
    # A pack: the pack and its live members as (shard key, setting key or None, rows); a
    # check that fails counts against each member's setting, except those in row groups whose
    # bytes still match the manifest's digests (`vouched`: the writer gives them back).
    pack: LivePack | None = None
    members: tuple[tuple[str, str | None, int], ...] = ()
    vouched: tuple[tuple[str, str | None, int], ...] = ()

    @property
    def ok(self) -> bool:
        return self.trust is not None

    def settings(self) -> set[str]:
        """The settings this file holds rows of."""
        found = {s for _, s, _ in self.members if s}
        return found | {self.setting_key} if self.setting_key else found


@dataclass(frozen=True)
class Quarantined:
    table: str
    file: str  # its name in the table's folder
    setting_key: str | None
    kind: ProblemKind
    moved_to: str  # relative to the store's root; for a pack, its restored members say more
    restored: int = 0  # a pack's members given back from its intact row groups

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "file": self.file,
            "setting_key": self.setting_key,
            "kind": self.kind.value,
            "moved_to": self.moved_to,
            "restored": self.restored,
        }


def _setting_of(table: str, key: str) -> str | None:
    return None if table in RUN_TABLES else setting_key_of(key)


def _classify(file: StoredFile) -> FileCheck | None:
    """A FileCheck for a file not named like a shard, None for a hidden one (invisible to
    Parquet readers), or a FileCheck without a verdict yet for a shard."""
    parts = file.name.split("/")
    if any(p.startswith((".", "_")) for p in parts):
        if len(parts) == 1 and file.name.startswith(TEMP_PREFIX):
            return FileCheck(
                file,
                None,
                None,
                problem=ProblemKind.TEMPORARY_FILE,
                detail="left by an interrupted write",
            )
        return None
    key = file.name[: -len(".parquet")] if file.name.endswith(".parquet") else ""
    if is_pack_name(file.name):
        detail = "named like a pack, but the store's manifest does not name it"
        return FileCheck(file, None, None, problem=ProblemKind.FOREIGN_FILE, detail=detail)
    if len(parts) > 1 or not is_shard_key(key):
        return FileCheck(
            file,
            None,
            None,
            problem=ProblemKind.FOREIGN_FILE,
            detail="not named <key>.parquet in the table's folder; Parquet readers "
            "of the folder would read it",
        )
    return FileCheck(file, key, _setting_of(file.table, key))


def check_file(store: Store, file: StoredFile, decode: bool = False) -> FileCheck | None:
    """Classify and check one loose file (None for a hidden file). `decode` decodes sealed
    shards too (unsealed ones always are) and checks that their rows carry the shard's key."""
    check = _classify(file)
    if check is None or check.problem is not None:
        return check
    try:
        verdict, rows = inspect(store.read_bytes(file.path), TABLES[file.table], decode=decode)
    except FileNotFoundError:
        return replace(check, gone=True)
    except ShardDamaged as e:
        return replace(check, problem=e.kind, detail=e.detail)
    except OSError as e:
        return replace(check, problem=ProblemKind.READ_FAILED, detail=str(e))
    if rows is not None and rows.num_rows:
        expected = check.shard_key if file.table in RUN_TABLES else check.setting_key
        found = pc.unique(rows[KEY_COLUMN.get(file.table, "setting_key")]).to_pylist()
        if found != [expected]:
            detail = f"rows of {sorted(map(str, found))[:3]}"
            return replace(check, problem=ProblemKind.KEY_MISMATCH, detail=detail)
    return replace(check, trust=verdict.trust, num_rows=verdict.num_rows)


def check_pack(store: Store, pack: LivePack, decode: bool = False) -> FileCheck:
    """Check a pack the manifest names: its seal, that it is the recorded pack, and with
    `decode` every row (page CRCs), its row groups' digests and every member's key."""
    table, record = pack.file.table, pack.record
    members = tuple((m.key, _setting_of(table, m.key), m.rows) for m in pack.members)
    check = FileCheck(pack.file, None, None, pack=pack, members=members)
    payload = b""
    try:
        payload = store.read_bytes(pack.file.path)
        verdict, rows = inspect(payload, TABLES[table], decode=decode)
        if verdict.sha256 != record.sha256 or len(payload) != record.size:
            raise ShardDamaged(ProblemKind.PACK_MISMATCH, "not the pack the manifest records")
        if decode:
            groups = [g.members for g in record.row_groups]
            found = record_of(payload, table, record.file, record.members, groups)
            differs = compare(record, found)
            if differs:
                raise ShardDamaged(ProblemKind.PACK_MISMATCH, differs)
    except FileNotFoundError:
        return replace(check, gone=True)
    except ShardDamaged as e:
        return _damaged_pack(check, payload, e)
    except OSError as e:
        return replace(check, problem=ProblemKind.READ_FAILED, detail=str(e))
    if rows is not None and not _keys_match(table, record.members, rows):
        return replace(check, problem=ProblemKind.KEY_MISMATCH, detail="a member's rows")
    return replace(check, trust=verdict.trust, num_rows=record.rows)


def _damaged_pack(check: FileCheck, payload: bytes, damage: ShardDamaged) -> FileCheck:
    """A pack that fails: its members in row groups whose bytes (and the footer's) still match
    the manifest's digests are vouched for; the others are damaged."""
    assert check.pack is not None
    record = check.pack.record
    groups = intact_groups(payload, record) or []
    vouched_keys = {m.key for g in groups for m in record.members_of(g)}
    vouched = tuple(m for m in check.members if m[0] in vouched_keys)
    bad = tuple(m for m in check.members if m[0] not in vouched_keys)
    detail = damage.detail
    if vouched:
        detail += f" ({len(vouched)} of {len(check.members)} shard(s) in intact row groups)"
    return replace(check, problem=damage.kind, detail=detail, members=bad, vouched=vouched)


def _recorded_pack(pack: LivePack) -> FileCheck:
    table = pack.file.table
    members = tuple((m.key, _setting_of(table, m.key), m.rows) for m in pack.members)
    return FileCheck(
        pack.file,
        None,
        None,
        trust=Trust.RECORDED,
        num_rows=pack.record.rows,
        pack=pack,
        members=members,
    )


def _keys_match(table: str, members: Sequence[Member], rows: pa.Table) -> bool:
    """Whether each member's rows carry its key (its setting's, or its run id)."""
    keys = pa.array([m.key if table in RUN_TABLES else setting_key_of(m.key) for m in members])
    repeat = np.repeat(np.arange(len(members)), [m.rows for m in members])
    found = rows[KEY_COLUMN.get(table, "setting_key")]
    if len(repeat) != len(found):
        return False
    same = pc.equal(found.cast(pa.string()), keys.take(pa.array(repeat)))
    return bool(pc.all(pc.fill_null(same, False)).as_py())


def scan_table(
    store: Store,
    table: str,
    depth: Depth = Depth.SEAL,
    manifest: Manifest | None = None,
    keys: Collection[str] | None = None,
) -> tuple[FileCheck, ...]:
    """Check every file of a table folder (on threads for object stores): loose shards, the
    packs the manifest names (and those it names that are missing), leftovers of a compaction
    cut short, foreign and temporary files. `keys`: only the files holding rows of these
    settings (a pack: one of its members; what a command reading a few settings reads)."""
    current = manifest if manifest is not None else store.readable_manifest()
    files = store.files(table)
    view = store.view(table, current)  # packs without a manifest: their own lists
    leftovers = {f.name for f, _ in view.leftovers}
    packs = {p.file.name: p for p in view.packs}
    recorded = current.files.get(table, {})
    if keys is not None:
        files = [f for f in files if _holds(f, keys, packs.get(f.name))]

    def one(file: StoredFile) -> FileCheck | None:
        if file.name in leftovers:
            return FileCheck(
                file,
                None,
                None,
                problem=ProblemKind.COMPACTION_LEFTOVER,
                detail="its rows are also in a pack (a compaction cut short): Parquet readers "
                "of the folder count them twice until the next writer removes it",
            )
        if file.name in packs:
            pack = packs[file.name]
            if depth is Depth.RECORDED and file.size == pack.record.size:
                return _recorded_pack(pack)
            return check_pack(store, pack, decode=depth is Depth.DECODE)
        record = recorded.get(file.name) if depth is Depth.RECORDED else None
        if record is not None and same_file(file, record.size, record.mtime_ns):
            # recorded names were loose shards' names: no need to classify them again
            key = file.name[: -len(".parquet")]
            setting = _setting_of(table, key)
            return FileCheck(file, key, setting, trust=Trust.RECORDED, num_rows=record.rows)
        return check_file(store, file, decode=depth is Depth.DECODE)

    checks = [c for c in store.map_items(one, files) if c is not None]
    for record in view.missing:
        if keys is not None and not any(_setting_of(table, m.key) in keys for m in record.members):
            continue
        members = tuple((m.key, _setting_of(table, m.key), m.rows) for m in record.members)
        path = f"{store.table_dir(table)}/{record.file}"
        checks.append(
            FileCheck(
                StoredFile(table, record.file, path, 0),
                None,
                None,
                problem=ProblemKind.MISSING_FILE,
                detail="a pack the manifest names is not in the folder",
                members=members,
            )
        )
    return tuple(checks)


def _holds(file: StoredFile, keys: Collection[str], pack: LivePack | None) -> bool:
    """Whether `file` holds rows of one of the settings `keys` (runs shards hold none)."""
    if pack is not None:
        return any(_setting_of(file.table, m.key) in keys for m in pack.record.members)
    stem = file.name.removesuffix(".parquet")
    if file.table in RUN_TABLES or not is_shard_key(stem):
        return False
    return setting_key_of(stem) in keys


def trusted_settings(checks: Iterable[FileCheck]) -> set[str]:
    """Settings with at least one file that passed and none that failed."""
    checks = list(checks)
    good = {s for c in checks if c.ok for s in c.settings()}
    good |= {s for c in checks for _, s, _ in c.vouched if s}
    bad = {s for c in checks if c.problem is not None for s in c.settings()}
    return good - bad


def trusted_rows(checks: Iterable[FileCheck]) -> dict[str, int]:
    """Rows per setting over its shards that passed (loose or in packs), for settings none of
    whose files failed (a setting whose results are committed in chunks has several)."""
    checks = list(checks)
    trusted = trusted_settings(checks)
    rows: dict[str, int] = {}
    for c in checks:
        if not c.ok:
            continue
        held = c.members or ((c.shard_key or "", c.setting_key, c.num_rows),)
        for _, setting, n in held:
            if setting in trusted:
                rows[setting] = rows.get(setting, 0) + n
    return rows


def quarantine_damaged(store: Store, checks: Iterable[FileCheck]) -> tuple[Quarantined, ...]:
    """Move every file whose problem is in QUARANTINED to the store's quarantine (the caller
    holds the writer lock: NotLockHolder otherwise). Never deletes. A damaged pack first gives
    back the members of its intact row groups as loose shards (`packing.dissolve`)."""
    if not store.holds_writer_lock:
        raise NotLockHolder(f"quarantining files of store {store.uri} needs its writer lock")
    moved = []
    for c in checks:
        if c.problem not in QUARANTINED:
            continue
        if c.pack is not None:
            try:
                restored, to = packing.dissolve(
                    store, c.file.table, c.pack, damage=c.detail, kind=c.problem.value
                )
            except FileNotFoundError:
                continue
            moved.append(
                Quarantined(c.file.table, c.file.name, None, c.problem, to or "", restored)
            )
            continue
        reason = {
            "kind": c.problem.value,
            "detail": c.detail,
            "shard_key": c.shard_key,
            "setting_key": c.setting_key,
        }
        try:
            to = store.quarantine(c.file, reason)
        except FileNotFoundError:
            continue  # gone since it was checked: nothing to keep
        moved.append(Quarantined(c.file.table, c.file.name, c.setting_key, c.problem, to))
    return tuple(moved)
