"""Matching reported scores with measured settings, as the reproducibility study does. Pure.

A benchmark's card (workers/card.py) says which rule its reported values follow (`JoinRule`):
the exact count rule below for a pass@1 (a count k/n), or the spread rule of
orchestrator/analysis/literature_spread.py for a fractional score (best@k of graded answers:
reproduced within the spread of repeated runs, near inside the setting's interval, no
obtainability). Pilots, tuning and variant confusion work the same under both.

The exact count rule (Szalontai et al. 2025, Sections 2.2 and 3.2), in exact rational
arithmetic:

* A reported value `v` printed with `d` decimals is the result of **rounding** a score `x` (in
  percent) when `|x - v| <= 0.5 * 10^-d` (a tie counts for either rounding direction), and of
  **flooring** (truncating) it when `v <= x < v + 10^-d` (orchestrator/analysis/
  obtainability.py).
* **Obtainable**: with `n` problems and `m` samples per problem a pass@1 is `k/(n*m)`; `v` is
  obtainable when some `k` in `0..n*m` gives `v` by rounding or flooring. With one sample of
  164 problems 44.9 is not (73/164 = 44.51, 74/164 = 45.12); 45.12 is 74/164. `m` is the
  paper's, when its source states it (the literature table's `n_samples`: OctoPack's 8.7 from
  n=20 is 285/3280); when it is unknown, one sample is assumed and said ("not obtainable with
  one sample per problem"), never plain "unobtainable", which would accuse the authors of a
  mistake.
* **Pilots**: a setting that scored fewer problems than the benchmark holds (a limit, a subset
  file, a partial import) is a pilot. It is listed, never a reproduction, near or closest.
* **Reproduced**: a setting reproduces `v` when its pass@1 gives `v` by rounding or flooring.
  **Near**: not reproduced, but within one problem: `|x - v| <= 100/n` percentage points.
  Otherwise the closest setting and its signed gap (setting minus reported) are given; the closest
  setting is always computed.
* **Tuning confusion**: a value reported for a base model that no setting of the base model
  reproduces but a setting of its instruct counterpart (same family and size) does, or the
  reverse. Flagged only when the store holds settings of both models.
* **Variant confusion**: the same for the benchmark variant. The literature reports some
  variants (the card's `reported_variants`, e.g. HumanEvalFixTests); a value that no setting of
  that variant reproduces but a setting of the same model on another variant (`docs`) does is
  flagged. Settings of the other variant are joined as that counterpart, never as the model's
  own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from typing import Literal

from orchestrator.analysis.literature_spread import (
    ReportedSpread,
    reported_spread,
    tolerance_pp,
)
from orchestrator.analysis.obtainability import Obtainability, match_rule, obtainability, value_of
from storage.literature import LiteratureRow
from workers.card import MatchRule

Rule = Literal["round", "floor", "spread"]


class MatchStatus(StrEnum):
    """What the join says about one literature row (equal to its text)."""

    REPRODUCED = "reproduced"
    NEAR = "near"
    NOT_REPRODUCED = "not reproduced"
    PILOT_ONLY = "only a pilot subset"
    NO_SETTINGS = "no settings"
    UNMAPPED = "unmapped"  # the mapping does not list its name
    NOT_IN_STORE = "not in store"  # mapped, but the store has no setting of the model
    OTHER_VARIANT_ONLY = "only another variant in store"  # e.g. docs settings of a tests value


@dataclass(frozen=True)
class SettingScore:
    """One measured setting, as the matching rules see it."""

    key: str
    model_name: str
    model_family: str
    model_size_b: float | None
    tuning: str  # "base" | "instruct"
    label: str  # human-readable setting, e.g. "own greedy 2048 bf16 hf"
    score: Fraction  # the headline in [0, 1]: pass@1 exactly, a graded score as its float
    n_problems: int  # problems the setting scored
    n_problems_total: int | None = None  # problems of the benchmark (None: n_problems)
    variant: str = ""  # the benchmark variant ("tests", "docs"); "" when not known
    rank: int = 0  # position in the report's grid order: breaks ties between equal matches
    # The spread rule's inputs: the std over sample groups (percentage points; None: not a
    # best@k), the groups, and the interval over problems (percent).
    std_pct: float | None = None
    n_groups: int = 1
    ci_low_pct: float | None = None
    ci_high_pct: float | None = None

    def spread(self, group_size: int) -> ReportedSpread:
        """Its own spread over repeated groups of `group_size` samples."""
        return ReportedSpread(self.std_pct, self.n_groups, group_size)

    @property
    def pilot(self) -> bool:
        """Scored on a subset of the benchmark: never a reproduction verdict."""
        return self.n_problems_total is not None and self.n_problems < self.n_problems_total

    @property
    def subset(self) -> str:
        """ "subset (10 of 164)" for a pilot, "" otherwise."""
        return f"subset ({self.n_problems} of {self.n_problems_total})" if self.pilot else ""

    @property
    def pct(self) -> float:
        return float(self.score * 100)


@dataclass(frozen=True)
class Reproduction:
    value_text: str
    reproduced_by: tuple[tuple[SettingScore, Rule], ...]  # every setting that gives the value
    near: tuple[SettingScore, ...]  # within one problem, not reproduced
    closest: SettingScore | None
    closest_gap_pp: float | None  # closest setting's score minus the value, percentage points
    pilots: tuple[SettingScore, ...] = ()  # subset settings: listed, never compared

    @property
    def status(self) -> MatchStatus:
        if self.reproduced_by:
            return MatchStatus.REPRODUCED
        if self.near:
            return MatchStatus.NEAR
        if self.closest is not None:
            return MatchStatus.NOT_REPRODUCED
        return MatchStatus.PILOT_ONLY if self.pilots else MatchStatus.NO_SETTINGS

    def gap(self, setting: SettingScore) -> Fraction:
        """The setting's score minus the value, in percentage points (exact)."""
        return setting.score * 100 - value_of(self.value_text)

    def best(self) -> SettingScore | None:
        """The setting that best explains the value: the reproducing setting closest to it
        (else the closest setting); among equally close ones, the first in the grid's order.
        None when only pilots were measured."""
        pool = [s for s, _ in self.reproduced_by] or ([self.closest] if self.closest else [])
        return min(pool, key=lambda s: (abs(self.gap(s)), s.rank), default=None)


def reproduction(value_text: str, settings: Sequence[SettingScore]) -> Reproduction:
    """Which settings reproduce the value; else which are near; and the closest one. Pilot
    settings (a subset of the problems) are set aside: they are never any of those."""
    value = value_of(value_text)
    ordered = sorted(settings, key=lambda s: (s.model_name, s.rank, s.label, s.key))
    pilots = tuple(s for s in ordered if s.pilot)
    reproduced, near = [], []
    closest, gap = None, None
    for s in ordered:
        if s.pilot:
            continue
        rule = match_rule(s.score, value_text)
        diff = s.score * 100 - value
        if rule is not None:
            reproduced.append((s, rule))
        elif abs(diff) <= Fraction(100, s.n_problems):
            near.append(s)
        if gap is None or abs(diff) < abs(gap):
            closest, gap = s, diff
    return Reproduction(
        value_text=value_text.strip(),
        reproduced_by=tuple(reproduced),
        near=tuple(near),
        closest=closest,
        closest_gap_pp=float(gap) if gap is not None else None,
        pilots=pilots,
    )


def _inside(value: Fraction, s: SettingScore) -> bool:
    low, high = s.ci_low_pct, s.ci_high_pct
    return low is not None and high is not None and low <= float(value) <= high


def spread_reproduction(
    row: LiteratureRow, settings: Sequence[SettingScore], group_size: int, confidence: float
) -> Reproduction:
    """The spread rule (orchestrator/analysis/literature_spread.py): reproduced when the gap is
    within the spread of repeated runs, near when the value lies inside the setting's interval
    over problems, and the closest setting; pilots set aside."""
    reported = reported_spread(row, group_size)
    value = value_of(row.score_text)
    ordered = sorted(settings, key=lambda s: (s.model_name, s.rank, s.label, s.key))
    reproduced: list[tuple[SettingScore, Rule]] = []
    near, closest, gap = [], None, None
    for s in ordered:
        if s.pilot:
            continue
        diff = s.score * 100 - value
        tolerance = tolerance_pp(reported, s.spread(group_size), confidence)
        if tolerance is not None and abs(float(diff)) <= tolerance:
            reproduced.append((s, "spread"))
        elif _inside(value, s):
            near.append(s)
        if gap is None or abs(diff) < abs(gap):
            closest, gap = s, diff
    return Reproduction(
        value_text=row.score_text.strip(),
        reproduced_by=tuple(reproduced),
        near=tuple(near),
        closest=closest,
        closest_gap_pp=float(gap) if gap is not None else None,
        pilots=tuple(s for s in ordered if s.pilot),
    )


@dataclass(frozen=True)
class JoinRule:
    """How one benchmark's reported values are compared (from its card)."""

    n_problems: int  # problems of the benchmark the literature reports
    variants: tuple[str, ...] | None = None  # the variants it reports (None: every setting's)
    match: MatchRule = MatchRule.EXACT_COUNT
    group_size: int = 1  # the spread rule: samples per group (best@k's k)
    confidence: float = 0.95  # the spread rule's level
    benchmark: str = ""  # the benchmark's name (carried into each match)

    def reproduce(self, row: LiteratureRow, settings: Sequence[SettingScore]) -> Reproduction:
        if self.match is MatchRule.SPREAD:
            return spread_reproduction(row, settings, self.group_size, self.confidence)
        return reproduction(row.score_text, settings)


def tuning_confusion(own: Reproduction | None, counterpart: Reproduction | None) -> bool:
    """The value is not reproduced by its own model's settings but is by the counterpart's
    (the other tuning's model, or the same model on another variant)."""
    if own is None or counterpart is None:
        return False
    if own.status in (MatchStatus.NO_SETTINGS, MatchStatus.PILOT_ONLY):
        return False
    return own.status != MatchStatus.REPRODUCED and counterpart.status == MatchStatus.REPRODUCED


@dataclass(frozen=True)
class LiteratureMatch:
    row: LiteratureRow
    model_name: str | None  # the configured model it maps to; None: unmapped
    obtainability: Obtainability | None  # None: the spread rule (no count k/n applies)
    own: Reproduction | None  # None: unmapped, or no settings of the model in the store
    counterpart_model: str | None  # same family and size, the other tuning (in the store)
    counterpart: Reproduction | None
    tuning_confusion: bool
    other_variant: str | None = None  # the store's other variants of the model ("docs")
    variant_counterpart: Reproduction | None = None  # the model's settings of those variants
    variant_confusion: bool = False
    benchmark: str = ""  # the benchmark whose literature the row is
    spread: ReportedSpread | None = None  # the spread rule: the reported spread

    @property
    def status(self) -> MatchStatus:
        if self.model_name is None:
            return MatchStatus.UNMAPPED
        if self.own is None:
            if self.variant_counterpart is not None:
                return MatchStatus.OTHER_VARIANT_ONLY
            return MatchStatus.NOT_IN_STORE
        return self.own.status


def counterpart_models(model_name: str, settings: Sequence[SettingScore]) -> list[str]:
    """Models of the same family and size with the other tuning, among `settings`."""
    mine = [s for s in settings if s.model_name == model_name]
    if not mine:
        return []
    family, size, tuning = mine[0].model_family, mine[0].model_size_b, mine[0].tuning
    return sorted(
        {
            s.model_name
            for s in settings
            if s.model_family == family and s.model_size_b == size and s.tuning != tuning
        }
    )


def _partition(
    settings: Sequence[SettingScore], variants: Sequence[str] | None
) -> tuple[dict[str, list[SettingScore]], dict[str, list[SettingScore]]]:
    """Settings by model: of the reported variants, and of the others."""
    own: dict[str, list[SettingScore]] = {}
    other: dict[str, list[SettingScore]] = {}
    for s in settings:
        reported = variants is None or s.variant in variants
        (own if reported else other).setdefault(s.model_name, []).append(s)
    return own, other


def _match(
    row: LiteratureRow,
    model: str | None,
    own_by: dict[str, list[SettingScore]],
    other_by: dict[str, list[SettingScore]],
    rule: JoinRule,
) -> LiteratureMatch:
    own = counterpart = variant = None
    partner = other_variant = None
    if model is not None and model in own_by:
        own = rule.reproduce(row, own_by[model])
        pool_settings = [s for ss in own_by.values() for s in ss]
        partners = counterpart_models(model, pool_settings)
        if partners:
            partner = ", ".join(partners)
            counterpart = rule.reproduce(row, [s for p in partners for s in own_by[p]])
    if model is not None and model in other_by:
        other_variant = ", ".join(sorted({s.variant for s in other_by[model]}))
        variant = rule.reproduce(row, other_by[model])
    spread = rule.match is MatchRule.SPREAD
    return LiteratureMatch(
        row=row,
        model_name=model,
        obtainability=None
        if spread
        else obtainability(row.score_text, rule.n_problems, row.n_samples),
        own=own,
        counterpart_model=partner,
        counterpart=counterpart,
        tuning_confusion=tuning_confusion(own, counterpart),
        other_variant=other_variant,
        variant_counterpart=variant,
        variant_confusion=tuning_confusion(own, variant),
        benchmark=rule.benchmark,
        spread=reported_spread(row, rule.group_size) if spread else None,
    )


def join_literature(
    rows: Sequence[LiteratureRow],
    mapping: Mapping[str, str],
    settings: Sequence[SettingScore],
    rule: JoinRule,
) -> list[LiteratureMatch]:
    """One match per literature row, in the rows' order (nothing is dropped).

    `rule.variants`: the benchmark variants the literature reports; settings of other variants
    are each model's variant counterpart. None: every setting is of them."""
    own_by, other_by = _partition(settings, rule.variants)
    return [_match(row, mapping.get(row.model), own_by, other_by, rule) for row in rows]
