"""The report's grid: one row per complete setting with its score, read from the store.

`backend` is the backend a setting's generations come from: for an imported harness file, the
one it claims (`claimed_backend`), so the import lines up with the run it reproduces;
`generated_by` is what the store ran (`replay` for an import).

A setting's score (`score_pct`) is its headline metric in percent, read from the exact counts
the scores table stores (report/scored.py: pass@1 as its count k/(problems x samples); a graded
score such as InfiBench's best@10 as the value the benchmark computed, with its std over sample
groups), and carries a bootstrap interval over its per-problem scores. For a row written before
the counts were stored they are derived once from the executions (`counts_from`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from orchestrator.analysis.effects import template_kind
from orchestrator.analysis.intervals import bootstrap_interval
from orchestrator.report.tables.data import OwnTemplateLookup, ReportOptions
from orchestrator.report.tables.labels import PRECISION_RANK
from orchestrator.report.tables.records import records
from orchestrator.report.tables.scored import scored
from storage.store import Store
from workers.scoring import ProblemCounts

logger = logging.getLogger(__name__)

GRID_COLUMNS = (
    "model_name",
    "model_tuning",
    "template",
    "template_kind",
    "decoding",
    "max_length",
    "precision",
    "backend",
    "generated_by",
    "variant",
    "n_samples",
    "metric",
    "score_pct",
    "ci_low_pct",
    "ci_high_pct",
    "std_pct",
    "n_groups",
    "n_problems",
    "subset",
    "n_passed",
    "n_prompt_truncated",
    "n_hit_length_limit",
    "n_decode_mismatch",
    "n_timeout",
    "benchmark",
    "length_semantics",
    "limit",
    "model_family",
    "model_size_b",
    "benchmark_n_problems",
    "template_kind_from",
    "counts_from",
    "setting_key",
)
# Where a row's template kind came from: stored at run time, or (stores written before reprogrid
# stored it) from today's model config, or by name when the model's config is gone.
KIND_STORED, KIND_CONFIG, KIND_BY_NAME = "store", "model config", "template name"
# Where a row's counts came from: the scores row, or derived from the executions (older rows).
COUNTS_STORED, COUNTS_DERIVED = "scores", "executions"

# ---------------------------------------------------------------------------------------------
# Inputs


def own_templates(model_names: Sequence[str], lookup: OwnTemplateLookup) -> dict[str, str | None]:
    """Each model's own template by `lookup` (None if unknown)."""
    return {name: lookup(name) for name in model_names}


def read_frame(store: Store, table: str) -> pd.DataFrame:
    """A whole table as a DataFrame, dictionary columns as plain values."""
    frame = store.read_table(table).to_pandas()
    for column in frame.columns:
        if isinstance(frame[column].dtype, pd.CategoricalDtype):
            frame[column] = frame[column].astype(object)
    return frame


# ---------------------------------------------------------------------------------------------
# The grid


def _measured(
    store: Store,
    score: Mapping[str, Any],
    options: ReportOptions,
    counts_out: dict[str, ProblemCounts] | None = None,
) -> dict:
    """A setting's exact headline, its interval over problems and its spread over groups.
    `counts_out`, when given, receives the setting's per-problem counts (for the paired
    tests)."""
    counted = scored(store, score)
    pass1 = score.get("metric") == "pass@1"
    if counts_out is not None and pass1 and counted.counts is not None and counted.counts.n:
        counts_out[str(score["setting_key"])] = counted.counts
    out: dict[str, Any] = {
        "exact": counted.exact,
        "ci_low_pct": None,
        "ci_high_pct": None,
        "counts_from": COUNTS_DERIVED if counted.derived else COUNTS_STORED,
    }
    if counted.problem_scores:
        interval = bootstrap_interval(
            counted.problem_scores, options.n_resamples, options.confidence, options.seed
        )
        out.update(ci_low_pct=100 * interval.low, ci_high_pct=100 * interval.high)
    std: Any = score.get("value_std")
    details = json.loads(score["details"]) if present(score.get("details")) else {}
    out.update(std_pct=100 * float(std) if present(std) else None, n_groups=details.get("n_groups"))
    return out


def present(value: Any) -> bool:
    """Not null (None, NaN or pandas' NA: a column an older store did not write)."""
    return value is not None and not pd.isna(value)


def _kind(setting: Mapping[str, Any], own: str | None) -> tuple[str, str]:
    if present(setting.get("template_kind")):
        return str(setting["template_kind"]), KIND_STORED
    return template_kind(setting["template"], own), KIND_CONFIG if own else KIND_BY_NAME


def subset_label(n_problems: Any, total: Any, limit: Any) -> str:
    """ "subset (10 of 164)" when a setting covers fewer problems than its benchmark holds
    ("subset (limit 10)" when an older store did not record the total), else ""."""
    if present(total) and present(n_problems) and int(n_problems) < int(total):
        return f"subset ({int(n_problems)} of {int(total)})"
    if not present(total) and present(limit):
        return f"subset (limit {int(limit)})"
    return ""


def _grid_row(setting: dict, score: dict, own: str | None, measured: dict) -> dict[str, Any]:
    row = {c: setting.get(c) for c in GRID_COLUMNS}
    # An imported file stands where the backend it claims stands (the run it reproduces);
    # `generated_by` keeps what made the stored generations (replay).
    claimed = setting.get("claimed_backend")
    row["generated_by"] = setting.get("backend")
    if present(claimed):
        row["backend"] = claimed
    exact = measured["exact"]
    kind, kind_from = _kind(setting, own)
    total = setting.get("benchmark_n_problems")
    row.update(
        template_kind=kind,
        template_kind_from=kind_from,
        benchmark_n_problems=int(total) if total is not None and present(total) else None,
        subset=subset_label(score.get("n_problems"), total, setting.get("limit")),
        metric=score.get("metric"),
        score_pct=float(exact * 100) if exact is not None else None,
        ci_low_pct=measured["ci_low_pct"],
        ci_high_pct=measured["ci_high_pct"],
        std_pct=measured["std_pct"],
        n_groups=measured["n_groups"],
        counts_from=measured["counts_from"],
        n_problems=score.get("n_problems"),
        n_passed=score.get("n_passed"),
        n_prompt_truncated=score.get("n_prompt_truncated"),
        n_hit_length_limit=score.get("n_hit_length_limit"),
        n_decode_mismatch=score.get("n_decode_mismatch"),
        n_timeout=score.get("n_timeout"),
        exact=exact,
    )
    return row


def grid_frame(
    store: Store,
    settings: pd.DataFrame,
    options: ReportOptions,
    counts: dict[str, ProblemCounts] | None = None,
) -> pd.DataFrame:
    """One row per complete setting with a score; column `exact` holds the headline exactly (a
    Fraction: pass@1 as its count, a graded score as its float). `counts`, when given,
    receives each setting's per-problem counts (read once here, for the paired tests)."""
    scores = {r["setting_key"]: r for r in records(read_frame(store, "scores"))}
    complete = settings[settings["status"] == "complete"] if len(settings) else settings
    names = sorted(set(complete["model_name"])) if len(complete) else []
    own = own_templates(names, options.own_template_of)
    rows = []
    for setting in records(complete):
        key = setting["setting_key"]
        if key not in scores:
            logger.warning("setting %s is complete but has no score: left out", key[:12])
            continue
        measured = _measured(store, scores[key], options, counts)
        rows.append(_grid_row(setting, scores[key], own.get(setting["model_name"]), measured))
    frame = pd.DataFrame(rows, columns=[*GRID_COLUMNS, "exact"])
    if frame.empty:
        return frame
    frame["_p"] = frame["precision"].map(lambda p: PRECISION_RANK.get(p, 9))
    frame["_t"] = frame["template_kind"].map(lambda t: f"{t != 'own'}{t}")
    frame = frame.sort_values(
        ["model_name", "benchmark", "_t", "decoding", "max_length", "_p", "backend", "setting_key"]
    )
    return frame.drop(columns=["_p", "_t"]).reset_index(drop=True)


def template_label(row: Mapping[str, Any]) -> str:
    """The template kind, with the template's name when it is the model's own: "own(deepseek)",
    "instruct"."""
    kind = row["template_kind"]
    return kind if kind != "own" else f"own({row['template']})"


def setting_label(row: Mapping[str, Any]) -> str:
    """Template, decoding, max length, precision, backend: "own(deepseek) greedy 2048 bf16 hf"."""
    axes = (row["decoding"], row["max_length"], row["precision"], row["backend"])
    return " ".join([template_label(row), *map(str, axes)])
