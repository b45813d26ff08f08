"""Live progress for the driver: a bar per running engine on a terminal (tqdm), a line per
engine every `every_s` seconds otherwise (Slurm, nohup), and a line per finished setting.

Per engine: samples done of the samples this run generates (committed chunks plus what the
replicas report of the chunk in flight), tokens/s, and an ETA from tokens: the remaining
samples at the measured tokens per sample, at the measured tokens/s. While samples are in
flight (a backend call a replica reports), the ETA adds an upper bound, "45s (up to 4m30s)":
each call's samples at their whole token budget, at the replica's share of the measured
tokens/s, less the time the call has run, plus the samples not started at the measured tokens
per sample; a sample that runs to the length limit takes far longer than the mean, so the
mean alone can promise the last samples several times too soon. Only
`orchestrator/run/execute/dispatch.py` reports progress (STYLE rule 16); this module only
formats.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from orchestrator.analysis.cost import format_duration

logger = logging.getLogger("reprogrid.progress")


@dataclass(frozen=True)
class InFlight:
    """A replica's backend call in flight, as it last reported (workers/session.py)."""

    samples: int  # samples of the call
    budget: int  # their output-token budget (max_length each)
    running_s: float  # how long the call had run when the replica reported
    seen: float  # when the report came (the driver's clock)


@dataclass
class EngineLine:
    """One engine unit's numbers (all its replicas together)."""

    label: str
    total: int  # samples this run generates for the unit
    replicas: int
    started: float
    committed: int = 0  # samples of stored chunks
    committed_tokens: int = 0
    # replica -> (samples, tokens) of the chunk it generates now, as it last reported
    live: dict[int, tuple[int, int]] = field(default_factory=dict)
    phases: dict[int, str] = field(default_factory=dict)
    calls: dict[int, InFlight] = field(default_factory=dict)  # replica -> its call in flight
    done: bool = False

    @property
    def samples(self) -> int:
        return min(self.total, self.committed + self._in_flight(0))

    @property
    def tokens(self) -> int:
        return self.committed_tokens + self._in_flight(1)

    def _in_flight(self, i: int) -> int:
        """Of the chunks in flight, what the replicas have generated so far."""
        return sum(v[i] for v in self.live.values())

    def rates(self, now: float) -> tuple[float, str]:
        """(tokens/s, ETA) from tokens: remaining samples x tokens per sample / tokens per s."""
        elapsed = max(1e-9, now - self.started)
        tok_s = self.tokens / elapsed
        if self.done or self.samples >= self.total:
            return tok_s, "0s"
        if not self.samples or not tok_s:
            return tok_s, "?"
        per_sample = self.tokens / self.samples
        remaining = self.total - self.samples
        estimate = remaining * per_sample / tok_s
        bound = self.bound_s(now, remaining, per_sample, tok_s)
        eta = format_duration(estimate)
        if bound is not None and format_duration(bound) != eta and bound > estimate:
            eta += f" (up to {format_duration(bound)})"
        return tok_s, eta

    def bound_s(self, now: float, remaining: int, per_sample: float, tok_s: float) -> float | None:
        """Seconds left at most while samples are in flight (None: none is): the slowest call at
        its whole token budget, at the replica's share of `tok_s`, less the time it has run
        (the calls run side by side), then the samples not started at `per_sample` tokens."""
        if not self.calls or tok_s <= 0:
            return None
        rate = tok_s / max(1, self.replicas)
        calls = max(c.budget / rate - c.running_s - (now - c.seen) for c in self.calls.values())
        waiting = max(0, remaining - sum(c.samples for c in self.calls.values()))
        return max(0.0, calls) + waiting * per_sample / tok_s

    def text(self, now: float) -> str:
        tok_s, eta = self.rates(now)
        phase = ",".join(sorted(set(self.phases.values()))) or "starting"
        pct = 100 * self.samples / self.total if self.total else 100.0
        return (
            f"{self.label}: {self.samples}/{self.total} samples ({pct:.0f}%), "
            f"{tok_s:.0f} tok/s, ETA {eta}, {self.replicas} replica(s) {phase}"
        )


class Progress:
    def __init__(
        self,
        total: int,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        every_s: float = 30.0,
    ):
        self.total = total  # settings this run has to finish (generate and/or execute)
        self.stream = stream or sys.stderr
        self.clock = clock
        self.every_s = every_s  # off a terminal: how often the engine lines are logged
        self.done = 0
        self.failed = 0
        self.engines: dict[str, EngineLine] = {}
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())
        self._bars: dict[str, Any] = {}
        self._last_log = self.clock()

    # -- events from the dispatcher -----------------------------------------------------------

    def instances(self, key: str, instances: int, replicas: int) -> None:
        """The unit now runs `replicas` replicas on `instances` engine instances."""
        line = self.engines.get(key)
        if line is not None and line.replicas != replicas:
            line.replicas = replicas
            self.message(f"engine {line.label}: {replicas} replica(s) on {instances} instance(s)")

    def engine(self, key: str, label: str, total: int, replicas: int) -> None:
        self.engines[key] = EngineLine(label, total, replicas, self.clock())
        self.message(f"engine {label}: {total} samples to generate on {replicas} replica(s)")
        if self.interactive:
            from tqdm import tqdm

            self._bars[key] = tqdm(
                total=total,
                desc=label,
                unit="sample",
                file=self.stream,
                leave=True,
                position=len(self._bars),
                dynamic_ncols=True,
                bar_format="{desc} {bar} {n_fmt}/{total_fmt} samples {postfix}",
            )

    def replica(self, key: str, index: int, snapshot: Mapping[str, Any]) -> None:
        """What a replica reports between chunks: its phase and its running counters."""
        line = self.engines.get(key)
        if line is None:
            return
        line.phases[index] = str(snapshot.get("phase"))
        generating = snapshot.get("phase") == "generating"
        line.live[index] = (
            (int(snapshot.get("chunk_done", 0)), int(snapshot.get("chunk_tokens", 0)))
            if generating
            else (0, 0)
        )
        running = int(snapshot.get("running", 0)) if generating else 0
        if running:
            budget, running_s = int(snapshot["running_budget"]), float(snapshot["running_s"])
            line.calls[index] = InFlight(running, budget, running_s, self.clock())
        else:
            line.calls.pop(index, None)

    def chunk(self, key: str, replica: int, samples: int, tokens: int) -> None:
        """A replica's chunk is stored: its samples are committed, not in flight any more."""
        line = self.engines.get(key)
        if line is None:
            return
        line.committed += samples
        line.committed_tokens += tokens
        line.live[replica] = (0, 0)
        line.calls.pop(replica, None)

    def engine_done(self, key: str) -> None:
        line = self.engines.get(key)
        if line is not None and not line.done:
            line.done = True
            line.phases = {r: "done" for r in line.phases} or {0: "done"}
            line.calls.clear()
            self.message(line.text(self.clock()))

    def generated(self, label: str) -> None:
        self.message(f"generated {label}")

    def finished(self, label: str, score: float | None) -> None:
        self.done += 1
        shown = "n/a" if score is None else f"{100 * score:.2f}"
        self.message(f"complete {label}: {shown} [{self.done + self.failed}/{self.total}]")

    def fail(self, label: str, error: str) -> None:
        self.failed += 1
        self.message(f"FAILED {label}: {error} [{self.done + self.failed}/{self.total}]")

    # -- output -------------------------------------------------------------------------------

    def message(self, text: str) -> None:
        """A line that is kept (above the bars on a terminal)."""
        if self.interactive and self._bars:
            from tqdm import tqdm

            tqdm.write(text, file=self.stream)
        else:
            logger.info("%s", text)

    def tick(self) -> None:
        """Called by the dispatch loop about once a second."""
        now = self.clock()
        if self.interactive:
            for key, bar in self._bars.items():
                line = self.engines[key]
                bar.n = line.samples
                tok_s, eta = line.rates(now)
                bar.set_postfix_str(f"{tok_s:.0f} tok/s, ETA {eta}", refresh=False)
                bar.refresh()
            return
        if now - self._last_log >= self.every_s:
            self._last_log = now
            for line in self.engines.values():
                if not line.done:
                    logger.info("%s", line.text(now))

    def close(self) -> None:
        for bar in self._bars.values():
            bar.close()
        self._bars.clear()
