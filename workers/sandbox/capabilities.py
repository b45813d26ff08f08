"""What isolation this host offers (probed once, in a throwaway child), and the check before
each run that refuses what must not run and logs, once, what runs degraded."""

from __future__ import annotations

import functools
import logging
import os
import subprocess
import sys
import threading

from workers.sandbox.isolation import (
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    MS_NODEV,
    MS_NOSUID,
    MS_PRIVATE,
    MS_REC,
    Libc,
    load_libc,
    write_id_maps,
)
from workers.sandbox.results import SandboxUnavailable
from workers.sandbox.slots import SANDBOX_UID_BASE
from workers.spec import SandboxLimits

logger = logging.getLogger(__name__)

_CAPS: dict[str, bool] | None = None
_CAPS_LOCK = threading.Lock()
_WARNED: set[str] = set()
_WARN_LOCK = threading.Lock()


def sandbox_capabilities() -> dict[str, bool]:
    """What isolation works for this process (probed once, in a throwaway child)."""
    global _CAPS
    with _CAPS_LOCK:
        if _CAPS is None:
            _CAPS = _probe()
        return dict(_CAPS)


def _probe() -> dict[str, bool]:
    root = os.geteuid() == 0
    libc = load_libc()
    found = b""
    if libc is not None:
        r, w = os.pipe()
        try:
            # The child tries each step and exits inside preexec_fn, never reaching exec.
            subprocess.run(
                [sys.executable, "-c", ""],
                preexec_fn=functools.partial(_probe_child, w, root, libc),
                pass_fds=(w,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            pass
        finally:
            os.close(w)
            found = os.read(r, 64)
            os.close(r)
    return {
        "subprocess": True,
        "process_group": True,
        "rlimits": True,
        "drop_privileges": b"U" in found,
        "kill_strays_by_uid": b"U" in found,
        "network_namespace": b"N" in found,
        "pid_namespace": b"P" in found,
        "mount_namespace": b"M" in found,
        "private_tmp": b"M" in found,
        "user_namespace": b"Y" in found,
    }


def _probe_child(w: int, root: bool, libc: Libc) -> None:
    if root:
        if libc.unshare(CLONE_NEWNET) == 0:
            os.write(w, b"N")
        if libc.unshare(CLONE_NEWPID) == 0:
            os.write(w, b"P")
        if (
            libc.unshare(CLONE_NEWNS) == 0
            and libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) == 0
            and libc.mount(b"tmpfs", b"/tmp", b"tmpfs", MS_NOSUID | MS_NODEV, b"size=64k") == 0
        ):
            os.write(w, b"M")
        try:
            os.setgroups([])
            os.setgid(SANDBOX_UID_BASE)
            os.setuid(SANDBOX_UID_BASE)
            os.write(w, b"U")
        except OSError:
            pass
    elif libc.unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWPID) == 0:
        try:
            write_id_maps(os.getuid(), os.getgid())
            os.write(w, b"YNP")
        except OSError:
            pass
    os._exit(0)


def check_isolation(caps: dict[str, bool], root: bool, limits: SandboxLimits) -> None:
    """Refuse to run as root without the uid switch (SandboxUnavailable); log each degradation
    (not root, no network namespace) once per process."""
    if root and not caps["drop_privileges"]:
        raise SandboxUnavailable(
            f"running as root but cannot switch to the sandbox uid {SANDBOX_UID_BASE}; refusing "
            "to run untrusted code as root"
        )
    warnings = []
    if not root:
        warnings.append(
            "sandbox not running as root: programs run as the caller's uid"
            + ("" if caps["pid_namespace"] else "; strays that leave the process group survive")
        )
    if not limits.network and not caps["network_namespace"]:
        warnings.append("no network namespace available: sandboxed programs keep network access")
    with _WARN_LOCK:
        for text in warnings:
            if text not in _WARNED:
                _WARNED.add(text)
                logger.warning(text)
