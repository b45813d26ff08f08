"""The dispatcher's scheduling rule replayed on estimated unit durations, on hand-computed
schedules (orchestrator/analysis/schedule.py)."""

from __future__ import annotations

import pytest

from orchestrator.analysis.schedule import UnitJob, lower_bound, schedule_units


def jobs(*spec: tuple[int, float]) -> list[UnitJob]:
    return [UnitJob(f"u{i}", gpus, seconds) for i, (gpus, seconds) in enumerate(spec)]


def test_units_queue_in_plan_order_and_take_the_gpu_freed_first():
    # t=0: u0 on GPU 0, u1 on GPU 1; t=10 u0 ends: u2 on GPU 0 until 40
    s = schedule_units(jobs((1, 10), (1, 20), (1, 30)), 2)
    assert [(p.key, p.start_s, p.end_s, p.gpus) for p in s.placed] == [
        ("u0", 0.0, 10.0, (0,)),
        ("u1", 0.0, 20.0, (1,)),
        ("u2", 10.0, 40.0, (0,)),
    ]
    assert s.makespan_s == 40.0 and s.lower_bound_s == 30.0  # max(60 / 2, 30)
    assert s.gpu_seconds == 60.0 and s.longest_s == 30.0


@pytest.mark.parametrize(("gpus", "makespan"), [(1, 60.0), (2, 40.0), (3, 30.0), (64, 30.0)])
def test_more_gpus_shorten_the_wall_time_down_to_the_longest_unit(gpus, makespan):
    s = schedule_units(jobs((1, 10), (1, 20), (1, 30)), gpus)
    assert s.makespan_s == makespan
    assert s.makespan_s >= s.lower_bound_s == max(60.0 / gpus, 30.0)


def test_a_wide_unit_waits_for_its_gpus_while_narrow_ones_pass_it():
    # u1 needs both GPUs: it waits for u0; u2 (one GPU, another shape) starts at once
    s = schedule_units(jobs((1, 10), (2, 5), (1, 4)), 2)
    starts = {p.key: (p.start_s, p.gpus) for p in s.placed}
    assert starts == {"u0": (0.0, (0,)), "u1": (10.0, (0, 1)), "u2": (0.0, (1,))}
    assert s.makespan_s == 15.0


def test_wide_units_keep_their_order_behind_each_other():
    # u2 (one GPU) passes both two-GPU units; u3 starts when u1 has given its GPUs back
    s = schedule_units(jobs((1, 10), (2, 5), (1, 3), (2, 1)), 2)
    starts = {p.key: p.start_s for p in s.placed}
    assert starts == {"u0": 0.0, "u1": 10.0, "u2": 0.0, "u3": 15.0}


def test_units_ending_together_free_their_gpus_together():
    s = schedule_units(jobs((1, 5), (1, 5), (2, 1)), 2)
    assert [p.start_s for p in s.placed] == [0.0, 0.0, 5.0] and s.makespan_s == 6.0


def test_units_that_need_no_gpu_start_at_once_and_too_wide_ones_are_named():
    s = schedule_units(jobs((0, 7), (4, 1), (1, 3)), 2)
    assert s.unplaceable == ("u1",)
    assert [(p.key, p.start_s) for p in s.placed] == [("u0", 0.0), ("u2", 0.0)]
    assert s.makespan_s == 7.0 and s.gpu_seconds == 3.0


def test_a_cluster_without_gpus_is_an_error_and_the_bound_is_the_larger_term():
    with pytest.raises(ValueError, match="at least one GPU"):
        schedule_units(jobs((1, 1)), 0)
    assert lower_bound(jobs((1, 10), (1, 10), (1, 10)), 2) == 15.0
    assert lower_bound(jobs((1, 10), (1, 1)), 8) == 10.0
