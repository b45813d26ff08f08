"""`plan` as text: the data of orchestrator.run.estimate.estimator.plan_json, formatted."""

from __future__ import annotations

from typing import Any

from orchestrator.analysis.cost import format_duration

BASIS_TEXT = {"measured": "measured", "model": "estimate (model)"}
# orchestrator.run.preflight.weights.AVAILABLE as values (the report wing does not import the
# run wing)
AVAILABLE_WEIGHTS = ("built offline", "present locally", "in the HF cache", "downloadable")
# How orchestrator.run.plan.planner.damage_reason begins the reason of a setting with a damaged
# file (tests/unit/orchestrator/report/screens/test_planview.py checks it through `reprogrid plan`)
DAMAGED = "damaged: "


def _basis(value: str | None, engines: list[dict[str, Any]]) -> str:
    if value != "mixed":
        return BASIS_TEXT.get(value or "", "nothing to generate")
    n = sum(1 for g in engines if g["basis"] == "measured")
    m = sum(1 for g in engines if g["basis"] == "model")
    return f"measured for {n} engine(s), estimate (model) for {m}"


def _estimate_lines(data: dict[str, Any]) -> list[str]:
    """The headline: the GPU figures first (GPU-hours, the wall time on the cluster), then
    the model's assumptions, then this machine's own time, labelled as such."""
    est = data["estimate"]
    if data["estimate_basis"] is None:
        return ["GPU-hours: 0 (nothing to generate)"]
    c = data.get("cluster")
    replicas = f", cluster.replicas={c['replicas']}" if c else ""
    gpu = f"{est['gpu']}, {est['gpu_bandwidth_gbps']:g} GB/s: {est['gpu_source']}"
    return [
        f"GPU-hours: {data['estimated_gpu_hours']:.1f} on {est['gpu']}{replicas} "
        f"({_basis(data['estimate_basis'], data['engines'])})",
        *_cluster_lines(data),
        f"  the model: GPU {gpu}; output prior {est['output_tokens_prior']} tokens/sample; "
        "docs/cost.md",
        f"{_here(data['engines'], est['gpu'])}, one engine at a time: "
        f"{format_duration(data['estimated_s'])}",
    ]


def _here(engines: list[dict[str, Any]], gpu: str) -> str:
    """Where `estimated_s` is: the devices of this machine the engines run on, or one of the
    estimate's GPU where none runs here (a remote cluster, or engines that cannot be placed)."""
    here = sorted({g["device"] for g in engines if g.get("placement") in ("cpu", "gpu")})
    return f"on this machine ({', '.join(here)})" if here else f"on one {gpu}"


def _cluster_lines(data: dict[str, Any]) -> list[str]:
    """The wall time on the cluster the plan is sized for (orchestrator/run/estimate/sizing.py),
    and the replicas that would shorten it."""
    c = data.get("cluster")
    if not c:
        return []
    if c["makespan_s"] is None:
        longest = format_duration(c["longest_unit_s"])
        return [f"wall time: not sized ({c['gpus_source']}); the longest unit {longest}"]
    on = f"wall time on {c['gpus']} GPU(s) ({c['gpus_source']}):"
    left_out = len(c["unplaceable"])
    sized = sum(1 for g in data["engines"] if g.get("cluster_s") is not None)
    if left_out and left_out >= sized:
        return [f"{on} none: every engine needs more GPUs than that (BLOCKING below)"]
    bound = format_duration(c["lower_bound_s"])
    lines = [
        f"{on} {format_duration(c['makespan_s'])} (lower bound {bound}: the work over the "
        "GPUs, or a unit's load and its longest harness-seeded setting)"
    ]
    if left_out:
        lines.append(f"  without {left_out} engine(s) that need more GPUs (BLOCKING below)")
    if c.get("instances") is not None and c["instances"] > sized:
        lines.append(
            f"  {c['instances']} engine instances for {sized} engines: long units run on "
            'several GPUs at the end (docs/cost.md, "Replicas and the cluster")'
        )
    hint = c.get("replicas_hint")
    if hint:
        lines.append(
            f"  cluster.replicas={hint['replicas']} would shorten it to "
            f"{format_duration(hint['makespan_s'])} ({hint['gpu_hours']:.1f} GPU-hours; "
            'docs/cost.md, "Replicas and the cluster")'
        )
    more = c.get("more_gpus") or []
    if more:
        shown = ", ".join(
            f"{m['gpus']}: {format_duration(m['makespan_s'])} ({m['gpu_hours']:.1f} GPU-hours)"
            for m in more
        )
        lines.append(f"  more GPUs (cluster.gpus=N) would shorten it to {shown}")
    return lines + _fast_path_lines(data.get("fast_path"))


def _fast_path_lines(fast: dict[str, Any] | None) -> list[str]:
    """The same grid on the fast path (another backend and seeding: other outputs), sized on
    the same cluster, when the grid is not that path already."""
    if not fast:
        return []
    if "error" in fast:
        return [f"  the fast path ({' '.join(fast['overrides'])}): not sized ({fast['error']})"]
    skipped = f", {fast['skipped']} setting(s) skipped" if fast["skipped"] else ""
    wall = fast["makespan_s"]
    on = f"{format_duration(wall)} on {fast['gpus']} GPU(s)" if wall is not None else "not sized"
    return [
        f"  the fast path ({' '.join(fast['overrides'])}): {on}, {fast['gpu_hours']:.1f} "
        f"GPU-hours{skipped} (its sampled outputs are not the harness's)"
    ]


def _preflight_lines(pre: dict[str, Any] | None) -> list[str]:
    if pre is None:
        return []
    gpus = pre["gpus"]
    count = "unknown until Ray connects" if gpus["count"] is None else str(gpus["count"])
    names = f" ({', '.join(sorted(set(gpus['names'])))})" if gpus["names"] else ""
    lines = [f"GPUs here: {count}{names} [{gpus['source']}]"]
    cluster = pre["cluster"]
    if cluster["address"]:
        state = {True: "reachable", False: "UNREACHABLE", None: "not probed"}
        lines.append(f"cluster {cluster['address']}: {state[cluster['reachable']]}")
    if pre.get("weights_checked") is False:
        lines.append("weights: not checked (--estimate-only: nothing was asked of the Hub)")
    # Weights that are available; the others are listed with the problems below.
    for w in pre["weights"]:
        if w["status"] in AVAILABLE_WEIGHTS:
            lines.append(f"weights {w['model']}: {w['status']} ({w['detail']})")
    for severity, title in (("blocking", "BLOCKING"), ("warning", "warning")):
        found = [p for p in pre["problems"] if p["severity"] == severity]
        if found:
            lines.append(f"{title} ({len(found)}):")
            lines += [f"  {p['kind']}: {p['message']}" for p in found]
    return lines


def _engine_header(g: dict[str, Any]) -> str:
    where = g["placement_reason"] or f"needs {g['num_gpus']} GPU(s)"
    replicas = f", {g['replicas']} replicas" if g.get("replicas", 1) > 1 else ""
    head = f"\nengine {g['model']} {g['backend']} {g['dtype']}/{g['quant']} ({where}{replicas})"
    if g["estimated_s"] is None:
        return head
    # The GPU figures first, as in the headline; then this machine's time, labelled.
    parts = []
    if g["estimated_gpu_hours"]:
        parts.append(f"{g['estimated_gpu_hours']:.1f} GPU-h")
        if g.get("cluster_s") is not None:
            gain = f", x{g['replica_gain']:.1f}" if g["replicas_running"] > 1 else ""
            parts.append(
                f"on the cluster {format_duration(g['cluster_s'])} with "
                f"{g['replicas_running']} replica(s){gain}{_instances(g)}"
            )
    here = "on this machine " if g.get("placement") in ("cpu", "gpu") else ""
    parts.append(f"{here}~{format_duration(g['estimated_s'])} on {g['device']}")
    basis = BASIS_TEXT.get(g["basis"], g["basis"])
    return f"{head} {'; '.join(parts)} [{basis}]"


def _placement_lines(notes: list[dict[str, Any]]) -> list[str]:
    """backend=auto: the settings a higher-ranked backend cannot run, where they went, why."""
    return [
        f"placement: {n['n_settings']} setting(s) on {n['placed_on']}, not {n['instead_of']}: "
        f"{n['reason']}"
        for n in notes
    ]


def _instances(g: dict[str, Any]) -> str:
    """A unit the cluster's schedule runs on several engine instances, and when."""
    if (g.get("instances") or 1) <= 1:
        return ""
    start, end = format_duration(g["start_s"]), format_duration(g["end_s"])
    return f" (one instance); {g['instances']} instances from {start} to {end}"


def _is_damaged(s: dict[str, Any]) -> bool:
    return str(s.get("reason") or "").startswith(DAMAGED)


def _setting_line(s: dict[str, Any]) -> str:
    """One setting: what is done with it, its axes, its samples, why. A damaged setting reads
    `redo`: its stored samples were counted before the checks, and `run` first quarantines the
    damaged file (a settings record, a chunk), then generates what the intact files lack and
    executes again; "generate 10/10 samples" said both that all was there and that it was not."""
    notes = [n for n in (s["reason"], s.get("note")) if n]
    why = f"  ({'; '.join(notes)})" if notes else ""
    samples = f"{s['generated_samples']}/{s['total_samples']} samples"
    action = s["action"]
    if _is_damaged(s):
        action, samples = "redo", f"{samples} stored, rechecked by the run"
    return (
        f"  {s['setting_key'][:12]}  {action:8s} {s['template']:12s} "
        f"{s['decoding']:7s} L{s['max_length']:<5d} {s['precision']:5s} {samples}{why}"
    )


def render_plan(data: dict[str, Any]) -> str:
    c = data["counts"]
    damaged = sum(_is_damaged(s) for g in data["engines"] for s in g["settings"])
    redo = f" (of these, {damaged} damaged: redo, below)" if damaged else ""
    lines = [
        f"{data['n_settings']} settings ({data['n_keys']} distinct keys): {c['done']} done, "
        f"{c['generate']} to generate, {c['execute']} to execute only{redo}, {c['skip']} "
        f"skipped, {c['failed']} failed earlier (re-run with --retry-failed)",
        f"engine loads: {data['engine_loads']}; generations: {data['generations']} samples "
        f"({data['n_problems']} problems)",
        *_estimate_lines(data),
        *_preflight_lines(data.get("preflight")),
        *(f"warning: {w}" for w in data.get("warnings", [])),
        *_placement_lines(data.get("placement") or []),
    ]
    for g in data["engines"]:
        lines.append(_engine_header(g))
        lines += [_setting_line(s) for s in g["settings"]]
    return "\n".join(lines)
