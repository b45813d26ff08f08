"""The paired comparison against the field's libraries (scipy.stats, statsmodels).

Exact quantities (the McNemar p, the exhaustive sign-flip p, Holm, BH) must agree within 1e-9.
Resampled ones (bootstrap intervals, randomized sign-flip p) draw other random numbers than scipy
does, so they agree within the Monte Carlo tolerance docs/statistics.md derives: five standard
deviations of the difference of two independent estimates.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar

from orchestrator.analysis.paired import (
    PairedMethod,
    PairingError,
    align_problems,
    compare_paired,
    compare_rows,
    draw_resamples,
    mcnemar_exact_p,
    minimum_detectable_pp,
)

N_CASES = 1000
TIGHT = 1e-9


def _mean(d, axis=-1):
    return np.mean(d, axis=axis)


def random_table(rng: np.random.Generator) -> tuple[int, int, int, int]:
    """(both pass, only A, only B, both fail), from tiny to benchmark-sized, some tied."""
    n = int(rng.integers(1, 240))
    discordant = rng.random() * rng.choice([0.05, 0.3, 1.0])
    b = int(rng.binomial(n, discordant * rng.random()))
    c = int(rng.binomial(n - b, discordant * rng.random()))
    if rng.random() < 0.1:
        c = min(b, n - b)  # b == c: p = 1
    both = int(rng.integers(0, n - b - c + 1))
    return both, b, c, n - b - c - both


def vectors(both: int, b: int, c: int, neither: int) -> tuple[np.ndarray, np.ndarray]:
    a = np.array([True] * both + [True] * b + [False] * c + [False] * neither)
    bb = np.array([True] * both + [False] * b + [True] * c + [False] * neither)
    return a, bb


def test_exact_mcnemar_equals_statsmodels_and_scipy_on_1000_tables():
    rng = np.random.default_rng(19)
    for i in range(N_CASES):
        both, b, c, neither = random_table(rng)
        oracle = mcnemar([[both, b], [c, neither]], exact=True).pvalue
        assert mcnemar_exact_p(b, c) == pytest.approx(oracle, abs=TIGHT)
        if b + c:
            assert mcnemar_exact_p(b, c) == pytest.approx(
                stats.binomtest(b, b + c).pvalue, abs=TIGHT
            )
        if i % 4:
            continue  # the vectors' path for a quarter of them (the p is the same function)
        a, bb = vectors(both, b, c, neither)
        result = compare_paired(a, bb, n_resamples=50, seed=1)
        assert (result.b, result.c, result.n) == (b, c, len(a))
        assert result.method is PairedMethod.EXACT_MCNEMAR and result.exhaustive
        assert result.p_value == pytest.approx(oracle, abs=TIGHT)
        assert result.delta_pp == pytest.approx(100 * (c - b) / len(a), abs=TIGHT)


def test_exhaustive_sign_flip_equals_scipy_permutation_test_on_1000_samples():
    rng = np.random.default_rng(20)
    for i in range(N_CASES):
        n = int(rng.integers(2, 11))  # 2^n <= 1024: both enumerate every sign pattern
        a = rng.random(n)
        b = np.clip(a + rng.normal(rng.normal(0, 0.1), 0.2, n), 0, 1)
        if i % 5 == 0:
            b[: n // 2] = a[: n // 2]  # zero differences: they flip to themselves
        oracle = stats.permutation_test(
            (b - a,), _mean, permutation_type="samples", vectorized=True, n_resamples=1024
        ).pvalue
        result = compare_paired(a, b, n_resamples=1024, seed=i)
        assert result.method is PairedMethod.SIGN_FLIP and result.exhaustive
        assert result.p_value == pytest.approx(oracle, abs=TIGHT)


def ci_tolerance(d: np.ndarray, n_resamples: int, binary: bool) -> float:
    """Five standard deviations of the difference of two percentile-bootstrap 2.5% quantiles:
    sqrt(2) x sqrt(0.025 x 0.975 / R) / phi(1.96) x SE = 3.78 / sqrt(R) x SE, plus one problem
    (1/n) for pass/fail differences, whose quantiles move on a lattice."""
    se = d.std(ddof=1) / math.sqrt(d.size) if d.size > 1 and d.std() > 0 else 1 / d.size
    return 5 * 3.78 / math.sqrt(n_resamples) * se + (1 / d.size if binary else 0) + TIGHT


def p_tolerance(p: float, n_resamples: int) -> float:
    """Five standard deviations of the difference of two randomized two-sided p-values (each is
    twice a one-sided share q = p / 2), plus the +1 corrections."""
    q = min(max(p / 2, 1 / n_resamples), 0.5)
    return 5 * 2 * math.sqrt(2 * q * (1 - q) / n_resamples) + 4 / n_resamples


def test_bootstrap_intervals_match_scipy_within_the_monte_carlo_tolerance_on_1000_samples():
    rng = np.random.default_rng(21)
    resamples = 500
    for i in range(N_CASES):
        n = int(rng.integers(10, 80))
        binary = i % 2 == 0
        if binary:
            a = rng.random(n) < rng.random()
            b = np.where(rng.random(n) < 0.25 * rng.random(), ~a, a)
            d = b.astype(float) - a
        else:
            a = rng.random(n)
            b = np.clip(a + rng.normal(0, 0.2, n), 0, 1)
            d = b - a
        result = compare_paired(a, b, n_resamples=resamples, seed=i)
        oracle = stats.bootstrap(
            (d,), _mean, method="percentile", n_resamples=resamples, random_state=i
        ).confidence_interval
        tol = 100 * ci_tolerance(d, resamples, binary)
        assert abs(result.ci_low_pp - 100 * oracle.low) <= tol, (i, result, oracle)
        assert abs(result.ci_high_pp - 100 * oracle.high) <= tol, (i, result, oracle)


def test_randomized_sign_flip_matches_scipy_within_the_monte_carlo_tolerance():
    rng = np.random.default_rng(22)
    resamples = 10_000
    for i in range(12):
        n = int(rng.integers(30, 235))
        a = rng.random(n)
        b = np.clip(a + rng.normal(rng.normal(0, 0.02), 0.2, n), 0, 1)
        result = compare_paired(a, b, n_resamples=resamples, seed=i)
        assert not result.exhaustive
        oracle = stats.permutation_test(
            (b - a,),
            _mean,
            permutation_type="samples",
            vectorized=True,
            n_resamples=resamples,
            rng=np.random.default_rng(1000 + i),
        ).pvalue
        assert abs(result.p_value - oracle) <= p_tolerance(oracle, resamples), (i, result)


def test_a_report_and_compare_give_the_same_numbers_for_the_same_seed():
    rng = np.random.default_rng(3)
    a = rng.random(164) < 0.4
    others = [rng.random(164) < 0.4, rng.random(164), np.where(rng.random(164) < 0.1, ~a, a)]
    joint = compare_rows([a] * 3, others, draw_resamples(164, 2_000, seed=7))
    for one, b in zip(joint, others, strict=True):
        alone = compare_paired(a, b, n_resamples=2_000, seed=7)
        # equal but for the last bits of a matrix product blocked differently
        assert dataclasses.asdict(one) == pytest.approx(dataclasses.asdict(alone), abs=TIGHT)
        assert (one.b, one.c, one.method, one.p_value) == (
            alone.b,
            alone.c,
            alone.method,
            alone.p_value,
        )
    assert compare_paired(a, others[0], seed=7) != compare_paired(a, others[0], seed=8)


def test_sign_convention_is_b_minus_a_and_a_bool_side_pairs_with_scores():
    a = np.array([True] * 10 + [False] * 90)
    b = np.array([True] * 4 + [False] * 6 + [True] * 2 + [False] * 88)
    result = compare_paired(a, b, n_resamples=500)
    assert (result.b, result.c) == (6, 2)  # only A passes 6, only B 2
    assert result.delta_pp == pytest.approx(-4.0)
    assert result.score_a_pct == pytest.approx(10.0) and result.score_b_pct == pytest.approx(6.0)
    assert result.ci_low_pp <= result.delta_pp <= result.ci_high_pp
    mixed = compare_paired(a, b.astype(float) * 0.5, n_resamples=500)  # a score side: sign-flip
    assert mixed.method is PairedMethod.SIGN_FLIP
    assert mixed.delta_pp == pytest.approx(3.0 - 10.0)  # B: 6 problems at 0.5


def test_minimum_detectable_difference_is_the_documented_normal_approximation():
    # docs/statistics.md: with 10% of 164 problems discordant, about 2.8 x sqrt(0.1 / 164)
    assert minimum_detectable_pp(0.10, 164) == pytest.approx(6.9, abs=0.05)
    assert minimum_detectable_pp(0.10, 234) == pytest.approx(5.8, abs=0.05)
    a = np.zeros(164, dtype=bool)
    b = a.copy()
    b[:16] = True  # 16 discordant problems: f = 16/164
    assert compare_paired(a, b, n_resamples=10).mdd_pp == pytest.approx(
        minimum_detectable_pp(16 / 164, 164)
    )
    # no discordant problem: one problem's discordance, not 0
    assert compare_paired(a, a, n_resamples=10).mdd_pp == pytest.approx(
        minimum_detectable_pp(1 / 164, 164)
    )
    assert compare_paired(a, a, n_resamples=10).p_value == 1.0


def test_alignment_and_bad_inputs_are_errors_that_name_the_problem():
    tasks, xa, xb = align_problems({"p/1": True, "p/0": False}, {"p/0": True, "p/1": True})
    assert tasks == ("p/0", "p/1") and xa == [False, True] and xb == [True, True]
    with pytest.raises(PairingError, match=r"1 only in A \(p/2\), 0 only in B"):
        align_problems({"p/1": True, "p/2": True}, {"p/1": True})
    with pytest.raises(PairingError, match="align them first"):
        compare_paired([True, False], [True])
    with pytest.raises(PairingError, match=r"in \[0, 1\]"):
        compare_paired([0.5, 1.5], [0.5, 0.5])
    with pytest.raises(ValueError, match="n_resamples must be >= 1, got 0"):
        compare_paired([True], [False], n_resamples=0)
