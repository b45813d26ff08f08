"""How an engine unit's settings are cut into chunks, the unit of commit. Pure: the dispatcher
feeds it what the store holds and what comes back, it answers what to generate next.

* A chunk is whole problems of one setting, in benchmark order. The driver stores each as it
  comes back (`generations/<setting_key>~<chunk>`), so a killed run loses at most the chunks
  in flight, and a resumed one generates only the problems no stored chunk has.
* One-prompt-per-call backends (transformers) are sized by time: `every_s` seconds of work
  from the unit's measured samples/s (`first_samples` before anything is measured). Their
  outputs do not depend on how the problems are cut.
* Batched backends (vLLM) generate one chunk of every unfinished setting of the unit in one
  call, `batched_samples` samples per setting, by count: the batches are then the same in
  every run of the grid.
* `every_samples` fixes the size for every backend.
* A setting that draws from the harness's global random stream (`seed_policy=harness` with
  sampling) is one sequential stream, a *chain*: its chunks go one at a time, in order, to any
  replica of any engine instance of the unit; each restores the stream state the previous one
  returned (stored with it, so a resumed run continues exactly, on whichever replica takes it).
  Its stored chunks must be a prefix of its problems with the state after the last; otherwise
  it starts again (`restart`). Different chains run at once on different replicas.
* An idle replica takes a chain it has begun first, then the chain with the most problems
  left, then the other settings in grid order (analysis/schedule.py counts on this order).
* A chunk whose replica died goes back to the queue whole (`requeue`): the next idle replica
  generates it again from the same request (the same stream state), before anything else.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from orchestrator.run.config.specs import ChunkPolicy
from workers.spec import ChunkRequest, SettingSpec


@dataclass(frozen=True)
class Stored:
    """What the store holds of a setting's generations (chunks of earlier runs)."""

    task_ids: frozenset[str] = frozenset()  # problems whose samples are all stored
    next_chunk: int = 0  # one past the highest stored chunk index
    stream_state: bytes | None = None  # after the highest stored chunk (sequential settings)
    last_task: str | None = None  # the last problem of the highest stored chunk


@dataclass
class SettingWork:
    """A setting of a unit while it generates (driver-side state)."""

    key: str
    setting: SettingSpec
    remaining: list[str]  # problems to generate, in benchmark order
    next_chunk: int
    stream_state: bytes | None = None
    started: bool = False  # a chunk is stored: the next one continues the stream
    in_flight: int = 0
    failed: bool = False

    @property
    def sequential(self) -> bool:
        return self.setting.sequential_stream

    @property
    def finished(self) -> bool:
        """Nothing left to generate and nothing in flight (failed counts as finished)."""
        return self.failed or (not self.remaining and self.in_flight == 0)


def resume(key: str, setting: SettingSpec, task_ids: Sequence[str], stored: Stored):
    """(SettingWork, restart?) for a setting whose problems are `task_ids` (benchmark order).
    A sequential setting whose stored chunks are not a prefix ending in a stream state
    restarts from scratch (its stored chunks must then be set aside)."""
    remaining = [t for t in task_ids if t not in stored.task_ids]
    if not stored.task_ids:
        return SettingWork(key, setting, list(task_ids), stored.next_chunk), False
    if setting.sequential_stream:
        prefix = list(task_ids[: len(stored.task_ids)])
        contiguous = set(prefix) == stored.task_ids and stored.last_task == prefix[-1]
        if not contiguous or stored.stream_state is None:
            return SettingWork(key, setting, list(task_ids), stored.next_chunk), True
    work = SettingWork(key, setting, remaining, stored.next_chunk, stored.stream_state, True)
    return work, False


@dataclass
class UnitQueue:
    """The chunks of one engine unit, handed out to its replicas."""

    settings: list[SettingWork]
    policy: ChunkPolicy
    batched: bool  # the backend generates many settings in one call (vLLM)
    samples_per_s: float | None = None  # one replica's, measured on this unit (None: not yet)
    _measured: list[tuple[int, float]] = field(default_factory=list)
    _retry: list[ChunkRequest] = field(default_factory=list)  # chunks of replicas that died

    @property
    def finished(self) -> bool:
        return all(w.finished for w in self.settings)

    def work(self, key: str) -> SettingWork:
        return next(w for w in self.settings if w.key == key)

    def measured(self, samples: int, seconds: float) -> None:
        """A chunk's samples and generation seconds: the unit's rate for sizing."""
        if seconds > 0 and samples > 0:
            self._measured.append((samples, seconds))
            total_s = sum(s for _, s in self._measured)
            self.samples_per_s = sum(n for n, _ in self._measured) / total_s

    def _problems(self, work: SettingWork) -> int:
        per_problem = max(1, work.setting.n_samples)
        target: float
        if self.policy.every_samples is not None:
            target = self.policy.every_samples
        elif self.batched:
            target = self.policy.batched_samples
        elif self.samples_per_s is None:
            target = self.policy.first_samples
        else:
            target = self.samples_per_s * self.policy.every_s
        return max(1, math.floor(target / per_problem))

    def _take(self, work: SettingWork) -> ChunkRequest:
        n = self._problems(work)
        ids, work.remaining = tuple(work.remaining[:n]), work.remaining[n:]
        chunk = ChunkRequest(
            setting_key=work.key,
            setting=work.setting,
            chunk=work.next_chunk,
            task_ids=ids,
            first=not work.started,
            stream_state=work.stream_state if work.sequential else None,
        )
        work.next_chunk += 1
        work.in_flight += 1
        work.started = True
        return chunk

    def next_chunks(self) -> list[ChunkRequest]:
        """What an idle replica should generate next ([] when nothing is free now): a chunk
        that died with its replica, else one chunk of the first setting by the order of the
        module docstring, or, batched, one of every setting it may take."""
        if self._retry:
            if self.batched:
                retry, self._retry = self._retry, []
                return retry
            return [self._retry.pop(0)]
        eligible = [
            w
            for w in self.settings
            if w.remaining and not w.failed and (not w.sequential or w.in_flight == 0)
        ]
        if not eligible:
            return []
        if self.batched:
            return [self._take(w) for w in eligible]
        # A chain cannot be shared, so the longest go first: the unit's end is not left
        # waiting for one chain that started late (the order the plan's replay assumes).
        eligible.sort(key=_precedence)
        return [self._take(eligible[0])]

    def requeue(self, chunks: Sequence[ChunkRequest]) -> None:
        """Chunks whose replica died: generated again, first, by the next idle replica (they
        stay in flight for their settings, so a chain hands out nothing after them)."""
        self._retry.extend(c for c in chunks if not self.work(c.setting_key).failed)

    def left(self) -> tuple[list[int], int]:
        """Samples still to hand out: each unfinished chain's, and the other settings'
        (chunks to hand out again counted with their setting)."""
        retry: dict[str, int] = {}
        for c in self._retry:
            retry[c.setting_key] = retry.get(c.setting_key, 0) + len(c.task_ids)
        chains, shared = [], 0
        for w in self.settings:
            n = (len(w.remaining) + retry.get(w.key, 0)) * w.setting.n_samples
            if w.failed or not n:
                continue
            if w.sequential:
                chains.append(n)
            else:
                shared += n
        return chains, shared

    def returned(self, key: str, stream_state: bytes | None) -> None:
        work = self.work(key)
        work.in_flight -= 1
        if work.sequential:
            work.stream_state = stream_state

    def failed(self, key: str) -> None:
        work = self.work(key)
        work.in_flight = max(0, work.in_flight - 1)
        work.failed = True
        work.remaining = []
        self._retry = [c for c in self._retry if c.setting_key != key]

    def fail_unfinished(self) -> list[str]:
        """Every setting not finished, or with a chunk in flight, fails (its engine did): their
        keys."""
        keys = [w.key for w in self.settings if not w.finished or w.in_flight]
        for key in keys:
            self.work(key).in_flight = 0
            self.failed(key)
        return keys


def _precedence(work: SettingWork) -> tuple[int, int]:
    """A chain begun, then chains by problems left (most first), then the rest in order."""
    if work.sequential:
        return (0 if work.started else 1, -len(work.remaining))
    return (2, 0)
