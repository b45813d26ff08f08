"""One run, as the fork server forks it: the run's supervisor (P1) and the program (P2).

    server --fork--> P1: pid 1 of a fresh pid namespace; joins the slot's cgroups; enters
                     fresh mount, IPC and (unless limits.network) network namespaces; mounts
                     the run's tmpfs and /proc; reaps orphans; relays P2's wait status
           P1 --fork--> P2: own session; fds 0-2 the run's pipes, nothing else open but the
                     report pipe; empty bounding set, no_new_privs, the slot uid (or, in a
                     user namespace, no capabilities); rlimits; cwd the empty work folder;
                     then the runner (HumanEvalFix) or execve (run_command)

When P2 exits, P1 writes its status and exits; the death of a pid namespace's pid 1 makes the
kernel kill and reap everything left in it, so when the server has reaped P1, nothing of the
run is left: no process, and no work folder (its tmpfs belonged to the run's mount namespace).
The server kills P1 to end a run early (timeout, driver gone). P1 dies with the server
(PR_SET_PDEATHSIG), checked against a pipe only the server holds to close the race.

In "process" mode (no namespaces on this host) P1 is a plain child that creates and removes a
host work folder and kills P2's process group; strays that leave it survive (see __init__).

Standard library only (imported by the fork server, see server.py).
"""

from __future__ import annotations

import base64
import json
import os
import resource
import select
import signal
import sys
from dataclasses import dataclass

from workers.sandbox import runner, view
from workers.sandbox.syscalls import (
    CLONE_NEWCGROUP,
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    PR_SET_DUMPABLE,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_PDEATHSIG,
    Libc,
)
from workers.sandbox.workdir import remove_tree

SETUP_FAILED = "reprogrid sandbox setup failed"
NAMESPACE_MODES = ("namespaces", "userns")


@dataclass(frozen=True)
class ServerSetup:
    """What every run of one server shares (fixed when the server starts)."""

    mode: str  # "namespaces" (root), "userns" (not root, user namespace) or "process"
    uid: int | None  # the slot uid (and gid) P2 switches to; None: keep the caller's
    cgroup_fds: tuple[int, ...]  # cgroup.procs of the slot's memory/pids cgroups
    last_cap: int  # CAP_LAST_CAP
    lifeline: int  # read end of a pipe only the server writes: EOF means the server died
    pidns: int | None  # the server's own pid namespace (to start a fresh one per run)
    server_only: tuple[int, ...]  # the server's socket and lifeline write end: P1 closes them
    libc: Libc | None  # None only in "process" mode, as pidns (server.main sees to both)
    can_drop_bounding: bool  # root or in a user namespace: CAP_SETPCAP is held
    keep: tuple[str, ...] = ()  # view binds under /tmp & co. (view.covered_binds)
    clear_user_keyrings: bool = False  # the run's uid's keyrings are not the caller's own


@dataclass(frozen=True)
class RunFds:
    payload: int  # the run's request (JSON), read by P1
    stdin: int | None  # None: /dev/null
    out: int
    err: int
    report: int | None  # the runner's report pipe (HumanEvalFix only)
    status: int  # P1 -> server: P2's pid, then its wait status (4 bytes each)
    setup: int  # P2 -> server: one byte once the setup is complete


def start_run(setup: ServerSetup, fds: RunFds, workdir: str) -> int:
    """Fork P1 (in a fresh pid namespace where available); returns its pid (server side)."""
    if setup.mode in NAMESPACE_MODES:
        # server.main sets both in these modes (see ServerSetup)
        assert setup.libc is not None and setup.pidns is not None
        setup.libc.setns(setup.pidns, CLONE_NEWPID)  # children back in our own namespace...
        setup.libc.unshare(CLONE_NEWPID)  # ...then a fresh one for the next child only
    pid = os.fork()
    if pid == 0:
        _supervisor(setup, fds, workdir)
    return pid


def _supervisor(setup: ServerSetup, fds: RunFds, workdir: str) -> None:
    code = 1
    try:
        os.dup2(fds.out, 1)  # first: whatever fails below is reported on the run's stderr
        os.dup2(fds.err, 2)
        # No handler a program could trigger: signals from inside a pid namespace reach its
        # pid 1 only through handlers (Python's own SIGINT handler would be one).
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        for fd in setup.server_only:
            os.close(fd)
        libc = setup.libc
        if libc is not None:
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if select.select([setup.lifeline], [], [], 0)[0]:
            return  # the server died before PDEATHSIG was armed
        for fd in setup.cgroup_fds:
            os.write(fd, b"0")  # this process, and everything it forks, joins the cgroup
        request = _read_request(fds.payload)
        if setup.mode in NAMESPACE_MODES:
            assert libc is not None  # server.main sets it in these modes (see ServerSetup)
            net = 0 if request["network"] else CLONE_NEWNET
            # After joining the cgroups: the program's /proc/self/cgroup then names no host path.
            libc.unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWCGROUP | net)
            view.mount_run(libc, request["disk_mb"], setup.uid, setup.keep)
            _oom_score(-1000)  # the memory limit's OOM kill must pick the program, not us
            libc.prctl(PR_SET_DUMPABLE, 0)  # P2 may share our uid (user namespace): no ptrace
            workdir = view.WORKDIR
        else:
            os.mkdir(workdir, 0o700)
            if setup.uid is not None:
                os.chown(workdir, setup.uid, setup.uid)
        program = os.fork()
        if program == 0:
            _program(setup, fds, request, workdir)
        os.close(fds.setup)
        _write_int(fds.status, program)
        status = _wait_for(program, pid_one=setup.mode in NAMESPACE_MODES)
        if setup.mode not in NAMESPACE_MODES:
            _kill_group(program)
            remove_tree(workdir)
        _write_int(fds.status, status)
        code = 0
    except BaseException as e:
        _say_failed(e)
    finally:
        os._exit(code)


def _program(setup: ServerSetup, fds: RunFds, request: dict, workdir: str) -> None:
    try:
        os.setsid()
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in any Python process
        _oom_score(0)
        stdin = fds.stdin if fds.stdin is not None else os.open(os.devnull, os.O_RDONLY)
        os.dup2(stdin, 0)
        keep = {fds.setup} | ({fds.report} if fds.report is not None else set())
        _close_all_but(keep)
        libc = setup.libc
        if setup.can_drop_bounding and libc is not None:
            libc.drop_bounding_set(setup.last_cap)
        if libc is not None:
            libc.prctl(PR_SET_NO_NEW_PRIVS, 1)
        if setup.uid is not None:
            os.setgroups([])
            os.setgid(setup.uid)
            os.setuid(setup.uid)
        if libc is not None:
            libc.fresh_keyrings(setup.clear_user_keyrings)
        if setup.mode in NAMESPACE_MODES:
            assert libc is not None  # server.main sets it in these modes (see ServerSetup)
            libc.clear_capabilities()  # a user namespace keeps its caps across the steps above
            # The uid change made us non-dumpable (root-owned /proc/<pid> files); an exec
            # would undo that, and the harness child is dumpable too. P1 stays non-dumpable.
            libc.prctl(PR_SET_DUMPABLE, 1)
        for res, soft, hard in request["rlimits"]:
            current = resource.getrlimit(res)[1]
            if current != resource.RLIM_INFINITY:  # unprivileged now: can only lower
                soft, hard = min(soft, current), min(hard, current)
            resource.setrlimit(res, (soft, hard))
        os.chdir(workdir)
        _write_files(request.get("files") or {})
        os.write(fds.setup, b"1")
        os.close(fds.setup)
    except BaseException as e:
        _say_failed(e)
        os._exit(1)
    _start(request, fds, workdir)


def _start(request: dict, fds: RunFds, workdir: str) -> None:
    """The program proper: the harness runner, or the command's executable."""
    env = dict(request["env"], HOME=workdir, TMPDIR=workdir)
    if request["kind"] == "python":
        # run_program (api.py) always sends a python run with its Marker's report pipe
        assert fds.report is not None
        os.environ.clear()
        os.environ.update(env)
        sys.argv[:] = ["-c"]
        runner.run_program(request["program"], request["nonce"], fds.report, request["guard"])
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # as subprocess's restore_signals does
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execve(request["exe"], request["argv"], env)
    except OSError as e:
        os.write(2, f"cannot execute {request['argv'][0]!r}: {e}\n".encode())
        os._exit(126 if isinstance(e, PermissionError) else 127)


def _read_request(fd: int) -> dict:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    return json.loads(b"".join(chunks))


def _write_files(files: dict[str, str]) -> None:
    for rel, encoded in files.items():
        folder = os.path.dirname(rel)
        if folder:
            os.makedirs(folder, exist_ok=True)
        with open(rel, "wb") as fh:
            fh.write(base64.b64decode(encoded))


def _wait_for(program: int, pid_one: bool) -> int:
    """P2's wait status; as a pid namespace's pid 1, reaping every orphan meanwhile."""
    while True:
        pid, status = os.waitpid(-1 if pid_one else program, 0)
        if pid == program:
            return status


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _close_all_but(keep: set[int]) -> None:
    low = 3
    for fd in sorted(keep):
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))


def _oom_score(adj: int) -> None:
    """Set /proc/self/oom_score_adj where allowed (lowering it needs CAP_SYS_RESOURCE)."""
    try:
        with open("/proc/self/oom_score_adj", "w", encoding="utf-8") as fh:
            fh.write(str(adj))
    except OSError:
        pass  # without CAP_SYS_RESOURCE: the supervisor may be the one killed (supervisor.py)


def _write_int(fd: int, value: int) -> None:
    os.write(fd, value.to_bytes(4, "little", signed=True))


def _say_failed(e: BaseException) -> None:
    try:
        os.write(2, f"{SETUP_FAILED}: {e!r}\n".encode())
    except OSError:
        pass
