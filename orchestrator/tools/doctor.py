"""`doctor`: what this machine can run (backends, sandbox isolation, InfiBench toolchains)."""

from __future__ import annotations

import importlib.util
import shutil
from typing import Any

from orchestrator.run.provenance import library_versions


def doctor_report() -> dict[str, Any]:
    versions = library_versions()
    backends = {
        "hf": importlib.util.find_spec("transformers") is not None,
        "vllm": importlib.util.find_spec("vllm") is not None,
        "bitsandbytes": importlib.util.find_spec("bitsandbytes") is not None,
    }
    gpu = {"nvidia-smi": shutil.which("nvidia-smi") is not None}
    from workers.sandbox import sandbox_capabilities, sandbox_isolation

    isolation = sandbox_isolation()
    report: dict[str, Any] = {
        "versions": versions,
        "backends": backends,
        "gpu": gpu,
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
    return report


def render_doctor(data: dict[str, Any]) -> str:
    def yes(flag: bool) -> str:
        return "yes" if flag else "NO"

    lines = ["versions: " + ", ".join(f"{k} {v}" for k, v in sorted(data["versions"].items()))]
    lines.append("backends: " + ", ".join(f"{k} {yes(v)}" for k, v in data["backends"].items()))
    lines.append("gpu: " + ", ".join(f"{k} {yes(v)}" for k, v in data["gpu"].items()))
    lines.append("sandbox: " + ", ".join(f"{k} {yes(v)}" for k, v in data["sandbox"].items()
                                         if isinstance(v, bool)))  # fmt: skip
    iso = data["isolation"]
    missing = ", ".join(iso.get("missing") or []) or "nothing"
    lines.append(f"isolation: {iso['level']} (missing: {missing}); "
                 f"memory: {iso.get('memory_limit')}; network: {iso.get('network')}; "
                 f"{iso.get('tool')}")  # fmt: skip
    ex = data.get("infibench_executors")
    if ex is not None:
        lines.append("infibench executors: " + ", ".join(f"{k} {yes(v)}" for k, v in ex.items()))
        missing = [k for k, v in ex.items() if not v]
        if missing:
            lines.append("  questions needing " + ", ".join(missing)
                         + " get status toolchain-missing (see docs/infibench.md)")  # fmt: skip
    return "\n".join(lines)
