"""The coincidence rate against a brute-force count on the paper-grid fixture store: every value
printed with the same decimals in a model's measured range, tried one by one against every
setting with the literature's own matching rule."""

from __future__ import annotations

import math
from fractions import Fraction

import pandas as pd
import pytest

from orchestrator.analysis.coincidence import coincidence, interval_contains
from orchestrator.analysis.obtainability import match_rule
from orchestrator.cli import main
from tests.fixtures_store import BASE, INST, grid_passes, write_grid_store


def brute_force(value_text: str, scores: list[Fraction]) -> tuple[int, int]:
    """(candidate values, matched ones): from the lowest score truncated to the value's
    decimals up to the highest rounded up, each printed and matched with `match_rule`."""
    d = len(value_text.partition(".")[2])
    scale = 10**d
    first = math.floor(min(scores) * 100 * scale)
    last = math.ceil(max(scores) * 100 * scale)
    candidates = [
        f"{k // scale}.{k % scale:0{d}d}" if d else str(k) for k in range(first, last + 1)
    ]
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


@pytest.mark.parametrize("model", [BASE, INST])
@pytest.mark.parametrize("decimals", [0, 1, 2])
def test_coincidence_equals_the_brute_force_count_on_the_paper_grid(model, decimals):
    scores = grid_scores(model)
    assert len(scores) == 60
    value = "16" + ("." + "4" * decimals if decimals else "")
    rate = coincidence(value, scores)
    assert (rate.n_values, rate.n_matched) == brute_force(value, scores)
    assert rate.n_settings == 60 and rate.decimals == decimals
    assert rate.low_pct == pytest.approx(float(min(scores) * 100))


def test_coincidence_of_few_and_many_settings():
    one = coincidence("16.4", [Fraction(27, 164)])  # 16.46: floors to 16.4, rounds to 16.5
    assert (one.n_values, one.n_matched, one.strength) == (2, 2, "weak")
    spread = [
        Fraction(k, 164) for k in (20, 60, 100)
    ]  # three far apart: 6 of 490 values (12.1 to 61.0)
    rate = coincidence("30.0", spread)
    assert (rate.n_values, rate.n_matched) == brute_force("30.0", spread) == (490, 6)
    assert rate.strength == "strong" and rate.words(True).startswith("strong evidence: 6 of")
    assert coincidence("1.0", []).rate is None and coincidence("1.0", []).words(True) == ""
    assert interval_contains("16.4", 10.98, 22.56) and not interval_contains("9.1", 10.98, 22.56)
    assert not interval_contains("9.1", None, 22.56)


def test_the_report_answers_carry_the_brute_force_rate(tmp_path, capsys):
    store = tmp_path / "store"
    write_grid_store(str(store))
    out = tmp_path / "out"
    argv = ["report", "--store", str(store), "--out", str(out), "--format", "csv"]
    assert main([*argv, "--resamples", "200"]) == 0
    answers = pd.read_csv(out / "answers.csv", dtype={"reported": str})
    assert len(answers)
    for row in answers.to_dict("records"):
        pool = grid_scores(row["setting_model"])
        n_values, n_matched = brute_force(row["reported"], pool)
        assert row["coincidence_rate"] == pytest.approx(n_matched / n_values)
        assert f"{n_matched} of the {n_values}" in row["evidence"]
