"""The parts of a paired comparison (orchestrator/analysis/paired.py says which test and why):
the defaults, the result, aligning two settings' problems, the shared bootstrap draws and sign
flips, the exact McNemar p, the sign-flip p, the minimum detectable difference. Pure."""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Mapping, Sequence
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


@dataclass(frozen=True)
class Resamples:
    """The random draws every comparison over the same n problems shares."""

    counts: np.ndarray  # (R, n): how often each problem is drawn in each bootstrap resample
    signs: np.ndarray  # (R, n): +1 or -1, each problem's sign in each sign-flip resample
    seed: int

    @property
    def n_resamples(self) -> int:
        return int(self.counts.shape[0])

    @property
    def n_problems(self) -> int:
        return int(self.counts.shape[1])


@functools.lru_cache(maxsize=4)  # a report draws the same ones for each of its 100 models
def draw_resamples(
    n_problems: int, n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> Resamples:
    """Bootstrap draws (problems with replacement), then sign flips, from default_rng(seed).
    Read-only: the draws are shared by every caller with the same arguments."""
    if n_problems < 1:
        raise PairingError("no problems to compare")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n_problems, size=(n_resamples, n_problems))
    rows = np.arange(n_resamples)[:, None] * n_problems
    counts = np.bincount((idx + rows).ravel(), minlength=n_resamples * n_problems)
    signs = 1.0 - 2.0 * rng.integers(0, 2, size=(n_resamples, n_problems), dtype=np.int8)
    counts = counts.reshape(n_resamples, n_problems).astype(float)
    counts.flags.writeable = signs.flags.writeable = False
    return Resamples(counts, signs, seed)


def outcome_vector(x: np.ndarray | Sequence[bool] | Sequence[float]) -> np.ndarray:
    v = np.asarray(x)
    if v.ndim != 1 or v.size == 0:
        raise PairingError(f"outcomes must be a non-empty vector, got shape {v.shape}")
    if v.dtype != bool:
        v = v.astype(float)
        if not np.all((v >= 0) & (v <= 1)):
            raise PairingError("per-problem scores must lie in [0, 1]")
    return v


@functools.lru_cache(maxsize=65_536)  # a grid's pairs repeat few (b, c): a report has ~10^5
def mcnemar_exact_p(b: int, c: int) -> float:
    """Two-sided exact McNemar p: 2 x P(X <= min(b, c)) for X ~ Binomial(b + c, 1/2), at most 1.

    Computed in exact integers (so 1e-9 agreement with scipy's binomtest is by construction)."""
    m = b + c
    if m == 0:
        return 1.0
    tail = sum(math.comb(m, k) for k in range(min(b, c) + 1))
    return float(min(Fraction(1), Fraction(2 * tail, 2**m)))


def _ties(n: int, magnitude: float) -> float:
    """How far two float sums of the same n terms (of total magnitude `magnitude`) added in
    another order can lie apart: the bound of recursive summation, n x eps x magnitude, four
    times over (the observed sum, and a null sum as the difference of two projections).

    Sums within it are ties. scipy's tolerance, relative to the observed sum, misses them when
    that sum is 0: the p of a balanced comparison (as many tenths up as down, common for pass
    rates) then fell below 1."""
    return 4 * n * float(np.finfo(float).eps) * magnitude


def sign_flip_p(d: np.ndarray, null: np.ndarray, magnitude: float) -> tuple[float, bool]:
    """Two-sided sign-flip p of sum(d): exhaustive over the nonzero differences when they allow
    at most as many patterns as there are resamples, else from the resampled `null` sums.
    `magnitude`: sum |a_i| + |b_i| of the two sides, which the null sums were projected from."""
    nonzero = d[d != 0]
    m = nonzero.size
    if m == 0:
        return 1.0, True
    observed = float(nonzero.sum())
    tol = _ties(d.size, magnitude)
    if 2**m <= null.size:
        patterns = 1 - 2 * ((np.arange(2**m)[:, None] >> np.arange(m)) & 1)
        sums = patterns @ nonzero
        less, greater = np.mean(sums <= observed + tol), np.mean(sums >= observed - tol)
        return float(min(1.0, 2 * min(less, greater))), True
    less = (np.sum(null <= observed + tol) + 1) / (null.size + 1)
    greater = (np.sum(null >= observed - tol) + 1) / (null.size + 1)
    return float(min(1.0, 2 * min(less, greater))), False


@functools.lru_cache(maxsize=65_536)
def minimum_detectable_pp(
    second_moment: float,
    n: int,
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
) -> float:
    """(z_{1-alpha/2} + z_{power}) x sqrt(max(E[d^2], 1/n) / n), in percentage points."""
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    return 100 * z * math.sqrt(max(second_moment, 1 / n) / n)
