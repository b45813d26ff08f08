"""grade_response / score_responses: totals, clipping, statuses, NaN quirk, dedup (spec §3)."""

from __future__ import annotations

import json

import pytest

from tests.unit.workers.benchmarks.infibench.conftest import make_case
from workers.benchmarks.infibench.executors import ExecOutcome
from workers.benchmarks.infibench.grade import (
    ExecutorFailure,
    ResponseInput,
    grade_response,
    official_response_text,
    score_responses,
    unscorable_cases,
)
from workers.benchmarks.infibench.programs import Program
from workers.benchmarks.infibench.scores import ResponseStatus, to_rows
from workers.benchmarks.infibench.suite import suite_from_cases

ALL = {lang: True for lang in ("python", "javascript", "typescript", "cpp", "java", "go", "r")}


def fake_runner(passing: set[str]):
    """Passes a program when one of `passing` occurs in its code; records the calls."""
    calls: list[Program] = []

    def run(program: Program) -> ExecOutcome:
        calls.append(program)
        passed = any(p in program.code for p in passing)
        return ExecOutcome(passed, "passed" if passed else "failed: x", 0.0)

    run.calls = calls  # type: ignore[attr-defined]
    return run


@pytest.mark.parametrize(
    ("grading", "response", "score"),
    [
        ({"keywords": ["a", "b", "c", "d"]}, "a b", 0.5),
        ({"keywords": ["a", "b", "c", "d"], "max_score": 2.0}, "a b c", 1.0),  # min(3, 2) / 2
        ({"keywords": ["a", "b", "c", "d"], "max_score": 2.0}, "a", 0.5),
        (
            {"keywords": [{"content": "x", "neg": True, "weight": 3.0}, "a"], "min_score": 0.0},
            "x",
            0.0,
        ),
        ({"keywords": [{"content": "x", "neg": True, "weight": 3.0}, "a"]}, "x", -3.0),
        (
            {"keywords": [{"content": "x", "neg": True, "weight": 3.0}, "a"], "min_score": -1.0},
            "x",
            -1.0,
        ),
    ],
)
def test_totals_and_clipping(grading, response, score):
    result = grade_response(make_case(grading), response)
    assert (result.status, result.score) == (ResponseStatus.SCORED, score)


def test_keywords_plus_unit_test_sum_then_divide():
    case = make_case({"keywords": ["tidyverse"], "unit_test": {"tests": ["T1", "T2"]}}, lang="r")
    run = fake_runner({"good <- 1"})
    result = grade_response(case, "tidyverse\n```r\ngood <- 1\n```", run=run, available=ALL)
    assert result.score == 1.0  # (1 + 2) / 3
    result = grade_response(case, "```r\nbad <- 1\n```", run=run, available=ALL)
    assert result.score == 0.0
    assert [m.metric for m in result.metrics] == ["keywords", "unit_test"]


def test_unit_test_weights():
    tests = [{"content": "T1", "weight": 3.0}, {"content": "T2"}]
    case = make_case({"unit_test": {"tests": tests}}, lang="javascript")

    def run(program):
        return ExecOutcome("T1" in program.code, "", 0.0)

    assert grade_response(case, "x", run=run, available=ALL).score == 0.75


def test_toolchain_missing_is_not_scored_zero():
    case = make_case({"keywords": ["a"], "unit_test": {"tests": ["T"]}}, lang="r")
    result = grade_response(case, "a", run=fake_runner(set()), available={"r": False})
    assert result.status is ResponseStatus.TOOLCHAIN_MISSING and result.score is None
    assert result.missing_executors == ("r",)


def test_unsupported_unit_test_language_is_an_error():
    case = make_case({"unit_test": {"tests": ["T"]}}, lang="rust")
    result = grade_response(case, "x", run=fake_runner(set()), available=ALL)
    assert result.status is ResponseStatus.ERROR and "Does not support" in result.error


def test_sandbox_failures_propagate():
    case = make_case({"unit_test": {"tests": ["T"]}}, lang="python")

    def broken(program):
        raise OSError("no sandbox")

    with pytest.raises(ExecutorFailure):
        grade_response(case, "x", run=broken, available=ALL)


@pytest.mark.parametrize(
    ("text", "graded"),
    [
        ("", "nan"),
        ("NA", "nan"),
        ("None", "nan"),
        ("null", "nan"),
        ("nan", "nan"),
        (" ", " "),
        ("NA.", "NA."),
        ("0", "0"),
    ],
)
def test_pandas_na_cells_are_graded_as_nan(text, graded):
    assert official_response_text(text) == graded


def test_empty_response_is_graded_as_nan():
    case = make_case({"keywords": ["nan"]})
    (scored,) = score_responses(case_suite(case), [{"filename": case.case_path, "completion": ""}])
    assert scored.score == 1.0
    (raw,) = score_responses(
        case_suite(case), [ResponseInput(case.case_path, 0, "")], nan_quirk=False
    )
    assert raw.score == 0.0


def case_suite(*cases):
    return suite_from_cases(list(cases))


def test_identical_programs_run_once_and_rows_are_json():
    case = make_case({"unit_test": {"tests": ["T1", "T2"]}}, lang="javascript")
    run = fake_runner({"ok"})
    rows = [
        {"case_path": case.case_path, "sample_index": i, "completion": text}
        for i, text in enumerate(["ok()", "ok()", "```js\nok()\n```", "bad()"])
    ]
    scores = score_responses(case_suite(case), rows, run=run, available=ALL, workers=2)
    assert [s.score for s in scores] == [1.0, 1.0, 1.0, 0.0]
    # 3 distinct programs (unfenced "ok()" twice, fenced "ok()", "bad()") x 2 tests
    assert len(run.calls) == 6
    table = to_rows(scores)
    assert json.loads(json.dumps(table)) == table
    assert table[0]["status"] == "scored" and json.loads(table[0]["metrics"])[0]["total"] == 2.0


def test_rows_without_sample_index_are_numbered_per_case():
    a, b = make_case({"keywords": ["x"]}, case_id="1-1-1"), make_case({"keywords": ["x"]})
    rows = [{"filename": c.case_path, "completion": "x"} for c in (a, b, a)]
    scores = score_responses(case_suite(a, b), rows)
    assert [(s.case_id, s.sample_index) for s in scores] == [
        ("1-1-1", 0),
        ("9-9-9", 0),
        ("1-1-1", 1),
    ]
    with pytest.raises(KeyError, match="unknown case"):
        score_responses(case_suite(a), [{"filename": "cases/eval_nope.yaml", "completion": ""}])


def test_unscorable_cases(v21_suite):
    missing = unscorable_cases(v21_suite, {**ALL, "r": False, "go": False})
    assert missing == {
        "go": ("2-8-450", "2-8-468"),
        "r": tuple(c.case_id for c in v21_suite.cases if c.case_id.startswith("1-4-")),
    }
    assert len(missing["r"]) == 9


def test_customized_hooks_of_the_suite(v21_suite):
    cases = {
        k: v21_suite.case(k) for k in ("0-0-14", "0-0-26", "0-0-37", "0-0-38", "0-0-39", "0-2-153")
    }
    table = [
        ("0-0-14", "<Form.Item><Switch/></Form.Item> <span>x</span>", 1.0),
        ("0-0-14", "<Form.Item><Switch/><span></Form.Item> <span>", 0.5),
        ("0-0-26", "// eslint-disable-next-line react/display-name\nrender: () => 1", 1.0),
        ("0-0-26", "render: x // eslint-disable-next-line react/display-name", 0.0),
        ("0-0-37", "```\npath: '/a/:b?/:c?'\n```", 1.0),
        ("0-0-37", "```\npath: '/a/:b?/:b?'\n```", 0.0),
        ("0-0-38", "console.log(this.newIds)\n});", 1.0),
        ("0-0-39", "<button form='my-form' type=\"submit\">Go</button>", 1.0),
        ("0-0-39", "<button class='x'>Go</button>", 1 / 3),
        ("0-2-153", '<div class="border-0 border-t">', 1.0),
        ("0-2-153", '<div class="border-t-2 border-b-0 border-l-0 border-r-0">', 2 / 3),
    ]
    for case_id, response, score in table:
        result = grade_response(cases[case_id], response)
        assert result.score == pytest.approx(score), (case_id, response, result)
        assert result.metrics[0].counts_as == "keywords"
