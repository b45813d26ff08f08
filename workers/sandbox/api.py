"""The sandbox's entry points: run a command, or run one HumanEvalFix program the way the
harness's execution metric scores it. Both are isolated as the package docstring describes."""

from __future__ import annotations

import errno
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace

from workers.sandbox.results import CommandResult, score_program
from workers.sandbox.runner import Marker, runner_argv
from workers.sandbox.supervisor import run_isolated
from workers.spec import ExecJob, ExecResult, SandboxLimits


def run_command(
    argv: Sequence[str],
    files: Mapping[str, str | bytes],
    limits: SandboxLimits,
    *,
    stdin_text: str | None = None,
    env: Mapping[str, str] | None = None,
) -> CommandResult:
    """Run argv in a fresh temporary working folder holding `files`, isolated as described in
    the package docstring; the folder is removed afterwards.

    `files` maps relative paths (subfolders are created) to text (written as UTF-8) or bytes.
    `env` entries are merged over the scrubbed environment. The wall-clock limit is
    `limits.timeout_s` from spawn. Raises ValueError for a path leaving the folder, OSError when
    argv[0] cannot be executed, SandboxUnavailable when the isolation cannot be set up.
    """
    stdin_data = None if stdin_text is None else stdin_text.encode("utf-8", "surrogatepass")
    result, _ = run_isolated(
        list(argv), files, limits, stdin_data=stdin_data, env=env, needed=command_paths(argv, env)
    )
    return result


def run_python_program(
    job: ExecJob, limits: SandboxLimits, python: str | None = None, *, harness_guard: bool = True
) -> ExecResult:
    """Run one HumanEvalFix program (job.program is the complete file) the way the harness's
    execution metric scores it, isolated.

    A runner compiles the file with filename "<program>" and exec()s it with an empty globals
    dict (so `__name__` is "builtins"), after importing the header modules the harness parent
    already holds. The program passes only if exec returned and the runner reported so on a
    private pipe (with a per-run nonce): an early `os._exit(0)` or `sys.exit(0)` is FAILED with
    error_type "EarlyExit". `job.timeout_s` is the program's wall-clock budget, counted from the
    end of the header imports (limits.timeout_s is not used; cpu_s defaults from job.timeout_s).

    `harness_guard` (default True, the faithful setting) applies the metric's
    `reliability_guard()` between the imports and exec, as the harness does: a program that
    calls a function it disables (`os.remove`, `shutil.rmtree`, `subprocess.Popen`, `os.kill`,
    `exit()`, ...) is FAILED with error_type "TypeError" ("'NoneType' object is not callable"),
    as it fails there. The guard exists for faithful scores, not for safety (a program can undo
    it); the OS-level isolation is the same either way. False runs the program unguarded.
    """
    python = python or sys.executable
    limits = replace(limits, timeout_s=job.timeout_s)
    marker = Marker()
    try:
        result, done = run_isolated(
            runner_argv(python, marker.write_fd, harness_guard),
            {"program.py": job.program},
            limits,
            stdin_data=(marker.nonce + "\n").encode(),
            env=None,
            needed=python_paths(python),
            marker=marker,
        )
    finally:
        marker.close()
    outcome, error_type, message = score_program(result, done, job.timeout_s)
    if message is not None:
        message = message[: limits.max_output_bytes]
    return ExecResult(job.job_id, outcome, error_type, message, result.duration_s)


def python_paths(python: str) -> list[str]:
    """What the interpreter needs to reach (its executable, prefix and, for ours, sys prefixes)."""
    exe = shutil.which(python) or python
    real = os.path.realpath(exe)
    paths = {os.path.abspath(exe), real, os.path.dirname(os.path.dirname(real))}
    if real == os.path.realpath(sys.executable):
        paths |= {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    return sorted(paths)


def command_paths(argv: Sequence[str], env: Mapping[str, str] | None) -> list[str]:
    """The executable argv[0] resolves to on the run's PATH, as given and with links resolved."""
    if not argv:
        raise ValueError("argv is empty")
    search = (env or {}).get("PATH", os.environ.get("PATH", os.defpath))
    exe = shutil.which(argv[0], path=search)
    if exe is None:  # raised here: in the child, a PATH folder it may not search says EACCES
        raise FileNotFoundError(errno.ENOENT, f"not found on PATH {search!r}", argv[0])
    exe = os.path.abspath(exe)
    return sorted({exe, os.path.realpath(exe)})
