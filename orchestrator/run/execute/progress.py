"""Live progress for the driver: a bar per running engine on a terminal (tqdm), a line per
engine every `every_s` seconds otherwise (Slurm, nohup), and a line per finished setting.

Per engine: samples done of the samples this run generates (committed chunks plus what the
replicas report of the chunk in flight), tokens/s, and an ETA from tokens: the remaining
samples at the measured tokens per sample, at the measured tokens/s. Only
`orchestrator/run/execute/dispatch.py` reports progress (STYLE rule 16); this module only formats.
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
        return tok_s, format_duration((self.total - self.samples) * per_sample / tok_s)

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

    def chunk(self, key: str, replica: int, samples: int, tokens: int) -> None:
        """A replica's chunk is stored: its samples are committed, not in flight any more."""
        line = self.engines.get(key)
        if line is None:
            return
        line.committed += samples
        line.committed_tokens += tokens
        line.live[replica] = (0, 0)

    def engine_done(self, key: str) -> None:
        line = self.engines.get(key)
        if line is not None and not line.done:
            line.done = True
            line.phases = {r: "done" for r in line.phases} or {0: "done"}
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
