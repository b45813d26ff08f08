"""Assembling a report from a store: the grid, the literature join, effects, skips, provenance.

Everything numeric is computed here, in grid.py, or in the pure analysis modules they call
(literature, effects, intervals); render.py only formats. Tables are pandas DataFrames named as
in docs/report.md.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from orchestrator.analysis.effects import (
    EffectPair,
    effect_pairs,
    precision_spread,
    summarize_effects,
    summarize_spread,
)
from orchestrator.analysis.literature import (
    LiteratureMatch,
    join_literature,
    match_record,
    obtainability_counts,
    unmatched_record,
    unobtainable_record,
)
from orchestrator.report.data import ModelLiterature, ReportData, ReportOptions, ReportTable
from orchestrator.report.grid import (
    KIND_STORED,
    grid_frame,
    load_mapping,
    read_frame,
    setting_scores,
)
from storage.literature import (
    load_default_literature,
    load_literature,
)
from storage.schema import RunStatus, SettingStatus
from storage.store import Store

logger = logging.getLogger(__name__)

DEFAULT_LITERATURE = "reprogrid:humanevalfix-python.csv"
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


def _provenance_tables(
    settings: pd.DataFrame, runs: pd.DataFrame, writer_active: bool
) -> list[ReportTable]:
    done = settings[settings["status"] == "complete"].copy() if len(settings) else settings.copy()
    done["library_versions"] = [_versions(t) for t in done.get("library_versions_json", [])]
    cols = list(PROVENANCE_COLUMNS)
    done = done.reindex(columns=cols).astype(object).fillna("")
    grouped = done.groupby(cols, dropna=False).size().reset_index(name="n_settings")
    runs = runs.copy()
    if not writer_active and len(runs):  # a `running` run without its writer was killed
        dead = runs["status"] == RunStatus.RUNNING.value
        runs.loc[dead, "status"] = RunStatus.INTERRUPTED.value
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
    notes = _trust_notes(grid, matches)
    answered = {m.model_name for m in matches if m.own is not None}
    for model in sorted(set(grid["model_name"])) if len(grid) else []:
        if model not in answered:
            notes.append(f"no literature rows for model {model}")
    if len(settings):
        n = int((settings["status"] == SettingStatus.RUNNING.value).sum())
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


def _trust_notes(grid: pd.DataFrame, matches: Sequence[LiteratureMatch]) -> list[str]:
    """What a reader must know before quoting a number: pilots, inferred template kinds, and
    how many reported values each obtainability rule gives."""
    notes = []
    pilots = grid[grid["subset"] != ""] if len(grid) else grid
    if len(pilots):
        notes.append(
            f"{len(pilots)} setting(s) scored a subset of the problems (pilots: "
            f"{', '.join(sorted(set(pilots['subset'])))}); they are shown, never a reproduction"
        )
    inferred = grid[grid["template_kind_from"] != KIND_STORED] if len(grid) else grid
    for source, group in inferred.groupby("template_kind_from") if len(inferred) else []:
        notes.append(
            f"{len(group)} setting(s) predate stored template kinds: kind taken from the "
            f"{source} ({', '.join(sorted(set(group['model_name'])))})"
        )
    counts = obtainability_counts(matches)
    if counts["values"]:
        notes.append(
            f"{counts['values']} reported value(s): {counts['obtainable']} obtainable with the "
            f"stated or assumed sampling; {counts['not obtainable']} not obtainable with the "
            f"sampling their source states; {counts['not obtainable with one sample per problem']}"
            " not obtainable with one sample per problem (their source does not say how it "
            "sampled)"
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
        *_provenance_tables(settings, read_frame(store, "runs"), store.writer_active()),
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
