"""A store of pilots (settings over 20 of HumanEvalFix's 164 problems): the pivot's caption
names the store's own 20 problems, not the benchmark's 164, and the findings say why no axis
was tested (pilots take no part) and how to run the full set, as they say why for a store whose
settings make no pair."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd
import pytest

from orchestrator.analysis.findings import untested_finding
from orchestrator.cli import main
from orchestrator.report.tables import wording
from storage.store import Store
from tests.fixtures_store import BASE, Spec, write_setting
from workers.benchmarks.humanevalfix.definition import CARD

PAIR = (
    Spec(BASE, "own", "greedy", 2048, "bf16", 6),
    Spec(BASE, "instruct", "greedy", 2048, "bf16", 9),
    Spec(BASE, "own", "greedy", 2048, "fp16", 7),
)


def _report(tmp_path: Path, n_problems: int, specs=PAIR) -> tuple[str, dict, Path]:
    store = Store(str(tmp_path / "store"))
    for spec in specs:
        write_setting(store, spec, n_problems=n_problems)
    out = tmp_path / "out"
    argv = ["report", "--store", store.uri, "--out", str(out), "--resamples", "50"]
    assert main([*argv, "--format", "md,json,tex"]) == 0
    md = (out / "report.md").read_text()
    return md, json.loads((out / "report.json").read_text()), out


def test_the_pivot_of_a_pilot_store_is_in_percent_of_its_own_problems(tmp_path):
    md, _, out = _report(tmp_path, 20)
    said = "pass@1 (percent of 20 problems, a subset of the benchmark's 164)"
    assert said in md and "percent of 164" not in md
    assert said in (out / "report.tex").read_text()


def test_the_pivot_of_a_full_store_keeps_the_cards_scale(tmp_path):
    md, _, _ = _report(tmp_path, 164)
    assert "pass@1 (percent of 164 problems) per template" in md


def test_the_scale_names_each_count_the_settings_hold():
    scored = {"humanevalfix": [20, 164, 20]}
    assert wording.scale([CARD], scored) == (
        "percent of each setting's problems: 20 or 164 of the benchmark's 164"
    )
    assert wording.scale([CARD], {}) == "percent of 164 problems"
    assert wording.scale([CARD], {"other": [20]}) == "percent of 164 problems"


def test_a_pilot_store_says_why_no_axis_was_tested_and_how_to_run_the_full_set(tmp_path):
    _, data, _ = _report(tmp_path, 20)
    findings = pd.DataFrame(data["tables"]["findings"]["rows"])
    untested = findings[findings["topic"] == "untested"]["sentence"].tolist()
    assert untested == [
        "No axis tested: all 3 scored settings are pilots (a subset of the problems: 20 of "
        "164), and pilots take no part in the tests. Run the full set (the same grid without "
        "benchmark.limit and benchmark.problems) to test each axis."
    ]
    assert data["tables"]["comparisons"]["rows"] == []
    md = (tmp_path / "out" / "report.md").read_text()
    assert md.count("pilots take no part in the tests") == 2  # the findings and comparisons


def test_a_full_store_with_its_axes_tested_has_no_untested_sentence(tmp_path):
    _, data, _ = _report(tmp_path, 164)
    findings = pd.DataFrame(data["tables"]["findings"]["rows"])
    assert "untested" not in set(findings["topic"]) and "template" in set(findings["topic"])


@pytest.mark.parametrize(
    ("n_scored", "pilots", "needle"),
    [
        (0, [], "the store holds no complete setting with a score"),
        (1, ["10 of 164"], "the one scored setting is a pilot (a subset of the problems: 10 of"),
        (3, ["10 of 164"], "no model has a baseline setting (template=own decoding=greedy)"),
        (3, ["10 of 164"], "(1 pilot setting(s) take no part in the tests)"),
    ],
)
def test_the_untested_sentence_of_each_case(n_scored, pilots, needle):
    finding = untested_finding(n_scored, pilots, "template=own decoding=greedy")
    assert finding.topic == "untested" and not finding.counts
    assert needle in finding.sentence


def test_a_card_of_another_unit_says_its_unit():
    infi = dataclasses.replace(CARD, unit="question", n_problems=234)
    assert wording.scale([infi], {"humanevalfix": [30]}) == (
        "percent of 30 questions, a subset of the benchmark's 234"
    )
