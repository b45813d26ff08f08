"""The plan on a cluster: each engine unit's time with its replicas on the estimate's GPU, and
the grid's wall time on N GPUs by the dispatcher's scheduling rule (analysis/replicas.py and
analysis/schedule.py hold the arithmetic; docs/cost.md, "Replicas and the cluster").

N is `cluster.gpus` when set, else the GPUs the target cluster has as far as `plan` can know
before Ray starts (run/preflight/hardware.py): a remote cluster's are unknown until then, and a
machine without GPUs has none to size, so `plan` asks for `cluster.gpus` there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
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
    work: EngineWork  # what the cost model sizes: other replicas or GPUs are sized from it
    max_length: int  # the unit's longest length limit: one replica's KV cache
    sequences: int  # the most sequences one call returns: one replica's KV cache

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
    batched = get_backend(unit.engine.backend).batched
    sequential = [i.setting.sequential_stream for i in unit.settings]
    seq_model = _generate_s(work, sequential, gpu, params)
    par_model = _generate_s(work, [not s for s in sequential], gpu, params)
    share = seq_model / (seq_model + par_model) if seq_model + par_model > 0 else 0.0
    generate = max(0.0, total_s - load_s)
    one = ReplicaSizing(1, None, 1.0, 0.0, batched)  # replaced by with_replicas below
    sized = UnitSizing(
        one,
        load_s,
        generate * share,
        generate * (1.0 - share),
        total_s,
        gpus_needed(unit.engine),
        work,
        max_length=max((s.max_length for s in work.settings), default=0),
        sequences=max((s.sequences_per_call for s in work.settings), default=1),
    )
    return with_replicas(sized, gpu, params, cluster.replicas)


def with_replicas(
    sizing: UnitSizing, gpu: DeviceSpec, params: CostParams, replicas: int
) -> UnitSizing:
    """The unit with `cluster.replicas=replicas`: its one-stream times split as they are."""
    # the dispatcher's rules: replicas share one GPU, so a multi-GPU model runs one; vLLM
    # batches a unit's settings itself
    requested = replicas if sizing.work.num_gpus == 1 else 1
    sized = size_replicas(
        sizing.work,
        gpu,
        params,
        requested,
        batched=sizing.replicas.batched,
        max_length=sizing.max_length,
        sequences=sizing.sequences,
    )
    generate = replicated_seconds(sizing.sequential_s, sizing.parallel_s, sized)
    return replace(sizing, replicas=sized, seconds=sizing.load_s + generate)


def cluster_schedule(sizes: Mapping[str, UnitSizing], target: ClusterTarget) -> Schedule | None:
    """The units (in plan order) on the target's GPUs; None when their number is unknown."""
    if target.gpus is None:
        return None
    jobs = [UnitJob(key, s.gpus, s.seconds) for key, s in sizes.items()]
    return schedule_units(jobs, target.gpus)


# The `cluster.replicas` values plan tries: past 8 the replicas' aggregate cap (t_step / busy,
# docs/cost.md) leaves nothing to gain for the models the study runs.
HINT_REPLICAS = (2, 4, 8)
# A wall time shorter by less than this is inside what a pilot's measurements move: not worth
# the memory and the warnings more replicas bring.
HINT_MIN_SHORTER = 0.05


@dataclass(frozen=True)
class ReplicaHint:
    """More replicas that would shorten the wall time on the target."""

    replicas: int  # the fewest of HINT_REPLICAS that get (nearly) the shortest wall time
    makespan_s: float  # the wall time with them
    gpu_hours: float  # the GPU-hours with them


def replica_hint(
    sizes: Mapping[str, UnitSizing],
    target: ClusterTarget,
    gpu: DeviceSpec,
    params: CostParams,
    replicas: int,
) -> ReplicaHint | None:
    """The replicas to suggest (None: the target's size is unknown, or no more replicas
    shorten the wall time by HINT_MIN_SHORTER); each larger count must beat the last by it,
    and every unit's replicas must fit its GPU's memory (a run fails to load the others)."""
    now = cluster_schedule(sizes, target)
    if now is None:
        return None
    best = ReplicaHint(replicas, now.makespan_s, sum(s.gpu_hours for s in sizes.values()))
    for count in (r for r in HINT_REPLICAS if r > replicas):
        resized = {k: with_replicas(s, gpu, params, count) for k, s in sizes.items()}
        if any(
            s.replicas.fit is not None and s.replicas.requested > s.replicas.fit
            for s in resized.values()
        ):
            break
        schedule = cluster_schedule(resized, target)
        if schedule is not None and schedule.makespan_s < best.makespan_s * (
            1.0 - HINT_MIN_SHORTER
        ):
            hours = sum(s.gpu_hours for s in resized.values())
            best = ReplicaHint(count, schedule.makespan_s, hours)
    return None if best.replicas == replicas else best


def cluster_json(
    sizes: Mapping[str, UnitSizing],
    target: ClusterTarget,
    schedule: Schedule | None,
    gpu: DeviceSpec,
    replicas: int,
    hint: ReplicaHint | None = None,
) -> dict[str, Any]:
    """`plan --json`'s "cluster": the wall time on the target and the GPU-hours, and the
    replicas that would shorten it."""
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
        "replicas_hint": asdict(hint) if hint else None,
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
