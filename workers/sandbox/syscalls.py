"""The Linux calls the sandbox makes that Python does not wrap (through ctypes), and constants.

Standard library only: this module is imported by the fork server before it leaves the host's
filesystem (see server.py), so it may import nothing of reprogrid outside the server modules.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWIPC = 0x00020000, 0x02000000, 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME, MS_STRICTATIME = 1024, 2048, 1 << 21, 1 << 24
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 4, 24, 38
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
# pivot_root and keyctl have no glibc wrapper; their numbers differ by architecture.
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203, "s390x": 217}
_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219, "ppc64le": 271, "s390x": 280}
KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_CLEAR = 1, 7
KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING = -4, -5


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


class Libc:
    """unshare, setns, mount, umount2, pivot_root, prctl and capset; each raises OSError."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self._unshare = libc.unshare
        self._unshare.argtypes = [ctypes.c_int]
        self._setns = libc.setns
        self._setns.argtypes = [ctypes.c_int, ctypes.c_int]
        self._mount = libc.mount
        self._mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
        self._umount2 = libc.umount2
        self._umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
        self._prctl = libc.prctl
        self._prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
        self._capset = libc.capset
        self._capset.argtypes = [ctypes.POINTER(_CapHeader), ctypes.POINTER(_CapData * 2)]
        self._syscall = libc.syscall
        self._syscall.restype = ctypes.c_long
        self.pivot_root_nr = _SYS_PIVOT_ROOT.get(platform.machine())
        self.keyctl_nr = _SYS_KEYCTL.get(platform.machine())

    @staticmethod
    def _check(ret: int, what: str) -> None:
        if ret != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")

    def unshare(self, flags: int) -> None:
        self._check(self._unshare(flags), f"unshare({flags:#x})")

    def setns(self, fd: int, nstype: int) -> None:
        self._check(self._setns(fd, nstype), "setns")

    def mount(
        self,
        source: str | None,
        target: str,
        fstype: str | None,
        flags: int,
        data: str | None = None,
    ) -> None:
        enc = lambda s: None if s is None else s.encode()  # noqa: E731
        ret = self._mount(enc(source), target.encode(), enc(fstype), flags, enc(data))
        self._check(ret, f"mount {fstype or source or ''} on {target}")

    def umount(self, target: str, flags: int = MNT_DETACH) -> None:
        self._check(self._umount2(target.encode(), flags), f"umount {target}")

    def pivot_root(self, new_root: str, put_old: str) -> None:
        if self.pivot_root_nr is None:
            raise OSError(38, f"pivot_root: unknown syscall number on {platform.machine()}")
        ret = self._syscall(ctypes.c_long(self.pivot_root_nr), new_root.encode(), put_old.encode())
        self._check(ret, "pivot_root")

    def fresh_keyrings(self, clear_user_keyrings: bool) -> None:
        """Join a new, empty session keyring (not the driver's), and empty the uid's user and
        user-session keyrings, which outlive processes: what one program stored there would
        otherwise be read by the next program of the same uid. Where keyctl is unavailable
        (no syscall, or a seccomp filter refusing it) a program cannot use keyrings either."""
        if self.keyctl_nr is None:
            return
        calls: list[tuple[int, int | None]] = [(KEYCTL_JOIN_SESSION_KEYRING, None)]
        if clear_user_keyrings:
            calls += [(KEYCTL_CLEAR, KEY_SPEC_USER_KEYRING)]
            calls += [(KEYCTL_CLEAR, KEY_SPEC_USER_SESSION_KEYRING)]
        for op, arg in calls:
            ret = self._syscall(
                ctypes.c_long(self.keyctl_nr),
                ctypes.c_long(op),
                ctypes.c_void_p(None) if arg is None else ctypes.c_long(arg),
            )
            if ret < 0 and ctypes.get_errno() not in (errno.ENOSYS, errno.EPERM, errno.EACCES):
                err = ctypes.get_errno()
                raise OSError(err, f"keyctl({op}): {os.strerror(err)}")

    def prctl(self, option: int, arg: int = 0) -> None:
        self._check(self._prctl(option, arg, 0, 0, 0), f"prctl({option})")

    def drop_bounding_set(self, last_cap: int) -> None:
        """Empty the capability bounding set: nothing this process or its descendants exec can
        gain a capability again. Needs CAP_SETPCAP, so it comes before giving up root."""
        for cap in range(last_cap + 1):
            self.prctl(PR_CAPBSET_DROP, cap)

    def clear_capabilities(self) -> None:
        """Empty the effective, permitted and inheritable sets (ambient follows permitted)."""
        header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
        data = (_CapData * 2)()
        self._check(self._capset(ctypes.byref(header), ctypes.byref(data)), "capset")


@functools.cache
def load_libc() -> Libc | None:
    """The calls above, or None off Linux/glibc (then no namespaces are available)."""
    try:
        return Libc()
    except (OSError, AttributeError):
        return None


def last_capability() -> int:
    """The highest capability number this kernel knows (CAP_LAST_CAP)."""
    try:
        with open("/proc/sys/kernel/cap_last_cap", "rb") as fh:  # bytes: no codec to import
            return int(fh.read())
    except (OSError, ValueError):
        return 40  # CAP_CHECKPOINT_RESTORE, the last one as of Linux 5.9


def write_id_maps(uid: int, gid: int) -> None:
    """Map only `uid` and `gid` (to themselves) into a new user namespace; setgroups denied."""
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
