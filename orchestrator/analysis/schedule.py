"""When each engine unit runs on a cluster of N GPUs, by the dispatcher's rule. Pure: no I/O.

The dispatcher (run/execute/dispatch.py) starts units in plan order (the longest first,
run/plan/planner.py) as the cluster's GPUs allow: a unit holds `num_gpus` whole GPUs from its
start to its end (its R replicas take `num_gpus / R` each, and every one-GPU unit has the same
`cluster.replicas`, so R of them fill one GPU exactly; a model over several GPUs runs one
replica), and whenever a unit ends the next units that fit start, one queue per width, a
narrow unit passing a wide one that does not fit yet (`next_fitting`, the rule Ray's own
queues follow for requests of different shapes). The dispatcher asks Ray for a unit's replicas
only then, so Ray places them at once.

`schedule_units` replays that rule on the units' estimated durations: the makespan, and its
lower bound max(total GPU-seconds / N, the longest unit), which no order can beat.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class UnitJob:
    """One engine unit as the cluster sees it."""

    key: str
    gpus: int  # whole GPUs it holds (0: it needs none, e.g. a replay engine)
    seconds: float  # from its start (the replicas' load) to its last chunk


@dataclass(frozen=True)
class Placed:
    key: str
    start_s: float
    end_s: float
    gpus: tuple[int, ...]  # the GPU indices it held


@dataclass(frozen=True)
class Schedule:
    n_gpus: int
    makespan_s: float  # the last unit's end
    lower_bound_s: float  # max(gpu_seconds / n_gpus, longest_s)
    gpu_seconds: float  # sum of gpus x seconds over the placed units
    longest_s: float  # the longest placed unit
    placed: tuple[Placed, ...]  # in plan order
    unplaceable: tuple[str, ...]  # units that need more GPUs than the cluster has

    @property
    def gpu_hours(self) -> float:
        return self.gpu_seconds / 3600.0


def lower_bound(jobs: Sequence[UnitJob], n_gpus: int) -> float:
    """No schedule on `n_gpus` GPUs ends before the work spread evenly or the longest unit."""
    work = sum(j.gpus * j.seconds for j in jobs)
    longest = max((j.seconds for j in jobs), default=0.0)
    return max(work / n_gpus if n_gpus else 0.0, longest)


def next_fitting(widths: Sequence[int], free: int) -> int | None:
    """The position of the earliest waiting unit (of `widths` GPUs each, in plan order) that
    fits `free` GPUs, skipping any unit behind an earlier one of its own width that does not:
    one queue per width, and a narrow unit may pass a wide one. The dispatcher starts units by
    this rule (run/execute/units.py StartQueue) and `schedule_units` replays it."""
    blocked: set[int] = set()
    for pos, gpus in enumerate(widths):
        if gpus in blocked:
            continue
        if gpus <= free:
            return pos
        blocked.add(gpus)
    return None


def schedule_units(jobs: Sequence[UnitJob], n_gpus: int) -> Schedule:
    """Place `jobs` (in plan order) on `n_gpus` GPUs by the dispatcher's rule (module
    docstring): at time 0 and whenever a unit ends, start every queued unit that fits."""
    if n_gpus < 1:
        raise ValueError(f"a cluster to schedule on needs at least one GPU, got {n_gpus}")
    unplaceable = tuple(j.key for j in jobs if j.gpus > n_gpus)
    pending = [i for i, j in enumerate(jobs) if j.gpus <= n_gpus]
    free_gpus = list(range(n_gpus))
    running: list[tuple[float, int, tuple[int, ...]]] = []  # (end, job index, gpus)
    starts: dict[int, tuple[float, tuple[int, ...]]] = {}
    now = 0.0
    while pending:
        while (pos := next_fitting([jobs[i].gpus for i in pending], len(free_gpus))) is not None:
            index = pending.pop(pos)
            taken = tuple(free_gpus[: jobs[index].gpus])
            del free_gpus[: jobs[index].gpus]
            starts[index] = (now, taken)
            running.append((now + jobs[index].seconds, index, taken))
        if not pending:
            break
        # the units that end next give their GPUs back, all of them before anything starts
        now = min(end for end, _, _ in running)
        released = [g for end, _, gpus in running if end == now for g in gpus]
        running = [r for r in running if r[0] != now]
        free_gpus = sorted(free_gpus + released)
    placed = tuple(
        Placed(jobs[i].key, start, start + jobs[i].seconds, gpus)
        for i, (start, gpus) in sorted(starts.items())
    )
    kept = [jobs[i] for i in starts]
    return Schedule(
        n_gpus=n_gpus,
        makespan_s=max((p.end_s for p in placed), default=0.0),
        lower_bound_s=lower_bound(kept, n_gpus),
        gpu_seconds=sum(j.gpus * j.seconds for j in kept),
        longest_s=max((j.seconds for j in kept), default=0.0),
        placed=placed,
        unplaceable=unplaceable,
    )
