"""`reprogrid report` on the synthetic store: every format, and the numbers in the tables equal
those computed here directly from the Parquet rows with pandas."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from orchestrator.cli import main
from orchestrator.cli.report import card_from_registry
from storage.literature import COLUMNS
from tests.fixtures_store import BASE, INST, write_canonical_store, write_synthetic_store

RESAMPLES = 1000
FORMATS = "md,csv,tex,html,json"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    store = root / "store"
    specs = write_synthetic_store(str(store))
    rc = main(["report", "--store", str(store), "--format", FORMATS, "--resamples", str(RESAMPLES)])
    assert rc == 0
    assert not (store / "report").exists()  # the default output folder is next to the store
    return store, root / "store-report", specs


@pytest.fixture(scope="module")
def direct(report):
    """pass@1 and counts per setting computed straight from the Parquet tables."""
    store = report[0]
    ex = pd.read_parquet(store / "executions")
    gen = pd.read_parquet(store / "generations")
    per_problem = ex.groupby(["setting_key", "task_id"])["passed"].mean()
    frame = pd.DataFrame(
        {
            "pass1": per_problem.groupby("setting_key").mean() * 100,
            "n_passed": ex.groupby("setting_key")["passed"].sum(),
            "truncated": gen.groupby("setting_key")["prompt_truncated"].sum(),
            "hit": gen.groupby("setting_key")["hit_length_limit"].sum(),
        }
    )
    settings = pd.read_parquet(store / "settings").set_index("setting_key")
    return frame.join(settings[["model_name", "template", "decoding", "max_length", "precision"]])


def test_every_format_is_written(report):
    out = report[1]
    for name in (
        "report.md",
        "report.tex",
        "tex/answers.tex",
        "tex/scores.tex",
        "tex/effects.tex",
        "tex/grid.tex",
        "report.html",
        "report.json",
        "answers.csv",
        "scores_pivot.csv",
        "grid.csv",
        "literature.csv",
        "effects.csv",
        "skipped_failed.csv",
        "provenance_settings.csv",
        "provenance_runs.csv",
        "unobtainable.csv",
        "literature_unmatched.csv",
        "precision_spread.csv",
        "literature.png",
        "effects.png",
    ):
        assert (out / name).is_file(), name
        assert (out / name).stat().st_size > 0
    assert (out / "literature.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_grid_csv_and_json_equal_the_parquet_rows(report, direct):
    out = report[1]
    grid = pd.read_csv(out / "grid.csv").set_index("setting_key")
    complete = direct.index
    assert sorted(grid.index) == sorted(complete)
    expected = direct.loc[grid.index, "pass1"]
    assert np.allclose(grid["score_pct"], expected, rtol=0, atol=1e-12)
    assert (grid["n_passed"] == direct.loc[grid.index, "n_passed"]).all()
    assert (grid["n_prompt_truncated"] == direct.loc[grid.index, "truncated"]).all()
    assert (grid["n_hit_length_limit"] == direct.loc[grid.index, "hit"]).all()
    assert (grid["ci_low_pct"] <= grid["score_pct"]).all()
    assert (grid["score_pct"] <= grid["ci_high_pct"]).all()
    rows = json.loads((out / "report.json").read_text())["tables"]["grid"]["rows"]
    for r in rows:
        assert r["score_pct"] == pytest.approx(direct.loc[r["setting_key"], "pass1"], abs=1e-12)


def test_the_interval_is_the_documented_bootstrap(report):
    store, out, _ = report
    grid = pd.read_csv(out / "grid.csv")
    row = grid[(grid.model_name == INST) & (grid.decoding == "t0.8")].iloc[0]
    ex = pd.read_parquet(store / "executions")
    mine = ex[ex.setting_key == row.setting_key]
    values = np.sort(mine.groupby("task_id")["passed"].mean().to_numpy())  # ascending
    rng = np.random.default_rng(0)
    means = values[rng.integers(0, values.size, size=(RESAMPLES, values.size))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975]) * 100
    assert (row.ci_low_pct, row.ci_high_pct) == pytest.approx((low, high), abs=1e-9)


def _md_rows(text: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("| ") and not line.startswith("| model_")
    ]


def test_markdown_tex_and_html_show_the_same_numbers(report, direct):
    out = report[1]
    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    document = (out / "report.tex").read_text()
    # the standalone document inputs the snippets; the grid's (every setting) is a longtable
    tex = document + "".join(p.read_text() for p in sorted((out / "tex").glob("*.tex")))
    for key, r in direct.iterrows():
        shown = f"{r.pass1:.2f}"
        assert any(key[:12] in row and shown in row for row in _md_rows(md)), key
        tr = re.search(rf"<tr[^>]*>(?:(?!</tr>).)*{key[:12]}(?:(?!</tr>).)*</tr>", html)
        assert tr and re.search(rf">{re.escape(shown)}( \[|<)", tr.group(0)), key
        assert any(key[:12] in line and shown in line for line in tex.splitlines()), key
    assert "\\documentclass" in document and "\\input{tex/grid}" in document
    assert "\\begin{longtable}" in (out / "tex" / "grid.tex").read_text()


def test_html_is_self_contained(report):
    html = (report[1] / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 2
    assert "<style>" in html
    # The only links out of the page are setting keys to their column in the problems view,
    # a folder written beside it.
    outside = re.findall(r"""(?:src|href)=["'](?!data:|#)([^"']*)""", html)
    assert outside and all(u.startswith("problems/index.html#setting=") for u in outside)
    assert (report[1] / "problems" / "index.html").is_file()


def test_literature_comparison(report):
    lit = pd.read_csv(report[1] / "literature.csv", dtype={"reported": str})
    by = {(r.literature_model, r.reported): r for r in lit.itertuples()}
    low = by[("DeepSeekCoder 1.3B", "1.2")]
    assert low.status == "reproduced" and low.n_reproducing == 2
    assert "own(deepseek) greedy 2048 bf16 hf [round]" in low.reproduced_by
    assert "own(deepseek) greedy 2048 int4 hf [round]" in low.reproduced_by
    confused = by[("DeepSeekCoder 1.3B", "16.4")]
    assert confused.status == "not reproduced" and bool(confused.tuning_confusion)
    assert confused.counterpart_model == INST
    assert confused.counterpart_reproduced_by == f"{INST}: own(deepseek) greedy 2048 bf16 hf"
    assert (
        by[("DeepSeekCoder-Instruct 1.3B", "9.1")].reproduced_by
        == "instruct greedy 2048 bf16 hf [round]"
    )
    high = by[("DeepSeekCoder-Instruct 1.3B", "48.9")]
    assert not bool(high.obtainable) and high.status == "not reproduced"
    assert high.closest_gap_pp == pytest.approx(2700 / 164 - 48.9)
    assert set(lit.model_name) == {BASE, INST}


def test_no_literature_row_is_dropped(report):
    out = report[1]
    lit = pd.read_csv(out / "literature.csv")
    unmatched = pd.read_csv(out / "literature_unmatched.csv")
    assert len(lit) + len(unmatched) == 95
    assert set(unmatched.status) == {"unmapped", "not in store"}
    unobtainable = pd.read_csv(out / "unobtainable.csv", dtype={"reported": str})
    assert ("DeepSeekCoder-Instruct 6.7B", "44.9") in set(
        zip(unobtainable.literature_model, unobtainable.reported, strict=True)
    )
    assert "no k/164: 73/164 = 44.51, 74/164 = 45.12" in set(unobtainable.nearest)


def test_effects_equal_a_direct_computation(report, direct):
    effects = pd.read_csv(report[1] / "effects.csv").set_index(["axis", "value", "group"])
    d = direct.reset_index()

    def score(model, own=True, **axes):
        sel = d[(d.model_name == model) & ((d.template == "deepseek") == own)]
        for k, v in {"decoding": "greedy", "max_length": 2048, "precision": "bf16", **axes}.items():
            sel = sel[sel[k] == v]
        [value] = sel.pass1.tolist()
        return value

    changes = {m: score(m, own=False) - score(m) for m in (BASE, INST)}
    row = effects.loc[("template", "instruct", "all")]
    assert row.mean_change_pp == pytest.approx(np.mean(list(changes.values())))
    rel = np.mean([changes[m] / score(m) * 100 for m in (BASE, INST)])
    assert row.mean_relative_change_pct == pytest.approx(rel)
    assert effects.loc[("template", "instruct", "instruct")].mean_change_pp == pytest.approx(
        changes[INST]
    )
    int4 = [score(m, precision="int4") - score(m) for m in (BASE, INST)]
    assert effects.loc[("precision", "int4", "all")].mean_abs_change_pp == pytest.approx(
        np.mean(np.abs(int4))
    )
    spread = pd.read_csv(report[1] / "precision_spread_by_model.csv").set_index("model_name")
    expected = np.std([score(INST, precision=p) for p in ("bf16", "fp16", "int4")])
    assert spread.loc[INST, "std_pp"] == pytest.approx(expected)


def test_skipped_failed_and_provenance(report):
    out = report[1]
    skipped = pd.read_csv(out / "skipped_failed.csv")
    assert sorted(skipped.status) == ["failed", "skipped"]
    assert (
        skipped.set_index("status").loc["failed", "status_reason"].startswith("CUDA out of memory")
    )
    prov = pd.read_csv(out / "provenance_settings.csv")
    assert set(prov.model_revision) == {"rev-base-0001", "rev-inst-0001"}
    assert prov.n_settings.sum() == 12
    assert "torch 2.13.0" in prov.library_versions.iloc[0]
    runs = pd.read_csv(out / "provenance_runs.csv")
    assert runs.run_id.tolist() == ["20250102T030405-fixture"]


def test_baseline_option_changes_the_effects(report, tmp_path):
    store = report[0]
    rc = main(
        [
            "report",
            "--store",
            str(store),
            "--out",
            str(tmp_path),
            "--format",
            "csv",
            "--resamples",
            "10",
            "--baseline",
            "template=instruct",
        ]
    )
    assert rc == 0
    effects = pd.read_csv(tmp_path / "effects.csv")
    assert set(effects[effects.axis == "template"].baseline_value) == {"instruct"}
    assert set(effects[effects.axis == "template"].value) == {"own"}


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--format", "pdf"], "Unknown report format(s) pdf"),
        (["--baseline", "colour=red"], "Unknown baseline axis"),
        (["--baseline", "templte=own"], "Unknown baseline axis 'templte'. Did you mean: template?"),
        (["--baseline", "precision=int3"], "Unknown baseline precision 'int3'. Did you mean"),
        (
            ["--baseline", "template=instrct"],
            "No setting of the store has baseline template "
            "'instrct'. Did you mean: instruct? Values in the store: instruct, own",
        ),
        (["--literature", "MISSING.csv"], "file not found"),
    ],
)
def test_bad_options_exit_2_with_the_reason(report, tmp_path, capsys, args, fragment):
    """Every format, html too: the view's workers start before the options are checked and
    write nothing, so a bad option leaves no output folder."""
    out = tmp_path / "out"
    rc = main(["report", "--store", str(report[0]), "--out", str(out), *args])
    assert rc == 2
    assert fragment in capsys.readouterr().err
    assert not out.exists()


def test_a_missing_store_exits_2(tmp_path, capsys):
    rc = main(["report", "--store", "no/such/store", "--out", str(tmp_path)])
    assert rc == 2
    assert "store no/such/store does not exist" in capsys.readouterr().err


def test_a_bad_literature_csv_names_line_and_column(report, tmp_path, capsys):
    text = Path(report[0]).parent.joinpath("bad.csv")
    header = ",".join(COLUMNS)
    text.write_text(f"{header}\nA,F,1,base,1.2,s,t,l,n,v\nB,F,1,chat,1.2,s,t,l,n,v\n")
    rc = main(
        ["report", "--store", str(report[0]), "--out", str(tmp_path), "--literature", str(text)]
    )
    assert rc == 2
    assert f"{text}:3: column 'tuning' value 'chat'" in capsys.readouterr().err


def test_a_store_of_tiny_models_says_there_are_no_literature_rows(tmp_path, problem_set, capsys):
    store = tmp_path / "store"
    write_canonical_store(str(store), problem_set)
    rc = main(["report", "--store", str(store), "--resamples", "10"])
    assert rc == 0
    assert "no literature rows for model tiny" in capsys.readouterr().out
    out = tmp_path / "store-report"
    assert "no literature rows for model tiny" in (out / "report.md").read_text()
    assert (out / "report.html").is_file() and not (out / "literature.png").exists()
    assert pd.read_csv(out / "grid.csv").score_pct.tolist() == [80.0]


def test_an_empty_store_gives_an_empty_report(tmp_path):
    from orchestrator.report.tables.build import build_report
    from orchestrator.report.tables.data import ReportOptions

    data = build_report(
        str(tmp_path / "nothing"), ReportOptions(card_of=card_from_registry, n_resamples=10)
    )
    assert data.table("grid").empty and data.table("literature").empty
    assert "the store holds no complete settings with a score" in data.notes
