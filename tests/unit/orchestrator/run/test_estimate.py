"""The plan's time estimate: throughput measured from a store's finished settings."""

from __future__ import annotations

from orchestrator.run.estimate import measured_throughput
from storage.store import Store


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
