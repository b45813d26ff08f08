from __future__ import annotations

import io

from orchestrator.planview import measured_throughput
from orchestrator.progress import Progress, format_duration
from storage.store import Store


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


def test_format_duration():
    assert [format_duration(s) for s in (5, 65, 3700)] == ["5s", "1m05s", "1h01m"]


def test_measured_throughput_from_completed_settings(tmp_path):
    store = Store(str(tmp_path))
    for key, secs in (("a", 10.0), ("b", 30.0)):
        store.write_rows(
            "settings",
            key,
            [
                {
                    "setting_key": key,
                    "status": "complete",
                    "model_repo_id": "m",
                    "backend": "hf",
                    "generation_s": secs,
                    "engine_load_s": 4.0,
                }
            ],
        )
        store.write_rows("scores", key, [{"setting_key": key, "n_problems": 164, "n_samples": 1}])
    rates = measured_throughput(store)
    assert rates[("m", "hf")]["samples_per_s"] == 2 * 164 / 40.0
    assert rates[("m", "hf")]["load_s"] == 4.0
