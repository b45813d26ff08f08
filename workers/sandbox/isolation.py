"""The child's isolation: the plan built in the parent, and the setup that runs in the child
between fork and exec (namespaces, private mounts, the pid-namespace split, uid drop, rlimits).

`enter_sandbox` is the preexec_fn; see the package docstring for what it achieves as root and
as non-root. The only module that touches namespaces, mounts or rlimits.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import resource
import signal
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from workers.sandbox.results import SandboxUnavailable
from workers.sandbox.slots import procs_of_uid
from workers.spec import SandboxLimits

_SHARED_TMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")  # world-writable: made private
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
CLONE_NEWNET = 0x40000000
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18


@dataclass(frozen=True)
class Cover:
    target: str  # a folder to hide behind a tmpfs
    options: bytes  # tmpfs mount options
    keep: tuple[tuple[str, str, str], ...]  # (name, "dir"|"file"|"link", link target) bound back


@dataclass(frozen=True)
class ChildPlan:
    workdir: str
    rlimits: tuple[tuple[int, tuple[int, int]], ...]
    unshare_flags: int
    id_map: tuple[int, int] | None  # (uid, gid) to map into a new user namespace (not root)
    covers: tuple[Cover, ...]  # applied in order, shallow folders first
    uid: int | None  # the slot uid (and gid) to drop to (root only)
    max_fd: int  # close fds below this in the helper processes of a pid namespace


def child_plan(workdir, limits, needed, uid, caps) -> ChildPlan:
    """Everything the child's setup needs, computed in the parent (the child only makes syscalls).

    Raises SandboxUnavailable as root when a needed path is behind a folder the slot uid cannot
    traverse and no mount namespace is available to bind it back."""
    root = os.geteuid() == 0
    net_off = not limits.network and caps["network_namespace"]
    flags, id_map, covers = 0, None, ()
    if root:
        flags |= (CLONE_NEWNET if net_off else 0) | (CLONE_NEWPID if caps["pid_namespace"] else 0)
        paths = [workdir, *needed]
        if caps["mount_namespace"]:
            flags |= CLONE_NEWNS
            covers = _cover_plan(paths, limits.file_size_mb)
        elif blocked := [p for p in paths if _blocked_dir(p)]:
            raise SandboxUnavailable(
                f"the sandbox uid cannot reach {blocked[0]} (folder {_blocked_dir(blocked[0])} is "
                "not world-traversable) and mount namespaces are unavailable to bind it; install "
                "the interpreter/toolchain under a world-readable prefix"
            )
    elif caps["user_namespace"]:
        flags = CLONE_NEWUSER | CLONE_NEWPID | (CLONE_NEWNET if net_off else 0)
        id_map = (os.getuid(), os.getgid())
    max_fd = os.sysconf("SC_OPEN_MAX")
    return ChildPlan(workdir, _rlimits(limits, root), flags, id_map, covers, uid, max_fd)


def _rlimits(limits: SandboxLimits, root: bool) -> tuple[tuple[int, tuple[int, int]], ...]:
    mb = 1024 * 1024
    cpu = limits.cpu_s if limits.cpu_s is not None else math.ceil(limits.timeout_s + 5)
    nproc = limits.max_processes
    if not root:  # RLIMIT_NPROC counts all processes of the real uid, the caller's included
        nproc += len(procs_of_uid(os.getuid()))
    wanted = {
        resource.RLIMIT_CPU: (cpu, cpu + 1),  # SIGXCPU at the soft limit, SIGKILL 1 s later
        resource.RLIMIT_FSIZE: (limits.file_size_mb * mb, limits.file_size_mb * mb),
        resource.RLIMIT_NPROC: (nproc, nproc),
        resource.RLIMIT_CORE: (0, 0),
        resource.RLIMIT_AS: (limits.memory_mb * mb, limits.memory_mb * mb),  # last: see above
    }
    out = []
    for res, (soft, hard) in wanted.items():
        _, current_hard = resource.getrlimit(res)
        if current_hard != resource.RLIM_INFINITY:  # set after the uid drop: can only lower
            soft, hard = min(soft, current_hard), min(hard, current_hard)
        out.append((res, (soft, hard)))
    return tuple(out)


def _cover_plan(paths: Sequence[str], tmp_size_mb: int) -> tuple[Cover, ...]:
    keep: dict[str, dict[str, tuple[str, str]]] = {}
    options: dict[str, bytes] = {}
    for d in _SHARED_TMP_DIRS:
        if os.path.isdir(d) and os.path.realpath(d) == d:
            keep[d], options[d] = {}, f"mode=1777,size={tmp_size_mb}m".encode()
    for path in paths:
        parts = Path(path).parts
        for depth in range(1, len(parts)):
            parent = str(Path(*parts[:depth]))
            child = os.path.join(parent, parts[depth])
            if (parent in keep or not _traversable(parent)) and os.path.lexists(child):
                keep.setdefault(parent, {})[parts[depth]] = _kind(child)
                options.setdefault(parent, b"mode=0711,size=64k")
    order = sorted(keep, key=lambda d: len(Path(d).parts))
    return tuple(
        Cover(d, options[d], tuple((n, k, t) for n, (k, t) in sorted(keep[d].items())))
        for d in order
    )


def _traversable(folder: str) -> bool:
    try:
        return bool(os.stat(folder).st_mode & stat.S_IXOTH)
    except OSError:
        return True  # a missing path is not ours to fix; exec will report it


def _blocked_dir(path: str) -> str | None:
    parts = Path(path).parts
    for depth in range(1, len(parts)):
        folder = str(Path(*parts[:depth]))
        if not _traversable(folder):
            return folder
    return None


def _kind(path: str) -> tuple[str, str]:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return "link", os.readlink(path)
    return ("dir" if stat.S_ISDIR(st.st_mode) else "file"), ""


def enter_sandbox(plan: ChildPlan, libc: Libc | None) -> None:
    """preexec_fn. Only syscalls on pre-built values: no imports, locks or logging (the parent
    may be multi-threaded). A failure is written to the child's stderr for the parent."""
    try:
        if plan.unshare_flags:
            libc.check(libc.unshare(plan.unshare_flags), "unshare")
        if plan.id_map:
            write_id_maps(*plan.id_map)
        if plan.covers:
            libc.check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "private mounts")
            for cover in plan.covers:
                _apply_cover(cover, libc)
        os.chdir(plan.workdir)
        if plan.unshare_flags & CLONE_NEWPID:
            _split_for_pid_namespace(plan.max_fd)  # returns only in the program's process
        if plan.uid is not None:
            os.setgroups([])
            os.setgid(plan.uid)
            os.setuid(plan.uid)
        # Last, after the uid drop (lowering is allowed unprivileged): RLIMIT_AS is set on a
        # copy of the parent, which may already map more than the limit.
        for res, lim in plan.rlimits:
            resource.setrlimit(res, lim)
    except BaseException as e:
        os.write(2, f"reprogrid sandbox setup failed: {e!r}\n".encode())
        raise


def _split_for_pid_namespace(max_fd: int) -> None:
    """Fork twice so the program runs as pid 2 under a trusted pid 1 of the new namespace.

    P (this process, outside the namespace, the Popen child) forks A, which is pid 1; A forks
    the program and returns in it. A reaps every orphan and exits when the program does; the
    death of a namespace's pid 1 makes the kernel SIGKILL and reap everything left in it,
    setsid()ed strays included, and without leaving zombies. P waits for A and ends with the
    program's own wait status. Neither helper holds a pipe, so EOF means the program is gone.
    The program cannot signal either: A ignores signals from inside (pid 1), P has no pid there.
    """
    r, w = os.pipe()
    a = os.fork()
    if a == 0:
        b = os.fork()
        if b == 0:
            os.close(r)
            os.close(w)
            return
        try:
            _keep_only_fd(w, max_fd)
            while True:
                pid, status = os.waitpid(-1, 0)
                if pid == b:
                    os.write(w, status.to_bytes(4, "little"))
                    break
        finally:
            os._exit(0)
    try:
        _keep_only_fd(r, max_fd)
        report = os.read(r, 4)
        _, a_status = os.waitpid(a, 0)
        _exit_like(int.from_bytes(report, "little") if len(report) == 4 else a_status)
    finally:
        os._exit(1)


def _keep_only_fd(fd: int, max_fd: int) -> None:
    os.closerange(0, fd)
    os.closerange(fd + 1, max_fd)


def _exit_like(status: int) -> None:
    """End this process with the same wait status as `status` (signal or exit code)."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            pass  # SIGKILL/SIGSTOP: default already
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _apply_cover(cover: Cover, libc: Libc) -> None:
    held = [
        (name, kind, os.open(os.path.join(cover.target, name), os.O_PATH | os.O_CLOEXEC))
        for name, kind, _ in cover.keep
        if kind != "link"
    ]
    target = cover.target.encode()
    libc.check(libc.mount(b"tmpfs", target, b"tmpfs", MS_NOSUID | MS_NODEV, cover.options), "tmpfs")
    for name, kind, link in cover.keep:
        if kind == "link":
            os.symlink(link, os.path.join(cover.target, name))
    for name, kind, fd in held:
        where = os.path.join(cover.target, name)
        if kind == "dir":
            os.mkdir(where, 0o755)
        else:
            os.close(os.open(where, os.O_CREAT | os.O_WRONLY, 0o644))
        source = f"/proc/self/fd/{fd}".encode()
        libc.check(libc.mount(source, where.encode(), None, MS_BIND | MS_REC, None), "bind")
        os.close(fd)


def write_id_maps(uid: int, gid: int) -> None:
    """Map only `uid` and `gid` into the new user namespace (setgroups denied first)."""
    for name, text in (
        ("setgroups", "deny"),
        ("uid_map", f"{uid} {uid} 1"),
        ("gid_map", f"{gid} {gid} 1"),
    ):
        fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)


class Libc:
    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.unshare = libc.unshare
        self.unshare.argtypes = [ctypes.c_int]
        self.mount = libc.mount
        self.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]

    @staticmethod
    def check(ret: int, what: str) -> None:
        if ret != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")


@functools.cache
def load_libc() -> Libc | None:
    """unshare(2) and mount(2) through ctypes, or None off Linux/glibc (then no namespaces)."""
    try:
        return Libc()
    except (OSError, AttributeError):  # not Linux/glibc: no namespaces
        return None
