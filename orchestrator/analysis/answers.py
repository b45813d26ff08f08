"""The answer to "which setting explains this published number?", one per literature row of a
model the store holds. Pure.

* **Verdict**, in this order: `reproduced` (some setting of the model, on the reported
  variant, gives the value by rounding or flooring); `tuning confusion` (none does, but a
  setting of the other tuning's model of the same family and size does); `variant confusion`
  (none does, but a setting of the same model on another benchmark variant does); else the
  model's own outcome: `near` (within one problem), `not reproduced`, or `only a pilot subset`
  (only settings over fewer problems than the benchmark holds were measured: never a verdict).
* **Best-matching setting**: for `reproduced`, the reproducing setting closest to the value;
  for a confusion, the counterpart's reproducing setting closest to it; for `near` and `not
  reproduced`, the model's closest setting; none for a pilot. Among equally close settings,
  the first in the grid's order. Its gap is its score minus the value, in percentage points.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from orchestrator.analysis.literature import (
    LiteratureMatch,
    MatchStatus,
    Reproduction,
    SettingScore,
)


class Verdict(StrEnum):
    REPRODUCED = "reproduced"
    NEAR = "near"
    NOT_REPRODUCED = "not reproduced"
    PILOT_ONLY = "only a pilot subset"
    TUNING_CONFUSION = "tuning confusion"
    VARIANT_CONFUSION = "variant confusion"


_OWN = {
    MatchStatus.REPRODUCED: Verdict.REPRODUCED,
    MatchStatus.NEAR: Verdict.NEAR,
    MatchStatus.NOT_REPRODUCED: Verdict.NOT_REPRODUCED,
    MatchStatus.PILOT_ONLY: Verdict.PILOT_ONLY,
}


@dataclass(frozen=True)
class Answer:
    match: LiteratureMatch
    verdict: Verdict
    n_reproducing: int  # settings of the pool the verdict names that give the value
    setting: SettingScore | None  # the best-matching setting; None for a pilot-only value
    gap_pp: float | None  # its score minus the value, percentage points

    @property
    def text(self) -> str:
        """The verdict as a reader wants it: "reproduced by 2 settings", "tuning confusion:
        reproduced by 1 setting of <model>", "variant confusion: reproduced by 1 setting of the
        docs variant"."""
        n = f"{self.n_reproducing} setting{'s' if self.n_reproducing != 1 else ''}"
        if self.verdict is Verdict.REPRODUCED:
            return f"reproduced by {n}"
        if self.verdict is Verdict.TUNING_CONFUSION and self.setting is not None:
            return f"tuning confusion: reproduced by {n} of {self.setting.model_name}"
        if self.verdict is Verdict.VARIANT_CONFUSION and self.setting is not None:
            return f"variant confusion: reproduced by {n} of the {self.setting.variant} variant"
        return str(self.verdict)


def _from(match: LiteratureMatch, verdict: Verdict, rep: Reproduction) -> Answer:
    best = rep.best()
    gap = float(rep.gap(best)) if best is not None else None
    return Answer(match, verdict, len(rep.reproduced_by), best, gap)


def answer(match: LiteratureMatch) -> Answer | None:
    """The answer for one literature row; None when the store holds no setting of its model
    on the reported variant (the row is then one of the unmatched)."""
    own = match.own
    if own is None or own.status is MatchStatus.NO_SETTINGS:
        return None
    if own.status is MatchStatus.REPRODUCED:
        return _from(match, Verdict.REPRODUCED, own)
    if match.tuning_confusion and match.counterpart is not None:
        return _from(match, Verdict.TUNING_CONFUSION, match.counterpart)
    if match.variant_confusion and match.variant_counterpart is not None:
        return _from(match, Verdict.VARIANT_CONFUSION, match.variant_counterpart)
    return _from(match, _OWN[own.status], own)
