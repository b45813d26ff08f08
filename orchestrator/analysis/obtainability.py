"""The exact count rule: which k/n give a printed value, by rounding or flooring. Pure.

A reported pass@1 is a count: with n problems and m samples per problem it is k/(n*m) for some
k. A value `v` printed with `d` decimals is the result of **rounding** a score `x` (percent)
when |x - v| <= 0.5 * 10^-d (a tie counts for either direction) and of **flooring** it when
v <= x < v + 10^-d; it is **obtainable** when some k in 0..n*m gives it. orchestrator/analysis/
literature.py applies these to measured settings (a setting reproduces v when its exact pass@1
gives it); a benchmark whose card names the spread rule never uses them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from fractions import Fraction
from typing import Literal

CountRule = Literal["round", "floor"]


def decimals_of(text: str) -> int:
    """Decimals of a value as printed: "44.9" -> 1, "14.0" -> 1, "47" -> 0."""
    return len(text.strip().partition(".")[2])


def value_of(text: str) -> Fraction:
    """The printed value as an exact fraction (percent)."""
    return Fraction(Decimal(text.strip()))


def unit_of(value_text: str) -> Fraction:
    """One unit of the last printed decimal (percent): "44.9" -> 1/10."""
    return Fraction(1, 10 ** decimals_of(value_text))


def rounds_to(score: Fraction, value_text: str) -> bool:
    """The score (fraction in [0, 1]) in percent, rounded to the printed decimals, is the value
    (|x - v| <= half a printed unit; a tie counts for either rounding direction)."""
    return abs(score * 100 - value_of(value_text)) <= unit_of(value_text) / 2


def floors_to(score: Fraction, value_text: str) -> bool:
    """The score in percent, truncated to the printed decimals, is the value (v <= x < v + unit)."""
    value = value_of(value_text)
    return value <= score * 100 < value + unit_of(value_text)


def match_rule(score: Fraction, value_text: str) -> CountRule | None:
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


def obtainability(value_text: str, n_problems: int, n_samples: int | None = 1) -> Obtainability:
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
    value = value_of(value_text)
    unit = unit_of(value_text)
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
