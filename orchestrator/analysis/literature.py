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

    @property
    def pilot(self) -> bool:
        """Scored on a subset of the benchmark: never a reproduction verdict."""
        return self.n_problems_total is not None and self.n_problems < self.n_problems_total

    @property
    def subset(self) -> str:
        """"subset (10 of 164)" for a pilot, "" otherwise."""
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
        """"obtainable", "not obtainable" (the source states its sampling), or "not obtainable
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
                rules = [r for r, ks in (("round", self.ks_round), ("floor", self.ks_floor))
                         if k in ks]  # fmt: skip
                parts.append(f"{k}/{n} ({', '.join(rules)}{samples})")
            return "; ".join(parts)
        near = [f"{k}/{n} = {100 * k / n:.2f}" for k in (self.below, self.above) if k is not None]
        return f"no k/{n}: " + ", ".join(near)


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
    def status(self) -> str:
        if self.reproduced_by:
            return "reproduced"
        if self.near:
            return "near"
        if self.closest is not None:
            return "not reproduced"
        return "only a pilot subset" if self.pilots else "no settings"


def reproduction(value_text: str, settings: Sequence[SettingScore]) -> Reproduction:
    """Which settings reproduce the value; else which are near; and the closest one. Pilot
    settings (a subset of the problems) are set aside: they are never any of those."""
    value = _value(value_text)
    ordered = sorted(settings, key=lambda s: (s.model_name, s.label, s.key))
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
    """The value is not reproduced by its own model's settings but is by the counterpart's."""
    if own is None or counterpart is None or own.status in ("no settings", "only a pilot subset"):
        return False
    return own.status != "reproduced" and counterpart.status == "reproduced"


@dataclass(frozen=True)
class LiteratureMatch:
    row: LiteratureRow
    model_name: str | None  # the configured model it maps to; None: unmapped
    obtainability: Obtainability
    own: Reproduction | None  # None: unmapped, or no settings of the model in the store
    counterpart_model: str | None  # same family and size, the other tuning (in the store)
    counterpart: Reproduction | None
    tuning_confusion: bool

    @property
    def status(self) -> str:
        if self.model_name is None:
            return "unmapped"
        if self.own is None:
            return "not in store"
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


def join_literature(
    rows: Sequence[LiteratureRow],
    mapping: Mapping[str, str],
    settings: Sequence[SettingScore],
    n_problems: int = HUMANEVALFIX_PROBLEMS,
) -> list[LiteratureMatch]:
    """One match per literature row, in the rows' order (nothing is dropped)."""
    by_model: dict[str, list[SettingScore]] = {}
    for s in settings:
        by_model.setdefault(s.model_name, []).append(s)
    out = []
    for row in rows:
        model = mapping.get(row.model)
        own = counterpart = None
        partner = None
        confused = False
        if model is not None and model in by_model:
            own = reproduction(row.score_text, by_model[model])
            partners = counterpart_models(model, settings)
            if partners:
                partner = ", ".join(partners)
                pool = [s for p in partners for s in by_model[p]]
                counterpart = reproduction(row.score_text, pool)
                confused = tuning_confusion(own, counterpart)
        out.append(
            LiteratureMatch(
                row=row,
                model_name=model,
                obtainability=obtainability(row.score_text, n_problems, row.n_samples),
                own=own,
                counterpart_model=partner,
                counterpart=counterpart,
                tuning_confusion=confused,
            )
        )
    return out


# ---------------------------------------------------------------------------------------------
# Flat records for the report's tables


def _labels(settings: Sequence[SettingScore]) -> str:
    return "; ".join(f"{s.model_name}: {s.label}" for s in settings)


def match_record(m: LiteratureMatch) -> dict[str, object]:
    """One literature row joined with the store, as a flat record (the comparison table)."""
    own, other = m.own, m.counterpart
    closest = own.closest if own is not None else None
    return {
        "model_name": m.model_name,
        "literature_model": m.row.model,
        "tuning": m.row.tuning,
        "reported": m.row.score_text,
        "source_id": m.row.source_id,
        "location": m.row.table_or_location,
        "found_via": m.row.found_via,
        "n_samples_reported": m.row.n_samples,
        "obtainable": m.obtainability.obtainable,
        "obtainability": m.obtainability.verdict,
        "obtainable_as": m.obtainability.describe(),
        "status": m.status,
        "tuning_confusion": m.tuning_confusion,
        "n_reproducing": len(own.reproduced_by) if own else 0,
        "reproduced_by": "; ".join(f"{s.label} [{rule}]" for s, rule in own.reproduced_by)
        if own
        else "",
        "reproduced_by_keys": " ".join(s.key for s, _ in own.reproduced_by) if own else "",
        "near": "; ".join(s.label for s in own.near) if own else "",
        "closest_setting": closest.label if closest else None,
        "closest_pct": closest.pct if closest else None,
        "closest_gap_pp": own.closest_gap_pp if own else None,
        "closest_key": closest.key if closest else None,
        "counterpart_model": m.counterpart_model,
        "counterpart_reproduced_by": _labels([s for s, _ in other.reproduced_by]) if other else "",
        "pilots": pilot_note(own.pilots) if own else "",
        "line": m.row.line,
    }


def pilot_note(pilots: Sequence[SettingScore]) -> str:
    """Why pilot settings got no verdict: "not compared (a subset of the problems): <label>
    subset (10 of 164); ..." ("" without pilots)."""
    if not pilots:
        return ""
    listed = "; ".join(f"{s.label} {s.subset}" for s in pilots)
    return f"not compared (a subset of the problems): {listed}"


def obtainability_counts(matches: Sequence[LiteratureMatch]) -> dict[str, int]:
    """How many reported values each obtainability rule gives (the report's note)."""
    counts = {"values": len(matches), "obtainable": 0, "not obtainable": 0,
              "not obtainable with one sample per problem": 0}  # fmt: skip
    for m in matches:
        counts[m.obtainability.verdict] += 1
    return counts


def unmatched_record(m: LiteratureMatch) -> dict[str, object]:
    """A literature row the store cannot answer: unmapped, or its model was not run."""
    return {
        "literature_model": m.row.model,
        "model_family": m.row.model_family,
        "size_b": m.row.size_b,
        "tuning": m.row.tuning,
        "reported": m.row.score_text,
        "source_id": m.row.source_id,
        "status": m.status,
        "model_name": m.model_name,
        "line": m.row.line,
    }


def unobtainable_record(m: LiteratureMatch) -> dict[str, object]:
    """A reported value no k/(problems x samples) gives."""
    return {
        "literature_model": m.row.model,
        "reported": m.row.score_text,
        "source_id": m.row.source_id,
        "location": m.row.table_or_location,
        "obtainability": m.obtainability.verdict,
        "n_samples_reported": m.row.n_samples,
        "nearest": m.obtainability.describe(),
        "setting_notes": m.row.setting_notes,
        "line": m.row.line,
    }
