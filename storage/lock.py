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
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow.fs as pafs

from storage.errors import LeaseLost, StoreLocked

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


# An object-store lock is a lease: its holder rewrites it every LEASE_S / 3 seconds, and a
# lock seen unchanged for LEASE_S seconds (or past its expiry by LEASE_S on the writer's clock)
# belongs to a driver that is gone (hard-killed, its node or pod deleted, `ray job stop`'s
# SIGKILL) and is taken over. A holder that keeps renewing is never taken over.
LEASE_S = 60.0
# Reads of a lock object that finds none or no lease before it counts as lost (`seen_held`),
# waiting 0.1 s, then 0.2 s between them: a torn read lasts as long as one PUT.
TORN_READS = 3
TORN_READ_WAIT_S = 0.1


@dataclass(frozen=True)
class Holder:
    """A lock object's content, parsed: who holds it and until when (a lease), or an older
    lock without a lease (`lease_s` None)."""

    text: str
    id: str | None = None
    pid: int | None = None
    host: str | None = None
    lease_s: float | None = None
    expires_at: float | None = None  # the holder's wall clock (epoch seconds)

    @classmethod
    def parse(cls, text: str) -> Holder:
        try:
            info = json.loads(text)
            return cls(
                text,
                str(info["id"]),
                int(info["pid"]),
                str(info["host"]),
                float(info["lease_s"]) if "lease_s" in info else None,
                float(info["expires_at"]) if "expires_at" in info else None,
            )
        except (ValueError, TypeError, KeyError):
            return cls(text)  # not ours to judge (a hand-written lock)

    def describe(self) -> str:
        if self.pid is None:
            return self.text
        until = ""
        if self.expires_at is not None:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.expires_at))
            until = f", lease until {stamp}"
        return f"pid {self.pid} on {self.host}{until}"


class Lease:
    """The lock object this process holds: renewed by a background thread, checked before every
    commit (`check`). Lost when the object no longer holds what this process last wrote (another
    driver took it over after this one stopped renewing for a lease, e.g. a paused process)."""

    def __init__(self, fs: pafs.FileSystem, path: str, uri: str, lease_s: float) -> None:
        self.fs, self.path, self.uri, self.lease_s = fs, path, uri, lease_s
        self.id = uuid.uuid4().hex
        self.renewals = 0
        self.written = ""
        self.lost: str | None = None  # why, once lost
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def content(self) -> str:
        return json.dumps(
            {
                "id": self.id,
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "lease_s": self.lease_s,
                "renewals": self.renewals,
                "expires_at": round(time.time() + self.lease_s, 3),
            }
        )

    def write(self) -> str:
        self.written = self.content()
        with self.fs.open_output_stream(self.path) as out:
            out.write(self.written.encode())
        return self.written

    def holds(self, text: str | None) -> bool:
        """Whether a lock object's content is this lease's, in any of its renewals: by its
        id, not by its last content, which the renewal thread replaces while a commit may be
        reading the object (a write under way, or one that failed after it landed)."""
        return text is not None and Holder.parse(text).id == self.id

    def start(self) -> None:
        self._thread = threading.Thread(target=self._renew, name="store-lease", daemon=True)
        self._thread.start()

    def seen_held(self) -> tuple[bool, str | None]:
        """Whether the lock object still holds this lease, and its content. A read that finds
        no object or text that is no lease at all is read again: an object store's read of an
        object being replaced can see the old size with the new bytes (a HEAD, then a ranged
        GET), so a renewal under way can look like a torn lock; another driver's whole lease,
        or an object gone three reads running, is a loss."""
        seen = None
        for attempt in range(TORN_READS):
            seen = read_lock(self.fs, self.path)
            if self.holds(seen):
                return True, seen
            if seen is not None and Holder.parse(seen).id is not None:
                return False, seen
            if attempt + 1 < TORN_READS:
                time.sleep(TORN_READ_WAIT_S * (attempt + 1))
        return False, seen

    def _renew(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            try:
                held, seen = self.seen_held()
                if not held:
                    self.lost = f"the lock now holds {Holder.parse(seen or '').describe()}"
                    logger.error("store %s: writer lock lost: %s", self.uri, self.lost)
                    return
                self.renewals += 1
                self.write()
            except OSError as e:  # one failed renewal is retried; the lease outlives it
                logger.warning("store %s: renewing the writer lock failed: %s", self.uri, e)

    def check(self) -> None:
        """Raise LeaseLost unless this process still holds the lock (before every commit)."""
        if self.lost is None and not self.seen_held()[0]:
            self.lost = "the lock object no longer holds this driver's lease"
        if self.lost is not None:
            raise LeaseLost(
                f"store {self.uri}: this driver lost its writer lock ({self.lost}); it stops "
                "without writing more. Re-run the command once the other writer is done."
            )

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        seen = read_lock(self.fs, self.path)
        if self.lost is None and seen is not None and self.holds(seen):
            release_lock(self.fs, self.path, seen)


class _Watch:
    """What a waiting writer has seen of a lock object: when each content was first seen (this
    process's monotonic clock), and the contents of each holder's lease, kept across calls (a
    run waits for the lock in one-second steps)."""

    first: dict[tuple[str, str], float] = {}
    leases: dict[tuple[str, str | None], set[str]] = {}

    @classmethod
    def see(cls, path: str, holder: Holder) -> float:
        """Record `holder` as seen now; when its content was first seen."""
        cls.leases.setdefault((path, holder.id), set()).add(holder.text)
        return cls.first.setdefault((path, holder.text), time.monotonic())

    @classmethod
    def holder_since(cls, path: str, holder: Holder) -> float:
        """When this holder was first seen, whatever its lease's content since."""
        texts = cls.leases.get((path, holder.id), {holder.text})
        return min(cls.first.get((path, t), time.monotonic()) for t in texts)

    @classmethod
    def renewing(cls, path: str, holder: Holder) -> bool:
        """Whether this holder's lease has been seen renewed (two contents of one lease)."""
        return holder.id is not None and len(cls.leases.get((path, holder.id), ())) > 1


def expired(holder: Holder, first_seen: float) -> bool:
    """Whether a leased lock belongs to a driver that stopped renewing it: unchanged for a whole
    lease since this process first saw it, or past its expiry by a lease on this host's wall
    clock (a lock left long ago is taken over at once; clocks may differ by less than a lease)."""
    if holder.lease_s is None:
        return False
    if time.monotonic() - first_seen >= holder.lease_s:
        return True
    return holder.expires_at is not None and time.time() > holder.expires_at + holder.lease_s


@contextlib.contextmanager
def object_lock(
    fs: pafs.FileSystem, root: str, uri: str, wait_s: float, lease_s: float = LEASE_S
) -> Iterator[Lease]:
    """A lock object `<root>/_lock` holding this driver's lease (JSON: id, pid, host, lease_s,
    renewals, expires_at), renewed every `lease_s` / 3 s while held. Object stores have no atomic
    create-if-absent through pyarrow: the owner reads its lease back after writing (of two
    writers racing, the last one wins), and checks it before every commit (`Lease.check`).

    A lock of another driver is taken over (logged with the old holder) when its lease expired
    (`expired`), or at once when its owner was a process on this host that no longer exists.
    While it is unknown whether the holder still renews, the wait goes on past `wait_s` (at
    most a lease): a live holder is refused only once it has been seen renewing, a dead one is
    taken over. An older lock without a lease is never taken over from another host (the error
    says how to remove it). A lock seen for less than LOCK_PROBE_GRACE_S is waited for even
    with `wait_s=0`: it may be a reader's probe."""
    path = f"{root}/{LOCK_OBJECT}"
    lease = Lease(fs, path, uri, lease_s)
    deadline = time.monotonic() + wait_s
    while True:
        text = read_lock(fs, path)
        if text is None:
            fs.create_dir(root, recursive=True)
            if lease.write() == read_lock(fs, path):
                break
            continue  # another writer wrote last, or deleted it in between: look again
        holder = Holder.parse(text)
        first_seen = _Watch.see(path, holder)
        if owner_is_dead(text) or expired(holder, first_seen):
            logger.warning(
                "store %s: taking over the writer lock of a driver that is gone (%s)",
                uri,
                holder.describe(),
            )
            release_lock(fs, path, text)
            continue
        now = time.monotonic()
        held_for = now - _Watch.holder_since(path, holder)
        undecided = holder.lease_s is not None and not _Watch.renewing(path, holder)
        if now >= deadline and held_for >= LOCK_PROBE_GRACE_S and not undecided:
            raise StoreLocked(_locked_message(uri, path, holder))
        time.sleep(0.25 if held_for < LOCK_PROBE_GRACE_S else min(1.0, lease_s / 4))
    lease.start()
    try:
        yield lease
    finally:
        lease.release()


def _locked_message(uri: str, path: str, holder: Holder) -> str:
    message = (
        f"store {uri} is being written by another reprogrid process ({holder.describe()}); "
        "wait for it to finish or pass --wait-lock SECONDS"
    )
    if holder.lease_s is None:  # an older lock without a lease: only a person can judge it
        message += f"; if that driver is dead, delete {path} and re-run"
    return message


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


def holder_active(text: str) -> bool:
    """Whether a lock object's holder may be writing now, judged at one look (a reader's
    question): not a process on this host that no longer runs, nor a lease long expired."""
    holder = Holder.parse(text)
    if owner_is_dead(text):
        return False
    if holder.expires_at is None or holder.lease_s is None:
        return True
    return time.time() <= holder.expires_at + holder.lease_s


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
