"""SIGTERM and SIGINT during a run: recorded by the handler, acted on at the driver's next safe
point.

A handler that raises runs wherever the main thread happens to be. Inside Ray's `wait` (a
Cython call that checks for signals) the exception becomes `SystemError: <cyfunction
CoreWorker.wait> returned a result with an exception set`, a traceback and exit 1 instead of a
clean stop. So the handler only records the signal; the drain loop, which wakes at least once a
second, calls `check()` between Ray calls and raises `Interrupted` there, outside any library.

`reprogrid run` records them from its first line (config, preflight and the lock included),
and the block that records them raises `Interrupted` when it ends with a stop recorded and not
yet acted on, so that a signal after the last safe point still ends the command with 143 / 130.
Ray's own handlers are kept out of the driver while it starts (execute/raycluster.py).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator

from orchestrator.errors import Interrupted

logger = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequest:
    """The first stop signal a run received (later ones are logged and otherwise ignored: the
    clean stop they would cut short is already under way)."""

    def __init__(self) -> None:
        self.signum: int | None = None

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def record(self, signum: int, _frame: object = None) -> None:
        """The signal handler: no exception, no I/O beyond a log line."""
        if self.signum is None:
            self.signum = signum
        else:
            logger.warning("%s again: the run is already stopping", signal.Signals(signum).name)

    def check(self) -> None:
        """Raise Interrupted if a stop signal arrived (call at safe points only)."""
        if self.signum is not None:
            raise Interrupted(self.signum, signal.Signals(self.signum).name)


@contextlib.contextmanager
def recording_signals(request: StopRequest) -> Iterator[StopRequest]:
    """While inside: SIGTERM and SIGINT are recorded in `request` (main thread only; elsewhere
    signals cannot be handled and nothing changes). The previous handlers come back after; a
    block that ends without an exception while a stop is recorded raises Interrupted then (the
    signal came after its last `check()`: the caller still stops, with 143 / 130). Blocks may
    nest with the same request: the innermost one to end raises."""
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {s: signal.signal(s, request.record) for s in STOP_SIGNALS}
    try:
        yield request
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    request.check()
