"""Bootstrap confidence intervals over problems. Pure.

The interval is a percentile bootstrap over problems: draw the benchmark's problems with
replacement `n_resamples` times (default 10,000) from a NumPy `default_rng(seed)` (default seed
0, so a report is reproducible), take the mean per-problem score of each draw (pass@1: c/n;
best@k: the mean of the problem's group bests; workers/scoring.py), and report the
(1 - confidence)/2 and (1 + confidence)/2 quantiles (default 95%). Samples of a problem stay
together: the problem is the unit of resampling. A greedy setting (one sample) gets an interval
too: it measures how much the score depends on which problems the benchmark happens to hold.

The draws index the per-problem scores in ascending order. The bootstrap distribution of a mean
does not depend on the order of the values, so this changes no property of the interval, and it
makes the interval a function of the scores alone: two settings with the same scores (a grid
of one-sample settings over 164 problems has at most 165 distinct score multisets) get the same
interval, computed once (a 6,000-setting report spent two minutes redrawing them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from orchestrator.analysis.paired import draw_resamples
from workers.scoring import ProblemCounts, per_problem_pass1

DEFAULT_RESAMPLES = 10_000
DEFAULT_CONFIDENCE = 0.95
DEFAULT_SEED = 0
_CHUNK = 2_000  # resamples drawn at a time (bounds memory: chunk x problems indices)


@dataclass(frozen=True)
class Interval:
    estimate: float  # the mean over problems of the original data
    low: float
    high: float
    n_resamples: int
    confidence: float


def bootstrap_interval(
    values: Sequence[float] | np.ndarray,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
) -> Interval:
    """Percentile bootstrap interval of the mean of `values` (one value per problem), drawn
    over the values in ascending order (the module's docstring says why)."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("bootstrap needs at least one value")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    low, high = _interval(tuple(np.sort(data).tolist()), n_resamples, confidence, seed)
    return Interval(float(data.mean()), low, high, n_resamples, confidence)


@lru_cache(maxsize=4096)
def _interval(
    values: tuple[float, ...], n_resamples: int, confidence: float, seed: int
) -> tuple[float, float]:
    if all(v in (0.0, 1.0) for v in values):
        means = _pass_fail_means(len(values), n_resamples, seed, int(sum(values)))
    else:
        means = _drawn_means(values, n_resamples, seed)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return float(low), float(high)


def _drawn_means(values: tuple[float, ...], n_resamples: int, seed: int) -> np.ndarray:
    """Each resample's mean, drawing `n_resamples` x n indices into `values`."""
    data = np.array(values)
    rng = np.random.default_rng(seed)
    means = np.empty(n_resamples)
    for start in range(0, n_resamples, _CHUNK):
        size = min(_CHUNK, n_resamples - start)
        idx = rng.integers(0, data.size, size=(size, data.size))
        means[start : start + size] = data[idx].mean(axis=1)
    return means


def _pass_fail_means(n: int, n_resamples: int, seed: int, passed: int) -> np.ndarray:
    """`_drawn_means` of n sorted values, the last `passed` of them 1 and the others 0: a
    resample's mean is how many of its draws fall on the last `passed` positions, over n. The
    draws are `draw_resamples`'s (the same stream, as counts per position), so the means are
    the same floats, without drawing them again for each of the n + 1 possible counts (a
    report's settings share these few counts)."""
    return _tail_counts(n, n_resamples, seed)[:, passed] / n


@lru_cache(maxsize=4)
def _tail_counts(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """(resamples, n + 1): column k holds how many of a resample's draws fall on the last k
    positions."""
    counts = draw_resamples(n, n_resamples, seed).counts.astype(np.int32)
    tail = np.zeros((n_resamples, n + 1), np.int32)
    np.cumsum(counts[:, ::-1], axis=1, out=tail[:, 1:])
    tail.flags.writeable = False
    return tail


def pass1_interval(
    counts: ProblemCounts,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
) -> Interval:
    """pass@1 (unbiased, mean over problems) with its bootstrap interval over problems."""
    return bootstrap_interval(per_problem_pass1(counts), n_resamples, confidence, seed)
