"""The report's provenance and bookkeeping tables: skipped and failed settings, where each
measured setting came from, and the runs that wrote the store."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from orchestrator.report.tables.data import ReportTable
from storage.provenance import (
    LISTED,
    VERSIONS_COLUMN,
    VERSIONS_TEXT_COLUMN,
    values_of,
    values_text,
    versions_of,
    versions_text,
)
from storage.schema import RunStatus

SKIP_COLUMNS = tuple(
    """model_name status template decoding max_length precision backend error_type
    status_reason attempts setting_key""".split()
)
PROVENANCE_COLUMNS = tuple(
    """model_name model_repo_id model_revision backend backend_version device effective_dtype
    tokenizer_sha256 chat_template_sha256 data_sha256 hostname library_versions""".split()
)
RUN_COLUMNS = tuple(
    """run_id command started_at finished_at status git_revision hostname n_generated
    n_executed cluster_address library_versions data_sources_json""".split()
)


def skipped_table(settings: pd.DataFrame) -> ReportTable:
    frame = settings[settings["status"].isin(["skipped", "failed"])] if len(settings) else settings
    frame = frame.reindex(columns=list(SKIP_COLUMNS))
    frame = frame.sort_values(["status", "model_name", "setting_key"]).reset_index(drop=True)
    return ReportTable(
        "skipped_failed", frame, empty_reason="No setting of the store was skipped or failed."
    )


def parse_json_field(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except (json.JSONDecodeError, TypeError):
        return {}
    return value if isinstance(value, dict) else {}


def _versions(text: str | None) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(parse_json_field(text).items()))


def _engine_text(settings: pd.DataFrame) -> pd.DataFrame:
    """The engine's provenance as text from its structured values (storage/provenance.py), so
    that a row written before schema version 6 names each library once too."""
    columns = [VERSIONS_COLUMN, VERSIONS_TEXT_COLUMN, *LISTED, *LISTED.values()]
    rows = settings.reindex(columns=columns).astype(object).to_dict("records")
    out = settings.copy()
    out[VERSIONS_TEXT_COLUMN] = [versions_text(versions_of(r)) for r in rows]
    for column, text in LISTED.items():
        out[text] = [values_text(values_of(r, column)) for r in rows]
    return out


def provenance_tables(
    settings: pd.DataFrame, runs: pd.DataFrame, writer_active: bool
) -> list[ReportTable]:
    done = settings[settings["status"] == "complete"].copy() if len(settings) else settings.copy()
    done["library_versions"] = [_versions(t) for t in done.get("library_versions_json", [])]
    done = _engine_text(done)
    cols = list(PROVENANCE_COLUMNS)
    done = done.reindex(columns=cols).astype(object).fillna("")
    grouped = done.groupby(cols, dropna=False).size().reset_index(name="n_settings")
    grouped = grouped.reindex(columns=[*cols, "n_settings"])
    runs = runs.copy()
    if not writer_active and len(runs):  # a `running` run without its writer was killed
        dead = runs["status"] == RunStatus.RUNNING.value
        runs.loc[dead, "status"] = RunStatus.INTERRUPTED.value
    runs["library_versions"] = [_versions(t) for t in runs.get("library_versions_json", [])]
    runs = runs.reindex(columns=list(RUN_COLUMNS)).sort_values("started_at")
    return [
        ReportTable(
            "provenance_settings", grouped, empty_reason="The store holds no complete setting."
        ),
        ReportTable(
            "provenance_runs",
            runs.reset_index(drop=True),
            empty_reason="The store records no run (its runs table is empty).",
        ),
    ]
