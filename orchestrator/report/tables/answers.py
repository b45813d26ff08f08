"""The report's first table, `answers`: per published value of a model in the store, the
verdict and the setting that best explains it (orchestrator.analysis.answers), with that
setting's axes, score and interval read from the grid; for a value no count k/(problems x
samples) gives, a note that says so (`obtainability_note`, shown under the row); for a value
matched by its spread, how it was judged (`match_note`); and beside the verdict how much it
proves (orchestrator.analysis.coincidence), for values matched by their exact count: the
coincidence rate of the value among the settings of the verdict's pool (within 5 points of the
value), in words, and the settings whose interval contains the value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from orchestrator.analysis.answers import Answer, Verdict, answer
from orchestrator.analysis.coincidence import coincidence, interval_contains
from orchestrator.analysis.literature import LiteratureMatch, SettingScore
from orchestrator.analysis.literature_spread import spread_note
from orchestrator.report.tables.grid import present, template_label
from orchestrator.report.tables.published import Published
from orchestrator.report.tables.records import records

ANSWER_COLUMNS = tuple(
    """model_name benchmark literature_model reported reported_spread source_id location
    obtainability obtainability_note match_note verdict verdict_detail n_reproducing
    setting_model setting_variant template decoding max_length precision backend n_samples
    metric score_pct ci_low_pct ci_high_pct gap_pp coincidence_rate evidence_strength
    n_in_interval evidence in_interval setting_key line""".split()
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
    a: Answer,
    scores: Sequence[SettingScore],
    grid_rows: Mapping[str, Mapping[str, Any]],
    denominator: int,
) -> dict[str, Any]:
    """How much the verdict proves: the coincidence rate of the value (a count
    k/`denominator`) among the pool's settings, in words, and the settings whose interval
    contains it."""
    pool = _pool(a, scores)
    if not pool:
        return {}
    value = a.match.row.score_text
    rate = coincidence(value, [s.score for s in pool], denominator)
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
    a: Answer,
    grid_rows: Mapping[str, Mapping[str, Any]],
    scores: Sequence[SettingScore],
    confidence: float,
) -> dict[str, Any]:
    m = a.match
    record: dict[str, Any] = dict.fromkeys(ANSWER_COLUMNS)
    count = m.obtainability  # None: matched by its spread
    record.update(
        model_name=m.model_name,
        benchmark=m.benchmark,
        literature_model=m.row.model,
        reported=m.row.score_text,
        reported_spread=m.spread.describe() if m.spread is not None else None,
        source_id=m.row.source_id,
        location=m.row.table_or_location,
        obtainability=count.verdict if count is not None else None,
        obtainability_note=count.note() if count is not None else None,
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
            metric=row["metric"],
            score_pct=row["score_pct"],
            ci_low_pct=row["ci_low_pct"] if present(row["ci_low_pct"]) else None,
            ci_high_pct=row["ci_high_pct"] if present(row["ci_high_pct"]) else None,
            setting_key=a.setting.key,
        )
        if m.spread is not None:
            mine = a.setting.spread(m.spread.group_size)
            record["match_note"] = spread_note(m.spread, mine, confidence)
    if count is not None:  # the coincidence rate is of values matched by their exact count
        record.update(_evidence(a, scores, grid_rows, count.denominator))
    return record


def answers_frame(
    matches: Sequence[LiteratureMatch],
    grid: pd.DataFrame,
    scores: Sequence[SettingScore] = (),
    *,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """One row per literature row with an answer, by model, in the literature's order (of each
    benchmark, by name). `scores`: the settings the join compared (for the coincidence rate and
    the intervals); `confidence`: the spread rule's level, for its notes."""
    grid_rows = {r["setting_key"]: r for r in records(grid)} if len(grid) else {}
    answers = [a for m in matches if (a := answer(m)) is not None]
    answers.sort(key=lambda a: (a.match.model_name or "", a.match.benchmark, a.match.row.line))
    rows = [_record(a, grid_rows, scores, confidence) for a in answers]
    frame = pd.DataFrame(rows, columns=list(ANSWER_COLUMNS))
    return integer_columns(frame, INTEGER_COLUMNS)


def integer_columns(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """Whole-number columns as nullable integers, so a missing cell does not turn 2048 into
    2048.0 in the CSV."""
    for c in columns:
        if c in frame.columns:
            frame[c] = pd.array([None if pd.isna(v) else int(v) for v in frame[c]], dtype="Int64")
    return frame


def no_answers_reason(grid: pd.DataFrame, parts: Sequence[Published]) -> str:
    """Why the answers table is empty, in words a new user can act on (per benchmark)."""
    if grid.empty:
        return "The store holds no complete setting with a score, so there is nothing to answer."
    if not parts:
        return "No setting of this store carries a benchmark card, so nothing is compared."
    if len(parts) == 1:
        return _reason(parts[0], grid)
    return " ".join(f"{p.card.title}: {_reason(p, grid)}" for p in parts)


def _reason(part: Published, grid: pd.DataFrame) -> str:
    if part.problem is not None:
        return part.problem[0].upper() + part.problem[1:] + "."
    mine = grid[grid["benchmark"] == part.card.benchmark]
    models = sorted(set(mine["model_name"]))
    other = sorted(
        {m.model_name or "" for m in part.matches if m.variant_counterpart and m.own is None}
    )
    variants = ", ".join(part.rule.variants or ())
    if other:
        return (
            f"The literature reports the {variants} variant; the store holds "
            f"{', '.join(other)} only on {', '.join(sorted(set(mine['variant'])))}. The "
            "unmatched literature rows list them."
        )
    literature_models = sorted({m.row.model for m in part.matches})
    return (
        f"No literature row names a model of this store "
        f"({', '.join(models)}): its literature ({part.literature}) has {len(part.matches)} "
        f"rows for {len(literature_models)} models, and the mapping ({part.mapping.source}) "
        f"lists {len(part.mapping.models)} names. Give the model's published values with "
        "--literature FILE and its name with --mapping YAML."
    )
