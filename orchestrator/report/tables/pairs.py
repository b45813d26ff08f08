"""`reprogrid compare`: the paired test of two settings of a store (docs/statistics.md).

A side is a setting key or a unique prefix of one (reports show 12 characters), or a
**selection**: `KEY=VALUE[,KEY=VALUE ...]` over the settings' axes, on top of the effects
baseline (template=own, decoding=greedy, max_length=2048, precision=bf16): an axis the selection
does not name takes the baseline's value, `KEY=*` frees it, and `--where KEY=VALUE` adds a
filter to both sides. So `template=own template=instruct --where model=M` compares model M's
baseline with the same setting under the harness's instruct template. A selection must name
exactly one complete setting; otherwise the error lists the candidates and what tells them
apart, or for none: a value the store lacks with a did-you-mean, or the baseline's value that
no candidate has, named as the baseline's with how to free it (`precision=*`). Both sides must
be settings of the same benchmark, variant and problems.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from orchestrator.analysis.baseline import ANY, DEFAULT_BASELINE
from orchestrator.analysis.findings import p_text
from orchestrator.analysis.intervals import ProblemCounts
from orchestrator.analysis.noise import noise_floors
from orchestrator.analysis.paired import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    PairedResult,
    align_problems,
    compare_paired,
)
from orchestrator.report.tables.data import ReportOptions
from orchestrator.report.tables.evidence import setting_outcomes
from orchestrator.report.tables.grid import grid_frame, read_frame, setting_label
from orchestrator.report.tables.records import records
from storage.damage import StoreDamage, damaged_error
from storage.store import Store

# selection key -> grid column
SELECT = {
    "model": "model_name",
    "template": "template_kind",
    "decoding": "decoding",
    "max_length": "max_length",
    "precision": "precision",
    "backend": "backend",
    "variant": "variant",
    "benchmark": "benchmark",
    "n_samples": "n_samples",
    "tuning": "model_tuning",
}
TELLS_APART = tuple(
    "model_name template_kind decoding max_length precision backend variant n_samples "
    "benchmark".split()
)


class CompareError(ValueError):
    """A side that names no setting or several, or two sides that cannot be paired."""


def _is_key(text: str) -> bool:
    return "=" not in text and all(c in "0123456789abcdef" for c in text.lower()) and text != ""


def parse_filters(items: Sequence[str]) -> dict[str, str]:
    """`KEY=VALUE` items (each possibly a comma list of them) -> {grid column: value}."""
    out: dict[str, str] = {}
    for item in (part for text in items for part in text.split(",") if part.strip()):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise CompareError(f"selection item {item!r} must look like KEY=VALUE")
        if key not in SELECT:
            close = difflib.get_close_matches(key, list(SELECT), n=1)
            hint = f" Did you mean: {close[0]}?" if close else ""
            raise CompareError(f"Unknown selection key {key!r}.{hint} Valid: {', '.join(SELECT)}")
        out[SELECT[key]] = value
    return out


def _matches(row: Mapping[str, Any], column: str, value: str) -> bool:
    cell = row.get(column)
    if column == "template_kind":  # the kind (own, instruct) or the template's own name
        return value in (str(cell), str(row.get("template")))
    return str(cell) == value


NAMES = {c: k for k, c in SELECT.items()}  # grid column -> selection key


def _shown(filters: Mapping[str, str]) -> str:
    return " ".join(f"{NAMES[c]}={v}" for c, v in filters.items())


def _values(rows: Sequence[Mapping[str, Any]], column: str) -> list[str]:
    """What a selection key can name: the column's values (a template: its kind or name)."""
    found = {str(r.get(column)) for r in rows}
    if column == "template_kind":
        found |= {str(r.get("template")) for r in rows}
    return sorted(found - {"None", "nan"})


def _unknown_value(rows: Sequence[Mapping[str, Any]], typed: Mapping[str, str]) -> str | None:
    """A typed value no complete setting has: the error, with a did-you-mean."""
    for column, value in typed.items():
        values = _values(rows, column)
        if value in values:
            continue
        close = difflib.get_close_matches(value, values, n=1)
        hint = f" Did you mean: {NAMES[column]}={close[0]}?" if close else ""
        return (
            f"No complete setting has {NAMES[column]} {value!r}.{hint} Values in the store: "
            f"{', '.join(values) or 'none'}"
        )
    return None


def _baseline_note(defaults: Mapping[str, str]) -> str:
    """What the error says of the values the user did not type."""
    if not defaults:
        return ""
    return (
        f" at the effects baseline's {_shown(defaults)} (an axis a selection does not name "
        "takes the baseline's value; KEY=* frees it)"
    )


def _no_setting(
    rows: Sequence[Mapping[str, Any]], typed: Mapping[str, str], defaults: Mapping[str, str]
) -> CompareError:
    """Why no complete setting matches: a typed value the store lacks (did-you-mean), typed
    values that never meet, or the baseline's values, which the message names as such."""
    unknown = _unknown_value(rows, typed)
    if unknown is not None:
        return CompareError(unknown)
    mine = [r for r in rows if all(_matches(r, c, v) for c, v in typed.items())]
    if not mine:
        return CompareError(
            f"no complete setting has {_shown(typed)} (each value is in the store, never together)"
        )
    blocking = {c: v for c, v in defaults.items() if not any(_matches(r, c, v) for r in mine)}
    those = f"the settings with {_shown(typed)}" if typed else "the store's settings"
    if not blocking:
        return CompareError(
            f"no complete setting has {_shown(typed)}{_baseline_note(defaults)}: {those} "
            "match each of those values, never all together; free one with KEY=*"
        )
    column, value = next(iter(blocking.items()))
    key, held = NAMES[column], _values(mine, column)
    return CompareError(
        f"no complete setting has {_shown(typed)}{_baseline_note(defaults)}: {those} have "
        f"{key} {', '.join(held)}, not the baseline's {value}; name one ({key}={held[0]}) or "
        f"free it ({key}=*)"
    )


def select(grid: pd.DataFrame, text: str, where: Mapping[str, str]) -> dict[str, Any]:
    """The one grid row a side names (see the module docstring). An error names the values
    the user typed, and the baseline's as the baseline's, with how to free them."""
    rows = records(grid) if len(grid) else []
    if _is_key(text):
        hits = [r for r in rows if r["setting_key"].startswith(text.lower())]
        if len(hits) == 1:
            return hits[0]
        what = "matches no complete setting" if not hits else f"is ambiguous ({len(hits)} settings)"
        raise CompareError(f"setting {text!r} {what}")
    named = {**where, **parse_filters([text])}
    defaults = {SELECT[a]: str(v) for a, v in DEFAULT_BASELINE.items() if SELECT[a] not in named}
    typed = {c: v for c, v in named.items() if v != ANY}
    filters = {**typed, **defaults}
    hits = [r for r in rows if all(_matches(r, c, v) for c, v in filters.items())]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise _no_setting(rows, typed, defaults)
    varying = [c for c in TELLS_APART if len({str(r[c]) for r in hits}) > 1]
    listed = "; ".join(
        f"{r['setting_key'][:12]} " + " ".join(f"{NAMES.get(c, c)}={r[c]}" for c in varying)
        for r in hits[:8]
    )
    raise CompareError(
        f"{len(hits)} settings have {_shown(typed) or 'no value named'}"
        f"{_baseline_note(defaults)}: name one with "
        f"{', '.join(k for k, c in SELECT.items() if c in varying)} ({listed})"
    )


def _side(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "setting_key": row["setting_key"],
        "model_name": row["model_name"],
        "setting": setting_label(row),
        "benchmark": row["benchmark"],
        "variant": row["variant"],
        "metric": row["metric"],
        "n_samples": int(row["n_samples"]),
        "score_pct": row["score_pct"],
        "subset": row["subset"],
    }


def _check_pairable(a: Mapping[str, Any], b: Mapping[str, Any]) -> None:
    for column in ("benchmark", "variant", "metric"):
        if a[column] != b[column]:
            raise CompareError(
                f"the settings differ in {column} ({a[column]} vs {b[column]}): a paired test "
                "needs the same benchmark, variant and problems"
            )


def result_json(test: PairedResult) -> dict[str, Any]:
    out = dataclasses.asdict(test)
    out["method"] = test.method.value
    return out


def compare_settings(
    store_uri: str,
    a: str,
    b: str,
    where: Sequence[str] = (),
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
    damage: StoreDamage | None = None,
) -> dict[str, Any]:
    """The paired test of B against A (B minus A) on the problems both hold. `damage`: the
    store's damaged files (`--skip-damaged`): their settings are left out, and named; a side
    that names one by its key is refused (StoreDamaged)."""
    store = Store(store_uri)
    options = ReportOptions(
        n_resamples=n_resamples, confidence=confidence, seed=seed, damage=damage
    )
    named = [side.lower() for side in (a, b) if _is_key(side)]
    if damage is not None and any(k.startswith(n) for n in named for k in damage.settings):
        raise damaged_error(damage, skippable=False)  # a side named by key is not left out
    counts: dict[str, ProblemCounts] = {}
    grid = grid_frame(
        store, options.without_damaged(read_frame(store, "settings")), options, counts
    )
    filters = parse_filters(where)
    ra, rb = select(grid, a, filters), select(grid, b, filters)
    if ra["setting_key"] == rb["setting_key"]:
        raise CompareError(f"both sides name setting {ra['setting_key'][:12]}")
    _check_pairable(ra, rb)
    picked = grid[grid["setting_key"].isin([ra["setting_key"], rb["setting_key"]])]
    outcomes, notes = setting_outcomes(store, picked, counts, include_pilots=True)
    if len(outcomes) != 2:
        raise CompareError(
            "no per-problem outcomes for "
            + ", ".join(k[:12] for k in (ra["setting_key"], rb["setting_key"]) if k not in outcomes)
            + (f" ({'; '.join(notes)})" if notes else " (no executions stored)")
        )
    oa, ob = outcomes[ra["setting_key"]], outcomes[rb["setting_key"]]
    tasks, xa, xb = align_problems(oa.as_mapping(), ob.as_mapping())
    test = compare_paired(
        _vector(xa, oa.binary),
        _vector(xb, ob.binary),
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
    )
    noise = _noise_pp(store, {ra["backend"], rb["backend"]})
    return {
        "store": store_uri,
        "a": _side(ra),
        "b": _side(rb),
        "n_problems": len(tasks),
        "test": result_json(test),
        "noise_pp": noise,
        "significant": test.p_value < 0.05,
        "counts": test.p_value < 0.05 and (noise is None or abs(test.delta_pp) > noise),
        "left_out": list(options.left_out()),
    }


def _noise_pp(store: Store, backends: set[str]) -> float | None:
    """The re-generation noise floor of the pair's backends (the larger), when the store's
    repeat checks measured each of them; else None."""
    floors = noise_floors(records(read_frame(store, "repeat_checks")))
    if not backends <= set(floors):
        return None
    return max((floors[x].noise_pp for x in backends), default=None)


def _vector(values: list, binary: bool) -> np.ndarray:
    return np.array(values, dtype=bool if binary else float)


def render_compare(data: Mapping[str, Any]) -> str:
    t, a, b = data["test"], data["a"], data["b"]
    unit = (
        "problems where only A passes"
        if t["method"] == "exact McNemar"
        else "problems where A scores higher"
    )
    other = "only B passes" if t["method"] == "exact McNemar" else "B scores higher"
    noise = data["noise_pp"]
    if t["p_value"] >= 0.05:
        verdict = "no significant difference"
    elif not data["counts"]:
        verdict = (
            f"significant, but within the re-generation noise of {noise:.2f} points: not counted"
        )
    else:
        verdict = f"B is {'lower' if t['delta_pp'] < 0 else 'higher'} than A"
    lines = [
        f"A {a['setting_key'][:12]} {a['model_name']} {a['setting']}: {a['score_pct']:.2f}%",
        f"B {b['setting_key'][:12]} {b['model_name']} {b['setting']}: {b['score_pct']:.2f}%",
        f"{data['n_problems']} problems ({a['benchmark']} {a['variant']}, {a['metric']}): "
        f"{t['b']} {unit} (b), {t['c']} where {other} (c)",
        f"delta (B - A) {t['delta_pp']:+.2f} points, {t['confidence']:.0%} CI "
        f"{t['ci_low_pp']:+.2f} to {t['ci_high_pp']:+.2f} (percentile bootstrap over problems, "
        f"{t['n_resamples']} resamples, seed {t['seed']})",
        f"{t['method']} {p_text(t['p_value'], t['exhaustive'], t['n_resamples'])}"
        + (" (exhaustive)" if t["exhaustive"] and t["method"] != "exact McNemar" else "")
        + f"; detectable at 80% power: {t['mdd_pp']:.2f} points",
        "noise floor: "
        + (
            f"{noise:.2f} points (repeat-check)"
            if noise is not None
            else "no re-generation noise measured"
        ),
        f"verdict: {verdict}",
        *(f"note: {line}" for line in data.get("left_out", ())),
    ]
    return "\n".join(lines)
