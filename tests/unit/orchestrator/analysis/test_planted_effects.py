"""Planted effects (tests/planted.py): over 200 seeded grids of 4 models (2 instruct) x 10
settings x 164 problems, with a template effect of -8 problems, 4-bit -6, precision (fp16, fp32)
and 8-bit 0 and sampling noise on every setting, the findings name the planted axes at least
as often as the test's predicted power says, and the null axes in at most 5% of the grids per
family (the family-wise error rate); each model's Westfall-Young family and the exploratory
Benjamini-Hochberg family hold their rates too.

The rates are measured, so the bounds carry the binomial sampling error of 200 grids: observed
power >= predicted - 2.5 standard errors; family-wise rate <= 5% + 2.33 standard errors (the
one-sided 99% bound of a true 5%). 1,000 resamples per test keep the 200 grids fast; the report
uses 10,000.
"""

from __future__ import annotations

import math
from collections import Counter

import pytest

from orchestrator.analysis.baseline import DEFAULT_BASELINE
from orchestrator.analysis.evidence import INSTRUCT, Comparison, EvidenceOptions, compare_grid
from orchestrator.analysis.findings import axis_findings, topic_of
from orchestrator.analysis.multiplicity import FamilyKind
from orchestrator.report.tables.build import build_report
from orchestrator.report.tables.data import ReportOptions
from tests.planted import NULLS, PLANTED, planted_grid, predicted_power, write_planted_store

N_GRIDS = 200
N_MODELS = 4
RESAMPLES = 1_000
ALPHA = 0.05
PLANTED_TOPICS = {topic_of(a, v) for a, v in PLANTED}  # template, int4
NULL_TOPICS = {topic_of(a, v) for a, v in NULLS}  # precision, int8


def upper(rate: float, n: int) -> float:
    return rate + 2.33 * math.sqrt(rate * (1 - rate) / n)


def lower(rate: float, n: int) -> float:
    return rate - 2.5 * math.sqrt(rate * (1 - rate) / n)


def is_null(c: Comparison) -> bool:
    """A comparison whose true effect is 0: what it changes holds no planted value (at the
    instruct template, fp16 against bf16 is still null: both sides lose the same problems)."""
    changed = set(c.value.split())
    return not any(str(v) in changed or f"{a}={v}" in changed for a, v in PLANTED)


@pytest.fixture(scope="module")
def rates():
    named: Counter = Counter()
    exact = 0
    family_errors: Counter = Counter()
    families: Counter = Counter()
    fdp = []
    for seed in range(N_GRIDS):
        grid = planted_grid(seed, N_MODELS)
        comparisons = compare_grid(
            grid.rows, grid.outcomes, DEFAULT_BASELINE, None, EvidenceOptions(RESAMPLES)
        )
        findings = axis_findings(comparisons, {"humanevalfix": "pass@1"})
        by_group: dict[str, set[str]] = {}
        for f in findings:
            if f.counts:
                by_group.setdefault(f.group, set()).add(f.topic)
        for group, topics in by_group.items():
            named.update((group, t) for t in topics)
        exact += by_group.get("all", set()) == PLANTED_TOPICS
        by_family: dict[str, list[Comparison]] = {}
        for c in comparisons:
            by_family.setdefault(c.family, []).append(c)
        for name, members in by_family.items():
            kind = members[0].kind
            false = [c for c in members if c.significant and is_null(c)]
            if kind is FamilyKind.EXPLORATORY:
                rejected = [c for c in members if c.significant]
                fdp.append(len(false) / len(rejected) if rejected else 0.0)
                continue
            label = "models" if kind is FamilyKind.MODEL_SETTINGS else name
            families[label] += 1
            family_errors[label] += bool(false)
    return named, exact, family_errors, families, fdp


def test_the_findings_name_the_planted_axes_at_the_predicted_power(rates):
    named, exact, _, _, _ = rates
    size = 1 + 4  # the template value, and the four precision values
    powers = {}
    for (axis, value), k in PLANTED.items():
        topic = topic_of(axis, value)
        for group, models in (("all", N_MODELS), (INSTRUCT, N_MODELS // 2)):
            predicted = predicted_power(k, models, size)
            observed = named[(group, topic)] / N_GRIDS
            powers[(group, topic)] = predicted
            assert observed >= lower(predicted, N_GRIDS), (group, topic, observed, predicted)
    # exactly the planted axes, and nothing else, in the all-models family
    both = powers[("all", "template")] * powers[("all", "int4")] * (1 - ALPHA)
    assert exact / N_GRIDS >= lower(both, N_GRIDS), (exact, both)


def test_the_null_axes_are_named_in_at_most_five_percent_of_the_grids_per_family(rates):
    named, _, errors, families, fdp = rates
    for group in ("all", INSTRUCT):
        wrongly = sum(named[(group, t)] for t in NULL_TOPICS)
        assert wrongly / N_GRIDS <= upper(ALPHA, N_GRIDS), (group, wrongly)
    for label, n in families.items():  # family-wise: any null comparison of the family
        assert errors[label] / n <= upper(ALPHA, n), (label, errors[label], n)
    assert families["models"] == N_GRIDS * N_MODELS
    # Benjamini-Hochberg controls the false discovery rate of the exploratory family
    assert sum(fdp) / len(fdp) <= upper(ALPHA, len(fdp))


def test_a_planted_store_reports_the_planted_findings_end_to_end(tmp_path):
    """One planted grid written as a store: the report's findings are the analysis' own."""
    seed = 3
    grid = write_planted_store(str(tmp_path / "store"), seed, N_MODELS)
    data = build_report(str(tmp_path / "store"), ReportOptions(n_resamples=RESAMPLES))
    findings = data.table("findings")
    direct = compare_grid(
        grid.rows, grid.outcomes, DEFAULT_BASELINE, None, EvidenceOptions(RESAMPLES)
    )
    want = axis_findings(direct, {"humanevalfix": "pass@1"})
    got = findings[findings.topic.isin(["template", "decoding", "precision", "int8", "int4"])]
    assert list(got.sentence) == [f.sentence for f in want]
    assert set(got[got.counts & (got.group == "all")].topic) == PLANTED_TOPICS
