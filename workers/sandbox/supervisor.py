"""One isolated run, supervised from the parent: slot, folder, spawn, pipes, deadline, kill.

The only place that spawns generated code (through `run_command` and `run_python_program` in
workers.sandbox.api).
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence

from workers.sandbox.capabilities import check_isolation, sandbox_capabilities
from workers.sandbox.isolation import CLONE_NEWPID, ChildPlan, child_plan, enter_sandbox, load_libc
from workers.sandbox.results import CommandResult, SandboxUnavailable
from workers.sandbox.runner import Marker
from workers.sandbox.slots import Slot, acquire_slot, kill_uid, pidfd_open, release_slot
from workers.sandbox.streams import Streams
from workers.sandbox.workdir import make_workdir, remove_tree
from workers.spec import SandboxLimits

# Interpreter start-up plus the header imports; the program's own timeout starts after them,
# as in the harness, whose parent has imported NumPy before it forks each program's child.
STARTUP_ALLOWANCE_S = 20.0
DRAIN_GRACE_S = 1.0  # wait for pipe EOF after the run's processes were killed


def run_isolated(
    argv: list[str],
    files: Mapping[str, str | bytes],
    limits: SandboxLimits,
    *,
    stdin_data: bytes | None,
    env: Mapping[str, str] | None,
    needed: Sequence[str],
    marker: Marker | None = None,
) -> tuple[CommandResult, dict | None]:
    """Run argv isolated in a fresh folder holding `files` (package docstring), with the slot held
    as root. `needed`: paths the child must reach (bound back through covered folders). Returns
    the result and, with a marker, the runner's report (None if it sent none)."""
    caps = sandbox_capabilities()
    root = os.geteuid() == 0
    check_isolation(caps, root, limits)
    slot = acquire_slot() if root else None
    try:
        workdir = make_workdir(files, slot.uid if slot else None)
        try:
            plan = child_plan(workdir, limits, needed, slot.uid if slot else None, caps)
            result = _spawn_and_wait(argv, plan, limits, stdin_data, env, marker, slot)
        finally:
            remove_tree(workdir)
    finally:
        if slot:
            release_slot(slot)
    return result, (marker.done() if marker else None)


def _spawn_and_wait(argv, plan, limits, stdin_data, env, marker, slot) -> CommandResult:
    streams = Streams(limits.max_output_bytes, marker, stdin_data)
    libc = load_libc()
    try:
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=streams.child_stdin,
                stdout=streams.child_out,
                stderr=streams.child_err,
                cwd=plan.workdir,
                env=_sandbox_env(plan.workdir, env),
                start_new_session=True,
                pass_fds=(marker.write_fd,) if marker else (),
                preexec_fn=functools.partial(enter_sandbox, plan, libc),
            )
        except subprocess.SubprocessError as e:
            raise SandboxUnavailable(
                f"sandbox setup failed in the child: {streams.early_error()}"
            ) from e
        finally:
            streams.close_child_ends()
        pidfd = pidfd_open(proc.pid)
        timed_out = True  # also if supervising fails: then kill and sweep everything
        try:
            timed_out = _supervise(proc, pidfd, streams, marker, limits.timeout_s)
        finally:
            _kill_run(proc, slot, plan, timed_out)  # before reaping: the leader pins its pgid
            duration = time.monotonic() - start
            if pidfd is not None:
                streams.unwatch(pidfd)
                os.close(pidfd)
            proc.wait()
        streams.drain(DRAIN_GRACE_S)
    finally:
        streams.close()
    code = proc.returncode
    return CommandResult(
        exit_code=None if timed_out or code < 0 else code,
        signal=signal.SIGKILL.value if timed_out else (-code if code < 0 else None),
        timed_out=timed_out,
        stdout=streams.out.text(),
        stderr=streams.err.text(),
        duration_s=duration,
        output_truncated=streams.out.truncated or streams.err.truncated,
    )


def _supervise(proc, pidfd, streams, marker, timeout_s) -> bool:
    """Pump the pipes until the main process exits (False) or the deadline passes (True)."""
    start = time.monotonic()
    if pidfd is not None:
        streams.watch_exit(pidfd)
    while True:
        if marker is None:
            deadline = start + timeout_s
        elif marker.ready_at is None:
            deadline = start + STARTUP_ALLOWANCE_S + timeout_s
        else:
            deadline = marker.ready_at + timeout_s
        left = deadline - time.monotonic()
        if left <= 0:
            return True
        if streams.pump(left if pidfd is not None else min(left, 0.02)):
            return False
        if pidfd is None and os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
            return False


def _kill_run(proc: subprocess.Popen, slot: Slot | None, plan: ChildPlan, forced: bool) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    # After a normal exit in a pid namespace nothing is left: its pid 1 exits only once the
    # kernel has killed and reaped the rest. After a kill, that happens asynchronously, and
    # the uid sweep waits for it; without a pid namespace the sweep is what finds strays.
    if slot and (forced or not plan.unshare_flags & CLONE_NEWPID):
        kill_uid(slot.uid)


def _sandbox_env(workdir: str, extra: Mapping[str, str] | None) -> dict[str, str]:
    env = {
        # The parent's PATH so the InfiBench toolchains resolve; it names folders, not secrets.
        "PATH": os.environ.get("PATH", os.defpath),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": workdir,
        "TMPDIR": workdir,
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    env.update(extra or {})
    return env
