"""`records(frame)` gives what `frame.to_dict("records")` gives, value for value and type for
type, for every kind of column a report's frames hold (orchestrator/report/tables/records.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from orchestrator.report.tables.records import records


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "int": [1, 2, 3],
            "float": [1.5, np.nan, 2.0],
            "object": ["a", None, 3],
            "bool": [True, False, True],
            "time": pd.to_datetime(["2024-01-01", None, "2024-01-03"]),
            "Int64": pd.array([1, None, 3], dtype="Int64"),
            "Float64": pd.array([1.0, None, 2.0], dtype="Float64"),
            "boolean": pd.array([True, None, False], dtype="boolean"),
            "string": pd.array(["x", None, "z"], dtype="string[pyarrow]"),
            "arrow": pd.array(["x", None, "z"], dtype=pd.ArrowDtype(pa.string())),
            "category": pd.Categorical(["u", "v", None]),
        },
        index=[7, 8, 9],
    )


def test_records_are_to_dicts_value_for_value_and_type_for_type():
    frame = _frame()
    want, got = frame.to_dict("records"), records(frame)
    assert len(got) == len(want) == 3
    for w, g in zip(want, got, strict=True):
        assert list(g) == list(w)
        for column in frame.columns:
            assert type(g[column]) is type(w[column]), column
            assert repr(g[column]) == repr(w[column]), column
    assert got[1]["Int64"] is None and got[1]["string"] is None and got[1]["arrow"] is None


def test_no_rows_are_no_records_and_repeated_columns_are_refused():
    assert records(_frame().iloc[:0]) == []
    with pytest.raises(ValueError, match="repeated column names"):
        records(pd.DataFrame([[1, 2]], columns=["a", "a"]))
