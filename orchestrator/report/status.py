"""`status`: per model and engine, how many settings are complete, running, generated (waiting
for execution), partly generated (some chunks stored), failed, skipped or pending."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from storage.index import SettingState, build_index
from storage.schema import RunStatus, SettingStatus
from storage.store import Store

# The columns of `status`: a setting's stored status, refined by what the store holds.
GENERATED = "generated"  # every generation stored, not executed yet
PARTIAL = "partial"  # some chunks of its generations stored (a run stopped between chunks)
STATUSES = ["complete", "running", GENERATED, PARTIAL, "failed", "skipped", "pending"]


def store_status(store: Store, run_id: str | None = None) -> dict[str, Any]:
    """Status of the settings of one run's grid (default: the latest run) and of every other
    setting in the store. `running` rows whose writer is gone are shown as `pending`
    (interrupted; the next run resumes them)."""
    run = _select_run(store.read_table("runs").to_pylist(), run_id)
    index = build_index(store)
    settings = {r["setting_key"]: r for r in store.read_table("settings").to_pylist()}
    keys = list(run["setting_keys"]) if run else []
    keys += sorted(k for k in settings if k not in set(keys))
    live = store.writer_active()
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    failures, partial, shown = [], [], {}
    for key in keys:
        row, state = settings.get(key), index.get(key)
        status = _shown_status(state, live) if row is not None else SettingStatus.PENDING.value
        shown[key] = status
        if status == PARTIAL and state is not None:
            partial.append(
                {
                    "setting_key": key,
                    "generated_samples": state.generated_samples,
                    "total_samples": state.total_samples,
                }
            )
        model = row["model_name"] if row is not None and state is not None else "?"
        engine = _engine_label(row) if row is not None and state is not None else "?"
        if status == SettingStatus.FAILED.value:
            failures.append(_failure(key, row, model, engine))
        group = groups.setdefault(
            (model, engine), {"model": model, "engine": engine, **{s: 0 for s in STATUSES}}
        )
        group[status] += 1
    totals: dict[str, int] = defaultdict(int)
    for g in groups.values():
        for s in STATUSES:
            totals[s] += g[s]
    run_fields = ("run_id", "started_at", "finished_at", "status", "n_generated", "n_executed")
    shown_run = {k: run[k] for k in run_fields} if run else None
    if run is not None and shown_run is not None and run["status"] == RunStatus.RUNNING.value:
        if not live:
            # Its process is gone without closing the record (SIGKILL): the next run marks it.
            shown_run["status"] = RunStatus.INTERRUPTED.value
        # the run writes its counts at the end: while it runs, count what the store holds
        mine = [shown.get(k) for k in run["setting_keys"]]
        shown_run["n_generated"] = sum(s in ("complete", GENERATED) for s in mine)
        shown_run["n_executed"] = sum(s == "complete" for s in mine)
    return {
        "store": store.uri,
        "run": shown_run,
        "writer_active": live,
        "totals": dict(totals),
        "engines": sorted(groups.values(), key=lambda g: (g["model"], g["engine"])),
        "failed": failures,
        "partial": partial,
        "settings": [{"setting_key": k, "status": shown[k]} for k in keys],
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
    if state.status in (SettingStatus.FAILED, SettingStatus.SKIPPED):
        return state.status.value
    if state.has_generations and not (state.has_executions and state.has_scores):
        return GENERATED
    if state.partially_generated:
        return PARTIAL
    if state.status is SettingStatus.RUNNING and writer_active:
        return SettingStatus.RUNNING.value
    return SettingStatus.PENDING.value  # not started, interrupted, or a result shard missing


def _engine_label(row: dict[str, Any]) -> str:
    return f"{row['backend']}/{row['dtype']}/{row['quant']}"


def _failure(key: str, row: dict[str, Any] | None, model: str, engine: str) -> dict[str, Any]:
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


def render_status(data: dict[str, Any], keys: bool = False) -> str:
    """The text of `status`; `keys` adds one line per setting (its full key and status)."""
    lines = [f"store {data['store']}"]
    run = data["run"]
    if run:
        lines.append(
            f"latest run {run['run_id']} ({run['status']}): generated {run['n_generated']}, "
            f"executed {run['n_executed']}"
        )
    header = ["model", "engine", *STATUSES]
    rows = [[g["model"], g["engine"], *(str(g[s]) for s in STATUSES)] for g in data["engines"]]
    rows.append(["total", "", *(str(data["totals"].get(s, 0)) for s in STATUSES)])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    for f in data["failed"]:
        lines.append(
            f"FAILED {f['model']} {f['engine']} {f['template']} {f['decoding']} "
            f"L{f['max_length']}: {f['error_type']}: {f['error']}"
        )
    reasons: dict[str, int] = defaultdict(int)
    for s in data["skipped"]:
        reasons[s["reason"]] += 1
    for reason, n in reasons.items():
        lines.append(f"skipped {n}: {reason}")
    for p in data["partial"]:
        lines.append(
            f"partial {p['setting_key'][:12]}: {p['generated_samples']} of "
            f"{p['total_samples']} samples generated (the next run resumes it)"
        )
    if keys:
        lines.append("")
        lines += [f"{s['setting_key']}  {s['status']}" for s in data["settings"]]
    return "\n".join(lines)
