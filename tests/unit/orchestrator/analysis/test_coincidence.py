"""The coincidence rate against a brute-force count: every value printed with the published
value's decimals within 5 points of it, kept when some k/N gives it (the literature's own
obtainability), tried one by one against every setting with the literature's matching rule; on
the paper-grid fixture, on planted score lists where one outlier setting must not change the
verdict, and in the report's answers table."""

from __future__ import annotations

from fractions import Fraction

import pandas as pd
import pytest

from orchestrator.analysis.coincidence import (
    STRONG_AT,
    WEAK_AT,
    WINDOW_PP,
    Coincidence,
    coincidence,
    count_units,
    interval_contains,
    matched_units,
)
from orchestrator.analysis.obtainability import match_rule, obtainability
from orchestrator.cli import main
from storage.store import Store
from tests.fixtures_store import BASE, INST, Spec, grid_passes, write_grid_store, write_setting


def printed(units: int, decimals: int) -> str:
    scale = 10**decimals
    return f"{units // scale}.{units % scale:0{decimals}d}" if decimals else str(units)


def brute_force(value_text: str, scores: list[Fraction], denominator: int) -> tuple[int, int]:
    """(candidate values, matched ones): every value printed with the value's decimals in
    0-100 and at most 5 points from it that some k/denominator gives, matched with `match_rule`."""
    d = len(value_text.partition(".")[2])
    value = Fraction(value_text)
    texts = [printed(u, d) for u in range(100 * 10**d + 1)]
    near = [t for t in texts if abs(Fraction(t) - value) <= 5]
    candidates = [t for t in near if obtainability(t, denominator).obtainable]
    matched = [c for c in candidates if any(match_rule(s, c) for s in scores)]
    return len(candidates), len(matched)


def grid_scores(model: str) -> list[Fraction]:
    out = []
    for template in ("own", "instruct"):
        for decoding, precisions in (
            ("greedy", "bf16 fp16 fp32 int8 int4"),
            ("t0.2", "bf16 fp16 fp32 int8 int4"),
            ("t0.8", "bf16 fp16 fp32 int8 int4"),
        ):
            for length in (2048, 512):
                for precision in precisions.split():
                    out.append(
                        Fraction(grid_passes(model, template, decoding, length, precision), 164)
                    )
    return out


def of(*counts: int) -> list[Fraction]:
    return [Fraction(k, 164) for k in counts]


@pytest.mark.parametrize("model", [BASE, INST])
@pytest.mark.parametrize("value", ["16", "16.4", "16.46", "30.5", "1.2", "98.8"])
@pytest.mark.parametrize("denominator", [164, 164 * 20])
def test_coincidence_equals_the_brute_force_count_on_the_paper_grid(model, value, denominator):
    """Whole, one- and two-decimal values, windows cut at 0 and 100, one sample or 20."""
    scores = grid_scores(model)
    assert len(scores) == 60
    rate = coincidence(value, scores, denominator)
    assert (rate.n_values, rate.n_matched) == brute_force(value, scores, denominator)
    assert rate.n_settings == 60 and rate.denominator == denominator
    assert rate.decimals == len(value.partition(".")[2])


@pytest.mark.parametrize("denominator", [1, 7, 164, 234, 164 * 20])
@pytest.mark.parametrize("decimals", [0, 1, 2, 3])
def test_count_units_are_the_matched_units_of_every_count(denominator, decimals):
    for k in range(denominator + 1):
        assert count_units(k, denominator, decimals) == matched_units(
            Fraction(k, denominator), decimals
        ), (k, denominator, decimals)


# Planted pools for 14.6 (24/164 = 14.634): the window 9.6-19.6 holds k = 16..32, 9.756 ..
# 12.195 (two values each), 12.805 .. 15.244 (one each), 15.854 .. 18.293 (two each), 18.902,
# 19.512 (one each): 27 values.
PLANTED = {
    # five settings one problem apart: 13.415, 14.024, 14.634, 15.244 (one value each), 15.854
    # (15.8 15.9): 6 of 27, 22%, moderate
    "moderate": (of(22, 23, 24, 25, 26), 6, "moderate"),
    # every count from 16 to 32: all 27, weak
    "weak": (of(*range(16, 33)), 27, "weak"),
    # the matching setting alone: 14.6, 1 of 27, strong
    "strong": (of(24), 1, "strong"),
}


@pytest.mark.parametrize("pool", list(PLANTED))
@pytest.mark.parametrize("outlier", [0, 164, 5, 40])  # 0%, 100%, 3.0%, 24.4%: > 5 points away
def test_an_outlier_setting_does_not_change_the_verdict(pool, outlier):
    """The issue's case: a broken setting at 0% widened the old measured range (13.4-15.9 to
    0-15.9 for the moderate pool) and made 6 of 26 values (23%, moderate) 7 of 160 (strong)."""
    scores, n_matched, strength = PLANTED[pool]
    alone = coincidence("14.6", scores, 164)
    assert (alone.n_values, alone.n_matched, alone.strength) == (27, n_matched, strength)
    assert (alone.n_values, alone.n_matched) == brute_force("14.6", scores, 164)
    with_it = coincidence("14.6", [*scores, Fraction(outlier, 164)], 164)
    assert (with_it.n_values, with_it.n_matched, with_it.strength) == (27, n_matched, strength)
    assert with_it.n_settings == alone.n_settings + 1


def test_an_outlier_inside_the_window_adds_at_most_its_own_values():
    scores = PLANTED["moderate"][0]
    inside = coincidence("14.6", [*scores, Fraction(30, 164)], 164)  # 18.293: 18.2 and 18.3
    assert (inside.n_values, inside.n_matched, inside.strength) == (27, 8, "moderate")


def test_a_single_exact_match_is_strong_where_sparse_and_weak_where_dense():
    """One setting alone (the old rule's 1 of 2 or 2 of 2 values of its own range: always weak)
    and one matching setting among others that fill the window, or sit outside it."""
    alone = coincidence("1.2", of(2), 164)  # 1.2195: window cut at 0, 0-6.2: 16 values
    assert (alone.n_values, alone.n_matched, alone.strength) == (16, 1, "strong")
    assert coincidence("16.4", of(27), 164).strength == "strong"  # 16.463: 16.4 and 16.5
    # 30.5 is 50/164 = 30.488 alone; the window 25.5-35.5 holds k = 42..58 (24 values)
    others_dense = [k for k in range(42, 59) if k != 50]
    others_sparse = [30, 35, 40, 41, 59, 60, 70]  # none within 5 points
    for others, n_matched, strength in ((others_dense, 24, "weak"), (others_sparse, 2, "strong")):
        scores = of(50, *others)
        assert [s for s in scores if match_rule(s, "30.5")] == of(50)  # one exact match
        rate = coincidence("30.5", scores, 164)
        assert (rate.n_values, rate.n_matched, rate.strength) == (24, n_matched, strength)
        assert (rate.n_values, rate.n_matched) == brute_force("30.5", scores, 164)


@pytest.mark.parametrize(
    ("n_matched", "strength"),
    [(0, "strong"), (20, "strong"), (21, "moderate"), (49, "moderate"), (50, "weak")],
)
def test_the_documented_bands(n_matched, strength):
    assert (WINDOW_PP, STRONG_AT, WEAK_AT) == (5, 0.20, 0.50)
    rate = Coincidence("16.4", 1, 164, n_settings=60, n_values=100, n_matched=n_matched)
    assert rate.strength == strength
    share = (
        f"{n_matched} of the 100 one-decimal values k/164 gives within 5 points of 16.4 "
        f"match some setting ({n_matched}%)"
    )
    assert rate.words(True) == f"{strength} evidence: {share}"
    assert rate.words(False) == f"coincidence rate: {share}"


def test_no_settings_no_rate_and_a_bad_denominator_is_named():
    nothing = coincidence("1.0", [], 164)
    assert nothing.rate is None and nothing.words(True) == "" and nothing.n_values == 15
    assert coincidence("50.0", of(1), 1).rate is None  # 0% and 100% only: no value near 50
    with pytest.raises(ValueError, match="denominator must be >= 1.*got 0"):
        coincidence("16.4", of(27), 0)
    assert interval_contains("16.4", 10.98, 22.56) and not interval_contains("9.1", 10.98, 22.56)
    assert not interval_contains("9.1", None, 22.56)


@pytest.fixture(scope="module")
def grid_reports(tmp_path_factory):
    """The answers of the paper-grid store, then of the same store with one broken setting of
    the base model (0 of 164: a vLLM run of its baseline cell) added."""
    root = tmp_path_factory.mktemp("coincidence")
    write_grid_store(str(root / "store"))
    frames = []
    for name in ("plain", "outlier"):
        out = root / name
        argv = ["report", "--store", str(root / "store"), "--out", str(out), "--format", "csv"]
        assert main([*argv, "--resamples", "200"]) == 0
        frames.append(pd.read_csv(out / "answers.csv", dtype={"reported": str}))
        broken = Spec(BASE, "own", "greedy", 2048, "bf16", 0, backend="vllm")
        write_setting(Store(str(root / "store")), broken)
    return frames[0], frames[1]


def test_the_report_answers_carry_the_brute_force_rate(grid_reports):
    answers, _ = grid_reports
    assert len(answers)
    for row in answers.to_dict("records"):
        pool = grid_scores(row["setting_model"])
        n_values, n_matched = brute_force(row["reported"], pool, 164)
        assert row["coincidence_rate"] == pytest.approx(n_matched / n_values)
        assert f"{n_matched} of the {n_values} " in row["evidence"]
        assert f"values k/164 gives within 5 points of {row['reported']} " in row["evidence"]


def test_a_broken_setting_leaves_the_report_answers_evidence(grid_reports):
    """16.4 on the base model's grid: 21 of 24, weak, with or without the 0% setting (the old
    measured range: 32 of 137, moderate, then 33 of 197, strong)."""
    plain, outlier = grid_reports
    assert len(plain) == len(outlier) and len(plain)
    rows = zip(plain.to_dict("records"), outlier.to_dict("records"), strict=True)
    for before, after in rows:
        assert (before["reported"], before["verdict"]) == (after["reported"], after["verdict"])
        assert before["evidence_strength"] == after["evidence_strength"] or (
            pd.isna(before["evidence_strength"]) and pd.isna(after["evidence_strength"])
        )
        if float(before["reported"]) > WINDOW_PP:  # 0% is outside its window
            assert before["coincidence_rate"] == after["coincidence_rate"]
            assert before["evidence"].split(";")[0] == after["evidence"].split(";")[0]
    base = plain[(plain.setting_model == BASE) & (plain.reported == "16.4")].iloc[0]
    assert (base.coincidence_rate, base.evidence_strength) == (pytest.approx(21 / 24), "weak")
    assert outlier.loc[base.name, "evidence"].endswith("of 61 settings' intervals contain 16.4")
