"""The plan on a cluster: each engine unit's time with its replicas on the estimate's GPU, and
the grid's wall time on N GPUs by the dispatcher's scheduling rule (analysis/replicas.py and
analysis/schedule.py hold the arithmetic; docs/cost.md, "Replicas and the cluster").

N is `cluster.gpus` when set, else the GPUs the target cluster has as far as `plan` can know
before Ray starts (run/preflight/hardware.py): a remote cluster's are unknown until then, and a
machine without GPUs has none to size, so `plan` asks for `cluster.gpus` there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from orchestrator.analysis.cost import CostParams, DeviceSpec, EngineWork, estimate_engine
from orchestrator.analysis.replicas import ReplicaSizing, replicated_seconds, size_replicas
from orchestrator.analysis.schedule import Schedule, UnitJob, schedule_units
from orchestrator.run.config.specs import ClusterSpec
from orchestrator.run.plan.planner import EngineUnit
from orchestrator.run.preflight.hardware import GpuInventory, gpus_needed
from workers.backends.registry import get_backend


@dataclass(frozen=True)
class ClusterTarget:
    """The cluster the wall time is for."""

    gpus: int | None  # None: unknown here (plan says how to give it)
    source: str


def cluster_target(cluster: ClusterSpec, inventory: GpuInventory) -> ClusterTarget:
    if cluster.gpus is not None:
        return ClusterTarget(cluster.gpus, f"cluster.gpus={cluster.gpus}")
    if inventory.count is None:
        return ClusterTarget(
            None, "a remote cluster's GPUs are known once Ray connects: set cluster.gpus=N"
        )
    if inventory.count == 0:
        return ClusterTarget(None, "no GPUs here: set cluster.gpus=N to size a cluster")
    return ClusterTarget(inventory.count, f"this cluster: {inventory.describe()}")


@dataclass(frozen=True)
class UnitSizing:
    """One unit on the cluster's GPU, one stream's times split by what replicas can share."""

    replicas: ReplicaSizing
    load_s: float
    sequential_s: float  # one stream: settings on the harness's random stream (replica 0)
    parallel_s: float  # one stream: the rest
    seconds: float  # load + generation on its replicas: how long it holds its GPUs
    gpus: int  # GPUs it holds (0: none, a replay engine)

    @property
    def gpu_hours(self) -> float:
        return self.seconds * self.gpus / 3600.0


def _generate_s(work: EngineWork, keep: Sequence[bool], gpu: DeviceSpec, p: CostParams) -> float:
    settings = tuple(s for s, k in zip(work.settings, keep, strict=True) if k)
    return estimate_engine(replace(work, settings=settings), gpu, p).generate_s


def size_unit(
    unit: EngineUnit,
    work: EngineWork,
    one_stream: tuple[float, float],
    gpu: DeviceSpec,
    params: CostParams,
    cluster: ClusterSpec,
) -> UnitSizing:
    """`one_stream` is (load_s, total_s) of one replica on `gpu`, measured or modelled; the
    cost model splits its generation into what runs on replica 0 only and what all share."""
    load_s, total_s = one_stream
    # the dispatcher's rules: replicas share one GPU, so a multi-GPU model runs one; vLLM
    # batches a unit's settings itself
    requested = cluster.replicas if unit.engine.model.num_gpus == 1 else 1
    batched = get_backend(unit.engine.backend).batched
    sequential = [i.setting.sequential_stream for i in unit.settings]
    seq_model = _generate_s(work, sequential, gpu, params)
    par_model = _generate_s(work, [not s for s in sequential], gpu, params)
    share = seq_model / (seq_model + par_model) if seq_model + par_model > 0 else 0.0
    generate = max(0.0, total_s - load_s)
    sizing = size_replicas(
        work,
        gpu,
        params,
        requested,
        batched=batched,
        max_length=max((s.max_length for s in work.settings), default=0),
        sequences=max((s.sequences_per_call for s in work.settings), default=1),
    )
    seq_s, par_s = generate * share, generate * (1.0 - share)
    seconds = load_s + replicated_seconds(seq_s, par_s, sizing)
    return UnitSizing(sizing, load_s, seq_s, par_s, seconds, gpus_needed(unit.engine))


def cluster_schedule(sizes: Mapping[str, UnitSizing], target: ClusterTarget) -> Schedule | None:
    """The units (in plan order) on the target's GPUs; None when their number is unknown."""
    if target.gpus is None:
        return None
    jobs = [UnitJob(key, s.gpus, s.seconds) for key, s in sizes.items()]
    return schedule_units(jobs, target.gpus)


def cluster_json(
    sizes: Mapping[str, UnitSizing],
    target: ClusterTarget,
    schedule: Schedule | None,
    gpu: DeviceSpec,
    replicas: int,
) -> dict[str, Any]:
    """`plan --json`'s "cluster": the wall time on the target and the GPU-hours."""
    return {
        "gpus": target.gpus,
        "gpus_source": target.source,
        "gpu": gpu.name,
        "replicas": replicas,
        "gpu_hours": sum(s.gpu_hours for s in sizes.values()),
        "longest_unit_s": max((s.seconds for s in sizes.values()), default=0.0),
        "makespan_s": schedule.makespan_s if schedule else None,
        "lower_bound_s": schedule.lower_bound_s if schedule else None,
        "unplaceable": list(schedule.unplaceable) if schedule else [],
    }


def engine_json(sizing: UnitSizing) -> dict[str, Any]:
    """An engine's fields of `plan --json` for the cluster."""
    r = sizing.replicas
    return {
        "cluster_s": sizing.seconds,
        "cluster_load_s": sizing.load_s,
        "estimated_gpu_hours": sizing.gpu_hours,
        "replicas_running": r.running,
        "replicas_fit": r.fit,
        "replica_gain": r.gain,
        "replica_memory_gb": r.per_replica_gb,
        "sequential_s": sizing.sequential_s,
        "parallel_s": sizing.parallel_s,
    }


def replica_warning(label: str, sizing: UnitSizing, gpu: DeviceSpec) -> str | None:
    r = sizing.replicas
    if r.fit is None or r.requested <= r.fit or r.fit == 0:
        return None  # fits, or the weights alone do not (the weights warning says so)
    return (
        f"{label}: {r.requested} replicas of {r.per_replica_gb:.1f} GB do not fit "
        f"{gpu.name}'s memory ({r.fit} do); the estimate counts {r.running}, a run would "
        "fail to load the others"
    )
