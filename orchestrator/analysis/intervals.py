"""Unbiased pass@1 per problem and bootstrap confidence intervals over problems. Pure.

The interval is a percentile bootstrap over problems: draw the benchmark's problems with
replacement `n_resamples` times (default 10,000) from a NumPy `default_rng(seed)` (default seed
0, so a report is reproducible), take the mean per-problem pass@1 of each draw, and report the
(1 - confidence)/2 and (1 + confidence)/2 quantiles (default 95%). Samples of a problem stay
together: the problem is the unit of resampling. A greedy setting (one sample) gets an interval
too: it measures how much the score depends on which problems the benchmark happens to hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from orchestrator.analysis.metrics import estimate_pass_at_k

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


@dataclass(frozen=True)
class ProblemCounts:
    """Samples and passing samples per problem, in problem order."""

    task_ids: tuple[str, ...]
    n: tuple[int, ...]
    c: tuple[int, ...]


def problem_counts(task_ids: Sequence[str], passed: Sequence[bool]) -> ProblemCounts:
    """Count samples and passes per problem from execution rows (one row per sample)."""
    n: dict[str, int] = {}
    c: dict[str, int] = {}
    for task, ok in zip(task_ids, passed, strict=True):
        n[task] = n.get(task, 0) + 1
        c[task] = c.get(task, 0) + int(bool(ok))
    tasks = tuple(sorted(n))
    return ProblemCounts(tasks, tuple(n[t] for t in tasks), tuple(c[t] for t in tasks))


def per_problem_pass1(counts: ProblemCounts) -> np.ndarray:
    """The unbiased pass@1 of each problem: 1 - C(n-c, 1)/C(n, 1) = c/n."""
    return estimate_pass_at_k(counts.n, counts.c, 1)


def exact_pass1(counts: ProblemCounts) -> Fraction:
    """Mean unbiased pass@1 over problems as an exact fraction (k/164 for one greedy sample)."""
    if not counts.n:
        raise ValueError("no problems")
    total = sum((Fraction(c, n) for n, c in zip(counts.n, counts.c, strict=True)), Fraction(0))
    return total / len(counts.n)


def bootstrap_interval(
    values: Sequence[float] | np.ndarray,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
) -> Interval:
    """Percentile bootstrap interval of the mean of `values` (one value per problem)."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("bootstrap needs at least one value")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    rng = np.random.default_rng(seed)
    means = np.empty(n_resamples)
    for start in range(0, n_resamples, _CHUNK):
        size = min(_CHUNK, n_resamples - start)
        idx = rng.integers(0, data.size, size=(size, data.size))
        means[start : start + size] = data[idx].mean(axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return Interval(float(data.mean()), float(low), float(high), n_resamples, confidence)


def pass1_interval(
    counts: ProblemCounts,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
) -> Interval:
    """pass@1 (unbiased, mean over problems) with its bootstrap interval over problems."""
    return bootstrap_interval(per_problem_pass1(counts), n_resamples, confidence, seed)
