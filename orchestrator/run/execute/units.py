"""What the dispatcher keeps of a run (execute/dispatch.py): its options, its summary, the
units waiting for GPUs, and the live state of each engine unit, its instances and replicas.
Plain data and pure rules, no Ray."""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.analysis.cost import GPUS, EngineWork, gpu_kind
from orchestrator.analysis.replicas import USABLE_MEMORY_FRACTION, replica_memory_gb
from orchestrator.analysis.schedule import UnitState, choose_starts
from orchestrator.errors import ClusterError
from orchestrator.run.config.specs import ChunkPolicy, ClusterSpec
from orchestrator.run.execute.chunks import UnitQueue, resume
from orchestrator.run.execute.writer import StoreWriter
from orchestrator.run.plan.planner import EngineUnit, PlannedSetting
from workers.backends.registry import get_backend
from workers.execspec import SandboxLimits
from workers.spec import ChunkRequest

logger = logging.getLogger(__name__)
ACCELERATOR_PREFIX = "accelerator_type:"  # Ray's resource naming a node's GPU type


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

    index: int  # unique within its unit
    instance: int  # the engine instance (a load on its GPUs) it belongs to
    actor: Any
    last_progress: float
    in_flight: Any = None  # the ref of the chunk call being generated
    chunks: tuple[ChunkRequest, ...] = ()
    idle_since: float = 0.0  # when it last had nothing in flight (the longest idle goes first)
    progress_ref: Any = None
    polled_at: float = 0.0
    seen: tuple[int, int] = (-1, -1)  # (samples, tokens) at the last poll
    timeouts: int = 0
    gave_up: bool = False  # the watchdog killed it for good
    closed: bool = False
    restarting: bool = False  # its process died and Ray restarts it: no chunk until it answers

    def saw(self, snapshot: Mapping[str, Any], now: float) -> None:
        """A progress report: new samples or tokens since the last one count as progress."""
        seen = (snapshot["samples"], snapshot["tokens"])
        if seen != self.seen:
            self.seen = seen
            self.last_progress = now


@dataclass
class RunningUnit:
    """A started unit: its chunk queue and its engine instances' replicas."""

    unit: EngineUnit
    queue: UnitQueue
    items: dict[str, PlannedSetting]
    shape: Waiting  # replicas per instance and the GPUs they take
    replicas: list[Replica] = field(default_factory=list)
    order: tuple[str, ...] = ()  # the benchmark's task ids (for sample order)
    instances: int = 0  # instances started so far (the next one's number)
    load_s: float | None = None  # an instance's load, as its first chunk reported it
    died: int = 0  # replicas whose process died beyond their restarts
    restarts: int = 0  # new instances after its last replica died (at most cluster.max_retries)

    def live(self, instance: int | None = None) -> list[Replica]:
        return [
            r
            for r in self.replicas
            if not r.closed and (instance is None or r.instance == instance)
        ]

    def add(self, instance: int, actor: Any, now: float) -> None:
        """A new replica of `instance`, idle until fed."""
        index = len(self.replicas)
        self.replicas.append(Replica(index, instance, actor, now, idle_since=now))

    def hand(self, replica: Replica, chunks: Sequence[ChunkRequest], now: float) -> None:
        """`chunks` go to `replica` (the caller submits the call)."""
        replica.chunks, replica.last_progress = tuple(chunks), now
        for chunk in chunks:
            logger.debug(
                "chunk %d of setting %s to replica %d (instance %d)",
                chunk.chunk,
                chunk.setting_key[:12],
                replica.index,
                replica.instance,
            )

    def counts(self) -> tuple[str, int, int]:
        """(engine key, open instances, live replicas), for the progress lines."""
        return self.unit.engine_key, len(self.open_instances()), len(self.live())

    def drop_in_flight(self) -> list[Any]:
        """The refs of the chunk calls in flight, forgotten (the unit failed)."""
        refs = [r.in_flight for r in self.replicas if r.in_flight is not None]
        for replica in self.replicas:
            replica.in_flight = None
        return refs

    def open_instances(self) -> list[int]:
        return sorted({r.instance for r in self.live()})

    def feed_order(self) -> list[Replica]:
        """Idle replicas in the order they take chunks: the oldest instance first (so newer
        ones run dry and give their GPUs back), the longest idle first within one (so a
        chain's chunks go round its replicas)."""
        idle = [r for r in self.live() if r.in_flight is None and not r.restarting]
        return sorted(idle, key=lambda r: (r.instance, r.idle_since, r.index))

    def state(self) -> UnitState:
        """The unit as analysis/schedule.py's rule sees it: samples left over one replica's
        measured rate (unknown before its first chunk came back)."""
        chains, shared = self.queue.left()
        rate = self.queue.samples_per_s
        return UnitState(
            self.unit.engine_key,
            self.shape.gpus,
            self.shape.replicas,
            len(self.open_instances()),
            self.load_s,
            tuple(n / rate for n in chains) if rate else (),
            shared / rate if rate else None,
            growable=self.died == 0,  # a death may repeat on a new instance: no more
        )


def unit_replicas(unit: EngineUnit, cluster: ClusterSpec, gpu_memory_gb: float | None) -> int:
    """`cluster.replicas`, as many as fit the GPU's memory where it is known
    (analysis/replicas.py's rule, which the plan counts by); one for a model over several GPUs
    (replicas share one GPU)."""
    if cluster.replicas > 1 and unit.engine.model.num_gpus > 1:
        logger.warning(
            "%s spans %d GPUs: one replica (replicas share one GPU)",
            unit.engine.model.name,
            unit.engine.model.num_gpus,
        )
        return 1
    if (
        gpu_memory_gb is None
        or cluster.replicas == 1
        or not get_backend(unit.engine.backend).loads_weights
    ):
        return cluster.replicas
    e = unit.engine
    work = EngineWork(e.model.size_b, e.dtype, e.quant, False, False, 1, ())
    per_replica = replica_memory_gb(
        work,
        max((i.setting.max_length for i in unit.settings), default=0),
        max((i.setting.samples_per_call for i in unit.settings), default=1),
    )
    fit = math.floor(USABLE_MEMORY_FRACTION * gpu_memory_gb / per_replica)
    if fit < cluster.replicas:
        logger.warning(
            "%s: %d of cluster.replicas=%d replicas of %.1f GB fit a %g GB GPU",
            engine_label(unit),
            max(1, fit),
            cluster.replicas,
            per_replica,
            gpu_memory_gb,
        )
    return max(1, min(cluster.replicas, fit))


def gpu_memory_gb(resources: Mapping[str, float]) -> float | None:
    """The memory of the cluster's GPUs as Ray names them (its `accelerator_type:<type>`
    resources, e.g. H100), the smallest where it names several; None where it names none or
    one the cost model's table does not know (an A100 without its size counts as 40 GB)."""
    memories = []
    for name in resources:
        if not name.startswith(ACCELERATOR_PREFIX):
            continue
        kind = name.removeprefix(ACCELERATOR_PREFIX)
        known = GPUS.get("a100-40gb") if kind.upper() == "A100" else GPUS.get(gpu_kind(kind) or "")
        if known is None or known.memory_gb is None:
            logger.warning("Ray names GPU type %r, which the cost model does not know", kind)
            return None
        memories.append(known.memory_gb)
    return min(memories, default=None)


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


def unit_shape(
    unit: EngineUnit, cluster_gpus: float, gpu_memory: float | None, cluster: ClusterSpec
) -> Waiting:
    """The unit's replicas per instance and the GPUs each takes; ClusterError when no GPU
    count of this cluster can hold it."""
    replicas = unit_replicas(unit, cluster, gpu_memory)
    return Waiting(unit, replicas, replica_gpus(unit, cluster_gpus, replicas, cluster))


@dataclass(frozen=True)
class Waiting:
    """A unit's shape on the cluster: replicas per instance and the GPUs each takes."""

    unit: EngineUnit
    replicas: int
    replica_gpus: float

    @property
    def gpus(self) -> int:
        """Whole GPUs one instance holds while it runs (its replicas together)."""
        return round(self.replica_gpus * self.replicas)


@dataclass
class StartQueue:
    """Units waiting for GPUs, in plan order, and the GPUs each started instance holds. What
    starts when is analysis/schedule.py's rule (`choose_starts`, which the plan's wall time
    replays): first instances of waiting units as GPUs free up, then more instances of long
    units. Asking Ray for every unit at once instead would leave replicas waiting in Ray's
    queue holding a chunk (the watchdog counts that time as no progress), and set up hundreds
    of units before the first result is handled."""

    capacity: int  # whole GPUs of the cluster
    waiting: list[Waiting] = field(default_factory=list)
    held: dict[tuple[str, int], int] = field(default_factory=dict)  # (unit, instance) -> GPUs
    rank: dict[str, int] = field(default_factory=dict)  # engine key -> its place in the plan

    def due(self, running: Sequence[RunningUnit]) -> list[Waiting | RunningUnit]:
        """What to start now: a waiting unit (its first instance, taken off the queue) or a
        running one (another instance), in order; their GPUs are counted as held by the
        caller's `hold` as each starts."""
        free = self.capacity - sum(self.held.values())
        states = [UnitState(w.unit.engine_key, w.gpus, w.replicas) for w in self.waiting]
        states += [r.state() for r in running if not r.queue.finished]
        states.sort(key=lambda u: self.rank.get(u.key, 0))
        by_key: dict[str, Waiting | RunningUnit] = {w.unit.engine_key: w for w in self.waiting}
        by_key.update({r.unit.engine_key: r for r in running})
        out = [by_key[key] for key in choose_starts(states, free)]
        started = {id(x) for x in out}
        self.waiting = [w for w in self.waiting if id(w) not in started]
        return out

    def never_starts(self) -> str:
        """Why the waiting units cannot start, each named with the GPUs it needs: nothing
        runs that would free GPUs for them (the nodes they need were lost, or never there)."""
        free = self.capacity - sum(self.held.values())
        needs = "; ".join(f"{engine_label(w.unit)} needs {w.gpus} GPU(s)" for w in self.waiting)
        return (
            f"{len(self.waiting)} unit(s) can never start: the cluster has {free} of "
            f"{self.capacity} GPU(s) free and nothing running would free more: {needs}. Their "
            "settings were not generated; what is stored is kept, and the same command, once "
            "the cluster has those GPUs, generates them"
        )

    def hold(self, engine_key: str, instance: int, gpus: int) -> None:
        self.held[(engine_key, instance)] = gpus

    def release(self, engine_key: str, instance: int) -> None:
        self.held.pop((engine_key, instance), None)


def start_queue(
    units: Sequence[EngineUnit], resources: Mapping[str, float], cluster: ClusterSpec
) -> tuple[StartQueue, list[tuple[EngineUnit, ClusterError]]]:
    """Every unit waiting for its GPUs on a cluster of Ray's `resources`, in plan order, and
    the units no GPU count of this cluster can hold, with why."""
    cluster_gpus = float(resources.get("GPU", 0))
    if cluster_gpus <= 0 and units:
        logger.info("the cluster has no GPUs: engines run on CPU")
    memory = gpu_memory_gb(resources)
    starts, unfit = StartQueue(math.floor(cluster_gpus)), []
    for rank, unit in enumerate(units):
        starts.rank[unit.engine_key] = rank
        try:
            starts.waiting.append(unit_shape(unit, cluster_gpus, memory, cluster))
        except ClusterError as e:
            unfit.append((unit, e))
    return starts, unfit


def unit_queue(
    shape: Waiting,
    benchmarks: Mapping[str, Any],
    writer: StoreWriter,
    checkpoint: ChunkPolicy,
) -> RunningUnit:
    """The unit's chunk queue, continuing from what the store holds."""
    unit = shape.unit
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
    queue = UnitQueue(works, checkpoint, batched)
    return RunningUnit(unit, queue, items, shape, order=order)


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
