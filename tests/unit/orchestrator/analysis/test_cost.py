"""Run-time arithmetic: durations as text."""

from __future__ import annotations

from orchestrator.analysis.cost import format_duration


def test_format_duration():
    assert [format_duration(s) for s in (5, 65, 3700)] == ["5s", "1m05s", "1h01m"]
