"""`reprogrid report` and `reprogrid view` with the problems view (orchestrator/cli/report.py,
orchestrator/cli/problems.py): where their BLAS is limited to one thread."""

from __future__ import annotations

import multiprocessing
import threading

import numpy as np
import pytest

from orchestrator.cli import main
from orchestrator.report.view import folder as view
from orchestrator.report.view import viewpool
from storage.store import Store
from tests.fixtures_store import Spec, write_grid_store, write_setting
from tests.unit.orchestrator.report.view.test_viewpool import blas_threads


@pytest.fixture
def limits(monkeypatch) -> list[int]:
    """The number of threads this process runs at each `one_blas_thread` call (it deadlocked
    with a thread that imports, so it must come before the view's thread starts)."""
    calls: list[int] = []
    real = viewpool.one_blas_thread

    def recording():
        calls.append(threading.active_count())
        return real()

    monkeypatch.setattr(viewpool, "one_blas_thread", recording)
    monkeypatch.setattr(viewpool, "view_workers", lambda: 1)  # the view in this process
    return calls


@pytest.mark.parametrize(
    ("formats", "limited"), [("md,html", True), ("md,json", False)], ids=["html", "no-html"]
)
def test_a_report_limits_blas_before_its_view_thread_starts(
    env, tmp_path, capsys, limits, formats, limited
):
    root = tmp_path / "store"
    write_setting(Store(str(root)), Spec("tiny", "own", "greedy", 2048, "fp32", 80))
    threads, before = threading.active_count(), blas_threads()
    out = tmp_path / "report"
    assert main(["report", "--store", str(root), "--format", formats, "--out", str(out)]) == 0
    assert limits == ([threads] if limited else [])
    assert (out / "problems" / "index.html").is_file() is limited
    assert blas_threads() == before  # restored


def test_view_limits_blas_before_it_starts_a_thread(env, tmp_path, capsys, limits):
    root = tmp_path / "store"
    write_setting(Store(str(root)), Spec("tiny", "own", "greedy", 2048, "fp32", 80))
    threads, before = threading.active_count(), blas_threads()
    assert main(["view", "--store", str(root), "--out", str(tmp_path / "view")]) == 0
    assert limits == [threads] and blas_threads() == before


def test_report_and_view_compute_in_small_pages_and_restore_them(
    env, tmp_path, capsys, monkeypatch
):
    """Huge pages off while a report is computed and its view written (`viewpool.huge_pages`), the
    process's setting back after."""
    from orchestrator.report.tables import build

    root = tmp_path / "store"
    write_setting(Store(str(root)), Spec("tiny", "own", "greedy", 2048, "fp32", 80))
    seen: list[tuple[str, bool]] = []

    def recording(name, real):
        def call(*args, **kwargs):
            seen.append((name, bool(np._core.multiarray._get_madvise_hugepage())))
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(build, "finish_report", recording("finish", build.finish_report))
    monkeypatch.setattr(view, "write_view", recording("view", view.write_view))
    monkeypatch.setattr(viewpool, "view_workers", lambda: 1)
    before = viewpool.huge_pages(True)
    try:
        out = tmp_path / "report"
        assert main(["report", "--store", str(root), "--format", "md,html", "--out", str(out)]) == 0
        assert main(["view", "--store", str(root), "--out", str(tmp_path / "view")]) == 0
        assert sorted(seen) == [("finish", False), ("view", False), ("view", False)]
        assert np._core.multiarray._get_madvise_hugepage()  # restored
    finally:
        viewpool.huge_pages(before)


def test_a_reports_view_workers_start_before_it_reads_the_store(env, tmp_path, capsys, monkeypatch):
    """`report` with html starts its view's workers (`ViewPool.start`) before its own process
    reads the store, the first of them reads the view's groups (`groups_at`), and they write
    the view that `reprogrid view` writes in one process (with a smaller bootstrap: the same
    numbers either way)."""
    root = tmp_path / "store"
    write_grid_store(str(root))
    children: list[int] = []
    real_read, real_groups = Store.read_table, view.view_groups

    def recording(self, *args, **kwargs):
        children.append(len(multiprocessing.active_children()))
        return real_read(self, *args, **kwargs)

    def not_here(store):
        raise AssertionError("the report's own process read the view's groups")

    monkeypatch.setattr(Store, "read_table", recording)
    monkeypatch.setattr(view, "view_groups", not_here)
    monkeypatch.setattr(view, "BATCH_SETTINGS", 60)  # a batch per model: both workers write
    monkeypatch.setattr(viewpool, "view_workers", lambda: 2)
    out = tmp_path / "report"
    args = ["--store", str(root), "--resamples", "50"]
    others = len(multiprocessing.active_children())  # another test's, if any
    assert main(["report", *args, "--format", "md,html", "--out", str(out)]) == 0
    assert children and children[0] - others == 2
    monkeypatch.setattr(view, "view_groups", real_groups)
    monkeypatch.setattr(viewpool, "view_workers", lambda: 1)
    assert main(["view", *args, "--out", str(tmp_path / "alone")]) == 0
    written, alone = _data_files(out / "problems"), _data_files(tmp_path / "alone")
    assert len(written) > 4 and written == alone
    html = (out / "report.html").read_text(encoding="utf-8")
    assert html.count("problems/index.html#setting=") >= 120  # each setting's key links


def _data_files(root) -> dict[str, bytes]:
    """The view's data files but its index (which names when and from where it was written)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted((root / "data").rglob("*"))
        if p.is_file() and p.name != "index.js"
    }
