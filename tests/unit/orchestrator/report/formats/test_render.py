"""report.json's rows (report/formats/render.py): read column by column, the same values
as `_json_value` of each cell, for every kind of column a report's frames hold."""

from __future__ import annotations

import json
import math

import numpy as np

from orchestrator.report.formats import render
from tests.unit.orchestrator.report.tables.test_records import _frame


def _cell_by_cell(frame):
    cols = [c for c in frame.columns if c != "exact"]
    return [
        {c: render._json_value(v) for c, v in zip(cols, row, strict=True)}
        for row in frame[cols].itertuples(index=False)
    ]


def test_json_rows_are_each_cells_json_value():
    frame = _frame()
    frame["inf"] = [math.inf, -0.0, -math.inf]
    frame["uint"] = np.array([1, 2, 3], dtype=np.uint8)
    frame["exact"] = ["left", "out", "too"]
    want, got = _cell_by_cell(frame), render._json_rows(frame)
    assert got == want and "exact" not in got[0]
    for w, g in zip(want, got, strict=True):
        assert [type(v) for v in g.values()] == [type(v) for v in w.values()]
    assert json.dumps(got, indent=2, default=str) == json.dumps(want, indent=2, default=str)
    assert render._json_rows(frame.iloc[:0]) == []


def test_json_text_holds_what_the_standard_encoder_writes_indented():
    doc = {
        "store": "results/β",
        "options": {"baseline": {"template": "own"}, "n_resamples": 10_000, "seed": 0},
        "rows": [
            {"p": 7.62939453125e-05, "tiny": 1.9073486328125e-06, "n": 3, "none": None},
            {"count": np.int64(4), "flag": True, "text": 'StarChat-β "q"\n', "list": [1, 2.5]},
        ],
        "empty": {},
    }
    text = render.json_text(doc)
    assert json.loads(text) == json.loads(json.dumps(doc, indent=2, default=str))
    assert text.endswith("}\n") and '\n  "options": {\n    "baseline": {' in text
    assert "StarChat-β" in text and "e-6" in text  # UTF-8 and the shortest float
    assert json.loads(render.json_text({"x": math.inf}))["x"] is None  # not `Infinity`
