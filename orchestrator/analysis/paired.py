"""The paired comparison of two settings on the same problems. Pure.

Sign convention: **A is the reference, B the changed setting**, and every difference is
**B minus A**: `delta_pp` = 100 x (mean score of B - mean score of A), positive when B scores
higher. `b` counts the problems where A does better (only A passes, for one sample), `c` those
where B does better (only B passes), so with one sample per problem `delta_pp` = 100 (c - b) / n.

Which test (see docs/statistics.md):

* **One sample per problem on both sides** (greedy, or pass@1 from n = 1; outcomes given as
  `bool`): the exact McNemar test, the two-sided binomial test of b against b + c with p = 1/2
  (`scipy.stats.binomtest(b, b + c)`, `statsmodels...mcnemar(exact=True)`).
* **Otherwise** (several samples per problem: the per-problem pass rate c/n; InfiBench's
  best@10; any score in [0, 1] per problem, given as floats): a two-sided sign-flip permutation
  test of the mean per-problem difference d_i (each problem's difference keeps or flips its
  sign: `scipy.stats.permutation_test(..., permutation_type="samples")`), exhaustive when the
  problems with a nonzero difference allow at most `n_resamples` sign patterns, else random with
  the +1 correction (scipy's definition: twice the smaller one-sided p, at most 1).
* **Both**: a percentile bootstrap interval for the mean difference, resampling problems with
  replacement (the problem is the unit: a problem's samples are already folded into its score).

Many comparisons on the same problems share one `Resamples`: the same bootstrap draws and the
same sign flips for every comparison (what a joint bootstrap needs, e.g. Westfall-Young in
`orchestrator.analysis.multiplicity`), drawn from `numpy.random.default_rng(seed)`, so a report
is reproducible and `compare_paired(a, b)` equals the same comparison inside a report with the
same seed.

`mdd_pp`, the minimum detectable difference at 80% power and two-sided alpha = 0.05, is the normal
approximation (z_{1-alpha/2} + z_{power}) x sqrt(mean(d^2) / n): mean(d^2) is the discordant
fraction f for one sample per problem (the variance of d under "no difference"), so this is the
2.8 x sqrt(f / n) of docs/statistics.md. With no discordant problem at all, f is taken as one
problem in n: the smallest discordance a difference could have, so the figure stays a difference
the test could see rather than 0.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist
from typing import NamedTuple, TypeVar

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


def compare_paired(
    a: np.ndarray | Sequence[bool] | Sequence[float],
    b: np.ndarray | Sequence[bool] | Sequence[float],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> PairedResult:
    """Compare B with A on aligned per-problem outcomes (same order, same problems).

    `bool` outcomes on both sides (one sample per problem) get the exact McNemar test; scores in
    [0, 1] (several samples, best@10; a bool side is then read as 0/1) the sign-flip test. Both
    get a percentile bootstrap interval over problems."""
    xa, xb = _vector(a), _vector(b)
    if xa.shape != xb.shape:
        raise PairingError(f"A holds {xa.size} problems, B {xb.size}: align them first")
    return compare_rows([xa], [xb], draw_resamples(xa.size, n_resamples, seed), confidence)[0]


def compare_rows(
    a_rows: Sequence[np.ndarray],
    b_rows: Sequence[np.ndarray],
    resamples: Resamples,
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[PairedResult]:
    """`compare_paired` of each (a_rows[i], b_rows[i]), all with the same draws (vectorised)."""
    if len(a_rows) != len(b_rows):
        raise PairingError(f"{len(a_rows)} A rows but {len(b_rows)} B rows")
    m = len(a_rows)
    return compare_pairs([*a_rows, *b_rows], [(i, m + i) for i in range(m)], resamples, confidence)


PAIR_CHUNK = 128  # pairs whose (pairs x resamples) bootstrap means are held at once
HELD_PROJECTIONS = 8_000_000  # rows x resamples projected once up front (64 MB), else per chunk


class PairColumns(NamedTuple):
    """`compare_pairs`'s results as columns, one value per pair (a view's 177,000 pairs are
    shown from these without a PairedResult each). Means are fractions, not percent."""

    n: int
    b: np.ndarray  # problems where A does better
    c: np.ndarray
    mean_a: np.ndarray
    mean_d: np.ndarray  # B minus A
    low: np.ndarray  # percentile bootstrap interval of mean_d
    high: np.ndarray
    second_moment: np.ndarray  # mean(d^2), for the minimum detectable difference
    exact: np.ndarray  # McNemar (both sides pass/fail); else the sign-flip test
    p_value: list[float]
    exhaustive: list[bool]

    def mdd_pp(self) -> list[float]:
        """Each pair's `minimum_detectable_pp` (few distinct values: computed once each)."""
        moments = self.second_moment.tolist()
        of = {m: minimum_detectable_pp(m, self.n) for m in set(moments)}
        return [of[m] for m in moments]


def compare_pairs(
    rows: Sequence[np.ndarray | Sequence[bool] | Sequence[float]],
    pairs: Sequence[tuple[int, int]],
    resamples: Resamples,
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[PairedResult]:
    """`compare_paired(rows[i], rows[j])` for each (i, j) of `pairs`, all with the same draws
    (`compare_columns`, one PairedResult per pair)."""
    found = compare_columns(rows, pairs, resamples, confidence)
    mdd = found.mdd_pp()
    return [
        PairedResult(
            n=found.n,
            b=int(found.b[k]),
            c=int(found.c[k]),
            score_a_pct=100 * float(found.mean_a[k]),
            score_b_pct=100 * float(found.mean_a[k] + found.mean_d[k]),
            delta_pp=100 * float(found.mean_d[k]),
            ci_low_pp=100 * float(found.low[k]),
            ci_high_pp=100 * float(found.high[k]),
            p_value=found.p_value[k],
            method=PairedMethod.EXACT_MCNEMAR if found.exact[k] else PairedMethod.SIGN_FLIP,
            mdd_pp=mdd[k],
            confidence=confidence,
            n_resamples=resamples.n_resamples,
            seed=resamples.seed,
            exhaustive=found.exhaustive[k],
        )
        for k in range(len(pairs))
    ]


def compare_columns(
    rows: Sequence[np.ndarray | Sequence[bool] | Sequence[float]],
    pairs: Sequence[tuple[int, int]],
    resamples: Resamples,
    confidence: float = DEFAULT_CONFIDENCE,
) -> PairColumns:
    """`compare_paired(rows[i], rows[j])` for each (i, j) of `pairs`, all with the same draws,
    as columns.

    Every resampled statistic is linear in the outcomes, so each row is projected onto the
    draws (problems x resamples) and a pair's bootstrap means and sign-flip sums are the
    difference of its two rows' projections: all pairs of a 60-setting grid (1,770) cost
    little more than its 60 rows. Identical rows are projected once; when the distinct rows
    are too many to hold (a 100-model grid's 6,000 comparisons), each chunk of pairs projects
    its own. Pass/fail pairs read their intervals off a histogram (`_Projections`)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    n, size = resamples.n_problems, len(pairs)
    b, c = np.zeros(size, np.int64), np.zeros(size, np.int64)
    mean_a, mean_d, low, high, second_moment = (np.zeros(size) for _ in range(5))
    p_value, exhaustive = [1.0] * size, [True] * size
    if not pairs:
        return PairColumns(n, b, c, mean_a, mean_d, low, high, second_moment, b > 0, [], [])
    vectors = [_vector(x) for x in rows]
    if any(x.size != n for x in vectors):
        raise PairingError(f"every outcome vector must hold the resamples' {n} problems")
    distinct, row_of = np.unique(
        np.array([v.astype(float) for v in vectors]), axis=0, return_inverse=True
    )
    row_of = row_of.reshape(-1)
    first = np.array([i for i, _ in pairs])
    second = np.array([j for _, j in pairs])
    is_bool = np.array([v.dtype == bool for v in vectors])
    exact = is_bool[first] & is_bool[second]  # McNemar; else the sign-flip test
    projections = _Projections(distinct, resamples)
    ia, ib = row_of[first], row_of[second]
    levels = ((1 - confidence) / 2, (1 + confidence) / 2)
    for chunk in projections.chunks(ia, ib):
        a, z = ia[chunk], ib[chunk]
        low[chunk], high[chunk] = projections.intervals(a, z, levels)
        d = distinct[z] - distinct[a]
        b[chunk], c[chunk] = np.sum(d < 0, axis=1), np.sum(d > 0, axis=1)
        mean_a[chunk], mean_d[chunk] = distinct[a].mean(axis=1), d.mean(axis=1)
        second_moment[chunk] = (d**2).mean(1)
        if exact[chunk].all():
            counts = zip(chunk.tolist(), b[chunk].tolist(), c[chunk].tolist(), strict=True)
            for at, worse, better in counts:
                p_value[at] = mcnemar_exact_p(worse, better)
            continue
        null = projections.sign_flip_sums(a, z)
        for k, at in enumerate(chunk.tolist()):
            if exact[at]:
                p_value[at] = mcnemar_exact_p(int(b[at]), int(c[at]))
                continue
            magnitude = float(np.abs(distinct[a[k]]).sum() + np.abs(distinct[z[k]]).sum())
            p_value[at], exhaustive[at] = _sign_flip_p(d[k], null[k], magnitude)
    return PairColumns(
        n, b, c, mean_a, mean_d, low, high, second_moment, exact, p_value, exhaustive
    )


class _Projections:
    """The distinct rows' bootstrap sums and sign-flip sums (rows x resamples), held when they
    fit in HELD_PROJECTIONS values and otherwise projected per chunk of pairs; and each pair's
    percentile interval of B minus A's mean.

    A row of 0s and 1s has whole-number bootstrap sums in [0, n], so a pair of them has R
    resampled differences that are integers in [-n, n]: a histogram of them (one bincount for
    a chunk of pairs) gives any order statistic by counting, without sorting R values per pair,
    and the percentile interpolates between the two neighbouring order statistics as
    numpy.quantile's `linear` method does (the same value to rounding). A report's ~180,000
    pairs of a 100-model grid took a minute with numpy.quantile. Other pairs take
    numpy.quantile."""

    def __init__(self, x: np.ndarray, resamples: Resamples) -> None:
        self.x, self.resamples, self.n = x, resamples, resamples.n_problems
        self.whole = np.all((x == 0) | (x == 1), axis=1)
        self.held = x.shape[0] * resamples.n_resamples <= HELD_PROJECTIONS
        # a whole row's bootstrap sums lie in [0, n]: held (and gathered per pair) as int16 when
        # n allows, a quarter of intp's bytes; and projected in float32, exactly (whole numbers
        # below 2^24 in any order of summation), in half the time of float64
        self.counted_dtype = np.dtype(np.int16 if self.n < 2**15 else np.int32)
        exact32 = self.n < 2**24
        self._counts32 = resamples.counts.astype(np.float32) if exact32 else None
        self._sums: np.ndarray | None = None
        self._counted: np.ndarray | None = None
        if self.held and self.whole.all():  # only pass/fail pairs: no float sums needed
            self._counted = self._whole_sums(x).astype(self.counted_dtype)
        elif self.held:
            sums = x @ resamples.counts.T
            self._sums, self._counted = sums, sums.astype(self.counted_dtype)
        self._flips: np.ndarray | None = None  # projected on the first sign-flip test

    def chunks(self, ia: np.ndarray, ib: np.ndarray) -> list[np.ndarray]:
        """Positions of the pairs, PAIR_CHUNK at a time, pass/fail pairs and others apart."""
        counted = self.whole[ia] & self.whole[ib]
        out = []
        for kind in (True, False):
            chosen = np.flatnonzero(counted == kind)
            out += [chosen[at : at + PAIR_CHUNK] for at in range(0, chosen.size, PAIR_CHUNK)]
        return out

    def _pairs_of(
        self, ia: np.ndarray, ib: np.ndarray, held: np.ndarray | None, draws: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The two sides' projections onto `draws` (from `held` when it is there)."""
        if held is not None:
            return held[ia], held[ib]
        rows, at = np.unique(np.concatenate([ia, ib]), return_inverse=True)
        projected = self.x[rows] @ draws.T
        return projected[at[: ia.size]], projected[at[ia.size :]]

    def _whole_sums(self, x: np.ndarray) -> np.ndarray:
        """Whole rows' bootstrap sums (exact in float32 when n allows)."""
        if self._counts32 is None:
            return x @ self.resamples.counts.T
        return x.astype(np.float32) @ self._counts32.T

    def sign_flip_sums(self, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
        if self.held and self._flips is None:
            self._flips = self.x @ self.resamples.signs.T
        a, b = self._pairs_of(ia, ib, self._flips, self.resamples.signs)
        return b - a

    def intervals(
        self, ia: np.ndarray, ib: np.ndarray, levels: tuple[float, float]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per pair (a chunk from `chunks`, all pass/fail or none), the percentile interval."""
        if not (self.whole[ia] & self.whole[ib]).all():
            a, b = self._pairs_of(ia, ib, self._sums, self.resamples.counts)
            low, high = np.quantile(b / self.n - a / self.n, levels, axis=1)
            return low, high
        if self._counted is not None:
            a, b = self._counted[ia], self._counted[ib]
        else:
            rows, at = np.unique(np.concatenate([ia, ib]), return_inverse=True)
            projected = self._whole_sums(self.x[rows]).astype(self.counted_dtype)
            a, b = projected[at[: ia.size]], projected[at[ia.size :]]
        width = 2 * self.n + 1
        # a bin per pair and value in [-n, n], then moved to the pair's bins: in intp, which
        # bincount counts without a copy (from int32 it casts first, 15% of this); widened
        # first and subtracted in place: np.subtract(b, a, dtype=np.intp) casts through a
        # buffer, 3x slower than both together
        diffs = b.astype(np.intp)
        np.subtract(diffs, a, out=diffs)
        np.add(diffs, (np.arange(ia.size, dtype=np.intp) * width + self.n)[:, None], out=diffs)
        counts = np.bincount(diffs.ravel(), minlength=ia.size * width)
        below = np.cumsum(counts.reshape(ia.size, width), axis=1)  # values <= each bin
        last = self.resamples.n_resamples - 1
        out = []
        for level in levels:
            h = last * level  # numpy.quantile's virtual index and interpolation (`linear`)
            f = math.floor(h)
            lo = (np.sum(below <= f, axis=1) - self.n) / self.n
            hi = (np.sum(below <= min(f + 1, last), axis=1) - self.n) / self.n
            out.append(_lerp(lo, hi, h - f))
        return out[0], out[1]


def _lerp(a: np.ndarray, b: np.ndarray, t: float) -> np.ndarray:
    """numpy's interpolation between neighbouring order statistics (`numpy.lib._function_base
    _impl._lerp`): from the nearer end, so that t = 0 and t = 1 return a and b exactly."""
    return b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t


def _vector(x: np.ndarray | Sequence[bool] | Sequence[float]) -> np.ndarray:
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


def _sign_flip_p(d: np.ndarray, null: np.ndarray, magnitude: float) -> tuple[float, bool]:
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
