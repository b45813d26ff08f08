"""How the problems view is written (orchestrator/report/view/folder.py): batches of groups, worker
processes that write the same files as one, cancelling, one BLAS thread, a batch's executions
split among its groups, and no pandas in a worker."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import pytest

from orchestrator.report.view import folder as view
from orchestrator.report.view import viewpool
from orchestrator.report.view.folder import (
    EXECUTION_COLUMNS,
    Group,
    batches,
    write_view,
)
from orchestrator.report.view.problems import PairOptions
from storage.store import Store
from tests.fixtures_store import Spec, write_grid_store, write_setting
from tests.unit.orchestrator.report.view.view_rows import execution, table


def test_batches_keep_groups_whole_and_in_order():
    groups = [
        Group(f"m{i}", f"model{i}", "b", f"model{i}", ({},) * n) for i, n in enumerate([4, 3, 5, 2])
    ]
    assert [[g.id for g in b] for b in batches(groups, size=7)] == [["m0", "m1"], ["m2", "m3"]]
    assert [[g.id for g in b] for b in batches(groups, size=1)] == [["m0"], ["m1"], ["m2"], ["m3"]]


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_problem_files_hold_consecutive_problems_up_to_the_budget():
    assert view.problem_files([40, 40, 40, 40, 40], budget=100) == [0, 3]
    assert view.problem_files([150, 10, 150, 10], budget=100) == [0, 1, 3]  # one at least
    assert view.problem_files([10] * 164, budget=10**6) == [0]
    assert view.problem_files([], budget=100) == []


def test_worker_processes_write_the_same_files_as_one_process(tmp_path, monkeypatch):
    """Two models in batches of one model each, written by two spawned processes that open the
    store by its URI: the same files, byte for byte, as one process writes."""
    write_grid_store(str(tmp_path / "store"))
    store = Store(str(tmp_path / "store"))
    options = PairOptions(n_resamples=200)
    submitted: list[tuple] = []
    initializers = []

    class Pool(viewpool.ProcessPoolExecutor):
        def __init__(self, *args, **kwargs):
            initializers.append(kwargs["initializer"])  # one BLAS thread, exit with the parent
            super().__init__(*args, **kwargs)

        def submit(self, fn, /, *args, **kwargs):
            submitted.append(args[:1])  # the store's URI: what a worker opens
            return super().submit(fn, *args, **kwargs)

    monkeypatch.setattr(viewpool, "ProcessPoolExecutor", Pool)
    written = {}
    for workers in (1, 2):
        out = tmp_path / f"view-{workers}"
        summary = write_view(
            store, out, options, generated_at="then", workers=workers, batch_settings=60
        )
        assert summary.n_settings == 120 and len(summary.groups) == 2
        written[workers] = _files(out)
    assert submitted == [(store.uri,), (store.uri,)]  # two batches, in worker processes
    assert initializers == [viewpool.start_worker]
    problem_files = [f for f in written[1] if "/p/" in f]
    assert len(problem_files) == summary.n_problem_files >= 2  # a file for each model at least
    assert written[1] == written[2]


def test_workers_refuse_a_store_whose_uri_names_another_filesystem(tmp_path):
    """A store given its own filesystem object cannot be reopened by a worker from its URI:
    the view says so rather than have the workers read another store."""
    import pyarrow.fs as pafs

    write_grid_store(str(tmp_path / "store"))
    local = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    store = Store("store", filesystem=local)  # "store" in the subtree; a worker: in its cwd
    assert len(view.view_groups(store)) == 2
    with pytest.raises(ValueError, match="workers=1"):
        write_view(
            store, tmp_path / "view", PairOptions(n_resamples=50), workers=2, batch_settings=60
        )
    assert not (tmp_path / "view" / "data").exists()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_set_cancel_stops_the_view_before_a_batch(tmp_path, workers):
    """`report` sets `cancel` when it is stopped while the view is written beside it: no batch
    begins after that, and no index is written."""
    write_grid_store(str(tmp_path / "store"))
    stop = threading.Event()
    stop.set()
    with pytest.raises(viewpool.ViewCancelled):
        write_view(
            Store(str(tmp_path / "store")),
            tmp_path / "view",
            PairOptions(n_resamples=50),
            workers=workers,
            batch_settings=60,
            cancel=stop,
        )
    assert not (tmp_path / "view" / "data" / "index.js").exists()
    assert not list((tmp_path / "view").rglob("matrix.js"))


def test_workers_write_nothing_before_ready_and_then_the_same_files(tmp_path):
    """`report` starts its view before it checks its options (`ready`): the workers compute,
    and the view's folder is neither created nor written until `ready` is set."""
    write_grid_store(str(tmp_path / "store"))
    store = Store(str(tmp_path / "store"))
    options = PairOptions(n_resamples=50)
    write_view(store, tmp_path / "alone", options, generated_at="then", batch_settings=60)
    ready, out, seen = threading.Event(), tmp_path / "view", []
    with ThreadPoolExecutor(1) as background:
        job = background.submit(
            write_view,
            store,
            out,
            options,
            generated_at="then",
            workers=2,
            batch_settings=60,
            ready=ready,
        )
        try:
            deadline = time.monotonic() + 3  # long enough for the workers to finish a batch
            while time.monotonic() < deadline and not job.done():
                seen.append(out.exists())
                time.sleep(0.05)
            assert not job.done() and not any(seen) and not out.exists()
        finally:
            ready.set()  # a failed check must not leave the view waiting
        assert job.result(timeout=60).n_settings == 120
    assert _files(out) == _files(tmp_path / "alone")


def test_a_reports_workers_run_behind_it(tmp_path, monkeypatch):
    """With `ready` (a report's view) the workers add BEHIND_PARENT to their niceness, so the
    report's own thread keeps a core; `reprogrid view` (no `ready`) leaves it."""
    write_grid_store(str(tmp_path / "store"))
    nice: list[int] = []

    class Pool(viewpool.ProcessPoolExecutor):
        def __init__(self, *args, **kwargs):
            nice.append(kwargs["initargs"][2])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(viewpool, "ProcessPoolExecutor", Pool)
    store, options = Store(str(tmp_path / "store")), PairOptions(n_resamples=50)
    write_view(store, tmp_path / "a", options, workers=2, batch_settings=60)
    ready = threading.Event()
    ready.set()
    write_view(store, tmp_path / "b", options, workers=2, batch_settings=60, ready=ready)
    assert nice == [0, viewpool.BEHIND_PARENT] and viewpool.BEHIND_PARENT > 0
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        1, mp_context=context, initializer=viewpool.start_worker, initargs=(os.getpid(), None, 3)
    ) as pool:
        assert pool.submit(os.nice, 0).result() == os.nice(0) + 3


@pytest.mark.parametrize("workers", [1, 2])
def test_a_cancel_before_ready_writes_nothing(tmp_path, workers):
    """A report whose options fail their check stops its view: the workers' batches end at
    the gate (or between groups), and nothing of the view exists."""
    write_grid_store(str(tmp_path / "store"))
    cancel, out = threading.Event(), tmp_path / "view"
    with ThreadPoolExecutor(1) as background:
        job = background.submit(
            write_view,
            Store(str(tmp_path / "store")),
            out,
            PairOptions(n_resamples=50),
            workers=workers,
            batch_settings=60,
            cancel=cancel,
            ready=threading.Event(),
        )
        time.sleep(0.5)
        cancel.set()
        with pytest.raises(viewpool.ViewCancelled):
            job.result(timeout=60)
    assert not out.exists()


def test_a_batchs_executions_split_among_its_groups_in_the_order_read():
    groups = [
        Group("m0", "a", "humanevalfix", "a", ({"setting_key": "k1"}, {"setting_key": "k3"})),
        Group("m1", "b", "humanevalfix", "b", ({"setting_key": "k2"},)),
        Group("m2", "c", "humanevalfix", "c", ({"setting_key": "k4"},)),  # no rows
    ]
    read = [
        execution(key, f"Python/{i}", 0, "passed" if i % 2 else "failed")
        for i, key in enumerate(["k3", "k2", "k1", "k9", "k3", "k2", "k1"])  # k9: no group's
    ]
    rows_read = table("executions", EXECUTION_COLUMNS, read)
    split = view.split_executions(rows_read, groups)
    rows = [[(r["setting_key"], r["task_id"]) for r in t.to_pylist()] for t in split]
    assert rows == [
        [("k3", "Python/0"), ("k1", "Python/2"), ("k3", "Python/4"), ("k1", "Python/6")],
        [("k2", "Python/1"), ("k2", "Python/5")],
        [],
    ]
    assert all(t.schema == rows_read.schema for t in split)


WORKER = """
import sys
from pathlib import Path
from orchestrator.report.view import folder as view
from orchestrator.report.view.problems import PairOptions
from storage.store import Store
store = Store(sys.argv[1])
[batch] = view.batches(view.view_groups(store))
view.write_batch(store.uri, Path(sys.argv[2]), batch, PairOptions(n_resamples=50))
print(sorted(m for m in sys.modules if m.split(".")[0] == "pandas")[:1])
"""


def test_a_view_batch_imports_no_pandas(tmp_path):
    """pandas costs a worker 40 MB and 0.27 s; pyarrow imports it to build an array from Python
    values or to read one as NumPy."""
    root = tmp_path / "store"
    for precision in ("bf16", "fp32"):
        write_setting(Store(str(root)), Spec("tiny", "own", "greedy", 2048, precision, 80))
    repo = Path(__file__).resolve().parents[5]
    done = subprocess.run(
        [sys.executable, "-c", WORKER, str(root), str(tmp_path / "view")],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "view" / "data" / "m0" / "p" / "0.js").is_file()
    assert done.stdout.split("\n")[-2] == "[]"
