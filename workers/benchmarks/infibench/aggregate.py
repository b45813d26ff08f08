"""best@10 and the reported table (spec §5), as `print_result_stat.py` computes it; best@k
itself (group bests, group totals, their mean and spread) is workers/scoring.py.

Per question, its responses (by sample index) split into consecutive groups of 10 and each
group keeps its best score (floored at 0: the official statistic starts the running best at 0).
For group g, T_g = sum over questions of the group-g best. The overall score is mean(T_g) over
groups divided by the summed full scores, and the std is the SAMPLE std (ddof=1) of T_g over
groups, divided the same way (0 with a single group). Breakdowns by lang, type and metric use
the same group totals restricted to a subset; the metric breakdown takes each group's best
response (largest raw points, later sample on ties) and rescales its per-metric points by
full_score / case total.

Questions the machine cannot score (a unit-test toolchain is missing) count as 0 in the score
over all questions and are left out of the score over scorable questions. A question where
grading raised scores 0 in every group, like the official grader's "error encountered".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from workers.benchmarks.infibench.scores import ResponseScore, ResponseStatus
from workers.benchmarks.infibench.suite import Case, Suite
from workers.scoring import group_best, group_spread

GROUP_SIZE = 10  # attempt_reduce_mode avg_max_10


@dataclass(frozen=True)
class GroupedScore:
    """A sum of group-best scores over some questions: one total per group of samples."""

    name: str  # "overall", or the lang / type / metric name
    n_questions: int
    full_score: float  # summed full scores of those questions
    group_totals: tuple[float, ...]  # T_g
    mean: float  # mean of T_g (points)
    std: float  # sample std of T_g (points), 0 with one group
    pct: float  # 100 * mean / full_score
    std_pct: float  # 100 * std / full_score


@dataclass(frozen=True)
class SuiteScore:
    overall: GroupedScore  # over every question of the suite (unscorable ones count as 0)
    scorable: GroupedScore  # over the questions this machine could score
    by_lang: tuple[GroupedScore, ...]  # over all questions, unscorable as 0
    by_type: tuple[GroupedScore, ...]
    by_metric: tuple[GroupedScore, ...]
    n_groups: int
    unscorable_cases: tuple[str, ...]  # case ids with a missing toolchain
    missing_languages: tuple[str, ...]  # the executor languages that were missing
    error_cases: tuple[str, ...]  # case ids where grading raised (scored 0)
    cases_without_responses: tuple[str, ...]  # scored null_score
    # each question's part of the score: the mean of its group bests (full score 1.0 each:
    # the overall score is their mean), by case path
    case_scores: tuple[tuple[str, float], ...] = ()


def grouped(name: str, n_questions: int, full: float, totals: Sequence[float]) -> GroupedScore:
    spread = group_spread(totals, full)
    return GroupedScore(
        name,
        n_questions,
        full,
        spread.group_totals,
        spread.mean,
        spread.std,
        100.0 * spread.fraction,
        100.0 * spread.std_fraction,
    )


def _add(totals: list[float], values: Sequence[float]) -> None:
    for g, value in enumerate(values):
        if g == len(totals):
            totals.append(0.0)
        totals[g] += value


def _metric_points(case: Case, responses: list[ResponseScore], group_size: int):
    """print_result_stat's per-metric group points (earned per group, full per metric)."""
    earned_per_group: list[dict[str, float]] = []
    best = None
    for i in range(0, len(responses), group_size):
        best, best_raw = None, 0.0
        for response in responses[i : i + group_size]:
            if response.raw_earned >= best_raw:
                best, best_raw = response, response.raw_earned
        earned_per_group.append(
            {m.counts_as: m.earned for m in best.metrics} if best is not None else {}
        )
    full = {m.counts_as: m.total for m in best.metrics} if best is not None else {}
    case_total = case.criteria.max_score
    if case_total is None:
        case_total = sum(full.values())
    scale = case.full_score / case_total if case_total else 0.0
    return (
        [{k: v * scale for k, v in group.items()} for group in earned_per_group],
        {k: v * scale for k, v in full.items()},
    )


class _Sums:
    """Group totals, full score and question count per breakdown key."""

    def __init__(self) -> None:
        self.totals: dict[tuple[str, str], list[float]] = {}
        self.full: dict[tuple[str, str], float] = {}
        self.n: dict[tuple[str, str], int] = {}

    def add(self, key: tuple[str, str], values: Sequence[float], full: float) -> None:
        _add(self.totals.setdefault(key, []), values)
        self.full[key] = self.full.get(key, 0.0) + full
        self.n[key] = self.n.get(key, 0) + 1

    def grouped(self, key: tuple[str, str]) -> GroupedScore:
        return grouped(
            key[1], self.n.get(key, 0), self.full.get(key, 0.0), self.totals.get(key, [])
        )

    def breakdown(self, kind: str) -> tuple[GroupedScore, ...]:
        keys = sorted((k for k in self.totals if k[0] == kind), key=lambda k: -self.full[k])
        return tuple(self.grouped(k) for k in keys)


def _case_best(case: Case, responses: list[ResponseScore], group_size: int) -> list[float]:
    """The question's group-best scores: 0 in every group if unscorable or errored."""
    statuses = {r.status for r in responses}
    if not responses:
        return [case.null_score]
    if statuses != {ResponseStatus.SCORED}:
        return [0.0] * len(range(0, len(responses), group_size))
    return group_best([r.score or 0.0 for r in responses], group_size)


def aggregate(
    suite: Suite, scores: Sequence[ResponseScore], group_size: int = GROUP_SIZE
) -> SuiteScore:
    """The reported score ± std and its breakdowns, from per-response scores."""
    by_case: dict[str, list[ResponseScore]] = {c.case_path: [] for c in suite.cases}
    for score in scores:
        by_case[score.case_path].append(score)
    sums = _Sums()
    unscorable: list[str] = []
    errors: list[str] = []
    empty: list[str] = []
    missing_langs: set[str] = set()
    case_scores: list[tuple[str, float]] = []
    for case in suite.cases:
        responses = sorted(by_case[case.case_path], key=lambda r: r.sample_index)
        statuses = {r.status for r in responses}
        best = _case_best(case, responses, group_size)
        case_scores.append((case.case_path, sum(best) / len(best)))
        if not responses:
            empty.append(case.case_id)
        elif ResponseStatus.TOOLCHAIN_MISSING in statuses:
            unscorable.append(case.case_id)
            missing_langs.update(lang for r in responses for lang in r.missing_executors)
        elif ResponseStatus.ERROR in statuses:
            errors.append(case.case_id)
        sums.add(("all", "overall"), best, case.full_score)
        if case.case_id not in unscorable:
            sums.add(("all", "scorable"), best, case.full_score)
        sums.add(("lang", case.lang), best, case.full_score)
        sums.add(("type", case.type), best, case.full_score)
        if responses and statuses == {ResponseStatus.SCORED}:
            earned, full = _metric_points(case, responses, group_size)
            for metric, points in full.items():
                sums.add(("metric", metric), [g.get(metric, 0.0) for g in earned], points)
    overall = sums.grouped(("all", "overall"))
    return SuiteScore(
        overall=overall,
        scorable=sums.grouped(("all", "scorable")),
        by_lang=sums.breakdown("lang"),
        by_type=sums.breakdown("type"),
        by_metric=sums.breakdown("metric"),
        n_groups=len(overall.group_totals),
        unscorable_cases=tuple(unscorable),
        missing_languages=tuple(sorted(missing_langs)),
        error_cases=tuple(errors),
        cases_without_responses=tuple(empty),
        case_scores=tuple(case_scores),
    )
