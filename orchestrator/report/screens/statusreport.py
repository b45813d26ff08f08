"""What `status --json` prints and `status` shows, as types: the store's layout, the run
shown with what the cluster did to it (its faults, and how one reads), each model's engine
with its settings counted by status, and the lists that name settings (active, failed,
partial, damaged, quarantined, skipped)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, TypedDict


class ShownFault(TypedDict):
    """A node lost or an engine restarted during the run (the runs row's `faults_json`)."""

    at: str  # ISO time
    kind: str  # node_lost, engine_restarting, engine_replaced, unit_restarted
    what: str  # the node's id, or the engine and its replica
    detail: str
    requeued_chunks: int  # chunks in flight that went back to the queue
    requeued_settings: list[str]  # their settings' keys


class ShownRun(TypedDict):
    run_id: str
    started_at: Any
    finished_at: Any
    status: str
    n_generated: int
    n_executed: int
    faults: list[ShownFault]


def shown_faults(faults_json: str | None) -> list[ShownFault]:
    """A runs row's faults (none for a row written before the column existed)."""
    return json.loads(faults_json) if faults_json else []


def fault_line(fault: ShownFault) -> str:
    """A fault as `status` shows it, under the run's line."""
    at = datetime.fromisoformat(fault["at"])
    line = f"{at:%H:%M:%S} {fault['kind'].replace('_', ' ')}: {fault['what']}"
    if fault["requeued_chunks"]:
        keys = ", ".join(k[:12] for k in fault["requeued_settings"])
        line += f"; {fault['requeued_chunks']} chunk(s) requeued, of {keys}"
    return f"{line} ({fault['detail']})" if fault["detail"] else line


class Layout(TypedDict):
    packs: int
    packed_shards: int
    interrupted_compaction: bool


# A model's engine and how many of its settings have each status: one key per STATUSES.
class EngineCounts(TypedDict):
    model: str
    engine: str
    complete: int
    running: int
    queued: int
    generated: int
    partial: int
    failed: int
    skipped: int
    damaged: int
    pending: int


class Activity(TypedDict):
    setting_key: str
    model: str
    engine: str
    doing: str  # "generating" or "executing"
    label: str
    generated_samples: int
    total_samples: int | None


class Failure(TypedDict):
    setting_key: str
    model: str
    engine: str
    error_type: str | None
    error: str | None
    template: str | None
    decoding: str | None
    max_length: int | None


class Partial(TypedDict):
    setting_key: str
    generated_samples: int
    total_samples: int | None


class Damaged(TypedDict):
    setting_key: str
    label: str
    damage: list[str]


class Quarantined(TypedDict):
    setting_key: str
    table: str | None
    file: str | None
    kind: str | None
    detail: str | None
    quarantined_at: Any
    moved_to: str | None


class SettingLine(TypedDict):
    setting_key: str
    status: str
    label: str


class Skipped(TypedDict):
    setting_key: str
    model: str
    reason: str | None


class StatusReport(TypedDict):
    """What `status --json` prints (and `render_status` reads)."""

    store: str
    layout: Layout
    run: ShownRun | None
    writer_active: bool
    totals: dict[str, int]
    engines: list[EngineCounts]
    active: list[Activity]
    failed: list[Failure]
    partial: list[Partial]
    damaged: list[Damaged]
    quarantined: list[Quarantined]
    settings: list[SettingLine]
    skipped: list[Skipped]


def no_counts(model: str, engine: str) -> EngineCounts:
    """A model's engine with none of its settings counted yet."""
    return {
        "model": model,
        "engine": engine,
        "complete": 0,
        "running": 0,
        "queued": 0,
        "generated": 0,
        "partial": 0,
        "failed": 0,
        "skipped": 0,
        "damaged": 0,
        "pending": 0,
    }
