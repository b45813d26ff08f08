"""`plan` output: every setting with its key and action, grouped by engine, with estimates."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from orchestrator.grid import precision_label
from orchestrator.plan import Action, Plan
from orchestrator.progress import format_duration
from storage.store import Store
from workers.keys import engine_key


def measured_throughput(store: Store) -> dict[tuple[str, str], dict[str, float]]:
    """Samples/s and engine load time per (model repo id, backend), from completed settings."""
    acc: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    settings = store.read_table("settings").to_pylist()
    gens = {r["setting_key"]: r for r in store.read_table("scores").to_pylist()}
    for row in settings:
        if row["status"] != "complete" or not row.get("generation_s"):
            continue
        score = gens.get(row["setting_key"])
        if score is None:
            continue
        a = acc[(row["model_repo_id"], row["backend"])]
        a["samples"] += score["n_problems"] * score["n_samples"]
        a["seconds"] += row["generation_s"]
        a["load_s"] += row.get("engine_load_s") or 0.0
        a["n"] += 1
    return {
        k: {"samples_per_s": v["samples"] / v["seconds"], "load_s": v["load_s"] / v["n"]}
        for k, v in acc.items()
        if v["seconds"] > 0
    }


def plan_json(plan: Plan, prepared, store: Store) -> dict[str, Any]:
    n_problems = prepared.benchmark.n_problems
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


def render_plan(data: dict[str, Any]) -> str:
    c = data["counts"]
    lines = [
        f"{data['n_settings']} settings ({data['n_keys']} distinct keys): {c['done']} done, "
        f"{c['generate']} to generate, {c['execute']} to execute only, {c['skip']} skipped, "
        f"{c['failed']} failed earlier (re-run with --retry-failed)",
        f"engine loads: {data['engine_loads']}; generations: {data['generations']} samples "
        f"({data['n_problems']} problems)",
    ]
    if data["estimated_s"] is not None:
        lines.append(
            f"estimated run time: {format_duration(data['estimated_s'])} (measured throughput)"
        )
    elif data.get("estimate_partial_s"):
        lines.append(f"estimated run time: >= {format_duration(data['estimate_partial_s'])} "
                     "(no measured throughput for some engines)")  # fmt: skip
    else:
        lines.append("estimated run time: unknown (no measured throughput in the store yet)")
    for g in data["engines"]:
        est = f", ~{format_duration(g['estimated_s'])}" if g["estimated_s"] else ""
        lines.append(f"\nengine {g['model']} {g['backend']} {g['dtype']}/{g['quant']} "
                     f"({g['num_gpus']} GPU){est}")  # fmt: skip
        for s in g["settings"]:
            why = f"  ({s['reason']})" if s["reason"] else ""
            lines.append(
                f"  {s['setting_key'][:12]}  {s['action']:8s} {s['template']:12s} "
                f"{s['decoding']:7s} L{s['max_length']:<5d} {s['precision']}{why}"
            )
    return "\n".join(lines)
