"""The effect of each setting axis on its own, and the spread across precisions. Pure.

Section 3.1 of the reproducibility study, for whatever settings a store holds.

Input rows are mappings with the keys `key`, `model_name`, `tuning`, `score_pct` (pass@1 in
percent, a float or an exact Fraction) and the axes `template` (the template *kind*: "own" when
the setting used the model's own template, else the template's name, see `template_kind`),
`decoding`, `max_length`, `precision` and `backend`; optional context keys (`benchmark`,
`variant`, `length_semantics`, `limit`) must be equal within a pair.

* **Baseline** (configurable, `parse_baseline`): own template, greedy, max length 2048, bf16
  (which is bf16 with no quantization). An axis the baseline leaves unset (by default `backend`)
  may take any value, and is then not itself analysed.
* **Pair**: for each model, a baseline setting and a setting that differs from it in exactly one
  analysed axis (every other axis and the context equal).
* **Effect of an axis value**: over its pairs, the mean change in percentage points (signed,
  setting minus baseline), the mean relative change in percent (signed, change / baseline score;
  pairs whose baseline scores 0 are left out of it and counted in `n_relative`), and the mean
  magnitude of the change (mean |change|). Computed over all models and over instruct models only.
  With a fully pinned baseline each model contributes one pair.
* **Precision spread**: for each model and each combination of the other axes, the population
  standard deviation (ddof=0) of the scores across the precision/quantization values present
  (at least two), summarised per decoding as the mean and the largest of those deviations.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

AXES = ("template", "decoding", "max_length", "precision", "backend")
CONTEXT = ("benchmark", "variant", "length_semantics", "limit")
DEFAULT_BASELINE: dict[str, Any] = {
    "template": "own",
    "decoding": "greedy",
    "max_length": 2048,
    "precision": "bf16",
}
ANY = "*"  # a baseline value meaning "any value; do not analyse this axis"
PRECISION_ORDER = ("bf16", "fp16", "fp32", "int8", "int4")
OWN = "own"


def template_kind(template: str, own_template: str | None) -> str:
    """The template kind: "own" when `template` is the model's own, else the template's name.

    With the model's config unknown (`own_template` None), any template other than the harness's
    generic "instruct" and the tokenizer's "chat" counts as the model's own."""
    if own_template is not None:
        return OWN if template == own_template else template
    return template if template in ("instruct", "chat") else OWN


def parse_baseline(items: Sequence[str], base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`key=value` items over the default baseline; `key=*` frees an axis. Raises ValueError."""
    baseline = dict(DEFAULT_BASELINE if base is None else base)
    for item in items:
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise ValueError(f"baseline item {item!r} must look like key=value")
        if key not in AXES:
            raise ValueError(f"Unknown baseline axis {key!r}. Valid: {', '.join(AXES)}")
        if value == ANY:
            baseline.pop(key, None)
        elif key == "max_length":
            try:
                baseline[key] = int(value)
            except ValueError:
                raise ValueError(f"baseline max_length must be an integer, got {value!r}") from None
        else:
            baseline[key] = value
    return baseline


@dataclass(frozen=True)
class EffectPair:
    model_name: str
    tuning: str
    axis: str
    value: Any
    baseline_value: Any
    baseline_key: str
    key: str
    baseline_pct: float
    score_pct: float
    change_pp: float  # score minus baseline (computed before rounding to float)
    relative_pct: float | None  # change / baseline * 100; None when the baseline is 0


@dataclass(frozen=True)
class EffectRow:
    axis: str
    value: Any
    baseline_value: Any
    group: str  # "all" | "instruct"
    n_models: int
    n_pairs: int
    mean_change_pp: float
    mean_relative_change_pct: float | None  # None when every baseline scored 0
    n_relative: int
    mean_abs_change_pp: float


def _context(row: Mapping[str, Any]) -> tuple:
    return tuple(row.get(c) for c in CONTEXT)


def effect_pairs(
    rows: Sequence[Mapping[str, Any]], baseline: Mapping[str, Any]
) -> list[EffectPair]:
    """Every (baseline, one-axis change) pair per model, in a stable order."""
    pinned = {a: v for a, v in baseline.items() if a in AXES}
    by_model: dict[str, list[Mapping[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: (r["model_name"], r["key"])):
        by_model.setdefault(row["model_name"], []).append(row)
    pairs = []
    for model, model_rows in by_model.items():
        bases = [r for r in model_rows if all(r[a] == v for a, v in pinned.items())]
        for base in bases:
            for row in model_rows:
                changed = [a for a in AXES if row[a] != base[a]]
                if len(changed) != 1 or changed[0] not in pinned:
                    continue
                if _context(row) != _context(base):
                    continue
                axis = changed[0]
                change = row["score_pct"] - base["score_pct"]  # exact when given Fractions
                relative = change / base["score_pct"] * 100 if base["score_pct"] else None
                pairs.append(
                    EffectPair(
                        model_name=model, tuning=base["tuning"], axis=axis, value=row[axis],
                        baseline_value=base[axis], baseline_key=base["key"], key=row["key"],
                        baseline_pct=float(base["score_pct"]), score_pct=float(row["score_pct"]),
                        change_pp=float(change),
                        relative_pct=None if relative is None else float(relative),
                    )
                )  # fmt: skip
    return pairs


def _value_order(axis: str, value: Any) -> tuple:
    if axis == "precision" and value in PRECISION_ORDER:
        return (0, PRECISION_ORDER.index(value), "")
    if isinstance(value, (int, float)):
        return (1, value, "")
    return (2, 0, str(value))


def _summary(axis: str, value: Any, group: str, pairs: Sequence[EffectPair]) -> EffectRow:
    changes = [p.change_pp for p in pairs]
    relative = [p.relative_pct for p in pairs if p.relative_pct is not None]
    return EffectRow(
        axis=axis,
        value=value,
        baseline_value=pairs[0].baseline_value,
        group=group,
        n_models=len({p.model_name for p in pairs}),
        n_pairs=len(pairs),
        mean_change_pp=statistics.fmean(changes),
        mean_relative_change_pct=statistics.fmean(relative) if relative else None,
        n_relative=len(relative),
        mean_abs_change_pp=statistics.fmean(abs(c) for c in changes),
    )


def summarize_effects(pairs: Sequence[EffectPair]) -> list[EffectRow]:
    """One row per (axis, value, group); groups "all" and "instruct" (when it has pairs)."""
    groups: dict[tuple[str, Any], list[EffectPair]] = {}
    for p in pairs:
        groups.setdefault((p.axis, p.value), []).append(p)
    ordered = sorted(groups, key=lambda av: (AXES.index(av[0]), _value_order(*av)))
    out = []
    for axis, value in ordered:
        members = groups[(axis, value)]
        out.append(_summary(axis, value, "all", members))
        instruct = [p for p in members if p.tuning == "instruct"]
        if instruct:
            out.append(_summary(axis, value, "instruct", instruct))
    return out


@dataclass(frozen=True)
class SpreadGroup:
    model_name: str
    tuning: str
    template: str
    decoding: str
    max_length: int
    backend: str
    precisions: tuple[str, ...]
    std_pp: float  # population standard deviation across precisions, percentage points
    min_pct: float
    max_pct: float


@dataclass(frozen=True)
class SpreadSummary:
    decoding: str
    n_groups: int
    mean_std_pp: float
    max_std_pp: float


def precision_spread(rows: Sequence[Mapping[str, Any]]) -> list[SpreadGroup]:
    """Std of the score across precisions, per model and combination of the other axes."""
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for row in rows:
        other = tuple(row[a] for a in AXES if a != "precision")
        groups.setdefault((row["model_name"], other, _context(row)), []).append(row)
    out = []
    for (model, _, _), members in sorted(groups.items(), key=lambda kv: repr(kv[0])):
        if len({m["precision"] for m in members}) < 2:
            continue
        scores = [m["score_pct"] for m in members]
        first = members[0]
        out.append(
            SpreadGroup(
                model_name=model, tuning=first["tuning"], template=first["template"],
                decoding=first["decoding"], max_length=first["max_length"],
                backend=first["backend"],
                precisions=tuple(sorted({m["precision"] for m in members},
                                        key=lambda p: _value_order("precision", p))),
                std_pp=float(statistics.pstdev(scores)), min_pct=float(min(scores)),
                max_pct=float(max(scores)),
            )
        )  # fmt: skip
    return out


def summarize_spread(groups: Sequence[SpreadGroup]) -> list[SpreadSummary]:
    """Per decoding: how many groups, their mean and largest standard deviation."""
    by_decoding: dict[str, list[float]] = {}
    for g in groups:
        by_decoding.setdefault(g.decoding, []).append(g.std_pp)
    return [
        SpreadSummary(d, len(stds), statistics.fmean(stds), max(stds))
        for d, stds in sorted(by_decoding.items())
    ]
