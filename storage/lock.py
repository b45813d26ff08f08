"""The store's writer lock: an advisory `flock` on local stores, a lock object on object stores.

Used through `Store.writer_lock` and `Store.writer_active`; the functions here take the
filesystem and paths so the store module stays about shards.
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
from collections.abc import Iterator

import pyarrow.fs as pafs

from storage.errors import StoreLocked

logger = logging.getLogger(__name__)

LOCK_FILE = ".lock"  # local stores
LOCK_OBJECT = "_lock"  # object stores; readers skip names starting with "_"
# An object-store lock first seen this recently may be a reader's probe (`status` takes the lock
# for an instant to learn whether a writer is active): wait this long before calling it held.
LOCK_PROBE_GRACE_S = 2.0


@contextlib.contextmanager
def local_lock(root: str, uri: str, wait_s: float) -> Iterator[None]:
    """An exclusive `flock` on `<root>/.lock`, released by the OS if the holder dies (so a
    SIGKILLed driver never leaves a stale lock); raises StoreLocked after `wait_s` seconds."""
    import fcntl

    os.makedirs(root, exist_ok=True)
    fd = os.open(os.path.join(root, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
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
                        f"store {uri} is being written by another reprogrid process "
                        f"({holder or 'unknown holder'}); wait for it to finish, or pass "
                        "--wait-lock SECONDS"
                    ) from None
                time.sleep(0.5)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the flock


def local_writer_active(root: str) -> bool:
    """Whether a process holds the local lock now, without taking it."""
    import fcntl

    try:
        fd = os.open(os.path.join(root, LOCK_FILE), os.O_RDONLY)
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
def object_lock(fs: pafs.FileSystem, root: str, uri: str, wait_s: float) -> Iterator[None]:
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
    path = f"{root}/{LOCK_OBJECT}"
    owner = json.dumps({"id": uuid.uuid4().hex, "pid": os.getpid(), "host": socket.gethostname()})
    first_seen: dict[str, float] = {}
    deadline = time.monotonic() + wait_s
    while True:
        holder = read_lock(fs, path)
        if holder is None:
            fs.create_dir(root, recursive=True)
            with fs.open_output_stream(path) as out:
                out.write(owner.encode())
            holder = read_lock(fs, path)
            if holder == owner:
                break
            if holder is None:
                continue  # deleted in between: try again
        if owner_is_dead(holder):
            logger.warning("taking over the lock of a driver that is gone: %s", holder)
            release_lock(fs, path, holder)
            continue
        now = time.monotonic()
        seen = first_seen.setdefault(holder, now)
        if now >= deadline and now - seen >= LOCK_PROBE_GRACE_S:
            raise StoreLocked(
                f"store {uri} is being written by another reprogrid process ({holder}); "
                f"wait for it to finish or pass --wait-lock SECONDS; if that driver is dead, "
                f"delete {path} and re-run"
            )
        time.sleep(0.25 if now - seen < LOCK_PROBE_GRACE_S else 1.0)
    try:
        yield
    finally:
        release_lock(fs, path, owner)


def read_lock(fs: pafs.FileSystem, path: str) -> str | None:
    """The lock object's content, or None when there is none."""
    try:
        with fs.open_input_stream(path) as fh:
            return fh.read().decode(errors="replace")
    except FileNotFoundError:
        return None
    except OSError:
        # Deleted between the HEAD and the GET of the read: S3 reports that as a generic
        # error, not as "not found".
        if fs.get_file_info(path).type == pafs.FileType.NotFound:
            return None
        raise


def release_lock(fs: pafs.FileSystem, path: str, owner: str) -> None:
    """Delete the lock object if it still holds `owner`."""
    if read_lock(fs, path) == owner:
        with contextlib.suppress(FileNotFoundError):
            fs.delete_file(path)


def owner_is_dead(holder: str) -> bool:
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
