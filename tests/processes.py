"""Process helpers the tests share: another process holding a store's writer lock, and the
processes left in a process group (what a killed or interrupted run must not leave behind)."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import Iterator
from pathlib import Path


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
