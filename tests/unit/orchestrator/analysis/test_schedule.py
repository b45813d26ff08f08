"""The rule the dispatcher asks what to start, and its replay on estimated durations, on
hand-computed schedules (orchestrator/analysis/schedule.py)."""

from __future__ import annotations

import math

import pytest

from orchestrator.analysis.schedule import (
    UnitPlan,
    UnitState,
    choose_starts,
    finish_s,
    instance_saves_s,
    lower_bound,
    replay,
)


def shared(*spec: tuple[int, float], load: float = 0.0) -> list[UnitPlan]:
    """Units of `gpus` GPUs, one replica, with `seconds` of shared work each."""
    return [UnitPlan(f"u{i}", g, 1, math.inf, load, (), s) for i, (g, s) in enumerate(spec)]


def placed(s) -> dict[str, tuple[float, float, int]]:
    return {p.key: (p.start_s, p.end_s, p.instances) for p in s.placed}


def test_a_freed_gpu_goes_to_a_waiting_unit_then_to_another_instance_of_a_long_one():
    # t=0: u0 and u1 start; t=10 u0 ends: u2 (waiting) starts; t=20 u1 ends and nothing
    # waits: u2's 20 s left go on two instances, 10 s each
    s = replay(shared((1, 10), (1, 20), (1, 30)), 2)
    assert placed(s) == {"u0": (0, 10, 1), "u1": (0, 20, 1), "u2": (10, 30, 2)}
    assert s.makespan_s == 30.0 == s.lower_bound_s and s.gpu_seconds == 60.0


def test_another_instance_starts_only_when_it_pays_for_its_load():
    # load 5: u2 starts at 15 (u0 ended), at 25 it has 25 s left; another instance loads
    # until 30 while the first does 5 s, then both share 20 s: it ends at 40, 10 s sooner
    s = replay(shared((1, 10), (1, 20), (1, 30), load=5.0), 2)
    assert placed(s)["u2"] == (15, 40, 2)
    assert s.gpu_seconds == pytest.approx(15 + 25 + 25 + 15)
    # with 7 s left at 25 another instance would save 1 s < its 5 s load: none starts
    short = replay(shared((1, 10), (1, 20), (1, 12), load=5.0), 2)
    assert placed(short)["u2"] == (15, 32, 1)


def test_chains_run_one_stream_each_and_take_only_the_instances_they_use():
    chains = [UnitPlan("c", 1, 1, math.inf, 0.0, (10.0, 10.0, 10.0))]
    assert placed(replay(chains, 8)) == {"c": (0, 10, 3)}  # three GPUs, five stay free
    lone = [UnitPlan("c", 1, 1, math.inf, 2.0, (30.0,))]
    assert placed(replay(lone, 8)) == {"c": (0, 32, 1)}  # nothing another instance can take


def test_replicas_share_an_instance_up_to_their_cap():
    # four replicas, capped at twice one stream: 100 s of shared work in 50 s after the load
    capped = [UnitPlan("u", 1, 4, 2.0, 3.0, (), 100.0)]
    assert replay(capped, 1).makespan_s == pytest.approx(53.0)
    # two replicas, three chains of 10 s: two at once, then the third alone
    chains = [UnitPlan("c", 1, 2, math.inf, 0.0, (10.0, 10.0, 10.0))]
    assert replay(chains, 1).makespan_s == pytest.approx(20.0)
    assert replay(chains, 2).makespan_s == pytest.approx(10.0)  # a second instance: all three
    # a lone chain on an instance of 4 replicas capped at 2 runs at full speed
    lone = [UnitPlan("c", 1, 4, 2.0, 0.0, (10.0,))]
    assert replay(lone, 1).makespan_s == pytest.approx(10.0)


def test_a_wide_unit_waits_for_its_gpus_while_narrow_ones_pass_it():
    # u1 needs both GPUs: u2 (one GPU) passes it; when u2 ends u1 still waits, and the free
    # GPU is kept for it rather than given to u0 as a second instance
    s = replay(shared((1, 10), (2, 5), (1, 4)), 2)
    assert placed(s) == {"u0": (0, 10, 1), "u1": (10, 15, 1), "u2": (0, 4, 1)}


def test_units_without_gpus_start_at_once_and_too_wide_ones_are_named():
    s = replay(shared((0, 7), (4, 1), (1, 3)), 2)
    assert s.unplaceable == ("u1",)
    # u0 holds no GPU; u2 takes both, as two instances: nothing else waits for them
    assert placed(s) == {"u0": (0, 7, 1), "u2": (0, 1.5, 2)}
    assert s.makespan_s == 7.0 and s.gpu_seconds == 3.0
    with pytest.raises(ValueError, match="at least one GPU"):
        replay(shared((1, 1)), 0)


def test_a_unit_without_gpus_or_work_starts_and_ends_at_once():
    # a model-free engine (replay, a toy backend): no GPU, no load, no work to time
    for grow in (True, False):
        s = replay([UnitPlan("free", 0, 1, math.inf, 0.0)], 1, grow=grow)
        assert placed(s) == {"free": (0.0, 0.0, 1)}
        assert s.makespan_s == 0.0 and s.gpu_seconds == 0.0
    s = replay([UnitPlan("free", 0, 1, math.inf, 0.0), *shared((1, 4))], 1)
    assert placed(s) == {"free": (0.0, 0.0, 1), "u0": (0.0, 4.0, 1)}


def test_one_instance_each_without_growing():
    s = replay(shared((1, 10), (1, 20), (1, 30)), 2, grow=False)
    assert placed(s)["u2"] == (10, 40, 1)


def test_the_lower_bound_is_the_least_gpu_time_or_a_load_and_its_longest_chain():
    units = [UnitPlan("a", 1, 4, 2.0, 5.0, (40.0,), 60.0), UnitPlan("b", 1, 1, 1.0, 5.0, (), 10.0)]
    # a: 5 + 100 / 2 = 55 GPU-s; b: 15; on 2 GPUs 35; a's load and chain: 45
    assert lower_bound(units, 2) == pytest.approx(45.0)
    assert lower_bound(units, 1) == pytest.approx(70.0)


def test_the_rules_estimates():
    assert finish_s([10.0, 2.0], 0.0, 4) == 10.0  # the longest chain
    assert finish_s([10.0, 2.0], 20.0, 4) == 10.0  # (12 + 20) / 4 = 8 < 10
    assert finish_s([], 20.0, 4) == 5.0
    assert finish_s([3.0, 3.0, 3.0], 0.0, 2) == 4.5  # two streams for three chains
    unit = UnitState("u", 1, 1, 1, 2.0, (), 20.0)
    assert instance_saves_s(unit) == pytest.approx(20 - (2 + 18 / 2))


def test_first_instances_in_plan_order_then_more_for_the_unit_that_ends_last():
    waiting = [UnitState("a", 1, 1), UnitState("b", 2, 1), UnitState("c", 1, 1)]
    assert choose_starts(waiting, 2) == ["a", "c"]  # b does not fit: c passes it
    running = [
        UnitState("short", 1, 1, 1, 1.0, (), 10.0),
        UnitState("long", 1, 1, 1, 1.0, (), 100.0),
        UnitState("unmeasured", 1, 1, 1, None, (), None),  # its first chunk is not back
        UnitState("died", 1, 1, 1, 1.0, (), 500.0, growable=False),
    ]
    # the long unit ends last: it gets instances (100 s over 10 streams, loads included, is
    # under the short one's 10 s after nine more), then the short one, while each saves more
    # than its load (a third for the short one would save 0.6 s against a 1 s load)
    starts = choose_starts(running, 14)
    assert starts == ["long"] * 9 + ["short"] * 2
    # while a unit waits, no unit grows: its GPUs stay free
    assert choose_starts([*running, UnitState("wide", 8, 1)], 6) == []
