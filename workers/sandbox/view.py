"""What a sandboxed program sees of the filesystem: a root of its own.

The fork server builds the view once (`build_view`, in its private mount namespace), then
pivots into it, so every run it forks starts from that view, never from the host's tree:

- a small tmpfs root, read-only once built, holding only mount points and symlinks;
- read-only, nosuid, nodev bind mounts of the system's software (/usr and the /bin, /lib...
  links or folders), the dynamic loader's cache, the local time zone, the CPU topology
  (/sys/devices/system/cpu, which BLAS and the JVM read to size their thread pools), and each
  path the caller names (the interpreter's prefixes, a toolchain and its configuration),
  with every symlink on the way to them recreated;
- /dev with null, zero, full, random and urandom only (read-only, nosuid binds) and the
  /dev/fd, stdin, stdout, stderr links; /etc with its own passwd, group, hosts and
  nsswitch.conf naming only root and the sandbox user.

Each run then gets its own pieces on top (`mount_run`, in a new mount namespace per run): one
tmpfs of `disk_mb` holding /tmp (also /var/tmp, and the run's empty work folder inside it) and
/dev/shm, and a /proc of the run's own pid namespace. Everything else the host holds (data,
stores, the checkout, home folders, other sandboxes, /sys, the host's /proc) is absent.

Standard library only (imported by the fork server, see server.py).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from workers.sandbox.syscalls import (
    MNT_DETACH,
    MS_BIND,
    MS_NOATIME,
    MS_NODEV,
    MS_NODIRATIME,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_RELATIME,
    MS_REMOUNT,
    MS_STRICTATIME,
    Libc,
)

SYSTEM_PATHS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/sys/devices/system/cpu",
)
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
DEV_LINKS = (
    ("/dev/fd", "/proc/self/fd"),
    ("/dev/stdin", "/proc/self/fd/0"),
    ("/dev/stdout", "/proc/self/fd/1"),
    ("/dev/stderr", "/proc/self/fd/2"),
)
RUN_MOUNT_POINTS = ("/proc", "/tmp", "/var/tmp", "/dev/shm", "/.run")
WORKDIR = "/tmp/work"  # the run's folder inside the view: cwd, HOME and TMPDIR
_STAGING = "/tmp"  # where the new root is assembled, in the server's own mount namespace
_MAX_LINKS = 40


@dataclass(frozen=True)
class ViewPlan:
    binds: tuple[tuple[str, bool], ...]  # (host path, is a directory), shallow first
    links: tuple[tuple[str, str], ...]  # (path, target) symlinks recreated as on the host


def plan_view(paths: Iterable[str]) -> ViewPlan:
    """The binds and symlinks that make every path in `paths` (and the system paths and
    devices) reachable with the host's names. A path that does not exist is left out: the
    program then fails to find it, as it would on a host without it."""
    binds: dict[str, bool] = {}
    links: dict[str, str] = {}
    pending = [os.path.abspath(p) for p in (*SYSTEM_PATHS, *DEVICES, *paths)]
    hops = 0
    while pending:
        path = pending.pop()
        resolved, link = _first_link(path)
        if link is None:
            if resolved is not None and resolved != "/":  # never the host's whole tree
                binds[resolved] = stat.S_ISDIR(os.stat(resolved).st_mode)
            continue
        hops += 1
        if hops > _MAX_LINKS * 64:
            raise OSError(40, f"too many symbolic links resolving {path}")
        at, target, rest = link
        links[at] = target
        pending.append(os.path.normpath(os.path.join(os.path.dirname(at), target, rest)))
    kept = sorted(b for b in binds if not _under_any(b, binds))
    return ViewPlan(
        binds=tuple((b, binds[b]) for b in kept),
        links=tuple(sorted((p, t) for p, t in links.items() if not _under_any(p, kept))),
    )


def _first_link(path: str) -> tuple[str | None, tuple[str, str, str] | None]:
    """(path, None) if no component is a symlink (path None if it does not exist), else
    (None, (the link, its target, the rest of the path after it))."""
    parts = path.split("/")[1:]
    current = ""
    for i, part in enumerate(parts):
        current += "/" + part
        try:
            st = os.lstat(current)
        except OSError:
            return None, None
        if stat.S_ISLNK(st.st_mode):
            return None, (current, os.readlink(current), "/".join(parts[i + 1 :]))
    return path, None


def _under_any(path: str, folders: Iterable[str]) -> bool:
    return any(path != f and path.startswith(f.rstrip("/") + "/") for f in folders)


def etc_files(uid: int, gid: int) -> dict[str, str]:
    """The view's own account and name-service files (no host accounts or host names)."""
    return {
        "/etc/passwd": f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
        f"sandbox:x:{uid}:{gid}:sandbox:{WORKDIR}:/usr/sbin/nologin\n",
        "/etc/group": f"root:x:0:\nsandbox:x:{gid}:\n",
        "/etc/hosts": "127.0.0.1\tlocalhost\n::1\tlocalhost\n",
        "/etc/nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
    }


def build_view(plan: ViewPlan, files: dict[str, str], libc: Libc, own_proc: bool = False) -> None:
    """Assemble the view and pivot into it. The caller has just entered a new mount namespace
    of its own (the host's mounts are untouched). `own_proc` (in a user namespace, where the
    caller is pid 1 of its own pid namespace): mount a /proc of that namespace into the view,
    because the kernel lets a user namespace mount a proc only where one is already fully
    visible; each run's own /proc then goes on top of it."""
    libc.mount(None, "/", None, MS_REC | MS_PRIVATE)
    # Opened before the staging tmpfs covers anything they live under (a path under /tmp).
    sources = [(os.open(p, os.O_PATH | os.O_CLOEXEC), p, is_dir) for p, is_dir in plan.binds]
    libc.mount("tmpfs", _STAGING, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m")
    for fd, path, is_dir in sources:
        where = _STAGING + path
        _make_point(where, is_dir)
        libc.mount(f"/proc/self/fd/{fd}", where, None, MS_BIND | MS_REC)
        os.close(fd)
    _read_only_binds(libc, _STAGING)
    for path, target in plan.links:
        os.makedirs(os.path.dirname(_STAGING + path), 0o755, exist_ok=True)
        os.symlink(target, _STAGING + path)
    for path, target in DEV_LINKS:
        if not os.path.lexists(_STAGING + path):
            os.makedirs(os.path.dirname(_STAGING + path), 0o755, exist_ok=True)
            os.symlink(target, _STAGING + path)
    for path, text in files.items():
        _make_point(_STAGING + path, False)
        with open(_STAGING + path, "w", encoding="utf-8") as fh:
            fh.write(text)
    for path in RUN_MOUNT_POINTS:
        _make_point(_STAGING + path, True)
    if own_proc:
        libc.mount("proc", _STAGING + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.chdir(_STAGING)
    libc.pivot_root(".", ".")  # the old root ends up stacked under the new one...
    libc.umount(".", MNT_DETACH)  # ...and is detached here: the host tree is gone
    os.chdir("/")
    libc.mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _make_point(where: str, is_dir: bool) -> None:
    os.makedirs(where if is_dir else os.path.dirname(where), 0o755, exist_ok=True)
    if not is_dir and not os.path.exists(where):
        os.close(os.open(where, os.O_CREAT | os.O_WRONLY, 0o644))


def _read_only_binds(libc: Libc, root: str) -> None:
    """Remount every mount under `root` (the binds and what was mounted below them on the
    host) read-only and nosuid, and nodev except device nodes; noexec and the atime mode are
    kept (they may be locked)."""
    for point, options, is_device in _mounts_under(root):
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID
        flags |= 0 if is_device else MS_NODEV
        flags |= MS_NOEXEC if "noexec" in options else 0
        flags |= _atime_flags(options)
        libc.mount(None, point, None, flags)


def _mounts_under(root: str) -> list[tuple[str, set[str], bool]]:
    """(mount point, per-mount options, is a device) of every mount on top of the newest
    mount at `root` (host mounts that it covers are left alone)."""
    entries = []
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            fields = line.split()
            entries.append((fields[0], fields[1], _unescape(fields[4]), set(fields[5].split(","))))
    parents = {mount_id: parent for mount_id, parent, _, _ in entries}
    top = [mount_id for mount_id, _, point, _ in entries if point == root][-1]
    out = []
    for mount_id, _, point, options in entries:
        ancestor, seen = parents.get(mount_id), 0
        while ancestor is not None and ancestor != top and seen < len(entries):
            ancestor, seen = parents.get(ancestor), seen + 1
        if ancestor == top:
            out.append((point, options, point[len(root) :] in DEVICES))
    return out


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes (\\040...)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _atime_flags(options: set[str]) -> int:
    flags = MS_NODIRATIME if "nodiratime" in options else 0
    if "noatime" in options:
        return flags | MS_NOATIME
    if "relatime" in options:
        return flags | MS_RELATIME
    return flags | MS_STRICTATIME


def mount_run(libc: Libc, disk_mb: int, uid: int | None, keep: Sequence[str] = ()) -> None:
    """The run's own mounts, in its new mount namespace: /tmp (with the work folder),
    /var/tmp and /dev/shm on one tmpfs of `disk_mb` (writes past it fail with ENOSPC), and a
    /proc of the run's pid namespace (this process must be its pid 1). `keep`: binds of the
    view that live under those folders (`covered_binds`), bound again on top, read-only."""
    held = [(os.open(path, os.O_PATH | os.O_CLOEXEC), path) for path in keep]
    inodes = max(1024, disk_mb * 256)
    libc.mount(
        "tmpfs",
        "/.run",
        "tmpfs",
        MS_NOSUID | MS_NODEV,
        f"mode=0755,size={disk_mb}m,nr_inodes={inodes}",
    )
    for name in ("tmp", "shm"):
        os.mkdir(f"/.run/{name}")
        os.chmod(f"/.run/{name}", 0o1777)
    for source, target in (("tmp", "/tmp"), ("tmp", "/var/tmp"), ("shm", "/dev/shm")):
        libc.mount(f"/.run/{source}", target, None, MS_BIND)
    libc.umount("/.run", MNT_DETACH)
    os.mkdir(WORKDIR, 0o700)
    if uid is not None:
        os.chown(WORKDIR, uid, uid)
    libc.mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)  # before the binds
    for fd, path in held:
        _make_point(path, stat.S_ISDIR(os.fstat(fd).st_mode))
        libc.mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        libc.mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        os.close(fd)


def covered_binds(plan: ViewPlan) -> tuple[str, ...]:
    """The plan's binds that each run's own /tmp, /var/tmp or /dev/shm would hide."""
    return tuple(p for p, _ in plan.binds if _under_any(p, ("/tmp", "/var/tmp", "/dev/shm")))


def view_paths(needed: Sequence[str]) -> tuple[str, ...]:
    """The caller's paths, normalised and de-duplicated (part of a server's identity)."""
    return tuple(sorted({os.path.abspath(p) for p in needed}))
