"""The report's evidence: every setting's outcome per problem, the declared comparisons with
their paired tests (`comparisons`), the sentences that say what they found (`findings`), and the
re-generation noise floor they are judged against (docs/statistics.md).

The numbers come from orchestrator.analysis (evidence, findings, noise, outcomes); this module
reads what they need from the store and the grid, and turns their results into tables.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from orchestrator.analysis.evidence import Comparison, EvidenceOptions, compare_grid, scope_label
from orchestrator.analysis.findings import (
    Finding,
    axis_findings,
    literature_finding,
    noise_finding,
    untested_finding,
)
from orchestrator.analysis.intervals import ProblemCounts
from orchestrator.analysis.multiplicity import FamilyKind
from orchestrator.analysis.noise import noise_floors
from orchestrator.analysis.outcomes import ProblemOutcomes, best_of_outcomes, outcomes_of_counts
from orchestrator.report.tables.data import ReportOptions, ReportTable
from orchestrator.report.tables.grid import read_frame
from orchestrator.report.tables.records import records
from storage.store import Store

COMPARISON_COLUMNS = tuple(
    """scope family kind adjustment family_size group axis value baseline_value at n_models
    models n_problems n_problem_pairs method b c score_a_pct score_b_pct delta_pp ci_low_pp
    ci_high_pp p_value p_adjusted mdd_pp noise_pp significant counts exhaustive a_keys
    b_keys""".split()
)
FINDING_COLUMNS = tuple(f.name for f in dataclasses.fields(Finding))
SCORE_TOLERANCE = 1e-9  # a setting's outcomes must average to its stored score
UNSCORED = frozenset({"error", "toolchain_missing"})  # InfiBench: the question scores 0


def setting_outcomes(
    store: Store,
    grid: pd.DataFrame,
    counts: Mapping[str, ProblemCounts],
    include_pilots: bool = False,
) -> tuple[dict[str, ProblemOutcomes], list[str]]:
    """Per complete, full-benchmark setting of the grid (pilots too with `include_pilots`): its
    outcome per problem (pass@1 from the counts the grid read; best@10 from its executions). A
    setting whose outcomes do not average to its score is left out, and a note says so."""
    out: dict[str, ProblemOutcomes] = {}
    mismatched = []
    for row in records(grid) if len(grid) else []:
        key = row["setting_key"]
        if (row["subset"] and not include_pilots) or row["exact"] is None:
            continue  # a pilot is never a result; no score, nothing to compare
        if key in counts:
            outcome = outcomes_of_counts(counts[key])
        elif row["metric"] == "best@10":
            shard = store.read_shard("executions", key)
            if shard is None or shard.num_rows == 0:
                continue
            rows = shard.select(["task_id", "sample_index", "score", "outcome"]).to_pydict()
            scored = [o not in UNSCORED for o in rows["outcome"]]
            outcome = best_of_outcomes(rows["task_id"], rows["sample_index"], rows["score"], scored)
        else:
            continue
        if abs(outcome.score - float(row["exact"])) > SCORE_TOLERANCE:
            mismatched.append(key[:12])
            continue
        out[key] = outcome
    notes = []
    if mismatched:
        notes.append(
            f"{len(mismatched)} setting(s) whose per-problem outcomes do not average to their "
            f"stored score are left out of the paired tests ({', '.join(mismatched)})"
        )
    return out, notes


def comparison_record(c: Comparison) -> dict[str, Any]:
    t = c.test
    return {
        "scope": scope_label(c.scope),
        "family": c.family,
        "kind": c.kind.value,
        "adjustment": c.kind.adjustment.value,
        "family_size": c.family_size,
        "group": c.group,
        "axis": c.axis,
        "value": c.value,
        "baseline_value": c.baseline_value,
        "at": c.at,
        "n_models": c.n_models,
        "models": " ".join(c.models),
        "n_problems": t.n,
        "n_problem_pairs": c.n_problem_pairs,
        "method": t.method.value,
        "b": t.b,
        "c": t.c,
        "score_a_pct": t.score_a_pct,
        "score_b_pct": t.score_b_pct,
        "delta_pp": t.delta_pp,
        "ci_low_pp": t.ci_low_pp,
        "ci_high_pp": t.ci_high_pp,
        "p_value": t.p_value,
        "p_adjusted": c.p_adjusted,
        "mdd_pp": t.mdd_pp,
        "noise_pp": c.noise_pp,
        "significant": c.significant,
        "counts": c.counts,
        "exhaustive": t.exhaustive,
        "a_keys": " ".join(c.a_keys),
        "b_keys": " ".join(c.b_keys),
    }


def _metrics(grid: pd.DataFrame) -> dict[str, str]:
    if grid.empty:
        return {}
    return {str(b): str(m) for b, m in zip(grid["benchmark"], grid["metric"], strict=True)}


def _literature(answers: pd.DataFrame) -> list[Finding]:
    if answers.empty:
        return []
    reproduced = answers[answers["verdict"] == "reproduced"]
    strength = reproduced["evidence_strength"].value_counts().to_dict()
    return [literature_finding(len(answers), len(reproduced), strength)]


def _untested(grid: pd.DataFrame, baseline: Mapping[str, Any]) -> Finding:
    """Why no axis was tested, from the grid's scored settings and its pilots."""
    scored = grid[grid["exact"].notna()] if len(grid) else grid
    labels = [str(s) for s in scored["subset"] if s] if len(scored) else []
    # grid.subset_label's "subset (20 of 164)": the sentence says "a subset of the problems"
    pilots = [p.removeprefix("subset (").removesuffix(")") for p in labels]
    base = " ".join(f"{k}={v}" for k, v in baseline.items())
    return untested_finding(len(scored), pilots, base)


def evidence_tables(
    store: Store,
    grid: pd.DataFrame,
    rows: Sequence[Mapping[str, Any]],
    counts: Mapping[str, ProblemCounts],
    answers: pd.DataFrame,
    options: ReportOptions,
) -> tuple[list[ReportTable], list[str]]:
    """The `findings` and `comparisons` tables, and the notes they need."""
    outcomes, notes = setting_outcomes(store, grid, counts)
    floors = noise_floors(records(read_frame(store, "repeat_checks")))
    evidence = EvidenceOptions(options.n_resamples, options.confidence, options.seed)
    comparisons = compare_grid(
        rows, outcomes, options.baseline, {b: f.noise_pp for b, f in floors.items()}, evidence
    )
    findings = axis_findings(comparisons, _metrics(grid))
    no_tests = (
        "No model has a baseline setting and a setting that changes one axis of it over the same "
        "problems: nothing to test."
    )
    if not any(c.kind is FamilyKind.AXIS_EFFECTS for c in comparisons):
        untested = _untested(grid, options.baseline)
        findings.append(untested)  # where the axes' sentences would be: why there are none
        no_tests = untested.sentence
    findings += [*_literature(answers), noise_finding(floors)]
    tables = [
        ReportTable(
            "findings",
            pd.DataFrame([dataclasses.asdict(f) for f in findings], columns=list(FINDING_COLUMNS)),
            empty_reason=no_tests,
        ),
        ReportTable(
            "comparisons",
            pd.DataFrame(
                [comparison_record(c) for c in comparisons], columns=list(COMPARISON_COLUMNS)
            ),
            empty_reason=no_tests,
        ),
    ]
    return tables, notes
