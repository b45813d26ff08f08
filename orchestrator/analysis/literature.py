"""Matching reported scores with measured settings, as the reproducibility study does. Pure.

The rules (Szalontai et al. 2025, Sections 2.2 and 3.2), all in exact rational arithmetic:

* A reported value `v` printed with `d` decimals is the result of **rounding** a score `x` (in
  percent) when `|x - v| <= 0.5 * 10^-d` (a tie counts for either rounding direction), and of
  **flooring** (truncating) it when `v <= x < v + 10^-d`.
* **Obtainable**: with `n` problems and `m` samples per problem a pass@1 is `k/(n*m)`; `v` is
  obtainable when some `k` in `0..n*m` gives `v` by rounding or flooring. With one sample 44.9
  is not (73/164 = 44.51, 74/164 = 45.12); 45.12 is 74/164. `m` is the paper's, when its source
  states it (the literature table's `n_samples`: OctoPack's 8.7 from n=20 is 285/3280); when it
  is unknown, one sample is assumed and said ("not obtainable with one sample per problem"),
  never plain "unobtainable", which would accuse the authors of a mistake.
* **Pilots**: a setting that scored fewer problems than the benchmark holds (a limit, a subset
  file, a partial import) is a pilot. It is listed, never a reproduction, near or closest.
* **Reproduced**: a setting reproduces `v` when its pass@1 gives `v` by rounding or flooring.
  **Near**: not reproduced, but within one problem: `|x - v| <= 100/n` percentage points.
  Otherwise the closest setting and its signed gap (setting minus reported) are given; the closest
  setting is always computed.
* **Tuning confusion**: a value reported for a base model that no setting of the base model
  reproduces but a setting of its instruct counterpart (same family and size) does, or the
  reverse. Flagged only when the store holds settings of both models.
* **Variant confusion**: the same for the benchmark variant. The literature reports one variant
  (the mapping's `variants`, HumanEvalFixTests); a value that no setting of that variant
  reproduces but a setting of the same model on another variant (`docs`) does is flagged.
  Settings of the other variant are joined as that counterpart, never as the model's own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from fractions import Fraction
from typing import Literal

from storage.literature import HUMANEVALFIX_PROBLEMS, LiteratureRow

Rule = Literal["round", "floor"]


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
    score: Fraction  # pass@1 as an exact fraction in [0, 1]
    n_problems: int  # problems the setting scored
    n_problems_total: int | None = None  # problems of the benchmark (None: n_problems)
    variant: str = ""  # the benchmark variant ("tests", "docs"); "" when not known
    rank: int = 0  # position in the report's grid order: breaks ties between equal matches

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


def decimals_of(text: str) -> int:
    """Decimals of a value as printed: "44.9" -> 1, "14.0" -> 1, "47" -> 0."""
    return len(text.strip().partition(".")[2])


def _value(text: str) -> Fraction:
    return Fraction(Decimal(text.strip()))


def _unit(value_text: str) -> Fraction:
    return Fraction(1, 10 ** decimals_of(value_text))


def rounds_to(score: Fraction, value_text: str) -> bool:
    """The score (fraction in [0, 1]) in percent, rounded to the printed decimals, is the value
    (|x - v| <= half a printed unit; a tie counts for either rounding direction)."""
    return abs(score * 100 - _value(value_text)) <= _unit(value_text) / 2


def floors_to(score: Fraction, value_text: str) -> bool:
    """The score in percent, truncated to the printed decimals, is the value (v <= x < v + unit)."""
    value = _value(value_text)
    return value <= score * 100 < value + _unit(value_text)


def match_rule(score: Fraction, value_text: str) -> Rule | None:
    """How a score gives the printed value: "round", "floor" or None ("round" wins when both
    apply, e.g. for an exact value)."""
    if rounds_to(score, value_text):
        return "round"
    if floors_to(score, value_text):
        return "floor"
    return None


class Sampling(StrEnum):
    """What the source says about how many samples per problem its pass@1 came from."""

    STATED = "stated"  # the literature table's n_samples
    ASSUMED_ONE = "assumed one sample"  # not stated: one sample per problem is assumed


@dataclass(frozen=True)
class Obtainability:
    value_text: str
    decimals: int
    n_problems: int
    ks_round: tuple[int, ...]  # k with k/N rounding to the value (N = problems x samples)
    ks_floor: tuple[int, ...]  # k with k/N flooring to the value
    below: int | None  # the largest k with k/N under the value (None if none)
    above: int | None  # the smallest k with k/N over the value
    n_samples: int = 1  # samples per problem behind the value (stated, or assumed 1)
    sampling: Sampling = Sampling.STATED

    @property
    def denominator(self) -> int:
        return self.n_problems * self.n_samples

    @property
    def obtainable(self) -> bool:
        return bool(self.ks_round or self.ks_floor)

    @property
    def ks(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.ks_round) | set(self.ks_floor)))

    @property
    def verdict(self) -> str:
        """ "obtainable", "not obtainable" (the source states its sampling), or "not obtainable
        with one sample per problem" (it does not: the value may come from several samples)."""
        if self.obtainable:
            return "obtainable"
        if self.sampling is Sampling.ASSUMED_ONE:
            return "not obtainable with one sample per problem"
        return "not obtainable"

    def describe(self) -> str:
        """E.g. "74/164 (round)", "284/3280 .. 288/3280 (round or floor; 20 samples x 164)",
        or "no k/164: 73/164 = 44.51, 74/164 = 45.12"."""
        n = self.denominator
        samples = f"; {self.n_samples} samples x {self.n_problems}" if self.n_samples > 1 else ""
        if self.obtainable and len(self.ks) > 2:  # fine granularity: the range
            return f"{self.ks[0]}/{n} .. {self.ks[-1]}/{n} (round or floor{samples})"
        if self.obtainable:
            parts = []
            for k in self.ks:
                rules = [
                    r for r, ks in (("round", self.ks_round), ("floor", self.ks_floor)) if k in ks
                ]
                parts.append(f"{k}/{n} ({', '.join(rules)}{samples})")
            return "; ".join(parts)
        return f"no k/{n}: {self.neighbours()}"

    def neighbours(self) -> str:
        """The scores next to the value, e.g. "80/164 = 48.78, 81/164 = 49.39"."""
        n = self.denominator
        near = [f"{k}/{n} = {100 * k / n:.2f}" for k in (self.below, self.above) if k is not None]
        return ", ".join(near)

    def note(self) -> str | None:
        """None when some k gives the value; else why not, in words: "not obtainable with one
        sample per problem (its source does not say how it sampled): no k/164 gives 48.9;
        nearest 80/164 = 48.78, 81/164 = 49.39"."""
        if self.obtainable:
            return None
        samples = "one sample" if self.n_samples == 1 else f"{self.n_samples} samples"
        if self.sampling is Sampling.ASSUMED_ONE:
            why = "(its source does not say how it sampled)"
        else:
            why = "(as its source states)"
        return (
            f"not obtainable with {samples} per problem {why}: no k/{self.denominator} gives "
            f"{self.value_text}; nearest {self.neighbours()}"
        )


def obtainability(
    value_text: str, n_problems: int = HUMANEVALFIX_PROBLEMS, n_samples: int | None = 1
) -> Obtainability:
    """Which k/(n_problems x n_samples) give the printed value by rounding or flooring.
    `n_samples` None: the source does not say; one sample per problem is assumed and the
    result says so (`Sampling.ASSUMED_ONE`)."""
    if n_problems < 1:
        raise ValueError(f"n_problems must be >= 1, got {n_problems}")
    if n_samples is not None and n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}")
    sampling = Sampling.STATED if n_samples is not None else Sampling.ASSUMED_ONE
    samples = n_samples or 1
    total = n_problems * samples
    value = _value(value_text)
    unit = _unit(value_text)
    # Only k with k/N within one printed unit of the value can match.
    lo = max(0, math.floor((value - unit) * total / 100))
    hi = min(total, math.ceil((value + unit) * total / 100))
    candidates = [(k, Fraction(k, total)) for k in range(lo, hi + 1)]
    ks_round = [k for k, score in candidates if rounds_to(score, value_text)]
    ks_floor = [k for k, score in candidates if floors_to(score, value_text)]
    below = math.ceil(value * total / 100) - 1
    above = math.floor(value * total / 100) + 1
    return Obtainability(
        value_text=value_text.strip(),
        decimals=decimals_of(value_text),
        n_problems=n_problems,
        ks_round=tuple(ks_round),
        ks_floor=tuple(ks_floor),
        below=below if below >= 0 else None,
        above=above if above <= total else None,
        n_samples=samples,
        sampling=sampling,
    )


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
        return setting.score * 100 - _value(self.value_text)

    def best(self) -> SettingScore | None:
        """The setting that best explains the value: the reproducing setting closest to it
        (else the closest setting); among equally close ones, the first in the grid's order.
        None when only pilots were measured."""
        pool = [s for s, _ in self.reproduced_by] or ([self.closest] if self.closest else [])
        return min(pool, key=lambda s: (abs(self.gap(s)), s.rank), default=None)


def reproduction(value_text: str, settings: Sequence[SettingScore]) -> Reproduction:
    """Which settings reproduce the value; else which are near; and the closest one. Pilot
    settings (a subset of the problems) are set aside: they are never any of those."""
    value = _value(value_text)
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
    obtainability: Obtainability
    own: Reproduction | None  # None: unmapped, or no settings of the model in the store
    counterpart_model: str | None  # same family and size, the other tuning (in the store)
    counterpart: Reproduction | None
    tuning_confusion: bool
    other_variant: str | None = None  # the store's other variants of the model ("docs")
    variant_counterpart: Reproduction | None = None  # the model's settings of those variants
    variant_confusion: bool = False

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
    n_problems: int,
) -> LiteratureMatch:
    own = counterpart = variant = None
    partner = other_variant = None
    if model is not None and model in own_by:
        own = reproduction(row.score_text, own_by[model])
        pool_settings = [s for ss in own_by.values() for s in ss]
        partners = counterpart_models(model, pool_settings)
        if partners:
            partner = ", ".join(partners)
            counterpart = reproduction(row.score_text, [s for p in partners for s in own_by[p]])
    if model is not None and model in other_by:
        other_variant = ", ".join(sorted({s.variant for s in other_by[model]}))
        variant = reproduction(row.score_text, other_by[model])
    return LiteratureMatch(
        row=row,
        model_name=model,
        obtainability=obtainability(row.score_text, n_problems, row.n_samples),
        own=own,
        counterpart_model=partner,
        counterpart=counterpart,
        tuning_confusion=tuning_confusion(own, counterpart),
        other_variant=other_variant,
        variant_counterpart=variant,
        variant_confusion=tuning_confusion(own, variant),
    )


def join_literature(
    rows: Sequence[LiteratureRow],
    mapping: Mapping[str, str],
    settings: Sequence[SettingScore],
    n_problems: int = HUMANEVALFIX_PROBLEMS,
    variants: Sequence[str] | None = None,
) -> list[LiteratureMatch]:
    """One match per literature row, in the rows' order (nothing is dropped).

    `variants`: the benchmark variants the literature reports (the mapping's); settings of
    other variants are each model's variant counterpart. None: every setting is of them."""
    own_by, other_by = _partition(settings, variants)
    return [_match(row, mapping.get(row.model), own_by, other_by, n_problems) for row in rows]
