"""The Parquet store: atomic shard writes, reads, the writer lock.

Layout: `<root>/<table>/<key>.parquet`, one shard per setting key (per run id for `runs`). A
shard is written to a hidden temporary name in the same folder and moved into place, so a reader
(or a crashed writer) never sees half a shard: Parquet readers skip names starting with "." or
"_". The driver is the only writer; workers return rows.

`root` is a local folder (a shared filesystem too) or an object-store URI: any URI pyarrow
understands (`s3://bucket/prefix?endpoint_override=...`, `gs://...`, `abfs://...`), else any
fsspec URI (`memory://...`, a gcsfs/adlfs protocol, ...). On object stores the temporary object is
moved (copied) to its final key: an object appears whole or not at all, so the same contract
holds. A listing may lag behind writes on some S3-compatible servers: a listed shard that no
longer reads counts as missing, and one not yet listed is at worst redone (writes are idempotent).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from storage.schema import SCHEMA_VERSION, TABLES

logger = logging.getLogger(__name__)

TEMP_PREFIX = ".tmp-"
LOCK_OBJECT = "_lock"  # object stores; readers skip names starting with "_"
# An object-store lock first seen this recently may be a reader's probe (`status` takes the lock
# for an instant to learn whether a writer is active): wait this long before calling it held.
LOCK_PROBE_GRACE_S = 2.0
# Parallel reads on object stores: each shard is a round trip; pyarrow releases the GIL in I/O.
OBJECT_READ_THREADS = 16


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

    def valid_shards(self, table: str) -> set[str]:
        """Keys of the listed shards whose footer reads (`shard_is_valid`)."""
        keys = sorted(self.shards(table))
        valid = self._map(lambda k: self.shard_is_valid(table, k), keys)
        return {k for k, ok in zip(keys, valid, strict=True) if ok}

    def read_table(self, table: str, keys: Sequence[str] | None = None) -> pa.Table:
        """All readable shards of a table (optionally only `keys`), in key order. A listed shard
        that is gone or unreadable by the time it is read is left out."""
        available = self.shards(table)
        wanted = sorted(available if keys is None else set(keys) & set(available))
        parts = [t for t in self._map(lambda k: self.read_shard(table, k), wanted) if t is not None]
        if not parts:
            return TABLES[table].empty_table()
        return pa.concat_tables(parts).combine_chunks()

    def _map(self, fn: Callable[[str], Any], keys: Iterable[str]) -> list[Any]:
        """`fn` over `keys`, in order; on object stores on a few threads (a round trip each)."""
        keys = list(keys)
        if self.is_local or len(keys) < 2:
            return [fn(k) for k in keys]
        with ThreadPoolExecutor(max_workers=min(OBJECT_READ_THREADS, len(keys))) as pool:
            return list(pool.map(fn, keys))

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

    def writer_active(self) -> bool:
        """Whether a writer holds the lock now, without taking it (readers use this)."""
        if not self.is_local:
            holder = self._read_lock(f"{self.root}/{LOCK_OBJECT}")
            return holder is not None and not _owner_is_dead(holder)
        import fcntl

        path = os.path.join(self.root, ".lock")
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            # A shared lock is refused only while the writer's exclusive lock is held.
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.EACCES):
                return True
            raise
        finally:
            os.close(fd)
        return False

    @contextlib.contextmanager
    def _object_lock(self, wait_s: float) -> Iterator[None]:
        """A lock object `<root>/_lock` holding the owner (JSON: id, pid, host). Object stores
        have no atomic create-if-absent through pyarrow, so this guards against accidents (two
        drivers started by mistake), not against a determined race; one driver per store is
        the contract.

        The owner reads its id back after writing (of two writers racing, the last one wins)
        and deletes the object on release only while it still holds its own id. A lock whose
        owner was a process on this host that no longer exists (a killed driver) is taken over,
        so re-running the command resumes; a dead owner on another host must be removed by
        hand (the error says how). A lock seen for less than LOCK_PROBE_GRACE_S is waited for
        even with `wait_s=0`: it may be a reader's probe (`reprogrid status`)."""
        path = f"{self.root}/{LOCK_OBJECT}"
        owner = json.dumps(
            {"id": uuid.uuid4().hex, "pid": os.getpid(), "host": socket.gethostname()}
        )
        first_seen: dict[str, float] = {}
        deadline = time.monotonic() + wait_s
        while True:
            holder = self._read_lock(path)
            if holder is None:
                self.fs.create_dir(self.root, recursive=True)
                with self.fs.open_output_stream(path) as out:
                    out.write(owner.encode())
                holder = self._read_lock(path)
                if holder == owner:
                    break
                if holder is None:
                    continue  # deleted in between: try again
            if _owner_is_dead(holder):
                logger.warning("taking over the lock of a driver that is gone: %s", holder)
                self._release_lock(path, holder)
                continue
            now = time.monotonic()
            seen = first_seen.setdefault(holder, now)
            if now >= deadline and now - seen >= LOCK_PROBE_GRACE_S:
                raise StoreLocked(
                    f"store {self.uri} is being written by another reprogrid process ({holder}); "
                    f"wait for it to finish or pass --wait-lock SECONDS; if that driver is dead, "
                    f"delete {path} and re-run"
                )
            time.sleep(0.25 if now - seen < LOCK_PROBE_GRACE_S else 1.0)
        try:
            yield
        finally:
            self._release_lock(path, owner)

    def _read_lock(self, path: str) -> str | None:
        """The lock object's content, or None when there is none."""
        try:
            with self.fs.open_input_stream(path) as fh:
                return fh.read().decode(errors="replace")
        except FileNotFoundError:
            return None
        except OSError:
            # Deleted between the HEAD and the GET of the read: S3 reports that as a generic
            # error, not as "not found".
            if self.fs.get_file_info(path).type == pafs.FileType.NotFound:
                return None
            raise

    def _release_lock(self, path: str, owner: str) -> None:
        """Delete the lock object if it still holds `owner`."""
        if self._read_lock(path) == owner:
            with contextlib.suppress(FileNotFoundError):
                self.fs.delete_file(path)


def _owner_is_dead(holder: str) -> bool:
    """True when the lock's owner was a process on this host that no longer runs."""
    try:
        info = json.loads(holder)
        pid, host = int(info["pid"]), str(info["host"])
    except (ValueError, TypeError, KeyError):
        return False  # not ours to judge (a hand-written or older lock)
    if host != socket.gethostname() or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
