"""How the report's tables read in md, html and tex: titles, descriptions, which columns show,
which long texts move to a detail row, and how a value is written. CSV and JSON keep every
column at full precision; nothing here computes a metric.

Display rules: columns ending in `_pct` (percent) or `_pp` (percentage points) show two
decimals; setting keys, hashes and revisions show 12 characters; a score shown with its
interval reads "16.46 [10.37, 21.97]".
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from orchestrator.report.formats.catalogue import TABLES, display_of
from orchestrator.report.tables import wording
from orchestrator.report.tables.records import records

if TYPE_CHECKING:
    from orchestrator.report.tables.data import ReportData, ReportTable

SHORT = 12  # characters of a setting key, hash or revision in md/html/tex
_HEX = re.compile(r"^[0-9a-f]{13,}$")


def is_missing(value: Any) -> bool:
    if value is None or value is pd.NaT or value is pd.NA:
        return True
    return isinstance(value, float) and math.isnan(value)


def _short(text: str) -> str:
    return " ".join(part[:SHORT] for part in re.split(r"[ ,]+", text.strip()))


def format_cell(column: str, value: Any) -> str:
    """Display text of one value (md/tex/html)."""
    return _formatter(column)(value)


def _general(column: str, value: Any) -> str:
    """`format_cell` by the rules, for any value."""
    if is_missing(value):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if column.endswith(("_pct", "_pp")) and isinstance(value, (int, float)):
        return f"{value:.2f}"
    if isinstance(value, str) and (
        column.endswith(("_key", "_keys", "_sha256", "git_revision"))
        or (column == "model_revision" and _HEX.match(value))
    ):
        return _short(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.4g}"
    if isinstance(value, pd.Timestamp):
        return value.isoformat(timespec="seconds")
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


@functools.cache
def _formatter(column: str) -> Callable[[Any], str]:
    """`format_cell` for one column: what its name decides is decided once (a report at 6,000
    settings formats half a million cells, twice), and text, floats and ints take a path by
    their exact type that gives what `_general` gives (tested)."""
    percent = column.endswith(("_pct", "_pp"))
    hashed = column.endswith(("_key", "_keys", "_sha256", "git_revision"))
    revision = column == "model_revision"

    def text(value: Any) -> str:
        kind = type(value)
        if kind is str:
            return _short(value) if hashed or (revision and _HEX.match(value)) else value
        if kind is float and value == value:  # NaN is missing: `_general`
            if percent:
                return f"{value:.2f}"
            return str(int(value)) if value.is_integer() else f"{value:.4g}"
        if kind is int:
            return f"{value:.2f}" if percent else int.__repr__(value)
        return _general(column, value)

    return text


def value_and_interval(name: str, column: str, row: Mapping[str, Any]) -> tuple[str, str]:
    """A row's cell as (value text, interval text): the interval is "[10.37, 21.97]" for the
    score of a table that shows one, else ""."""
    value = row.get(column)
    if display_of(name).percent and isinstance(value, float) and not math.isnan(value):
        return f"{value:.2f}", ""
    text = format_cell(column, value)
    if column in INTERVAL_OF and display_of(name).interval and text:
        low_column, high_column = INTERVAL_OF[column]
        low, high = row.get(low_column), row.get(high_column)
        if not is_missing(low) and not is_missing(high):
            return text, f"[{format_cell(low_column, low)}, {format_cell(high_column, high)}]"
    return text, ""


# a value and the columns of its interval (shown with it where the display has `interval`)
INTERVAL_OF = {"score_pct": ("ci_low_pct", "ci_high_pct"), "delta_pp": ("ci_low_pp", "ci_high_pp")}


def cell_text(name: str, column: str, row: Mapping[str, Any]) -> str:
    """A row's cell as shown: a score with its interval where the table shows one."""
    text, interval = value_and_interval(name, column, row)
    return f"{text} {interval}" if interval else text


def phrases(data: ReportData) -> dict[str, str]:
    """The card-driven words the descriptions are written with (report/wording.py), the scale
    in the problems the store's settings hold."""
    cards = data.cards
    return {
        "metric": wording.metric(cards),
        "scale": wording.scale(cards, data.scored_problems),
        "reproduced": wording.reproduced(cards),
        "near": wording.near(cards),
        "matching": wording.matching(cards),
        "headline": wording.headline(cards),
    }


def description(data: ReportData, name: str) -> str:
    text = TABLES.get(name, (name, ""))[1].format(**phrases(data))
    if name == "effects":
        base = ", ".join(f"{k}={v}" for k, v in data.options["baseline"].items())
        text = f"Baseline: {base}. {text}"
    if name in ("findings", "comparisons"):
        o = data.options
        text += (
            f" Resampling: {o['n_resamples']} resamples, seed {o['seed']}; intervals at "
            f"{o['confidence']:.0%}."
        )
    if name in INTERVAL_TABLES:
        text += " " + interval_note(data)
    return text


INTERVAL_TABLES = ("grid", "answers", "scores_pivot")  # tables whose scores carry an interval


def interval_note(data: ReportData) -> str:
    """How the intervals were computed, as the tables that show them say it."""
    o = data.options
    return (
        f"Intervals: {o['confidence']:.0%} percentile bootstrap over problems, "
        f"{o['n_resamples']} resamples, seed {o['seed']}."
    )


def notes_after(data: ReportData) -> str | None:
    """The section the notes follow: the findings where the report has them (right after the
    answers), else the first."""
    names = [t.name for t in data.tables]
    if "findings" in names:
        return "findings"
    return names[0] if names else None


def sentence_list(name: str, frame: pd.DataFrame) -> list[str] | None:
    """The sentences of a table shown as a list (md/html/tex), None for other tables."""
    column = display_of(name).sentences
    if column is None:
        return None
    return [str(v) for v in frame[column]] if column in frame.columns else []


@dataclass(frozen=True)
class Part:
    """A (sub-)table as md and html show it: its group's value (None: the whole table), its
    frame (`groups`) and that frame's rows as records."""

    group: str | None
    frame: pd.DataFrame
    rows: list[dict[str, Any]]
    _texts: dict[tuple[str, str], list[str]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def texts(self, name: str, column: str) -> list[str]:
        """`cell_text` of `column` for each row of the part, made once for every format that
        shows the part (md and html show the same cells)."""
        key = (name, column)
        if key not in self._texts:
            self._texts[key] = [cell_text(name, column, row) for row in self.rows]
        return self._texts[key]


class TableParts:
    """Each table's parts, split and read into records once for every format of a report (md
    and html show the same parts: each splitting them again doubled the work)."""

    def __init__(self) -> None:
        self._held: dict[str, list[Part]] = {}

    def __call__(self, table: ReportTable) -> list[Part]:
        if table.name not in self._held:
            self._held[table.name] = [
                Part(group, frame, records(frame))
                for group, frame in groups(table.frame, table.group_by)
            ]
        return self._held[table.name]


def groups(frame: pd.DataFrame, by: str | None):
    """(group value or None, rows) in the frame's order; columns empty for every row of a group
    are left out of it (a model without int8 settings has no int8 column)."""
    if by is None or frame.empty:
        yield None, frame
        return
    for value, part in frame.groupby(by, sort=False):
        part = part.drop(columns=[by])
        yield str(value), part.loc[:, part.notna().any(axis=0)]
