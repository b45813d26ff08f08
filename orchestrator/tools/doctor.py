"""`doctor`: what this machine can run (backends, GPUs, sandbox isolation, InfiBench
toolchains) and, given a grid (`reprogrid doctor KEY=VALUE...`), whether that grid can start
here: its models' weights, the GPUs its engines need, and the cluster address."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any

from orchestrator.run.api import detect_gpus, library_versions, load_run_config, preflight, prepare


def doctor_report(overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The machine's capabilities; with overrides, also `grid` (see grid_checks)."""
    versions = library_versions()
    from workers.backends.registry import backend_definitions

    backends = {d.name: d.installed() for d in backend_definitions()}
    # what an installed backend's library lacks of what some settings need (vLLM without
    # bitsandbytes): those settings are skipped on it, and backend=auto places them elsewhere
    lacking = {d.name: d.missing_here() for d in backend_definitions() if d.installed()}
    # 8-bit and 4-bit engines load through bitsandbytes whatever the backend
    backends["bitsandbytes"] = importlib.util.find_spec("bitsandbytes") is not None
    gpus = detect_gpus()
    from workers.sandbox import sandbox_capabilities, sandbox_isolation

    isolation = sandbox_isolation()
    report: dict[str, Any] = {
        "versions": versions,
        "backends": backends,
        "backends_lack": {name: gaps for name, gaps in lacking.items() if gaps},
        "gpu": {"count": gpus.count, "names": list(gpus.names), "source": gpus.source.value},
        "sandbox": sandbox_capabilities(),
        # the level executions get here (recorded per execution; docs/sandbox.md) and why
        "isolation": {"level": isolation.level.value, **isolation.facts},
    }
    try:
        from workers.benchmarks.infibench.executors import executor_availability
    except ImportError:
        report["infibench_executors"] = None
    else:
        report["infibench_executors"] = executor_availability()
    if overrides:
        report["grid"] = grid_checks(overrides)
    return report


def grid_checks(overrides: Sequence[str]) -> dict[str, Any]:
    """Preflight of the whole grid: every cell not skipped, done or not (the store is not
    read), and the probe of `cluster.address`; PreflightReport JSON."""
    return preflight(prepare(load_run_config(overrides))).to_json()


def render_doctor(data: dict[str, Any]) -> str:
    def yes(flag: bool) -> str:
        return "yes" if flag else "NO"

    lines = ["versions: " + ", ".join(f"{k} {v}" for k, v in sorted(data["versions"].items()))]
    lines.append("backends: " + ", ".join(f"{k} {yes(v)}" for k, v in data["backends"].items()))
    for name, gaps in data.get("backends_lack", {}).items():
        for feature, why in gaps.items():
            lines.append(
                f"  {name} lacks {feature}: {why}; settings that need it are skipped on "
                f"backend={name}, and backend=auto places them on another backend"
            )
    gpu = data["gpu"]
    names = f": {', '.join(gpu['names'])}" if gpu["names"] else ""
    lines.append(f"gpu: {gpu['count']} ({gpu['source']}{names})")
    lines.append(
        "sandbox: "
        + ", ".join(f"{k} {yes(v)}" for k, v in data["sandbox"].items() if isinstance(v, bool))
    )
    iso = data["isolation"]
    missing = ", ".join(iso.get("missing") or []) or "nothing"
    lines.append(
        f"isolation: {iso['level']} (missing: {missing}); "
        f"memory: {iso.get('memory_limit')}; network: {iso.get('network')}; "
        f"{iso.get('tool')}"
    )
    ex = data.get("infibench_executors")
    if ex is not None:
        lines.append("infibench executors: " + ", ".join(f"{k} {yes(v)}" for k, v in ex.items()))
        absent = [k for k, v in ex.items() if not v]
        if absent:
            lines.append(
                "  questions needing "
                + ", ".join(absent)
                + " get status toolchain-missing (see docs/infibench.md)"
            )
    if "grid" in data:
        lines += _render_grid(data["grid"])
    return "\n".join(lines)


def _render_grid(grid: dict[str, Any]) -> list[str]:
    lines = ["grid:"]
    c = grid["cluster"]
    if c["address"]:
        state = {True: "reachable", False: "UNREACHABLE", None: "not probed"}[c["reachable"]]
        lines.append(f"  cluster {c['address']}: {state}")
    for w in grid["weights"]:
        lines.append(f"  weights {w['model']}: {w['status']} ({w['detail']})")
    for h in grid["hardware"]:
        lines.append(f"  engine {h['engine']}: {h['placement']} ({h['reason']})")
    for p in grid["problems"]:
        lines.append(f"  {p['severity'].upper()} {p['kind']}: {p['message']}")
    lines.append(f"  blocking problems: {grid['blocking']}")
    return lines
