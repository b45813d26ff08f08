"""`repeat-check`: re-generates the first N problems of finished settings through their own
backend, in this process, runs the programs that changed, and reports per setting and per
backend the share of samples whose program changed (the flip rate) and how far the outcomes
moved. The result is recorded in the store (`repeat_checks`, through the driver's writer, under
the writer lock taken only for that write): the report's paired tests use it as the noise floor
(orchestrator/analysis/noise.py)."""

from __future__ import annotations

import json
import logging
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from orchestrator.analysis.agreement import flips, per_backend
from orchestrator.analysis.noise import noise_floors, outcome_changes
from orchestrator.report.screens.compare import complete_rows, sample_rows, setting_label
from orchestrator.run.api import RunFacts, RunRecord, load_run_config, prepare, unit_engine
from storage.store import Store
from workers.execspec import Outcome

logger = logging.getLogger(__name__)


class CompareError(ValueError):
    """A setting to check is unknown, ambiguous or not complete."""


@dataclass(frozen=True)
class Found:
    """What re-generating needs: the benchmark, each setting's spec, the run's sandbox."""

    benchmark: Any  # a loaded workers Benchmark
    settings: dict[str, Any]  # key -> SettingSpec
    limits: Any  # SandboxLimits
    exec_workers: int | None


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
        if key in (run.get("setting_keys") or []) and run.get("command") != "repeat-check":
            return [
                o for o in json.loads(run["overrides_json"] or "[]") if not o.startswith("store=")
            ]
    raise CompareError(f"no run in {store.uri} lists setting {key[:12]}; pass its overrides")


def _find_settings(store: Store, keys: Sequence[str], overrides: Sequence[str] | None) -> Found:
    """The settings' specs, by re-expanding the grids that produced them."""
    found: dict[str, Any] = {}
    prepared = None
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
        found[key] = cells[key].setting
    assert prepared is not None, "resolve_keys returned at least one setting"
    config = prepared.config
    return Found(prepared.benchmark, found, config.limits, config.exec_workers)


def _score(row: Mapping[str, Any]) -> float:
    """A stored execution's score: the graded score, else pass/fail (no score: 0, as the
    benchmarks count it)."""
    value = row.get("score")
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return float(bool(row.get("passed")))
    return float(value)


def _stored_scores(store: Store, key: str) -> dict[tuple[str, int], float]:
    rows = store.read_table("executions", [key]).to_pylist()
    return {(r["task_id"], int(r["sample_index"])): _score(r) for r in rows}


def _regenerate(found: Found, n_problems: int, keys: Sequence[str]) -> dict[str, Any]:
    """Re-generate the first `n_problems` problems of each setting with its own backend, in
    this process (one engine load per engine, the settings of an engine in one session run, as
    a unit is run): key -> its fresh SampleRecords."""
    from workers.keys import engine_key
    from workers.session import EngineSession

    by_engine: dict[str, list[str]] = defaultdict(list)
    for key in keys:
        by_engine[engine_key(found.settings[key].engine)].append(key)
    out = {}
    for members in by_engine.values():
        items = []
        for key in members:
            s = found.settings[key]
            limit = min(n_problems, s.benchmark.limit or n_problems)
            # The original key is passed along: per-sample seeds derive from it.
            items.append((key, replace(s, benchmark=replace(s.benchmark, limit=limit))))
        engine = unit_engine(found.settings[members[0]].engine, [s for _, s in items])
        session = EngineSession(engine, {found.benchmark.name: found.benchmark})
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
            out[key] = outcome.samples
    return out


def _check(store: Store, found: Found, row: Mapping[str, Any], samples, stored) -> dict:
    """One setting's result: program flips, and the outcomes of the changed programs."""
    key = row["setting_key"]
    fresh = {
        (s.task_id, s.sample_index): {
            "program": s.program,
            "continuation": s.continuation,
            "output_token_ids": list(s.output_token_ids),
        }
        for s in samples
    }
    old = {
        k: {
            "program": v["program"],
            "continuation": v["continuation"],
            "output_token_ids": list(v["output_token_ids"] or []),
        }
        for k, v in stored.items()
        if k in fresh
    }
    changed = [
        s
        for s in samples
        if (s.task_id, s.sample_index) in old
        and s.program != old[(s.task_id, s.sample_index)]["program"]
    ]
    scores = {k: v for k, v in _stored_scores(store, key).items() if k in old}
    repeated = dict(scores)
    if changed:  # an unchanged program has the stored outcome: only the changed ones run
        records = found.benchmark.execute(changed, found.limits, workers=found.exec_workers)
        repeated.update(
            {
                (r.task_id, r.sample_index): _score(
                    {"score": r.score, "passed": r.outcome is Outcome.PASSED}
                )
                for r in records
            }
        )
    return {
        "setting_key": key,
        "backend": row["backend"],
        **setting_label(row),
        **flips(old, fresh),
        "n_executed": len(changed),
        **outcome_changes(scores, repeated),
    }


def repeat_check(
    store: Store,
    wanted: Sequence[str],
    n_problems: int,
    overrides: Sequence[str] | None = None,
    wait_lock_s: float = 0.0,
) -> dict[str, Any]:
    """Re-generate the first `n_problems` problems of each setting, compare with the stored
    samples, execute the changed programs, and record the result in the store."""
    if n_problems < 1:
        raise CompareError(f"-n must be >= 1, got {n_problems}")
    rows = resolve_keys(store, wanted)
    keys = [r["setting_key"] for r in rows]
    found = _find_settings(store, keys, overrides)
    stored = sample_rows(store, keys)
    fresh = _regenerate(found, n_problems, keys)
    results = [
        _check(store, found, r, fresh[r["setting_key"]], stored[r["setting_key"]]) for r in rows
    ]
    run_id = record(store, results, overrides, wait_lock_s)
    return {
        "run_id": run_id,
        "n_problems": n_problems,
        "settings": results,
        "per_backend": per_backend(results),
        "noise_pp": {b: f.noise_pp for b, f in noise_floors(_rows(run_id, results)).items()},
    }


def _rows(run_id: str, results: Sequence[Mapping[str, Any]], now=None) -> list[dict[str, Any]]:
    columns = (
        "setting_key backend model_name n_problems n_samples n_continuation_changed "
        "n_tokens_changed n_executed n_outcome_changed outcome_change_sum stored_score "
        "repeated_score"
    ).split()
    return [
        {"run_id": run_id, "checked_at": now, "n_program_changed": r["n_flipped"]}
        | {c: r[c] for c in columns}
        for r in results
    ]


def record(
    store: Store,
    results: Sequence[Mapping[str, Any]],
    overrides: Sequence[str] | None,
    wait_lock_s: float = 0.0,
) -> str:
    """Write the check's rows and its runs row through the driver's writer; returns its run id."""
    facts = RunFacts(command="repeat-check", overrides=tuple(overrides or ()), data_sources={})
    keys = [r["setting_key"] for r in results]
    with store.writer_lock(wait_s=wait_lock_s), RunRecord(store, facts, keys) as run:
        run.writer.repeat_checked(_rows(run.run_id, results, run.started_at))
    return run.run_id


def render_repeat_check(data: Mapping[str, Any]) -> str:
    lines = [
        f"re-generated the first {data['n_problems']} problem(s) of each setting "
        f"(recorded in the store as repeat-check {data['run_id']})"
    ]
    for r in data["settings"]:
        rate = "-" if r["flip_rate"] is None else f"{100 * r['flip_rate']:.1f}%"
        lines.append(
            f"{r['setting_key'][:12]} {r['backend']:5s} {r['precision']} {r['template']} "
            f"{r['decoding']} L{r['max_length']}: {r['n_flipped']}/{r['n_samples']} programs "
            f"changed (flip rate {rate}); continuations changed {r['n_continuation_changed']}, "
            f"token ids changed {r['n_tokens_changed']}; outcomes changed "
            f"{r['n_outcome_changed']} ({r['n_executed']} changed program(s) run)"
            + (f"; tasks: {', '.join(r['flipped_tasks'])}" if r["flipped_tasks"] else "")
        )
    for backend, t in sorted(data["per_backend"].items()):
        rate = "-" if t["flip_rate"] is None else f"{100 * t['flip_rate']:.1f}%"
        noise = data["noise_pp"].get(backend)
        lines.append(
            f"{backend}: flip rate {rate} ({t['n_flipped']}/{t['n_samples']} samples, "
            f"{t['n_settings']} setting(s)); noise floor "
            + ("-" if noise is None else f"{noise:.2f} points")
        )
    return "\n".join(lines)
