"""Assembling a report from a store: the grid, the literature join, effects, skips, provenance.

Everything numeric is computed here or in the pure modules it calls (literature, effects,
intervals); report_render.py only formats. A setting's score (`score_pct`) is its headline
metric in percent. pass@1 is recomputed from the executions table (the source of truth:
unbiased pass@1 per problem, mean over problems, exact) and carries a bootstrap interval; other
metrics (InfiBench's best@10) and settings without executions take the scores table's value,
without an interval.
Tables are pandas DataFrames named as in docs/report.md.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import pandas as pd

from orchestrator.analysis.effects import (
    DEFAULT_BASELINE,
    EffectPair,
    effect_pairs,
    precision_spread,
    summarize_effects,
    summarize_spread,
    template_kind,
)
from orchestrator.analysis.intervals import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    exact_pass1,
    pass1_interval,
    problem_counts,
)
from orchestrator.analysis.literature import (
    LiteratureMatch,
    SettingScore,
    join_literature,
    match_record,
    unmatched_record,
    unobtainable_record,
)
from storage.literature import (
    LiteratureMapping,
    load_default_literature,
    load_default_mapping,
    load_literature,
    load_literature_mapping,
)
from storage.store import Store

logger = logging.getLogger(__name__)

DEFAULT_LITERATURE = "reprogrid:humanevalfix-python.csv"
PRECISION_RANK = {"bf16": 0, "fp16": 1, "fp32": 2, "int8": 3, "int4": 4}
GRID_COLUMNS = (
    "model_name", "model_tuning", "template", "template_kind", "decoding", "max_length",
    "precision", "backend", "variant", "n_samples", "metric", "score_pct", "ci_low_pct",
    "ci_high_pct", "n_problems", "n_passed", "n_prompt_truncated", "n_hit_length_limit",
    "n_decode_mismatch", "n_timeout", "benchmark", "length_semantics", "limit", "model_family",
    "model_size_b", "setting_key",
)  # fmt: skip
LIMIT_COLUMNS = (
    "model_name", "template_kind", "decoding", "max_length", "precision", "backend",
    "n_problems", "n_samples", "n_prompt_truncated", "n_hit_length_limit", "n_decode_mismatch",
    "setting_key",
)  # fmt: skip
SKIP_COLUMNS = (
    "model_name", "status", "template", "decoding", "max_length", "precision", "backend",
    "error_type", "status_reason", "attempts", "setting_key",
)  # fmt: skip
PROVENANCE_COLUMNS = (
    "model_name", "model_repo_id", "model_revision", "backend", "backend_version", "device",
    "effective_dtype", "tokenizer_sha256", "chat_template_sha256", "data_sha256", "hostname",
    "library_versions",
)  # fmt: skip
RUN_COLUMNS = (
    "run_id", "command", "started_at", "finished_at", "status", "git_revision", "hostname",
    "n_generated", "n_executed", "cluster_address", "library_versions", "data_sources_json",
)  # fmt: skip


# A model's own template by model name, for settings rows that do not record their template
# kind (None: unknown). The report wing never reads config; the CLI passes this in.
OwnTemplateLookup = Callable[[str], str | None]


def _unknown_own_template(model_name: str) -> str | None:
    return None


@dataclass(frozen=True)
class ReportOptions:
    literature_path: str | None = None  # None: the CSV shipped in storage/data/
    mapping_path: str | None = None  # None: storage/data/humanevalfix-mapping.yaml
    own_template_of: OwnTemplateLookup = _unknown_own_template
    baseline: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_BASELINE))
    n_resamples: int = DEFAULT_RESAMPLES  # bootstrap resamples per setting
    confidence: float = DEFAULT_CONFIDENCE
    seed: int = DEFAULT_SEED  # bootstrap seed (the same for every setting)


@dataclass(frozen=True)
class ReportTable:
    name: str  # file stem (<name>.csv), JSON key; titles live in report_render.TABLES
    frame: pd.DataFrame
    group_by: str | None = None  # md/html/tex: one sub-table per value of this column


@dataclass(frozen=True)
class ModelLiterature:
    """Figure 1 inputs for one model: its measured scores and the values papers report."""

    model_name: str
    scores_pct: tuple[float, ...]
    reported: tuple[tuple[float, str, str], ...]  # (value, source id, status)


@dataclass(frozen=True)
class ReportData:
    store: str
    generated_at: str
    tables: tuple[ReportTable, ...]
    notes: tuple[str, ...]
    literature_figure: tuple[ModelLiterature, ...]  # Figure 1 inputs
    effect_pairs: tuple[EffectPair, ...]  # Figure 2 inputs
    options: dict[str, Any]

    def table(self, name: str) -> pd.DataFrame:
        for t in self.tables:
            if t.name == name:
                return t.frame
        raise KeyError(f"no table {name!r}; tables: {', '.join(t.name for t in self.tables)}")


# ---------------------------------------------------------------------------------------------
# Inputs


def load_mapping(path: str | None = None) -> LiteratureMapping:
    """The literature-name -> model-name mapping (default: the shipped one)."""
    return load_literature_mapping(path) if path else load_default_mapping()


def own_templates(
    model_names: Sequence[str], lookup: OwnTemplateLookup
) -> dict[str, str | None]:
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


def _pass1(store: Store, key: str, score: Mapping[str, Any], options: ReportOptions) -> dict:
    shard = store.read_shard("executions", key) if score.get("metric") == "pass@1" else None
    if shard is None or shard.num_rows == 0:
        value = score.get("value")
        exact = Fraction(value).limit_denominator(10**9) if value is not None else None
        return {"exact": exact, "ci_low_pct": None, "ci_high_pct": None}
    rows = shard.select(["task_id", "passed"]).to_pydict()
    counts = problem_counts(rows["task_id"], rows["passed"])
    interval = pass1_interval(counts, options.n_resamples, options.confidence, options.seed)
    return {
        "exact": exact_pass1(counts),
        "ci_low_pct": 100 * interval.low,
        "ci_high_pct": 100 * interval.high,
    }


def _grid_row(setting: dict, score: dict, own: str | None, measured: dict) -> dict[str, Any]:
    row = {c: setting.get(c) for c in GRID_COLUMNS}
    exact = measured["exact"]
    row.update(
        template_kind=template_kind(setting["template"], own),
        metric=score.get("metric"),
        score_pct=float(exact * 100) if exact is not None else None,
        ci_low_pct=measured["ci_low_pct"], ci_high_pct=measured["ci_high_pct"],
        n_problems=score.get("n_problems"), n_passed=score.get("n_passed"),
        n_prompt_truncated=score.get("n_prompt_truncated"),
        n_hit_length_limit=score.get("n_hit_length_limit"),
        n_decode_mismatch=score.get("n_decode_mismatch"), n_timeout=score.get("n_timeout"),
        exact=exact,
    )  # fmt: skip
    return row


def grid_frame(store: Store, settings: pd.DataFrame, options: ReportOptions) -> pd.DataFrame:
    """One row per complete setting with a score; column `exact` holds pass@1 as a Fraction."""
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
        measured = _pass1(store, key, scores[key], options)
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


def setting_label(row: Mapping[str, Any]) -> str:
    """Template, decoding, max length, precision, backend: "own(deepseek) greedy 2048 bf16 hf"."""
    kind = row["template_kind"]
    template = kind if kind != "own" else f"own({row['template']})"
    return f"{template} {row['decoding']} {row['max_length']} {row['precision']} {row['backend']}"


def setting_scores(grid: pd.DataFrame, mapping: LiteratureMapping) -> list[SettingScore]:
    """The grid rows that the literature describes (its benchmark and variants, pass@1)."""
    out = []
    for row in grid.to_dict("records"):
        if row["benchmark"] != mapping.benchmark or row["variant"] not in mapping.variants:
            continue
        if row["metric"] != "pass@1" or row["exact"] is None:
            continue
        out.append(
            SettingScore(
                key=row["setting_key"], model_name=row["model_name"],
                model_family=row["model_family"] or "", model_size_b=row["model_size_b"],
                tuning=row["model_tuning"], label=setting_label(row), score=row["exact"],
                n_problems=int(row["n_problems"] or mapping.n_problems),
            )
        )  # fmt: skip
    return out


# ---------------------------------------------------------------------------------------------
# Tables


def _records(items: Sequence[Any]) -> pd.DataFrame:
    """A DataFrame from dataclass instances (tuples become comma lists)."""
    rows = [
        {k: ",".join(map(str, v)) if isinstance(v, tuple) else v
         for k, v in dataclasses.asdict(i).items()}
        for i in items
    ]  # fmt: skip
    return pd.DataFrame(rows)


def _grid_tables(grid: pd.DataFrame) -> list[ReportTable]:
    shown = grid.drop(columns=["exact"])
    hit = (
        (shown["n_prompt_truncated"].fillna(0) > 0)
        | (shown["n_hit_length_limit"].fillna(0) > 0)
        | (shown["n_decode_mismatch"].fillna(0) > 0)
    )
    limits = shown.loc[hit, list(LIMIT_COLUMNS)].reset_index(drop=True)
    return [ReportTable("grid", shown, group_by="model_name"), ReportTable("length_limits", limits)]


def _literature_tables(
    matches: Sequence[LiteratureMatch], grid: pd.DataFrame
) -> tuple[list[ReportTable], list[ModelLiterature]]:
    compared = sorted((m for m in matches if m.own is not None),
                      key=lambda m: (m.model_name or "", m.row.line))  # fmt: skip
    unobtainable = [m for m in matches if not m.obtainability.obtainable]
    tables = [
        ReportTable("literature", pd.DataFrame([match_record(m) for m in compared])),
        ReportTable(
            "literature_unmatched",
            pd.DataFrame([unmatched_record(m) for m in matches if m.own is None]),
        ),
        ReportTable("unobtainable", pd.DataFrame([unobtainable_record(m) for m in unobtainable])),
    ]
    figure = []
    for model in sorted({m.model_name for m in compared if m.model_name}):
        scores = grid.loc[grid["model_name"] == model, "score_pct"].dropna()
        reported = tuple(
            (
                m.row.score_pct,
                m.row.source_id,
                "tuning confusion" if m.tuning_confusion else m.status,
            )
            for m in compared
            if m.model_name == model
        )
        figure.append(ModelLiterature(model, tuple(float(s) for s in scores), reported))
    return tables, figure


def _none_if_nan(value: Any) -> Any:
    return None if value is None or (isinstance(value, float) and value != value) else value


def _effect_tables(
    grid: pd.DataFrame, baseline: Mapping[str, Any]
) -> tuple[list[ReportTable], list[EffectPair]]:
    rows = [
        {
            "key": r["setting_key"],
            "model_name": r["model_name"],
            "tuning": r["model_tuning"],
            "template": r["template_kind"],
            "decoding": r["decoding"],
            "max_length": r["max_length"],
            "precision": r["precision"],
            "backend": r["backend"],
            "benchmark": r["benchmark"],
            "variant": r["variant"],
            "length_semantics": r["length_semantics"],
            "limit": _none_if_nan(r["limit"]),
            "score_pct": r["exact"] * 100,
        }  # fmt: skip
        for r in grid.to_dict("records")
        if r["exact"] is not None
    ]
    pairs = effect_pairs(rows, baseline)
    spread = precision_spread(rows)
    tables = [
        ReportTable("effects", _records(summarize_effects(pairs))),
        ReportTable("effect_pairs", _records(pairs)),
        ReportTable("precision_spread", _records(summarize_spread(spread))),
        ReportTable("precision_spread_by_model", _records(spread)),
    ]
    return tables, pairs


def _skipped_table(settings: pd.DataFrame) -> ReportTable:
    frame = settings[settings["status"].isin(["skipped", "failed"])] if len(settings) else settings
    frame = frame.reindex(columns=list(SKIP_COLUMNS))
    frame = frame.sort_values(["status", "model_name", "setting_key"]).reset_index(drop=True)
    return ReportTable("skipped_failed", frame)


def parse_json_field(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except (json.JSONDecodeError, TypeError):
        return {}
    return value if isinstance(value, dict) else {}


def _versions(text: str | None) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(parse_json_field(text).items()))


def _provenance_tables(settings: pd.DataFrame, runs: pd.DataFrame) -> list[ReportTable]:
    done = settings[settings["status"] == "complete"].copy() if len(settings) else settings.copy()
    done["library_versions"] = [_versions(t) for t in done.get("library_versions_json", [])]
    cols = list(PROVENANCE_COLUMNS)
    done = done.reindex(columns=cols).astype(object).fillna("")
    grouped = done.groupby(cols, dropna=False).size().reset_index(name="n_settings")
    runs = runs.copy()
    runs["library_versions"] = [_versions(t) for t in runs.get("library_versions_json", [])]
    runs = runs.reindex(columns=list(RUN_COLUMNS)).sort_values("started_at")
    return [
        ReportTable("provenance_settings", grouped),
        ReportTable("provenance_runs", runs.reset_index(drop=True)),
    ]


def _notes(
    settings: pd.DataFrame,
    grid: pd.DataFrame,
    matches: Sequence[LiteratureMatch],
    baseline: Mapping[str, Any],
    n_pairs: int,
) -> list[str]:
    notes = []
    answered = {m.model_name for m in matches if m.own is not None}
    for model in sorted(set(grid["model_name"])) if len(grid) else []:
        if model not in answered:
            notes.append(f"no literature rows for model {model}")
    if len(settings):
        n = int((settings["status"] == "running").sum())
        if n:
            notes.append(f"{n} setting(s) are running (interrupted?): not in the tables")
    if grid.empty:
        notes.append("the store holds no complete settings with a score")
    elif not n_pairs:
        base = " ".join(f"{k}={v}" for k, v in baseline.items())
        notes.append(
            f"no effects: no model has a baseline setting ({base}) and a setting that changes "
            "one axis of it; choose another baseline with --baseline KEY=VALUE"
        )
    return notes


def build_report(store_uri: str, options: ReportOptions | None = None) -> ReportData:
    """Read the store and compute every table of the report (see docs/report.md)."""
    options = options or ReportOptions()
    store = Store(store_uri)
    settings = read_frame(store, "settings")
    grid = grid_frame(store, settings, options)
    if options.literature_path:
        rows = load_literature(options.literature_path)
    else:
        rows = load_default_literature()
    mapping = load_mapping(options.mapping_path)
    scores = setting_scores(grid, mapping)
    matches = join_literature(rows, mapping.models, scores, mapping.n_problems)
    literature, figure = _literature_tables(matches, grid)
    effects, pairs = _effect_tables(grid, options.baseline)
    tables = [
        *_grid_tables(grid), *literature, *effects, _skipped_table(settings),
        *_provenance_tables(settings, read_frame(store, "runs")),
    ]  # fmt: skip
    return ReportData(
        store=store_uri,
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        tables=tuple(tables),
        notes=tuple(_notes(settings, grid, matches, options.baseline, len(pairs))),
        literature_figure=tuple(figure),
        effect_pairs=tuple(pairs),
        options={
            "baseline": dict(options.baseline),
            "n_resamples": options.n_resamples,
            "confidence": options.confidence,
            "seed": options.seed,
            "literature": options.literature_path or DEFAULT_LITERATURE,
            "literature_rows": len(rows),
            "mapping": mapping.source,
            "mapping_benchmark": mapping.benchmark,
            "mapping_variants": list(mapping.variants),
        },
    )
