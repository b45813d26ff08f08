"""A setting's outcome per problem, the unit every paired test works on. Pure.

* pass@1 with one sample per problem: pass or fail (`bool`), so two such settings get the exact
  McNemar test;
* pass@1 with several samples: the problem's unbiased pass@1, c / n (Chen et al. 2021), a float;
* InfiBench's best@10: the question's best score in each consecutive group of 10 responses
  (floored at 0), averaged over groups; a question with a response that could not be scored
  (no score: a missing toolchain, a grading error) scores 0 in every group, as the official
  statistic does. With every question's full score 1.0, the mean of these over questions is the
  official best@10 (workers/benchmarks/infibench/aggregate.py).

The mean of a setting's outcomes over its problems is its score; `ProblemOutcomes.score` gives
it so a caller can check it against the stored one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from workers.scoring import ProblemCounts

BEST_OF_GROUP = 10


@dataclass(frozen=True)
class ProblemOutcomes:
    task_ids: tuple[str, ...]  # sorted
    values: np.ndarray  # bool (one sample per problem) or float in [0, 1], in task_ids order

    @property
    def score(self) -> float:
        return float(self.values.astype(float).mean()) if self.values.size else math.nan

    @property
    def binary(self) -> bool:
        return self.values.dtype == bool

    def as_mapping(self) -> dict[str, bool | float]:
        return dict(zip(self.task_ids, self.values.tolist(), strict=True))


def outcomes_of_counts(counts: ProblemCounts) -> ProblemOutcomes:
    """Pass/fail when every problem has one sample, else each problem's c/n."""
    if all(n == 1 for n in counts.n):
        return ProblemOutcomes(counts.task_ids, np.array([c == 1 for c in counts.c], dtype=bool))
    values = np.array([c / n for n, c in zip(counts.n, counts.c, strict=True)], dtype=float)
    return ProblemOutcomes(counts.task_ids, values)


def best_of_outcomes(
    task_ids: Sequence[str],
    sample_index: Sequence[int],
    scores: Sequence[float | None],
    scored: Sequence[bool] | None = None,
    group: int = BEST_OF_GROUP,
) -> ProblemOutcomes:
    """best@`group` per question from execution rows: the mean over consecutive groups of
    `group` responses (by sample index) of the group's best score, floored at 0; 0 for a
    question with a response without a score or not `scored` (a grading error, a missing
    toolchain: the execution's outcome)."""
    flags = [True] * len(task_ids) if scored is None else list(scored)
    by_task: dict[str, list[tuple[int, float]]] = {}
    for task, index, score, ok in zip(task_ids, sample_index, scores, flags, strict=True):
        value = math.nan if score is None or not ok else float(score)
        by_task.setdefault(task, []).append((int(index), value))
    tasks = tuple(sorted(by_task))
    values = []
    for task in tasks:
        ordered = [v for _, v in sorted(by_task[task])]
        if any(math.isnan(v) for v in ordered):
            values.append(0.0)  # unscorable: 0 in every group (aggregate._case_best)
            continue
        bests = [max(0.0, *ordered[i : i + group]) for i in range(0, len(ordered), group)]
        values.append(sum(bests) / len(bests))
    out = np.clip(np.array(values, dtype=float), 0.0, 1.0)
    return ProblemOutcomes(tasks, out)


def mean_outcomes(members: Sequence[ProblemOutcomes]) -> ProblemOutcomes:
    """The outcome of a cell of several settings (same axes): their per-problem mean, which
    keeps pass/fail when there is one member. Every member must hold the same problems."""
    if not members:
        raise ValueError("a cell needs at least one setting")
    first = members[0]
    if any(m.task_ids != first.task_ids for m in members):
        raise ValueError("the settings of one cell hold different problems")
    if len(members) == 1:
        return first
    stacked = np.array([m.values.astype(float) for m in members])
    return ProblemOutcomes(first.task_ids, stacked.mean(axis=0))
