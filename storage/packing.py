"""How packs come and go, step by step, so that a kill between any two steps loses nothing and
counts nothing twice for readers of the store (docs/store.md, "Compaction", for the table of
what each crash leaves). The writer only, holding the lock.

Packing loose shards (and small packs) into packs, one transaction per table:
  1. each pack is written under a hidden temporary name (fsynced);
  2. the manifest is committed naming the new packs and retiring the files they replace;
  3. the packs are renamed into place (the folder fsynced);
  4. the retired files are removed;
  5. the manifest is committed without the retired records.
Dissolving a pack (before one of its members is rewritten, or to salvage a damaged one):
  1. its members are written as loose shards (each replaces the member for readers at once);
  2. the manifest is committed retiring the pack; 3. it is removed; 4. the record is dropped.
`recover` finishes whatever a kill cut short: a committed pack still under its temporary name is
renamed into place (or, if that file is gone, dropped: its originals were never removed),
leftovers are removed, and a pack whose members a loose shard replaces is dissolved.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from storage import quarantine
from storage.errors import NotLockHolder
from storage.files import Files, derive_manifest
from storage.filesystem import list_files
from storage.integrity import ShardDamaged, arrow_owned, inspect
from storage.layout import LivePack, StoredFile, is_pack_name, pack_name
from storage.manifest import MANIFEST_FILE, Manifest, ManifestDamaged, PackRecord, Retired
from storage.packs import encode_pack, intact_groups, read_members
from storage.schema import TABLES

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Recovery:
    """What `recover` found and did."""

    revealed: int = 0  # committed packs renamed into place
    dropped: int = 0  # committed packs whose file was gone (their originals still counted)
    removed: int = 0  # leftovers removed (files whose rows are in packs)
    dissolved: int = 0  # packs dissolved (a loose shard had replaced some of their members)
    manifest_rebuilt: bool = False  # a damaged manifest was set aside and derived again

    @property
    def anything(self) -> bool:
        return (
            bool(self.revealed or self.dropped or self.removed or self.dissolved)
            or self.manifest_rebuilt
        )


def _require_lock(store: Files, what: str) -> None:
    if not store.holds_writer_lock:
        raise NotLockHolder(f"{what} in store {store.uri} needs its writer lock")


def pack_files(
    store: Files,
    table: str,
    groups: Sequence[Sequence[tuple[str, pa.Table]]],
    retire: Sequence[StoredFile],
    target_rows: int,
) -> tuple[PackRecord, ...]:
    """Replace the files `retire` (loose shards and packs of `table`) by one pack per group of
    (key, rows) (keys sorted), as one transaction. The groups hold exactly the rows of the
    retired files; the caller read them through the store's checks."""
    _require_lock(store, "packing shards")
    stamp = f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    written = []
    for members in groups:
        name = pack_name(stamp, uuid.uuid4().hex[:12])
        payload, record = encode_pack(table, TABLES[table], members, name, target_rows)
        written.append((store.put_temp(table, name, payload), record))  # step 1
    records = tuple(r for _, r in written)
    by = tuple(r.file for r in records)
    current = store.manifest()
    retired = [Retired(table, f.name, f.size, f.mtime_ns, by) for f in retire]
    store.commit_manifest(
        current.with_packs(records).with_retired([*current.retired, *retired])
    )  # step 2
    for temp, record in written:
        store.reveal(temp, table, record.file)  # step 3
    store.sync(store.table_dir(table))
    for f in retire:
        store.remove(f.path)  # step 4
    store.sync(store.table_dir(table))
    settle(store)  # step 5
    return records


def settle(store: Files) -> int:
    """Remove every leftover the manifest retires, then commit it without its retired records
    (and without the records of retired packs now gone). Returns the files removed."""
    current = store.manifest()
    if not current.retired:
        return 0
    removed = 0
    for table in sorted({r.table for r in current.retired}):
        view = store.view(table, current)
        for file, _ in view.leftovers:
            store.remove(file.path)
            removed += 1
        store.sync(store.table_dir(table))
    gone = {
        f"{r.table}/{r.file}"
        for r in current.retired
        if not _exists(store, f"{store.table_dir(r.table)}/{r.file}")
    }
    store.commit_manifest(current.with_packs((), drop=gone).with_retired(()))
    return removed


def _exists(store: Files, path: str) -> bool:
    return store.fs.get_file_info(path).type != pafs.FileType.NotFound


def dissolve(
    store: Files,
    table: str,
    pack: LivePack,
    damage: str | None = None,
    kind: str = "damaged_pack",
) -> tuple[int, str | None]:
    """Write the live members of `pack` as loose shards, then retire and remove it. A pack that
    fails its checks (`damage` says how, or reading it shows it) gives back the members of its
    intact row groups and goes to the quarantine; its other members are lost (their settings
    are redone). Returns how many members were written, and where the damaged pack went."""
    _require_lock(store, "dissolving a pack")
    members: list[tuple[str, pa.Table]] = []
    if damage is None:
        try:
            members = store.read_pack(pack.record, [m.key for m in pack.members])
        except ShardDamaged as e:
            damage = str(e)
    if damage is not None:
        members = _salvage(store, pack)
    for key, rows in members:
        store.write_shard(table, key, rows)  # step 1
    if damage is not None:
        restored = {k for k, _ in members}
        reason = {
            "kind": kind,
            "detail": damage,
            "restored": sorted(restored),
            "lost": [m.key for m in pack.members if m.key not in restored],
        }
        return len(members), quarantine_file(store, pack.file, reason)
    current = store.manifest()
    retire = Retired(table, pack.file.name, pack.file.size, pack.file.mtime_ns, ())
    store.commit_manifest(current.with_retired([*current.retired, retire]))  # step 2
    store.remove(pack.file.path)  # step 3
    store.sync(store.table_dir(table))
    settle(store)  # step 4
    return len(members), None


def _salvage(store: Files, pack: LivePack) -> list[tuple[str, pa.Table]]:
    """The live members of a damaged pack that lie in row groups whose bytes (and the
    footer's) match the manifest's digests: exactly what was written, nothing else."""
    try:
        payload = store.read_bytes(pack.file.path)
    except OSError:
        return []
    groups = intact_groups(payload, pack.record)
    if not groups:
        return []
    vouched = {m.key for g in groups for m in pack.record.members_of(g)}
    keys = [m.key for m in pack.members if m.key in vouched]
    parquet = pq.ParquetFile(pa.BufferReader(arrow_owned(payload)), page_checksum_verification=True)
    try:
        return read_members(parquet, pack.record, keys, TABLES[pack.record.table])
    except ShardDamaged:
        return []


def quarantine_file(store: Files, file: StoredFile, reason: Mapping[str, Any]) -> str:
    """Move `file` to `<root>/quarantine/<table>/<stamp>/<name>` with a `_reason.json` record
    beside it (`Store.quarantine`); a pack is dropped from the manifest once moved. Only the
    holder of the writer lock may do it."""
    if not store.holds_writer_lock:
        raise NotLockHolder(
            f"quarantining {file.table}/{file.name} needs this Store's writer lock "
            "(`with store.writer_lock(): ...`); readers only report damage"
        )
    moved = quarantine.move(store.fs, store.root, file, reason)
    forget(store, file)
    return moved


def release(store: Files, table: str, key: str) -> None:
    """Before shard `key` of `table` is rewritten: finish what a kill left, then dissolve the
    pack that holds it, so that readers never see its old rows next to the new ones."""
    recover(store)
    view = store.view(table, store.manifest())
    pack = view.pack_of(key)
    if pack is not None:
        logger.info("dissolving %s/%s to rewrite its member %s", table, pack.file.name, key)
        dissolve(store, table, pack)


def forget(store: Files, file: StoredFile) -> None:
    """After `file` left the table (quarantined): drop the manifest's record of it."""
    if not is_pack_name(file.name) or not _exists(store, store.manifest_path):
        return
    current = store.manifest()
    named = f"{file.table}/{file.name}"
    if any(f"{p.table}/{p.file}" == named for p in current.packs):
        kept = [r for r in current.retired if f"{r.table}/{r.file}" != named]
        store.commit_manifest(current.with_packs((), drop=[named]).with_retired(kept))


def recover(store: Files) -> Recovery:
    """Finish or undo what a kill left of a packing or a dissolve (see the module's doc). A
    store without a manifest and without packs (never compacted) has nothing to recover; one
    whose manifest is damaged, or gone while packs are there, gets one derived from the packs."""
    if not _exists(store, store.manifest_path):
        if not has_packs(store):
            return Recovery()
        _require_lock(store, "recovering a lost manifest")
        current, rebuilt = _rebuild(store, "no manifest, but packs are there"), True
    else:
        _require_lock(store, "recovering an interrupted compaction")
        rebuilt = False
        try:
            current = store.manifest()
        except ManifestDamaged as e:
            current, rebuilt = _rebuild(store, str(e)), True
    revealed = dropped = 0
    gone = []
    missing = [
        record
        for table in sorted({p.table for p in current.packs})
        for record in store.view(table, current).missing
    ]
    for record in missing:
        if _reveal_committed(store, record):
            revealed += 1
        else:
            logger.warning(
                "pack %s/%s is named by the manifest but gone: dropped (its rows are lost "
                "unless the files it replaced are still there)",
                record.table,
                record.file,
            )
            gone.append(f"{record.table}/{record.file}")
            dropped += 1
    if gone:
        store.commit_manifest(current.with_packs((), drop=gone))
    removed = settle(store)
    dissolved = 0
    for table in TABLES:
        for pack in store.view(table, store.manifest()).packs:
            if pack.superseded:
                dissolve(store, table, pack)
                dissolved += 1
    done = Recovery(revealed, dropped, removed, dissolved, rebuilt)
    if done.anything:
        logger.info("finished an interrupted compaction: %s", done)
    return done


def _reveal_committed(store: Files, record: PackRecord) -> bool:
    """Rename the temporary file of a committed pack into place, if it is that pack."""
    stem = record.file.removesuffix(".parquet")
    for file in store.files(record.table):
        if not file.name.startswith(f".tmp-{stem}-"):
            continue
        try:
            verdict, _ = inspect(store.read_bytes(file.path), TABLES[record.table])
        except (ShardDamaged, OSError):
            continue
        if verdict.sha256 == record.sha256:
            store.reveal(file.path, record.table, record.file)
            store.sync(store.table_dir(record.table))
            return True
    return False


def has_packs(store: Files) -> bool:
    """Whether a table folder holds a file named like a pack (names only: cheap)."""
    for table in TABLES:
        folder = store.table_dir(table)
        if list_files(store.fs, store.is_local, folder, table, lambda n: is_pack_name(n)):
            return True
    return False


def _rebuild(store: Files, why: str) -> Manifest:
    """Commit a manifest derived from the packs, keeping a copy of the damaged one in the
    quarantine first (the manifest is replaced in one rename: never absent meanwhile)."""
    if _exists(store, store.manifest_path):
        payload = store.read_bytes(store.manifest_path)
        quarantine.keep(
            store.fs, store.root, MANIFEST_FILE, payload, {"kind": "manifest", "detail": why}
        )
    derived = derive_manifest(store)
    store.commit_manifest(derived)
    logger.warning(
        "the manifest was damaged or lost (%s): derived again from %d pack(s)",
        why,
        len(derived.packs),
    )
    return derived
