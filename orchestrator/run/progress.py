"""Live progress for the driver: a status line on a terminal, plain log lines otherwise.

Only `orchestrator/dispatch.py` reports progress (STYLE rule 16); this module only formats.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from orchestrator.analysis.cost import format_duration

logger = logging.getLogger("reprogrid.progress")


@dataclass
class Progress:
    total: int  # settings this run has to finish (generate and/or execute)
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    clock: Callable[[], float] = time.monotonic
    done: int = 0
    failed: int = 0
    samples: int = 0
    tokens: int = 0
    current: str = ""
    _start: float = 0.0
    _last_draw: float = 0.0

    def __post_init__(self) -> None:
        self._start = self.clock()
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())

    def generated(self, label: str, samples: int, tokens: int) -> None:
        self.samples += samples
        self.tokens += tokens
        self.current = label
        self.draw(force=True, event=f"generated {label}")

    def finished(self, label: str, score: float | None) -> None:
        self.done += 1
        shown = "n/a" if score is None else f"{100 * score:.2f}"
        self.draw(force=True, event=f"complete {label}: {shown}")

    def fail(self, label: str, error: str) -> None:
        self.failed += 1
        self.draw(force=True, event=f"FAILED {label}: {error}")

    def line(self) -> str:
        elapsed = self.clock() - self._start
        rate_s = self.samples / elapsed if elapsed > 0 else 0.0
        rate_t = self.tokens / elapsed if elapsed > 0 else 0.0
        finished = self.done + self.failed
        eta = (
            "?" if finished == 0 else format_duration(elapsed / finished * (self.total - finished))
        )
        failed = f", {self.failed} failed" if self.failed else ""
        return (
            f"[{finished}/{self.total} settings{failed}] {self.current} | "
            f"{rate_s:.2f} samples/s | {rate_t:.0f} tok/s | elapsed {format_duration(elapsed)} "
            f"| ETA {eta}"
        )

    def draw(self, force: bool = False, event: str | None = None) -> None:
        now = self.clock()
        if not force and now - self._last_draw < 1.0:
            return
        self._last_draw = now
        if self.interactive:
            if event:
                self.stream.write("\r\033[K" + event + "\n")
            self.stream.write("\r\033[K" + self.line())
            self.stream.flush()
        elif event:
            logger.info("%s | %s", event, self.line())

    def close(self) -> None:
        if self.interactive:
            self.stream.write("\n")
            self.stream.flush()
