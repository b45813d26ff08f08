"""`plan` as text: the data of orchestrator.run.estimate.plan_json, formatted."""

from __future__ import annotations

from typing import Any

from orchestrator.analysis.cost import format_duration


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
