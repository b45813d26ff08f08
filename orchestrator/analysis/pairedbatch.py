"""Many paired comparisons on the same problems at once, all with the same draws: each row is
projected onto the draws once, and a pair's bootstrap means and sign-flip sums are the
difference of its two rows' projections (`compare_columns`). `orchestrator.analysis.paired`
is the face: `compare_paired` of one pair, `compare_rows` of many, both through here. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from orchestrator.analysis.pairedstats import (
    DEFAULT_CONFIDENCE,
    PairedMethod,
    PairedResult,
    PairingError,
    Resamples,
    mcnemar_exact_p,
    minimum_detectable_pp,
    outcome_vector,
    sign_flip_p,
)

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
    vectors = [outcome_vector(x) for x in rows]
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
            p_value[at], exhaustive[at] = sign_flip_p(d[k], null[k], magnitude)
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
