"""`compare-backends` on a small store written through the real schema, and the repeat-check
key resolution over the same store."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from orchestrator.analysis.agreement import flips, per_backend
from orchestrator.analysis.noise import outcome_changes
from orchestrator.report.screens.compare import compare_backends, render_comparison
from orchestrator.run.config.load import load_run_config
from orchestrator.run.execute.rows import execution_rows, generation_rows, score_row, setting_row
from orchestrator.run.prepare.grid import Environment, expand_grid
from orchestrator.tools.repeat_check import CompareError, render_repeat_check, resolve_keys
from storage.schema import SettingStatus
from storage.store import Store
from workers.execspec import ExecutionRecord, Outcome
from workers.spec import SampleRecord

NOW = datetime(2025, 1, 2, tzinfo=UTC)


def cells(overrides):
    config = load_run_config(["model=tiny", *overrides])
    return expand_grid(config, "datahash", Environment(installed=frozenset({"hf", "vllm"})))


def test_render_repeat_check_totals():
    old = {
        ("t1", 0): {"program": "p", "continuation": "c", "output_token_ids": [1, 2]},
        ("t2", 0): {"program": "q", "continuation": "d", "output_token_ids": [3]},
    }
    new = {
        ("t1", 0): {"program": "p", "continuation": "c2", "output_token_ids": [1, 2, 5]},
        ("t2", 0): {"program": "Q", "continuation": "D", "output_token_ids": [4]},
    }
    got = flips(old, new)
    totals = per_backend(
        [
            {"backend": "vllm", **got},
            {"backend": "vllm", **got},
            {"backend": "hf", **flips(old, old)},
        ]
    )
    outcomes = outcome_changes({("t1", 0): 1.0, ("t2", 0): 0.0}, {("t1", 0): 1.0, ("t2", 0): 1.0})
    assert outcomes == {
        "n_problems": 2,
        "n_outcome_changed": 1,
        "outcome_change_sum": 1.0,
        "stored_score": 0.5,
        "repeated_score": 1.0,
    }
    text = render_repeat_check(
        {
            "run_id": "20250102T040000-abcd",
            "n_problems": 2,
            "per_backend": totals,
            "noise_pp": {"vllm": 50.0},
            "settings": [
                {
                    "setting_key": "k" * 64,
                    "backend": "vllm",
                    "precision": "fp32",
                    "template": "yi",
                    "decoding": "greedy",
                    "max_length": 512,
                    **got,
                    "n_executed": 1,
                    **outcomes,
                }
            ],
        }
    )
    assert "vllm: flip rate 50.0% (2/4 samples, 2 setting(s)); noise floor 50.00 points" in text
    assert "outcomes changed 1 (1 changed program(s) run)" in text and "tasks: t2" in text
    assert "hf: flip rate 0.0% (0/2 samples, 1 setting(s)); noise floor -" in text
    assert "recorded in the store as repeat-check 20250102T040000-abcd" in text


# -- compare_backends on a store -------------------------------------------------------------------


def _write_setting(store: Store, cell, programs: list[str], passed: list[bool]) -> None:
    key, setting = cell.key, cell.setting
    samples = [
        SampleRecord(f"Python/{i}", 0, "prompt", "cont", p, 10, 5, False, False)
        for i, p in enumerate(programs)
    ]
    records = [
        ExecutionRecord(
            f"Python/{i}", 0, Outcome.PASSED if ok else Outcome.FAILED, float(ok), None, None, 0.1
        )
        for i, ok in enumerate(passed)
    ]
    gens, execs = generation_rows(key, samples), execution_rows(key, records)
    store.write_rows("generations", key, gens)
    store.write_rows("executions", key, execs)
    store.write_rows("scores", key, [score_row(key, setting, gens, execs)])
    # a generated setting records the device its engine ran on (a replayed one records none)
    row = setting_row(
        key, setting, SettingStatus.COMPLETE, now=NOW, run_id="r1", provenance={"device": "cpu"}
    )
    store.write_rows("settings", key, [row])


def test_compare_backends_reads_pairs_from_the_store(tmp_path):
    store = Store(str(tmp_path / "store"))
    grid = {
        (c.setting.engine.backend, c.setting.decoding.name): c
        for c in cells(
            ["grid.backend=hf,vllm", "grid.decoding=greedy,t0.8", "seed_policy=per_sample"]
        )
    }
    _write_setting(store, grid["hf", "greedy"], ["a", "b", "c", "d"], [True, False, False, True])
    _write_setting(store, grid["vllm", "greedy"], ["a", "b", "C", "d"], [True, False, True, True])
    _write_setting(store, grid["hf", "t0.8"], ["a", "b", "c", "d"], [False] * 4)  # no partner
    data = compare_backends(store)
    assert (data["n_complete_settings"], data["n_pairs"], data["n_unpaired"]) == (3, 1, 1)
    (pair,) = data["pairs"]
    assert (pair["backend_a"], pair["backend_b"], pair["decoding"]) == ("hf", "vllm", "greedy")
    assert pair["identical_programs"] == 0.75 and pair["same_outcome"] == 0.75
    assert pair["pass_at_1_diff"] == pytest.approx(0.25)
    assert pair["differing_tasks"] == ["Python/2"]
    text = render_comparison(data)
    assert "hf/vllm" in text and "75.0" in text and "+25.0" in text and "Python/2" in text
    # repeat-check's key resolution: prefixes, and only complete settings
    hf_key = grid["hf", "greedy"].key
    assert resolve_keys(store, [hf_key[:10]])[0]["setting_key"] == hf_key
    with pytest.raises(CompareError, match="matches no setting"):
        resolve_keys(store, ["zzzz"])
