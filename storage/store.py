"""The Parquet store: atomic sealed shard writes, checked reads, packs, quarantine, the lock.

Layout: `<root>/<table>/<key>.parquet`, one shard per setting key (per run id for `runs`), or
per chunk `<setting_key>~<chunk>` (`storage.integrity.setting_key_of`). A shard is written to a
hidden temporary name in the same folder and moved into place, so a reader (or a crashed writer)
never sees half a shard: Parquet readers skip names starting with "." or "_". The driver is the
only writer; workers return rows.

A compacted store also holds packs, `<table>/pack-<stamp>-<id>.parquet`: many shards of the
table in one sealed file, named with their members by the manifest `<root>/_manifest.json`
(`storage.packs`, `storage.manifest`, `storage.compact`). Readers of the store see one table of
shards either way (`storage.layout`): `shards`, `read_shard` and `read_table` read a pack's
members like loose shards, and rewriting a member first dissolves its pack (`write_table`).

Every shard is sealed with a SHA-256 of the whole file in its own footer plus Parquet page CRCs
(`storage.integrity`), and every read checks them: a shard that fails is treated as missing
(logged). Only the holder of the writer lock moves such a file to `<root>/quarantine/` (never
deletes it); `storage.verify` decides what to move.

`root` is a local folder (a shared filesystem too) or an object-store URI: any URI pyarrow
understands (`s3://bucket/prefix?endpoint_override=...`, `gs://...`, `abfs://...`), else any
fsspec URI (`memory://...`, a gcsfs/adlfs protocol, ...). On object stores the temporary object is
moved (copied) to its final key: an object appears whole or not at all, so the same contract
holds. A listing may lag behind writes on some S3-compatible servers: a listed shard that no
longer reads counts as missing, and one not yet listed is at worst redone (writes are idempotent).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from storage import lock, packing, quarantine, rows
from storage.errors import NotLockHolder, SchemaMismatch, StoreError, StoreLocked, UnknownTable
from storage.files import TEMP_PREFIX, Files
from storage.filesystem import remove
from storage.layout import ShardInfo, StoredFile, TableView
from storage.lock import LOCK_OBJECT
from storage.quarantine import QUARANTINE_DIR, REASON_FILE
from storage.schema import TABLES

__all__ = [
    "LOCK_OBJECT",
    "QUARANTINE_DIR",
    "REASON_FILE",
    "TEMP_PREFIX",
    "NotLockHolder",
    "SchemaMismatch",
    "ShardInfo",
    "Store",
    "StoreError",
    "StoreLocked",
    "StoredFile",
    "UnknownTable",
]

logger = logging.getLogger(__name__)


class Store(Files):
    """A folder (or object-store prefix) of Parquet tables: its files (storage/files.py), and
    what spans them: rows written and a packed shard rewritten, a table read whole
    (storage.rows), quarantine, compaction's recovery, the writer lock."""

    def write_rows(self, table: str, key: str, rows: Sequence[Mapping[str, Any]]) -> None:
        schema = TABLES[table] if table in TABLES else None
        if schema is None:
            raise UnknownTable(f"unknown table {table!r}; tables: {', '.join(TABLES)}")
        unknown = {c for row in rows for c in row} - set(schema.names)
        if unknown:
            raise SchemaMismatch(f"table {table!r} has no column(s) {', '.join(sorted(unknown))}")
        try:
            data = pa.Table.from_pylist([dict(r) for r in rows], schema=schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise SchemaMismatch(f"rows for table {table!r} do not fit its schema: {e}") from e
        self.write_table(table, key, data)

    def write_table(self, table: str, key: str, data: pa.Table) -> None:
        """Atomically replace the shard `key` of `table` (re-running never duplicates). The
        data is cast to the table's schema, so every shard has the same column types (an
        all-null column keeps its type). A shard held by a pack is rewritten after its pack is
        dissolved into loose shards (the writer lock is needed then: NotLockHolder)."""
        self.shard_path(table, key)  # a valid key, before anything is touched
        if self.readable_manifest().touches(table, key):
            if not self._holds_lock:
                raise NotLockHolder(
                    f"shard {table}/{key} is in a pack: rewriting it needs the writer lock"
                )
            packing.release(self, table, key)
        self.write_shard(table, key, data)

    def clean_temp(self) -> int:
        """Finish a compaction that was cut short (the manifest says what), then remove the
        temporary files left by a crashed writer (call only while holding the lock)."""
        packing.recover(self)
        removed = 0
        folders = [self.root, *(self.table_dir(t) for t in TABLES)]  # the manifest's: the root
        for folder in folders:
            selector = pafs.FileSelector(folder, allow_not_found=True)
            for info in self.fs.get_file_info(selector):
                if info.type == pafs.FileType.File and info.base_name.startswith(TEMP_PREFIX):
                    remove(self.fs, info.path)
                    removed += 1
        return removed

    def quarantine(self, file: StoredFile, reason: Mapping[str, Any]) -> str:
        """Move `file` to `<root>/quarantine/<table>/<stamp>/<name>` with a `_reason.json`
        record (`reason` plus where it came from) beside it; returns the new path relative to
        the root. Never deletes. Only the holder of the writer lock may do it. A pack is
        dropped from the manifest once moved."""
        return packing.quarantine_file(self, file, reason)

    def quarantine_records(self) -> list[dict[str, Any]]:
        """The `_reason.json` record of every quarantined file (what it was, why, when, where
        it went), oldest first. An unreadable record is skipped (logged)."""
        return quarantine.records(self.fs, self.root)

    def shards(self, table: str) -> dict[str, ShardInfo]:
        """Every shard readers read, by key: loose ones and the members of packs."""
        return self.view(table).shards()

    def read_table(
        self,
        table: str,
        keys: Sequence[str] | None = None,
        columns: Sequence[str] | None = None,
        within: TableView | None = None,
    ) -> pa.Table:
        """All readable shards of a table (optionally only those of `keys`: a setting's chunk
        shards `<key>~<chunk>` belong to its key; only `columns` if given), packs' members
        included, in shard-key order (a setting's whole shard, then its chunks in order). A
        listed shard that is gone, unreadable or damaged by the time it is read is left out.
        `within`: the table's `view`, listed once for many reads of some of its keys (else
        the table is listed for this read)."""
        return rows.read_table(self, table, keys, columns, within)

    @contextlib.contextmanager
    def writer_lock(self, wait_s: float = 0.0) -> Iterator[None]:
        """Exclusive writer lock; raises StoreLocked after `wait_s` seconds of waiting. Local
        stores use an advisory `flock` on `<root>/.lock` (released by the OS if the holder
        dies), object stores a lock object (`storage.lock.object_lock`). While it is held,
        this Store may quarantine and pack."""
        held: contextlib.AbstractContextManager[lock.Lease | None]
        if self.is_local:
            held = lock.local_lock(self.root, self.uri, wait_s)
        else:
            held = lock.object_lock(self.fs, self.root, self.uri, wait_s, self.lease_s)
        with held as lease:
            self._holds_lock, self._lease = True, lease
            try:
                yield
            finally:
                self._holds_lock, self._lease = False, None

    def writer_active(self) -> bool:
        """Whether a writer holds the lock now, without taking it (readers use this)."""
        if not self.is_local:
            holder = self._read_lock(f"{self.root}/{LOCK_OBJECT}")
            return holder is not None and lock.holder_active(holder)
        return lock.local_writer_active(self.root)

    def _read_lock(self, path: str) -> str | None:
        return lock.read_lock(self.fs, path)
