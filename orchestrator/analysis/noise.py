"""The re-generation noise floor, from `repeat-check` results. Pure.

`repeat-check` re-generates the first problems of finished settings through their own backend,
runs the programs that changed, and records per setting how much each checked problem's outcome
moved: `outcome_change_sum` = sum over checked problems of |repeated - stored| per-problem
score (pass/fail flips for one sample per problem; c/n changes for several). Its share of the
checked problems is the most two runs of one setting could differ by, in score, on those
problems: the **noise floor** of the backend, in percentage points,

    noise_pp(backend) = 100 x sum(outcome_change_sum) / sum(n_problems)

over every recorded check of a setting on that backend. A difference between two settings then
counts only when its adjusted p < 0.05 *and* |delta| exceeds the floor of the backends involved
(docs/statistics.md); without a check of a backend its floor is unmeasured, and the report says
so rather than assume 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

SampleKey = tuple[str, int]


@dataclass(frozen=True)
class NoiseFloor:
    backend: str
    n_checks: int  # recorded (setting, check) rows
    n_settings: int
    n_problems: int  # checked problems, summed over the checks
    n_samples: int
    n_outcome_changed: int  # samples whose pass/fail changed
    outcome_change_sum: float  # problems' worth of score that moved
    noise_pp: float


def outcome_changes(
    stored: Mapping[SampleKey, float], repeated: Mapping[SampleKey, float]
) -> dict[str, Any]:
    """Compare the per-sample scores (1.0/0.0 for pass/fail, InfiBench's graded score) of a
    re-generation with the stored ones, on the samples both have: samples whose score changed,
    the sum over problems of |change of the problem's mean score|, and both mean scores."""
    common = sorted(set(stored) & set(repeated))
    by_task: dict[str, list[SampleKey]] = {}
    for key in common:
        by_task.setdefault(key[0], []).append(key)
    change = 0.0
    old_total = new_total = 0.0
    for keys in by_task.values():
        old = sum(stored[k] for k in keys) / len(keys)
        new = sum(repeated[k] for k in keys) / len(keys)
        change += abs(new - old)
        old_total += old
        new_total += new
    n = len(by_task)
    return {
        "n_problems": n,
        "n_outcome_changed": sum(1 for k in common if stored[k] != repeated[k]),
        "outcome_change_sum": change,
        "stored_score": old_total / n if n else None,
        "repeated_score": new_total / n if n else None,
    }


def noise_floors(rows: Iterable[Mapping[str, Any]]) -> dict[str, NoiseFloor]:
    """The noise floor per backend from `repeat_checks` rows (docs/store.md)."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        if row.get("n_problems"):
            groups.setdefault(str(row["backend"]), []).append(row)
    out = {}
    for backend, members in sorted(groups.items()):
        problems = sum(int(r["n_problems"]) for r in members)
        change = sum(float(r["outcome_change_sum"]) for r in members)
        out[backend] = NoiseFloor(
            backend=backend,
            n_checks=len(members),
            n_settings=len({r["setting_key"] for r in members}),
            n_problems=problems,
            n_samples=sum(int(r["n_samples"]) for r in members),
            n_outcome_changed=sum(int(r["n_outcome_changed"]) for r in members),
            outcome_change_sum=change,
            noise_pp=100 * change / problems,
        )
    return out
