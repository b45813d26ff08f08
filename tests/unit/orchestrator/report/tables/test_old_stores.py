"""A store written before the scores carried their counts and the settings their card
(tests/fixtures/store_v1, schema 1) still reports: the counts derived once from its executions,
the card taken from today's definition, both said in the notes; the numbers equal those the
store recorded, before and after its shards are upgraded to today's columns."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from orchestrator.cli import main
from storage.store import Store
from storage.upgrade import upgrade_shards

FIXTURES = Path(__file__).resolve().parents[4] / "fixtures"


@pytest.fixture
def old_store(tmp_path) -> Path:
    store = tmp_path / "store"
    shutil.copytree(FIXTURES / "store_v1", store)
    return store


def report(store: Path, out: Path) -> pd.DataFrame:
    assert main(["report", "--store", str(store), "--out", str(out), "--resamples", "20"]) == 0
    return pd.read_csv(out / "grid.csv")


def test_an_old_store_reports_with_derived_counts_and_todays_card(old_store, tmp_path, capsys):
    stored = pd.read_parquet(old_store / "scores").set_index("setting_key")
    assert "pass_at_1_numerator" not in stored.columns  # written before schema 5
    grid = report(old_store, tmp_path / "before").set_index("setting_key")
    printed = capsys.readouterr().out
    assert "predate stored score counts: their counts are derived from their executions" in printed
    assert "predate stored benchmark cards: its card is taken from today's" in printed
    assert set(grid.counts_from) == {"executions"}
    for key, row in grid.iterrows():
        assert row.score_pct == pytest.approx(100 * stored.loc[key, "pass_at_1"])
        assert row.ci_low_pct <= row.score_pct <= row.ci_high_pct
    handle = Store(str(old_store))
    with handle.writer_lock():
        assert upgrade_shards(handle) > 0  # the new columns exist now, null in these rows
    again = report(old_store, tmp_path / "after").set_index("setting_key")
    assert set(again.counts_from) == {"executions"}
    assert again.score_pct.to_dict() == grid.score_pct.to_dict()
