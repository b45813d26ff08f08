"""The figures say what they show: on a store with known effects (tests/fixtures_store.py's
paper grid: every axis value shifts the problems solved by a known offset), the effects figure
draws exactly those means and one vote per model, and every reported value of the literature
figure carries a label with its value and source."""

from __future__ import annotations

import statistics

import pytest

from orchestrator.cli.report import card_from_registry
from orchestrator.report.formats.plots import (
    effects_figure,
    effects_layout,
    literature_figure,
    literature_labels,
)
from orchestrator.report.tables.build import build_report
from orchestrator.report.tables.data import ModelLiterature, ReportedValue, ReportOptions
from tests.fixtures_store import (
    BASE,
    GRID_OFFSETS,
    INST,
    PRECISION_OFFSETS,
    write_grid_store,
)

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def grid_report(tmp_path_factory):
    root = tmp_path_factory.mktemp("figures")
    write_grid_store(str(root / "store"))
    return build_report(
        str(root / "store"), ReportOptions(card_of=card_from_registry, n_resamples=20)
    )


def expected_change(axis: str, value) -> float:
    offsets = PRECISION_OFFSETS["greedy"] if axis == "precision" else GRID_OFFSETS[axis]
    return offsets[value] * 100 / 164  # every model gains or loses the same problems


def test_the_effects_figure_draws_the_known_effects(grid_report):
    panels = {p.axis: p for p in effects_layout(grid_report.effect_pairs)}
    assert list(panels) == ["template", "decoding", "max_length", "precision"]
    assert [b.value for b in panels["precision"].bars] == ["fp16", "fp32", "int8", "int4"]
    for axis, panel in panels.items():
        for bar in panel.bars:
            value = int(bar.value) if axis == "max_length" else bar.value
            change = expected_change(axis, value)
            assert bar.mean_all_pp == pytest.approx(change)
            assert bar.mean_instruct_pp == pytest.approx(change)
            assert bar.n_models == 2
            assert sorted(bar.votes) == [
                (BASE, pytest.approx(change)),
                (INST, pytest.approx(change)),
            ]
    assert effects_figure(grid_report.effect_pairs)[:8] == PNG


def test_the_tables_hold_the_known_spread_and_its_increase_over_greedy(grid_report):
    spread = grid_report.table("precision_spread").set_index(["decoding", "group"])
    stds = {d: statistics.pstdev(o.values()) * 100 / 164 for d, o in PRECISION_OFFSETS.items()}
    for (decoding, group), row in spread.iterrows():
        assert row["mean_std_pp"] == pytest.approx(stds[decoding])
        assert row["n_models"] == (2 if group == "all" else 1)
        assert row["n_groups"] == (8 if group == "all" else 4)  # 2 templates x 2 lengths each
        increase = (stds[decoding] - stds["greedy"]) / stds["greedy"] * 100
        if decoding == "greedy":
            assert row["increase_vs_greedy_pct"] != row["increase_vs_greedy_pct"]  # NaN: none
        else:
            assert row["increase_vs_greedy_pct"] == pytest.approx(increase)


def test_every_reported_value_is_labelled_with_value_and_source():
    models = [
        ModelLiterature(
            "m",
            (10.0, 12.0, 30.0),
            (
                ReportedValue("16.4", "arXiv:2308.07124", "tuning confusion"),
                ReportedValue("16.5", "arXiv:2405.04324", "reproduced"),  # overlaps the first
                ReportedValue("44.9", "doi:10.3390/x", "not reproduced"),
            ),
        ),
        ModelLiterature("n", (1.0,), (ReportedValue("1.2", "src", "variant confusion"),)),
    ]
    labels = literature_labels(models)
    assert {(lb.model_name, lb.text) for lb in labels} == {
        ("m", "16.4 arXiv:2308.07124"),
        ("m", "16.5 arXiv:2405.04324"),
        ("m", "44.9 doi:10.3390/x"),
        ("n", "1.2 src"),
    }
    levels = {lb.text: lb.level for lb in labels}
    assert levels["16.4 arXiv:2308.07124"] != levels["16.5 arXiv:2405.04324"]  # stacked
    assert levels["44.9 doi:10.3390/x"] == 0  # far away: no need to stack
    assert literature_figure(models)[:8] == PNG
    assert literature_figure([ModelLiterature("m", (1.0,), ())]) is None
