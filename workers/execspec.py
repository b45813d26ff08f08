"""The frozen contract of execution: the programs the sandbox runs and what comes back.

A benchmark turns generated samples into `ExecJob`s; the sandbox runs each under
`SandboxLimits` at some `IsolationLevel` and answers an `ExecResult`; the worker returns a
setting's `ExecutionRecord`s to the driver as one `ExecutionBatch`. Apart from the generation
side (`workers/spec.py`) because the sandbox and the execution records need none of the models,
engines or settings; like it, it imports nothing heavy (the driver tier imports it).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Outcome(StrEnum):
    PASSED = "passed"  # InfiBench: the response earned the question's full score
    FAILED = "failed"  # the test raised (assertion, exception) or exited before finishing
    TIMEOUT = "timeout"
    ERROR = "error"  # the program could not be run at all (syntax error, killed by a limit)
    TOOLCHAIN_MISSING = "toolchain_missing"  # InfiBench: no executor for a unit test here


class IsolationLevel(StrEnum):
    """How strongly the sandbox isolates a program on this host, weakest first; compares in
    that order (PROCESS < NAMESPACES < FULL). What each level guarantees: docs/sandbox.md."""

    # A process of its own: session, rlimits (memory per process), scrubbed environment and a
    # fresh host folder; no namespaces, so it sees the host's files and processes.
    PROCESS = "process"
    # Fresh pid, mount, IPC and network namespaces per program; a filesystem view of only the
    # interpreter/toolchain (read-only), its own empty tmpfs work folder of disk_mb and its own
    # /proc; no_new_privs, no capabilities, nosuid. Memory still limited per process.
    NAMESPACES = "namespaces"
    # NAMESPACES plus one memory and pids cgroup for the program and all its descendants, and
    # an unprivileged uid of its own (root only).
    FULL = "full"

    @property
    def rank(self) -> int:
        return list(IsolationLevel).index(self)

    def __lt__(self, other: str) -> bool:
        return self.rank < IsolationLevel(other).rank

    def __le__(self, other: str) -> bool:
        return self.rank <= IsolationLevel(other).rank

    def __gt__(self, other: str) -> bool:
        return self.rank > IsolationLevel(other).rank

    def __ge__(self, other: str) -> bool:
        return self.rank >= IsolationLevel(other).rank


@dataclass(frozen=True)
class ExecJob:
    """One program to run against its test. Programs are matched back by `job_id`."""

    job_id: str
    program: str  # the full file: imports header, the fixed function, "\n\n", the test
    timeout_s: float


@dataclass(frozen=True)
class ExecResult:
    job_id: str
    outcome: Outcome
    error_type: str | None  # exception class name, "Timeout", "EarlyExit", "Signal", ...
    error_message: str | None  # truncated
    duration_s: float
    isolation: str | None = None  # the IsolationLevel the run had; None: it never ran


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float = 10.0  # the harness timeout
    # The program and all its descendants together (a cgroup); where the host gives no cgroup,
    # each process's address space (RLIMIT_AS). The harness has no memory limit.
    memory_mb: int = 4096
    cpu_s: int | None = None  # CPU-time limit; None: timeout_s + 5
    file_size_mb: int = 64  # largest file the program may write
    max_processes: int = 64  # a pids cgroup and RLIMIT_NPROC (per sandbox uid as root)
    max_output_bytes: int = 4096  # stored stderr/error text
    network: bool = False  # False: a new network namespace where the OS allows it
    disk_mb: int = 256  # the work folder's tmpfs (with /tmp and /dev/shm); writes past it fail
    require: IsolationLevel | None = None  # refuse to run below this level (None: any)


@dataclass(frozen=True)
class ExecutionRecord:
    task_id: str
    sample_index: int
    outcome: Outcome
    score: float  # 1.0 / 0.0 for unit tests; graded score for InfiBench
    error_type: str | None
    error_message: str | None
    duration_s: float
    details: str | None = None  # JSON
    isolation: str | None = None  # the IsolationLevel the sandbox gave this execution


@dataclass(frozen=True)
class ExecutionBatch:
    """A setting's execution records and the environment they ran in on that host (the
    isolation level, interpreter and toolchains: part of the execution identity)."""

    records: tuple[ExecutionRecord, ...]
    environment: dict[str, str]
