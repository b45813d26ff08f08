"""Loading suite v2.1 (folder and packed CSV), the dev suite, and malformed cases (spec §1)."""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd
import pytest

from tests.unit.workers.benchmarks.infibench.conftest import make_case
from workers.benchmarks.infibench.suite import (
    DEV_SUITE_DIR,
    SuiteError,
    load_packed_suite,
    load_suite,
)

# The official packed CSV of suite v2.1 (what `benchmark.source=<csv>` loads).
PACKED_V21_CSV = "batched_cases/suite_v2.1_data.csv"


def test_v21_counts(v21_suite):
    cases = v21_suite.cases
    assert len(cases) == 234
    assert (v21_suite.attempt_reduce_mode, v21_suite.full_score_per_question) == ("avg_max_10", 1.0)
    assert Counter(c.type for c in cases) == {
        "code completion": 74,
        "code debugging": 63,
        "knowledge question-answering": 55,
        "non-code debugging": 42,
    }
    assert Counter(c.lang for c in cases) == {
        "python": 47,
        "javascript": 44,
        "dart": 19,
        "bash": 19,
        "java": 17,
        "c#": 12,
        "css": 10,
        "ruby": 10,
        "rust": 10,
        "c++/c": 10,
        "html": 9,
        "r": 9,
        "php": 9,
        "go": 9,
    }
    assert Counter("+".join(c.criteria.metrics) for c in cases) == {
        "keywords": 145,
        "unit_test": 49,
        "blank_filling": 26,
        "similarity": 6,
        "customized": 6,
        "keywords+unit_test": 2,
    }
    assert sum(c.criteria.max_score is not None for c in cases) == 76
    assert sum(c.criteria.min_score is not None for c in cases) == 60
    assert {c.full_score for c in cases} == {1.0} and {c.null_score for c in cases} == {0.0}
    assert Counter(
        c.criteria.customized.real_metric_type for c in cases if c.criteria.customized
    ) == {"keywords": 6}


def test_packed_csv_equals_folder(v21_suite, infibench_dir):
    packed = load_packed_suite(infibench_dir / PACKED_V21_CSV, infibench_dir / "suite_v2.1.yaml")
    assert packed.sha256 == v21_suite.sha256
    assert packed.cases == v21_suite.cases
    # without the suite YAML: the CSV order and v2.1's settings give the same suite
    assert load_packed_suite(infibench_dir / PACKED_V21_CSV).sha256 == v21_suite.sha256


def test_dependencies_are_the_packed_ones(v21_suite, infibench_dir):
    frame = pd.read_csv(infibench_dir / PACKED_V21_CSV, dtype=str, keep_default_na=False)
    packed = {row.case_path: json.loads(row.dependencies) for row in frame.itertuples()}
    for case in v21_suite.cases:
        assert dict(case.dependencies) == packed[case.case_path], case.case_id


def test_duplicate_grading_key_last_wins(v21_suite):
    case = v21_suite.case("0-0-8")  # two `grading:` keys; the second holds the unit tests
    assert case.criteria.metrics == ("unit_test",) and len(case.criteria.unit_test.tests) == 4


def test_ignored_and_quirky_fields_are_parsed_as_the_grader_reads_them(v21_suite):
    dart = v21_suite.case("3-12-535").criteria.blank_filling
    accepted = [[a.text for a in t.alternatives] for t in dart.targets]
    assert ["or"] in accepted and ["content"] in accepted
    assert v21_suite.case("0-0-13").criteria.blank_filling.blank_str == "***blank***"
    assert v21_suite.case("0-0-4").criteria.blank_filling.escape.count("\n") == 1
    assert "\n" not in v21_suite.case("0-0-21").criteria.blank_filling.escape
    unit = v21_suite.case("0-0-48").criteria.unit_test
    assert unit.lang == "typescript" and unit.tests[0].prefix_file
    assert v21_suite.case("1-3-223").criteria.unit_test.tests[0].timeout_s == 30.0
    hook = v21_suite.case("0-2-153").criteria.customized.hook
    assert (hook.module, hook.func, hook.filename) == (
        "cases.handler_0-2-153",
        "handle",
        "handler_0-2-153.py",
    )


def test_dev_suite(dev_suite, v21_suite, infibench_dir):
    assert len(dev_suite.cases) == 135 and dev_suite.name == "suite_v2.0.0_dev.yaml"
    status = pd.read_csv(infibench_dir / DEV_SUITE_DIR / "case_status_vs_v2.1.csv")
    identical = set(status.case_path[status["status_vs_v2.1"] == "identical"])
    assert len(identical) == 104
    for case in dev_suite.cases:
        if case.case_path in identical:
            twin = v21_suite.case(case.case_id)
            assert (twin.eval_spec, twin.prompt, dict(twin.dependencies)) == (
                case.eval_spec,
                case.prompt,
                dict(case.dependencies),
            )


@pytest.mark.parametrize(
    ("grading", "files", "message"),
    [
        ({"blank_filling": {"template": "a [blank] b [blank]", "targets": ["x"]}}, {}, "2 blanks"),
        ({"unit_test": {"tests": [{"path": "missing.py"}]}}, {}, "not found"),
        ({"keywords": [{"weight": 2}]}, {}, "needs `content`"),
        ({"keywords": [{"content": {"regex": True}}]}, {}, "needs `or`, `and` or `content`"),
        ({"similarity": [{"metric": "bleu", "references": ["x"]}]}, {}, "rouge1"),
        ({"customized": {"module": "cases.handler_x", "func": "f"}}, {}, "handler_x.py"),
        ("not a mapping", {}, "mapping"),
    ],
)
def test_malformed_cases_are_rejected(grading, files, message):
    with pytest.raises(SuiteError, match=message):
        make_case(grading, files=files)


def test_missing_folder(tmp_path):
    with pytest.raises(SuiteError, match="REPROGRID_DATA_DIR"):
        load_suite(tmp_path)


def test_folder_suite_reads_only_files_inside_the_case_folder(tmp_path):
    (tmp_path / "cases").mkdir()
    (tmp_path / "secret.py").write_text("x = 1\n")
    (tmp_path / "cases" / "prompt_1.txt").write_text("Q?")
    (tmp_path / "cases" / "t.py").write_text("assert True\n")
    (tmp_path / "suite.yaml").write_text("cases:\n- cases/eval_1.yaml\n")
    case_yaml = "id: '1'\nprompt_path: prompt_1.txt\nlang: python\ntype: t\n"
    case_yaml += "grading:\n  unit_test:\n"
    (tmp_path / "cases" / "eval_1.yaml").write_text(case_yaml + "    tests:\n    - path: t.py\n")
    suite = load_suite(tmp_path, "suite.yaml")
    assert suite.case("1").dependencies == {"t.py": "assert True\n"}
    assert suite.case("1").prompt == "Q?" and suite.attempt_reduce_mode == "avg_max_10"
    (tmp_path / "cases" / "eval_1.yaml").write_text(
        case_yaml + "    tests:\n    - path: ../secret.py\n"
    )
    with pytest.raises(SuiteError, match="not found"):
        load_suite(tmp_path, "suite.yaml")
