"""The paired comparison of two settings on the same problems. Pure.

Sign convention: **A is the reference, B the changed setting**, and every difference is
**B minus A**: `delta_pp` = 100 x (mean score of B - mean score of A), positive when B scores
higher. `b` counts the problems where A does better (only A passes, for one sample), `c` those
where B does better (only B passes), so with one sample per problem `delta_pp` = 100 (c - b) / n.

Which test (see docs/statistics.md):

* **One sample per problem** (greedy, or pass@1 from n = 1; outcomes given as `bool`): the exact
  McNemar test, the two-sided binomial test of b against b + c with p = 1/2
  (`scipy.stats.binomtest(b, b + c)`, `statsmodels...mcnemar(exact=True)`), and a percentile
  bootstrap interval for the difference over problems, drawn exactly as resampling problems
  would be: the counts of A-only, B-only and concordant problems in a resample are multinomial.
* **Several samples per problem, or a score in [0, 1] per problem** (InfiBench best@10; outcomes
  given as floats): the per-problem differences d_i, a percentile bootstrap interval for their
  mean over problems, and a two-sided sign-flip permutation test of the mean (each problem's
  difference keeps or flips its sign: `scipy.stats.permutation_test(...,
  permutation_type="samples")`). The flip is exhaustive when the problems with a nonzero
  difference allow at most `n_resamples` patterns, else random with the +1 correction.

The problem is the unit: a problem's samples are already folded into its score. Every random draw
comes from `numpy.random.default_rng(seed)`, so a report is reproducible.

`mdd_pp`, the minimum detectable difference at 80% power and two-sided alpha = 0.05, is the normal
approximation (z_{1-alpha/2} + z_{power}) x sqrt(mean(d^2) / n): mean(d^2) is the discordant
fraction f for one sample per problem (the variance of d under "no difference"), so this is the
2.8 x sqrt(f / n) of docs/statistics.md. With no discordant problem at all, f is taken as one
problem in n: the smallest discordance a difference could have, so the figure stays a difference
the test could see rather than 0.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist
from typing import TypeVar

import numpy as np

DEFAULT_RESAMPLES = 10_000
DEFAULT_CONFIDENCE = 0.95
DEFAULT_SEED = 0
DEFAULT_POWER = 0.80
DEFAULT_ALPHA = 0.05
_CHUNK = 2_000  # resamples drawn at a time (bounds memory: chunk x problems)


class PairedMethod(enum.Enum):
    EXACT_MCNEMAR = "exact McNemar"  # one sample per problem
    SIGN_FLIP = "sign-flip permutation"  # a score in [0, 1] per problem


class PairingError(ValueError):
    """Two settings that cannot be paired: different problems (the message names them)."""


@dataclass(frozen=True)
class PairedResult:
    """B compared with A on the same n problems; differences are B minus A."""

    n: int  # problems
    b: int  # problems where A does better (only A passes, for one sample per problem)
    c: int  # problems where B does better (only B passes)
    score_a_pct: float  # mean over problems, percent
    score_b_pct: float
    delta_pp: float  # score_b_pct - score_a_pct, percentage points
    ci_low_pp: float  # percentile bootstrap over problems
    ci_high_pp: float
    p_value: float  # two-sided
    method: PairedMethod
    mdd_pp: float  # minimum detectable |delta| at 80% power, alpha 0.05
    confidence: float
    n_resamples: int
    seed: int
    exhaustive: bool  # the p-value is exact (McNemar, or every sign pattern enumerated)

    @property
    def discordant(self) -> int:
        return self.b + self.c


V = TypeVar("V")


def align_problems(
    a: Mapping[str, V], b: Mapping[str, V]
) -> tuple[tuple[str, ...], list[V], list[V]]:
    """The problems both hold, sorted, with A's and B's outcomes in that order.

    Raises PairingError naming the problems only one side has: a paired test needs the same
    problems on both sides (a pilot and a full run are not comparable)."""
    only_a = sorted(set(a) - set(b))
    only_b = sorted(set(b) - set(a))
    if only_a or only_b:
        raise PairingError(
            f"the settings hold different problems: {len(only_a)} only in A "
            f"({_sample(only_a)}), {len(only_b)} only in B ({_sample(only_b)})"
        )
    tasks = tuple(sorted(a))
    return tasks, [a[t] for t in tasks], [b[t] for t in tasks]


def _sample(names: list[str]) -> str:
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "") if names else "none"


def compare_paired(
    a: np.ndarray | list[bool] | list[float],
    b: np.ndarray | list[bool] | list[float],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> PairedResult:
    """Compare B with A on aligned per-problem outcomes (same order, same problems).

    `bool` outcomes (one sample per problem) get the exact McNemar test; float scores in [0, 1]
    (several samples, best@10) the sign-flip permutation test. Both get a bootstrap interval."""
    xa, xb = np.asarray(a), np.asarray(b)
    _check(xa, xb, confidence, n_resamples)
    if xa.dtype == bool and xb.dtype == bool:
        return _mcnemar(xa, xb, confidence, n_resamples, seed)
    return _sign_flip(xa.astype(float), xb.astype(float), confidence, n_resamples, seed)


def _check(xa: np.ndarray, xb: np.ndarray, confidence: float, n_resamples: int) -> None:
    if xa.ndim != 1 or xa.shape != xb.shape:
        raise PairingError(
            f"outcomes must be two vectors of one length, got {xa.shape} and {xb.shape}"
        )
    if xa.size == 0:
        raise PairingError("no problems to compare")
    if (xa.dtype == bool) != (xb.dtype == bool):
        raise PairingError("both sides must be bool (one sample) or both scores in [0, 1]")
    if xa.dtype != bool and (
        not np.all((xa >= 0) & (xa <= 1)) or not np.all((xb >= 0) & (xb <= 1))
    ):
        raise PairingError("per-problem scores must lie in [0, 1]")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def mcnemar_exact_p(b: int, c: int) -> float:
    """Two-sided exact McNemar p: 2 x P(X <= min(b, c)) for X ~ Binomial(b + c, 1/2), at most 1.

    Computed in exact integers (so 1e-9 agreement with scipy's binomtest is by construction)."""
    m = b + c
    if m == 0:
        return 1.0
    tail = sum(math.comb(m, k) for k in range(min(b, c) + 1))
    return float(min(Fraction(1), Fraction(2 * tail, 2**m)))


def minimum_detectable_pp(
    second_moment: float,
    n: int,
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
) -> float:
    """(z_{1-alpha/2} + z_{power}) x sqrt(max(E[d^2], 1/n) / n), in percentage points."""
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    return 100 * z * math.sqrt(max(second_moment, 1 / n) / n)


def _percentile(values: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1 - confidence) / 2
    low, high = np.quantile(values, [alpha, 1 - alpha])
    return float(low), float(high)


def _mcnemar(
    xa: np.ndarray, xb: np.ndarray, confidence: float, n_resamples: int, seed: int
) -> PairedResult:
    n = xa.size
    b = int(np.sum(xa & ~xb))
    c = int(np.sum(~xa & xb))
    rng = np.random.default_rng(seed)
    # Resampling n problems with replacement draws (A-only, B-only, concordant) counts from a
    # multinomial with the observed shares: the same distribution, without an n-wide index.
    draws = rng.multinomial(n, [b / n, c / n, (n - b - c) / n], size=n_resamples)
    low, high = _percentile((draws[:, 1] - draws[:, 0]) * (100 / n), confidence)
    return PairedResult(
        n=n,
        b=b,
        c=c,
        score_a_pct=100 * float(xa.mean()),
        score_b_pct=100 * float(xb.mean()),
        delta_pp=100 * (c - b) / n,
        ci_low_pp=low,
        ci_high_pp=high,
        p_value=mcnemar_exact_p(b, c),
        method=PairedMethod.EXACT_MCNEMAR,
        mdd_pp=minimum_detectable_pp((b + c) / n, n),
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        exhaustive=True,
    )


def sign_flip_p(d: np.ndarray, n_resamples: int, rng: np.random.Generator) -> tuple[float, bool]:
    """Two-sided sign-flip p of mean(d) (scipy's definition: twice the smaller one-sided p, at
    most 1), and whether every sign pattern of the nonzero differences was enumerated."""
    nonzero = d[d != 0]
    observed = float(nonzero.sum())
    tol = 1e-12 * max(1.0, abs(observed))  # sums that differ only by rounding count as ties
    m = nonzero.size
    if m == 0:
        return 1.0, True
    if 2**m <= n_resamples:
        patterns = 1 - 2 * ((np.arange(2**m)[:, None] >> np.arange(m)) & 1)
        null = patterns @ nonzero
        less = np.mean(null <= observed + tol)
        greater = np.mean(null >= observed - tol)
        return float(min(1.0, 2 * min(less, greater))), True
    n_less = n_greater = 0
    for start in range(0, n_resamples, _CHUNK):
        size = min(_CHUNK, n_resamples - start)
        signs = 1 - 2 * rng.integers(0, 2, size=(size, m), dtype=np.int8)
        null = signs @ nonzero
        n_less += int(np.sum(null <= observed + tol))
        n_greater += int(np.sum(null >= observed - tol))
    less = (n_less + 1) / (n_resamples + 1)
    greater = (n_greater + 1) / (n_resamples + 1)
    return float(min(1.0, 2 * min(less, greater))), False


def bootstrap_mean_interval(
    d: np.ndarray, confidence: float, n_resamples: int, rng: np.random.Generator
) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(d), resampling problems with replacement."""
    means = np.empty(n_resamples)
    for start in range(0, n_resamples, _CHUNK):
        size = min(_CHUNK, n_resamples - start)
        idx = rng.integers(0, d.size, size=(size, d.size))
        means[start : start + size] = d[idx].mean(axis=1)
    return _percentile(means, confidence)


def _sign_flip(
    xa: np.ndarray, xb: np.ndarray, confidence: float, n_resamples: int, seed: int
) -> PairedResult:
    n = xa.size
    d = xb - xa
    rng = np.random.default_rng(seed)
    low, high = bootstrap_mean_interval(d, confidence, n_resamples, rng)
    p, exhaustive = sign_flip_p(d, n_resamples, rng)
    return PairedResult(
        n=n,
        b=int(np.sum(d < 0)),
        c=int(np.sum(d > 0)),
        score_a_pct=100 * float(xa.mean()),
        score_b_pct=100 * float(xb.mean()),
        delta_pp=100 * float(d.mean()),
        ci_low_pp=100 * low,
        ci_high_pp=100 * high,
        p_value=p,
        method=PairedMethod.SIGN_FLIP,
        mdd_pp=minimum_detectable_pp(float(np.mean(d**2)), n),
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        exhaustive=exhaustive,
    )
