"""The report of an InfiBench store follows InfiBench's card: best@10 in percent of 234
questions, compared with the official leaderboard (read from the data folder) by its spread,
never with HumanEvalFix's literature or its k/n rule; a store holding both benchmarks reports
each against its own published values."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from orchestrator.cli import main
from storage.store import Store
from tests.fixtures_infibench import load_v21, write_infibench_setting, write_infibench_store
from tests.fixtures_store import BASE, INST, Spec, write_setting

FORMATS = "md,csv,tex,html,json"
RESAMPLES = 300
SIX_SEVEN = "deepseekcoder-6.7b-instruct"
ONE_THREE = "deepseekcoder-1.3b-instruct"
TEXT_OUTPUTS = ("report.md", "report.json", "report.html", "report.tex", "tex/answers.tex")


@pytest.fixture(scope="module")
def suite(shared_data):
    return load_v21(shared_data)


@pytest.fixture(scope="module")
def infibench_report(tmp_path_factory, suite):
    root = tmp_path_factory.mktemp("infibench-report")
    store = root / "store"
    write_infibench_store(str(store), suite)
    args = ["report", "--store", str(store), "--format", FORMATS, "--resamples", str(RESAMPLES)]
    assert main(args) == 0
    return store, root / "store-report"


@pytest.fixture(scope="module")
def leaderboard(shared_data) -> pd.DataFrame:
    frame = pd.read_csv(shared_data / "infibench" / "leaderboard.csv", dtype={"score_pct": str})
    return frame.set_index("model")


def best_at_10(store: Path) -> pd.Series:
    """best@10 in percent per setting, straight from the executions (spec §5)."""
    ex = pd.read_parquet(store / "executions")
    ex["group"] = ex["sample_index"] // 10
    best = ex.groupby(["setting_key", "task_id", "group"])["score"].max().clip(lower=0)
    totals = best.groupby(["setting_key", "group"]).sum()
    return totals.groupby("setting_key").mean() / 234 * 100


def group_std(store: Path) -> pd.Series:
    ex = pd.read_parquet(store / "executions")
    ex["group"] = ex["sample_index"] // 10
    best = ex.groupby(["setting_key", "task_id", "group"])["score"].max().clip(lower=0)
    return best.groupby(["setting_key", "group"]).sum().groupby("setting_key").std() / 234 * 100


def text_of(out: Path, name: str) -> str:
    text = (out / name).read_text()
    return re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", text)  # embedded figures


def test_the_answers_row_compares_with_the_leaderboard_value(infibench_report, leaderboard):
    store, out = infibench_report
    answers = pd.read_csv(out / "answers.csv", dtype={"reported": str}).set_index("model_name")
    row = answers.loc[SIX_SEVEN]
    official = leaderboard.loc["deepseek-coder-6.7b-instruct"]
    assert row.literature_model == "deepseek-coder-6.7b-instruct"
    assert row.reported == official.score_pct == "53.25"
    assert row.source_id == "arXiv:2404.07940"
    assert row.metric == "best@10"
    mine = best_at_10(store)
    key = row.setting_key
    assert row.score_pct == pytest.approx(mine[key]) and mine[key] == pytest.approx(124.5 / 2.34)
    assert row.gap_pp == pytest.approx(mine[key] - 53.25)
    # the spread rule by hand: 1.96 x sqrt(0.40^2/3 + s^2/3), s the setting's std over groups
    tolerance = 1.959964 * math.sqrt(official.std_pct**2 / 3 + group_std(store)[key] ** 2 / 3)
    assert abs(row.gap_pp) <= tolerance
    assert row.verdict == "reproduced" and row.verdict_detail == "reproduced by 1 setting"
    assert f"gaps within {tolerance:.2f} pp reproduce it" in row.match_note
    assert "std 0.40 over 3 groups of 10 samples" in row.match_note
    assert pd.isna(row.obtainability) and pd.isna(row.obtainability_note)


def test_a_value_outside_the_spread_and_the_interval_is_not_reproduced(infibench_report):
    store, out = infibench_report
    answers = pd.read_csv(out / "answers.csv", dtype={"reported": str}).set_index("model_name")
    row = answers.loc[ONE_THREE]
    assert row.reported == "41.32"
    assert row.score_pct == pytest.approx(71 / 2.34)
    assert row.ci_high_pct < 41.32  # not near either: the value is outside its interval
    assert row.verdict == "not reproduced"
    grid = pd.read_csv(out / "grid.csv").set_index("model_name")
    assert grid.loc[ONE_THREE, "std_pct"] == pytest.approx(group_std(store)[row.setting_key])
    assert grid.loc[ONE_THREE, "n_groups"] == 3


def test_the_literature_is_the_leaderboard_and_nothing_else(infibench_report):
    _, out = infibench_report
    compared = pd.read_csv(out / "literature.csv")
    unmatched = pd.read_csv(out / "literature_unmatched.csv")
    assert len(compared) + len(unmatched) == 119  # every leaderboard row, none dropped
    assert set(compared.benchmark) == set(unmatched.benchmark) == {"infibench"}
    assert set(compared.reported_spread) == {
        "std 0.40 over 3 groups of 10 samples",
        "std 1.12 over 3 groups of 10 samples",
    }
    assert not (out / "unobtainable.csv").exists()  # a fractional score is no count k/n
    options = json.loads((out / "report.json").read_text())["options"]["benchmarks"]
    assert options["infibench"]["literature"].endswith("infibench/leaderboard.csv")
    assert options["infibench"]["literature_rows"] == 119
    assert options["infibench"]["mapping"] == "reprogrid:infibench-mapping.yaml"
    assert list(options) == ["infibench"]


def test_no_humanevalfix_wording_in_an_infibench_report(infibench_report):
    _, out = infibench_report
    for name in TEXT_OUTPUTS:
        text = text_of(out, name)
        for word in ("164", "HumanEvalFix", "k/(164", "pass@1"):
            assert word not in text, (name, word)
        assert "best@10" in text, name
    md = text_of(out, "report.md")
    assert "best@10 (percent of 234 questions)" in md
    assert "spread of repeated runs" in md
    # one benchmark: no benchmark column on the first screen
    assert "| benchmark |" not in md.split("## Notes")[0]


def test_the_first_screen_is_still_the_answers_table(infibench_report):
    _, out = infibench_report
    html = text_of(out, "report.html")
    body = html.split("<body>", 1)[1]
    first = re.search(r'<h2 id="([a-z_]+)"', body)
    assert first is not None and first.group(1) == "answers"


def test_without_the_data_folder_the_report_says_why_nothing_is_compared(
    infibench_report, tmp_path
):
    from orchestrator.report.tables.build import build_report
    from orchestrator.report.tables.data import ReportOptions

    store, _ = infibench_report
    data = build_report(str(store), ReportOptions(n_resamples=10, data_dir=None))
    assert data.table("answers").empty and data.table("literature").empty
    [note] = [n for n in data.notes if "not compared" in n]
    assert "InfiBench v2.1 is not compared" in note and "REPROGRID_DATA_DIR" in note


def test_a_leaderboard_given_with_literature_replaces_the_cards(infibench_report, tmp_path):
    store, _ = infibench_report
    mine = tmp_path / "board.csv"
    mine.write_text(
        "model,score_pct,std_pct,num_responses\ndeepseek-coder-6.7b-instruct,60.00,0.5,30\n"
    )
    out = tmp_path / "out"
    args = ["report", "--store", str(store), "--out", str(out), "--literature", str(mine)]
    assert main([*args, "--format", "csv", "--resamples", "10"]) == 0
    answers = pd.read_csv(out / "answers.csv", dtype={"reported": str})
    assert answers.reported.tolist() == ["60.00"] and answers.verdict.tolist() == ["not reproduced"]


# -- a store holding both benchmarks ------------------------------------------------------------


@pytest.fixture(scope="module")
def mixed_report(tmp_path_factory, suite):
    root = tmp_path_factory.mktemp("mixed-report")
    store = Store(str(root / "store"))
    write_setting(store, Spec(BASE, "own", "greedy", 2048, "bf16", 2))  # 1.22: rounds to 1.2
    write_setting(store, Spec(INST, "instruct", "greedy", 2048, "bf16", 15))  # 9.15: 9.1
    write_infibench_setting(store, SIX_SEVEN, suite)
    args = ["report", "--store", str(root / "store"), "--format", FORMATS, "--resamples", "100"]
    assert main(args) == 0
    return root / "store-report"


def test_a_mixed_store_reports_each_benchmark_against_its_own_literature(mixed_report):
    out = mixed_report
    answers = pd.read_csv(out / "answers.csv", dtype={"reported": str})
    by_benchmark = {b: part for b, part in answers.groupby("benchmark")}
    assert set(by_benchmark) == {"humanevalfix", "infibench"}
    papers = by_benchmark["humanevalfix"]
    assert set(papers.metric) == {"pass@1"} and "1.2" in set(papers.reported)
    assert set(papers.source_id) <= {"doi:10.3390/software4030017", "arXiv:2405.04324"}
    board = by_benchmark["infibench"]
    assert board.reported.tolist() == ["53.25"] and board.metric.tolist() == ["best@10"]
    assert board.verdict.tolist() == ["reproduced"]
    compared = pd.read_csv(out / "literature.csv")
    unmatched = pd.read_csv(out / "literature_unmatched.csv")
    counts = pd.concat([compared, unmatched]).groupby("benchmark").size().to_dict()
    assert counts == {"humanevalfix": 95, "infibench": 119}
    unobtainable = pd.read_csv(out / "unobtainable.csv")
    assert set(unobtainable.benchmark) == {"humanevalfix"}  # only counts can be unobtainable


def test_a_mixed_report_says_each_benchmarks_rule(mixed_report):
    md = text_of(mixed_report, "report.md")
    assert "HumanEvalFix-Python: a setting's pass@1 rounds or truncates" in md
    assert "InfiBench v2.1: the gap between a setting's best@10 and the value" in md
    assert "| benchmark |" in md.split("## Notes")[0]  # several benchmarks: the column shows


# -- Every Eval Ever records follow the card too ------------------------------------------------


@pytest.fixture(scope="module")
def infibench_export(infibench_report, tmp_path_factory):
    store, _ = infibench_report
    out = tmp_path_factory.mktemp("infibench-eee")
    assert main(["export", "--store", str(store), "--format", "eee", "--out", str(out)]) == 0
    return out


def records(root: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(root.rglob("*.json"))]


def test_score_records_describe_best_at_10_by_the_card(infibench_export, infibench_report):
    store, _ = infibench_report
    logs = records(infibench_export / "scores")
    assert len(logs) == 2
    for log in logs:
        text = json.dumps(log)
        assert "bigcode" not in text and "HumanEval" not in text and "164" not in text
        assert log["eval_library"]["additional_details"]["semantics"] == (
            "infibench-evaluation-harness"
        )
        headline = log["evaluation_results"][0]
        assert headline["evaluation_result_id"] == "best@10"
        assert headline["metric_config"]["metric_id"] == "infibench.best_at_k"
        assert headline["source_data"]["dataset_name"] == "InfiBench suite v2.1"
        assert headline["source_data"]["source_type"] == "other"
        uncertainty = headline["score_details"]["uncertainty"]
        assert uncertainty["num_samples"] == 234 and "standard_deviation" in uncertainty
        interval = uncertainty["confidence_interval"]
        assert interval["lower"] <= headline["score_details"]["score"] <= interval["upper"]
    scores = best_at_10(store)
    by_key = {log["source_metadata"]["additional_details"]["setting_key"]: log for log in logs}
    for key, pct in scores.items():
        score = by_key[key]["evaluation_results"][0]["score_details"]["score"]
        assert score == pytest.approx(pct / 100)


def test_literature_records_are_the_leaderboard_with_its_spread(infibench_export):
    logs = records(infibench_export / "literature")
    assert len(logs) == 119
    by = {log["model_info"]["name"]: log["evaluation_results"][0] for log in logs}
    coder = by["deepseek-coder-6.7b-instruct"]
    assert coder["evaluation_result_id"] == "best@10"
    assert coder["score_details"]["score"] == pytest.approx(0.5325)
    assert coder["score_details"]["uncertainty"]["standard_deviation"] == pytest.approx(0.004)
    assert coder["score_details"]["details"]["std_pct_as_printed"] == "0.4"
    one_group = by["deepseek-coder-33b-instruct"]["score_details"]["uncertainty"]
    assert "standard_deviation" not in one_group  # 10 responses: no spread was measured


def test_infibench_records_pass_the_every_eval_ever_validator(infibench_export):
    from tests.unit.orchestrator.report.exports.test_eee import validate

    for part in ("scores", "literature"):
        reports = validate(infibench_export / part)
        bad = [
            (r.file_path.name, r.errors, r.warnings) for r in reports if not r.valid or r.warnings
        ]
        assert reports and not bad, bad[:3]


def test_a_benchmark_the_report_never_heard_of_is_reported_by_its_card(tmp_path):
    """The toy benchmark of the registry test: its card says pass@1 over 2 sums and that
    nothing is published; the report says exactly that, in the card's words."""
    from tests.unit.workers.benchmarks.toy_benchmark import CARD as TOY

    store = Store(str(tmp_path / "store"))
    key = write_setting(store, Spec("tiny", "own", "greedy", 2048, "fp32", 1), n_problems=2,
                        benchmark_n_problems=2)  # fmt: skip
    for table, extra in (("settings", {"benchmark_card_json": TOY.to_json()}), ("scores", {})):
        rows = store.read_shard(table, key).to_pylist()
        store.write_rows(table, key, [r | {"benchmark": "toy", **extra} for r in rows])
    out = tmp_path / "out"
    assert main(["report", "--store", store.uri, "--out", str(out), "--resamples", "10"]) == 0
    md = text_of(out, "report.md")
    assert "nothing published is known for Toy arithmetic" in md
    assert "pass@1 (percent of 2 sums)" in md
    assert "HumanEvalFix" not in md and "164" not in md
    grid = pd.read_csv(out / "grid.csv")
    assert grid.benchmark.tolist() == ["toy"] and grid.score_pct.tolist() == [50.0]
