"""The report's grid: one row per complete setting with its score, read from the store.

`backend` is the backend a setting's generations come from: for an imported harness file, the
one it claims (`claimed_backend`), so the import lines up with the run it reproduces;
`generated_by` is what the store ran (`replay` for an import).

A setting's score (`score_pct`) is its headline metric in percent. pass@1 is recomputed from
the executions table (the source of truth: unbiased pass@1 per problem, mean over problems,
exact) and carries a bootstrap interval; other metrics (InfiBench's best@10) and settings
without executions take the scores table's value, without an interval.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import pandas as pd

from orchestrator.analysis.effects import template_kind
from orchestrator.analysis.intervals import (
    ProblemCounts,
    exact_pass1,
    pass1_interval,
    problem_counts,
)
from orchestrator.analysis.literature import SettingScore
from orchestrator.report.data import OwnTemplateLookup, ReportOptions
from storage.literature import (
    LiteratureMapping,
    load_default_mapping,
    load_literature_mapping,
)
from storage.store import Store

logger = logging.getLogger(__name__)

PRECISION_RANK = {"bf16": 0, "fp16": 1, "fp32": 2, "int8": 3, "int4": 4}
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
    "setting_key",
)
# Where a row's template kind came from: stored at run time, or (stores written before reprogrid
# stored it) from today's model config, or by name when the model's config is gone.
KIND_STORED, KIND_CONFIG, KIND_BY_NAME = "store", "model config", "template name"

# ---------------------------------------------------------------------------------------------
# Inputs


def load_mapping(path: str | None = None) -> LiteratureMapping:
    """The literature-name -> model-name mapping (default: the shipped one)."""
    return load_literature_mapping(path) if path else load_default_mapping()


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


def _pass1(
    store: Store,
    key: str,
    score: Mapping[str, Any],
    options: ReportOptions,
    counts_out: dict[str, ProblemCounts] | None = None,
) -> dict:
    shard = store.read_shard("executions", key) if score.get("metric") == "pass@1" else None
    if shard is None or shard.num_rows == 0:
        value = score.get("value")
        exact = Fraction(value).limit_denominator(10**9) if value is not None else None
        return {"exact": exact, "ci_low_pct": None, "ci_high_pct": None}
    rows = shard.select(["task_id", "passed"]).to_pydict()
    counts = problem_counts(rows["task_id"], rows["passed"])
    if counts_out is not None:
        counts_out[key] = counts
    interval = pass1_interval(counts, options.n_resamples, options.confidence, options.seed)
    return {
        "exact": exact_pass1(counts),
        "ci_low_pct": 100 * interval.low,
        "ci_high_pct": 100 * interval.high,
    }


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
    """One row per complete setting with a score; column `exact` holds pass@1 as a Fraction.
    `counts`, when given, receives each pass@1 setting's per-problem counts (read once here,
    for the paired tests)."""
    scores = {r["setting_key"]: r for r in read_frame(store, "scores").to_dict("records")}
    complete = settings[settings["status"] == "complete"] if len(settings) else settings
    names = sorted(set(complete["model_name"])) if len(complete) else []
    own = own_templates(names, options.own_template_of)
    rows = []
    for setting in complete.to_dict("records"):
        key = setting["setting_key"]
        if key not in scores:
            logger.warning("setting %s is complete but has no score: left out", key[:12])
            continue
        measured = _pass1(store, key, scores[key], options, counts)
        rows.append(_grid_row(setting, scores[key], own.get(setting["model_name"]), measured))
    frame = pd.DataFrame(rows, columns=[*GRID_COLUMNS, "exact"])
    if frame.empty:
        return frame
    frame["_p"] = frame["precision"].map(lambda p: PRECISION_RANK.get(p, 9))
    frame["_t"] = frame["template_kind"].map(lambda t: f"{t != 'own'}{t}")
    frame = frame.sort_values(
        ["model_name", "_t", "decoding", "max_length", "_p", "backend", "setting_key"]
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


def setting_scores(grid: pd.DataFrame, mapping: LiteratureMapping) -> list[SettingScore]:
    """The grid rows of the benchmark the literature describes (pass@1), every variant: those
    of the mapping's variants answer a reported value, the others are its variant counterpart.
    A row's benchmark total is what the store recorded, else the literature's problem count: a
    setting over fewer problems is a pilot, which the join never gives a verdict. `rank` is
    the row's position in the grid (the order that breaks ties between equal matches)."""
    out = []
    for rank, row in enumerate(grid.to_dict("records")):
        if row["benchmark"] != mapping.benchmark:
            continue
        if row["metric"] != "pass@1" or row["exact"] is None:
            continue
        total = row["benchmark_n_problems"]
        out.append(
            SettingScore(
                key=row["setting_key"],
                model_name=row["model_name"],
                model_family=row["model_family"] or "",
                model_size_b=row["model_size_b"],
                tuning=row["model_tuning"],
                label=setting_label(row),
                score=row["exact"],
                n_problems=int(row["n_problems"] or mapping.n_problems),
                n_problems_total=int(total) if present(total) else mapping.n_problems,
                variant=str(row["variant"]),
                rank=rank,
            )
        )
    return out
