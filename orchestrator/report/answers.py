"""The report's first table, `answers`: per published value of a model in the store, the
verdict and the setting that best explains it (orchestrator.analysis.answers), with that
setting's axes, score and interval read from the grid; for a value no k/(164 x samples) gives,
a note that says so (`obtainability_note`, shown under the row); and beside the verdict how much
it proves (orchestrator.analysis.coincidence): the coincidence rate of the value among the
settings of the verdict's pool, in words, and the settings whose interval contains the value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from orchestrator.analysis.answers import Answer, Verdict, answer
from orchestrator.analysis.coincidence import coincidence, interval_contains
from orchestrator.analysis.literature import LiteratureMatch, SettingScore
from orchestrator.report.grid import present, template_label
from storage.literature import LiteratureMapping

ANSWER_COLUMNS = tuple(
    """model_name literature_model reported source_id location obtainability
    obtainability_note verdict verdict_detail n_reproducing setting_model setting_variant
    template decoding max_length precision backend n_samples score_pct ci_low_pct ci_high_pct
    gap_pp coincidence_rate evidence_strength n_in_interval evidence in_interval setting_key
    line""".split()
)
AXIS_COLUMNS = ("decoding", "max_length", "precision", "backend", "n_samples")
INTEGER_COLUMNS = ("n_reproducing", "max_length", "n_samples", "n_in_interval", "line")


def _pool(a: Answer, scores: Sequence[SettingScore]) -> list[SettingScore]:
    """The full-benchmark settings of the pool the verdict names: the best-matching setting's
    model and variant (the model's own, or the counterpart a confusion names)."""
    if a.setting is None:
        return []
    model, variant = a.setting.model_name, a.setting.variant
    return [
        s
        for s in scores
        if s.model_name == model
        and s.variant == variant
        and s.n_problems >= (s.n_problems_total or s.n_problems)
    ]


def _evidence(
    a: Answer, scores: Sequence[SettingScore], grid_rows: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """How much the verdict proves: the coincidence rate of the value among the pool's
    settings, in words, and the settings whose interval contains it."""
    pool = _pool(a, scores)
    if not pool:
        return {}
    value = a.match.row.score_text
    rate = coincidence(value, [s.score for s in pool])
    inside = [
        s.label
        for s in pool
        if interval_contains(
            value, _number(grid_rows[s.key]["ci_low_pct"]), _number(grid_rows[s.key]["ci_high_pct"])
        )
    ]
    matched = a.verdict in (Verdict.REPRODUCED, Verdict.TUNING_CONFUSION, Verdict.VARIANT_CONFUSION)
    words = rate.words(matched)
    if words:
        words += f"; {len(inside)} of {len(pool)} settings' intervals contain {value}"
    return {
        "coincidence_rate": rate.rate,
        "evidence_strength": (rate.strength if matched else "") or None,
        "evidence": words or None,
        "n_in_interval": len(inside),
        "in_interval": "; ".join(inside) or None,
    }


def _number(value: Any) -> float | None:
    return float(value) if present(value) else None


def _record(
    a: Answer, grid_rows: Mapping[str, Mapping[str, Any]], scores: Sequence[SettingScore]
) -> dict[str, Any]:
    m = a.match
    record: dict[str, Any] = dict.fromkeys(ANSWER_COLUMNS)
    record.update(
        model_name=m.model_name,
        literature_model=m.row.model,
        reported=m.row.score_text,
        source_id=m.row.source_id,
        location=m.row.table_or_location,
        obtainability=m.obtainability.verdict,
        obtainability_note=m.obtainability.note(),
        verdict=str(a.verdict),
        verdict_detail=a.text,
        n_reproducing=a.n_reproducing,
        gap_pp=a.gap_pp,
        line=m.row.line,
    )
    if a.setting is not None:
        row = grid_rows[a.setting.key]
        record.update({c: row[c] for c in AXIS_COLUMNS})
        record.update(
            setting_model=a.setting.model_name,
            setting_variant=a.setting.variant,
            template=template_label(row),
            score_pct=row["score_pct"],
            ci_low_pct=row["ci_low_pct"] if present(row["ci_low_pct"]) else None,
            ci_high_pct=row["ci_high_pct"] if present(row["ci_high_pct"]) else None,
            setting_key=a.setting.key,
        )
    record.update(_evidence(a, scores, grid_rows))
    return record


def answers_frame(
    matches: Sequence[LiteratureMatch], grid: pd.DataFrame, scores: Sequence[SettingScore] = ()
) -> pd.DataFrame:
    """One row per literature row with an answer, by model, in the literature's order.
    `scores`: the settings the join compared (for the coincidence rate and the intervals)."""
    grid_rows = {r["setting_key"]: r for r in grid.to_dict("records")} if len(grid) else {}
    answers = [a for m in matches if (a := answer(m)) is not None]
    answers.sort(key=lambda a: (a.match.model_name or "", a.match.row.line))
    records = [_record(a, grid_rows, scores) for a in answers]
    frame = pd.DataFrame(records, columns=list(ANSWER_COLUMNS))
    return integer_columns(frame, INTEGER_COLUMNS)


def integer_columns(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """Whole-number columns as nullable integers, so a missing cell does not turn 2048 into
    2048.0 in the CSV."""
    for c in columns:
        if c in frame.columns:
            frame[c] = pd.array([None if pd.isna(v) else int(v) for v in frame[c]], dtype="Int64")
    return frame


def no_answers_reason(
    grid: pd.DataFrame, matches: Sequence[LiteratureMatch], mapping: LiteratureMapping
) -> str:
    """Why the answers table is empty, in words a new user can act on."""
    if grid.empty:
        return "The store holds no complete setting with a score, so there is nothing to answer."
    models = sorted(set(grid["model_name"]))
    other = sorted({m.model_name or "" for m in matches if m.variant_counterpart and m.own is None})
    if other:
        return (
            f"The literature reports the {', '.join(mapping.variants)} variant; the store holds "
            f"{', '.join(other)} only on {', '.join(sorted(set(grid['variant'])))}. The "
            "unmatched literature rows list them."
        )
    literature_models = sorted({m.row.model for m in matches})
    return (
        f"No literature row names a model of this store ({', '.join(models)}): the literature "
        f"table has {len(matches)} rows for {len(literature_models)} models, and the mapping "
        f"({mapping.source}) lists {len(mapping.models)} names. Give the model's published "
        "values with --literature CSV and its name with --mapping YAML."
    )
