"""The spread rule: matching a reported fractional score with a measured one. Pure.

orchestrator/analysis/literature.py applies it (`spread_reproduction`) to a model's settings;
this module holds the arithmetic over plain numbers.

A graded benchmark's score (InfiBench's best@10: a mean of fractional best scores) is no count
k/n, so the exact rounding rule of orchestrator/analysis/literature.py does not apply. What a
leaderboard gives instead is the spread of repeated runs: the sample standard deviation of its
group totals (`std_pct`, percentage points: the spread of one run of k samples per problem) over
`n_samples // k` groups. The rules, for a reported value v and a setting's score x (percent):

* **Standard error of each side**: its std over groups / sqrt(groups). A side with a single
  group (10 samples per question on the leaderboard, or a setting run with 10) has measured no
  spread of its own; it takes the other side's std (the same benchmark and protocol: the same
  run-to-run variation is assumed, and the note says so). With a single group on both sides no
  spread is known and no setting can *reproduce* the value, only be near it.
* **Reproduced**: |x - v| <= z * sqrt(se_v^2 + se_x^2), z the normal quantile of the report's
  confidence (1.96 at 95%): the gap is no larger than re-running the same model would give.
* **Near**: not reproduced, but v lies inside the setting's interval over problems (the
  report's bootstrap interval of its per-problem scores).
* Otherwise **not reproduced**; the closest setting and its signed gap are always given. Pilots
  (a subset of the problems) are listed, never compared, as under the exact rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from statistics import NormalDist

from storage.literature import LiteratureRow


@dataclass(frozen=True)
class ReportedSpread:
    """A reported value's spread over repeated runs (or a setting's: its std over groups)."""

    std_pct: float | None  # std over groups, percentage points (None: not reported)
    n_groups: int  # groups of k samples per problem behind the value
    group_size: int  # k

    @property
    def measured(self) -> bool:
        """The std comes from at least two groups (one group: reported as 0, not measured)."""
        return self.std_pct is not None and self.n_groups >= 2

    def describe(self) -> str:
        """ "std 0.40 over 3 groups of 10 samples" / "one group of 10 samples (no spread
        measured)"."""
        if not self.measured:
            return f"one group of {self.group_size} samples (no spread measured)"
        return f"std {self.std_pct:.2f} over {self.n_groups} groups of {self.group_size} samples"


def reported_spread(row: LiteratureRow, group_size: int) -> ReportedSpread:
    """The spread a literature row reports: its std text and samples per problem (unknown
    samples: one group)."""
    std = float(Decimal(row.spread_text)) if row.spread_text else None
    groups = max(1, (row.n_samples or group_size) // group_size)
    return ReportedSpread(std, groups, group_size)


def z_value(confidence: float) -> float:
    """The two-sided normal quantile of `confidence` (1.96 at 0.95)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return NormalDist().inv_cdf((1 + confidence) / 2)


def tolerance_pp(
    reported: ReportedSpread, measured: ReportedSpread, confidence: float
) -> float | None:
    """The largest gap (percentage points) between the two means that still reproduces the
    value; a side without a measured spread takes the other's std (None: neither has one)."""
    theirs = reported.std_pct if reported.measured else None
    mine = measured.std_pct if measured.measured else None
    if theirs is None and mine is None:
        return None
    se_v = (theirs if theirs is not None else mine or 0.0) / math.sqrt(reported.n_groups)
    se_x = (mine if mine is not None else theirs or 0.0) / math.sqrt(measured.n_groups)
    return z_value(confidence) * math.hypot(se_v, se_x)


def spread_note(reported: ReportedSpread, measured: ReportedSpread, confidence: float) -> str:
    """How a value was judged against one setting, in words: "reported std 0.40 over 3 groups
    of 10 samples, setting std 1.10 over 3 groups of 10 samples: gaps within 1.32 pp reproduce
    it (95%)"."""
    head = f"reported {reported.describe()}, setting {measured.describe()}"
    tolerance = tolerance_pp(reported, measured, confidence)
    if tolerance is None:
        return f"{head}: no spread known, so it can only be near (inside the setting's interval)"
    return f"{head}: gaps within {tolerance:.2f} pp reproduce it ({confidence:.0%})"
