"""What a reader sees without a browser: headers of empty CSVs, empty sections that say why,
12-character keys, folded long texts, pivot hovers, one vote per model said in the notes, and an
output folder outside the store."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pandas as pd
import pytest

from orchestrator.cli import main
from orchestrator.cli.report import _default_out, card_from_registry
from orchestrator.report.tables.build import build_report
from orchestrator.report.tables.data import ReportOptions
from storage.store import Store
from tests.fixtures_store import INST, Spec, write_setting, write_synthetic_store


def test_every_csv_has_its_header_even_when_empty(tmp_path):
    store = Store(str(tmp_path / "store"))
    write_setting(store, Spec("tiny", "own", "greedy", 2048, "fp32", 7))
    out = tmp_path / "out"
    assert main(["report", "--store", store.uri, "--out", str(out), "--resamples", "10"]) == 0
    data = build_report(store.uri, ReportOptions(card_of=card_from_registry, n_resamples=10))
    empty = [t.name for t in data.tables if t.frame.empty]
    assert {"answers", "literature", "effects", "skipped_failed", "provenance_runs"} <= set(empty)
    for table in data.tables:
        with (out / f"{table.name}.csv").open(newline="") as f:
            header = next(csv.reader(f))
        assert header == [c for c in table.frame.columns if c != "exact"], table.name
        assert header, table.name
    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    for table in data.tables:
        if table.frame.empty:
            assert table.empty_reason, f"{table.name} is empty and does not say why"
            assert table.empty_reason in md
    assert "No literature row names a model of this store (tiny)" in html
    assert "(none)" not in md and "(none)" not in html


def test_the_default_output_folder_is_outside_the_store(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _default_out("results") == "results-report"
    assert _default_out("data/results/") == "data/results-report"
    assert _default_out(".") == str(tmp_path.parent / f"{tmp_path.name}-report")
    assert _default_out("s3://bucket/store") == "report"


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    root = tmp_path_factory.mktemp("layout")
    write_synthetic_store(str(root / "store"))
    out = root / "out"
    assert (
        main(["report", "--store", str(root / "store"), "--out", str(out), "--resamples", "50"])
        == 0
    )
    return out


def test_keys_and_hashes_show_12_characters_in_md_and_html(synthetic):
    for name in ("report.md", "report.html"):
        text = (synthetic / name).read_text().replace("<wbr>", "")
        text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", text)  # the figures
        text = re.sub(r'href="problems/index.html#setting=[0-9a-f]{64}"', "", text)  # links
        assert not re.search(r"[0-9a-f]{13,}", text), name
    pairs = pd.read_csv(synthetic / "effect_pairs.csv")
    assert pairs["setting_keys"].str.len().min() == 64  # CSV keeps them whole


def test_long_texts_move_to_detail_rows_and_pivot_cells_hover(synthetic):
    html = (synthetic / "report.html").read_text()
    provenance = html[html.index('<h2 id="provenance_settings">') :]
    header = provenance[provenance.index("<thead>") : provenance.index("</thead>")]
    assert "library_" not in header  # not a column ...
    assert '<tr class="detail"><td colspan=' in provenance and "torch 2.13.0" in provenance
    pivot = html[html.index('<h2 id="scores_pivot">') : html.index('<h2 id="literature">')]
    tips = re.findall(r'<td class="num" title="([^"]+)">([^<]+)</td>', pivot)
    assert len(tips) == 12  # one per complete setting, each cell a setting
    for tip, shown in tips:
        assert re.fullmatch(
            r"\d+\.\d\d \[\d+\.\d\d, \d+\.\d\d\], n_samples \d+, 164 problems, "
            r"setting [0-9a-f]{12}",
            tip,
        ), tip
        assert tip.startswith(shown)


def test_settings_of_one_cell_count_once_and_the_report_says_so(tmp_path):
    store = Store(str(tmp_path / "store"))
    write_setting(store, Spec(INST, "own", "greedy", 2048, "bf16", 20))
    write_setting(store, Spec(INST, "own", "greedy", 2048, "bf16", 30), tag="second import")
    write_setting(store, Spec(INST, "own", "greedy", 2048, "int4", 15))
    data = build_report(store.uri, ReportOptions(card_of=card_from_registry, n_resamples=10))
    [effect] = data.table("effects").query("group == 'all'").to_dict("records")
    assert (effect["n_models"], effect["n_pairs"]) == (1, 1)
    assert effect["mean_change_pp"] == pytest.approx((15 - 25) * 100 / 164)
    assert any("1 cell(s) hold several settings of one model" in n for n in data.notes)
    pivot = data.table("scores_pivot")
    assert pivot.loc[0, "bf16"] == pytest.approx(25 * 100 / 164)
    hover = next(t for t in data.tables if t.name == "scores_pivot").hover
    assert hover.loc[0, "bf16"].startswith("mean of 2 settings: ")


def test_docs_name_every_table_and_column_and_the_readme_the_answers(tmp_path):
    """docs/report.md documents what the report writes (no drift); the README describes the
    answers table's columns."""
    root = Path(__file__).resolve().parents[5]
    doc = (root / "docs" / "report.md").read_text(encoding="utf-8")
    readme = (root / "README.md").read_text(encoding="utf-8")
    write_synthetic_store(str(tmp_path / "store"))
    data = build_report(
        str(tmp_path / "store"), ReportOptions(card_of=card_from_registry, n_resamples=10)
    )
    missing = [
        f"{t.name}.{c}"
        for t in data.tables
        for c in [t.name, *t.frame.columns]
        if c != "exact" and f"`{c}`" not in doc
    ]
    assert not missing, f"not in docs/report.md: {missing}"
    shown = (
        "literature_model",
        "reported",
        "source_id",
        "location",
        "verdict",
        "template",
        "decoding",
        "max_length",
        "precision",
        "backend",
        "score_pct",
        "gap_pp",
    )
    assert all(f"`{c}`" in readme for c in shown)


def test_a_model_run_only_on_the_docs_variant_gets_no_answer_and_is_told_so(tmp_path):
    store = Store(str(tmp_path / "store"))
    write_setting(store, Spec(INST, "own", "greedy", 2048, "bf16", 27, variant="docs"))
    data = build_report(store.uri, ReportOptions(card_of=card_from_registry, n_resamples=10))
    assert data.table("answers").empty
    answers = next(t for t in data.tables if t.name == "answers")
    assert answers.empty_reason.startswith("The literature reports the tests variant; the store")
    unmatched = data.table("literature_unmatched")
    mine = unmatched[unmatched["model_name"] == INST]
    assert set(mine["status"]) == {"only another variant in store"}
    assert any(n.startswith(f"literature rows for model {INST} report another") for n in data.notes)
