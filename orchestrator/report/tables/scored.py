"""A setting's score with the exact counts behind it, as every reader of a store gets it.

The writer stores the counts in the scores row (schema version 5, workers/scoring.py): samples
scored, pass@1 as numerator / denominator, and per problem its samples, passing samples and
part of the headline. A row written before version 5 lacks them; this is the one place where
they are derived instead, once, from the setting's executions with the same scoring module:
per-problem samples and passes (and so pass@1's count and its per-problem c/n) are exact from
the executions; a benchmark's own per-problem headline (best@k of graded scores) is not, so such
a row has no per-problem scores (and no interval). `derived` says which rows were derived.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from storage.store import Store
from workers.scoring import (
    ProblemCounts,
    exact_pass1,
    listed,
    per_problem_pass1,
    problem_counts,
    stored_counts,
)

PASS_AT_1 = "pass@1"


@dataclass(frozen=True)
class Scored:
    counts: ProblemCounts | None  # per problem: samples and passing samples
    problem_scores: tuple[float, ...] | None  # per problem: its part of the headline
    exact: Fraction | None  # the headline: pass@1 as its stored count, else the stored value
    derived: bool  # the counts were derived from the executions (a row before version 5)


def _present(value: Any) -> bool:
    return value is not None and value == value  # not None, not NaN


def _headline(score: Mapping[str, Any], counts: ProblemCounts | None) -> Fraction | None:
    if score.get("metric") == PASS_AT_1:
        numerator: Any = score.get("pass_at_1_numerator")
        denominator: Any = score.get("pass_at_1_denominator")
        if _present(numerator) and _present(denominator):
            return Fraction(int(numerator), int(denominator))
        return exact_pass1(counts) if counts is not None and counts.n else None
    value: Any = score.get("value")  # a graded score: the float the benchmark computed, exactly
    return Fraction(value) if _present(value) else None


def _from_executions(store: Store, key: str) -> ProblemCounts | None:
    shard = store.read_shard("executions", key)
    if shard is None or shard.num_rows == 0:
        return None
    rows = shard.select(["task_id", "passed"]).to_pydict()
    return problem_counts(rows["task_id"], rows["passed"])


def scored(store: Store, score: Mapping[str, Any]) -> Scored:
    """The counts of one scores row: stored, or (a row before version 5) derived once from the
    setting's executions."""
    counts = stored_counts(score)
    if counts is not None:
        values = listed(score.get("problem_scores"))
        scores = tuple(map(float, values)) if values is not None else None
        return Scored(counts, scores, _headline(score, counts), derived=False)
    counts = _from_executions(store, str(score["setting_key"]))
    pass1 = score.get("metric") == PASS_AT_1 and counts is not None and bool(counts.n)
    derived = tuple(float(v) for v in per_problem_pass1(counts)) if pass1 and counts else None
    return Scored(counts, derived, _headline(score, counts), derived=True)
