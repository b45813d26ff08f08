"""How much a literature match proves: the coincidence rate. Pure.

"Reproduced" is the study's exact-match rule: some setting's score rounds or truncates to the
printed value. With 60 settings spread over a few points, most values printed with one decimal
inside that range are matched by *some* setting, so a match alone says little. For a reported
value with d decimals and a model's measured settings (full-benchmark settings of the reported
variant, the pool the verdict uses):

* the **measured range** is [lowest, highest] setting score; its **candidate values** are the
  values with d decimals from the lowest score truncated to d decimals up to the highest rounded
  up to d decimals (so a single setting has the one or two values it gives);
* the **coincidence rate** is the share of candidate values that at least one setting would also
  "reproduce" under the same rules (`orchestrator.analysis.literature.match_rule`).

A value matched in a range where few candidates match is strong evidence for the matching
setting; one matched where most do is weak. The bands, in words (`strength`): at most
STRONG_AT (20%) strong, below WEAK_AT (50%) moderate, else weak.

Beside it, the settings whose 95% interval contains the value: those the value cannot tell apart
from it at the benchmark's size (usually many more than the exact matches).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from orchestrator.analysis.obtainability import decimals_of

STRONG_AT = 0.20
WEAK_AT = 0.50


@dataclass(frozen=True)
class Coincidence:
    value_text: str
    decimals: int
    low_pct: float  # the lowest and highest setting score, percent
    high_pct: float
    n_settings: int
    n_values: int  # candidate values with `decimals` decimals in the measured range
    n_matched: int  # candidate values some setting reproduces

    @property
    def rate(self) -> float | None:
        return self.n_matched / self.n_values if self.n_values else None

    @property
    def strength(self) -> str:
        rate = self.rate
        if rate is None:
            return ""
        if rate <= STRONG_AT:
            return "strong"
        return "moderate" if rate < WEAK_AT else "weak"

    def words(self, matched: bool) -> str:
        """ "weak evidence: 31 of 50 one-decimal values in 9.76-22.56 match some setting (62%)"."""
        if self.rate is None:
            return ""
        unit = {0: "whole", 1: "one-decimal", 2: "two-decimal"}.get(
            self.decimals, f"{self.decimals}-decimal"
        )
        span = f"{self.low_pct:.2f}-{self.high_pct:.2f}"
        share = (
            f"{self.n_matched} of the {self.n_values} {unit} values in the measured range "
            f"{span} match some setting ({self.rate:.0%})"
        )
        return f"{self.strength} evidence: {share}" if matched else f"coincidence rate: {share}"


def matched_units(score: Fraction, decimals: int) -> set[int]:
    """The values (as integers k: the value is k / 10^decimals percent) that `score` (a fraction
    in [0, 1]) gives by rounding (both at a tie) or by flooring."""
    scale = 10**decimals
    x = score * 100 * scale  # the score in printed units
    half = Fraction(1, 2)
    rounded = set(range(math.ceil(x - half), math.floor(x + half) + 1))
    return rounded | {math.floor(x)}


def coincidence(value_text: str, scores: Sequence[Fraction]) -> Coincidence:
    """The coincidence rate of a value printed as `value_text` among settings with `scores`."""
    d = decimals_of(value_text)
    if not scores:
        return Coincidence(value_text, d, math.nan, math.nan, 0, 0, 0)
    scale = 10**d
    low, high = min(scores), max(scores)
    first = math.floor(low * 100 * scale)
    last = math.ceil(high * 100 * scale)
    matched: set[int] = set()
    for score in scores:
        matched |= matched_units(score, d)
    n_matched = sum(1 for k in matched if first <= k <= last)
    return Coincidence(
        value_text=value_text,
        decimals=d,
        low_pct=float(low * 100),
        high_pct=float(high * 100),
        n_settings=len(scores),
        n_values=last - first + 1,
        n_matched=n_matched,
    )


def interval_contains(value_text: str, low_pct: float | None, high_pct: float | None) -> bool:
    """Whether an interval (percent) contains the printed value."""
    if low_pct is None or high_pct is None or math.isnan(low_pct) or math.isnan(high_pct):
        return False
    value = float(value_text)
    return low_pct <= value <= high_pct
