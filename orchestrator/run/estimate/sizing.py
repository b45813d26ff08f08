"""The plan on a cluster: each engine unit's time with its replicas on the estimate's GPU, and
the grid's wall time on N GPUs by the dispatcher's scheduling rule (analysis/replicas.py and
analysis/schedule.py hold the arithmetic; docs/cost.md, "Replicas and the cluster").

N is `cluster.gpus` when set, else the GPUs the target cluster has as far as `plan` can know
before Ray starts (run/preflight/hardware.py): a remote cluster's are unknown until then, and a
machine without GPUs has none to size, so `plan` asks for `cluster.gpus` there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from orchestrator.analysis.cost import CostParams, DeviceSpec, EngineWork, estimate_engine
from orchestrator.analysis.replicas import ReplicaSizing, size_replicas
from orchestrator.analysis.schedule import Schedule, UnitPlan, replay
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
    """One unit on the cluster's GPU: one stream's times, split by what runs one stream at a
    time (each setting on the harness's random stream) and what any stream shares."""

    replicas: ReplicaSizing
    load_s: float
    chains_s: tuple[float, ...]  # one stream alone: each setting on the harness's stream
    shared_s: float  # one stream alone: the other settings together
    seconds: float  # load + generation on one instance with its replicas
    gpus: int  # GPUs one instance holds (0: none, a replay engine)
    work: EngineWork  # what the cost model sizes: other replicas or GPUs are sized from it
    max_length: int  # the unit's longest length limit: one replica's KV cache
    sequences: int  # the most sequences one call returns: one replica's KV cache

    @property
    def sequential_s(self) -> float:
        return sum(self.chains_s)

    @property
    def gpu_hours(self) -> float:
        """On one instance (the work; more instances add their loads)."""
        return self.seconds * self.gpus / 3600.0

    def plan(self, key: str) -> UnitPlan:
        """The unit as analysis/schedule.py replays it."""
        r = self.replicas
        cap = 1.0 if r.batched else r.cap
        return UnitPlan(key, self.gpus, r.running, cap, self.load_s, self.chains_s, self.shared_s)


def _setting_s(work: EngineWork, gpu: DeviceSpec, p: CostParams) -> list[float]:
    """Each setting's generation on one stream, by the cost model."""
    return [estimate_engine(replace(work, settings=(s,)), gpu, p).generate_s for s in work.settings]


def size_unit(
    unit: EngineUnit,
    work: EngineWork,
    one_stream: tuple[float, float],
    gpu: DeviceSpec,
    params: CostParams,
    cluster: ClusterSpec,
) -> UnitSizing:
    """`one_stream` is (load_s, total_s) of one replica on `gpu`, measured or modelled; the
    cost model splits its generation into the settings on the harness's random stream (one
    chain each) and the rest. A batched backend shares everything (one call serves them)."""
    load_s, total_s = one_stream
    batched = get_backend(unit.engine.backend).batched
    model = _setting_s(work, gpu, params)
    scale = max(0.0, total_s - load_s) / sum(model) if sum(model) > 0 else 0.0
    chains, shared = [], 0.0
    for item, seconds in zip(unit.settings, model, strict=True):
        if item.setting.sequential_stream and not batched:
            chains.append(seconds * scale)
        else:
            shared += seconds * scale
    one = ReplicaSizing(1, None, 1.0, 0.0, batched)  # replaced by with_replicas below
    sized = UnitSizing(
        one,
        load_s,
        tuple(chains),
        shared,
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
    """The unit with `cluster.replicas=replicas` (as many as fit its GPU's memory, as the
    dispatcher runs them), alone on one instance."""
    # the dispatcher's rules: replicas share one GPU, so a multi-GPU model runs one
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
    resized = replace(sizing, replicas=sized)
    alone = replay([resized.plan("unit")], max(1, resized.gpus), grow=False)
    return replace(resized, seconds=alone.makespan_s)


def cluster_schedule(
    sizes: Mapping[str, UnitSizing], target: ClusterTarget, gpus: int | None = None
) -> Schedule | None:
    """The units (in plan order) on the target's GPUs (or `gpus`); None when unknown."""
    n = gpus if gpus is not None else target.gpus
    if n is None:
        return None
    return replay([s.plan(key) for key, s in sizes.items()], n)


# The `cluster.replicas` values plan tries: past 8 the replicas' aggregate cap (t_step / busy,
# docs/cost.md) leaves nothing to gain for the models the study runs.
HINT_REPLICAS = (2, 4, 8)
# A wall time shorter by less than this is inside what a pilot's measurements move: not worth
# the memory and the warnings more replicas bring.
HINT_MIN_SHORTER = 0.05


@dataclass(frozen=True)
class Alternative:
    """Another cluster shape and its wall time on the target's GPU."""

    replicas: int  # cluster.replicas
    gpus: int  # cluster.gpus
    makespan_s: float
    gpu_hours: float  # the GPUs the schedule holds, loads of extra instances included


def _alternative(sizes: Mapping[str, UnitSizing], replicas: int, gpus: int) -> Alternative:
    schedule = cluster_schedule(sizes, ClusterTarget(gpus, ""))
    assert schedule is not None  # a number of GPUs was given
    return Alternative(replicas, gpus, schedule.makespan_s, schedule.gpu_hours)


def replica_hint(
    sizes: Mapping[str, UnitSizing],
    now: Schedule | None,
    gpu: DeviceSpec,
    params: CostParams,
    replicas: int,
) -> Alternative | None:
    """The replicas to suggest against the schedule `now` on the target (None: the target's
    size is unknown, or no more replicas shorten the wall time by HINT_MIN_SHORTER); each
    larger count must beat the last by it. Each unit runs as many of them as fit its GPU's
    memory (the dispatcher's rule)."""
    if now is None:
        return None
    best = Alternative(replicas, now.n_gpus, now.makespan_s, now.gpu_hours)
    for count in (r for r in HINT_REPLICAS if r > replicas):
        resized = {k: with_replicas(s, gpu, params, count) for k, s in sizes.items()}
        other = _alternative(resized, count, now.n_gpus)
        if other.makespan_s < best.makespan_s * (1.0 - HINT_MIN_SHORTER):
            best = other
    return None if best.replicas == replicas else best


# The cluster sizes plan tries besides the target's: 2, 4 and 8 times its GPUs.
HINT_GPU_FACTORS = (2, 4, 8)


def gpus_hint(
    sizes: Mapping[str, UnitSizing], now: Schedule | None, replicas: int
) -> list[Alternative]:
    """What more GPUs buy against the schedule `now` on the target: the wall time on each
    multiple of its GPUs, as long as each is HINT_MIN_SHORTER shorter than the one before."""
    if now is None or not sizes:
        return []
    last = Alternative(replicas, now.n_gpus, now.makespan_s, now.gpu_hours)
    out = []
    for factor in HINT_GPU_FACTORS:
        more = _alternative(sizes, replicas, now.n_gpus * factor)
        if more.makespan_s >= last.makespan_s * (1.0 - HINT_MIN_SHORTER):
            break
        out.append(more)
        last = more
    return out


def cluster_json(
    sizes: Mapping[str, UnitSizing],
    target: ClusterTarget,
    schedule: Schedule | None,
    gpu: DeviceSpec,
    params: CostParams,
    cluster: ClusterSpec,
) -> dict[str, Any]:
    """`plan --json`'s "cluster": the wall time on the target and the GPU-hours, and what
    more replicas or GPUs would buy."""
    work = sum(s.gpu_hours for s in sizes.values())
    replica = replica_hint(sizes, schedule, gpu, params, cluster.replicas)
    more = gpus_hint(sizes, schedule, cluster.replicas)
    return {
        "gpus": target.gpus,
        "gpus_source": target.source,
        "gpu": gpu.name,
        "replicas": cluster.replicas,
        # the GPUs the schedule holds (extra instances' loads included); without a schedule,
        # every unit on one instance
        "gpu_hours": schedule.gpu_hours if schedule else work,
        "work_gpu_hours": work,  # every unit on one instance
        "longest_unit_s": max((s.seconds for s in sizes.values()), default=0.0),
        "makespan_s": schedule.makespan_s if schedule else None,
        "lower_bound_s": schedule.lower_bound_s if schedule else None,
        "instances": sum(p.instances for p in schedule.placed) if schedule else None,
        "unplaceable": list(schedule.unplaceable) if schedule else [],
        "replicas_hint": asdict(replica) if replica else None,
        "more_gpus": [asdict(m) for m in more],
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
        "parallel_s": sizing.shared_s,
        "chains_s": list(sizing.chains_s),
    }


def replica_warning(label: str, sizing: UnitSizing, gpu: DeviceSpec) -> str | None:
    r = sizing.replicas
    if r.fit is None or r.requested <= r.fit or r.fit == 0:
        return None  # fits, or the weights alone do not (the weights warning says so)
    return (
        f"{label}: {r.requested} replicas of {r.per_replica_gb:.1f} GB do not fit "
        f"{gpu.name}'s memory ({r.fit} do); the estimate counts {r.running}, as the "
        "dispatcher runs it where Ray names the GPU (a GPU it cannot name gets all of them)"
    )
