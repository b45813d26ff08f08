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
  sampling) is one sequential stream: its chunks go one at a time, in order, to replica 0;
  each continues from the stream state the previous one returned (stored with it, so a
  resumed run continues exactly). Its stored chunks must be a prefix of its problems with the
  state after the last; otherwise it starts again (`restart`).
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
    replicas: int = 1  # engine replicas fed from this queue
    samples_per_s: float | None = None  # measured on this unit (None: not yet)
    _measured: list[tuple[int, float]] = field(default_factory=list)

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

    def next_chunks(self, replica: int) -> list[ChunkRequest]:
        """What replica `replica` should generate next ([] when nothing is free for it now):
        one chunk of the first setting it may take (replica 0 of several: a sequential one
        first), or, batched, one of every such setting."""
        eligible = [
            w
            for w in self.settings
            if w.remaining
            and not w.failed
            and (not w.sequential or (replica == 0 and w.in_flight == 0))
        ]
        if not eligible:
            return []
        if self.batched:
            return [self._take(w) for w in eligible]
        if replica == 0 and self.replicas > 1:
            # Only replica 0 can generate a sequential stream: it takes those first, so the
            # unit's longest chain starts at once while the other replicas share the rest
            # (the rule analysis/replicas.py estimates a unit's time by).
            eligible.sort(key=lambda w: not w.sequential)
        return [self._take(eligible[0])]

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
