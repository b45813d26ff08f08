"""`reprogrid report` with the problems view (orchestrator/cli/report.py): a bad option is refused
before anything is read but the settings, and nothing is written; the view it writes is the one
`reprogrid view` writes, and a second report reuses it; its setting keys link to the view."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.analysis.baseline import BaselineError, parse_baseline
from orchestrator.cli import main
from orchestrator.report.tables import build
from orchestrator.report.tables.data import ReportOptions
from orchestrator.report.view import folder, plan
from storage.store import Store
from tests.fixtures_store import write_grid_store


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    """The paper grid of two models (read only: every test writes elsewhere)."""
    root = tmp_path_factory.mktemp("grid") / "store"
    write_grid_store(str(root))
    return str(root)


def _data_files(root) -> dict[str, tuple[bytes, int]]:
    """The view's data files but its index: (bytes, mtime_ns)."""
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted((root / "data").rglob("*"))
        if p.is_file() and p.name != "index.js"
    }


@pytest.mark.parametrize(
    "bad",
    ["template=instrct", "decoding=t0.9", "max_length=1024", "backend=vllm"],
)
def test_a_baseline_value_no_setting_has_is_refused_before_the_grid_is_read(
    env, store, tmp_path, capsys, monkeypatch, bad
):
    """The early check (report/tables/early.py) refuses it with check_report's own message,
    before check_report reads the grid and before the view is planned: nothing is written."""
    with pytest.raises(BaselineError) as refused:  # the message check_report itself gives
        build.check_report(store, ReportOptions(baseline=parse_baseline([bad])))

    def never(*args, **kwargs):
        raise AssertionError("read before the options were checked")

    monkeypatch.setattr(build, "check_report", never)
    monkeypatch.setattr(plan, "plan_view", never)
    out = tmp_path / "report"
    code = main(["report", "--store", store, "--out", str(out), "--baseline", bad])
    assert code == 2
    assert str(refused.value) in capsys.readouterr().err
    assert not out.exists()


def test_a_baseline_value_of_a_setting_passes_the_early_check(store):
    from orchestrator.report.tables.early import check_baseline_early

    check_baseline_early(Store(store), {"template": "instruct", "max_length": 512}, None)
    with pytest.raises(BaselineError, match="Did you mean: instruct"):
        check_baseline_early(Store(store), {"template": "instrct"}, None)


def test_a_report_writes_the_view_that_view_writes_and_a_second_reuses_it(
    env, store, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "report"
    args = ["report", "--store", store, "--out", str(out), "--format", "md,html"]
    assert main([*args, "--resamples", "50"]) == 0
    assert main(["view", "--store", store, "--out", str(tmp_path / "alone")]) == 0
    written = _data_files(out / "problems")
    alone = {k: v[0] for k, v in _data_files(tmp_path / "alone").items()}
    assert len(written) > 4 and {k: v[0] for k, v in written.items()} == alone
    html = (out / "report.html").read_text(encoding="utf-8")
    assert html.count("problems/index.html#setting=") >= 120  # each setting's key links
    index = (out / "problems/data/index.js").read_text(encoding="utf-8")
    assert '"n_resamples":50' in index  # the page resamples as the report was told to

    built: list[tuple[str, ...]] = []
    real = folder.build_models

    def recording(*a, **k):
        done = real(*a, **k)
        built.append(tuple(g.label for g in done))
        return done

    monkeypatch.setattr(folder, "build_models", recording)
    assert main(args) == 0
    assert built == [()]  # every model's folder reused
    assert _data_files(out / "problems") == written  # untouched


REFUSED = """
import sys
from orchestrator.cli import main
code = main(["report", "--store", sys.argv[1], "--out", sys.argv[2], *sys.argv[3:]])
print(code, sorted(m for m in sys.modules if m.split(".")[0] == "pandas")[:1])
"""


def test_a_bad_baseline_is_refused_before_pandas_is_imported(env, store, tmp_path):
    """What the refusal needs is the settings table and the scores' listing: pandas (0.3 s and
    more of a process's start) is imported only for the report itself."""
    repo = Path(__file__).resolve().parents[4]
    args = [str(tmp_path / "report"), "--baseline", "template=instrct"]
    done = subprocess.run(
        [sys.executable, "-c", REFUSED, store, *args],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    assert done.stdout.split("\n")[-2] == "2 []", done.stderr[-2000:]


def blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_a_report_computes_with_one_blas_thread_and_restores_it(
    env, store, tmp_path, capsys, monkeypatch
):
    """The report's paired tests are matrix products: numpy's BLAS runs them in one thread, so
    that its idle threads do not spin on cores other work needs; the process's setting comes
    back after."""
    seen: list[list[int]] = []
    real = build.finish_report

    def recording(*args, **kwargs):
        seen.append(blas_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(build, "finish_report", recording)
    before = blas_threads()
    out = tmp_path / "report"
    assert main(["report", "--store", store, "--out", str(out), "--format", "md"]) == 0
    assert seen == [[1] * len(before)] and before
    assert blas_threads() == before
