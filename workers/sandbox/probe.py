"""The one-time probe of what isolation this host gives, run in a throwaway interpreter
(started like a fork server, see protocol.bootstrap) so that nothing it changes touches the
caller. It performs the real steps of a fork server and of one run (view.py,
child.py's order) and prints a JSON object of booleans.

Standard library only (it imports the server modules before anything else).
"""

from __future__ import annotations

import json
import os
import sys

from workers.sandbox import server, view
from workers.sandbox.syscalls import (
    CLONE_NEWCGROUP,
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    PR_SET_NO_NEW_PRIVS,
    last_capability,
    load_libc,
)

# The run-side steps, in the order child.py takes them; each letter is written once it worked.
_RUN_STEPS = (
    "own_proc",
    "network_namespace",
    "ipc_namespace",
    "disk_quota",
    "capabilities_dropped",
    "no_new_privs",
    "drop_privileges",
)
SERVER_STEPS = ("user_namespace", "mount_namespace", "filesystem_view", "pid_namespace")
ALL_STEPS = SERVER_STEPS + _RUN_STEPS


def main(config: dict) -> None:
    """Print {step: bool} for ALL_STEPS. Never returns."""
    found: dict[str, bool] = dict.fromkeys(ALL_STEPS, False)
    libc = load_libc()
    root = os.geteuid() == 0
    config["last_cap"] = last_capability()  # read now: the view has no /proc/sys later
    if libc is not None:
        try:
            _server_steps(libc, root, found)
        except OSError:
            pass
        if found["pid_namespace"] or not root:
            found.update(_run_steps(libc, root, config, found["pid_namespace"]))
    sys.stdout.write(json.dumps(found) + "\n")
    sys.stdout.flush()
    os._exit(0)


def _server_steps(libc, root: bool, found: dict[str, bool]) -> None:
    """What a fork server does before serving (server.main), in the same order."""
    if root:
        libc.unshare(CLONE_NEWNS)
    else:
        server.enter_user_namespace(libc)  # from here on in the forked namespace pid 1
        found["user_namespace"] = True
    found["mount_namespace"] = True
    pidns = os.open("/proc/self/ns/pid", os.O_RDONLY)
    view.build_view(view.plan_view([]), view.etc_files(0, 0), libc, own_proc=not root)
    found["filesystem_view"] = True
    libc.setns(pidns, CLONE_NEWPID)
    libc.unshare(CLONE_NEWPID)
    found["pid_namespace"] = True


def _run_steps(libc, root: bool, config: dict, in_pid_namespace: bool) -> dict[str, bool]:
    """Fork the would-be P1 (pid 1 of the new pid namespace) and let it try the run's steps."""
    if not in_pid_namespace:
        return {}
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            _in_run(libc, root, config["uid"], config["last_cap"], w)
        finally:
            os._exit(0)
    os.close(w)
    # Read to the end however slow a step is on a loaded host: the caller's timeout bounds a
    # child that never ends, and a gap between steps must not cut off the steps after it.
    data = b""
    while chunk := os.read(r, 64):
        data += chunk
    os.waitpid(pid, 0)
    return {step: True for step in data.decode().split()}


def _in_run(libc, root: bool, uid: int, last_cap: int, w: int) -> None:
    def ok(step: str) -> None:
        os.write(w, (step + " ").encode())

    libc.unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWCGROUP)
    ok("ipc_namespace")
    try:
        libc.unshare(CLONE_NEWNET)
        ok("network_namespace")
    except OSError:
        pass
    view.mount_run(libc, 1, uid if root else None)
    ok("disk_quota")
    ok("own_proc")  # mount_run mounts /proc last
    libc.drop_bounding_set(last_cap)
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1)
    ok("no_new_privs")
    if root:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        ok("drop_privileges")
    libc.clear_capabilities()
    ok("capabilities_dropped")
