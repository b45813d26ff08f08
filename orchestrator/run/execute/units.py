"""What the dispatcher keeps of a run (execute/dispatch.py): its options, its summary, and the
live state of each engine unit and replica. Plain data, no Ray."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orchestrator.run.config.specs import ChunkPolicy, ClusterSpec
from orchestrator.run.execute.chunks import UnitQueue
from orchestrator.run.plan.planner import EngineUnit, PlannedSetting
from workers.spec import ChunkRequest, SandboxLimits


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
