"""The problems view's data, as plain JSON-ready values: per model (and benchmark), the settings
in grid order, the problems in dataset order, each cell's sample states, each problem's
disagreement, and the paired comparison of every two settings (each problem's texts:
orchestrator/report/view/sampletable.py).

Pure: rows in, dicts out (orchestrator/report/view/folder.py reads the store and writes the files).

*Disagreement* of a problem is the population variance, over the settings that hold it, of each
setting's pass rate on it (passing samples / samples). With one sample per problem that is
p (1 - p) for the share p of settings that solve it: 0 when every setting agrees, largest when
half solve it. Sorting by it puts the problems that some settings solve and others do not first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from orchestrator.analysis.paired import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    PairColumns,
    PairedMethod,
    PairingError,
    align_problems,
    compare_columns,
    draw_resamples,
)
from orchestrator.report.tables.labels import (
    SHOWN_AXES,
    axes_label,
    ordered_settings,
    setting_axes,
)
from orchestrator.report.view.inspection import STATE_CODE, CellState, task_order

_DECIMALS = 6
PASSED_CODE = STATE_CODE[CellState.PASSED]


@dataclass(frozen=True)
class PairOptions:
    """The paired test's options (the Evidence module's defaults, as `compare` uses them)."""

    n_resamples: int = DEFAULT_RESAMPLES
    confidence: float = DEFAULT_CONFIDENCE
    seed: int = DEFAULT_SEED


def pass_rates(codes: Sequence[str]) -> list[float | None]:
    """Per setting, passing samples / samples of one problem (None: no sample)."""
    return [c.count(PASSED_CODE) / len(c) if c else None for c in codes]


def disagreement(rates: Sequence[float | None]) -> float:
    """Population variance of the settings' pass rates on one problem (see the docstring)."""
    held = np.array([r for r in rates if r is not None], dtype=float)
    return float(held.var()) if held.size > 1 else 0.0


def matrix(
    settings: Sequence[Mapping[str, Any]], states: Mapping[tuple[str, str], Sequence[str]]
) -> dict[str, Any]:
    """`settings`: the group's settings rows; `states`: (setting key, task id) -> the codes of
    its samples in sample order. Returns the matrix payload (settings in grid order, problems
    in dataset order, per problem one code string per setting)."""
    rows = ordered_settings(settings)
    keys = [str(r["setting_key"]) for r in rows]
    problems = sorted({t for _, t in states}, key=task_order)
    cells, spread, share = [], [], []
    for task in problems:
        codes = ["".join(states.get((k, task), ())) for k in keys]
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
    }


def _outcomes(
    keys: Sequence[str], passed: Mapping[tuple[str, str], Sequence[bool]]
) -> dict[str, dict[str, Any]]:
    """Per setting, its per-problem outcome: a bool with one sample, else the pass rate."""
    out: dict[str, dict[str, Any]] = {k: {} for k in keys}
    for (key, task), values in passed.items():
        if key in out and values:
            out[key][task] = bool(values[0]) if len(values) == 1 else sum(values) / len(values)
    return out


def _shown(found: PairColumns) -> list[dict[str, Any]]:
    """Each pair as the page shows it (rounded; the p-value to 6 significant digits)."""

    def pp(values: np.ndarray) -> list[float]:
        return [round(v, 4) for v in (100 * values).tolist()]

    exact, sign_flip = PairedMethod.EXACT_MCNEMAR.value, PairedMethod.SIGN_FLIP.value
    columns = zip(
        found.b.tolist(),
        found.c.tolist(),
        pp(found.mean_d),
        pp(found.low),
        pp(found.high),
        found.p_value,
        found.exact.tolist(),
        [round(v, 4) for v in found.mdd_pp()],
        found.exhaustive,
        strict=True,
    )
    return [
        {
            "n": found.n,
            "b": b,
            "c": c,
            "delta_pp": delta,
            "ci_low_pp": low,
            "ci_high_pp": high,
            "p_value": float(f"{p:.6g}"),
            "method": exact if is_exact else sign_flip,
            "mdd_pp": mdd,
            "exhaustive": exhaustive,
        }
        for b, c, delta, low, high, p, is_exact, mdd, exhaustive in columns
    ]


def _vector(outcome: Mapping[str, Any], tasks: Sequence[str], as_float: bool) -> np.ndarray:
    values = [outcome[t] for t in tasks]
    return np.array(values, dtype=float if as_float else bool)


def pairs(
    keys: Sequence[str],
    passed: Mapping[tuple[str, str], Sequence[bool]],
    options: PairOptions,
) -> dict[str, Any]:
    """The paired comparison of every two settings of a group, A the one earlier in `keys`
    (the grid's order) and B the later: {"keys": keys, "pairs": {"i,j": result}} with i < j.
    `passed`: (setting key, task id) -> its samples' passed flags. The numbers are
    `compare_paired`'s; settings over the same problems share one set of draws (what
    `compare_paired` draws for that seed), so all pairs cost about as much as the settings."""
    outcomes = _outcomes(keys, passed)
    found: dict[tuple[int, int], dict[str, Any]] = {}
    tasks_of = [tuple(sorted(outcomes[key])) for key in keys]
    by_tasks: dict[tuple[str, ...], list[int]] = {}
    for i, tasks in enumerate(tasks_of):
        by_tasks.setdefault(tasks, []).append(i)
    for i in range(len(keys)):
        for j in range(i + 1, len(keys)):
            if tasks_of[i] != tasks_of[j]:
                try:
                    align_problems(outcomes[keys[i]], outcomes[keys[j]])
                except PairingError as e:
                    found[i, j] = {"error": str(e)}
    for tasks, members in by_tasks.items():
        if len(members) < 2 or not tasks:
            continue
        resamples = draw_resamples(len(tasks), options.n_resamples, options.seed)
        rows = {
            i: _vector(outcomes[keys[i]], tasks, as_float=False)
            if all(isinstance(outcomes[keys[i]][t], bool) for t in tasks)
            else _vector(outcomes[keys[i]], tasks, as_float=True)
            for i in members
        }
        index = {i: at for at, i in enumerate(members)}
        wanted = [(i, j) for at, i in enumerate(members) for j in members[at + 1 :]]
        results = compare_columns(
            [rows[i] for i in members],
            [(index[i], index[j]) for i, j in wanted],
            resamples,
            options.confidence,
        )
        for (i, j), shown in zip(wanted, _shown(results), strict=True):
            found[i, j] = shown
    return {
        "keys": list(keys),
        "options": {
            "n_resamples": options.n_resamples,
            "confidence": options.confidence,
            "seed": options.seed,
        },
        "pairs": {f"{i},{j}": found[i, j] for i, j in sorted(found)},
    }
