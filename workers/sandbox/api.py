"""The sandbox's entry points: run a command, or run one HumanEvalFix program the way the
harness's execution metric scores it. Both run on a fork server and are isolated as the package
docstring describes."""

from __future__ import annotations

import base64
import errno
import math
import os
import resource
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from workers.execspec import ExecJob, ExecResult, SandboxLimits
from workers.sandbox.capabilities import IsolationReport, check_isolation
from workers.sandbox.pool import ServerKey, lease
from workers.sandbox.results import CommandResult, score_program
from workers.sandbox.runner import preload_modules
from workers.sandbox.slots import procs_of_uid
from workers.sandbox.streams import Marker
from workers.sandbox.supervisor import run_on_server, sandbox_env
from workers.sandbox.view import WORKDIR, view_paths

_MB = 1024 * 1024
_BIN_FOLDERS = ("bin", "sbin", "shims")


def run_command(
    argv: Sequence[str],
    files: Mapping[str, str | bytes],
    limits: SandboxLimits,
    *,
    stdin_text: str | None = None,
    env: Mapping[str, str] | None = None,
    paths: Sequence[str] = (),
) -> CommandResult:
    """Run argv in a fresh, empty work folder holding only `files`, isolated as described in
    the package docstring; nothing of the folder outlives the run.

    `files` maps relative paths (subfolders are created) to text (written as UTF-8) or bytes.
    `env` entries are merged over the scrubbed environment. `paths`: host paths the command
    needs besides its executable's prefix (a toolchain's configuration folder), visible
    read-only. The wall-clock limit is `limits.timeout_s` from the start. Raises ValueError
    for a path leaving the folder, FileNotFoundError/PermissionError when argv[0] cannot be
    executed, SandboxUnavailable when the isolation cannot be set up (IsolationBelowRequired
    below `limits.require`).
    """
    encoded = {
        _relative(rel): base64.b64encode(_bytes(data)).decode() for rel, data in files.items()
    }
    exe = resolve_command(argv, env)
    report = check_isolation(limits)
    needed = [*python_paths(sys.executable), *command_paths(exe), *paths]
    request = {
        "kind": "command",
        "exe": exe,
        "argv": list(argv),
        "files": encoded,
        "env": sandbox_env(WORKDIR, env),
        **_run_options(limits, report),
    }
    stdin = None if stdin_text is None else stdin_text.encode("utf-8", "surrogatepass")
    key = ServerKey(sys.executable, (), view_paths(needed))
    with lease(key, report.facts, sandbox_env(WORKDIR, None)) as server:
        result = run_on_server(server, request, limits, stdin_data=stdin, marker=None)
    return replace(result, isolation=report.level.value)


def run_python_program(
    job: ExecJob, limits: SandboxLimits, python: str | None = None, *, harness_guard: bool = True
) -> ExecResult:
    """Run one HumanEvalFix program (job.program is the complete file) the way the harness's
    execution metric scores it, isolated.

    The fork server of this interpreter has imported the header modules the harness parent
    holds; each program runs in a fresh fork of it, which compiles the text with filename
    "<program>" and exec()s it with an empty globals dict (so `__name__` is "builtins"). The
    program passes only if exec returned and the runner reported so on a private pipe (with a
    per-run nonce): an early `os._exit(0)` or `sys.exit(0)` is FAILED with error_type
    "EarlyExit". `job.timeout_s` is the program's wall-clock budget, counted from the runner's
    start (limits.timeout_s is not used; cpu_s defaults from job.timeout_s). The result's
    `isolation` is the IsolationLevel the run had.

    `harness_guard` (default True, the faithful setting) applies the metric's
    `reliability_guard()` and swallows I/O before exec, as the harness does: a program that
    calls a function it disables (`os.remove`, `shutil.rmtree`, `subprocess.Popen`, `os.kill`,
    `exit()`, ...) is FAILED with error_type "TypeError" ("'NoneType' object is not callable"),
    as it fails there. The guard exists for faithful scores, not for safety (a program can undo
    it); the OS-level isolation is the same either way. False runs the program unguarded.
    """
    python = python or sys.executable
    limits = replace(limits, timeout_s=job.timeout_s)
    report = check_isolation(limits)
    marker = Marker()
    request = {
        "kind": "python",
        "program": job.program,
        "nonce": marker.nonce,
        "guard": harness_guard,
        "env": sandbox_env(WORKDIR, None),
        **_run_options(limits, report),
    }
    key = ServerKey(python, preload_modules(harness_guard), view_paths(python_paths(python)))
    try:
        with lease(key, report.facts, sandbox_env(WORKDIR, None)) as server:
            result = run_on_server(server, request, limits, stdin_data=None, marker=marker)
        done = marker.done()
    finally:
        marker.close()
    outcome, error_type, message = score_program(result, done, job.timeout_s)
    if message is not None:
        message = message[: limits.max_output_bytes]
    return ExecResult(
        job.job_id, outcome, error_type, message, result.duration_s, isolation=report.level.value
    )


def _run_options(limits: SandboxLimits, report: IsolationReport) -> dict:
    return {
        "rlimits": rlimits_for(limits, report.facts),
        "network": limits.network,
        "disk_mb": limits.disk_mb,
    }


def rlimits_for(limits: SandboxLimits, facts: dict) -> list[list[int]]:
    """(resource, soft, hard) for the program: CPU time (SIGXCPU at the soft limit, SIGKILL
    1 s later), file size, processes, no core files, and the address space only where no
    memory cgroup bounds the program as a whole."""
    cpu = limits.cpu_s if limits.cpu_s is not None else math.ceil(limits.timeout_s + 5)
    nproc = limits.max_processes
    if not facts["root"]:  # RLIMIT_NPROC counts all processes of the real uid, the caller's too
        nproc += len(procs_of_uid(os.getuid()))
    size = limits.file_size_mb * _MB
    out = [
        [resource.RLIMIT_CPU, cpu, cpu + 1],
        [resource.RLIMIT_FSIZE, size, size],
        [resource.RLIMIT_NPROC, nproc, nproc],
        [resource.RLIMIT_CORE, 0, 0],
    ]
    if not facts["memory_cgroup"]:
        out.append([resource.RLIMIT_AS, limits.memory_mb * _MB, limits.memory_mb * _MB])
    return out


def python_paths(python: str) -> list[str]:
    """What the interpreter needs to reach (its executable, prefix and, for ours, sys prefixes)."""
    exe = shutil.which(python) or python
    real = os.path.realpath(exe)
    paths = {os.path.abspath(exe), real, os.path.dirname(os.path.dirname(real))}
    if real == os.path.realpath(sys.executable):
        paths |= {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    return sorted(paths)


def resolve_command(argv: Sequence[str], env: Mapping[str, str] | None) -> str:
    """The executable argv[0] resolves to on the run's PATH (raised here, not in the child)."""
    if not argv:
        raise ValueError("argv is empty")
    search = (env or {}).get("PATH", os.environ.get("PATH", os.defpath))
    exe = shutil.which(argv[0], path=search)
    if exe is None:
        if os.path.exists(argv[0]) and "/" in argv[0]:
            raise PermissionError(errno.EACCES, "not executable", argv[0])
        raise FileNotFoundError(errno.ENOENT, f"not found on PATH {search!r}", argv[0])
    return os.path.abspath(exe)


def command_paths(exe: str) -> list[str]:
    """The executable as named and with links resolved, and for one in a bin/ (or pyenv's
    shims/) folder that folder's parent, its installation (node's lib/node_modules, a
    python's lib/, a JDK's lib/, pyenv's libexec/), unless that is the host's root."""
    paths = {exe, os.path.realpath(exe)}
    for path in list(paths):
        folder = os.path.dirname(path)
        if os.path.basename(folder) in _BIN_FOLDERS and os.path.dirname(folder) != "/":
            paths.add(os.path.dirname(folder))
    return sorted(paths)


def _relative(rel: str) -> str:
    path = Path(rel)
    if not path.parts or path.is_absolute() or ".." in path.parts:
        raise ValueError(
            f"sandbox file paths must be relative and stay inside the folder, got {rel!r}"
        )
    return str(path)


def _bytes(data: str | bytes) -> bytes:
    return data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
