"""best@10 (avg_max_10) and the reported mean ± sample std, against official totals (spec §5)."""

from __future__ import annotations

import re
import statistics

import pandas as pd
import pytest

from tests.unit.workers.benchmarks.infibench.conftest import make_case
from workers.benchmarks.infibench.aggregate import GROUP_SIZE, aggregate
from workers.benchmarks.infibench.scores import MetricScore, ResponseScore, ResponseStatus
from workers.benchmarks.infibench.suite import DEV_SUITE_DIR, suite_from_cases
from workers.scoring import group_best

SCORED = ResponseStatus.SCORED


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([0.0] * 9 + [1.0] + [0.5] * 10 + [0.2] * 10, [1.0, 0.5, 0.2]),
        ([0.3] * 10, [0.3]),
        ([0.1] * 12, [0.1, 0.1]),  # a partial last group is still a group
        ([-2.0] * 10, [0.0]),  # the official statistic starts the running best at 0
    ],
)
def test_group_best(scores, expected):
    assert group_best(scores, GROUP_SIZE) == expected


def official_scores(frame: pd.DataFrame) -> list[ResponseScore]:
    return [
        ResponseScore(r.case_path, r.case_id, r.sample_idx, SCORED, r.score)
        for r in frame.itertuples()
    ]


def test_dev_total_from_official_per_response_scores(dev_suite, infibench_dir):
    frame = pd.read_csv(infibench_dir / DEV_SUITE_DIR / "per_response_scores.csv")
    report = aggregate(dev_suite, official_scores(frame))
    assert report.n_groups == 3
    assert round(report.overall.pct, 2) == 46.45 and round(report.overall.std_pct, 2) == 0.88
    assert round(report.overall.mean, 2) == 62.71 and round(report.overall.std, 2) == 1.19
    # every Lang: and Type: row of the official table
    table = (infibench_dir / DEV_SUITE_DIR / "example_table_gpt-3.5-turbo.txt").read_text()
    pattern = r"(Lang|Type): ([^|]+)\| ([\d.]+) +±([\d.]+) \|[^|]+\| ([\d.]+)"
    rows = {
        kind + name.strip(): (float(mean), float(std), float(full))
        for kind, name, mean, std, full in re.findall(pattern, table)
    }
    ours = {"Lang" + g.name: g for g in report.by_lang}
    ours |= {"Type" + g.name: g for g in report.by_type}
    assert set(rows) == set(ours) and len(rows) == 17 + 4
    for key, (mean, std, full) in rows.items():
        assert (round(ours[key].mean, 2), round(ours[key].std, 2), ours[key].full_score) == (
            mean,
            std,
            full,
        ), key


def test_v21_totals_of_three_models(v21_suite, infibench_dir):
    folder = infibench_dir / "official_results" / "v2.1_full_suite"
    frame = pd.read_csv(folder / "per_response_scores.csv")
    expected = pd.read_csv(folder / "regraded_totals.csv").set_index("model")
    for model, rows in frame.groupby("model"):
        report = aggregate(v21_suite, official_scores(rows))
        want = expected.loc[model]
        assert report.overall.group_totals == pytest.approx(
            (want.group0_total, want.group1_total, want.group2_total), abs=1e-6
        )
        assert round(report.overall.pct, 4) == want.score_pct
        assert round(report.overall.std_pct, 4) == want.std_pct


def test_sample_std_and_statuses():
    a, b, c, d = (
        make_case({"keywords": ["x"]}, case_id=f"0-0-{i}", lang=lang)
        for i, lang in enumerate(["python", "python", "r", "go"])
    )
    suite = suite_from_cases([a, b, c, d])

    def rows(case, values, status=SCORED):
        return [
            ResponseScore(
                case.case_path,
                case.case_id,
                i,
                status,
                None if status is ResponseStatus.TOOLCHAIN_MISSING else v,
                missing_executors=("r",) if case is c else (),
            )
            for i, v in enumerate(values)
        ]

    scores = (
        rows(a, [1.0] * 10 + [0.0] * 10 + [0.5] * 10)
        + rows(b, [0.5] * 30)
        + rows(c, [0.0] * 30, ResponseStatus.TOOLCHAIN_MISSING)
        + rows(d, [1.0] * 30, ResponseStatus.ERROR)
    )
    report = aggregate(suite, scores)
    totals = (1.5, 0.5, 1.0)
    assert report.overall.group_totals == totals
    assert report.overall.std == statistics.stdev(totals)  # ddof=1, not the population std
    assert report.overall.pct == pytest.approx(100 * 1.0 / 4)
    assert report.scorable.pct == pytest.approx(100 * 1.0 / 3)  # the r case is left out
    assert (report.unscorable_cases, report.missing_languages) == (("0-0-2",), ("r",))
    assert report.error_cases == ("0-0-3",)  # scored 0 in every group, like the official grader
    assert {g.name: g.n_questions for g in report.by_lang} == {"python": 2, "r": 1, "go": 1}


def test_case_without_responses_gets_null_score():
    a = make_case({"keywords": ["x"]}, case_id="0-0-1")
    b = make_case({"keywords": ["x"]}, case_id="0-0-2", null_score=0.25)
    scores = [ResponseScore(a.case_path, a.case_id, i, SCORED, 1.0) for i in range(10)]
    report = aggregate(suite_from_cases([a, b]), scores)
    assert report.cases_without_responses == ("0-0-2",)
    assert report.overall.group_totals == (1.25,)


def test_metric_breakdown_uses_each_groups_best_response():
    case = make_case(
        {
            "keywords": ["a", "b"],
            "blank_filling": {"template": "x [blank]", "targets": ["1", "2"][:1]},
            "max_score": 2.0,
        },
        case_id="0-0-1",
    )

    def response(i, kw, blank):
        metrics = (
            MetricScore("keywords", kw, 2.0, None, "keywords"),
            MetricScore("blank_filling", blank, 1.0, None, "blank_filling"),
        )
        return ResponseScore(
            case.case_path, case.case_id, i, SCORED, min(kw + blank, 2) / 2, metrics
        )

    # best raw points wins (3 > 2 although both clip to 1.0); later sample on ties
    scores = [response(0, 2.0, 0.0), response(1, 2.0, 1.0)] + [
        response(i, 0.0, 0.0) for i in range(2, 10)
    ]
    report = aggregate(suite_from_cases([case]), scores)
    by_metric = {g.name: g for g in report.by_metric}
    assert by_metric["keywords"].group_totals == (1.0,)  # 2 points * full 1 / case total 2
    assert by_metric["blank_filling"].group_totals == (0.5,)
    assert by_metric["keywords"].full_score == 1.0 and by_metric["blank_filling"].full_score == 0.5
