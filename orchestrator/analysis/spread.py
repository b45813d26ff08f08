"""The spread of a model's score across precision and quantization (Section 3.1.1). Pure.

Rows as in `orchestrator.analysis.effects`, grouped into cells first (so duplicate settings of
one precision count once, at their mean).

* **Group**: one model's cells that agree on every axis but precision (and on the context),
  with at least two precisions. Its spread is the population standard deviation (ddof=0) of
  their scores.
* **One vote per model**: per decoding, a model's vote is the mean of its groups' spreads (a
  model run at two templates and two lengths has four groups per decoding, as in the study).
  `mean_std_pp` is the mean of the votes, over all models and over instruct models only;
  `max_std_pp` the largest spread of a single group.
* **Increase over greedy** (the study's "+22.99%" and "+50.40%"): for each sampled decoding,
  (mean spread - greedy's mean spread) / greedy's mean spread x 100, within the same group of
  models; empty for greedy itself, or when greedy has no spread or a spread of 0.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.analysis.baseline import AXES
from orchestrator.analysis.effects import Cell, cells, value_order

GREEDY = "greedy"
GROUPS = ("all", "instruct")


@dataclass(frozen=True)
class SpreadGroup:
    model_name: str
    tuning: str
    template: str
    decoding: str
    max_length: int
    backend: str
    precisions: tuple[str, ...]
    n_settings: int  # settings behind the cells (more than the precisions with duplicates)
    std_pp: float  # population standard deviation across precisions, percentage points
    min_pct: float
    max_pct: float


@dataclass(frozen=True)
class SpreadSummary:
    decoding: str
    group: str  # "all" | "instruct"
    n_models: int  # votes: each model counts once
    n_groups: int
    mean_std_pp: float  # mean of the models' votes
    max_std_pp: float  # largest single group
    increase_vs_greedy_pct: float | None


def precision_spread(rows: Sequence[Mapping[str, Any]]) -> list[SpreadGroup]:
    """Std of the score across precisions, per model and combination of the other axes."""
    groups: dict[tuple, list[Cell]] = {}
    others = [a for a in AXES if a != "precision"]
    for cell in cells(rows):
        ident = (cell.model_name, tuple(cell.value(a) for a in others), cell.context)
        groups.setdefault(ident, []).append(cell)
    out = []
    for (model, _, _), members in sorted(groups.items(), key=lambda kv: repr(kv[0])):
        if len(members) < 2:  # cells of a group differ in precision only: one per precision
            continue
        scores = [m.score_pct for m in members]
        first = members[0]
        out.append(
            SpreadGroup(
                model_name=model,
                tuning=first.tuning,
                template=first.value("template"),
                decoding=first.value("decoding"),
                max_length=first.value("max_length"),
                backend=first.value("backend"),
                precisions=tuple(
                    sorted(
                        (m.value("precision") for m in members),
                        key=lambda p: value_order("precision", p),
                    )
                ),
                n_settings=sum(len(m.keys) for m in members),
                std_pp=float(statistics.pstdev(float(s) for s in scores)),
                min_pct=float(min(scores)),
                max_pct=float(max(scores)),
            )
        )
    return out


def _decoding_order(decoding: str) -> tuple:
    return (decoding != GREEDY, decoding)


def _votes(groups: Sequence[SpreadGroup]) -> list[float]:
    by_model: dict[str, list[float]] = {}
    for g in groups:
        by_model.setdefault(g.model_name, []).append(g.std_pp)
    return [statistics.fmean(stds) for stds in by_model.values()]


def summarize_spread(groups: Sequence[SpreadGroup]) -> list[SpreadSummary]:
    """Per decoding and group of models: votes, groups, mean and largest spread, and the
    increase of the mean spread over greedy's."""
    out = []
    for group in GROUPS:
        members = [g for g in groups if group == "all" or g.tuning == "instruct"]
        decodings = sorted({g.decoding for g in members}, key=_decoding_order)
        means = {}
        for decoding in decodings:
            mine = [g for g in members if g.decoding == decoding]
            votes = _votes(mine)
            means[decoding] = statistics.fmean(votes)
            greedy = means.get(GREEDY)
            increase = None
            if decoding != GREEDY and greedy:
                increase = (means[decoding] - greedy) / greedy * 100
            out.append(
                SpreadSummary(
                    decoding=decoding,
                    group=group,
                    n_models=len(votes),
                    n_groups=len(mine),
                    mean_std_pp=means[decoding],
                    max_std_pp=max(g.std_pp for g in mine),
                    increase_vs_greedy_pct=increase,
                )
            )
    return out
