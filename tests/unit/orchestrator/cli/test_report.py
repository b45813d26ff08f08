"""`reprogrid report` and `reprogrid view` with the problems view (orchestrator/cli/report.py,
orchestrator/cli/problems.py): where their BLAS is limited to one thread."""

from __future__ import annotations

import threading

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
