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
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from storage import lock, manifest, packing, quarantine, rows
from storage.errors import NotLockHolder, SchemaMismatch, StoreError, StoreLocked, UnknownTable
from storage.filesystem import list_files, remove, rename, resolve, sync_dir, write_file
from storage.integrity import (
    ProblemKind,
    ShardDamaged,
    ShardVerdict,
    Trust,
    arrow_owned,
    inspect,
    is_shard_key,
    seal,
    setting_key_of,
)
from storage.layout import ShardInfo, StoredFile, TableView, table_view
from storage.lock import LOCK_OBJECT
from storage.manifest import MANIFEST_FILE, Manifest, ManifestDamaged, PackRecord
from storage.packs import read_members
from storage.quarantine import QUARANTINE_DIR, REASON_FILE
from storage.schema import SCHEMA_VERSION, TABLES

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

TEMP_PREFIX = ".tmp-"
# Parallel reads on object stores: each shard is a round trip; pyarrow releases the GIL in I/O.
OBJECT_READ_THREADS = 16


class Store:
    """A folder (or object-store prefix) of Parquet tables."""

    def __init__(
        self, uri: str, filesystem: pafs.FileSystem | None = None, lease_s: float = lock.LEASE_S
    ):
        self.uri = uri
        self.lease_s = lease_s  # an object store's writer lock: its lease (storage/lock.py)
        self._lease: lock.Lease | None = None
        if filesystem is not None:
            self.fs, self.root = filesystem, uri.split("://", 1)[-1].rstrip("/")
        else:
            self.fs, self.root = resolve(uri)
        self.is_local = isinstance(self.fs, pafs.LocalFileSystem)
        self._holds_lock = False
        # the parsed manifest (or, for a damaged one, what the packs say) by the file's stamp
        self._manifest: tuple[tuple[int | None, int | None], Manifest] | None = None
        self._derived: tuple[tuple[int | None, int | None], Manifest] | None = None
        # packs checked whole (by path, size, mtime), with their parsed footer: a pack is read
        # many times by one command (a group of settings at a time), its footer parsed once
        self._verified: dict[tuple[str, int | None, int | None], pq.FileMetaData] = {}

    # -- paths -------------------------------------------------------------------------------

    def table_dir(self, table: str) -> str:
        if table not in TABLES:
            raise UnknownTable(f"unknown table {table!r}; tables: {', '.join(TABLES)}")
        return f"{self.root}/{table}"

    def shard_path(self, table: str, key: str) -> str:
        if not is_shard_key(key):
            raise StoreError(
                f"invalid shard key {key!r}: not empty, no '/', not starting with '.', '_' or "
                "'pack-', and a '~' chunk suffix not empty"
            )
        return f"{self.table_dir(table)}/{key}.parquet"

    @property
    def manifest_path(self) -> str:
        return f"{self.root}/{MANIFEST_FILE}"

    # -- the manifest and the view of a table ------------------------------------------------

    def manifest(self) -> Manifest:
        """The store's manifest (empty when it has none: never compacted); raises
        ManifestDamaged. Parsed once per change of the file."""
        info = self.fs.get_file_info(self.manifest_path)
        if info.type == pafs.FileType.NotFound:
            return Manifest()
        stamp = (info.size, info.mtime_ns)
        if self._manifest is None or self._manifest[0] != stamp:
            self._manifest = (stamp, manifest.decode(self.read_bytes(self.manifest_path)))
        return self._manifest[1]

    def readable_manifest(self) -> Manifest:
        """The manifest, or for a damaged one what the packs themselves say (logged: `verify`
        reports it, the writer replaces it)."""
        try:
            return self.manifest()
        except ManifestDamaged as e:
            return self._derived_manifest(f"the store's manifest is damaged ({e})")

    def _derived_manifest(self, why: str) -> Manifest:
        """What the packs themselves say, once per state of the manifest file (logged)."""
        info = self.fs.get_file_info(self.manifest_path)
        stamp = (info.size, info.mtime_ns)
        if self._derived is None or self._derived[0] != stamp:
            logger.warning("%s: reading the packs' own member lists", why)
            self._derived = (stamp, packing.derive_manifest(self))
        return self._derived[1]

    def commit_manifest(self, new: Manifest) -> None:
        """Replace the manifest (write a temporary file, rename it): the writer only."""
        if not self._holds_lock:
            raise NotLockHolder(f"changing the manifest of {self.uri} needs its writer lock")
        temp = f"{self.root}/{TEMP_PREFIX}manifest-{uuid.uuid4().hex}.json"
        self.fs.create_dir(self.root, recursive=True)
        write_file(self.fs, self.is_local, temp, manifest.encode(new))
        self._commit(temp, self.manifest_path)
        self.sync(self.root)
        self._manifest = self._derived = None

    def view(
        self, table: str, under: Manifest | None = None, keys: Iterable[str] | None = None
    ) -> TableView:
        """What readers read of `table`: its loose shards and live packs (`storage.layout`);
        with `keys`, only the loose shards of those settings (or runs)."""
        current = under if under is not None else self.readable_manifest()
        wanted = None
        if keys is not None:
            keyset = set(keys)
            always = {p.file for p in current.packs_of(table)} | {
                r.file for r in current.retired_of(table)
            }

            def wanted(name: str) -> bool:
                # membership first: a folder of 6,000 shards is filtered for 60 of them
                stem = name.removesuffix(".parquet")
                if name in always:
                    return True
                return stem.partition("~")[0] in keyset and is_shard_key(stem)

        files = list_files(self.fs, self.is_local, self.table_dir(table), table, wanted)
        view = table_view(table, files, current)
        if view.unknown and current.empty:
            # packs without a manifest (it was deleted): never read a store as if it had lost
            # their rows; the next writer derives the manifest again (`verify` reports it)
            if self.fs.get_file_info(self.manifest_path).type == pafs.FileType.NotFound:
                view = table_view(table, files, self._derived_manifest("packs, no manifest"))
        return view

    # -- writes ------------------------------------------------------------------------------

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

    def write_shard(self, table: str, key: str, data: pa.Table) -> None:
        """Write one loose shard (temporary file, rename); `write_table` without the pack
        check, for the packing steps themselves."""
        schema = TABLES[table]
        if not data.schema.equals(schema):
            try:
                data = data.cast(schema)
            except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError) as e:
                raise SchemaMismatch(f"data for table {table!r} does not fit its schema") from e
        metadata = {b"reprogrid.schema_version": SCHEMA_VERSION.encode()}
        payload = seal(data.replace_schema_metadata({**(data.schema.metadata or {}), **metadata}))
        temp = self.put_temp(table, f"{key}.parquet", payload)
        self._commit(temp, self.shard_path(table, key))

    def put_temp(self, table: str, name: str, payload: bytes) -> str:
        """Write `payload` under a hidden temporary name in the table's folder; its path."""
        folder = self.table_dir(table)
        self.fs.create_dir(folder, recursive=True)
        stem = name.removesuffix(".parquet")
        temp = f"{folder}/{TEMP_PREFIX}{stem}-{uuid.uuid4().hex}.parquet"
        write_file(self.fs, self.is_local, temp, payload)
        return temp

    def reveal(self, temp: str, table: str, name: str) -> None:
        """Rename a temporary file to `name` in the table's folder (the writer's packing)."""
        self._commit(temp, f"{self.table_dir(table)}/{name}")

    def remove(self, path: str) -> None:
        """Delete a file whose rows are elsewhere (the writer's packing; never damage)."""
        remove(self.fs, path)

    def sync(self, folder: str) -> None:
        """Make the renames and deletions in `folder` durable in their order (local stores)."""
        if self.is_local:
            sync_dir(folder)

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
        if not self._holds_lock:
            raise NotLockHolder(
                f"quarantining {file.table}/{file.name} needs this Store's writer lock "
                "(`with store.writer_lock(): ...`); readers only report damage"
            )
        moved = quarantine.move(self.fs, self.root, file, reason)
        packing.forget(self, file)
        return moved

    def quarantine_records(self) -> list[dict[str, Any]]:
        """The `_reason.json` record of every quarantined file (what it was, why, when, where
        it went), oldest first. An unreadable record is skipped (logged)."""
        return quarantine.records(self.fs, self.root)

    # -- reads -------------------------------------------------------------------------------

    def shards(self, table: str) -> dict[str, ShardInfo]:
        """Every shard readers read, by key: loose ones and the members of packs."""
        return self.view(table).shards()

    def files(self, table: str) -> list[StoredFile]:
        """Every file under the table's folder (subfolders too, hidden ones too), by name."""
        folder = self.table_dir(table)
        selector = pafs.FileSelector(folder, allow_not_found=True, recursive=True)
        out = []
        for info in self.fs.get_file_info(selector):
            if info.type != pafs.FileType.File:
                continue
            at = info.path.find(f"{folder}/")
            name = info.path[at + len(folder) + 1 :] if at >= 0 else info.base_name
            out.append(StoredFile(table, name, info.path, info.size or 0, info.mtime_ns))
        return sorted(out, key=lambda f: f.name)

    def read_bytes(self, path: str) -> bytes:
        """A file's bytes; FileNotFoundError when it is gone (also when S3 reports a delete
        between the listing and the read as a generic error)."""
        try:
            with self.fs.open_input_stream(path) as fh:
                return fh.read()
        except FileNotFoundError:
            raise
        except OSError:
            if self.fs.get_file_info(path).type == pafs.FileType.NotFound:
                raise FileNotFoundError(path) from None
            raise

    def inspect_shard(
        self,
        table: str,
        key: str,
        decode: bool = False,
        columns: Sequence[str] | None = None,
    ) -> tuple[ShardVerdict, pa.Table | None]:
        """Check one shard (`storage.integrity.inspect`; a pack's member: its pack, checked
        whole once per Store), with only `columns` of its rows if given. Raises ShardDamaged for
        bad content, FileNotFoundError when it is gone, OSError when it cannot be read."""
        try:
            # A loose file of this key is what readers read: the newer shard, or a leftover of
            # an interrupted compaction holding the very rows of its pack's member.
            payload = self.read_bytes(self.shard_path(table, key))
        except FileNotFoundError:
            held = self._holder(table, key)
            if held is None:
                raise
            rows = self.read_pack(held, [key])[0][1]
            rows = rows if columns is None else rows.select(list(columns))
            return ShardVerdict(Trust.SHA256, rows.num_rows, held.sha256), rows if decode else None
        return inspect(payload, TABLES[table], decode=decode, columns=columns)

    def _holder(self, table: str, key: str) -> PackRecord | None:
        """The pack whose member `key` readers read when no loose file has the key."""
        current = self.readable_manifest()
        holders = current.holders.get((table, key), ())
        if not holders:
            return None
        view = self.view(table, current, keys=[setting_key_of(key)])
        live = {p.file.name for p in view.packs}
        return next((p for p in holders if p.file in live), None)

    def read_shard(
        self, table: str, key: str, columns: Sequence[str] | None = None
    ) -> pa.Table | None:
        """The shard's rows (only `columns`, in that order, if given), or None when it is
        missing, unreadable or fails its checks (logged: `reprogrid verify` names it, the next
        run quarantines and redoes it)."""
        try:
            return self.inspect_shard(table, key, decode=True, columns=columns)[1]
        except FileNotFoundError:
            return None
        except ShardDamaged as e:
            logger.warning("damaged shard %s/%s (%s): treated as missing", table, key, e)
            return None
        except OSError as e:
            logger.warning("unreadable shard %s/%s (%s): treated as missing", table, key, e)
            return None

    def read_pack(
        self, record: PackRecord, keys: Sequence[str] | None = None
    ) -> list[tuple[str, pa.Table]]:
        """[(key, rows)] of a pack's members `keys` (None: all), in key order. Raises
        ShardDamaged, FileNotFoundError (`open_pack`)."""
        return read_members(self.open_pack(record), record, keys, TABLES[record.table])

    def open_pack(self, record: PackRecord) -> pq.ParquetFile:
        """A pack to decode, page CRCs verified at every decode. The pack is checked whole (its
        seal, and that it is the one the manifest records) the first time this Store opens it
        (again if its size or mtime changes). Raises ShardDamaged, FileNotFoundError."""
        path = f"{self.table_dir(record.table)}/{record.file}"
        info = self.fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(path)
        stamp = (path, info.size, info.mtime_ns)
        if stamp in self._verified:
            return pq.ParquetFile(
                self.fs.open_input_file(path),
                metadata=self._verified[stamp],
                page_checksum_verification=True,
            )
        payload = self.read_bytes(path)
        verdict, _ = inspect(payload, TABLES[record.table])
        if verdict.sha256 != record.sha256 or len(payload) != record.size:
            raise ShardDamaged(ProblemKind.PACK_MISMATCH, "not the pack the manifest records")
        parquet = pq.ParquetFile(
            pa.BufferReader(arrow_owned(payload)), page_checksum_verification=True
        )
        self._verified[stamp] = parquet.metadata
        return parquet

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

    def map_items(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
        """`fn` over `items`, in order; on object stores on a few threads (a round trip each)."""
        items = list(items)
        if self.is_local or len(items) < 2:
            return [fn(k) for k in items]
        with ThreadPoolExecutor(max_workers=min(OBJECT_READ_THREADS, len(items))) as pool:
            return list(pool.map(fn, items))

    # -- the writer lock ---------------------------------------------------------------------

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

    def _commit(self, temp: str, path: str) -> None:
        """Rename a written temporary file to its name: a commit. On an object store the
        writer first checks that its lease still holds (`Lease.check`: another driver took
        over a lease this one stopped renewing), so a driver that lost it writes nothing more."""
        if self._lease is not None:
            self._lease.check()
        rename(self.fs, self.is_local, temp, path)

    @property
    def holds_writer_lock(self) -> bool:
        """Whether this Store object holds the writer lock now."""
        return self._holds_lock

    def writer_active(self) -> bool:
        """Whether a writer holds the lock now, without taking it (readers use this)."""
        if not self.is_local:
            holder = self._read_lock(f"{self.root}/{LOCK_OBJECT}")
            return holder is not None and lock.holder_active(holder)
        return lock.local_writer_active(self.root)

    def _read_lock(self, path: str) -> str | None:
        return lock.read_lock(self.fs, path)
