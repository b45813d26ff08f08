"""InfiBench scored by reprogrid against the official grader's own outputs.

* dev suite v2.0.0, GPT-3.5 (135 questions x 30 responses): every per-response score equals
  `per_response_scores.csv`, except unit-test questions whose toolchain is missing here and the
  named environment differences below; the total reproduces 46.45 ± 0.88.
* suite v2.1 human-study pairs (468 responses): each score is one of the question's 90 official
  per-response scores, and the per-metric details (keyword statuses, blank strings, ROUGE,
  hook details, the exact unit-test programs) equal those of some official response.
"""

from __future__ import annotations

import gzip
import json
import math
from collections import defaultdict

import pandas as pd
import pytest
import yaml

from workers.benchmarks.infibench.aggregate import aggregate
from workers.benchmarks.infibench.executors import executor_availability
from workers.benchmarks.infibench.grade import case_programs, score_responses
from workers.benchmarks.infibench.scores import ResponseScore, ResponseStatus
from workers.benchmarks.infibench.suite import DEV_SUITE_DIR, load_dev_suite, load_suite

# Unit-test questions whose official result depends on the grading machine (docs/infibench.md).
KNOWN_UNIT_TEST_DIFFERENCES = {
    "1-3-173": "pandas >= 2 parses the year 545 (the official pandas 1.x raised "
    "OutOfBoundsDatetime, so the official run fails 1 of 5 tests)",
    "1-3-223": "the test shells out to `pip install numpy==random` and compares versions: it "
    "needs PyPI (the sandbox has no network) and depends on the installed numpy/scipy",
}
# One unit-test question per executor language of the dev suite (non-heavy subset).
DEV_UNIT_TEST_SUBSET = {"0-0-0": 10, "0-0-48": 4, "2-11-515": 10, "1-3-181": 10, "1-3-187": 10}


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


@pytest.fixture(scope="module")
def infibench(shared_data):
    return shared_data / "infibench"


@pytest.fixture(scope="module")
def dev(infibench):
    folder = infibench / DEV_SUITE_DIR
    responses = pd.read_csv(folder / "responses.csv.gz", keep_default_na=False)
    official = pd.read_csv(folder / "per_response_scores.csv")
    scores = {(r.case_path, r.sample_idx): r.score for r in official.itertuples()}
    rows = [
        {"filename": r.filename, "sample_index": r.completion_no, "completion": r.completion}
        for r in responses.itertuples()
    ]
    return load_dev_suite(infibench), rows, scores, official


def mismatches(scored: list[ResponseScore], official: dict) -> dict[str, list]:
    out: dict[str, list] = defaultdict(list)
    for s in scored:
        if s.status is ResponseStatus.SCORED:
            want = official[(s.case_path, s.sample_index)]
            if not close(s.score, want):
                out[s.case_id].append((s.sample_index, s.score, want))
    return dict(out)


def test_dev_keyword_blank_similarity_and_customized_scores_equal_official(dev):
    suite, rows, official, _ = dev
    unit = {c.case_path for c in suite.cases if c.criteria.unit_test is not None}
    scored = score_responses(suite, [r for r in rows if r["filename"] not in unit])
    assert len(scored) == 4050 - 30 * len(unit) == 3210
    assert {s.status for s in scored} == {ResponseStatus.SCORED}
    assert mismatches(scored, official) == {}


def test_dev_unit_test_subset_equals_official(dev):
    suite, rows, official, _ = dev
    wanted = {suite.case(k).case_path: n for k, n in DEV_UNIT_TEST_SUBSET.items()}
    subset = [r for r in rows if r["sample_index"] < wanted.get(r["filename"], 0)]
    scored = score_responses(suite, subset, workers=2)
    available = executor_availability()
    for s in scored:
        lang = {"0-0-0": "javascript", "0-0-48": "typescript", "2-11-515": "cpp"}.get(
            s.case_id, "python"
        )
        assert s.status is (
            ResponseStatus.SCORED if available[lang] else ResponseStatus.TOOLCHAIN_MISSING
        ), s
    assert mismatches(scored, official) == {}


@pytest.mark.heavy
def test_dev_total_reproduces_46_45(dev):
    suite, rows, official, official_frame = dev
    scored = score_responses(suite, rows, workers=2)
    wrong = mismatches(scored, official)
    assert set(wrong) <= set(KNOWN_UNIT_TEST_DIFFERENCES), wrong
    missing = {s.case_id for s in scored if s.status is ResponseStatus.TOOLCHAIN_MISSING}
    assert {s.status for s in scored} <= {ResponseStatus.SCORED, ResponseStatus.TOOLCHAIN_MISSING}
    if executor_availability()["r"]:
        assert not missing
    else:  # the 5 R questions of the dev suite (CRAN `assert` & co. are not installed)
        assert missing == {c.case_id for c in suite.cases if c.case_id.startswith("1-4-")}
    # Our scores, with the official ones only where this machine cannot reproduce them, give
    # exactly the official table's 46.45 ± 0.88.
    replaced = {c for c in missing | set(wrong)}
    merged = [s for s in scored if s.case_id not in replaced] + [
        ResponseScore(r.case_path, r.case_id, r.sample_idx, ResponseStatus.SCORED, r.score)
        for r in official_frame.itertuples()
        if r.case_id in replaced
    ]
    report = aggregate(suite, merged)
    assert (round(report.overall.pct, 2), round(report.overall.std_pct, 2)) == (46.45, 0.88)
    ours = aggregate(suite, scored)
    assert abs(ours.overall.pct - 46.45) < 100 * 3 * len(replaced) / len(suite.cases)
    # metric rows that involve no unit test equal the official table
    by_metric = {g.name: g for g in report.by_metric}
    assert (
        round(by_metric["blank_filling"].mean, 2),
        round(by_metric["blank_filling"].std, 2),
        by_metric["blank_filling"].full_score,
    ) == (7.38, 0.87, 18.0)
    assert (
        round(by_metric["similarity"].mean, 2),
        round(by_metric["similarity"].std, 2),
        by_metric["similarity"].full_score,
    ) == (4.63, 0.15, 18.0)


def _official_details(infibench) -> dict[str, list[dict]]:
    details: dict[str, list[dict]] = defaultdict(list)
    folder = infibench / "official_results" / "v2.1_full_suite"
    for path in sorted(folder.glob("*_result.yaml.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for case_path, report in yaml.load(fh, Loader=yaml.CSafeLoader).items():
                details[case_path].extend(d for d in report["detail"] if isinstance(d, dict))
    return details


def _signature(score: ResponseScore, programs) -> dict:
    out = {}
    for m in score.metrics:
        if m.metric == "keywords":
            out["keywords"] = (tuple(m.detail["statuses"]), m.earned, m.total)
        elif m.metric == "blank_filling":
            out["blank_filling"] = tuple(m.detail["details"])
        elif m.metric == "unit_test":
            out["unit_test"] = tuple(
                (p.code, t["passed"]) for p, t in zip(programs, m.detail, strict=True)
            )
        elif m.metric == "similarity":
            out["similarity"] = tuple(round(d["normalized_score"], 9) for d in m.detail)
        elif m.metric == "customized":
            out["customized"] = (m.earned, json.dumps(m.detail, sort_keys=True))
    return out


def _official_signature(detail: dict, keys) -> dict:
    out = {}
    if "keywords" in keys:
        out["keywords"] = (
            tuple(detail["keywords"]),
            detail["keywords_score"],
            detail["keywords_totscore"],
        )
    if "blank_filling" in keys:
        out["blank_filling"] = tuple(detail["blank_filling_detail"])
    if "unit_test" in keys:
        out["unit_test"] = tuple((t["code"], t["passed"]) for t in detail["unit_test_detail"])
    if "similarity" in keys:
        out["similarity"] = tuple(
            round(d["normalized_score"], 9) for d in detail["similarity_detail"]
        )
    if "customized" in keys:
        out["customized"] = (
            detail["custom_score"],
            json.dumps(detail["custom_detail"], sort_keys=True),
        )
    return out


def test_v21_human_study_pairs_score_like_one_official_response(infibench):
    suite = load_suite(infibench)
    pairs = pd.read_csv(
        infibench / "official_results" / "v2.1_human_study_pairs" / "responses.csv",
        dtype=str,
        keep_default_na=False,
    )
    official = pd.read_csv(
        infibench / "official_results" / "v2.1_full_suite" / "per_response_scores.csv"
    )
    allowed = official.groupby("case_path").score.apply(list).to_dict()
    rows = [
        {"case_path": r.case_path, "sample_index": i, "completion": r.completion}
        for i, r in enumerate(pairs.itertuples())
    ]
    scored = score_responses(suite, rows, workers=2)
    assert len(scored) == 468
    details = _official_details(infibench)
    available = executor_availability()
    off_score, off_detail = [], []
    for s, row in zip(scored, rows, strict=True):
        case = suite.case(s.case_path)
        if s.status is ResponseStatus.TOOLCHAIN_MISSING:
            assert not all(available.get(m, False) for m in s.missing_executors)
            continue
        assert s.status is ResponseStatus.SCORED, s
        if not any(close(s.score, o) for o in allowed[s.case_path]):
            off_score.append((s.case_id, s.score))
        ours = _signature(s, case_programs(case, row["completion"]))
        theirs = [_official_signature(d, ours) for d in details[s.case_path]]
        if ours not in theirs:
            off_detail.append(s.case_id)
    assert off_score == []
    assert set(off_detail) <= set(KNOWN_UNIT_TEST_DIFFERENCES), off_detail
