"""Cell texts (report/formats/display.py, html.breakable): the per-column fast paths give
what the general rules give, for every kind of value and column a report shows."""

from __future__ import annotations

import html as html_module
import math
import re

import numpy as np
import pandas as pd
import pytest

from orchestrator.report.formats import display
from orchestrator.report.formats.html import _BREAK_AFTER, breakable

COLUMNS = [
    "score_pct",
    "delta_pp",
    "setting_key",
    "setting_keys",
    "weights_sha256",
    "git_revision",
    "model_revision",
    "model_name",
    "n_problems",
    "p_value",
]
VALUES = [
    None,
    math.nan,
    math.inf,
    -math.inf,
    pd.NaT,
    pd.NA,
    True,
    False,
    0,
    -3,
    12_345_678_901,
    0.0,
    -0.0,
    2.0,
    44.9,
    1 / 3,
    1e-9,
    np.float64(0.125),
    np.int64(7),
    np.bool_(True),
    "",
    "plain",
    "0123456789abcdef0123",  # a hash: shortened in hash columns and as a model revision
    "main",
    "a_b/c:d,e;f=g",
    "<b>&'\"",
    pd.Timestamp("2026-12-03 12:00:01.5"),
    [1, 2],
    ("a", "b"),
]


@pytest.mark.parametrize("column", COLUMNS)
def test_format_cell_is_the_general_rule_for_every_value(column):
    for value in VALUES:
        assert display.format_cell(column, value) == display._general(column, value), value


def _split(text: str) -> str:
    """breakable by its rule alone: escape each part, a break after each break character."""
    return "".join(
        html_module.escape(part) + ("<wbr>" if _BREAK_AFTER.fullmatch(part) else "")
        for part in _BREAK_AFTER.split(text)
    )


def test_breakable_plain_text_is_the_split_rule():
    texts = [str(v) for v in VALUES] + [
        "",
        "44.90 [40.1, 49.2]",
        "x" * 400,
        "é 漢",
        "a'b",
        "\n",
        "R&D",
        "x > y",
    ]
    for text in texts:
        assert breakable(text) == _split(text), text
    assert breakable("a_b") == "a_<wbr>b" and breakable("<") == "&lt;"
    assert re.search("<wbr>", breakable("model/name")) is not None


def test_is_number_by_type_is_the_abc_rule():
    import numbers

    from orchestrator.report.formats.html import _is_number

    for value in VALUES:
        rule = (
            isinstance(value, numbers.Real)
            and not isinstance(value, bool)
            and not display.is_missing(value)
        )
        assert _is_number(value) == rule, value


def test_table_parts_split_and_read_a_table_once(monkeypatch):
    from orchestrator.report.tables.data import ReportTable
    from orchestrator.report.tables.records import records

    frame = pd.DataFrame({"model_name": ["a", "a", "b"], "score_pct": [1.0, 2.0, None]})
    table = ReportTable("grid", frame, group_by="model_name")
    calls = []
    real = display.groups
    monkeypatch.setattr(display, "groups", lambda f, by: calls.append(by) or real(f, by))
    parts = display.TableParts()
    first = parts(table)
    assert parts(table) is first and calls == ["model_name"]
    assert [p.group for p in first] == ["a", "b"]
    assert [p.rows for p in first] == [records(f) for _, f in real(frame, "model_name")]
    assert "score_pct" not in first[1].frame.columns  # empty in group b: left out, as groups does
