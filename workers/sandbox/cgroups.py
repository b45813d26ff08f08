"""One memory and pids cgroup per sandbox slot, so that a program and everything it forks share
one memory limit and one process limit (driver side).

Where: below this process's own cgroup, in `reprogrid-sandbox/slot-<uid>` (cgroup v1: in the
memory and the pids hierarchies; v2: one folder, when this cgroup delegates both controllers).
Each run's supervisor joins the slot's cgroups before it forks the program (child.py), through
`cgroup.procs` files the driver opened; the driver writes the limits before each run, reads
the OOM-kill counter after it, and checks that the cgroup is empty again. A slot's folders are
removed with its fork server; `sweep_stale` removes those a killed driver left.
"""

from __future__ import annotations

import errno
import functools
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

BASE_NAME = "reprogrid-sandbox"
_MB = 1024 * 1024


class CgroupVersion(StrEnum):
    V1 = "v1"
    V2 = "v2"


@dataclass(frozen=True)
class CgroupHost:
    """Where slot cgroups go on this host, or why there are none."""

    version: CgroupVersion | None
    bases: tuple[str, ...]  # v1: (memory base, pids base); v2: (base,); () when none
    reason: str | None = None  # why there are none


@functools.cache
def cgroup_host() -> CgroupHost:
    """Find (and create) the base folders of the slot cgroups; cached per process."""
    own = _own_cgroups()
    mounts = _cgroup_mounts()
    memory, pids = mounts.get("memory"), mounts.get("pids")
    reasons = []
    if memory and pids and "memory" in own and "pids" in own:
        bases = (
            os.path.join(memory + own["memory"], BASE_NAME),
            os.path.join(pids + own["pids"], BASE_NAME),
        )
        why = _make_bases(bases)
        if why is None:
            return CgroupHost(CgroupVersion.V1, bases)
        reasons.append(why)
    if "" in mounts and "" in own:
        folder = mounts[""] + own[""]
        why = _delegated_v2(folder)
        if why is None:
            return CgroupHost(CgroupVersion.V2, (os.path.join(folder, BASE_NAME),))
        reasons.append(why)
    return CgroupHost(None, (), "; ".join(reasons) or "no memory and pids cgroup controllers")


def _own_cgroups() -> dict[str, str]:
    """controller -> this process's cgroup path ("" for the v2 unified hierarchy)."""
    out = {}
    with open("/proc/self/cgroup", encoding="utf-8") as fh:
        for line in fh:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                out[name] = path.rstrip("/")
    return out


def _cgroup_mounts() -> dict[str, str]:
    """controller -> v1 mount point; "" -> the cgroup2 mount point."""
    out: dict[str, str] = {}
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            left, right = line.split(" - ", 1)
            fstype, _, options = right.split()[:3]
            point = left.split()[4]
            if fstype == "cgroup2":
                out.setdefault("", point)
            elif fstype == "cgroup":
                for name in options.split(","):
                    if name in ("memory", "pids"):
                        out.setdefault(name, point)
    return out


def _make_bases(bases: tuple[str, ...]) -> str | None:
    for base in bases:
        try:
            os.makedirs(base, exist_ok=True)
        except OSError as e:
            return f"cannot create {base}: {e.strerror}"
        if not os.access(base, os.W_OK):
            return f"{base} is not writable"
    return None


def _delegated_v2(folder: str) -> str | None:
    """None if `folder` gives its children memory and pids (enabling them if it may)."""
    try:
        with open(os.path.join(folder, "cgroup.controllers"), encoding="ascii") as fh:
            available = set(fh.read().split())
        if not {"memory", "pids"} <= available:
            return f"cgroup v2 {folder} has no memory/pids controllers"
        base = os.path.join(folder, BASE_NAME)
        for where in (folder, base):  # our own cgroup first, then the base for the slots
            if where == base:
                os.makedirs(base, exist_ok=True)
            with open(os.path.join(where, "cgroup.subtree_control"), "w", encoding="ascii") as fh:
                fh.write("+memory +pids")
    except OSError as e:
        return f"cgroup v2 controllers not delegated to {folder}: {e.strerror}"
    return None


class SlotCgroup:
    """The cgroup folders of one slot, their limits and their members."""

    def __init__(self, host: CgroupHost, uid: int) -> None:
        self.host = host
        self.folders = tuple(os.path.join(base, f"slot-{uid}") for base in host.bases)
        for folder in self.folders:
            os.makedirs(folder, exist_ok=True)
        self.kill_members()
        self._limits: tuple[int, int] | None = None

    def open_procs(self) -> list[int]:
        """Writable cgroup.procs of each folder, for the run supervisor to join (inheritable)."""
        return [
            os.open(os.path.join(f, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)
            for f in self.folders
        ]

    def set_limits(self, memory_mb: int, max_processes: int) -> None:
        """memory_mb for the program and all its descendants (swap included), and at most
        max_processes of them (plus the run's supervisor)."""
        if self._limits == (memory_mb, max_processes):
            return
        limit, pids = str(memory_mb * _MB), str(max_processes + 1)
        if self.host.version is CgroupVersion.V1:
            memory, pid_folder = self.folders
            _write_memory_v1(memory, limit)
            _write(os.path.join(pid_folder, "pids.max"), pids)
        else:
            (folder,) = self.folders
            _write(os.path.join(folder, "memory.max"), limit)
            _write_if_exists(os.path.join(folder, "memory.swap.max"), "0")
            _write(os.path.join(folder, "pids.max"), pids)
        self._limits = (memory_mb, max_processes)

    def oom_kills(self) -> int:
        """How many processes the kernel has killed here for the memory limit so far."""
        name = "memory.oom_control" if self.host.version is CgroupVersion.V1 else "memory.events"
        try:
            with open(os.path.join(self.folders[0], name), encoding="ascii") as fh:
                for line in fh:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except OSError:
            pass
        return 0

    def members(self) -> list[int]:
        pids: set[int] = set()
        for folder in self.folders:
            try:
                with open(os.path.join(folder, "cgroup.procs"), encoding="ascii") as fh:
                    pids.update(int(p) for p in fh.read().split())
            except OSError:
                pass
        return sorted(pids)

    def kill_members(self, patience_s: float = 5.0) -> list[int]:
        """SIGKILL whatever is still in the slot's cgroups until they are empty; returns the
        pids found (empty after a normal run: the run's pid namespace took everything)."""
        found: list[int] = []
        start = time.monotonic()
        while members := self.members():
            found.extend(p for p in members if p not in found)
            if time.monotonic() - start > patience_s:
                break
            for pid in members:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.002)
        return found

    def remove(self) -> None:
        self.kill_members()
        for folder in self.folders:
            _rmdir_patiently(folder)


def sweep_stale(host: CgroupHost, try_slot: Callable[[int], Callable[[], None] | None]) -> int:
    """Remove slot cgroups whose slot nobody holds (`try_slot(uid)` takes it, returning a
    release function, or None while another holder has it). Returns how many were removed."""
    removed = 0
    names: set[str] = set()
    for base in host.bases:
        try:
            names.update(n for n in os.listdir(base) if n.startswith("slot-"))
        except OSError:
            pass
    for name in sorted(names):
        try:
            uid = int(name.removeprefix("slot-"))
        except ValueError:
            continue
        release = try_slot(uid)
        if release is None:
            continue
        try:
            SlotCgroup(host, uid).remove()
            removed += 1
        finally:
            release()
    return removed


def _write_memory_v1(folder: str, limit: str) -> None:
    memsw = os.path.join(folder, "memory.memsw.limit_in_bytes")
    plain = os.path.join(folder, "memory.limit_in_bytes")
    if not os.path.exists(memsw):  # no swap accounting: no swap limit to keep in step
        _write(plain, limit)
        return
    try:  # memsw must stay >= the plain limit: lower the plain one first, raise it last
        _write(plain, limit)
        _write(memsw, limit)
    except OSError as e:
        if e.errno != errno.EINVAL:
            raise
        _write(memsw, limit)
        _write(plain, limit)


def _write(path: str, value: str) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(value)


def _write_if_exists(path: str, value: str) -> None:
    if os.path.exists(path):
        _write(path, value)


def _rmdir_patiently(folder: str, patience_s: float = 2.0) -> None:
    """rmdir a cgroup folder; EBUSY while the kernel finishes tearing down its last member."""
    start = time.monotonic()
    while True:
        try:
            os.rmdir(folder)
            return
        except FileNotFoundError:
            return
        except OSError as e:
            if e.errno != errno.EBUSY or time.monotonic() - start > patience_s:
                raise
            time.sleep(0.01)
