"""pass@k and best@k: the one scoring module. Pure functions of counts and scores.

Everything that turns a setting's executions into its numbers is here, and only here: the
store writer (orchestrator/run/execute/rows.py), a benchmark's own headline (InfiBench's best@10,
workers/benchmarks/infibench/aggregate.py), and every reader (the report's grid, the Every Eval
Ever export, backend agreement) call these functions.

It sits in `workers` (beside the contract types `spec` and `keys`) because a benchmark's
worker-side code needs it (best@k is InfiBench's aggregate), and workers never import the
driver; the driver's wings may all import it.

* **pass@k** (Chen et al., human-eval): per problem the unbiased 1 - C(n - c, k) / C(n, k),
  mean over problems, for each k such that every problem has n >= k (the harness).
* **pass@1 exactly**: the mean over problems of c/n as a fraction, kept as the count the
  literature's k/n reasoning reads: numerator / (problems x L), L the least common multiple of
  the problems' sample counts. With m samples for every problem that is
  n_passed / (problems x m): "k/(164 x samples)".
* **best@k** (InfiBench's `avg_max_10`): a problem's samples, in sample order, split into
  consecutive groups of k; each group keeps its best score (floored at 0, as the official
  statistic starts its running best at 0). Group totals T_g over problems give the score
  mean(T_g) / full score and its spread: the sample standard deviation of T_g (ddof=1; 0 with a
  single group). A problem's part of the score is the mean of its group bests.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

HARNESS_KS = (1, 10, 100)


def estimate_pass_at_k(
    num_samples: Sequence[int], num_correct: Sequence[int], k: int
) -> np.ndarray:
    """Unbiased pass@k per problem: 1 - C(n - c, k) / C(n, k), computed as
    1 - prod_{i = n - c + 1}^{n} (1 - k / i), and 1.0 when n - c < k (human-eval, Chen et al.)."""

    def one(n: int, c: int) -> float:
        if n - c < k:
            return 1.0
        return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))

    return np.array([one(int(n), int(c)) for n, c in zip(num_samples, num_correct, strict=True)])


def pass_at_k(
    num_samples: Sequence[int], num_correct: Sequence[int], ks: Sequence[int] = HARNESS_KS
) -> dict[int, float]:
    """Mean pass@k over problems, for each k such that every problem has n >= k (the harness)."""
    if len(num_samples) == 0:
        return {}
    smallest = min(num_samples)
    return {
        k: float(estimate_pass_at_k(num_samples, num_correct, k).mean())
        for k in ks
        if smallest >= k
    }


@dataclass(frozen=True)
class ProblemCounts:
    """Samples and passing samples per problem, in problem order."""

    task_ids: tuple[str, ...]
    n: tuple[int, ...]
    c: tuple[int, ...]


def problem_counts(task_ids: Sequence[str], passed: Sequence[bool]) -> ProblemCounts:
    """Count samples and passes per problem from execution rows (one row per sample); problems
    in sorted task-id order."""
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


def pass1_count(counts: ProblemCounts) -> tuple[int, int]:
    """pass@1 as (numerator, denominator), not reduced: denominator = problems x L, L the least
    common multiple of the problems' sample counts (m for m samples each: n_passed/(N x m))."""
    if not counts.n:
        raise ValueError("no problems")
    common = math.lcm(*counts.n)
    numerator = sum(c * (common // n) for n, c in zip(counts.n, counts.c, strict=True))
    return numerator, len(counts.n) * common


def exact_pass1(counts: ProblemCounts) -> Fraction:
    """Mean unbiased pass@1 over problems as an exact fraction (k/164 for one greedy sample)."""
    numerator, denominator = pass1_count(counts)
    return Fraction(numerator, denominator)


def pass_at_1_of(passed: Mapping[tuple[str, int], bool]) -> float | None:
    """pass@1 of samples keyed by (task id, sample index); None without samples."""
    if not passed:
        return None
    tasks = [task for task, _ in passed]
    return float(exact_pass1(problem_counts(tasks, list(passed.values()))))


# ---------------------------------------------------------------------------------------------
# best@k


def group_best(scores: Sequence[float], k: int) -> list[float]:
    """max(0, max of each consecutive group of k) of one problem's scores, in sample order."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return [max(0.0, *scores[i : i + k]) for i in range(0, len(scores), k)]


@dataclass(frozen=True)
class GroupSpread:
    """Group totals T_g of some problems and what best@k reports of them."""

    group_totals: tuple[float, ...]  # T_g, points
    full_score: float  # summed full scores of the problems
    mean: float  # mean of T_g (points)
    std: float  # sample std of T_g (points), 0 with one group

    @property
    def fraction(self) -> float:
        """The score: mean(T_g) / full score (0 without a full score)."""
        return self.mean / self.full_score if self.full_score else 0.0

    @property
    def std_fraction(self) -> float:
        return self.std / self.full_score if self.full_score else 0.0


def group_spread(totals: Sequence[float], full_score: float) -> GroupSpread:
    """best@k's score and spread from group totals: mean(T_g) and stdev(T_g) (ddof=1)."""
    mean = statistics.fmean(totals) if totals else 0.0
    std = statistics.stdev(totals) if len(totals) > 1 else 0.0
    return GroupSpread(tuple(totals), full_score, mean, std)


# ---------------------------------------------------------------------------------------------
# What the store keeps of a setting's scoring (the scores table's count columns)


@dataclass(frozen=True)
class SettingCounts:
    """Exact counts of one setting's executions: what the scores row stores so that no reader
    reconstructs a fraction. `problem_scores` is each problem's part of the headline metric (c/n
    for pass@1; a benchmark's own headline, e.g. the mean of its group bests, replaces them)."""

    counts: ProblemCounts
    pass_at: Mapping[int, float]  # pass@k for the k every problem has samples for
    problem_scores: tuple[float, ...]

    @property
    def n_scored(self) -> int:
        """Samples scored (execution rows)."""
        return sum(self.counts.n)

    @property
    def n_passed(self) -> int:
        return sum(self.counts.c)

    def columns(self) -> dict[str, Any]:
        """The scores row's count columns (storage/schema.py SCORES, schema version 5)."""
        numerator, denominator = pass1_count(self.counts) if self.counts.n else (None, None)
        return {
            "n_scored": self.n_scored,
            "n_passed": self.n_passed,
            "pass_at_1_numerator": numerator,
            "pass_at_1_denominator": denominator,
            "problem_ids": list(self.counts.task_ids),
            "problem_n_samples": list(self.counts.n),
            "problem_n_passed": list(self.counts.c),
            "problem_scores": list(self.problem_scores),
        }


def setting_counts(
    task_ids: Sequence[str], passed: Sequence[bool], ks: Sequence[int] = HARNESS_KS
) -> SettingCounts:
    """A setting's counts from its execution rows (task id and passed, one per sample)."""
    counts = problem_counts(task_ids, passed)
    scores = tuple(float(v) for v in per_problem_pass1(counts)) if counts.n else ()
    return SettingCounts(counts, pass_at_k(counts.n, counts.c, ks), scores)


def stored_counts(row: Mapping[str, Any]) -> ProblemCounts | None:
    """The per-problem counts a scores row stores (schema version 5); None for a row written
    before them (the reader derives them from the executions: report/tables/scored.py)."""
    ids, n, c = (
        listed(row.get(name)) for name in ("problem_ids", "problem_n_samples", "problem_n_passed")
    )
    if ids is None or n is None or c is None:
        return None
    return ProblemCounts(tuple(map(str, ids)), tuple(map(int, n)), tuple(map(int, c)))


def listed(value: Any) -> list[Any] | None:
    """A stored list column's value as a list of Python values (a NumPy array, as a frame holds
    it, through its `tolist`); None for a null (NaN once read into a frame)."""
    if value is None or isinstance(value, float):
        return None
    tolist = getattr(value, "tolist", None)
    return tolist() if callable(tolist) else list(value)
