"""How engine units run on a cluster of N GPUs: the rule the dispatcher asks what to start, and
its replay on estimated durations for the plan. Pure: no I/O.

A unit (one engine: model, backend, dtype, quant) runs as one or more *instances*. An instance
loads the model once onto `gpus` whole GPUs and runs `replicas` engine processes on them; each
process is a *stream* that generates one chunk at a time, and the unit's chunks go to whichever
stream is idle. A setting on the harness's random stream (seed_policy=harness with sampling) is
a *chain*: its chunks run one at a time, in order, each continuing from the stream state the
previous one saved, on any stream of any instance. Every other setting's chunks are *shared*:
any idle stream takes them. A stream takes a chain it has begun first, then the longest chain
not begun, then shared work (run/execute/chunks.py).

The rule (`choose_starts`), asked whenever GPUs are free:

1. units not started yet, in plan order (the longest first, run/plan/planner.py), each with its
   first instance; a narrow unit passes a wide one that does not fit yet (`next_fitting`, the
   rule Ray's own queues follow for requests of different shapes);
2. when no unit waits, more instances of started units: first the unit that would end last,
   when one more instance would end it sooner by more than that instance's load (it pays for
   its model load), as long as GPUs are free.

An instance whose streams have nothing to take gives its GPUs back. `replay` runs the rule on
the plan's estimates: streams progress as a fluid, k busy streams of an instance decoding
together min(k, cap) times one stream's rate (analysis/replicas.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

EPS_S = 1e-9  # seconds of work below which a chain or the shared work counts as done
# An instance must save more than its load by this much: rounding must not start instances
# that save nothing (the replay would open and close them at the same moment).
MIN_SAVING_S = 1e-6


# -- the rule ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class UnitState:
    """What the rule knows of a unit now. Work is in seconds of one stream of a full instance
    (the dispatcher: samples left over the measured samples/s of one stream)."""

    key: str
    gpus: int  # whole GPUs one instance holds (0: none, e.g. a CPU or model-free engine)
    replicas: int  # streams one instance runs
    instances: int = 0  # instances running or loading (0: not started)
    load_s: float | None = None  # one instance's load (None: not measured yet)
    chains_s: tuple[float, ...] = ()  # each chain's seconds left (one stream at a time)
    shared_s: float | None = None  # the shared work's seconds left (None: not measured yet)
    growable: bool = True  # False: never given another instance (one of its replicas died)


def finish_s(chains: Sequence[float], shared: float, streams: int) -> float:
    """How long `streams` streams take to finish: the longest chain, or the work over the
    streams it can keep busy (only as many as chains once the shared work is done)."""
    if shared <= EPS_S and not any(c > EPS_S for c in chains):
        return 0.0
    if streams <= 0:
        return math.inf
    busy = streams if shared > EPS_S else min(streams, len(chains))
    return max(max(chains, default=0.0), (sum(chains) + shared) / busy)


def instance_saves_s(unit: UnitState) -> float:
    """How much sooner the unit ends with one more instance, whose streams join only after its
    load (meanwhile the running streams go on). 0 when its work or load is not known yet."""
    if unit.load_s is None or unit.shared_s is None:
        return 0.0
    streams = unit.instances * unit.replicas
    now = finish_s(unit.chains_s, unit.shared_s, streams)
    load = unit.load_s
    chains = sorted(unit.chains_s, reverse=True)
    running = min(streams, len(chains))
    later_chains = [max(0.0, c - load) for c in chains[:running]] + chains[running:]
    spare = max(0, streams - len(chains))
    later_shared = max(0.0, unit.shared_s - spare * load)
    later = load + finish_s(later_chains, later_shared, streams + unit.replicas)
    return now - later


def worth_an_instance(unit: UnitState) -> bool:
    """Another instance pays for its load: the unit ends sooner by more than the load."""
    if unit.instances == 0 or unit.gpus == 0 or not unit.growable or unit.load_s is None:
        return False
    return instance_saves_s(unit) > unit.load_s + MIN_SAVING_S


def next_fitting(widths: Sequence[int], free: int) -> int | None:
    """The position of the earliest waiting unit (of `widths` GPUs each, in plan order) that
    fits `free` GPUs, skipping any unit behind an earlier one of its own width that does not:
    one queue per width, and a narrow unit may pass a wide one."""
    blocked: set[int] = set()
    for pos, gpus in enumerate(widths):
        if gpus in blocked:
            continue
        if gpus <= free:
            return pos
        blocked.add(gpus)
    return None


def choose_starts(units: Sequence[UnitState], free: int) -> list[str]:
    """The instances to start now on `free` GPUs, as unit keys in the order to start them (a
    key more than once: several instances). `units` in plan order; see the module docstring."""
    out: list[str] = []
    waiting = [u for u in units if u.instances == 0]
    while (pos := next_fitting([u.gpus for u in waiting], free)) is not None:
        first = waiting.pop(pos)
        free -= first.gpus
        out.append(first.key)
    if waiting:
        return out  # GPUs stay free for the units that wait (a wide one would starve)
    grown = {u.key: replace(u, instances=max(1, u.instances)) for u in units}
    while True:
        fits = [u for u in grown.values() if u.gpus <= free and worth_an_instance(u)]
        if not fits:
            return out
        last = max(fits, key=lambda u: finish_s(u.chains_s, u.shared_s or 0.0, _streams(u)))
        out.append(last.key)
        free -= last.gpus
        grown[last.key] = replace(last, instances=last.instances + 1)


def _streams(unit: UnitState) -> int:
    return unit.instances * unit.replicas


# -- the replay --------------------------------------------------------------------------------


@dataclass(frozen=True)
class UnitPlan:
    """A unit as the plan estimates it. Work in seconds of one stream running alone."""

    key: str
    gpus: int  # whole GPUs one instance holds (0: none)
    replicas: int  # streams per instance
    cap: float  # k busy streams of an instance decode min(k, cap) times one stream's rate
    load_s: float  # one instance's load
    chains_s: tuple[float, ...] = ()  # each setting on the harness's random stream
    shared_s: float = 0.0  # every other setting together

    def speed(self, busy: float) -> float:
        """One stream's speed when `busy` streams of its instance decode."""
        return min(1.0, self.cap / busy) if busy > 0 else 1.0

    @property
    def least_gpu_s(self) -> float:
        """GPU-seconds no schedule goes below: one load, every stream of it busy."""
        gain = min(float(self.replicas), self.cap)
        return self.gpus * (self.load_s + (sum(self.chains_s) + self.shared_s) / gain)


@dataclass(frozen=True)
class Placed:
    key: str
    start_s: float  # its first instance started
    end_s: float  # its last chunk ended
    instances: int  # instances it ran, one after or beside another
    gpu_seconds: float  # the GPUs its instances held, times how long


@dataclass(frozen=True)
class Schedule:
    n_gpus: int
    makespan_s: float  # the last unit's end
    lower_bound_s: float  # max(least GPU-seconds / n_gpus, the longest load + chain)
    gpu_seconds: float  # GPUs held, summed over the placed units' instances
    longest_s: float  # the longest placed unit, first start to end
    placed: tuple[Placed, ...]  # in plan order
    unplaceable: tuple[str, ...]  # units that need more GPUs than the cluster has

    @property
    def gpu_hours(self) -> float:
        return self.gpu_seconds / 3600.0


def lower_bound(units: Sequence[UnitPlan], n_gpus: int) -> float:
    """No schedule on `n_gpus` GPUs ends before the least GPU-seconds spread evenly, or a
    unit's load and its longest chain at a lone stream's speed."""
    work = sum(u.least_gpu_s for u in units)
    critical = max((u.load_s + max(u.chains_s, default=0.0) for u in units), default=0.0)
    return max(work / n_gpus if n_gpus else 0.0, critical)


@dataclass
class _Live:
    """A unit during the replay."""

    plan: UnitPlan
    chains: list[float]  # seconds left, begun chains first, then the longest first
    shared: float
    grow: bool  # the rule may give it more than one instance
    opened: list[float] = field(default_factory=list)  # start of each open instance
    start: float | None = None
    end: float = 0.0
    started: int = 0  # instances started so far
    loaded: bool = False  # an instance has loaded (a unit with no work still loads once)
    gpu_s: float = 0.0

    @property
    def finished(self) -> bool:
        return self.loaded and not self.chains and self.shared <= EPS_S

    def ready(self, now: float) -> int:
        return sum(1 for t in self.opened if t + self.plan.load_s <= now + EPS_S)

    def rates(self, now: float) -> tuple[int, float, float]:
        """(chains decoding, one stream's speed, the shared work's rate) now."""
        n = self.ready(now)
        streams = n * self.plan.replicas
        chains = min(len(self.chains), streams)
        shared = streams - chains if self.shared > EPS_S else 0
        speed = self.plan.speed((chains + shared) / n) if n else 0.0
        return chains, speed, shared * speed

    def needed(self) -> int:
        """Instances its work keeps busy: every one while shared work is left (or none has
        loaded yet), else enough streams for its chains."""
        if self.shared > EPS_S or not self.loaded:
            return len(self.opened)
        return math.ceil(len(self.chains) / self.plan.replicas)

    def state(self) -> UnitState:
        full = self.plan.speed(self.plan.replicas)  # stream-seconds of a full instance
        return UnitState(
            self.plan.key,
            self.plan.gpus,
            self.plan.replicas,
            len(self.opened),
            self.plan.load_s,
            tuple(c / full for c in self.chains),
            self.shared / full,
            self.grow,
        )

    def close(self, now: float, keep: int) -> int:
        """Close instances past `keep` (the newest first); the GPUs they free."""
        freed = 0
        while len(self.opened) > keep:
            opened = self.opened.pop()
            self.gpu_s += (now - opened) * self.plan.gpus
            freed += self.plan.gpus
        return freed


def _next_event(live: Sequence[_Live], now: float) -> float:
    """When a load ends, a decoding chain ends or the shared work runs out."""
    times = [math.inf]
    for unit in live:
        if not unit.opened:
            continue
        times += [t + unit.plan.load_s for t in unit.opened if t + unit.plan.load_s > now + EPS_S]
        chains, speed, shared_rate = unit.rates(now)
        if speed > 0:
            times += [now + c / speed for c in unit.chains[:chains]]
        if shared_rate > 0:
            times.append(now + unit.shared / shared_rate)
    return min(times)


def _advance(unit: _Live, now: float, dt: float) -> None:
    if not unit.opened:
        return
    chains, speed, shared_rate = unit.rates(now)
    for i in range(chains):
        unit.chains[i] -= speed * dt
    unit.shared = max(0.0, unit.shared - shared_rate * dt)
    unit.chains = [c for c in unit.chains if c > EPS_S]


def _settle(live: Sequence[_Live], now: float) -> int:
    """Instances that loaded, units that ended, instances with nothing to do closed: the GPUs
    freed."""
    freed = 0
    for unit in live:
        if unit.start is None:
            continue
        unit.loaded = unit.loaded or unit.ready(now) > 0
        if unit.finished and unit.opened:
            unit.end = now
            freed += unit.close(now, 0)
        else:
            freed += unit.close(now, unit.needed())
    return freed


def _start(live: Sequence[_Live], free: int, now: float) -> int | None:
    """Start what the rule says on `free` GPUs: the GPUs the new instances hold, None when it
    starts nothing (an instance of a unit that holds no GPU starts and takes 0)."""
    active = {u.plan.key: u for u in live if not u.finished}
    keys = choose_starts([u.state() for u in active.values()], free)
    if not keys:
        return None
    taken = 0
    for key in keys:
        unit = active[key]
        unit.opened.append(now)
        unit.started += 1
        unit.start = now if unit.start is None else unit.start
        taken += unit.plan.gpus
    return taken


def replay(units: Sequence[UnitPlan], n_gpus: int, *, grow: bool = True) -> Schedule:
    """The units (in plan order) on `n_gpus` GPUs by the rule (module docstring); with
    `grow=False` each on one instance (a unit's own time)."""
    if n_gpus < 1:
        raise ValueError(f"a cluster to schedule on needs at least one GPU, got {n_gpus}")
    unplaceable = tuple(u.key for u in units if u.gpus > n_gpus)
    live = [
        _Live(u, sorted(u.chains_s, reverse=True), u.shared_s, grow)
        for u in units
        if u.gpus <= n_gpus
    ]
    free, now = n_gpus, 0.0
    while True:
        free += _settle(live, now)
        while (taken := _start(live, free, now)) is not None:
            free -= taken
            free += _settle(live, now)  # an instance of no load and no work ends at once
        active = [u for u in live if not u.finished]
        if not active:
            break
        later = _next_event(active, now)
        if math.isinf(later):  # every GPU held by units that wait: the rule is broken
            raise RuntimeError(f"the replay stalled at {now:.1f} s with {free} GPU(s) free")
        for unit in active:
            _advance(unit, now, later - now)
        now = later
    return _schedule(live, units, n_gpus, unplaceable)


def _schedule(
    live: Sequence[_Live], units: Sequence[UnitPlan], n_gpus: int, unplaceable: tuple[str, ...]
) -> Schedule:
    placed = tuple(Placed(u.plan.key, u.start or 0.0, u.end, u.started, u.gpu_s) for u in live)
    kept = [u for u in units if u.key not in unplaceable]
    return Schedule(
        n_gpus=n_gpus,
        makespan_s=max((p.end_s for p in placed), default=0.0),
        lower_bound_s=lower_bound(kept, n_gpus),
        gpu_seconds=sum(p.gpu_seconds for p in placed),
        longest_s=max((p.end_s - p.start_s for p in placed), default=0.0),
        placed=placed,
        unplaceable=unplaceable,
    )
