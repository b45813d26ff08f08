"""`reprogrid report` and `reprogrid view` with the problems view (orchestrator/cli/report.py,
orchestrator/cli/problems.py): where their BLAS is limited to one thread."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from orchestrator.cli import main
from orchestrator.report import view
from storage.store import Store
from tests.fixtures_store import Spec, write_setting
from tests.unit.orchestrator.report.test_view import blas_threads


@pytest.fixture
def limits(monkeypatch) -> list[int]:
    """The number of threads this process runs at each `one_blas_thread` call (it deadlocked
    with a thread that imports, so it must come before the view's thread starts)."""
    calls: list[int] = []
    real = view.one_blas_thread

    def recording():
        calls.append(threading.active_count())
        return real()

    monkeypatch.setattr(view, "one_blas_thread", recording)
    monkeypatch.setattr(view, "view_workers", lambda: 1)  # the view in this process
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
    """Huge pages off while a report is computed and its view written (`view.huge_pages`), the
    process's setting back after."""
    from orchestrator.report import build

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
    monkeypatch.setattr(view, "view_workers", lambda: 1)
    before = view.huge_pages(True)
    try:
        out = tmp_path / "report"
        assert main(["report", "--store", str(root), "--format", "md,html", "--out", str(out)]) == 0
        assert main(["view", "--store", str(root), "--out", str(tmp_path / "view")]) == 0
        assert sorted(seen) == [("finish", False), ("view", False), ("view", False)]
        assert np._core.multiarray._get_madvise_hugepage()  # restored
    finally:
        view.huge_pages(before)
