"""What a table's folder holds, as readers of the store see it: loose shards `<key>.parquet` and
the packs the manifest names, minus what a compaction cut short left behind (docs/store.md,
"Compaction"). Pure: a listing and a manifest in, a view out.

The rules, which make every step of a compaction and of a dissolve readable (no row lost, none
counted twice):
- a pack counts when the manifest names it and its file is there;
- a file the manifest retires (a loose shard whose rows are now in packs, a pack rewritten into
  others, or a dissolved pack whose rows are loose again) is skipped while it is there unchanged
  (size, mtime) and every pack holding its rows is there; otherwise it counts as before (a
  retired pack stays named by the manifest until its file is gone, for this reason);
- a loose shard replaces a pack's member of the same key (it was written later: the store
  dissolves a pack before rewriting one of its members);
- a pack-named file the manifest does not name is not the store's (`verify` calls it foreign).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from storage.integrity import PACK_PREFIX, is_shard_key
from storage.manifest import Manifest, Member, PackRecord, Retired

PARQUET = ".parquet"


@dataclass(frozen=True)
class ShardInfo:
    table: str
    key: str
    path: str  # its own file, or the pack holding it
    size: int  # bytes of that file
    pack: str | None = None  # the pack's name when it is a pack's member


@dataclass(frozen=True)
class StoredFile:
    """Any file under a table's folder, shard or not."""

    table: str
    name: str  # relative to the table's folder ("sub/x.csv" for a file in a subfolder)
    path: str  # in the store's filesystem
    size: int  # bytes, as listed
    mtime_ns: int | None = None  # as listed (None where the filesystem reports none)


def is_pack_name(name: str) -> bool:
    """Whether `name` (relative to a table's folder) is named like a pack."""
    return name.startswith(PACK_PREFIX) and name.endswith(PARQUET) and "/" not in name


def pack_name(stamp: str, unique: str) -> str:
    """`pack-<UTC stamp>-<unique>.parquet`: sorts by when it was written, never reused."""
    return f"{PACK_PREFIX}{stamp}-{unique}{PARQUET}"


def same_file(file: StoredFile, size: int, mtime_ns: int | None) -> bool:
    """Whether the listed `file` is the one recorded with this size and mtime (an mtime either
    side does not know is not compared)."""
    if file.size != size:
        return False
    return mtime_ns is None or file.mtime_ns is None or file.mtime_ns == mtime_ns


@dataclass(frozen=True)
class LivePack:
    file: StoredFile
    record: PackRecord
    superseded: frozenset[str] = frozenset()  # members a loose shard of the same key replaces

    @property
    def members(self) -> tuple[Member, ...]:
        """The members readers read (those no loose shard replaces)."""
        return tuple(m for m in self.record.members if m.key not in self.superseded)


@dataclass(frozen=True)
class TableView:
    table: str
    loose: Mapping[str, StoredFile]  # shard key -> its file
    packs: tuple[LivePack, ...]
    leftovers: tuple[tuple[StoredFile, Retired], ...] = ()  # skipped: rows are elsewhere
    missing: tuple[PackRecord, ...] = ()  # named by the manifest, not in the folder
    unknown: tuple[StoredFile, ...] = ()  # named like packs, not named by the manifest

    def shards(self) -> dict[str, ShardInfo]:
        """Every shard readers read, by key: loose ones and packs' members."""
        out = {key: ShardInfo(self.table, key, f.path, f.size) for key, f in self.loose.items()}
        for pack in self.packs:
            for m in pack.members:
                file = pack.file
                out[m.key] = ShardInfo(self.table, m.key, file.path, file.size, file.name)
        return out

    def pack_of(self, key: str) -> LivePack | None:
        """The live pack whose member `key` readers read (None: loose, or not there)."""
        if key in self.loose:
            return None
        return next((p for p in self.packs if key in p.record.by_key), None)

    @property
    def pending(self) -> bool:
        """Something a compaction or dissolve cut short is left (the writer finishes it)."""
        return bool(self.leftovers or any(p.superseded for p in self.packs))


def table_view(table: str, files: Sequence[StoredFile], manifest: Manifest) -> TableView:
    """The view of one table folder (`files`: its listing) under `manifest`."""
    listed = {f.name: f for f in files}
    named = {p.file: p for p in manifest.packs_of(table)}
    live_names = {name for name in named if name in listed}
    leftovers = []
    skipped = set()
    for r in manifest.retired_of(table):
        file = listed.get(r.file)
        if file is None or not same_file(file, r.size, r.mtime_ns):
            continue
        if all(b in live_names for b in r.by):
            leftovers.append((file, r))
            skipped.add(r.file)
    loose, unknown = {}, []
    for name, file in listed.items():
        if name in skipped or name in named or "/" in name or not name.endswith(PARQUET):
            continue
        if is_pack_name(name):
            unknown.append(file)
        elif is_shard_key(name[: -len(PARQUET)]):
            loose[name[: -len(PARQUET)]] = file
    packs = tuple(
        LivePack(
            listed[name],
            record,
            frozenset(m.key for m in record.members if m.key in loose),
        )
        for name, record in sorted(named.items())
        if name in live_names and name not in skipped
    )
    retired = {r.file for r in manifest.retired_of(table)}
    missing = tuple(
        record
        for name, record in sorted(named.items())
        if name not in listed and name not in retired
    )
    return TableView(table, loose, packs, tuple(leftovers), missing, tuple(unknown))
