"""execute_jobs: order, dedup, one result per job, and the SandboxError path."""

from __future__ import annotations

import threading

import pytest

from workers import execution
from workers.execspec import ExecJob, ExecResult, Outcome, SandboxLimits
from workers.execution import SANDBOX_ERROR, dedup_key, execute_jobs

LIMITS = SandboxLimits(timeout_s=5.0)


class FakeSandbox:
    """Stands in for run_python_program: counts runs, fails on demand, passes otherwise."""

    def __init__(self, crash_on: str | None = None) -> None:
        self.calls: list[str] = []
        self.lock = threading.Lock()
        self.crash_on = crash_on

    def __call__(self, job: ExecJob, limits: SandboxLimits) -> ExecResult:
        with self.lock:
            self.calls.append(job.job_id)
        if self.crash_on is not None and self.crash_on in job.program:
            raise OSError("no space left on device")
        outcome = Outcome.PASSED if "pass" in job.program else Outcome.FAILED
        return ExecResult(job.job_id, outcome, None, job.program, 0.01)


@pytest.fixture
def fake(monkeypatch):
    sandbox = FakeSandbox()
    monkeypatch.setattr(execution, "run_python_program", sandbox)
    return sandbox


def jobs_from(programs: list[str], timeout_s: float = 5.0) -> list[ExecJob]:
    return [ExecJob(f"job-{i}", program, timeout_s) for i, program in enumerate(programs)]


def test_results_follow_job_order(fake):
    jobs = jobs_from([f"pass {i}" for i in range(20)])
    results = execute_jobs(jobs, LIMITS, workers=4)
    assert [r.job_id for r in results] == [j.job_id for j in jobs]
    assert [r.error_message for r in results] == [j.program for j in jobs]


def test_dedup_runs_each_program_once_and_copies_the_result(fake):
    jobs = jobs_from(["pass a", "fail b", "pass a", "pass a", "fail b", "pass c"])
    results = execute_jobs(jobs, LIMITS, workers=3)
    assert len(fake.calls) == 3
    assert [r.job_id for r in results] == [j.job_id for j in jobs]
    assert [r.outcome for r in results] == [
        Outcome.PASSED,
        Outcome.FAILED,
        Outcome.PASSED,
        Outcome.PASSED,
        Outcome.FAILED,
        Outcome.PASSED,
    ]
    assert results[2].error_message == results[0].error_message == "pass a"


def test_without_dedup_every_job_runs(fake):
    jobs = jobs_from(["pass a"] * 5)
    execute_jobs(jobs, LIMITS, dedup=False)
    assert sorted(fake.calls) == sorted(j.job_id for j in jobs)


def test_same_program_with_another_timeout_is_not_deduplicated(fake):
    jobs = [ExecJob("a", "pass", 5.0), ExecJob("b", "pass", 10.0), ExecJob("c", "pass", 10)]
    execute_jobs(jobs, LIMITS)
    assert len(fake.calls) == 2


def test_dedup_key():
    assert dedup_key(ExecJob("a", "x", 10)) == dedup_key(ExecJob("b", "x", 10.0))
    assert dedup_key(ExecJob("a", "x", 10)) != dedup_key(ExecJob("a", "x", 10.5))
    assert dedup_key(ExecJob("a", "x", 10)) != dedup_key(ExecJob("a", "y", 10))
    assert len(dedup_key(ExecJob("a", "\ud800 surrogate", 1))) == 64


def test_sandbox_crash_becomes_an_error_result_for_every_affected_job(monkeypatch):
    sandbox = FakeSandbox(crash_on="boom")
    monkeypatch.setattr(execution, "run_python_program", sandbox)
    jobs = jobs_from(["pass a", "boom", "pass b", "boom"])
    results = execute_jobs(jobs, LIMITS, workers=2)
    assert len(results) == 4
    assert [r.outcome for r in results] == [
        Outcome.PASSED,
        Outcome.ERROR,
        Outcome.PASSED,
        Outcome.ERROR,
    ]
    assert results[1].error_type == results[3].error_type == SANDBOX_ERROR
    assert "OSError: no space left on device" in results[1].error_message
    assert results[3].job_id == "job-3"


def test_on_result_sees_every_job(fake):
    seen: list[str] = []
    jobs = jobs_from(["pass a", "pass a", "fail b"])
    execute_jobs(jobs, LIMITS, on_result=lambda r: seen.append(r.job_id))
    assert sorted(seen) == ["job-0", "job-1", "job-2"]


def test_on_result_exception_propagates(fake):
    def explode(result: ExecResult) -> None:
        raise KeyError("consumer broke")

    with pytest.raises(KeyError):
        execute_jobs(jobs_from(["pass"] * 3), LIMITS, workers=1, dedup=False, on_result=explode)


def test_duplicate_job_ids_are_rejected(fake):
    with pytest.raises(ValueError, match="unique"):
        execute_jobs([ExecJob("x", "pass", 1.0), ExecJob("x", "fail", 1.0)], LIMITS)


def test_no_jobs(fake):
    assert execute_jobs([], LIMITS) == []
    assert fake.calls == []


def test_real_sandbox_end_to_end():
    jobs = jobs_from(
        ["assert 1 + 1 == 2", "assert 1 + 1 == 3", "assert 1 + 1 == 2", "def f(:\n  pass"]
    )
    results = execute_jobs(jobs, SandboxLimits(timeout_s=5.0), workers=2)
    assert [(r.job_id, r.outcome) for r in results] == [
        ("job-0", Outcome.PASSED),
        ("job-1", Outcome.FAILED),
        ("job-2", Outcome.PASSED),
        ("job-3", Outcome.ERROR),
    ]
