"""What a cluster did to a run and what the dispatcher did about it: a node lost, an engine
process that died (restarted by Ray, or replaced by a new instance of its unit), the chunks
that went back to the queue. The driver records each in its run's row (record.py), so `status`
says it while the run goes on. Plain data and pure rules, no Ray."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import StrEnum

from workers.spec import ChunkRequest

logger = logging.getLogger(__name__)


class FaultKind(StrEnum):
    NODE_LOST = "node_lost"  # a node left the cluster (its raylet died or its machine did)
    ENGINE_RESTARTING = "engine_restarting"  # an engine process died; Ray restarts it
    ENGINE_REPLACED = "engine_replaced"  # dead beyond its restarts; the unit's others go on
    UNIT_RESTARTED = "unit_restarted"  # its last engine dead: the unit gets a new instance


class ActorFate(StrEnum):
    """What a dead engine call says of its actor (raycluster.actor_fate reads Ray's error)."""

    RESTARTING = "restarting"  # the process died and Ray restarts it (restarts left)
    DEAD = "dead"  # the process died beyond its restarts, or its node with it
    INIT_FAILED = "init_failed"  # its engine could not load: a new process would not either


class Death(StrEnum):
    """What the dispatcher does with a replica whose process died (`after_death`)."""

    RESTARTING = "restarting"  # keep it: Ray restarts it; it takes chunks once it answers
    REPLACED = "replaced"  # close it: the unit's other live replicas take its chunks
    NEW_INSTANCE = "new_instance"  # close it: the unit waits for GPUs for a new instance
    UNIT_FAILED = "unit_failed"  # the unit's unfinished settings fail with the error


@dataclass(frozen=True)
class Fault:
    at: datetime
    kind: FaultKind
    what: str  # the node's id, or the engine and its replica
    detail: str  # Ray's word on it, or what the dispatcher did
    requeued_chunks: int = 0  # chunks in flight that went back to the queue
    requeued_settings: tuple[str, ...] = ()  # their settings' keys

    def text(self) -> str:
        """One line of `status`."""
        line = f"{self.at:%H:%M:%S} {self.kind.value.replace('_', ' ')}: {self.what}"
        if self.requeued_chunks:
            line += (
                f"; {self.requeued_chunks} chunk(s) of {len(self.requeued_settings)} "
                "setting(s) requeued"
            )
        return f"{line} ({self.detail})" if self.detail else line


def after_death(
    fate: ActorFate, gave_up: bool, others_live: int, unit_restarts: int, max_retries: int
) -> Death:
    """The rule for a replica whose process died: Ray restarts it while it has restarts left;
    past them its chunks go to the unit's other live replicas, or, when it was the last, to a
    new instance of the unit, at most `max_retries` times per unit. An engine that cannot load,
    or one the watchdog gave up on (it hung), fails its unit: a new process would do the same."""
    if fate is ActorFate.INIT_FAILED or gave_up:
        return Death.UNIT_FAILED
    if fate is ActorFate.RESTARTING:
        return Death.RESTARTING
    if others_live:
        return Death.REPLACED
    return Death.NEW_INSTANCE if unit_restarts < max_retries else Death.UNIT_FAILED


def lost_nodes(known: Iterable[str], alive: Iterable[str]) -> list[str]:
    """The nodes seen alive before and not now."""
    now = set(alive)
    return sorted(n for n in set(known) if n not in now)


def faults_json(faults: Sequence[Fault]) -> str | None:
    """The runs row's `faults_json` (None: nothing happened)."""
    if not faults:
        return None
    rows = []
    for fault in faults:
        row = asdict(fault)
        row.update(at=fault.at.isoformat(), kind=fault.kind.value)
        row["requeued_settings"] = list(fault.requeued_settings)
        rows.append(row)
    return json.dumps(rows)


# what the run records of a replica's death, by what the dispatcher does about it
DEATH_FAULT = {
    Death.RESTARTING: FaultKind.ENGINE_RESTARTING,
    Death.REPLACED: FaultKind.ENGINE_REPLACED,
    Death.NEW_INSTANCE: FaultKind.UNIT_RESTARTED,
}


@dataclass
class FaultLog:
    """The faults of a run as the dispatcher meets them: logged, and handed to the run's
    record (`record`), which writes them where `status` reads them."""

    record: Callable[[Fault], None]
    clock: Callable[[], datetime]
    nodes: set[str] = field(default_factory=set)  # the live nodes when last counted

    def add(
        self, kind: FaultKind, what: str, detail: str, chunks: Sequence[ChunkRequest] = ()
    ) -> None:
        keys = tuple(dict.fromkeys(chunk.setting_key for chunk in chunks))
        fault = Fault(self.clock(), kind, what, detail, len(chunks), keys)
        logger.warning("%s", fault.text())
        self.record(fault)

    def count_nodes(self, alive: set[str]) -> None:
        """The cluster's live nodes now: one seen before and gone is recorded as lost."""
        for node in lost_nodes(self.nodes, alive):
            self.add(FaultKind.NODE_LOST, node, "its engines' chunks go back to the queue")
        self.nodes = alive
