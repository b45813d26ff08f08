"""Process helpers the tests share: another process holding a store's writer lock, and the
processes a run leaves behind (what a killed or interrupted run must not leave): in its process
group, or anywhere, found by a marker in their environment."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

# An environment variable whose value names one run a test starts (run_marker).
RUN_MARKER = "REPROGRID_TEST_RUN"


def _hold_lock(path: str, ready, release, hold_s: float) -> None:
    from storage.store import Store

    with Store(path).writer_lock():
        ready.set()
        release.poll(hold_s)  # returns when the test closes its end of the pipe


@contextlib.contextmanager
def lock_held_elsewhere(
    store: str | Path, hold_s: float = 30.0
) -> Iterator[multiprocessing.process.BaseProcess]:
    """While the block runs, a separate process (spawned, so no state is shared) holds the
    store's writer lock, as a live run does. Yields that process (a test may kill it)."""
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    # A pipe, not an Event, says "release": Event.set() waits for every process sleeping on the
    # event to wake, so a holder the test has SIGKILLed would make it wait forever.
    release, released = ctx.Pipe(duplex=False)
    holder = ctx.Process(target=_hold_lock, args=(str(store), ready, release, hold_s))
    holder.start()
    try:
        assert ready.wait(hold_s), "the lock holder did not start"
        yield holder
    finally:
        released.close()
        holder.join(hold_s)
        release.close()


def alive_in_group(pgid: int) -> list[int]:
    """Pids of the processes still in process group `pgid`."""
    alive = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) == pgid:
                    alive.append(int(entry.name))
            except ProcessLookupError:
                continue
    return alive


def run_marker() -> tuple[str, str]:
    """(name, value) to put in the environment of a run a test starts: every process the run
    starts inherits it (Ray's GCS, raylet, dashboard and workers), whatever its process group or
    parent, and no process of another run or another user has it."""
    return RUN_MARKER, uuid.uuid4().hex


def _zombie(pid: str) -> bool:
    with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0] == "Z"


def alive_with_env(name: str, value: str) -> list[int]:
    """Pids of the live processes (not zombies) whose environment holds `name=value`, other
    than this one. Ray starts its workers in process groups of their own (ray::IDLE,
    ray::EngineWorker), and once the driver is gone they are no one's descendants: a run's
    marker (run_marker) finds them where its process group and its process tree cannot. A
    process whose environment cannot be read (another user's) is not one of the run's."""
    pids = (int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit())
    return sorted(pid for pid in pids if pid != os.getpid() and _marked(pid, name, value))


def _marked(pid: int, name: str, value: str) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        return f"{name}={value}".encode() in environ and not _zombie(str(pid))
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False  # gone meanwhile, or not ours to read


def left_behind(name: str, value: str, timeout_s: float) -> list[int]:
    """The run's processes (marked `name=value`) still alive after waiting up to `timeout_s`
    for them to exit. Those are killed (SIGKILL) before they are returned, so that a failing
    test leaves nothing running: they carry the run's marker, so the test started them."""
    deadline = time.monotonic() + timeout_s
    while (alive := alive_with_env(name, value)) and time.monotonic() < deadline:
        time.sleep(0.5)
    for pid in alive:
        sys.stderr.write(f"left behind: {describe(pid)}\n")  # pytest shows it on failure
        with contextlib.suppress(ProcessLookupError):
            handle = os.pidfd_open(pid)  # pins the process: its pid cannot be reused meanwhile
            try:
                if _marked(pid, name, value):  # still the run's, not a new process on its pid
                    signal.pidfd_send_signal(handle, signal.SIGKILL)
            finally:
                os.close(handle)
    return alive


def describe(pid: int) -> str:
    """What a process is, for a failure message: pid, parent, group, state and command line."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(errors="replace")
        cmdline = (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return f"{pid} (gone)"
    fields = stat.rsplit(")", 1)[1].split()
    state, ppid, pgid = fields[0], fields[1], fields[2]
    return f"{pid} ppid={ppid} pgid={pgid} state={state}: {cmdline.strip()[:300]}"
