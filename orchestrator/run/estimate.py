"""The plan as data: every setting with its key and action, grouped by engine, with an
estimated run time from the throughput the store has measured (`plan --json`)."""

from __future__ import annotations

from typing import Any

from orchestrator.analysis.cost import throughput
from orchestrator.run.plan import Action, Plan
from orchestrator.run.runner import PreparedGrid
from storage.store import Store
from workers.keys import engine_key
from workers.spec import precision_label


def measured_throughput(store: Store) -> dict[tuple[str, str], dict[str, float]]:
    """Samples/s and engine load time per (model repo id, backend), from completed settings."""
    settings = store.read_table("settings").to_pylist()
    scores = {r["setting_key"]: r for r in store.read_table("scores").to_pylist()}
    return throughput(settings, scores)


def plan_json(plan: Plan, prepared: PreparedGrid, store: Store) -> dict[str, Any]:
    n_problems = prepared.n_problems
    rates = measured_throughput(store)
    engines: dict[str, dict[str, Any]] = {}
    for item in plan.settings:
        s = item.setting
        e = s.engine
        ekey = engine_key(e)
        group = engines.setdefault(ekey, {
            "engine_key": ekey, "model": e.model.name, "backend": e.backend.value,
            "dtype": e.dtype.value, "quant": e.quant.value, "num_gpus": e.model.num_gpus,
            "settings": [], "estimated_s": None,
        })  # fmt: skip
        group["settings"].append({
            "setting_key": item.key, "action": item.action.value, "reason": item.reason,
            "template": s.template, "decoding": s.decoding.name, "max_length": s.max_length,
            "precision": precision_label(e.dtype, e.quant), "variant": s.benchmark.variant,
            "n_samples": s.n_samples, "seed": s.seed, "seed_policy": s.seed_policy.value,
        })  # fmt: skip
    total_est = 0.0
    have_all = True
    for group in engines.values():
        to_gen = [x for x in group["settings"] if x["action"] == Action.GENERATE.value]
        if not to_gen:
            continue
        rate = rates.get(
            (
                next(
                    i.setting.engine.model.repo_id
                    for i in plan.settings
                    if i.key == to_gen[0]["setting_key"]
                ),
                group["backend"],
            )
        )
        if rate is None:
            have_all = False
            continue
        samples = sum(x["n_samples"] * n_problems for x in to_gen)
        group["estimated_s"] = rate["load_s"] + samples / rate["samples_per_s"]
        total_est += group["estimated_s"]
    counts = {a.value: len(plan.by_action(a)) for a in Action}
    return {
        "n_settings": len(plan.settings),
        "n_keys": len({i.key for i in plan.settings}),
        "counts": counts,
        "engine_loads": plan.n_engine_loads,
        "generations": plan.n_generations(n_problems),
        "n_problems": n_problems,
        "estimated_s": total_est if (have_all and plan.units) else None,
        "estimate_partial_s": total_est if (not have_all and total_est) else None,
        "engines": list(engines.values()),
    }
