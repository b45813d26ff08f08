"""`repeat-check` without a model: the comparison of re-generated samples with the stored ones,
the execution of the changed programs only, and the record it leaves in the store, which the
report then uses as its noise floor."""

from __future__ import annotations

import pytest

from orchestrator.report.screens.compare import sample_rows
from orchestrator.report.tables.build import build_report
from orchestrator.report.tables.data import ReportOptions
from orchestrator.tools.repeat_check import Found, _check, record
from storage.errors import StoreLocked
from storage.store import Store
from storage.verify import verify_store
from tests.fixtures_store import BASE, Spec, write_setting
from workers.execspec import ExecutionRecord, Outcome
from workers.spec import SampleRecord


class Benchmark:
    """Runs nothing: a program containing "ok" passes. Records what it was asked to run."""

    name = "humanevalfix"

    def __init__(self) -> None:
        self.ran: list[str] = []

    def execute(self, samples, limits, workers=None):
        self.ran += [s.program for s in samples]
        return [
            ExecutionRecord(
                s.task_id,
                s.sample_index,
                Outcome.PASSED if "ok" in s.program else Outcome.FAILED,
                1.0 if "ok" in s.program else 0.0,
                None,
                None,
                0.0,
            )
            for s in samples
        ]


def fresh_samples(stored: dict, changed: dict[str, str]) -> list[SampleRecord]:
    """The stored samples of the first 10 problems, with the programs of `changed` replaced."""
    out = []
    for (task, index), row in sorted(stored.items()):
        if int(task.split("/")[1]) >= 10:
            continue
        out.append(
            SampleRecord(
                task,
                index,
                row["prompt"],
                row["continuation"],
                changed.get(task, row["program"]),
                None,
                None,
                False,
                False,
            )
        )
    return out


@pytest.fixture
def checked(tmp_path):
    store = Store(str(tmp_path / "store"))
    base = write_setting(store, Spec(BASE, "own", "greedy", 2048, "bf16", 40))
    write_setting(store, Spec(BASE, "own", "greedy", 2048, "int4", 10))
    row = next(r for r in store.read_table("settings").to_pylist() if r["setting_key"] == base)
    stored = sample_rows(store, [base])[base]
    passed = {r["task_id"]: r["passed"] for r in store.read_table("executions", [base]).to_pylist()}
    # two problems get another program on re-generation: one now passes (it did not), the other
    # fails as before
    was_failing = [t for t in sorted(passed) if not passed[t] and int(t.split("/")[1]) < 10]
    changed = {was_failing[0]: "def f():\n    return 'ok'\n", was_failing[1]: "def g(): pass\n"}
    bench = Benchmark()
    found = Found(bench, {}, None, None)
    result = _check(store, found, row, fresh_samples(stored, changed), stored)
    return store, base, result, bench, changed


def test_only_changed_programs_run_and_outcome_changes_are_counted(checked):
    store, base, result, bench, changed = checked
    assert sorted(bench.ran) == sorted(changed.values())
    assert result["n_samples"] == 10 and result["n_flipped"] == 2 and result["n_executed"] == 2
    assert result["n_problems"] == 10
    assert result["n_outcome_changed"] == 1 and result["outcome_change_sum"] == 1.0
    assert result["repeated_score"] == pytest.approx(result["stored_score"] + 0.1)


def test_the_check_is_recorded_and_the_report_uses_it_as_the_noise_floor(checked):
    store, base, result, _, _ = checked
    run_id = record(store, [result], ["model=x"])
    [row] = store.read_table("repeat_checks").to_pylist()
    assert row["run_id"] == run_id and row["setting_key"] == base and row["backend"] == "hf"
    assert (row["n_program_changed"], row["n_outcome_changed"]) == (2, 1)
    runs = [r for r in store.read_table("runs").to_pylist() if r["run_id"] == run_id]
    assert runs[0]["command"] == "repeat-check" and runs[0]["setting_keys"] == [base]
    assert verify_store(store).ok
    data = build_report(store.uri, ReportOptions(n_resamples=200))
    findings = data.table("findings")
    noise = findings[findings.topic == "noise"].iloc[0]
    # 1 problem's worth of score moved over 10 checked problems: 10 points
    assert noise.noise_pp == pytest.approx(10.0)
    assert "Re-generation noise (repeat-check): hf 10.0 points (1 setting, 10 problems" in (
        noise.sentence
    )
    comparisons = data.table("comparisons")
    assert list(comparisons.noise_pp) == pytest.approx([10.0] * len(comparisons))
    # 40 -> 10 problems solved: significant, and its 18.3 points are above the noise
    effect = comparisons[(comparisons.family == "axis effects, all models")].iloc[0]
    assert (
        effect.significant
        and effect.counts
        and effect.delta_pp == pytest.approx(-1830 / 100, abs=0.01)
    )


def test_recording_needs_the_writer_lock(checked):
    store, _, result, _, _ = checked
    with Store(store.uri).writer_lock():
        with pytest.raises(StoreLocked):
            record(store, [result], None)
    assert store.read_table("repeat_checks").num_rows == 0
