"""Chunk planning: sizes, sequential streams one chunk at a time on any replica (longest first),
chunks of a replica that died handed out again, resume from stored chunks."""

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
    first = q.next_chunks()
    assert [c.task_ids for c in first] == [TASKS[:2]] and first[0].chunk == 0
    q.returned("k", None)
    q.measured(samples=2, seconds=4.0)  # 0.5 samples/s: 10 s is 5 samples
    second = q.next_chunks()
    assert second[0].task_ids == TASKS[2:7] and second[0].chunk == 1 and not second[0].first


def test_fixed_samples_are_whole_problems():
    [sampled] = settings("decoding=t0.8", "n_samples=4", "seed_policy=per_sample")
    q, _ = queue(sampled, ChunkPolicy(every_samples=10))
    assert len(q.next_chunks()[0].task_ids) == 2  # 10 samples = 2 problems of 4 samples


def test_a_sequential_stream_goes_one_chunk_at_a_time_with_the_state_before_it():
    [stream] = settings("decoding=t0.8")  # seed_policy=harness: one global stream
    assert stream.sequential_stream
    q, _ = queue(stream)
    first = q.next_chunks()
    assert first[0].first and q.next_chunks() == []  # the next waits for this one
    q.returned("k", b"state-after-0")
    nxt = q.next_chunks()[0]  # whichever replica asks: it carries the stream's state
    assert not nxt.first and nxt.stream_state == b"state-after-0"


def test_independent_settings_feed_every_replica():
    [greedy] = settings("decoding=greedy")
    q, _ = queue(greedy)
    a, b = q.next_chunks(), q.next_chunks()
    assert a[0].task_ids == TASKS[:2] and b[0].task_ids == TASKS[2:4]
    assert a[0].chunk != b[0].chunk


def test_batched_chunks_take_every_unfinished_setting():
    one, two = settings("decoding=greedy", "template=own,instruct", "backend=vllm")
    works = [resume(f"k{i}", s, TASKS, Stored())[0] for i, s in enumerate((one, two))]
    q = UnitQueue(works, ChunkPolicy(batched_samples=3), batched=True)
    chunks = q.next_chunks()
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


def test_chains_go_first_a_begun_one_then_the_longest():
    """A chain cannot be shared: an idle replica continues one it began, else starts the
    one with the most problems left, and takes other settings only when no chain is free."""
    greedy, stream, other = settings("decoding=greedy,t0.8,t0.2")
    assert stream.sequential_stream and other.sequential_stream
    works = [
        resume("k0", greedy, TASKS, NOTHING)[0],
        resume("k1", stream, TASKS, Stored(frozenset(TASKS[:6]), 3, b"s", TASKS[5]))[0],
        resume("k2", other, TASKS, NOTHING)[0],
    ]
    q = UnitQueue(works, SMALL_FIRST, batched=False)
    # k1 has begun (a stored prefix) but has 4 problems left; k2 has 10
    assert [q.next_chunks()[0].setting_key for _ in range(3)] == ["k1", "k2", "k0"]
    q.returned("k2", b"after")
    assert q.next_chunks()[0].setting_key == "k2"  # begun now: before the greedy one


def test_a_chunk_whose_replica_died_is_handed_out_again_first():
    greedy, stream = settings("decoding=greedy,t0.8")
    works = [resume(f"k{i}", s, TASKS, NOTHING)[0] for i, s in enumerate((greedy, stream))]
    q = UnitQueue(works, SMALL_FIRST, batched=False)
    lost = q.next_chunks()  # the chain's first chunk
    other = q.next_chunks()
    assert lost[0].setting_key == "k1" and other[0].setting_key == "k0"
    q.requeue(lost)
    assert q.left() == ([2 + 8], 8)  # the chain: its lost chunk and the rest; 8 greedy
    again = q.next_chunks()
    assert again == lost  # the same request: the same problems, chunk and stream state
    assert q.next_chunks()[0].setting_key == "k0"  # the chain waits for its chunk in flight
    assert not q.finished
