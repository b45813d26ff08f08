"""The Parquet store: atomic shard writes, reads, the writer lock.

Layout: `<root>/<table>/<key>.parquet`, one shard per setting key (per run id for `runs`). A
shard is written to a hidden temporary name in the same folder and moved into place, so a reader
(or a crashed writer) never sees half a shard: Parquet readers skip names starting with "." or
"_". The driver is the only writer; workers return rows.

`root` is a local folder or any URI pyarrow understands (`s3://bucket/prefix`, ...).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from storage.schema import SCHEMA_VERSION, TABLES

logger = logging.getLogger(__name__)

TEMP_PREFIX = ".tmp-"


class StoreError(RuntimeError):
    """Base class of the store's errors."""


class UnknownTable(StoreError):
    pass


class SchemaMismatch(StoreError):
    pass


class StoreLocked(StoreError):
    """Another process holds the store's writer lock."""


@dataclass(frozen=True)
class ShardInfo:
    table: str
    key: str
    path: str
    size: int


def _resolve(uri: str) -> tuple[pafs.FileSystem, str]:
    if "://" in uri:
        fs, path = pafs.FileSystem.from_uri(uri)
        return fs, path.rstrip("/")
    return pafs.LocalFileSystem(), os.path.abspath(uri)


class Store:
    """A folder (or object-store prefix) of Parquet tables."""

    def __init__(self, uri: str, filesystem: pafs.FileSystem | None = None):
        self.uri = uri
        if filesystem is not None:
            self.fs, self.root = filesystem, uri.split("://", 1)[-1].rstrip("/")
        else:
            self.fs, self.root = _resolve(uri)
        self.is_local = isinstance(self.fs, pafs.LocalFileSystem)

    # -- paths -------------------------------------------------------------------------------

    def table_dir(self, table: str) -> str:
        if table not in TABLES:
            raise UnknownTable(f"unknown table {table!r}; tables: {', '.join(TABLES)}")
        return f"{self.root}/{table}"

    def shard_path(self, table: str, key: str) -> str:
        if not key or "/" in key or key.startswith((".", "_")):
            raise StoreError(f"invalid shard key {key!r}")
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
        """Atomically replace the shard `key` of `table` (re-running never duplicates)."""
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
        data = data.replace_schema_metadata({**(data.schema.metadata or {}), **metadata})
        if self.is_local:
            # fsync before the rename so a machine crash cannot leave a renamed empty file.
            with open(temp, "wb") as fh:
                pq.write_table(data, fh, compression="zstd")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(temp, final)
        else:
            with self.fs.open_output_stream(temp) as out:
                pq.write_table(data, out, compression="zstd")
            self.fs.move(temp, final)

    def delete_shard(self, table: str, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.delete_file(self.shard_path(table, key))

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

    # -- reads -------------------------------------------------------------------------------

    def _list(self, table: str, include_temp: bool = False) -> list[pafs.FileInfo]:
        selector = pafs.FileSelector(self.table_dir(table), allow_not_found=True)
        infos = [i for i in self.fs.get_file_info(selector) if i.type == pafs.FileType.File]
        if include_temp:
            return infos
        return [i for i in infos if i.base_name.endswith(".parquet") and i.base_name[0] not in "._"]

    def shards(self, table: str) -> dict[str, ShardInfo]:
        return {
            i.base_name[: -len(".parquet")]: ShardInfo(
                table, i.base_name[: -len(".parquet")], i.path, i.size or 0
            )
            for i in self._list(table)
        }

    def shard_is_valid(self, table: str, key: str) -> bool:
        """The shard exists and its Parquet footer reads with the table's columns."""
        try:
            with self.fs.open_input_file(self.shard_path(table, key)) as fh:
                meta = pq.read_metadata(fh)
        except (FileNotFoundError, OSError, pa.ArrowInvalid):
            return False
        return set(TABLES[table].names) <= set(meta.schema.to_arrow_schema().names)

    def read_shard(self, table: str, key: str) -> pa.Table | None:
        """The shard's rows, or None when it is missing or unreadable (a crashed write)."""
        try:
            with self.fs.open_input_file(self.shard_path(table, key)) as fh:
                return pq.read_table(fh, schema=TABLES[table])
        except FileNotFoundError:
            return None
        except (OSError, pa.ArrowInvalid) as e:
            logger.warning("unreadable shard %s/%s (%s): treated as missing", table, key, e)
            return None

    def read_table(self, table: str, keys: Sequence[str] | None = None) -> pa.Table:
        """All readable shards of a table (optionally only `keys`), in key order."""
        available = self.shards(table)
        wanted = sorted(available if keys is None else set(keys) & set(available))
        parts = [t for t in (self.read_shard(table, k) for k in wanted) if t is not None]
        if not parts:
            return TABLES[table].empty_table()
        return pa.concat_tables(parts).combine_chunks()

    # -- the writer lock ---------------------------------------------------------------------

    @contextlib.contextmanager
    def writer_lock(self, wait_s: float = 0.0) -> Iterator[None]:
        """Exclusive writer lock; raises StoreLocked after `wait_s` seconds of waiting.

        Local stores use an advisory `flock` on `<root>/.lock`, released by the OS if the holder
        dies (so a SIGKILLed driver never leaves a stale lock). Object stores use a lock object
        (see `_object_lock`)."""
        if not self.is_local:
            with self._object_lock(wait_s):
                yield
            return
        import fcntl

        os.makedirs(self.root, exist_ok=True)
        path = os.path.join(self.root, ".lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + wait_s
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as e:
                    if e.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                    if time.monotonic() >= deadline:
                        holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
                        raise StoreLocked(
                            f"store {self.uri} is being written by another reprogrid process "
                            f"({holder or 'unknown holder'}); wait for it to finish, or pass "
                            "--wait-lock SECONDS"
                        ) from None
                    time.sleep(0.5)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}".encode(), 0)
            yield
        finally:
            os.close(fd)  # closing releases the flock

    @contextlib.contextmanager
    def _object_lock(self, wait_s: float) -> Iterator[None]:
        """A lock object `<root>/_lock` holding the owner's id. Object stores have no atomic
        create-if-absent through pyarrow, so this guards against accidents (two drivers started
        by mistake), not against a determined race; one driver per store is the contract."""
        path = f"{self.root}/_lock"
        owner = f"{uuid.uuid4().hex} pid {os.getpid()} on {socket.gethostname()}"
        deadline = time.monotonic() + wait_s
        while self.fs.get_file_info(path).type == pafs.FileType.File:
            if time.monotonic() >= deadline:
                with self.fs.open_input_stream(path) as fh:
                    holder = fh.read().decode(errors="replace")
                raise StoreLocked(
                    f"store {self.uri} is locked by {holder}; if that driver is dead, delete "
                    f"{path} and re-run"
                )
            time.sleep(1.0)
        self.fs.create_dir(self.root, recursive=True)
        with self.fs.open_output_stream(path) as out:
            out.write(owner.encode())
        try:
            yield
        finally:
            with contextlib.suppress(FileNotFoundError):
                self.fs.delete_file(path)
