"""The Parquet store: atomic sealed shard writes, checked reads, quarantine, the writer lock.

Layout: `<root>/<table>/<key>.parquet`, one shard per setting key (per run id for `runs`), or
per chunk `<setting_key>~<chunk>` (`storage.integrity.setting_key_of`). A shard is written to a
hidden temporary name in the same folder and moved into place, so a reader (or a crashed writer)
never sees half a shard: Parquet readers skip names starting with "." or "_". The driver is the
only writer; workers return rows.

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
import json
import logging
import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from storage import lock
from storage.errors import NotLockHolder, SchemaMismatch, StoreError, StoreLocked, UnknownTable
from storage.integrity import (
    ShardDamaged,
    ShardVerdict,
    inspect,
    is_shard_key,
    seal,
    setting_key_of,
)
from storage.lock import LOCK_OBJECT
from storage.schema import SCHEMA_VERSION, TABLES

__all__ = [
    "LOCK_OBJECT",
    "QUARANTINE_DIR",
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
QUARANTINE_DIR = "quarantine"  # <root>/quarantine/<table>/<stamp>/<name>, next to the tables
REASON_FILE = "_reason.json"  # beside each quarantined file
# Parallel reads on object stores: each shard is a round trip; pyarrow releases the GIL in I/O.
OBJECT_READ_THREADS = 16


@dataclass(frozen=True)
class ShardInfo:
    table: str
    key: str
    path: str
    size: int


@dataclass(frozen=True)
class StoredFile:
    """Any file under a table's folder, shard or not."""

    table: str
    name: str  # relative to the table's folder ("sub/x.csv" for a file in a subfolder)
    path: str  # in the store's filesystem
    size: int  # bytes, as listed


def _resolve(uri: str) -> tuple[pafs.FileSystem, str]:
    """A filesystem and the root path in it: pyarrow's own filesystems first (S3, GCS, Azure,
    HDFS, local), then fsspec's registry for the schemes pyarrow does not know."""
    if "://" not in uri:
        return pafs.LocalFileSystem(), os.path.abspath(uri)
    try:
        fs, path = pafs.FileSystem.from_uri(uri)
    except pa.ArrowInvalid as e:
        if "Unrecognized filesystem type" not in str(e):
            raise StoreError(f"store URI {uri!r}: {e}") from e
        try:
            import fsspec
        except ImportError as missing:
            raise StoreError(f"store URI {uri!r}: unknown scheme (fsspec is missing)") from missing
        try:
            fsspec_fs, path = fsspec.core.url_to_fs(uri)
        except (ImportError, ValueError) as unknown:
            raise StoreError(f"store URI {uri!r}: {unknown}") from unknown
        fs = pafs.PyFileSystem(pafs.FSSpecHandler(fsspec_fs))
    return fs, path.rstrip("/")


class Store:
    """A folder (or object-store prefix) of Parquet tables."""

    def __init__(self, uri: str, filesystem: pafs.FileSystem | None = None):
        self.uri = uri
        if filesystem is not None:
            self.fs, self.root = filesystem, uri.split("://", 1)[-1].rstrip("/")
        else:
            self.fs, self.root = _resolve(uri)
        self.is_local = isinstance(self.fs, pafs.LocalFileSystem)
        self._holds_lock = False

    # -- paths -------------------------------------------------------------------------------

    def table_dir(self, table: str) -> str:
        if table not in TABLES:
            raise UnknownTable(f"unknown table {table!r}; tables: {', '.join(TABLES)}")
        return f"{self.root}/{table}"

    def shard_path(self, table: str, key: str) -> str:
        if not is_shard_key(key):
            raise StoreError(
                f"invalid shard key {key!r}: not empty, no '/', not starting with '.' or '_', "
                "and a '~' chunk suffix not empty"
            )
        return f"{self.table_dir(table)}/{key}.parquet"

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
        all-null column keeps its type)."""
        schema = TABLES[table]
        if not data.schema.equals(schema):
            try:
                data = data.cast(schema)
            except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError) as e:
                raise SchemaMismatch(f"data for table {table!r} does not fit its schema") from e
        final = self.shard_path(table, key)
        folder = self.table_dir(table)
        self.fs.create_dir(folder, recursive=True)
        temp = f"{folder}/{TEMP_PREFIX}{key}-{uuid.uuid4().hex}.parquet"
        metadata = {b"reprogrid.schema_version": SCHEMA_VERSION.encode()}
        payload = seal(data.replace_schema_metadata({**(data.schema.metadata or {}), **metadata}))
        if self.is_local:
            # fsync before the rename so a machine crash cannot leave a renamed empty file.
            with open(temp, "wb") as fh:
                fh.write(payload)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(temp, final)
        else:
            with self.fs.open_output_stream(temp) as out:
                out.write(payload)
            self.fs.move(temp, final)

    def clean_temp(self) -> int:
        """Remove temporary files left by a crashed writer (call only while holding the lock)."""
        removed = 0
        for table in TABLES:
            for info in self._list(table, include_temp=True):
                if info.base_name.startswith(TEMP_PREFIX):
                    with contextlib.suppress(FileNotFoundError):
                        self.fs.delete_file(info.path)
                    removed += 1
        return removed

    def quarantine(self, file: StoredFile, reason: Mapping[str, Any]) -> str:
        """Move `file` to `<root>/quarantine/<table>/<stamp>/<name>` with a `_reason.json`
        record (`reason` plus where it came from) beside it; returns the new path relative to
        the root. Never deletes. Only the holder of the writer lock may do it."""
        if not self._holds_lock:
            raise NotLockHolder(
                f"quarantining {file.table}/{file.name} needs this Store's writer lock "
                "(`with store.writer_lock(): ...`); readers only report damage"
            )
        stamp = f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
        relative = f"{QUARANTINE_DIR}/{file.table}/{stamp}/{file.name}"
        target = f"{self.root}/{relative}"
        self.fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
        record = {
            **reason,
            "table": file.table,
            "file": file.name,
            "size": file.size,
            "quarantined_at": datetime.now(UTC).isoformat(),
            "moved_to": relative,
        }
        reason_path = f"{self.root}/{QUARANTINE_DIR}/{file.table}/{stamp}/{REASON_FILE}"
        with self.fs.open_output_stream(reason_path) as out:
            out.write(json.dumps(record, indent=2, sort_keys=True).encode())
        self.fs.move(file.path, target)
        logger.warning(
            "quarantined %s/%s -> %s: %s",
            file.table,
            file.name,
            relative,
            reason.get("detail") or reason.get("kind"),
        )
        return relative

    def quarantine_records(self) -> list[dict[str, Any]]:
        """The `_reason.json` record of every quarantined file (what it was, why, when, where
        it went), oldest first. An unreadable record is skipped (logged)."""
        selector = pafs.FileSelector(
            f"{self.root}/{QUARANTINE_DIR}", allow_not_found=True, recursive=True
        )
        records = []
        for info in self.fs.get_file_info(selector):
            if info.type != pafs.FileType.File or info.base_name != REASON_FILE:
                continue
            try:
                with self.fs.open_input_stream(info.path) as stream:
                    records.append(json.loads(stream.read().decode()))
            except (OSError, ValueError) as e:
                logger.warning("quarantine record %s unreadable: %s", info.path, e)
        return sorted(records, key=lambda r: str(r.get("quarantined_at", "")))

    # -- reads -------------------------------------------------------------------------------

    def _list(self, table: str, include_temp: bool = False) -> list[pafs.FileInfo]:
        selector = pafs.FileSelector(self.table_dir(table), allow_not_found=True)
        infos = [i for i in self.fs.get_file_info(selector) if i.type == pafs.FileType.File]
        if include_temp:
            return infos
        suffix = len(".parquet")
        return [
            i
            for i in infos
            if i.base_name.endswith(".parquet") and is_shard_key(i.base_name[:-suffix])
        ]

    def shards(self, table: str) -> dict[str, ShardInfo]:
        return {
            i.base_name[: -len(".parquet")]: ShardInfo(
                table, i.base_name[: -len(".parquet")], i.path, i.size or 0
            )
            for i in self._list(table)
        }

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
            out.append(StoredFile(table, name, info.path, info.size or 0))
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
        self, table: str, key: str, decode: bool = False
    ) -> tuple[ShardVerdict, pa.Table | None]:
        """Check one shard (`storage.integrity.inspect`). Raises ShardDamaged for bad content,
        FileNotFoundError when it is gone, OSError when it cannot be read."""
        payload = self.read_bytes(self.shard_path(table, key))
        return inspect(payload, TABLES[table], decode=decode)

    def shard_is_valid(self, table: str, key: str) -> bool:
        """The shard exists and its content passes its checksums and the table's schema."""
        try:
            self.inspect_shard(table, key)
        except (FileNotFoundError, OSError, ShardDamaged):
            return False
        return True

    def read_shard(self, table: str, key: str) -> pa.Table | None:
        """The shard's rows, or None when it is missing, unreadable or fails its checks
        (logged: `reprogrid verify` names it, the next run quarantines and redoes it)."""
        try:
            return self.inspect_shard(table, key, decode=True)[1]
        except FileNotFoundError:
            return None
        except ShardDamaged as e:
            logger.warning("damaged shard %s/%s (%s): treated as missing", table, key, e)
            return None
        except OSError as e:
            logger.warning("unreadable shard %s/%s (%s): treated as missing", table, key, e)
            return None

    def read_table(self, table: str, keys: Sequence[str] | None = None) -> pa.Table:
        """All readable shards of a table (optionally only those of `keys`: a setting's chunk
        shards `<key>~<chunk>` belong to its key), in shard-key order (a setting's whole shard,
        then its chunks in order). A listed shard that is gone, unreadable or damaged by the time
        it is read is left out."""
        available = self.shards(table)
        if keys is None:
            wanted = sorted(available)
        else:
            keyset = set(keys)
            wanted = sorted(k for k in available if setting_key_of(k) in keyset)
        parts = [
            t for t in self.map_items(lambda k: self.read_shard(table, k), wanted) if t is not None
        ]
        if not parts:
            return TABLES[table].empty_table()
        return pa.concat_tables(parts).combine_chunks()

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
        this Store may quarantine."""
        if self.is_local:
            held = lock.local_lock(self.root, self.uri, wait_s)
        else:
            held = lock.object_lock(self.fs, self.root, self.uri, wait_s)
        with held:
            self._holds_lock = True
            try:
                yield
            finally:
                self._holds_lock = False

    @property
    def holds_writer_lock(self) -> bool:
        """Whether this Store object holds the writer lock now."""
        return self._holds_lock

    def writer_active(self) -> bool:
        """Whether a writer holds the lock now, without taking it (readers use this)."""
        if not self.is_local:
            holder = self._read_lock(f"{self.root}/{LOCK_OBJECT}")
            return holder is not None and not lock.owner_is_dead(holder)
        return lock.local_writer_active(self.root)

    def _read_lock(self, path: str) -> str | None:
        return lock.read_lock(self.fs, path)
