"""The literature join as flat records, one per row of the report's tables. Pure.

Each record function has its column tuple, so a table with no rows still has its header.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.analysis.literature import LiteratureMatch, Reproduction, SettingScore

MATCH_COLUMNS = tuple(
    """model_name benchmark literature_model tuning reported source_id location found_via
    n_samples_reported reported_spread obtainable obtainability obtainable_as status
    tuning_confusion
    variant_confusion n_reproducing reproduced_by reproduced_by_keys near closest_setting
    closest_pct closest_gap_pp closest_key counterpart_model counterpart_reproduced_by
    other_variant other_variant_reproduced_by pilots line""".split()
)
UNMATCHED_COLUMNS = tuple(
    """benchmark literature_model model_family size_b tuning reported source_id status
    model_name line""".split()
)
UNOBTAINABLE_COLUMNS = tuple(
    """benchmark literature_model reported source_id location obtainability n_samples_reported
    nearest setting_notes line""".split()
)


def _labels(settings: Sequence[SettingScore]) -> str:
    return "; ".join(f"{s.model_name}: {s.label}" for s in settings)


def _reproducing(rep: Reproduction | None) -> str:
    return _labels([s for s, _ in rep.reproduced_by]) if rep else ""


def match_record(m: LiteratureMatch) -> dict[str, object]:
    """One literature row joined with the store, as a flat record (the comparison table)."""
    own = m.own
    closest = own.closest if own is not None else None
    count = m.obtainability  # None under the spread rule: no k/n applies
    return {
        "model_name": m.model_name,
        "benchmark": m.benchmark,
        "literature_model": m.row.model,
        "tuning": m.row.tuning,
        "reported": m.row.score_text,
        "source_id": m.row.source_id,
        "location": m.row.table_or_location,
        "found_via": m.row.found_via,
        "n_samples_reported": m.row.n_samples,
        "reported_spread": m.spread.describe() if m.spread is not None else None,
        "obtainable": count.obtainable if count is not None else None,
        "obtainability": count.verdict if count is not None else None,
        "obtainable_as": count.describe() if count is not None else None,
        "status": str(m.status),
        "tuning_confusion": m.tuning_confusion,
        "variant_confusion": m.variant_confusion,
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
        "counterpart_reproduced_by": _reproducing(m.counterpart),
        "other_variant": m.other_variant,
        "other_variant_reproduced_by": _reproducing(m.variant_counterpart),
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
    """How many reported values each obtainability rule gives (the report's note); values
    matched by their spread have no obtainability and are not counted."""
    counted = [m.obtainability for m in matches if m.obtainability is not None]
    counts = {
        "values": len(counted),
        "obtainable": 0,
        "not obtainable": 0,
        "not obtainable with one sample per problem": 0,
    }
    for o in counted:
        counts[o.verdict] += 1
    return counts


def unmatched_record(m: LiteratureMatch) -> dict[str, object]:
    """A literature row the store cannot answer: unmapped, its model not run, or run only on
    another variant."""
    return {
        "benchmark": m.benchmark,
        "literature_model": m.row.model,
        "model_family": m.row.model_family,
        "size_b": m.row.size_b,
        "tuning": m.row.tuning,
        "reported": m.row.score_text,
        "source_id": m.row.source_id,
        "status": str(m.status),
        "model_name": m.model_name,
        "line": m.row.line,
    }


def unobtainable_record(m: LiteratureMatch) -> dict[str, object]:
    """A reported value no k/(problems x samples) gives (exact count rule only)."""
    if m.obtainability is None:
        raise ValueError(f"line {m.row.line}: a value matched by its spread has no count k/n")
    return {
        "benchmark": m.benchmark,
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
