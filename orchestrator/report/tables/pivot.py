"""The scores of each model as a pivot, like the study's Table 2: rows template x decoding x max
length, columns the precisions (bf16, fp16, fp32, int8, int4; with the backend when a model was
run on more than one), cells the score in percent.

What else varies within a model (benchmark, variant, metric, samples per problem, problems
scored) becomes a row column of its own, so no cell mixes two kinds of measurement. A cell
that still holds several settings (a repeated import of another file for the same cell)
shows their mean; its hover text lists each. The flat grid stays in CSV and JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from orchestrator.report.tables.answers import integer_columns
from orchestrator.report.tables.data import ReportTable
from orchestrator.report.tables.grid import PRECISION_RANK, present, template_label
from orchestrator.report.tables.records import records

ROW_AXES = ("template", "decoding", "max_length")
# Shown as row columns only for a model where they vary.
EXTRA_DIMS = ("benchmark", "variant", "metric", "n_samples", "n_problems")
INTEGER_DIMS = ("max_length", "n_samples", "n_problems")


def _fmt(value: Any) -> str:
    return f"{value:.2f}" if present(value) else "?"


def _hover(rows: Sequence[dict[str, Any]]) -> str:
    parts = []
    for r in rows:
        interval = ""
        if present(r["ci_low_pct"]):
            interval = f" [{_fmt(r['ci_low_pct'])}, {_fmt(r['ci_high_pct'])}]"
        imported = " (imported)" if r.get("generated_by") not in (None, r["backend"]) else ""
        parts.append(
            f"{_fmt(r['score_pct'])}{interval}, n_samples {r['n_samples']}, "
            f"{r['n_problems']} problems, setting {str(r['setting_key'])[:12]}{imported}"
        )
    prefix = f"mean of {len(rows)} settings: " if len(rows) > 1 else ""
    return prefix + "; ".join(parts)


def _interval(rows: Sequence[dict[str, Any]]) -> str:
    """A cell's interval as the LaTeX tables show it after its value: one setting's bootstrap
    interval, or, for a mean of several settings, how many (their intervals are in the grid)."""
    if len(rows) > 1:
        return f"mean of {len(rows)} settings"
    r = rows[0]
    if not present(r["ci_low_pct"]) or not present(r["ci_high_pct"]):
        return ""
    return f"[{_fmt(r['ci_low_pct'])}, {_fmt(r['ci_high_pct'])}]"


def _column(row: dict[str, Any], by_backend: bool) -> str:
    return f"{row['precision']} {row['backend']}" if by_backend else str(row["precision"])


def _column_order(name: str) -> tuple:
    precision, _, backend = name.partition(" ")
    return (PRECISION_RANK.get(precision, 9), precision, backend)


def _model_pivot(rows: list[dict[str, Any]]) -> tuple[list[dict], list[dict], list[dict]]:
    dims = [d for d in EXTRA_DIMS if len({str(r[d]) for r in rows}) > 1]
    by_backend = len({r["backend"] for r in rows}) > 1
    cells: dict[tuple, dict[str, list[dict[str, Any]]]] = {}
    for r in rows:  # the grid's order: own template first, then decoding, length, precision
        ident = (*(r[d] for d in dims), template_label(r), r["decoding"], r["max_length"])
        cells.setdefault(ident, {}).setdefault(_column(r, by_backend), []).append(r)
    values, hovers, intervals = [], [], []
    for ident, columns in cells.items():
        head = dict(zip([*dims, *ROW_AXES], ident, strict=True))
        head["model_name"] = rows[0]["model_name"]
        scores = {c: [r["score_pct"] for r in members] for c, members in columns.items()}
        values.append(head | {c: sum(v) / len(v) for c, v in scores.items()})
        hovers.append({c: _hover(members) for c, members in columns.items()})
        intervals.append({c: _interval(members) for c, members in columns.items()})
    return values, hovers, intervals


def pivot_table(grid: pd.DataFrame, empty_reason: str) -> ReportTable:
    """`scores_pivot`: one sub-table per model (md/html/tex), hover text (html) with each
    cell's interval, samples, problems and setting key, and the interval each cell shows
    after its value (tex)."""
    values: list[dict] = []
    hovers: list[dict] = []
    intervals: list[dict] = []
    scored = grid[grid["score_pct"].notna()] if len(grid) else grid
    for _, part in scored.groupby("model_name", sort=False) if len(scored) else []:
        v, h, i = _model_pivot(records(part))
        values += v
        hovers += h
        intervals += i
    value_columns = sorted(
        {c for v in values for c in v} - {"model_name", *EXTRA_DIMS, *ROW_AXES}, key=_column_order
    )
    dims = [d for d in EXTRA_DIMS if any(d in v for v in values)]
    columns = ["model_name", *dims, *ROW_AXES, *value_columns]
    frame = integer_columns(pd.DataFrame(values, columns=columns), INTEGER_DIMS)
    return ReportTable(
        "scores_pivot",
        frame,
        group_by="model_name",
        empty_reason=empty_reason,
        hover=pd.DataFrame(hovers, columns=columns),
        intervals=pd.DataFrame(intervals, columns=columns),
    )
