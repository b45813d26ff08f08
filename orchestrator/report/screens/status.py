"""`status`: per model and engine, how many settings are complete, running (generating or
executing now), queued (submitted by a live run, not begun), generated (waiting for execution),
partly generated (some chunks stored), failed, skipped, damaged (a file fails its checks) or
pending; which engine is generating; and what is damaged or quarantined, with the way out."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.report.screens.statusreport import (
    Activity,
    Damaged,
    EngineCounts,
    Failure,
    Layout,
    Partial,
    Quarantined,
    ShownRun,
    StatusReport,
    fault_line,
    no_counts,
    shown_faults,
)
from storage.index import SettingState, build_index
from storage.integrity import setting_key_of
from storage.schema import RUN_TABLES, RunStatus, SettingStatus
from storage.store import Store

# The columns of `status`: a setting's stored status, refined by what the store holds.
GENERATED = "generated"  # every generation stored, not executed yet
PARTIAL = "partial"  # some chunks of its generations stored (a run stopped between chunks)
DAMAGED = "damaged"  # a file of it fails its checks: `verify --fix` or the next run moves it
STATUSES = [
    "complete",
    "running",
    "queued",
    GENERATED,
    PARTIAL,
    "failed",
    "skipped",
    DAMAGED,
    "pending",
]
# the settings columns `status` shows (a packed table decodes only these)
SETTINGS_COLUMNS = (
    "setting_key",
    "status",
    "status_reason",
    "error_type",
    "model_name",
    "template",
    "decoding",
    "max_length",
    "precision",
    "backend",
    "dtype",
    "quant",
)


WAY_OUT = (
    "`reprogrid verify --fix` moves the damaged file(s) to the store's quarantine/ folder (or the "
    "next `reprogrid run` does it before planning); that run then redoes what they held"
)


def store_status(store: Store, run_id: str | None = None) -> StatusReport:
    """Status of the settings of one run's grid (default: the latest run) and of every other
    setting in the store. `running` and `queued` rows whose writer is gone are shown as
    `pending` (interrupted; the next run resumes them). A setting with a damaged file is
    `damaged` (never silently pending or gone), one with quarantined files that is not redone
    yet is pending with its quarantine record."""
    run = _select_run(store.read_table("runs").to_pylist(), run_id)
    index = build_index(store)
    settings = {
        r["setting_key"]: r
        for r in store.read_table("settings", columns=SETTINGS_COLUMNS).to_pylist()
    }
    keys = list(run["setting_keys"]) if run else []
    listed = set(keys)
    keys += sorted(k for k in settings if k not in listed)
    listed.update(keys)
    keys += sorted(k for k, s in index.items() if s.damage and k not in listed)
    live = store.writer_active()
    tally = _tally(keys, settings, index, live)
    return {
        "store": store.uri,
        "layout": layout(store),
        "run": _shown_run(run, live, index),
        "writer_active": live,
        "totals": tally.totals(),
        "engines": sorted(tally.engines.values(), key=lambda g: (g["model"], g["engine"])),
        "active": tally.active,
        "failed": tally.failed,
        "partial": tally.partial,
        "damaged": tally.damaged,
        "quarantined": [
            q for q in _quarantined(store, index) if tally.shown.get(q["setting_key"]) != "complete"
        ],
        "settings": [
            {"setting_key": k, "status": tally.shown[k], "label": label(settings.get(k))}
            for k in keys
        ],
        "skipped": [
            {
                "setting_key": k,
                "model": settings[k]["model_name"],
                "reason": settings[k]["status_reason"],
            }
            for k in keys
            if k in settings and settings[k]["status"] == SettingStatus.SKIPPED.value
        ],
    }


@dataclass
class _Tally:
    """Each setting's shown status, counted per model and engine, and the lists that name
    settings: what they are doing, why they failed, what is partly stored or damaged."""

    shown: dict[str, str] = field(default_factory=dict)
    engines: dict[tuple[str, str], EngineCounts] = field(default_factory=dict)
    active: list[Activity] = field(default_factory=list)
    failed: list[Failure] = field(default_factory=list)
    partial: list[Partial] = field(default_factory=list)
    damaged: list[Damaged] = field(default_factory=list)

    def totals(self) -> dict[str, int]:
        counts: list[Mapping[str, Any]] = list(self.engines.values())
        return {s: sum(int(g[s]) for g in counts) for s in STATUSES} if counts else {}


def _tally(
    keys: list[str],
    settings: Mapping[str, dict[str, Any]],
    index: Mapping[str, SettingState],
    live: bool,
) -> _Tally:
    tally = _Tally()
    for key in keys:
        row, state = settings.get(key), index.get(key)
        status = _shown_status(state, live) if row is not None or _damaged(state) else "pending"
        tally.shown[key] = status
        model = row["model_name"] if row is not None else "?"
        engine = _engine_label(row) if row is not None else "?"
        if status == PARTIAL and state is not None:
            tally.partial.append(
                {
                    "setting_key": key,
                    "generated_samples": state.generated_samples,
                    "total_samples": state.total_samples,
                }
            )
        if status == DAMAGED and state is not None:
            tally.damaged.append(
                {"setting_key": key, "label": label(row), "damage": list(state.damage)}
            )
        if status == "running" and state is not None:
            tally.active.append(_activity(key, row, state, model, engine))
        if status == SettingStatus.FAILED.value:
            tally.failed.append(_failure(key, row, model, engine))
        counts = tally.engines.setdefault((model, engine), no_counts(model, engine))
        counts[status] += 1  # type: ignore[literal-required]  # one of STATUSES
    return tally


def label(row: Mapping[str, Any] | None) -> str:
    """A setting in words: model, template, decoding, length limit, precision, backend (what
    `plan` shows), so a 12-character key can be used without `plan`."""
    if row is None:
        return "(settings row unreadable)"
    return (
        f"{row.get('model_name')} {row.get('template')} {row.get('decoding')} "
        f"L{row.get('max_length')} {row.get('precision')} {row.get('backend')}"
    )


def _damaged(state: SettingState | None) -> bool:
    return state is not None and bool(state.damage) and not state.complete


def _shown_run(
    run: dict[str, Any] | None, live: bool, index: Mapping[str, SettingState]
) -> ShownRun | None:
    if run is None:
        return None
    shown_run: ShownRun = {
        "run_id": run["run_id"],
        "started_at": run["started_at"],
        "finished_at": run["finished_at"],
        "status": run["status"],
        "n_generated": run["n_generated"],
        "n_executed": run["n_executed"],
        "faults": shown_faults(run.get("faults_json")),
    }
    if run["status"] == RunStatus.RUNNING.value:
        if not live:
            # Its process is gone without closing the record (SIGKILL): the next run marks it.
            shown_run["status"] = RunStatus.INTERRUPTED.value
        # the run writes its counts at the end: while it runs, count what the store holds
        mine = [index[k] for k in run["setting_keys"] if k in index]
        shown_run["n_generated"] = sum(s.complete or s.has_generations for s in mine)
        shown_run["n_executed"] = sum(s.complete for s in mine)
    return shown_run


def _select_run(runs: list[dict[str, Any]], run_id: str | None) -> dict[str, Any] | None:
    """The run asked for, or the latest one (None when the store has no runs)."""
    runs = sorted(runs, key=lambda r: r["started_at"])
    if run_id is None:
        return runs[-1] if runs else None
    run = next((r for r in runs if r["run_id"] == run_id), None)
    if run is None:
        raise ValueError(
            f"unknown run {run_id!r}; runs: {', '.join(r['run_id'] for r in runs) or 'none'}"
        )
    return run


def _shown_status(state: SettingState | None, writer_active: bool) -> str:
    if state is None:
        return SettingStatus.PENDING.value
    if state.complete:
        return SettingStatus.COMPLETE.value
    if state.damage:
        return DAMAGED
    if state.status in (SettingStatus.FAILED, SettingStatus.SKIPPED):
        return state.status.value
    if writer_active and state.status is SettingStatus.RUNNING:
        return SettingStatus.RUNNING.value  # generating or executing now
    if writer_active and state.status is SettingStatus.QUEUED:
        return SettingStatus.QUEUED.value
    if state.has_generations and not (state.has_executions and state.has_scores):
        return GENERATED
    if state.partially_generated:
        return PARTIAL
    return SettingStatus.PENDING.value  # not started, interrupted, or a result shard missing


def _activity(
    key: str, row: Mapping[str, Any] | None, state: SettingState, model: str, engine: str
) -> Activity:
    """What a running setting is doing: generating (samples stored so far) or executing."""
    doing = "executing" if state.has_generations else "generating"
    return {
        "setting_key": key,
        "model": model,
        "engine": engine,
        "doing": doing,
        "label": label(row),
        "generated_samples": state.generated_samples,
        "total_samples": state.total_samples,
    }


def _quarantined(store: Store, index: Mapping[str, SettingState]) -> list[Quarantined]:
    """Quarantine records of settings (runs and foreign files have none), newest per file. A
    damaged pack's record names the shards it lost (those of its intact row groups were given
    back): one entry per setting it lost."""
    out: list[Quarantined] = []
    for record in store.quarantine_records():
        keys: list[Any] = [record.get("setting_key")]
        if record.get("lost") is not None and record.get("table") not in RUN_TABLES:
            keys = sorted({setting_key_of(k) for k in record["lost"]})
        for key in keys:
            if not key:
                continue
            out.append(
                {
                    "setting_key": key,
                    "table": record.get("table"),
                    "file": record.get("file"),
                    "kind": record.get("kind"),
                    "detail": record.get("detail"),
                    "quarantined_at": record.get("quarantined_at"),
                    "moved_to": record.get("moved_to"),
                }
            )
    return out


def layout(store: Store) -> Layout:
    """How the store is laid out, from its manifest alone: packs and the shards they hold, and
    whether a compaction was cut short (the next writer finishes it)."""
    manifest = store.readable_manifest()
    return {
        "packs": len(manifest.packs),
        "packed_shards": sum(len(p.members) for p in manifest.packs),
        "interrupted_compaction": bool(manifest.retired),
    }


def _engine_label(row: dict[str, Any]) -> str:
    return f"{row['backend']}/{row['dtype']}/{row['quant']}"


def _failure(key: str, row: dict[str, Any] | None, model: str, engine: str) -> Failure:
    row = row or {}
    return {
        "setting_key": key,
        "model": model,
        "engine": engine,
        "error_type": row.get("error_type"),
        "error": row.get("status_reason"),
        "template": row.get("template"),
        "decoding": row.get("decoding"),
        "max_length": row.get("max_length"),
    }


def render_status(data: StatusReport, keys: bool = False) -> str:
    """The text of `status`; `keys` adds one line per setting (its 12-character key, status
    and label: enough for `export-generations --setting`)."""
    lines = [f"store {data['store']}"]
    shape = data.get("layout") or {}
    if shape.get("packs"):
        lines[0] += f" ({shape['packed_shards']} shards in {shape['packs']} packs)"
    if shape.get("interrupted_compaction"):
        lines.append(
            "a compaction was cut short: the next run (or `reprogrid compact`) finishes it; "
            "until then Parquet readers of the table folders may count some rows twice"
        )
    run = data["run"]
    if run:
        lines.append(
            f"latest run {run['run_id']} ({run['status']}): generated {run['n_generated']}, "
            f"executed {run['n_executed']}"
        )
        lines += [f"  {fault_line(fault)}" for fault in run["faults"]]
    header = ["model", "engine", *STATUSES]
    engines: list[Mapping[str, Any]] = list(data["engines"])
    rows = [[g["model"], g["engine"], *(str(g[s]) for s in STATUSES)] for g in engines]
    rows.append(["total", "", *(str(data["totals"].get(s, 0)) for s in STATUSES)])
    lines += _columns(header, rows) + _what_is_happening(data)
    if keys:
        lines.append("")
        lines += _columns(
            ["key", "status", "setting"],
            [[s["setting_key"][:12], s["status"], s["label"]] for s in data["settings"]],
        )
    return "\n".join(lines)


def _what_is_happening(data: StatusReport) -> list[str]:
    """The lines under the table: what runs now, what failed or was skipped and why, what is
    partly stored, damaged or quarantined."""
    lines = []
    for a in data.get("active", []):
        stored = (
            f" ({a['generated_samples']} of {a['total_samples']} samples stored)"
            if a["doing"] == "generating" and a["total_samples"]
            else ""
        )
        lines.append(
            f"{a['doing']} now: {a['model']} {a['engine']} {a['setting_key'][:12]} "
            f"{a['label']}{stored}"
        )
    for f in data["failed"]:
        lines.append(
            f"FAILED {f['model']} {f['engine']} {f['template']} {f['decoding']} "
            f"L{f['max_length']}: {f['error_type']}: {f['error']}"
        )
    reasons: dict[str | None, int] = defaultdict(int)
    for s in data["skipped"]:
        reasons[s["reason"]] += 1
    for reason, n in reasons.items():
        lines.append(f"skipped {n}: {reason}")
    for p in data["partial"]:
        lines.append(
            f"partial {p['setting_key'][:12]}: {p['generated_samples']} of "
            f"{p['total_samples']} samples generated (the next run resumes it)"
        )
    for d in data.get("damaged", []):
        lines.append(f"DAMAGED {d['setting_key'][:12]} {d['label']}: {'; '.join(d['damage'])}")
    if data.get("damaged"):
        lines.append(f"  {WAY_OUT}")
    for q in data.get("quarantined", []):
        lines.append(
            f"quarantined {q['setting_key'][:12]}: {q['table']}/{q['file']} ({q['kind']}) on "
            f"{str(q['quarantined_at'])[:19]} -> {q['moved_to']}; the next run redoes it"
        )
    return lines


def _columns(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return out
