"""The fork server: one long-lived process per sandbox slot, started by the driver (pool.py).

It starts as `python -I -B -c <protocol.bootstrap(...)> <config>`, imports only the server
modules (standard library only; the bootstrap registers bare `workers` and `workers.sandbox`
packages so that the package __init__ and its driver-side imports never run here), then:

1. enters its own mount namespace (as root; not root: a user namespace mapping only the
   caller's uid, and a pid namespace whose pid 1 is the server) and builds the view
   (view.py), pivoting into it: from here on it cannot open anything of the host;
2. imports the preload modules (the harness header: NumPy & co.), from inside the view;
3. says "ready" and serves runs one at a time: for each "run" message (with the run's pipes
   attached) it forks the run (child.py), answers "started", kills it on "kill", and answers
   "exited" with P2's wait status once the run is gone. EOF on its socket (the driver died)
   kills the current run and ends the server.

The server never runs generated code itself, never reads a program's text (that goes from the
driver through a pipe to P1), and stays root (or privileged in its user namespace) so each run
can get fresh namespaces. "process" mode (no namespaces here) skips 1.
"""

from __future__ import annotations

import itertools
import json
import os
import select
import signal
import socket
import sys

from workers.sandbox import child, protocol, runner, view
from workers.sandbox.syscalls import (
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    PR_SET_PDEATHSIG,
    Libc,
    last_capability,
    load_libc,
    write_id_maps,
)
from workers.sandbox.workdir import remove_tree


def main(config: dict) -> None:
    """Serve until the driver closes its end. Never returns."""
    sock = socket.socket(fileno=config["sock_fd"])
    libc = load_libc()
    mode = config["mode"]
    uid = config["uid"]
    try:
        last_cap = last_capability()  # before the view: it has no /proc/sys
        pidns: int | None = None
        keep: tuple[str, ...] = ()
        if mode != "process":
            if libc is None:  # the probe picks these modes only where its libc calls worked
                raise OSError(f"{mode!r} mode needs libc's namespace calls, not found here")
            if mode == "userns":
                enter_user_namespace(libc)
            elif mode == "namespaces":
                libc.unshare(CLONE_NEWNS)
            pidns = os.open("/proc/self/ns/pid", os.O_RDONLY)
            ids = (uid, uid) if uid is not None else (os.getuid(), os.getgid())
            plan = view.plan_view(config["paths"])
            view.build_view(plan, view.etc_files(*ids), libc, own_proc=mode == "userns")
            keep = view.covered_binds(plan)
        runner.import_all(tuple(config["preload"]))
        lifeline, lifeline_w = os.pipe()
        setup = child.ServerSetup(
            mode=mode,
            uid=uid,
            cgroup_fds=tuple(config["cgroup_fds"]),
            last_cap=last_cap,
            lifeline=lifeline,
            pidns=pidns,
            server_only=(sock.fileno(), lifeline_w),
            keep=keep,
            clear_user_keyrings=uid is not None or (mode == "userns" and _keyrings_per_userns()),
            libc=libc,
            can_drop_bounding=mode != "process" or os.geteuid() == 0,
        )
    except BaseException as e:
        protocol.send(sock, {"op": "failed", "error": f"{type(e).__name__}: {e}"})
        os._exit(1)
    protocol.send(sock, {"op": "ready", "pid": os.getpid()})
    _serve(sock, setup, config["tempdir"])
    os._exit(0)


def enter_user_namespace(libc: Libc) -> None:
    """Become pid 1 of a new user + pid + mount namespace; the original process only waits
    (holding nothing but the lifeline, so the driver sees EOF when the server dies)."""
    uid, gid = os.getuid(), os.getgid()
    libc.unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS)
    write_id_maps(uid, gid)
    lifeline, keep_alive = os.pipe()
    pid = os.fork()
    if pid:
        os.closerange(0, keep_alive)
        os.closerange(keep_alive + 1, os.sysconf("SC_OPEN_MAX"))
        _, status = os.waitpid(pid, 0)
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    os.close(keep_alive)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if select.select([lifeline], [], [], 0)[0]:
        os._exit(1)  # the waiting parent died before PDEATHSIG was armed
    os.close(lifeline)


def _keyrings_per_userns() -> bool:
    """Linux 5.3 moved the user keyrings into the user namespace; before, a user namespace's
    "user keyring" was the caller's own (which must not be cleared)."""
    release = os.uname().release.split(".")
    try:
        return (int(release[0]), int(release[1].split("-")[0])) >= (5, 3)
    except (IndexError, ValueError):
        return False


def _serve(sock: socket.socket, setup: child.ServerSetup, tempdir: str) -> None:
    counter = itertools.count()
    while True:
        message, fds = protocol.receive(sock)
        if message is None or message.get("op") == "exit":
            return
        if message.get("op") == "kill":  # for a run that ended meanwhile
            _close(*fds)
            continue
        if message.get("op") != "run":
            for fd in fds:
                os.close(fd)
            protocol.send(sock, {"op": "failed", "error": f"unknown message {message!r}"})
            continue
        workdir = os.path.join(tempdir, f"reprogrid-sbx-{os.getpid()}-{next(counter)}")
        if not _run(sock, setup, dict(zip(message["fds"], fds, strict=True)), workdir):
            return


def _run(
    sock: socket.socket, setup: child.ServerSetup, given: dict[str, int], workdir: str
) -> bool:
    """One run; False once the driver has gone away (the run is killed first)."""
    status_r, status_w = os.pipe()
    setup_r, setup_w = os.pipe()
    fds = child.RunFds(
        payload=given["payload"],
        stdin=given.get("stdin"),
        out=given["out"],
        err=given["err"],
        report=given.get("report"),
        status=status_w,
        setup=setup_w,
    )
    try:
        p1 = child.start_run(setup, fds, workdir)
    except OSError as e:
        _close(*given.values(), status_r, status_w, setup_r, setup_w)
        protocol.send(sock, {"op": "failed", "error": f"cannot start the run: {e}"})
        return True
    _close(*given.values(), status_w, setup_w)
    protocol.send(sock, {"op": "started", "pid": p1})
    killed, alive, data = False, True, b""
    watched: list[socket.socket | int] = [sock, status_r]
    while True:
        ready = select.select(watched, [], [])[0]
        if status_r in ready:
            chunk = os.read(status_r, 64)
            data += chunk
            if not chunk:
                break
        if sock in ready:
            message, extra = protocol.receive(sock)
            _close(*extra)
            if message is None:
                alive = False
                watched.remove(sock)
            if message is None or message.get("op") == "kill":
                _kill(p1, data, setup.mode)
                killed = True
    _, p1_status = os.waitpid(p1, 0)
    setup_ok = os.read(setup_r, 1) == b"1"
    _close(status_r, setup_r)
    if setup.mode not in child.NAMESPACE_MODES and os.path.lexists(workdir):
        remove_tree(workdir)
    status = int.from_bytes(data[4:8], "little", signed=True) if len(data) >= 8 else None
    if alive:
        protocol.send(
            sock,
            {
                "op": "exited",
                "status": status,
                "setup_ok": setup_ok,
                "killed": killed,
                "supervisor_status": p1_status,
            },
        )
    return alive


def _kill(p1: int, data: bytes, mode: str) -> None:
    """SIGKILL P1 (in a pid namespace that takes everything with it); in process mode also
    P2's process group, whose pid P1 sent first."""
    if mode not in child.NAMESPACE_MODES and len(data) >= 4:
        try:
            os.killpg(int.from_bytes(data[:4], "little", signed=True), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.kill(p1, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _close(*fds: int | None) -> None:
    for fd in fds:
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass


if __name__ == "__main__":  # pragma: no cover - started through BOOTSTRAP
    main(json.loads(sys.argv[1]))
