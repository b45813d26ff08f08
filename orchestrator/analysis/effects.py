"""The effect of each setting axis on its own. Pure.

Section 3.1 of the reproducibility study, for whatever settings a store holds.

Input rows are mappings with the keys `key`, `model_name`, `tuning`, `score_pct` (pass@1 in
percent, a float or an exact Fraction) and the axes `template` (the template *kind*: "own" when
the setting used the model's own template, else the template's name, see `template_kind`),
`decoding`, `max_length`, `precision` and `backend`; optional context keys (`benchmark`,
`variant`, `length_semantics`, `limit`) must be equal within a pair.

* **Cell**: the settings of one model that agree on every axis and the context are one cell
  (they differ only in what the axes do not name: samples per problem, seeds, an imported
  file). Its score is the mean of theirs, so two baselines, a setting with 1 and with 4 samples,
  or a repeated import are one measurement, not several.
* **Baseline** (configurable, `orchestrator.analysis.baseline`): own template, greedy, max
  length 2048, bf16 (which is bf16 with no quantization). An axis the baseline leaves unset (by
  default `backend`) may take any value, and is then not itself analysed.
* **Pair**: for each model, a baseline cell and a cell that differs from it in exactly one
  analysed axis (every other axis and the context equal).
* **One vote per model**: a model's vote for an axis value is the mean over its pairs for that
  value of the change (signed, setting minus baseline, percentage points), the relative change
  (change / baseline score, percent; pairs whose baseline scores 0 are left out) and the
  magnitude |change|. A model has several pairs for one value only when the baseline frees an
  axis (e.g. a baseline on hf and one on vLLM).
* **Effect of an axis value**: the mean of the votes, over all models and over instruct models
  only; `n_relative` counts the votes with a relative change.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from orchestrator.analysis.baseline import AXES, PRECISION_ORDER

CONTEXT = ("benchmark", "variant", "length_semantics", "limit")
OWN = "own"
Score = Fraction | float


def template_kind(template: str, own_template: str | None) -> str:
    """The template kind: "own" when `template` is the model's own, else the template's name.

    With the model's config unknown (`own_template` None), any template other than the harness's
    generic "instruct" and the tokenizer's "chat" counts as the model's own."""
    if own_template is not None:
        return OWN if template == own_template else template
    return template if template in ("instruct", "chat") else OWN


@dataclass(frozen=True)
class Cell:
    """The settings of one model with the same axes and context, as one measurement."""

    model_name: str
    tuning: str
    values: tuple[Any, ...]  # one per axis, in AXES order
    context: tuple[Any, ...]  # one per CONTEXT key
    score_pct: Score  # the mean of the settings' scores (exact when they are Fractions)
    keys: tuple[str, ...]  # the settings' keys, sorted

    def value(self, axis: str) -> Any:
        return self.values[AXES.index(axis)]


def _context(row: Mapping[str, Any]) -> tuple:
    return tuple(row.get(c) for c in CONTEXT)


def cells(rows: Sequence[Mapping[str, Any]]) -> list[Cell]:
    """The rows grouped into cells (model, axes, context), in a stable order."""
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: (r["model_name"], r["key"])):
        ident = (row["model_name"], tuple(row[a] for a in AXES), _context(row))
        groups.setdefault(ident, []).append(row)
    out = []
    for (model, values, context), members in groups.items():
        scores = [m["score_pct"] for m in members]
        mean = sum(scores[1:], scores[0]) / len(scores)
        keys = tuple(sorted(m["key"] for m in members))
        out.append(Cell(model, members[0]["tuning"], values, context, mean, keys))
    return out


@dataclass(frozen=True)
class EffectPair:
    model_name: str
    tuning: str
    axis: str
    value: Any
    baseline_value: Any
    baseline_keys: tuple[str, ...]  # the settings of the baseline cell
    setting_keys: tuple[str, ...]  # the settings of the changed cell
    baseline_pct: float
    score_pct: float
    change_pp: float  # score minus baseline (computed before rounding to float)
    relative_pct: float | None  # change / baseline * 100; None when the baseline is 0


def effect_pairs(
    rows: Sequence[Mapping[str, Any]], baseline: Mapping[str, Any]
) -> list[EffectPair]:
    """Every (baseline cell, one-axis change) pair per model, in a stable order."""
    pinned = {a: v for a, v in baseline.items() if a in AXES}
    by_model: dict[str, list[Cell]] = {}
    for cell in cells(rows):
        by_model.setdefault(cell.model_name, []).append(cell)
    pairs = []
    for model, model_cells in by_model.items():
        bases = [c for c in model_cells if all(c.value(a) == v for a, v in pinned.items())]
        for base in bases:
            for cell in model_cells:
                changed = [a for a in AXES if cell.value(a) != base.value(a)]
                if len(changed) != 1 or changed[0] not in pinned or cell.context != base.context:
                    continue
                axis = changed[0]
                change = cell.score_pct - base.score_pct  # exact when given Fractions
                relative = change / base.score_pct * 100 if base.score_pct else None
                pairs.append(
                    EffectPair(
                        model_name=model,
                        tuning=base.tuning,
                        axis=axis,
                        value=cell.value(axis),
                        baseline_value=base.value(axis),
                        baseline_keys=base.keys,
                        setting_keys=cell.keys,
                        baseline_pct=float(base.score_pct),
                        score_pct=float(cell.score_pct),
                        change_pp=float(change),
                        relative_pct=None if relative is None else float(relative),
                    )
                )
    return pairs


@dataclass(frozen=True)
class ModelVote:
    """One model's say on one axis value: the mean over its pairs for that value."""

    model_name: str
    tuning: str
    axis: str
    value: Any
    baseline_value: Any
    n_pairs: int
    change_pp: float
    relative_pct: float | None  # None when every baseline of its pairs scored 0
    abs_change_pp: float


def model_votes(pairs: Sequence[EffectPair]) -> list[ModelVote]:
    """One vote per (model, axis, value), in the pairs' order."""
    groups: dict[tuple[str, str, Any], list[EffectPair]] = {}
    for p in pairs:
        groups.setdefault((p.model_name, p.axis, p.value), []).append(p)
    votes = []
    for (model, axis, value), members in groups.items():
        relative = [p.relative_pct for p in members if p.relative_pct is not None]
        votes.append(
            ModelVote(
                model_name=model,
                tuning=members[0].tuning,
                axis=axis,
                value=value,
                baseline_value=members[0].baseline_value,
                n_pairs=len(members),
                change_pp=statistics.fmean(p.change_pp for p in members),
                relative_pct=statistics.fmean(relative) if relative else None,
                abs_change_pp=statistics.fmean(abs(p.change_pp) for p in members),
            )
        )
    return votes


@dataclass(frozen=True)
class EffectRow:
    axis: str
    value: Any
    baseline_value: Any
    group: str  # "all" | "instruct"
    n_models: int  # votes: each model counts once
    n_pairs: int  # the pairs behind the votes
    mean_change_pp: float
    mean_relative_change_pct: float | None  # None when every baseline scored 0
    n_relative: int  # votes with a relative change
    mean_abs_change_pp: float


def value_order(axis: str, value: Any) -> tuple:
    """Precision in PRECISION_ORDER, numbers ascending, then names."""
    if axis == "precision" and value in PRECISION_ORDER:
        return (0, PRECISION_ORDER.index(value), "")
    if isinstance(value, (int, float)):
        return (1, value, "")
    return (2, 0, str(value))


def _summary(axis: str, value: Any, group: str, votes: Sequence[ModelVote]) -> EffectRow:
    relative = [v.relative_pct for v in votes if v.relative_pct is not None]
    return EffectRow(
        axis=axis,
        value=value,
        baseline_value=votes[0].baseline_value,
        group=group,
        n_models=len(votes),
        n_pairs=sum(v.n_pairs for v in votes),
        mean_change_pp=statistics.fmean(v.change_pp for v in votes),
        mean_relative_change_pct=statistics.fmean(relative) if relative else None,
        n_relative=len(relative),
        mean_abs_change_pp=statistics.fmean(v.abs_change_pp for v in votes),
    )


def summarize_effects(pairs: Sequence[EffectPair]) -> list[EffectRow]:
    """One row per (axis, value, group); groups "all" and "instruct" (when it has votes)."""
    groups: dict[tuple[str, Any], list[ModelVote]] = {}
    for vote in model_votes(pairs):
        groups.setdefault((vote.axis, vote.value), []).append(vote)
    ordered = sorted(groups, key=lambda av: (AXES.index(av[0]), value_order(*av)))
    out = []
    for axis, value in ordered:
        members = groups[(axis, value)]
        out.append(_summary(axis, value, "all", members))
        instruct = [v for v in members if v.tuning == "instruct"]
        if instruct:
            out.append(_summary(axis, value, "instruct", instruct))
    return out
