"""What cannot run on the cluster `plan` sizes, and what would fit instead (plan only).

Two problems: an engine that needs more GPUs than the cluster has (`cluster.gpus`, else the
GPUs found here), and one whose weights exceed its GPUs' memory (`estimate.gpu` x the model's
`num_gpus`). Both block `plan` (exit 2) when the GPU is known: named by `estimate.gpu` or
detected here. A GPU only assumed (`estimate.gpu=auto` on a machine without one) makes the
memory problem a warning: the cluster's GPU may be larger. Each message names what would fit
(analysis/fit.py): more GPUs, a quantization, a GPU with more memory. `run` reads neither
`cluster.gpus` nor `estimate.gpu`; preflight's hardware check is what stops it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from orchestrator.analysis.cost import GPUS, DeviceSpec
from orchestrator.analysis.fit import Alternatives, alternatives, weights_gb
from orchestrator.run.estimate.sizing import ClusterTarget, UnitSizing
from orchestrator.run.plan.planner import EngineUnit
from orchestrator.run.preflight.checks import Problem, ProblemKind, Severity
from orchestrator.run.preflight.hardware import engine_label


def _gpus(n: int) -> str:
    return "one" if n == 1 else str(n)


def _options(alt: Alternatives, within: int, num_gpus: int) -> list[str]:
    """A quantization and a larger GPU that fit `within` GPUs, with the `model.num_gpus`
    they need where it is not the model's."""

    def on(n: int) -> str:
        return "" if n == num_gpus else f" with model.num_gpus={n}"

    found = []
    for n in sorted({q.gpus for q in alt.quantized}):
        same = [q for q in alt.quantized if q.gpus == n]
        names = " or ".join(q.precision for q in same)
        sizes = " or ".join(f"{q.replica_gb:.1f}" for q in same)
        found.append(f"precision={names}{on(n)} (a quantization: one replica {sizes} GB)")
    if alt.larger:
        first = GPUS[alt.larger[0]]
        found.append(
            f"estimate.gpu={first.name} or any GPU of {first.memory_gb:g} GB or more{on(within)} "
            "(a larger GPU)"
        )
    return found


def too_few_gpus(label: str, s: UnitSizing, gpu: DeviceSpec, target: ClusterTarget) -> str:
    """The engine needs more GPUs than the cluster has: more GPUs, or what fits those."""
    have = target.gpus or 0
    alt = alternatives(s.work, gpu, have, s.max_length, s.sequences)
    options = [f"cluster.gpus={s.gpus} (more GPUs)"]
    if alt.gpus is not None and alt.gpus <= have:
        options.append(
            f"model.num_gpus={alt.gpus} (one replica, {alt.replica_gb:.1f} GB, fits "
            f"{_gpus(alt.gpus)} {gpu.name})"
        )
    elif have > 0:
        options += _options(alt, have, s.work.num_gpus)
    return (
        f"{label}: needs {s.gpus} GPUs and the cluster has {have} ({target.source}); "
        f"would fit: {'; '.join(options)}"
    )


def too_little_memory(
    label: str, s: UnitSizing, gpu: DeviceSpec, source: str, target: ClusterTarget
) -> str:
    """The weights exceed the GPUs' memory: more GPUs, a quantization, a larger GPU."""
    alt = alternatives(s.work, gpu, s.gpus, s.max_length, s.sequences)
    options = []
    if alt.gpus is not None:
        cluster = ""
        if target.gpus is not None and alt.gpus > target.gpus:
            cluster = f" and cluster.gpus={alt.gpus}"
        options.append(f"model.num_gpus={alt.gpus}{cluster} (more GPUs)")
    options += _options(alt, s.gpus, s.work.num_gpus)
    fit = "; ".join(options) if options else f"nothing on up to one node of {gpu.name}"
    return (
        f"{label}: weights {weights_gb(s.work):.1f} GB exceed {_gpus(s.gpus)} {gpu.name} "
        f"({gpu.memory_gb:g} GB each; {source}); would fit: {fit}"
    )


def fit_problems(
    units: Sequence[tuple[str, UnitSizing]],
    gpu: DeviceSpec,
    gpu_source: str,
    gpu_named: bool,
    target: ClusterTarget,
) -> list[Problem]:
    """One problem per engine (label, sizing) that cannot run on the target (module
    docstring), in plan order."""
    problems = []
    for label, sizing in units:
        if sizing.gpus == 0 or sizing.work.model_free:
            continue
        if target.gpus is not None and sizing.gpus > target.gpus:
            message = too_few_gpus(label, sizing, gpu, target)
            problems.append(Problem(ProblemKind.HARDWARE, Severity.BLOCKING, label, message))
        elif gpu.memory_gb is not None and weights_gb(sizing.work) > gpu.memory_gb * sizing.gpus:
            message = too_little_memory(label, sizing, gpu, gpu_source, target)
            severity = Severity.BLOCKING if gpu_named else Severity.WARNING
            if not gpu_named:
                message += "; the GPU is assumed: set estimate.gpu to the cluster's"
            problems.append(Problem(ProblemKind.MEMORY, severity, label, message))
    return problems


def fit_json(problems: Sequence[Problem]) -> list[dict[str, str]]:
    """`plan --json`'s "fit_problems"."""
    return [
        {
            "kind": p.kind.value,
            "severity": p.severity.value,
            "subject": p.subject,
            "message": p.message,
        }
        for p in problems
    ]


def units_of(
    units: Sequence[EngineUnit], sizes: Mapping[str, UnitSizing]
) -> list[tuple[str, UnitSizing]]:
    """(label, sizing) of every sized unit, in plan order."""
    return [(engine_label(u.engine), sizes[u.engine_key]) for u in units if u.engine_key in sizes]
