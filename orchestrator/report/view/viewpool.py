"""The problems view's worker processes (orchestrator/report/view/folder.py writes its batches in
them): their pool, started ahead of the batches (`ViewPool`), the gate their writes wait on
(`Gate`), and what each worker computes with (`start_worker`): one BLAS thread, small pages,
a niceness, and an end with its parent."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from numpy._core import multiarray
from threadpoolctl import threadpool_limits


def exit_with_parent(parent: int, every_s: float = 0.5) -> None:
    """A view worker's initializer: a thread that ends the worker once `parent` is gone (its
    parent changes). A report stopped by SIGTERM or SIGKILL cannot stop its workers itself,
    and they would go on writing the view into its folder."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


class ViewCancelled(Exception):
    """The caller stopped the view (`write_view`'s `cancel`) before it was written."""


@dataclass(frozen=True)
class Gate:
    """What the view's workers wait on before they write: `go`, set once the view's folder is
    ready (after the report's options were checked), or `stop`. `report` starts its view's
    workers before it checks its options, so that they compute their first batches on the core
    the check leaves idle; nothing is written before `go`. Both are multiprocessing events of
    the pool's context, given to each worker by its initializer (such events travel to a
    process only as it starts)."""

    go: Any  # multiprocessing.synchronize.Event
    stop: Any

    @staticmethod
    def of(context: Any) -> Gate:
        return Gate(context.Event(), context.Event())

    def check(self) -> None:
        """ViewCancelled once `stop` is set."""
        if self.stop.is_set():
            raise ViewCancelled("the problems view was stopped before it was written")

    def wait(self, every_s: float = 0.1) -> None:
        """Return once `go` is set; ViewCancelled once `stop` is."""
        while not self.go.wait(every_s):
            self.check()


MAX_VIEW_WORKERS = 4  # each peaked at 220-255 MB at 6,000-20,000 settings: a login node's 64
# cores would take tens of GB for a view that 4 processes write in a few times 10 s


def view_workers() -> int:
    """The processes a command writes the view with: one per core this process may use, at
    most MAX_VIEW_WORKERS (the batches of a 100-model store are independent, and the work is
    Python and numpy in one thread each)."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(usable or 1, MAX_VIEW_WORKERS))


def one_blas_thread() -> threadpool_limits:
    """numpy's BLAS limited to one thread in this process, until the returned object's
    `restore_original_limits` (or the end of its `with` block). numpy's OpenBLAS starts a
    thread per core, and after each matrix product (the paired test projects a model's
    settings onto 10,000 draws, a few milliseconds in one thread) its threads spin waiting for
    more work: in the view's workers and in the report computed beside them, that spinning took
    a quarter of the CPU time of `report` with html at 6,000 settings (docs/report.md, "At the
    scale of a leaderboard study").

    Call it while no other thread of this process may import an extension module: it walks the
    loaded libraries under the dynamic loader's lock and runs Python code there, and a thread
    that loads a library (an import) holds the GIL while it waits for that lock. `report` with
    html, limited from the main thread while its view thread started the worker pool, hung
    so."""
    return threadpool_limits(limits=1, user_api="blas")


def huge_pages(enabled: bool) -> bool:
    """Whether numpy asks the kernel for transparent huge pages (madvise MADV_HUGEPAGE) for the
    large arrays this process allocates from now on; returns the previous setting (numpy's
    NUMPY_MADVISE_HUGEPAGE, read once at its import, changed in a running process).

    A report and its view allocate and free short-lived temporaries of tens of MB (a model's
    pairs against 10,000 draws), each touched once. With huge pages, each new array is backed
    by fresh 2 MB pages: on this 2-core virtual machine the first touch of 100 MB took 0.73 s
    that way and 0.12-0.14 s in 4 kB pages, which the kernel recycles from the memory just
    freed; `report` with html at 6,000 settings spent 3.7-4.9 s of system time with them and
    2.4-2.7 s without (docs/report.md, "At the scale of a leaderboard study")."""
    return bool(multiarray._set_madvise_hugepage(enabled))  # type: ignore[attr-defined]  # not in its stubs


@contextlib.contextmanager
def small_pages() -> Iterator[None]:
    """`huge_pages(False)` for the block, the previous setting back after it."""
    before = huge_pages(False)
    try:
        yield
    finally:
        huge_pages(before)


BEHIND_PARENT = 5  # the niceness a report's view workers take (`start_worker`)


def start_worker(parent: int, gate: Gate | None = None, nice: int = 0) -> None:
    """A view worker's initializer: one BLAS thread (`one_blas_thread`), small pages
    (`huge_pages`), `exit_with_parent`, the gate its batches wait on before they write (`Gate`),
    and `nice` added to its niceness."""
    global _WORKER_GATE
    one_blas_thread()
    huge_pages(False)
    exit_with_parent(parent)
    _WORKER_GATE = gate
    if nice:
        os.nice(nice)


_WORKER_GATE: Gate | None = None  # this worker's gate (`start_worker`); None in other processes


def worker_gate() -> Gate | None:
    """The gate this process's batches wait on: a view worker's (`start_worker`), else None."""
    return _WORKER_GATE


class ViewPool:
    """The view's worker processes and their gate, for `write_view`: a caller may start them
    (`start`) well before it has batches for them. `report` starts them before it reads the
    store or imports its renderers, so that each worker's start (a process spawned, the view's
    modules imported: about 0.4 s) takes the core that the report's own start leaves idle.
    Leaving the block stops what waits on the gate and ends the workers."""

    def __init__(self, workers: int, behind: bool = False) -> None:
        """`behind`: the workers run at niceness BEHIND_PARENT (`write_view`'s `ready`)."""
        context = multiprocessing.get_context("spawn")  # no fork of a process with threads
        self.workers = workers
        self.gate = Gate.of(context)
        self.executor = ProcessPoolExecutor(
            workers,
            mp_context=context,
            initializer=start_worker,
            initargs=(os.getpid(), self.gate, BEHIND_PARENT if behind else 0),
        )

    def start(self) -> ViewPool:
        """Every worker started now: an executor starts a process per task submitted, up to
        its workers, so each gets one that does nothing."""
        for _ in range(self.workers):
            self.executor.submit(os.getpid)
        return self

    def __enter__(self) -> ViewPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.gate.stop.set()  # a batch still waiting on the gate ends rather than hold it up
        self.executor.shutdown(wait=True, cancel_futures=True)
