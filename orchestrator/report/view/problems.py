"""The problems view's data, as plain JSON-ready values: per model (and benchmark), the settings
in grid order, the problems in dataset order, each cell's sample states and each problem's
disagreement (each problem's texts: orchestrator/report/view/sampletable.py). The page computes
the paired counts of two settings from these cells itself (assets/problems.js).

Pure: rows in, dicts out (orchestrator/report/view/modelfiles.py reads the store and writes the
files).

*Disagreement* of a problem is the population variance, over the settings that hold it, of each
setting's pass rate on it (passing samples / samples). With one sample per problem that is
p (1 - p) for the share p of settings that solve it: 0 when every setting agrees, largest when
half solve it. Sorting by it puts the problems that some settings solve and others do not first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from orchestrator.report.tables.labels import (
    SHOWN_AXES,
    axes_label,
    ordered_settings,
    setting_axes,
)
from orchestrator.report.view.inspection import STATE_CODE, CellState, task_order

_DECIMALS = 6
PASSED_CODE = STATE_CODE[CellState.PASSED]


def pass_rates(codes: Sequence[str]) -> list[float | None]:
    """Per setting, passing samples / samples of one problem (None: no sample)."""
    return [c.count(PASSED_CODE) / len(c) if c else None for c in codes]


def disagreement(rates: Sequence[float | None]) -> float:
    """Population variance of the settings' pass rates on one problem (see the docstring)."""
    held = np.array([r for r in rates if r is not None], dtype=float)
    return float(held.var()) if held.size > 1 else 0.0


def matrix(
    settings: Sequence[Mapping[str, Any]],
    states: Mapping[tuple[str, str], Sequence[str]],
    passing: Mapping[tuple[str, str], int] | None = None,
) -> dict[str, Any]:
    """`settings`: the group's settings rows; `states`: (setting key, task id) -> the codes of
    its samples in sample order; `passing`: (setting key, task id) -> its passing samples
    (None: as many as its P codes). Returns the matrix payload (settings in grid order,
    problems in dataset order, per problem one code string per setting; `passing`: the cells
    whose passing samples are not their P codes, as [problem, setting, passing] — a truncated
    prompt's sample that passed shows R but counts as a pass, as in `compare`)."""
    rows = ordered_settings(settings)
    keys = [str(r["setting_key"]) for r in rows]
    problems = sorted({t for _, t in states}, key=task_order)
    cells, spread, share, other = [], [], [], []
    for i, task in enumerate(problems):
        codes = ["".join(states.get((k, task), ())) for k in keys]
        if passing is not None:
            for j, (key, code) in enumerate(zip(keys, codes, strict=True)):
                count = passing.get((key, task), 0)
                if count != code.count(PASSED_CODE):
                    other.append([i, j, count])
        rates = pass_rates(codes)
        held = [r for r in rates if r is not None]
        cells.append(codes)
        spread.append(round(disagreement(rates), _DECIMALS))
        share.append(round(float(np.mean(held)), _DECIMALS) if held else None)
    out_settings: list[dict[str, Any]] = []
    every_axes = [setting_axes(row) for row in rows]
    for column, (row, key, axes) in enumerate(zip(rows, keys, every_axes, strict=True)):
        done = "".join(c[column] for c in cells)
        out_settings.append(
            {
                "key": key,
                "label": axes_label(axes),
                "axes": axes,
                "status": row.get("status"),
                "pass_pct": round(100 * done.count(PASSED_CODE) / len(done), 2) if done else None,
            }
        )
    varying = [a for a in SHOWN_AXES if len({str(axes[a]) for axes in every_axes}) > 1]
    return {
        "settings": out_settings,
        "axes": varying,
        "problems": problems,
        "cells": [",".join(c) for c in cells],
        "disagreement": spread,
        "pass_share": share,
        "passing": other,
    }
