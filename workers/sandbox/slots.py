"""Slots (root): one uid per fork server, held host-wide through a lock file for the server's
lifetime (its cgroups are named after it); and killing every process of a uid, which finds
strays where there is no pid namespace (and anything a killed previous holder left)."""

from __future__ import annotations

import errno
import fcntl
import functools
import grp
import logging
import os
import pwd
import signal
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from workers.sandbox.results import SandboxUnavailable

logger = logging.getLogger(__name__)

SANDBOX_UID_BASE = 61000  # first uid (and gid) of the reserved range; no account may own one
SANDBOX_SLOTS = 128  # concurrent root sandboxes per host: uids 61000-61127


@dataclass(frozen=True)
class Slot:
    uid: int  # the slot's uid, also used as its gid
    lock_fd: int  # holds the slot's flock until closed


def acquire_slot() -> Slot:
    """Take a free slot (waiting for one if all are held) after killing anything left by a
    previous holder. Raises SandboxUnavailable when no uid of the range is free of accounts."""
    usable = [u for u in range(SANDBOX_UID_BASE, SANDBOX_UID_BASE + SANDBOX_SLOTS) if _unowned(u)]
    if not usable:
        raise SandboxUnavailable(f"every uid from {SANDBOX_UID_BASE} on belongs to an account")
    delay = 0.005
    while True:
        for uid in usable:
            slot = try_slot(uid)
            if slot is not None:
                kill_uid(uid)  # a crashed previous holder may have left processes behind
                return slot
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def try_slot(uid: int) -> Slot | None:
    """The slot of `uid` if nobody holds it (never waits)."""
    fd = os.open(_slot_lock_dir() / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return Slot(uid, fd)


def release_slot(slot: Slot) -> None:
    os.close(slot.lock_fd)  # closing drops the flock


@functools.cache
def _unowned(uid: int) -> bool:
    """A uid (and the gid of the same number) no account or group uses."""
    try:
        pwd.getpwuid(uid)
        return False
    except KeyError:
        pass
    try:
        grp.getgrgid(uid)
        return False
    except KeyError:
        return True


def _slot_lock_dir() -> Path:
    base = Path("/run/lock") if os.path.isdir("/run/lock") else Path(tempfile.gettempdir())
    folder = base / "reprogrid-sandbox"
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise SandboxUnavailable(
            f"{folder} must be a folder owned by uid {os.geteuid()}, mode 0700"
        )
    return folder


# ---------------------------------------------------------------------------------------------
# Killing by uid


def kill_uid(uid: int, patience_s: float = 5.0, zombie_grace_s: float = 1.0) -> None:
    """SIGKILL every live process whose real uid is `uid` until none is left, then give init a
    moment to reap the orphaned zombies (they still count against the slot's RLIMIT_NPROC)."""
    start = time.monotonic()
    while procs := procs_of_uid(uid):
        live = [pid for pid, zombie in procs if not zombie]
        waited = time.monotonic() - start
        if live and waited > patience_s:
            logger.warning("processes of sandbox uid %d survive SIGKILL: %s", uid, live)
            return
        if not live and waited > zombie_grace_s:
            logger.warning("%d zombies of sandbox uid %d are not reaped by init", len(procs), uid)
            return
        for pid in live:
            _kill_if_uid(pid, uid)
        time.sleep(0.002)


def _kill_if_uid(pid: int, uid: int) -> None:
    # Through a pidfd, re-checking the uid after opening it, so a recycled pid is never hit.
    try:
        fd = pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        if (info := _uid_state(pid)) and info[0] == uid:
            if fd is None:
                os.kill(pid, signal.SIGKILL)
            else:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
    except (ProcessLookupError, FileNotFoundError):
        pass
    finally:
        if fd is not None:
            os.close(fd)


def sweep_stale_uids() -> list[int]:
    """Kill the processes of slot uids nobody holds (left where a killed driver's runs had no
    pid namespace); returns those uids. One /proc scan, then a kill per stale uid."""
    uids = set()
    for name in os.listdir("/proc"):
        info = _uid_state(int(name)) if name.isdigit() else None
        if info and SANDBOX_UID_BASE <= info[0] < SANDBOX_UID_BASE + SANDBOX_SLOTS:
            uids.add(info[0])
    stale = []
    for uid in sorted(uids):
        slot = try_slot(uid)
        if slot is not None:
            try:
                kill_uid(uid)
                stale.append(uid)
            finally:
                release_slot(slot)
    return stale


def procs_of_uid(uid: int) -> list[tuple[int, bool]]:
    """(pid, is_zombie) of the processes whose real uid is `uid`, from /proc."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and (info := _uid_state(int(name))) and info[0] == uid:
            found.append((int(name), info[1] in b"ZX"))
    return found


def _uid_state(pid: int) -> tuple[int, bytes] | None:
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            status = fh.read()
    except OSError:
        return None
    uid_at, state_at = status.find(b"\nUid:"), status.find(b"\nState:")
    if uid_at < 0 or state_at < 0:
        return None
    return int(status[uid_at + 5 :].split(None, 1)[0]), status[state_at + 7 :].split(None, 1)[0]


def pidfd_open(pid: int) -> int | None:
    """A pidfd for `pid`, or None where the platform has none (raises ProcessLookupError)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, NotImplementedError):
        return None
    except OSError as e:
        if e.errno == errno.ENOSYS:  # a kernel older than 5.3
            return None
        raise
