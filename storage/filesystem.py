"""The filesystem under a store: resolving its URI, and the few durable operations every write
of the store is made of (write a temporary file, rename it into place, remove a file).

Local stores fsync the file before the rename and the folder after it, so that a machine crash
cannot leave a renamed empty file or lose the order of two renames (a compaction relies on a
pack being in place before the files it replaces are removed). On object stores a write is one
object, and a rename a copy: the object appears whole or not at all.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable

import pyarrow as pa
import pyarrow.fs as pafs

from storage.errors import StoreError
from storage.layout import StoredFile


def resolve(uri: str) -> tuple[pafs.FileSystem, str]:
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


def write_file(fs: pafs.FileSystem, local: bool, path: str, payload: bytes) -> None:
    """Write `payload` to `path` (a temporary name: not yet visible to readers), durably."""
    if local:
        with open(path, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
    else:
        with fs.open_output_stream(path) as out:
            out.write(payload)


def rename(fs: pafs.FileSystem, local: bool, source: str, target: str) -> None:
    """Move `source` over `target` (atomically on a local filesystem)."""
    if local:
        os.replace(source, target)
    else:
        fs.move(source, target)


def remove(fs: pafs.FileSystem, path: str) -> None:
    """Delete `path`; a file already gone is not an error."""
    with contextlib.suppress(FileNotFoundError):
        fs.delete_file(path)


def sync_dir(folder: str) -> None:
    """fsync a local folder, so the renames and deletions in it are on disk in their order."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def list_files(
    fs: pafs.FileSystem,
    local: bool,
    folder: str,
    table: str,
    wanted: Callable[[str], bool] | None = None,
) -> list[StoredFile]:
    """The `.parquet` files at the top of `folder` (a table's), those whose name `wanted`
    accepts (None: all). A local folder is listed by name first and only the wanted files
    stat'ed: a stat per file costs more than a folder's names, and a command often wants a
    few settings' files of thousands."""
    if not local:
        infos = fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
        return [
            StoredFile(table, i.base_name, i.path, i.size or 0, i.mtime_ns)
            for i in infos
            if i.type == pafs.FileType.File
            and i.base_name.endswith(".parquet")
            and (wanted is None or wanted(i.base_name))
        ]
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        if not name.endswith(".parquet") or (wanted is not None and not wanted(name)):
            continue
        path = f"{folder}/{name}"
        try:
            info = os.stat(path)
        except FileNotFoundError:
            continue  # gone since it was listed
        if stat.S_ISREG(info.st_mode):
            out.append(StoredFile(table, name, path, info.st_size, info.st_mtime_ns))
    return out
