"""The live progress line and its plain-log form."""

from __future__ import annotations

import io

from orchestrator.run.progress import Progress


def test_progress_line_reports_rates_and_eta():
    now = [100.0]
    out = io.StringIO()
    progress = Progress(total=4, stream=out, clock=lambda: now[0])
    now[0] += 10
    progress.generated("tiny/hf/fp32 instruct greedy", samples=20, tokens=1000)
    progress.finished("tiny/hf/fp32 instruct greedy", 0.25)
    line = progress.line()
    assert "[1/4 settings]" in line and "2.00 samples/s" in line and "100 tok/s" in line
    assert "ETA 30s" in line


def test_progress_logs_plain_lines_off_a_terminal(caplog):
    progress = Progress(total=1, stream=io.StringIO())
    with caplog.at_level("INFO", logger="reprogrid.progress"):
        progress.fail("x", "Boom: y")
    assert "FAILED x: Boom: y" in caplog.text and "[1/1 settings, 1 failed]" in caplog.text
