"""What the dispatcher keeps of a run (execute/dispatch.py): its options, its summary, the
units waiting for GPUs, and the live state of each engine unit and replica. Plain data and
pure rules, no Ray."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.analysis.schedule import next_fitting
from orchestrator.errors import ClusterError
from orchestrator.run.config.specs import ChunkPolicy, ClusterSpec
from orchestrator.run.execute.chunks import UnitQueue, resume
from orchestrator.run.execute.writer import StoreWriter
from orchestrator.run.plan.planner import EngineUnit, PlannedSetting
from workers.backends.registry import get_backend
from workers.spec import ChunkRequest, SandboxLimits

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DispatchOptions:
    cluster: ClusterSpec
    limits: SandboxLimits
    exec_workers: int | None
    checkpoint: ChunkPolicy = field(default_factory=ChunkPolicy)


@dataclass
class DispatchSummary:
    generated: int = 0
    executed: int = 0
    failed: int = 0
    engine_loads: int = 0
    scores: dict[str, float | None] = field(default_factory=dict)


def label(item: PlannedSetting) -> str:
    s = item.setting
    e = s.engine
    return (
        f"{e.model.name}/{e.backend}/{e.dtype}/{e.quant} {s.template} {s.decoding.name} "
        f"L{s.max_length}"
    )


def engine_label(unit: EngineUnit) -> str:
    e = unit.engine
    return f"{e.model.name}/{e.backend}/{e.dtype}/{e.quant}"


@dataclass
class Replica:
    """One live engine actor of a unit: what the drain loop and the watchdog track."""

    index: int
    actor: Any
    last_progress: float
    in_flight: Any = None  # the ref of the chunk call being generated
    chunks: tuple[ChunkRequest, ...] = ()
    progress_ref: Any = None
    polled_at: float = 0.0
    seen: tuple[int, int] = (-1, -1)  # (samples, tokens) at the last poll
    timeouts: int = 0
    gave_up: bool = False  # the watchdog killed it for good
    closed: bool = False


@dataclass
class RunningUnit:
    unit: EngineUnit
    queue: UnitQueue
    items: dict[str, PlannedSetting]
    replicas: list[Replica] = field(default_factory=list)
    order: tuple[str, ...] = ()  # the benchmark's task ids (for sample order)


def unit_replicas(unit: EngineUnit, cluster: ClusterSpec) -> int:
    """`cluster.replicas`, except for a model over several GPUs: replicas share one GPU."""
    if cluster.replicas > 1 and unit.engine.model.num_gpus > 1:
        logger.warning(
            "%s spans %d GPUs: one replica (replicas share one GPU)",
            unit.engine.model.name,
            unit.engine.model.num_gpus,
        )
        return 1
    return cluster.replicas


def replica_gpus(
    unit: EngineUnit, cluster_gpus: float, replicas: int, cluster: ClusterSpec
) -> float:
    """The GPUs one replica of the unit asks Ray for (0: it runs on CPU or loads no model)."""
    wanted = unit.engine.model.num_gpus
    if not get_backend(unit.engine.backend).uses_gpus:
        return 0  # no model to place
    if cluster_gpus <= 0:
        if not cluster.cpu_if_no_gpus:
            raise ClusterError(
                f"{unit.engine.model.name} needs {wanted} GPU(s) and the cluster has none "
                "(set cluster.cpu_if_no_gpus=true to run on CPU)"
            )
        return 0
    if wanted > cluster_gpus:
        raise ClusterError(
            f"{unit.engine.model.name} needs {wanted} GPUs; the cluster has {cluster_gpus:g}"
        )
    # R replicas share the model's GPUs: each is a full engine on a fraction of them.
    return wanted / replicas


@dataclass(frozen=True)
class Waiting:
    unit: EngineUnit
    replicas: int
    replica_gpus: float

    @property
    def gpus(self) -> int:
        """Whole GPUs the unit holds while it runs (its replicas together)."""
        return round(self.replica_gpus * self.replicas)


@dataclass
class StartQueue:
    """Units waiting for GPUs, in plan order, and the GPUs the started ones hold. A unit
    starts when it fits what is free, by analysis/schedule.py's rule (`next_fitting`, which
    the plan's wall time replays); it gives its GPUs back when it ends. Asking Ray for every
    unit at once instead would leave replicas waiting in Ray's queue holding a chunk (the
    watchdog counts that time as no progress), and set up hundreds of units before the
    first result is handled."""

    capacity: int  # whole GPUs of the cluster
    waiting: list[Waiting] = field(default_factory=list)
    held: dict[str, int] = field(default_factory=dict)  # engine key -> GPUs

    def due(self) -> list[Waiting]:
        """The units to start now (they are counted as holding their GPUs from here)."""
        out = []
        while self.waiting:
            free = self.capacity - sum(self.held.values())
            pos = next_fitting([w.gpus for w in self.waiting], free)
            if pos is None:
                break
            start = self.waiting.pop(pos)
            self.held[start.unit.engine_key] = start.gpus
            out.append(start)
        return out

    def release(self, engine_key: str) -> None:
        self.held.pop(engine_key, None)


def unit_queue(
    unit: EngineUnit,
    replicas: int,
    benchmarks: Mapping[str, Any],
    writer: StoreWriter,
    checkpoint: ChunkPolicy,
) -> RunningUnit:
    """The unit's chunk queue, continuing from what the store holds."""
    works, items, order = [], {}, ()
    for item in unit.settings:
        bench = benchmarks[item.setting.benchmark.name]
        order = bench.problem_ids()
        ids = item.setting.benchmark.select(order)
        stored = writer.stored(item.key, item.setting.n_samples)
        work, restart = resume(item.key, item.setting, ids, stored)
        if restart:
            writer.set_aside_generations(
                item.key, "its stored chunks cannot continue the harness's random stream"
            )
        works.append(work)
        items[item.key] = item
    batched = get_backend(unit.engine.backend).batched
    queue = UnitQueue(works, checkpoint, batched, replicas)
    return RunningUnit(unit, queue, items, order=order)


@dataclass
class QueuedMarks:
    """Settings recorded `queued` (submitted, not begun): a unit's when it starts, the
    waiting ones a few at a time between Ray calls (thousands at once would hold up the
    results of the units already running)."""

    writer: StoreWriter
    todo: deque[PlannedSetting] = field(default_factory=deque)
    done: set[str] = field(default_factory=set)

    def mark(self, item: PlannedSetting) -> None:
        if item.key not in self.done:
            self.done.add(item.key)
            self.writer.started(item.key, item.setting)

    def some(self, n: int) -> None:
        for _ in range(min(n, len(self.todo))):
            self.mark(self.todo.popleft())
