"""Chunk planning: sizes, sequential streams pinned to replica 0, resume from stored chunks."""

from __future__ import annotations

import pytest

from orchestrator.run.config.load import load_run_config
from orchestrator.run.config.specs import ChunkPolicy
from orchestrator.run.execute.chunks import Stored, UnitQueue, resume
from orchestrator.run.prepare.grid import Environment, expand_grid

TASKS = tuple(f"Python/{i}" for i in range(10))


def settings(*overrides):
    config = load_run_config(["model=tiny", *overrides])
    return [c.setting for c in expand_grid(config, "h", Environment())]


SMALL_FIRST = ChunkPolicy(first_samples=2)
NOTHING = Stored()


def queue(setting, policy=SMALL_FIRST, batched=False, stored=NOTHING):
    work, restart = resume("k", setting, TASKS, stored)
    return UnitQueue([work], policy, batched), restart


def test_time_sized_chunks_start_small_and_follow_the_measured_rate():
    [greedy] = settings("decoding=greedy")
    q, _ = queue(greedy, ChunkPolicy(every_s=10, first_samples=2))
    first = q.next_chunks(0)
    assert [c.task_ids for c in first] == [TASKS[:2]] and first[0].chunk == 0
    q.returned("k", None)
    q.measured(samples=2, seconds=4.0)  # 0.5 samples/s: 10 s is 5 samples
    second = q.next_chunks(0)
    assert second[0].task_ids == TASKS[2:7] and second[0].chunk == 1 and not second[0].first


def test_fixed_samples_are_whole_problems():
    [sampled] = settings("decoding=t0.8", "n_samples=4", "seed_policy=per_sample")
    q, _ = queue(sampled, ChunkPolicy(every_samples=10))
    assert len(q.next_chunks(0)[0].task_ids) == 2  # 10 samples = 2 problems of 4 samples


def test_a_sequential_stream_goes_to_replica_0_one_chunk_at_a_time():
    [stream] = settings("decoding=t0.8")  # seed_policy=harness: one global stream
    assert stream.sequential_stream
    q, _ = queue(stream)
    assert q.next_chunks(1) == []  # never another replica
    first = q.next_chunks(0)
    assert first[0].first and q.next_chunks(0) == []  # the next waits for this one
    q.returned("k", b"state-after-0")
    nxt = q.next_chunks(0)[0]
    assert not nxt.first and nxt.stream_state == b"state-after-0"


def test_independent_settings_feed_every_replica():
    [greedy] = settings("decoding=greedy")
    q, _ = queue(greedy)
    a, b = q.next_chunks(0), q.next_chunks(1)
    assert a[0].task_ids == TASKS[:2] and b[0].task_ids == TASKS[2:4]
    assert a[0].chunk != b[0].chunk


def test_batched_chunks_take_every_unfinished_setting():
    one, two = settings("decoding=greedy", "template=own,instruct", "backend=vllm")
    works = [resume(f"k{i}", s, TASKS, Stored())[0] for i, s in enumerate((one, two))]
    q = UnitQueue(works, ChunkPolicy(batched_samples=3), batched=True)
    chunks = q.next_chunks(0)
    assert [(c.setting_key, c.task_ids) for c in chunks] == [("k0", TASKS[:3]), ("k1", TASKS[:3])]


def test_resume_generates_only_what_is_not_stored():
    [greedy] = settings("decoding=greedy")
    stored = Stored(frozenset({TASKS[0], TASKS[5]}), next_chunk=3)
    work, restart = resume("k", greedy, TASKS, stored)
    assert not restart and TASKS[0] not in work.remaining and TASKS[5] not in work.remaining
    assert work.next_chunk == 3 and len(work.remaining) == 8


@pytest.mark.parametrize(
    ("stored", "restart"),
    [
        (Stored(frozenset(TASKS[:3]), 2, b"s", TASKS[2]), False),  # a prefix with its state
        (Stored(frozenset(TASKS[:3]), 2, None, TASKS[2]), True),  # no state stored
        (Stored(frozenset({TASKS[0], TASKS[2]}), 2, b"s", TASKS[2]), True),  # a gap
    ],
)
def test_a_sequential_stream_resumes_only_from_a_prefix_with_its_state(stored, restart):
    [stream] = settings("decoding=t0.8")
    work, again = resume("k", stream, TASKS, stored)
    assert again is restart
    if not restart:
        assert work.remaining == list(TASKS[3:]) and work.stream_state == b"s" and work.started
    else:
        assert work.remaining == list(TASKS) and not work.started


def test_replica_0_of_several_takes_the_sequential_streams_first():
    """Only replica 0 can generate a harness-stream setting: with other replicas to share the
    rest, it starts those first (the unit's critical path); alone, it keeps the grid order."""
    greedy, stream = settings("decoding=greedy,t0.8")
    assert stream.sequential_stream and not greedy.sequential_stream
    works = [resume(f"k{i}", s, TASKS, Stored())[0] for i, s in enumerate((greedy, stream))]
    q = UnitQueue(works, SMALL_FIRST, batched=False, replicas=2)
    assert q.next_chunks(0)[0].setting_key == "k1"
    assert q.next_chunks(1)[0].setting_key == "k0"
    alone = [resume(f"k{i}", s, TASKS, Stored())[0] for i, s in enumerate((greedy, stream))]
    assert UnitQueue(alone, SMALL_FIRST, batched=False).next_chunks(0)[0].setting_key == "k0"
