"""`repeat-check`: re-generates the first N problems of finished settings through their own
backend, in this process and outside the store (nothing is written), and reports the share of
samples whose program changed (the flip rate), per setting and per backend."""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from orchestrator.analysis.agreement import flips, per_backend
from orchestrator.report.compare import complete_rows, sample_rows, setting_label
from storage.store import Store

logger = logging.getLogger(__name__)


class CompareError(ValueError):
    """A setting to check is unknown, ambiguous or not complete."""


# -- pure core -------------------------------------------------------------------------------


def resolve_keys(store: Store, wanted: Sequence[str]) -> list[dict[str, Any]]:
    """Settings rows for full keys or unique prefixes; each must be complete."""
    rows = {r["setting_key"]: r for r in complete_rows(store)}
    every = {r["setting_key"] for r in store.read_table("settings").to_pylist()}
    out = []
    for prefix in wanted:
        hits = [k for k in every if k.startswith(prefix)]
        if len(hits) != 1:
            what = "matches no setting" if not hits else f"is ambiguous ({len(hits)} settings)"
            raise CompareError(f"setting {prefix!r} {what} in store {store.uri}")
        if hits[0] not in rows:
            raise CompareError(f"setting {hits[0][:12]} is not complete in store {store.uri}")
        out.append(rows[hits[0]])
    return out


def _run_overrides(store: Store, key: str) -> list[str]:
    """The overrides of the latest run whose grid contains `key`."""
    runs = sorted(store.read_table("runs").to_pylist(), key=lambda r: r["started_at"])
    for run in reversed(runs):
        if key in (run.get("setting_keys") or []):
            return [
                o for o in json.loads(run["overrides_json"] or "[]") if not o.startswith("store=")
            ]
    raise CompareError(f"no run in {store.uri} lists setting {key[:12]}; pass its overrides")


def _find_settings(store: Store, keys: Sequence[str], overrides: Sequence[str] | None):
    """(prepared benchmark, {key: SettingSpec}) by re-expanding the grids that produced them."""
    from orchestrator.run.config import load_run_config
    from orchestrator.run.runner import prepare

    found, benchmark = {}, None
    for key in keys:
        args = list(overrides) if overrides else _run_overrides(store, key)
        prepared = prepare(load_run_config([*args, f"store={store.uri}"]))
        # a cell's aliases too: a store written when local folders were keyed by their path
        cells = {c.key: c for cell in prepared.cells for c in (cell, *cell.aliases)}
        if key not in cells:
            raise CompareError(
                f"setting {key[:12]} is not a cell of the grid of overrides {args}; the data, "
                "the model revision or the code that makes keys changed since it was stored"
            )
        found[key], benchmark = cells[key].setting, prepared.benchmark
    return benchmark, found


def repeat_check(
    store: Store, wanted: Sequence[str], n_problems: int, overrides: Sequence[str] | None = None
) -> dict[str, Any]:
    """Re-generate the first `n_problems` problems of each setting with its own backend, in
    this process (one engine load per engine, the settings of an engine in one session run, as
    a unit is run), and compare with the stored samples. Writes nothing."""
    from orchestrator.run.plan import unit_engine
    from workers.keys import engine_key
    from workers.session import EngineSession

    if n_problems < 1:
        raise CompareError(f"-n must be >= 1, got {n_problems}")
    rows = resolve_keys(store, wanted)
    keys = [r["setting_key"] for r in rows]
    benchmark, settings = _find_settings(store, keys, overrides)
    stored = sample_rows(store, keys)
    by_engine: dict[str, list[str]] = defaultdict(list)
    for key in keys:
        by_engine[engine_key(settings[key].engine)].append(key)
    results = []
    for members in by_engine.values():
        items = []
        for key in members:
            s = settings[key]
            limit = min(n_problems, s.benchmark.limit or n_problems)
            # The original key is passed along: per-sample seeds derive from it.
            items.append((key, replace(s, benchmark=replace(s.benchmark, limit=limit))))
        engine = unit_engine(settings[members[0]].engine, [s for _, s in items])
        session = EngineSession(engine, {benchmark.name: benchmark})
        try:
            outcomes = session.run_settings(items)
        finally:
            session.close()
        for (key, _), outcome in zip(items, outcomes, strict=True):
            if not hasattr(outcome, "samples"):
                raise CompareError(
                    f"re-generating {key[:12]} failed: {outcome.error_type}: "
                    f"{outcome.error_message}"
                )
            fresh = {
                (s.task_id, s.sample_index): {
                    "program": s.program,
                    "continuation": s.continuation,
                    "output_token_ids": list(s.output_token_ids),
                }
                for s in outcome.samples
            }
            old = {
                k: {
                    "program": v["program"],
                    "continuation": v["continuation"],
                    "output_token_ids": list(v["output_token_ids"] or []),
                }
                for k, v in stored[key].items()
                if k in fresh
            }
            row = next(r for r in rows if r["setting_key"] == key)
            results.append(
                {
                    "setting_key": key,
                    "backend": row["backend"],
                    **setting_label(row),
                    **flips(old, fresh),
                }
            )
    return {"n_problems": n_problems, "settings": results, "per_backend": per_backend(results)}


def render_repeat_check(data: Mapping[str, Any]) -> str:
    lines = [
        f"re-generated the first {data['n_problems']} problem(s) of each setting "
        "(nothing written to the store)"
    ]
    for r in data["settings"]:
        rate = "-" if r["flip_rate"] is None else f"{100 * r['flip_rate']:.1f}%"
        lines.append(
            f"{r['setting_key'][:12]} {r['backend']:5s} {r['precision']} {r['template']} "
            f"{r['decoding']} L{r['max_length']}: {r['n_flipped']}/{r['n_samples']} programs "
            f"changed (flip rate {rate}); continuations changed {r['n_continuation_changed']}, "
            f"token ids changed {r['n_tokens_changed']}"
            + (f"; tasks: {', '.join(r['flipped_tasks'])}" if r["flipped_tasks"] else "")
        )
    for backend, t in sorted(data["per_backend"].items()):
        rate = "-" if t["flip_rate"] is None else f"{100 * t['flip_rate']:.1f}%"
        lines.append(
            f"{backend}: flip rate {rate} ({t['n_flipped']}/{t['n_samples']} samples, "
            f"{t['n_settings']} setting(s))"
        )
    return "\n".join(lines)
