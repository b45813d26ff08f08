"""The paired comparison against the field's libraries (scipy.stats, statsmodels).

Exact quantities (the McNemar p, the exhaustive sign-flip p, Holm, BH) must agree within 1e-9.
The bootstrap intervals equal scipy's within 1e-9 too, on the same draws (same seed). Randomized
sign-flip p-values draw other random numbers than scipy does, so they agree within the Monte
Carlo tolerance docs/statistics.md derives (five standard deviations of the difference of two
independent estimates); on pass rates, whose sums tie exactly, against the exact p.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar

from orchestrator.analysis import pairedbatch
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


def random_pair(rng: np.random.Generator, n: int, binary: bool) -> tuple[np.ndarray, np.ndarray]:
    """Two sides over n problems: pass/fail (some flipped) or scores in [0, 1]."""
    if binary:
        a = rng.random(n) < rng.random()
        return a, np.where(rng.random(n) < 0.25 * rng.random(), ~a, a)
    a = rng.random(n)
    return a, np.clip(a + rng.normal(rng.normal(0, 0.02), 0.2, n), 0, 1)


def test_bootstrap_intervals_equal_scipy_on_the_same_draws_on_1000_samples():
    """draw_resamples first draws default_rng(seed).integers(0, n, (R, n)), the call
    scipy.stats.bootstrap makes on the generator it is given (batch=None), so with the same seed
    both resample the same problems; both take linear-interpolation percentiles, so the
    intervals agree to rounding (1e-9), not merely within a Monte Carlo tolerance. The check
    tells confidence levels apart: our 90% and 97.5% intervals miss scipy's 95% one on every
    sample of scores; on pass/fail samples only where the resampled means take so few values
    (a handful of discordant problems) that the percentiles coincide (284 of the 1,000 checks)."""
    rng = np.random.default_rng(21)
    resamples = 500
    other_levels_passed = {True: 0, False: 0}  # pass/fail samples, score samples
    for i in range(N_CASES):
        binary = i % 2 == 0
        a, b = random_pair(rng, int(rng.integers(10, 80)), binary)
        d = b.astype(float) - a
        oracle = stats.bootstrap(
            (d,),
            _mean,
            method="percentile",
            n_resamples=resamples,
            vectorized=True,
            rng=np.random.default_rng(i),
        ).confidence_interval
        expected = (100 * oracle.low, 100 * oracle.high)
        result = compare_paired(a, b, n_resamples=resamples, seed=i)
        assert (result.ci_low_pp, result.ci_high_pp) == pytest.approx(expected, abs=TIGHT), i
        for level in (0.90, 0.975):
            other = compare_paired(a, b, confidence=level, n_resamples=resamples, seed=i)
            if (other.ci_low_pp, other.ci_high_pp) == pytest.approx(expected, abs=TIGHT):
                other_levels_passed[binary] += 1
    assert other_levels_passed[False] == 0
    assert other_levels_passed[True] <= 0.3 * N_CASES  # of N_CASES checks (500 samples x 2)


def p_tolerance(p: float, n_resamples: int, estimates: int = 2) -> float:
    """Five standard deviations of a randomized two-sided p-value (twice a one-sided share
    q = p / 2) against the exact p (`estimates` 1) or against another randomized p (2), plus
    the +1 corrections."""
    q = min(max(p / 2, 1 / n_resamples), 0.5)
    return 5 * 2 * math.sqrt(estimates * q * (1 - q) / n_resamples) + 2 * estimates / n_resamples


SIGN_FLIP_GROUPS = 10  # problem counts; each group's samples share one set of draws per side
SIGN_FLIP_PER_GROUP = 20


def test_randomized_sign_flip_matches_scipy_within_the_monte_carlo_tolerance_on_200_samples():
    """200 samples of 30-234 problems, p-values from 1e-4 to 1: ours (one draw per group,
    compare_rows) against scipy.stats.permutation_test (its own draws, all samples of a group at
    once along axis 1), within five standard deviations of the difference of two independent
    estimates (a false alarm somewhere in 200 has probability about 1e-4)."""
    rng = np.random.default_rng(22)
    resamples = 4_000
    ps = []
    for g in range(SIGN_FLIP_GROUPS):
        n = int(rng.integers(30, 235))
        pairs = [random_pair(rng, n, binary=False) for _ in range(SIGN_FLIP_PER_GROUP)]
        a, b = np.array([x for x, _ in pairs]), np.array([y for _, y in pairs])
        ours = compare_rows(list(a), list(b), draw_resamples(n, resamples, seed=g))
        oracle = stats.permutation_test(
            (b - a,),
            _mean,
            permutation_type="samples",
            vectorized=True,
            n_resamples=resamples,
            axis=1,
            rng=np.random.default_rng(1000 + g),
        ).pvalue
        for result, p in zip(ours, oracle, strict=True):
            assert not result.exhaustive
            assert abs(result.p_value - p) <= p_tolerance(p, resamples), (g, result, p)
            ps.append(p)
    # the samples span the range a report meets: clear effects, borderline ones, none
    assert min(ps) < 0.001 and max(ps) > 0.9 and sum(0.01 < p < 0.2 for p in ps) >= 20


def exact_sign_flip_p(units: np.ndarray) -> float:
    """The two-sided sign-flip p by its definition, over every pattern of the nonzero integer
    differences (exact integer sums: ties are ties)."""
    nonzero = units[units != 0]
    m = nonzero.size
    patterns = 1 - 2 * ((np.arange(2**m)[:, None] >> np.arange(m)) & 1)
    sums, observed = patterns @ nonzero, int(nonzero.sum())
    return min(1.0, 2 * min(np.mean(sums <= observed), np.mean(sums >= observed)))


def test_randomized_sign_flip_on_pass_rates_matches_the_exact_p_and_a_balanced_pair_gives_1():
    """Pass rates of 10 samples (tenths: sums on a lattice, many exact ties), 14-16 problems
    that differ (2^m above the resamples: the randomized path) among 30-234: within five
    standard deviations of the exact p by enumeration; one sample in four balanced (as many
    tenths up as down), whose exact p is 1 and whose float sums are 0 only up to rounding."""
    rng = np.random.default_rng(23)
    resamples = 10_000
    balanced = 0
    for g in range(5):
        n = int(rng.integers(30, 235))
        a_rows, b_rows, units = [], [], []
        for k in range(SIGN_FLIP_PER_GROUP):
            a = rng.binomial(10, rng.random(n))
            step = rng.choice([-3, -2, -1, 1, 2, 3], size=int(rng.integers(14, 17)))
            if k % 4 == 0:
                step = np.concatenate([step[: step.size // 2], -step[: step.size // 2]])
            where = rng.choice(n, step.size, replace=False)
            a[where] = rng.integers(3, 8, step.size)  # room for a step of 3 either way
            b = a.copy()
            b[where] += step
            a_rows.append(a / 10)
            b_rows.append(b / 10)
            units.append(b - a)
        ours = compare_rows(a_rows, b_rows, draw_resamples(n, resamples, seed=g))
        for result, u in zip(ours, units, strict=True):
            exact = exact_sign_flip_p(u)
            if u.sum() == 0:
                balanced += 1
                assert exact == 1.0 and result.p_value == 1.0, (g, result)
            assert not result.exhaustive
            assert abs(result.p_value - exact) <= p_tolerance(exact, resamples, 1), (g, result)
    assert balanced >= 20
    # the exhaustive path on a balanced pair: every pattern's sum ties with 0 or lies beyond it
    a = np.array([7, 6, 5, 4, 4, 3, 3, 3])
    b = a + np.array([3, 1, -2, -1, 2, -2, 2, -3])
    exhaustive = compare_paired(a / 10, b / 10, n_resamples=256)
    assert exhaustive.exhaustive and exhaustive.p_value == 1.0  # was 0.953


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


def test_many_pairs_in_chunks_equal_each_pair_alone_held_or_projected_per_chunk(monkeypatch):
    """A grid's many pairs in one call (more than a chunk; pass/fail, float 0/1 and score rows
    mixed, repeated rows) give each pair's `compare_paired` numbers, whether the projections
    are held or projected per chunk; the pass/fail intervals, read off a histogram, equal
    numpy.quantile's to rounding."""
    rng = np.random.default_rng(5)
    base = rng.random(80) < 0.4
    rows: list[np.ndarray] = [np.where(rng.random(80) < 0.2, ~base, base) for _ in range(30)]
    rows += [rows[0].copy(), rows[1].astype(float), rng.random(80)]
    pairs = [(i, j) for i in range(len(rows)) for j in range(i + 1, len(rows))]
    assert len(pairs) > pairedbatch.PAIR_CHUNK
    draws = draw_resamples(80, 999, seed=4)
    held = pairedbatch.compare_pairs(rows, pairs, draws)
    monkeypatch.setattr(pairedbatch, "HELD_PROJECTIONS", 0)
    per_chunk = pairedbatch.compare_pairs(rows, pairs, draws)
    means = np.array([r.astype(float) for r in rows]) @ draws.counts.T / 80
    for (i, j), one, other in zip(pairs, held, per_chunk, strict=True):
        assert dataclasses.asdict(one) == pytest.approx(dataclasses.asdict(other), abs=TIGHT)
        low, high = np.quantile(means[j] - means[i], [0.025, 0.975])
        assert (one.ci_low_pp, one.ci_high_pp) == pytest.approx((100 * low, 100 * high), abs=TIGHT)
        exact = rows[i].dtype == bool and rows[j].dtype == bool
        assert one.method is (PairedMethod.EXACT_MCNEMAR if exact else PairedMethod.SIGN_FLIP)
    for (i, j), one in list(zip(pairs, held, strict=True))[::37]:
        alone = compare_paired(rows[i], rows[j], n_resamples=999, seed=4)
        assert dataclasses.asdict(one) == pytest.approx(dataclasses.asdict(alone), abs=TIGHT)


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
