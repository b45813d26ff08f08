"""Every comparison a report makes, with its paired test and its declared family. Pure.

Input: the report's effect rows (`orchestrator.analysis.effects`: one per complete setting, with
its model, tuning, axes and context), each setting's outcome per problem
(`orchestrator.analysis.outcomes`), the effects baseline, and the re-generation noise per backend
(`orchestrator.analysis.noise`). Settings are grouped into cells as the effects are (one
measurement per model and axes); only settings over the same problems are compared, so the
comparisons are made per *scope*: one benchmark, variant, length semantics and problem selection.

Families (declared here, before any test; docs/statistics.md):

* `axis effects, all models` and `axis effects, instruct models` (Holm): each axis value against
  the baseline's, at the baseline, as the study's one-vote-per-model effect. Its test is a
  problem-clustered paired test across models: a model's vote is the mean over its pairs of the
  change, so the effect is the mean over problems of one composite difference per problem,
  e_i = sum over models m of 1/M x mean over m's pairs of (changed_i - baseline_i); the bootstrap
  resamples problems (every model's outcome on a drawn problem comes with it) and the sign-flip
  test flips a problem's differences in every model at once. With one model and one pair of
  one-sample settings it is the exact McNemar test.
* `<model> settings vs baseline` (Westfall-Young max-T): each cell of the model against its
  baseline cell, over one joint sign-flip resampling of the problems.
* `exploratory` (Benjamini-Hochberg, q = 0.05): each axis value against the baseline's value at
  every other combination of the other axes (e.g. 4-bit against bf16 under T = 0.8), pooled over
  models like the axis effects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from orchestrator.analysis.baseline import AXES
from orchestrator.analysis.effects import Cell, cells, value_order
from orchestrator.analysis.multiplicity import FamilyKind, adjust, standardized_sums
from orchestrator.analysis.outcomes import ProblemOutcomes, mean_outcomes
from orchestrator.analysis.paired import (
    DEFAULT_ALPHA,
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    PairedResult,
    compare_rows,
    draw_resamples,
)

ALL, INSTRUCT = "all", "instruct"
AT_BASELINE = "baseline"
SEVERAL = "several"


@dataclass(frozen=True)
class EvidenceOptions:
    n_resamples: int = DEFAULT_RESAMPLES
    confidence: float = DEFAULT_CONFIDENCE
    seed: int = DEFAULT_SEED
    alpha: float = DEFAULT_ALPHA  # family-wise level (Holm, Westfall-Young); BH's q too
    exploratory: bool = True


@dataclass(frozen=True)
class Scope:
    """Settings that can be paired: one benchmark context and one set of problems."""

    context: tuple[Any, ...]  # effects.CONTEXT values: benchmark, variant, length semantics, limit
    task_ids: tuple[str, ...]

    @property
    def benchmark(self) -> str:
        return str(self.context[0])

    @property
    def variant(self) -> str:
        return str(self.context[1])


@dataclass(frozen=True)
class Comparison:
    family: str  # the family's name, unique in a report
    kind: FamilyKind
    family_size: int
    group: str  # "all", "instruct", or the model whose settings the family holds
    axis: str  # the changed axis, or "several"
    value: str  # the changed value(s): "int4", or "precision=int4 decoding=t0.8"
    baseline_value: str
    at: str  # the other axes: "baseline", or "decoding=t0.8 max_length=512 ..."
    scope: Scope
    models: tuple[str, ...]
    n_problem_pairs: int  # problems x pairs behind the test
    a_keys: tuple[str, ...]  # the settings on the reference side
    b_keys: tuple[str, ...]
    test: PairedResult  # B (changed) minus A (reference)
    p_adjusted: float
    noise_pp: float | None  # the re-generation noise of the backends involved; None: unmeasured
    significant: bool  # p_adjusted < alpha
    counts: bool  # significant, and |delta| above the noise where it is measured

    @property
    def n_models(self) -> int:
        return len(self.models)


@dataclass(frozen=True)
class Planned:
    family: str
    kind: FamilyKind
    group: str
    axis: str
    value: str
    baseline_value: str
    at: str
    pairs: tuple[tuple[Cell, Cell], ...]  # (reference cell, changed cell)


def _label(value: Any) -> str:
    return str(value)


def _at(cell: Cell, axis: str, pinned: Mapping[str, Any]) -> str:
    """The other pinned axes of `cell`: "baseline" when they are the baseline's."""
    others = [a for a in AXES if a != axis and a in pinned]
    if all(cell.value(a) == pinned[a] for a in others):
        return AT_BASELINE
    return " ".join(f"{a}={cell.value(a)}" for a in others)


def _one_axis_pairs(model_cells: Sequence[Cell], pinned: Mapping[str, Any]):
    """(axis, reference, changed) for cells of one model that differ in exactly one pinned
    axis, the reference holding the baseline's value on it; by reference, then changed cell,
    in `model_cells` order. Cells are found by their values on the other axes (comparing every
    two of a model's cells on every axis grows with the square of its cells, for each model)."""
    axes = [(i, axis) for i, axis in enumerate(AXES) if axis in pinned]
    alike: dict[tuple[int, tuple[Any, ...]], list[int]] = {}  # the same but on axis i
    for n, cell in enumerate(model_cells):
        for i, _ in axes:
            alike.setdefault((i, cell.values[:i] + cell.values[i + 1 :]), []).append(n)
    for ref in model_cells:
        found = []
        for i, axis in axes:
            if ref.values[i] == pinned[axis]:
                others = alike[(i, ref.values[:i] + ref.values[i + 1 :])]
                found += [(n, axis) for n in others if model_cells[n].values[i] != ref.values[i]]
        for n, axis in sorted(found):
            yield axis, ref, model_cells[n]


def _effect_plans(scope_cells: Sequence[Cell], pinned: Mapping[str, Any]) -> list[Planned]:
    by_model: dict[str, list[Cell]] = {}
    for cell in scope_cells:
        by_model.setdefault(cell.model_name, []).append(cell)
    found: dict[tuple[str, str, Any, str], list[tuple[Cell, Cell]]] = {}
    for model_cells in by_model.values():
        for axis, ref, cell in _one_axis_pairs(model_cells, pinned):
            at = _at(ref, axis, pinned)
            groups = [ALL] + ([INSTRUCT] if ref.tuning == INSTRUCT else [])
            for group in groups if at == AT_BASELINE else [ALL]:
                found.setdefault((group, axis, cell.value(axis), at), []).append((ref, cell))
    plans = []
    order = sorted(
        found,
        key=lambda k: (k[3] != AT_BASELINE, k[3], k[0], AXES.index(k[1]), value_order(k[1], k[2])),
    )
    for group, axis, value, at in order:
        confirmatory = at == AT_BASELINE
        kind = FamilyKind.AXIS_EFFECTS if confirmatory else FamilyKind.EXPLORATORY
        family = f"axis effects, {group} models" if confirmatory else "exploratory"
        plans.append(
            Planned(
                family,
                kind,
                group,
                axis,
                _label(value),
                _label(pinned[axis]),
                at,
                tuple(found[(group, axis, value, at)]),
            )
        )
    return plans


def _setting_plans(scope_cells: Sequence[Cell], pinned: Mapping[str, Any]) -> list[Planned]:
    """Each model's cells against its baseline cell (the same values on the freed axes)."""
    plans = []
    free = [a for a in AXES if a not in pinned]
    of_model: dict[str, list[Cell]] = {}  # in scope order: a base meets its model's cells only
    for cell in scope_cells:
        of_model.setdefault(cell.model_name, []).append(cell)
    for base in scope_cells:
        if not all(base.value(a) == v for a, v in pinned.items()):
            continue
        family = f"{base.model_name} settings vs baseline"
        if free:
            family += " (" + " ".join(f"{a}={base.value(a)}" for a in free) + ")"
        for cell in of_model[base.model_name]:
            same_free = all(cell.value(a) == base.value(a) for a in free)
            if cell is base or not same_free:
                continue
            changed = [a for a in pinned if cell.value(a) != base.value(a)]
            axis = changed[0] if len(changed) == 1 else SEVERAL
            value = " ".join(f"{a}={cell.value(a)}" for a in changed)
            base_value = " ".join(f"{a}={base.value(a)}" for a in changed)
            if len(changed) == 1:
                value, base_value = _label(cell.value(axis)), _label(base.value(axis))
            plans.append(
                Planned(
                    family,
                    FamilyKind.MODEL_SETTINGS,
                    base.model_name,
                    axis,
                    value,
                    base_value,
                    AT_BASELINE if len(changed) == 1 else "",
                    ((base, cell),),
                )
            )
    return plans


def _composite(
    pairs: Sequence[tuple[Cell, Cell]], outcome: Mapping[Cell, ProblemOutcomes]
) -> tuple[np.ndarray, np.ndarray]:
    """Reference and changed outcome per problem, weighted one vote per model (the mean of the
    model's pairs, then the mean over models); one pair keeps its pass/fail outcomes."""
    if len(pairs) == 1:
        ref, cell = pairs[0]
        return outcome[ref].values, outcome[cell].values
    by_model: dict[str, list[tuple[Cell, Cell]]] = {}
    for pair in pairs:
        by_model.setdefault(pair[0].model_name, []).append(pair)
    n = outcome[pairs[0][0]].values.size
    a, b = np.zeros(n), np.zeros(n)
    for members in by_model.values():
        weight = 1.0 / (len(by_model) * len(members))
        for ref, cell in members:
            a += weight * outcome[ref].values.astype(float)
            b += weight * outcome[cell].values.astype(float)
    return np.clip(a, 0.0, 1.0), np.clip(b, 0.0, 1.0)


def _noise(pairs: Iterable[tuple[Cell, Cell]], noise_pp: Mapping[str, float]) -> float | None:
    backends = {c.value("backend") for pair in pairs for c in pair}
    if not backends or any(b not in noise_pp for b in backends):
        return None
    return max(noise_pp[b] for b in backends)


def _scopes(
    rows: Sequence[Mapping[str, Any]], outcomes: Mapping[str, ProblemOutcomes]
) -> dict[Scope, dict[Cell, ProblemOutcomes]]:
    """Cells whose settings all have outcomes over one set of problems, by scope."""
    usable = [r for r in rows if r["key"] in outcomes]
    out: dict[Scope, dict[Cell, ProblemOutcomes]] = {}
    for cell in cells(usable):
        members = [outcomes[k] for k in cell.keys]
        if any(m.task_ids != members[0].task_ids for m in members):
            continue  # one cell over different problems: not pairable as one measurement
        out.setdefault(Scope(cell.context, members[0].task_ids), {})[cell] = mean_outcomes(members)
    return out


@dataclass(frozen=True)
class ScopePlan:
    """A scope's declared comparisons, before any test: each with its two sides per problem."""

    scope: Scope
    plans: tuple[Planned, ...]
    sides: tuple[tuple[np.ndarray, np.ndarray], ...]  # (reference, changed) per plan


def plan_grid(
    rows: Sequence[Mapping[str, Any]],
    outcomes: Mapping[str, ProblemOutcomes],
    baseline: Mapping[str, Any],
    exploratory: bool = True,
) -> list[ScopePlan]:
    """Every declared comparison, per scope, with the outcomes its test compares."""
    pinned = {a: v for a, v in baseline.items() if a in AXES}
    out = []
    for scope, outcome in _scopes(rows, outcomes).items():
        scope_cells = list(outcome)
        plans = _effect_plans(scope_cells, pinned) + _setting_plans(scope_cells, pinned)
        if not exploratory:
            plans = [p for p in plans if p.kind is not FamilyKind.EXPLORATORY]
        if plans:
            sides = tuple(_composite(p.pairs, outcome) for p in plans)
            out.append(ScopePlan(scope, tuple(plans), sides))
    return out


def compare_grid(
    rows: Sequence[Mapping[str, Any]],
    outcomes: Mapping[str, ProblemOutcomes],
    baseline: Mapping[str, Any],
    noise_pp: Mapping[str, float] | None = None,
    options: EvidenceOptions | None = None,
) -> list[Comparison]:
    """Every declared comparison of the store, tested and adjusted within its family."""
    options = options or EvidenceOptions()
    out: list[Comparison] = []
    for planned in plan_grid(rows, outcomes, baseline, options.exploratory):
        scope, plans, sides = planned.scope, planned.plans, planned.sides
        resamples = draw_resamples(len(scope.task_ids), options.n_resamples, options.seed)
        tests = compare_rows(
            [a for a, _ in sides], [b for _, b in sides], resamples, options.confidence
        )
        by_family: dict[str, list[int]] = {}
        for i, plan in enumerate(plans):
            by_family.setdefault(plan.family, []).append(i)
        for members in by_family.values():
            kind = plans[members[0]].kind
            null = None
            if kind is FamilyKind.MODEL_SETTINGS:
                diffs = np.array([sides[i][1].astype(float) - sides[i][0] for i in members])
                null = standardized_sums(diffs, resamples.signs)
            adjusted = adjust(kind, [tests[i].p_value for i in members], null)
            for i, p_adj in zip(members, adjusted, strict=True):
                out.append(
                    _comparison(
                        plans[i], scope, tests[i], float(p_adj), len(members), noise_pp, options
                    )
                )
    return out


def _comparison(
    plan: Planned,
    scope: Scope,
    test: PairedResult,
    p_adjusted: float,
    size: int,
    noise_pp: Mapping[str, float] | None,
    options: EvidenceOptions,
) -> Comparison:
    noise = _noise(plan.pairs, noise_pp or {})
    significant = p_adjusted < options.alpha
    models = tuple(sorted({ref.model_name for ref, _ in plan.pairs}))
    return Comparison(
        family=plan.family,
        kind=plan.kind,
        family_size=size,
        group=plan.group,
        axis=plan.axis,
        value=plan.value,
        baseline_value=plan.baseline_value,
        at=plan.at,
        scope=scope,
        models=models,
        n_problem_pairs=len(plan.pairs) * len(scope.task_ids),
        a_keys=tuple(k for ref, _ in plan.pairs for k in ref.keys),
        b_keys=tuple(k for _, cell in plan.pairs for k in cell.keys),
        test=test,
        p_adjusted=p_adjusted,
        noise_pp=noise,
        significant=significant,
        counts=significant and (noise is None or abs(test.delta_pp) > noise),
    )


def scope_label(scope: Scope) -> str:
    """ "humanevalfix tests, 164 problems"."""
    return f"{scope.benchmark} {scope.variant}, {len(scope.task_ids)} problems"
