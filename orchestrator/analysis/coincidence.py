"""How much a literature match proves: the coincidence rate. Pure.

"Reproduced" is the study's exact-match rule: some setting's score rounds or truncates to the
printed value. With 60 settings over a few points, most values a run could print near the
published one are matched by *some* setting, so a match alone says little. The rate asks how
dense the settings' matches are **near the published value**: for a value printed with d decimals
as a count k/N (N = problems x samples, its obtainability) and the measured settings of the
verdict's pool,

* the **window** is the published value plus or minus WINDOW_PP (5) points, within 0-100;
* its **candidate values** are the values with d decimals in the window that some k/N gives
  (by rounding or flooring: the values the source could have printed);
* the **coincidence rate** is the share of candidates that at least one setting would also
  "reproduce" under the same rules (`orchestrator.analysis.obtainability.match_rule`).

Why a fixed window: the rate used to be taken over the settings' own range (lowest to highest
score), which one broken setting at 0% widened tenfold (a moderate 22% became a strong 3%), and
which for one setting held only the one or two values that setting prints itself: its match was
1 of 2 or 2 of 2, always weak. Five points is about the half-width of one setting's 95% interval
at HumanEvalFix's 164 problems (and under the 5.8-6.9 points two settings must differ by to be
told apart, docs/statistics.md): the settings the benchmark cannot tell from the value. A
setting outside the window cannot change the rate; one inside adds at most two candidates.

The bands, in words (`strength`): at most STRONG_AT (20%) strong, below WEAK_AT (50%) moderate,
else weak. Beside it, the settings whose 95% interval contains the value (`interval_contains`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from orchestrator.analysis.obtainability import decimals_of, value_of

WINDOW_PP = 5
STRONG_AT = 0.20
WEAK_AT = 0.50


@dataclass(frozen=True)
class Coincidence:
    value_text: str
    decimals: int
    denominator: int  # N: the published value is a count k/N (problems x samples)
    n_settings: int
    n_values: int  # candidate values: `decimals` decimals, in the window, given by some k/N
    n_matched: int  # candidate values some setting reproduces

    @property
    def rate(self) -> float | None:
        """None without settings (nothing measured) or without candidates."""
        return self.n_matched / self.n_values if self.n_settings and self.n_values else None

    @property
    def strength(self) -> str:
        rate = self.rate
        if rate is None:
            return ""
        if rate <= STRONG_AT:
            return "strong"
        return "moderate" if rate < WEAK_AT else "weak"

    def words(self, matched: bool) -> str:
        """ "weak evidence: 14 of the 25 one-decimal values k/164 gives within 5 points of 16.4
        match some setting (56%)"."""
        if self.rate is None:
            return ""
        unit = {0: "whole", 1: "one-decimal", 2: "two-decimal"}.get(
            self.decimals, f"{self.decimals}-decimal"
        )
        share = (
            f"{self.n_matched} of the {self.n_values} {unit} values k/{self.denominator} gives "
            f"within {WINDOW_PP} points of {self.value_text} match some setting ({self.rate:.0%})"
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


def count_units(k: int, denominator: int, decimals: int) -> set[int]:
    """`matched_units(Fraction(k, denominator), decimals)` in integers: the floor of x and the
    rounding of x both ways at a tie (x = 100 * 10^decimals * k / denominator, printed units)."""
    a, n = 100 * 10**decimals * k, denominator
    return {a // n, -((n - 2 * a) // (2 * n)), (2 * a + n) // (2 * n)}


def window_units(value_text: str) -> tuple[int, int]:
    """The first and last printed value (in units of the last decimal) within WINDOW_PP points of
    the value, cut to 0-100."""
    scale = 10 ** decimals_of(value_text)
    centre = value_of(value_text) * scale
    return max(0, math.ceil(centre - WINDOW_PP * scale)), min(
        100 * scale, math.floor(centre + WINDOW_PP * scale)
    )


def candidate_units(value_text: str, denominator: int) -> set[int]:
    """The values in the window (units of the last decimal) that some k/denominator gives: only
    k within one printed unit of the window can."""
    if denominator < 1:
        raise ValueError(f"denominator must be >= 1 (problems x samples), got {denominator}")
    d = decimals_of(value_text)
    first, last = window_units(value_text)
    per_unit = Fraction(denominator, 100 * 10**d)  # counts per printed unit
    lo = max(0, math.floor((first - 1) * per_unit))
    hi = min(denominator, math.ceil((last + 1) * per_unit))
    units: set[int] = set()
    for k in range(lo, hi + 1):
        units |= count_units(k, denominator, d)
    return {u for u in units if first <= u <= last}


def coincidence(value_text: str, scores: Sequence[Fraction], denominator: int) -> Coincidence:
    """The coincidence rate of a value printed as `value_text`, a count k/`denominator`, among
    settings with `scores` (fractions in [0, 1])."""
    d = decimals_of(value_text)
    candidates = candidate_units(value_text, denominator)
    matched: set[int] = set()
    for score in scores:
        matched |= matched_units(score, d)
    return Coincidence(
        value_text=value_text.strip(),
        decimals=d,
        denominator=denominator,
        n_settings=len(scores),
        n_values=len(candidates),
        n_matched=len(matched & candidates),
    )


def interval_contains(value_text: str, low_pct: float | None, high_pct: float | None) -> bool:
    """Whether an interval (percent) contains the printed value."""
    if low_pct is None or high_pct is None or math.isnan(low_pct) or math.isnan(high_pct):
        return False
    value = float(value_text)
    return low_pct <= value <= high_pct
