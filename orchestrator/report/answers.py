"""The report's first table, `answers`: per published value of a model in the store, the
verdict and the setting that best explains it (orchestrator.analysis.answers), with that
setting's axes, score and interval read from the grid, and, for a value no k/(164 x samples)
gives, a note that says so (`obtainability_note`, shown under the row).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from orchestrator.analysis.answers import Answer, answer
from orchestrator.analysis.literature import LiteratureMatch
from orchestrator.report.grid import present, template_label
from storage.literature import LiteratureMapping

ANSWER_COLUMNS = tuple(
    """model_name literature_model reported source_id location obtainability
    obtainability_note verdict verdict_detail n_reproducing setting_model setting_variant
    template decoding max_length precision backend n_samples score_pct ci_low_pct ci_high_pct
    gap_pp setting_key line""".split()
)
AXIS_COLUMNS = ("decoding", "max_length", "precision", "backend", "n_samples")
INTEGER_COLUMNS = ("n_reproducing", "max_length", "n_samples", "line")


def _record(a: Answer, grid_rows: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
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
    return record


def answers_frame(matches: Sequence[LiteratureMatch], grid: pd.DataFrame) -> pd.DataFrame:
    """One row per literature row with an answer, by model, in the literature's order."""
    grid_rows = {r["setting_key"]: r for r in grid.to_dict("records")} if len(grid) else {}
    answers = [a for m in matches if (a := answer(m)) is not None]
    answers.sort(key=lambda a: (a.match.model_name or "", a.match.row.line))
    frame = pd.DataFrame([_record(a, grid_rows) for a in answers], columns=list(ANSWER_COLUMNS))
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
