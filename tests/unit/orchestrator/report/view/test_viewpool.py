"""The problems view's worker processes (orchestrator/report/view/viewpool.py): what each computes
with, its end with its parent, and a pool started ahead of its batches."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from orchestrator.report.view import viewpool

PARENT = """
import multiprocessing, os, sys, time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from orchestrator.report.view.viewpool import exit_with_parent

if __name__ == "__main__":
    pool = ProcessPoolExecutor(
        1, mp_context=multiprocessing.get_context("spawn"),
        initializer=exit_with_parent, initargs=(os.getpid(), 0.05),
    )
    print(pool.submit(os.getpid).result(), flush=True)
    pool.submit(time.sleep, 60)
    os._exit(0)  # as SIGKILL or SIGTERM would: no shutdown of the pool
"""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_view_worker_exits_when_its_parent_is_gone(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    root = Path(__file__).resolve().parents[5]
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    worker = int(done.stdout.split()[0])
    deadline = time.monotonic() + 10
    while _running(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(worker), f"worker {worker} still runs after its parent exited"


def test_view_workers_are_the_usable_cores_at_most_four(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(64)), raising=False)
    assert viewpool.view_workers() == viewpool.MAX_VIEW_WORKERS == 4
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {3}, raising=False)
    assert viewpool.view_workers() == 1


def blas_threads() -> list[int]:
    """The thread count of each BLAS this process has loaded (numpy's, scipy's)."""
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


one_core = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="a BLAS on one core has one thread, whatever is asked"
)


@one_core
def test_one_blas_thread_holds_for_its_block_only():
    before = blas_threads()
    assert before and max(before) > 1  # a thread per core, as numpy starts it
    with viewpool.one_blas_thread():
        assert set(blas_threads()) == {1}
    assert blas_threads() == before


@one_core
def test_a_view_worker_computes_with_one_blas_thread(monkeypatch):
    # what a worker would start with otherwise (OpenBLAS takes at most a thread per core)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=context) as plain:
        assert max(plain.submit(blas_threads).result()) == 2
    with ProcessPoolExecutor(
        1, mp_context=context, initializer=viewpool.start_worker, initargs=(os.getpid(),)
    ) as pool:
        assert set(pool.submit(blas_threads).result()) == {1}


def huge_pages_now() -> bool:
    return bool(np._core.multiarray._get_madvise_hugepage())


def test_small_pages_hold_for_their_block_and_a_view_worker_takes_them(monkeypatch):
    before = viewpool.huge_pages(True)
    try:
        with viewpool.small_pages():
            assert not huge_pages_now()
        assert huge_pages_now()
        assert viewpool.huge_pages(False) is True and viewpool.huge_pages(True) is False
    finally:
        viewpool.huge_pages(before)
    monkeypatch.setenv("NUMPY_MADVISE_HUGEPAGE", "1")  # what a worker would start with
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=context) as plain:
        assert plain.submit(huge_pages_now).result() is True
    with ProcessPoolExecutor(
        1, mp_context=context, initializer=viewpool.start_worker, initargs=(os.getpid(),)
    ) as pool:
        assert pool.submit(huge_pages_now).result() is False


def test_a_pool_started_ahead_runs_its_workers_and_its_block_ends_them():
    """`ViewPool.start` starts every worker before any batch, each with the worker settings;
    leaving the block stops the gate and ends them."""
    others = {p.pid for p in multiprocessing.active_children()}  # another test's, if any
    with viewpool.ViewPool(2, behind=True).start() as pool:
        workers = [p for p in multiprocessing.active_children() if p.pid not in others]
        assert len(workers) == 2 and all(w.is_alive() for w in workers)
        pids = {pool.executor.submit(os.getpid).result() for _ in range(8)}
        assert pids <= {w.pid for w in workers}
        assert pool.executor.submit(huge_pages_now).result() is False
        assert pool.executor.submit(os.nice, 0).result() == os.nice(0) + viewpool.BEHIND_PARENT
        assert not pool.gate.stop.is_set()
    assert pool.gate.stop.is_set()
    for worker in workers:
        worker.join(10)
        assert not worker.is_alive()
