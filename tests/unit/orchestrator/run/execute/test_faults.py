"""What the dispatcher does when an engine process dies (execute/faults.py's rule, the start
queue that gives a unit whose last replica died a new instance) and what the run records of it
(the runs row's faults, as `status` shows them). Pure: no Ray."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from orchestrator.report.screens.statusreport import fault_line, shown_faults
from orchestrator.run.execute.faults import (
    ActorFate,
    Death,
    Fault,
    FaultKind,
    FaultLog,
    after_death,
    faults_json,
    lost_nodes,
)
from orchestrator.run.execute.units import StartQueue
from tests.unit.orchestrator.run.execute.test_units import planned, running
from workers.spec import ChunkRequest

AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    ("fate", "gave_up", "others", "restarts", "death"),
    [
        (ActorFate.RESTARTING, False, 0, 0, Death.RESTARTING),  # Ray restarts it
        (ActorFate.DEAD, False, 1, 0, Death.REPLACED),  # the unit's other replica goes on
        (ActorFate.DEAD, False, 0, 0, Death.NEW_INSTANCE),  # its last: a new instance
        (ActorFate.DEAD, False, 0, 1, Death.NEW_INSTANCE),
        (ActorFate.DEAD, False, 0, 2, Death.UNIT_FAILED),  # max_retries=2 new instances spent
        (ActorFate.INIT_FAILED, False, 0, 0, Death.UNIT_FAILED),  # cannot load: no retry
        (ActorFate.RESTARTING, True, 1, 0, Death.UNIT_FAILED),  # the watchdog gave up on it
    ],
)
def test_a_dead_replica_is_restarted_replaced_or_its_unit_failed(
    fate, gave_up, others, restarts, death
):
    assert after_death(fate, gave_up, others, restarts, max_retries=2) is death


def test_a_unit_whose_last_replica_died_gets_a_new_instance_when_gpus_free(tmp_path):
    """The start queue treats a started unit with no open instance as waiting: its next
    instance starts once its GPUs are free, before any growth of other units."""
    a, b = planned(tmp_path, "precision=bf16,fp16")
    lost, other = running(a), running(b)
    queue = StartQueue(2)
    queue.hold(a.engine_key, 0, 1)
    queue.hold(b.engine_key, 0, 1)
    assert queue.due([lost, other]) == []
    # its replica died beyond its restarts: closed, its instance's GPU given back...
    lost.replicas[0].closed = True
    queue.release(a.engine_key, 0)
    # ...on a cluster that lost that GPU with its node: nothing starts until one frees
    queue.capacity = 1
    assert queue.due([lost, other]) == []
    queue.release(b.engine_key, 0)
    assert queue.due([lost, other]) == [lost]


def test_a_restarting_replica_takes_no_chunk_until_it_answers(tmp_path):
    [unit] = planned(tmp_path)
    unit_run = running(unit, replicas=2)
    first, second = unit_run.replicas
    first.restarting = True
    assert unit_run.feed_order() == [second]
    assert unit_run.live() == [first, second]  # it still holds its instance


def test_the_run_records_each_fault_with_what_was_requeued(tmp_path):
    [unit] = planned(tmp_path)
    item = unit.settings[0]
    recorded: list[Fault] = []
    log = FaultLog(recorded.append, lambda: AT, nodes={"n1", "n2"})
    log.count_nodes({"n1", "n3"})  # n2 gone, n3 joined
    chunks = [ChunkRequest(item.key, item.setting, i, (f"Python/{i}",)) for i in range(2)]
    log.add(FaultKind.ENGINE_RESTARTING, "tiny/hf/fp32/none replica 0", "ActorUnavailable", chunks)
    assert [f.kind for f in recorded] == [FaultKind.NODE_LOST, FaultKind.ENGINE_RESTARTING]
    assert recorded[0].what == "n2" and log.nodes == {"n1", "n3"}
    assert recorded[1].requeued_chunks == 2 and recorded[1].requeued_settings == (item.key,)
    # as the runs row holds them, and as `status` shows them
    shown = shown_faults(faults_json(recorded))
    assert [fault_line(f) for f in shown] == [
        "03:04:05 node lost: n2 (its engines' chunks go back to the queue)",
        "03:04:05 engine restarting: tiny/hf/fp32/none replica 0; 2 chunk(s) requeued, of "
        f"{item.key[:12]} (ActorUnavailable)",
    ]
    assert faults_json([]) is None and shown_faults(None) == []
    assert lost_nodes({"a", "b"}, {"b"}) == ["a"]
