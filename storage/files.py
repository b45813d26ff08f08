"""The store's files, the floor under `Store` (storage/store.py): paths, the manifest and what
readers read of a table (its view), sealed writes to a temporary name committed by a rename,
reads of loose shards and packs checked against their seals, and the writer lock's state.
`storage.rows` (reading a table) and `storage.packing` (the steps of packing) work on these
files; `Store` adds what spans them (rewriting a packed shard, quarantine, the lock itself).
Nothing here imports rows, packing or store: they import it."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from storage import lock, manifest
from storage.errors import NotLockHolder, SchemaMismatch, StoreError, UnknownTable
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
from storage.layout import StoredFile, TableView, is_pack_name, table_view
from storage.manifest import MANIFEST_FILE, Manifest, ManifestDamaged, PackRecord
from storage.packs import derive_record, read_members
from storage.schema import SCHEMA_VERSION, TABLES

logger = logging.getLogger(__name__)

TEMP_PREFIX = ".tmp-"
# Parallel reads on object stores: each shard is a round trip; pyarrow releases the GIL in I/O.
OBJECT_READ_THREADS = 16


class Files:
    """A folder (or object-store prefix) of Parquet tables, file by file."""

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
            self._derived = (stamp, derive_manifest(self))
        return self._derived[1]

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

    def _commit(self, temp: str, path: str) -> None:
        """Rename a written temporary file to its name: a commit. On an object store the
        writer first checks that its lease still holds (`Lease.check`: another driver took
        over a lease this one stopped renewing), so a driver that lost it writes nothing more."""
        if self._lease is not None:
            self._lease.check()
        rename(self.fs, self.is_local, temp, path)

    def remove(self, path: str) -> None:
        """Delete a file whose rows are elsewhere (the writer's packing; never damage)."""
        remove(self.fs, path)

    def sync(self, folder: str) -> None:
        """Make the renames and deletions in `folder` durable in their order (local stores)."""
        if self.is_local:
            sync_dir(folder)

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

    def map_items(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
        """`fn` over `items`, in order; on object stores on a few threads (a round trip each)."""
        items = list(items)
        if self.is_local or len(items) < 2:
            return [fn(k) for k in items]
        with ThreadPoolExecutor(max_workers=min(OBJECT_READ_THREADS, len(items))) as pool:
            return list(pool.map(fn, items))

    @property
    def holds_writer_lock(self) -> bool:
        """Whether this Store object holds the writer lock now."""
        return self._holds_lock


def derive_manifest(files: Files) -> Manifest:
    """The packs' records from the packs themselves (their footers name their members), for a
    store whose manifest is damaged or lost: no retired records, no checked loose files. A pack
    that fails its seal is left out (`verify` reports it)."""
    records = []
    for table in TABLES:
        for file in files.files(table):
            if not is_pack_name(file.name):
                continue
            try:
                payload = files.read_bytes(file.path)
                inspect(payload, TABLES[table])
                records.append(derive_record(payload, table, file.name))
            except (ShardDamaged, OSError) as e:
                logger.warning("pack %s/%s left out of the derived manifest: %s", table, file, e)
    return Manifest(tuple(records))
