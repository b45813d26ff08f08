"""One run on a leased fork server, supervised from the driver: the request, the pipes, the
deadline, the kill, and what is checked afterwards (cgroup empty, OOM kills, stray uids)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Mapping

from workers.execspec import SandboxLimits
from workers.sandbox.child import SETUP_FAILED
from workers.sandbox.pool import ForkServer
from workers.sandbox.results import CommandResult, SandboxUnavailable
from workers.sandbox.slots import kill_uid
from workers.sandbox.streams import Marker, Streams

# Setup of the run plus, for run_command, the command's own start; the program's timeout
# starts when the runner says "ready", as in the harness, whose parent has imported NumPy
# before it forks each program's child.
STARTUP_ALLOWANCE_S = 20.0
DRAIN_GRACE_S = 1.0  # wait for pipe EOF after the run's processes are gone
KILL_GRACE_S = 10.0  # the server must report a killed run within this long
_REPLY_S = 30.0  # "started" comes right after a fork


def run_on_server(
    server: ForkServer,
    request: dict,
    limits: SandboxLimits,
    *,
    stdin_data: bytes | None,
    marker: Marker | None,
) -> CommandResult:
    """Run `request` (child.py's request: kind, program or argv/files, env, rlimits, network,
    disk_mb) on `server` under `limits`; the wall clock is limits.timeout_s from the runner's
    "ready" (with a marker) or from the start."""
    streams = Streams(limits.max_output_bytes, marker)
    try:
        streams.feed("payload", json.dumps(request).encode())
        if stdin_data is not None:
            streams.feed("stdin", stdin_data)
        oom_before = _before(server, limits)
        start = time.monotonic()
        names = list(streams.child_fds)
        server.send({"op": "run", "fds": names}, [streams.child_fds[n] for n in names])
        streams.close_child_ends()
        server.expect("started", _REPLY_S)
        streams.watch_exit(server.connection().fileno())
        timed_out = _supervise(server, streams, marker, limits.timeout_s)
        reply = server.expect("exited", KILL_GRACE_S)
        duration = time.monotonic() - start
        streams.unwatch(server.connection().fileno())
        streams.drain(DRAIN_GRACE_S)
    finally:
        streams.close()
    memory_killed = _after(server, oom_before)
    return _result(reply, timed_out, streams, duration, memory_killed)


def _before(server: ForkServer, limits: SandboxLimits) -> int:
    if server.cgroup is None:
        return 0
    server.cgroup.set_limits(limits.memory_mb, limits.max_processes)
    return server.cgroup.oom_kills()


def _after(server: ForkServer, oom_before: int) -> bool:
    """True if the memory limit killed something; also makes sure nothing of the run is left
    (with a pid namespace nothing can be: the checks find strays of process mode only)."""
    if server.slot is not None and server.mode == "process":
        kill_uid(server.slot.uid)
    if server.cgroup is None:
        return False
    if server.cgroup.kill_members():
        server.broken = True  # cannot happen with a pid namespace: do not trust this server
    return server.cgroup.oom_kills() > oom_before


def _supervise(server: ForkServer, streams: Streams, marker: Marker | None, timeout_s: float):
    """Pump the pipes until the server reports the run's end (False) or the deadline passes
    (True: the run is killed, and the server's report awaited by the caller)."""
    start = time.monotonic()
    while True:
        if marker is None:
            deadline = start + timeout_s
        elif marker.ready_at is None:
            deadline = start + STARTUP_ALLOWANCE_S + timeout_s
        else:
            deadline = marker.ready_at + timeout_s
        left = deadline - time.monotonic()
        if left <= 0:
            server.send({"op": "kill"})
            _wait_readable(server, streams)
            return True
        if streams.pump(left):
            return False


def _wait_readable(server: ForkServer, streams: Streams) -> None:
    """After a kill: keep the pipes moving until the server's report arrives."""
    end = time.monotonic() + KILL_GRACE_S
    while time.monotonic() < end:
        if streams.pump(end - time.monotonic()):
            return
    server.broken = True  # expect() raises on the missing report


def _result(
    reply: dict, timed_out: bool, streams: Streams, duration: float, memory_killed: bool
) -> CommandResult:
    status = reply.get("status")
    if status is None and memory_killed and reply.get("setup_ok") and not timed_out:
        status = signal.SIGKILL.value  # the limit's OOM kill took the supervisor: as "SIGKILL"
    if not timed_out and (status is None or not reply.get("setup_ok")):
        detail = streams.err.text().strip() or f"supervisor status {reply.get('supervisor_status')}"
        if SETUP_FAILED in detail:
            detail = detail[detail.rindex(SETUP_FAILED) :]
        raise SandboxUnavailable(f"sandbox setup failed in the child: {detail}")
    if timed_out or status is None:
        code, sig = None, signal.SIGKILL.value
    elif os.WIFSIGNALED(status):
        code, sig = None, os.WTERMSIG(status)
    else:
        code, sig = os.WEXITSTATUS(status), None
    return CommandResult(
        exit_code=None if timed_out else code,
        signal=signal.SIGKILL.value if timed_out else sig,
        timed_out=timed_out,
        stdout=streams.out.text(),
        stderr=streams.err.text(),
        duration_s=duration,
        output_truncated=streams.out.truncated or streams.err.truncated,
        memory_killed=memory_killed,
    )


def sandbox_env(workdir: str, extra: Mapping[str, str] | None) -> dict[str, str]:
    """The scrubbed environment of a run (and of the fork servers, whose forks inherit it)."""
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
