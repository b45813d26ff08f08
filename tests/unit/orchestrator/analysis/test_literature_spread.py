"""The spread rule (orchestrator/analysis/literature_spread.py, literature.py): a fractional
score is reproduced within the spread of repeated runs, near inside the setting's interval, and
has no obtainability; checked against the formula by hand."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from orchestrator.analysis.answers import Verdict, answer
from orchestrator.analysis.literature import (
    JoinRule,
    MatchStatus,
    SettingScore,
    join_literature,
    spread_reproduction,
)
from orchestrator.analysis.literature_records import match_record, obtainability_counts
from orchestrator.analysis.literature_spread import (
    ReportedSpread,
    reported_spread,
    spread_note,
    tolerance_pp,
    z_value,
)
from storage.literature import LiteratureRow
from workers.card import MatchRule

SPREAD = JoinRule(234, ("v2.1",), MatchRule.SPREAD, group_size=10, benchmark="infibench")


def board(model: str, score: str, std: str, n: int = 30, tuning: str = "instruct") -> LiteratureRow:
    return LiteratureRow(
        2, model, "fam", "6.7", tuning, score, "arXiv:2404.07940", "t", "row", "", "leaderboard",
        n_samples=n, spread_text=std,
    )  # fmt: skip


def measured(
    model: str,
    pct: float,
    std: float | None = 1.0,
    groups: int = 3,
    ci: tuple[float, float] | None = None,
    label: str = "s",
    tuning: str = "instruct",
    n: int = 234,
) -> SettingScore:
    low, high = ci if ci is not None else (pct - 5, pct + 5)
    return SettingScore(
        key=f"{model}-{label}",
        model_name=model,
        model_family="fam",
        model_size_b=6.7,
        tuning=tuning,
        label=label,
        score=Fraction(pct) / 100,
        n_problems=n,
        n_problems_total=234,
        variant="v2.1",
        std_pct=std,
        n_groups=groups,
        ci_low_pct=low,
        ci_high_pct=high,
    )


def test_the_reported_spread_counts_groups_of_k_samples():
    assert reported_spread(board("m", "53.25", "0.4"), 10) == ReportedSpread(0.4, 3, 10)
    one = reported_spread(board("m", "62.96", "0.0", n=10), 10)
    assert one.n_groups == 1 and not one.measured  # std 0 of one group: nothing measured
    assert one.describe() == "one group of 10 samples (no spread measured)"
    assert reported_spread(board("m", "70.93", "1.06", n=100), 10).n_groups == 10


def test_the_tolerance_is_z_times_the_standard_error_of_the_difference():
    z = z_value(0.95)
    assert z == pytest.approx(1.959964, abs=1e-6)
    both = tolerance_pp(ReportedSpread(0.4, 3, 10), ReportedSpread(1.1, 3, 10), 0.95)
    assert both == pytest.approx(z * math.sqrt(0.4**2 / 3 + 1.1**2 / 3))
    # one side measured no spread: it takes the other side's std over its own groups
    borrowed = tolerance_pp(ReportedSpread(0.0, 1, 10), ReportedSpread(1.1, 3, 10), 0.95)
    assert borrowed == pytest.approx(z * math.sqrt(1.1**2 / 1 + 1.1**2 / 3))
    assert tolerance_pp(ReportedSpread(0.0, 1, 10), ReportedSpread(0.0, 1, 10), 0.95) is None
    with pytest.raises(ValueError):
        z_value(1.0)


@pytest.mark.parametrize(
    ("pct", "ci", "status"),
    [
        (53.0, None, MatchStatus.REPRODUCED),  # gap 0.25 <= 1.96 x sqrt(0.4^2/3 + 1^2/3) = 1.22
        (51.5, (46.0, 56.0), MatchStatus.NEAR),  # gap 1.75: outside the spread, inside the CI
        (40.0, (35.0, 45.0), MatchStatus.NOT_REPRODUCED),
    ],
)
def test_reproduced_near_and_not_reproduced(pct, ci, status):
    result = spread_reproduction(board("M", "53.25", "0.4"), [measured("m", pct, ci=ci)], 10, 0.95)
    assert result.status is status
    assert result.closest_gap_pp == pytest.approx(pct - 53.25)
    if status is MatchStatus.REPRODUCED:
        assert result.reproduced_by[0][1] == "spread"


def test_without_any_spread_a_value_can_only_be_near():
    row = board("M", "62.96", "0.0", n=10)
    same = measured("m", 62.96, std=0.0, groups=1)
    result = spread_reproduction(row, [same], 10, 0.95)
    assert result.status is MatchStatus.NEAR  # even an equal score: no spread to judge by
    assert "no spread known" in spread_note(reported_spread(row, 10), same.spread(10), 0.95)


def test_pilots_are_listed_never_compared():
    pilot = measured("m", 53.25, n=20)
    result = spread_reproduction(board("M", "53.25", "0.4"), [pilot], 10, 0.95)
    assert result.status is MatchStatus.PILOT_ONLY and result.pilots == (pilot,)


def test_the_join_under_the_spread_rule_has_no_obtainability_and_keeps_confusions():
    rows = [board("Base", "30.00", "0.5", tuning="base")]
    settings = [
        measured("b", 20.0, tuning="base", label="own"),
        measured("i", 30.1, tuning="instruct", label="own"),
    ]
    [match] = join_literature(rows, {"Base": "b"}, settings, SPREAD)
    assert match.obtainability is None and match.benchmark == "infibench"
    assert match.spread == ReportedSpread(0.5, 3, 10)
    assert match.status is MatchStatus.NOT_REPRODUCED and match.tuning_confusion
    got = answer(match)
    assert got.verdict is Verdict.TUNING_CONFUSION and got.setting.model_name == "i"
    record = match_record(match)
    assert record["obtainability"] is None and record["obtainable_as"] is None
    assert record["reported_spread"] == "std 0.50 over 3 groups of 10 samples"
    assert record["reproduced_by"] == ""
    assert obtainability_counts([match])["values"] == 0  # nothing counted as k/n
