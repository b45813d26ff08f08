"""report.json's indented JSON (orchestrator/report/formats/indented.py) against json.dumps."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from enum import Enum, IntEnum
from fractions import Fraction

import numpy as np
import pytest

from orchestrator.report.formats.indented import indented


class Colour(Enum):
    RED = "red"


class Size(IntEnum):
    BIG = 7


class Status(str, Enum):
    DONE = "done"


VALUES = [
    None,
    True,
    False,
    0,
    -12,
    2**70,
    0.1,
    -0.0,
    1e300,
    5e-324,
    math.nan,
    math.inf,
    -math.inf,
    "",
    "plain",
    'quote " backslash \\ tab \t newline \n',
    "é ü 漢 \u2028 😀",
    "\x00\x1f\x7f",
    [],
    {},
    (),
    [1, [2, [3, []]], {}],
    (1, "two", None),
    np.float64(0.25),  # a float subclass: json writes it as a float
    np.float32(0.5),  # not a float: default=str
    np.int64(3),  # not an int: default=str
    np.bool_(True),
    Fraction(1, 3),
    datetime(2026, 12, 3, 12, 0, tzinfo=UTC),
    Colour.RED,
    Size.BIG,  # an int subclass
    Status.DONE,  # a str subclass
]


@pytest.mark.parametrize("value", VALUES, ids=[repr(v)[:30] for v in VALUES])
def test_a_value_alone_and_inside_containers(value):
    for doc in (
        value,
        [value],
        {"k": value},
        {"rows": [{"a": value, "b": [value, {"c": value}]}, {}], "n": 1},
    ):
        assert indented(doc) == json.dumps(doc, indent=2, default=str)


def test_keys_that_are_not_text():
    doc = {7: "a", 2.5: "b", True: "c", None: "d", False: {3: [], -1.0: {}}, math.inf: 0}
    assert indented(doc) == json.dumps(doc, indent=2, default=str)
    with pytest.raises(TypeError):
        indented({(1, 2): 3})
    with pytest.raises(TypeError):
        json.dumps({(1, 2): 3}, indent=2, default=str)


def test_a_report_shaped_document():
    rng = np.random.default_rng(0)
    rows = [
        {
            "model_name": f"model-{i:03d}",
            "score_pct": float(rng.random() * 100),
            "ci_low_pct": None if i % 7 == 0 else float(rng.random()),
            "n_problems": int(rng.integers(0, 200)),
            "exhaustive": bool(i % 2),
            "notes": "x" * (i % 5) + "ü",
        }
        for i in range(500)
    ]
    doc = {
        "store": "s",
        "options": {"baseline": {"template": "own"}, "n": 10_000},
        "tables": {"grid": {"title": "Grid", "rows": rows}, "empty": {"title": "E", "rows": []}},
    }
    assert indented(doc) == json.dumps(doc, indent=2, default=str)
