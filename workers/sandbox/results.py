"""What a sandbox run returns, the error the sandbox raises, and how a runner's run is scored.

`score_program` is pure: it maps a finished run and the runner's report to an Outcome.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

from workers.execspec import Outcome


class SandboxUnavailable(RuntimeError):
    """The isolation this host promises cannot be set up (or the sandbox itself failed)."""


class IsolationBelowRequired(SandboxUnavailable):
    """The host gives a weaker IsolationLevel than `SandboxLimits.require` asks for."""


@dataclass(frozen=True)
class CommandResult:
    exit_code: int | None  # None when killed by the timeout or by a signal
    signal: int | None  # the signal that ended it (SIGKILL after a timeout)
    timed_out: bool
    stdout: str  # the last limits.max_output_bytes bytes, decoded as UTF-8 (errors replaced)
    stderr: str  # same
    duration_s: float  # wall clock in the parent, spawn to exit
    output_truncated: bool  # stdout or stderr was longer than the cap
    isolation: str | None = None  # the IsolationLevel the run had
    memory_killed: bool = False  # the kernel killed a process of it for the memory limit


def score_program(
    result: CommandResult, done: dict | None, timeout_s: float
) -> tuple[Outcome, str | None, str | None]:
    """Outcome, error_type and error_message of a runner run (pure; `done` is its report)."""
    report = done or {}  # without a report the run is scored by how it ended
    status = report.get("status")
    if status == "passed" and result.exit_code == 0:
        if not result.memory_killed:
            return Outcome.PASSED, None, None
        # The limit killed a process of the program's tree (a child it forked): the program
        # went over its memory and is not a pass, even if what survived reported its tests as
        # passed (the OOM killer may take a child after that child had done its part).
        return (
            Outcome.FAILED,
            "MemoryLimit",
            "its tests passed, but the memory limit killed a process of the program",
        )
    if result.timed_out:
        return Outcome.TIMEOUT, "Timeout", f"did not finish within {timeout_s:g} s"
    if status == "compile_error":
        return Outcome.ERROR, "SyntaxError", f"{report.get('type')}: {report.get('message')}"
    if status == "raised":
        if report.get("type") == "SystemExit":
            return (
                Outcome.FAILED,
                "EarlyExit",
                f"SystemExit({report.get('message')}) in the program",
            )
        return Outcome.FAILED, str(report.get("type")), str(report.get("message"))
    if result.signal is not None:
        name = signal.Signals(result.signal).name if result.signal in _SIGNALS else result.signal
        cause = " (the memory limit)" if result.memory_killed else ""
        return Outcome.ERROR, "Signal", f"killed by {name}{cause}" + _tail_note(result.stderr)
    note = _tail_note(result.stderr) if result.exit_code else ""
    message = f"exited with status {result.exit_code} before the test finished{note}"
    return Outcome.FAILED, "EarlyExit", message


def _tail_note(stderr: str, chars: int = 600) -> str:
    return f"; stderr tail: {stderr[-chars:].strip()}" if stderr.strip() else ""


_SIGNALS = {s.value for s in signal.Signals}
