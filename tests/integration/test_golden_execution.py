"""Pass/fail of the 452 golden post-processing rows, run the harness's way through our sandbox
(imports header + candidate + "\\n\\n" + test), and check-references on all 164 problems."""

from __future__ import annotations

import pytest

from tests.conftest import read_jsonl
from workers.benchmarks.humanevalfix.postprocess import postprocess, program_for
from workers.execspec import ExecJob, Outcome, SandboxLimits
from workers.execution import execute_jobs
from workers.spec import Variant

TASK_VARIANT = {"humanevalfixtests-python": Variant.TESTS, "humanevalfixdocs-python": Variant.DOCS}


def test_golden_postprocessed_programs_pass_and_fail_like_the_harness(shared_data, problem_set):
    rows = read_jsonl(shared_data / "humanevalfix-golden-postprocess.jsonl")
    by_id = {p.task_id: p for p in problem_set.problems}
    jobs = []
    for i, r in enumerate(rows):
        problem = by_id[r["task_id"]]
        candidate = postprocess(
            problem, TASK_VARIANT[r["task"]], r["prompt_option"], r["raw_generation_after_prompt"]
        )
        assert candidate == r["postprocessed"]
        jobs.append(ExecJob(str(i), program_for(candidate, problem), timeout_s=10.0))
    results = execute_jobs(jobs, SandboxLimits(timeout_s=10.0))
    passed = [res.outcome is Outcome.PASSED for res in results]
    mismatches = [
        (r["task"], r["prompt_option"], r["task_id"], r["suffix_kind"], res.error_type)
        for r, res, ok in zip(rows, results, passed, strict=True)
        if ok != r["passes_tests"]
    ]
    assert mismatches == []
    assert sum(passed) == 448


@pytest.mark.parametrize(
    "variant",
    # the docs variant's references are the same programs under another prompt
    ["tests", pytest.param("docs", marks=pytest.mark.slow)],
)
def test_check_references_canonical_all_pass_buggy_none(variant, monkeypatch, shared_data, capsys):
    from orchestrator.cli import main

    monkeypatch.setenv("REPROGRID_DATA_DIR", str(shared_data))
    assert main(["check-references", "--variant", variant, "--json"]) == 0
    out = capsys.readouterr().out
    assert '"canonical": {"passed": 164, "total": 164}' in out
    assert '"buggy": {"passed": 0, "total": 164}' in out
