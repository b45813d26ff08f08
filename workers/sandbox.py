"""Runs untrusted generated code in isolated subprocesses; nothing else in reprogrid spawns it.

Every run gets a fresh process in its own session and process group, a fresh working folder
(also HOME and TMPDIR; removed afterwards), a scrubbed environment, no stdin unless given,
captured output capped to its last `limits.max_output_bytes`, and rlimits set in the child
(address space, CPU time, file size, processes, no core files). At the timeout, and again
when the main process exits, the process group is SIGKILLed. The rest depends on the
privileges of the caller; `sandbox_capabilities()` reports what the one-time probe found.

As root (CI and the worker images), all of:
- the program runs as an unprivileged uid of its own, one per concurrent *slot*
  (SANDBOX_UID_BASE + i, held through a host-wide lock file): it cannot write root-owned
  places, signal the caller or read /proc/<caller>/environ, and RLIMIT_NPROC is per slot;
  after the run every process of that uid is killed (strays that left the process group);
- a new pid namespace in which the program is pid 2 under a trusted pid 1: when the run ends,
  the kernel kills and reaps everything in it (setsid()ed strays too, no zombies left), and
  the caller has no pid the program could signal;
- a new network namespace (a down loopback only) unless limits.network;
- a new mount namespace: /tmp, /var/tmp, /dev/shm and /run/lock are private size-capped
  tmpfs, and folders the slot uid cannot traverse (a 0700 /root holding a pyenv interpreter)
  are covered by a tmpfs through which only the subtrees the run needs are bound back.

Not root (degraded; logged once): no privilege drop, so the program runs as the caller's uid
and can write wherever the caller can and read the caller's /proc files. Where unprivileged
user namespaces are allowed, it still gets the pid and network namespaces (so strays die and
the caller is not addressable); otherwise only the process group is killed, and
setsid()ed strays survive. RLIMIT_NPROC counts every process of the uid there, so it is set
to that count plus `max_processes`.

This is OS-level isolation: nothing is monkey-patched inside the interpreter (a
`reliability_guard` applied before the header imports breaks `import numpy`, spec §10). It is
not a container: files stay readable wherever their modes allow.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import functools
import grp
import json
import logging
import math
import os
import pwd
import resource
import secrets
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from workers.spec import ExecJob, ExecResult, Outcome, SandboxLimits

logger = logging.getLogger(__name__)

SANDBOX_UID_BASE = 61000  # first uid (and gid) of the reserved range; no account may own one
SANDBOX_SLOTS = 128  # concurrent root sandboxes per host: uids 61000-61127
# Interpreter start-up plus the header imports; the program's own timeout starts after them,
# as in the harness, whose parent has imported NumPy before it forks each program's child.
STARTUP_ALLOWANCE_S = 20.0
DRAIN_GRACE_S = 1.0  # wait for pipe EOF after the run's processes were killed
# What the harness process has imported when it forks a program (IMPORT_HELPER in
# workers/benchmarks/humanevalfix/postprocess.py; a test keeps the two in step).
HARNESS_PRELOADED_MODULES = (
    "math", "re", "sys", "copy", "datetime", "itertools", "collections", "heapq",
    "statistics", "functools", "hashlib", "numpy", "string", "typing",
)  # fmt: skip

_SHARED_TMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")  # world-writable: made private
_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
_CLONE_NEWNET = 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC, _MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18
_CHUNK = 65536
_MARKER_CAP = 1 << 20


class SandboxUnavailable(RuntimeError):
    """The isolation this host promises cannot be set up (or the sandbox itself failed)."""


@dataclass(frozen=True)
class CommandResult:
    exit_code: int | None  # None when killed by the timeout or by a signal
    signal: int | None  # the signal that ended it (SIGKILL after a timeout)
    timed_out: bool
    stdout: str  # the last limits.max_output_bytes bytes, decoded as UTF-8 (errors replaced)
    stderr: str  # same
    duration_s: float  # wall clock in the parent, spawn to exit
    output_truncated: bool  # stdout or stderr was longer than the cap


# ---------------------------------------------------------------------------------------------
# Public API


def run_command(
    argv: Sequence[str],
    files: Mapping[str, str | bytes],
    limits: SandboxLimits,
    *,
    stdin_text: str | None = None,
    env: Mapping[str, str] | None = None,
) -> CommandResult:
    """Run argv in a fresh temporary working folder holding `files`, isolated as described in
    the module docstring; the folder is removed afterwards.

    `files` maps relative paths (subfolders are created) to text (written as UTF-8) or bytes.
    `env` entries are merged over the scrubbed environment. The wall-clock limit is
    `limits.timeout_s` from spawn. Raises ValueError for a path leaving the folder, OSError when
    argv[0] cannot be executed, SandboxUnavailable when the isolation cannot be set up.
    """
    stdin_data = None if stdin_text is None else stdin_text.encode("utf-8", "surrogatepass")
    result, _ = _run_isolated(
        list(argv), files, limits, stdin_data=stdin_data, env=env, needed=_command_paths(argv, env)
    )
    return result


def run_python_program(
    job: ExecJob, limits: SandboxLimits, python: str | None = None
) -> ExecResult:
    """Run one HumanEvalFix program (job.program is the complete file) the way the harness's
    execution metric scores it, isolated.

    A runner compiles the file with filename "<program>" and exec()s it with an empty globals
    dict (so `__name__` is "builtins"), after importing the header modules the harness parent
    already holds. The program passes only if exec returned and the runner reported so on a
    private pipe (with a per-run nonce): an early `os._exit(0)` or `sys.exit(0)` is FAILED with
    error_type "EarlyExit". `job.timeout_s` is the program's wall-clock budget, counted from the
    end of the header imports (limits.timeout_s is not used; cpu_s defaults from job.timeout_s).
    """
    python = python or sys.executable
    limits = replace(limits, timeout_s=job.timeout_s)
    marker = _Marker()
    argv = [python, "-I", "-B", "-c", _RUNNER, str(marker.write_fd), *HARNESS_PRELOADED_MODULES]
    try:
        result, done = _run_isolated(
            argv,
            {"program.py": job.program},
            limits,
            stdin_data=(marker.nonce + "\n").encode(),
            env=None,
            needed=_python_paths(python),
            marker=marker,
        )
    finally:
        marker.close()
    outcome, error_type, message = score_program(result, done, job.timeout_s)
    if message is not None:
        message = message[: limits.max_output_bytes]
    return ExecResult(job.job_id, outcome, error_type, message, result.duration_s)


def sandbox_capabilities() -> dict[str, bool]:
    """What isolation works for this process (probed once, in a throwaway child)."""
    global _CAPS
    with _CAPS_LOCK:
        if _CAPS is None:
            _CAPS = _probe()
        return dict(_CAPS)


def score_program(
    result: CommandResult, done: dict | None, timeout_s: float
) -> tuple[Outcome, str | None, str | None]:
    """Outcome, error_type and error_message of a runner run (pure; `done` is its report)."""
    status = done.get("status") if done else None
    if status == "passed" and result.exit_code == 0:
        return Outcome.PASSED, None, None
    if result.timed_out:
        return Outcome.TIMEOUT, "Timeout", f"did not finish within {timeout_s:g} s"
    if status == "compile_error":
        return Outcome.ERROR, "SyntaxError", f"{done.get('type')}: {done.get('message')}"
    if status == "raised":
        if done.get("type") == "SystemExit":
            return Outcome.FAILED, "EarlyExit", f"SystemExit({done.get('message')}) in the program"
        return Outcome.FAILED, str(done.get("type")), str(done.get("message"))
    if result.signal is not None:
        name = signal.Signals(result.signal).name if result.signal in _SIGNALS else result.signal
        return Outcome.ERROR, "Signal", f"killed by {name}" + _tail_note(result.stderr)
    note = _tail_note(result.stderr) if result.exit_code else ""
    message = f"exited with status {result.exit_code} before the test finished{note}"
    return Outcome.FAILED, "EarlyExit", message


# ---------------------------------------------------------------------------------------------
# The runner: trusted code that runs first in the child and reports through a private pipe.

_RUNNER = r"""
import json, os, sys
def _runner():
    fd, modules = int(sys.argv[1]), sys.argv[2:]
    del sys.argv[1:]
    os.set_inheritable(fd, False)
    write, exit_, dumps = os.write, os._exit, json.dumps  # kept: the program may rebind
    flush = (sys.stdout.flush, sys.stderr.flush)
    nonce = b""
    while not nonce.endswith(b"\n"):
        chunk = os.read(0, 64)
        if not chunk:
            break
        nonce += chunk
    nonce = nonce.strip().decode()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    def send(line):
        data = (line + "\n").encode()
        while data:
            data = data[write(fd, data):]
    def finish(code, **report):
        for f in flush:
            try:
                f()
            except BaseException:
                pass
        send("done " + nonce + " " + dumps(report))
        exit_(code)
    def describe(e):
        try:
            return str(e)[:4000]
        except BaseException:
            return "<unprintable %s>" % type(e).__name__
    for name in modules:
        try:
            __import__(name)
        except Exception:
            pass
    send("ready " + nonce)
    try:
        with open("program.py", encoding="utf-8", errors="surrogatepass") as fh:
            code = compile(fh.read(), "<program>", "exec")
    except (SyntaxError, ValueError) as e:
        finish(1, status="compile_error", type=type(e).__name__, message=describe(e))
    try:
        exec(code, {})
    except BaseException as e:
        finish(1, status="raised", type=type(e).__name__, message=describe(e))
    finish(0, status="passed")
_runner()
"""


class _Marker:
    """The runner's private pipe: 'ready <nonce>' after the imports, then 'done <nonce> <json>'.

    The nonce is not in the environment or argv; the runner reads it from stdin and then
    replaces stdin with /dev/null, so a program cannot forge a report by writing to the fd
    (short of introspecting the runner's frames, which is out of scope).
    """

    def __init__(self) -> None:
        self.nonce = secrets.token_hex(16)
        self.read_fd, self.write_fd = os.pipe()
        self.data = bytearray()
        self.ready_at: float | None = None

    def feed(self, chunk: bytes, now: float) -> None:
        if len(self.data) < _MARKER_CAP:
            self.data += chunk
        if self.ready_at is None and f"ready {self.nonce}\n".encode() in self.data:
            self.ready_at = now

    def done(self) -> dict | None:
        prefix = f"done {self.nonce} ".encode()
        for line in bytes(self.data).split(b"\n"):
            if line.startswith(prefix):
                try:
                    return json.loads(line[len(prefix) :])
                except ValueError:
                    return None
        return None

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            try:
                os.close(fd)
            except OSError:
                pass


# ---------------------------------------------------------------------------------------------
# One isolated run


def _run_isolated(
    argv: list[str],
    files: Mapping[str, str | bytes],
    limits: SandboxLimits,
    *,
    stdin_data: bytes | None,
    env: Mapping[str, str] | None,
    needed: Sequence[str],
    marker: _Marker | None = None,
) -> tuple[CommandResult, dict | None]:
    caps = sandbox_capabilities()
    root = os.geteuid() == 0
    _check_isolation(caps, root, limits)
    slot = _acquire_slot() if root else None
    try:
        workdir = _make_workdir(files, slot.uid if slot else None)
        try:
            plan = _child_plan(workdir, limits, needed, slot.uid if slot else None, caps)
            result = _spawn_and_wait(argv, plan, limits, stdin_data, env, marker, slot)
        finally:
            _remove_tree(workdir)
    finally:
        if slot:
            _release_slot(slot)
    return result, (marker.done() if marker else None)


def _spawn_and_wait(argv, plan, limits, stdin_data, env, marker, slot) -> CommandResult:
    streams = _Streams(limits.max_output_bytes, marker, stdin_data)
    libc = _libc()
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
                preexec_fn=functools.partial(_enter_sandbox, plan, libc),
            )
        except subprocess.SubprocessError as e:
            raise SandboxUnavailable(
                f"sandbox setup failed in the child: {streams.early_error()}"
            ) from e
        finally:
            streams.close_child_ends()
        pidfd = _pidfd_open(proc.pid)
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


class _Tail:
    """A byte buffer that keeps only the last `cap` bytes."""

    def __init__(self, cap: int) -> None:
        self.cap, self.buf, self.truncated = cap, bytearray(), False

    def add(self, chunk: bytes) -> None:
        self.buf += chunk
        if len(self.buf) > self.cap:
            del self.buf[: len(self.buf) - self.cap]
            self.truncated = True

    def text(self) -> str:
        return self.buf.decode("utf-8", "replace")


class _Streams:
    """The parent's ends of stdin/stdout/stderr (and the marker), pumped by one selector."""

    def __init__(self, cap: int, marker: _Marker | None, stdin_data: bytes | None) -> None:
        self.out, self.err, self.marker = _Tail(cap), _Tail(cap), marker
        self.sel = selectors.DefaultSelector()
        out_r, self.child_out = os.pipe()
        err_r, self.child_err = os.pipe()
        self.sel.register(out_r, selectors.EVENT_READ, self.out.add)
        self.sel.register(err_r, selectors.EVENT_READ, self.err.add)
        if marker:
            self.sel.register(marker.read_fd, selectors.EVENT_READ, self._feed_marker)
        self.child_stdin: int = subprocess.DEVNULL
        self.pending = b""
        if stdin_data is not None:
            self.child_stdin, stdin_w = os.pipe()
            os.set_blocking(stdin_w, False)
            self.pending = stdin_data
            self.sel.register(stdin_w, selectors.EVENT_WRITE, None)

    def _feed_marker(self, chunk: bytes) -> None:
        self.marker.feed(chunk, time.monotonic())

    def watch_exit(self, pidfd: int) -> None:
        self.sel.register(pidfd, selectors.EVENT_READ, "exit")

    def unwatch(self, fd: int) -> None:
        if fd in self.sel.get_map():
            self.sel.unregister(fd)

    def pump(self, timeout: float) -> bool:
        """Move data for up to `timeout` s; True once the watched process has exited."""
        exited = False
        for key, _ in self.sel.select(timeout):
            if key.data == "exit":
                self.sel.unregister(key.fd)
                exited = True
            elif key.data is None:
                self._write_stdin(key.fd)
            else:
                chunk = os.read(key.fd, _CHUNK)
                if chunk:
                    key.data(chunk)
                else:
                    self._forget(key.fd)
        return exited

    def _write_stdin(self, fd: int) -> None:
        try:
            self.pending = self.pending[os.write(fd, self.pending[:_CHUNK]) :]
        except BlockingIOError:
            return  # full after all: the selector calls again
        except BrokenPipeError:
            self.pending = b""  # the program closed its stdin; what it did not read is dropped
        if not self.pending:
            self._forget(fd)

    def drain(self, grace_s: float) -> None:
        """Read what is left; EOF comes once the run's processes are gone (bounded wait)."""
        end = time.monotonic() + grace_s
        while any(k.data != "exit" for k in self.sel.get_map().values()):
            left = end - time.monotonic()
            if left <= 0:
                break
            self.pump(left)

    def early_error(self) -> str:
        """What the child wrote to stderr before exec (the setup failure), without blocking."""
        for key in list(self.sel.get_map().values()):
            if key.data == self.err.add:
                os.set_blocking(key.fd, False)
                try:
                    self.err.add(os.read(key.fd, _CHUNK))
                except BlockingIOError:
                    pass
        return self.err.text().strip() or "no detail"

    def _forget(self, fd: int) -> None:
        self.sel.unregister(fd)
        if self.marker is None or fd != self.marker.read_fd:  # the marker closes its own fds
            os.close(fd)

    def close_child_ends(self) -> None:
        for fd in (self.child_out, self.child_err, self.child_stdin):
            if fd >= 0:
                os.close(fd)
        if self.marker:
            os.close(self.marker.write_fd)
            self.marker.write_fd = -1

    def close(self) -> None:
        for key in list(self.sel.get_map().values()):
            if key.data != "exit":
                self._forget(key.fd)
        self.sel.close()


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


def _tail_note(stderr: str, chars: int = 600) -> str:
    return f"; stderr tail: {stderr[-chars:].strip()}" if stderr.strip() else ""


_SIGNALS = {s.value for s in signal.Signals}


# ---------------------------------------------------------------------------------------------
# Working folder


def _make_workdir(files: Mapping[str, str | bytes], uid: int | None) -> str:
    workdir = os.path.realpath(tempfile.mkdtemp(prefix="reprogrid-sbx-"))
    try:
        for rel, content in files.items():
            target = _inside(workdir, rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            data = (
                content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass")
            )
            target.write_bytes(data)
        if uid is not None:
            for dirpath, _, filenames in os.walk(workdir):
                os.lchown(dirpath, uid, uid)
                for name in filenames:
                    os.lchown(os.path.join(dirpath, name), uid, uid)
    except BaseException:
        _remove_tree(workdir)
        raise
    return workdir


def _inside(workdir: str, rel: str) -> Path:
    path = Path(rel)
    if not path.parts or path.is_absolute() or ".." in path.parts:
        raise ValueError(
            f"sandbox file paths must be relative and stay inside the folder, got {rel!r}"
        )
    return Path(workdir, path)


def _remove_tree(path: str) -> None:
    """Remove the folder even if the program took away its own permissions (root needs no fix)."""

    def reopen(func, failed, exc_info):
        for target in (os.path.dirname(failed), failed):
            if os.path.isdir(target) and not os.path.islink(target):
                try:
                    os.chmod(target, 0o700)
                except OSError:
                    pass

    for _ in range(8):  # each pass can unlock one more level of folders
        shutil.rmtree(path, onerror=reopen)
        if not os.path.lexists(path):
            return
    logger.warning("could not remove sandbox folder %s", path)


# ---------------------------------------------------------------------------------------------
# The child's setup (runs between fork and exec)


@dataclass(frozen=True)
class _Cover:
    target: str  # a folder to hide behind a tmpfs
    options: bytes  # tmpfs mount options
    keep: tuple[tuple[str, str, str], ...]  # (name, "dir"|"file"|"link", link target) bound back


@dataclass(frozen=True)
class _ChildPlan:
    workdir: str
    rlimits: tuple[tuple[int, tuple[int, int]], ...]
    unshare_flags: int
    id_map: tuple[int, int] | None  # (uid, gid) to map into a new user namespace (not root)
    covers: tuple[_Cover, ...]  # applied in order, shallow folders first
    uid: int | None  # the slot uid (and gid) to drop to (root only)
    max_fd: int  # close fds below this in the helper processes of a pid namespace


def _child_plan(workdir, limits, needed, uid, caps) -> _ChildPlan:
    root = os.geteuid() == 0
    net_off = not limits.network and caps["network_namespace"]
    flags, id_map, covers = 0, None, ()
    if root:
        flags |= (_CLONE_NEWNET if net_off else 0) | (_CLONE_NEWPID if caps["pid_namespace"] else 0)
        paths = [workdir, *needed]
        if caps["mount_namespace"]:
            flags |= _CLONE_NEWNS
            covers = _cover_plan(paths, limits.file_size_mb)
        elif blocked := [p for p in paths if _blocked_dir(p)]:
            raise SandboxUnavailable(
                f"the sandbox uid cannot reach {blocked[0]} (folder {_blocked_dir(blocked[0])} is "
                "not world-traversable) and mount namespaces are unavailable to bind it; install "
                "the interpreter/toolchain under a world-readable prefix"
            )
    elif caps["user_namespace"]:
        flags = _CLONE_NEWUSER | _CLONE_NEWPID | (_CLONE_NEWNET if net_off else 0)
        id_map = (os.getuid(), os.getgid())
    max_fd = os.sysconf("SC_OPEN_MAX")
    return _ChildPlan(workdir, _rlimits(limits, root), flags, id_map, covers, uid, max_fd)


def _rlimits(limits: SandboxLimits, root: bool) -> tuple[tuple[int, tuple[int, int]], ...]:
    mb = 1024 * 1024
    cpu = limits.cpu_s if limits.cpu_s is not None else math.ceil(limits.timeout_s + 5)
    nproc = limits.max_processes
    if not root:  # RLIMIT_NPROC counts all processes of the real uid, the caller's included
        nproc += len(_procs_of_uid(os.getuid()))
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


def _cover_plan(paths: Sequence[str], tmp_size_mb: int) -> tuple[_Cover, ...]:
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
        _Cover(d, options[d], tuple((n, k, t) for n, (k, t) in sorted(keep[d].items())))
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


def _enter_sandbox(plan: _ChildPlan, libc: _Libc | None) -> None:
    """preexec_fn. Only syscalls on pre-built values: no imports, locks or logging (the parent
    may be multi-threaded). A failure is written to the child's stderr for the parent."""
    try:
        if plan.unshare_flags:
            libc.check(libc.unshare(plan.unshare_flags), "unshare")
        if plan.id_map:
            _write_id_maps(*plan.id_map)
        if plan.covers:
            libc.check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "private mounts")
            for cover in plan.covers:
                _apply_cover(cover, libc)
        os.chdir(plan.workdir)
        if plan.unshare_flags & _CLONE_NEWPID:
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


def _apply_cover(cover: _Cover, libc: _Libc) -> None:
    held = [
        (name, kind, os.open(os.path.join(cover.target, name), os.O_PATH | os.O_CLOEXEC))
        for name, kind, _ in cover.keep
        if kind != "link"
    ]
    target = cover.target.encode()
    libc.check(
        libc.mount(b"tmpfs", target, b"tmpfs", _MS_NOSUID | _MS_NODEV, cover.options), "tmpfs"
    )
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
        libc.check(libc.mount(source, where.encode(), None, _MS_BIND | _MS_REC, None), "bind")
        os.close(fd)


def _write_id_maps(uid: int, gid: int) -> None:
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


class _Libc:
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
def _libc() -> _Libc | None:
    try:
        return _Libc()
    except (OSError, AttributeError):  # not Linux/glibc: no namespaces
        return None


# ---------------------------------------------------------------------------------------------
# Capabilities


_CAPS: dict[str, bool] | None = None
_CAPS_LOCK = threading.Lock()
_WARNED: set[str] = set()
_WARN_LOCK = threading.Lock()


def _probe() -> dict[str, bool]:
    root = os.geteuid() == 0
    libc = _libc()
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


def _probe_child(w: int, root: bool, libc: _Libc) -> None:
    if root:
        if libc.unshare(_CLONE_NEWNET) == 0:
            os.write(w, b"N")
        if libc.unshare(_CLONE_NEWPID) == 0:
            os.write(w, b"P")
        if (
            libc.unshare(_CLONE_NEWNS) == 0
            and libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) == 0
            and libc.mount(b"tmpfs", b"/tmp", b"tmpfs", _MS_NOSUID | _MS_NODEV, b"size=64k") == 0
        ):
            os.write(w, b"M")
        try:
            os.setgroups([])
            os.setgid(SANDBOX_UID_BASE)
            os.setuid(SANDBOX_UID_BASE)
            os.write(w, b"U")
        except OSError:
            pass
    elif libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET | _CLONE_NEWPID) == 0:
        try:
            _write_id_maps(os.getuid(), os.getgid())
            os.write(w, b"YNP")
        except OSError:
            pass
    os._exit(0)


def _check_isolation(caps: dict[str, bool], root: bool, limits: SandboxLimits) -> None:
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


# ---------------------------------------------------------------------------------------------
# Slots (root): one uid per concurrent sandbox, held host-wide through a lock file


@dataclass(frozen=True)
class _Slot:
    uid: int
    lock_fd: int


def _acquire_slot() -> _Slot:
    lock_dir = _slot_lock_dir()
    usable = [u for u in range(SANDBOX_UID_BASE, SANDBOX_UID_BASE + SANDBOX_SLOTS) if _unowned(u)]
    if not usable:
        raise SandboxUnavailable(f"every uid from {SANDBOX_UID_BASE} on belongs to an account")
    delay = 0.005
    while True:
        for uid in usable:
            fd = os.open(lock_dir / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            _kill_uid(uid)  # a crashed previous holder may have left processes behind
            return _Slot(uid, fd)
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def _release_slot(slot: _Slot) -> None:
    os.close(slot.lock_fd)  # closing drops the flock


@functools.cache
def _unowned(uid: int) -> bool:
    """A uid (and the gid of the same number) no account or group uses."""
    try:
        pwd.getpwuid(uid)
        return False
    except KeyError:
        pass
    try:
        grp.getgrgid(uid)
        return False
    except KeyError:
        return True


def _slot_lock_dir() -> Path:
    base = Path("/run/lock") if os.path.isdir("/run/lock") else Path(tempfile.gettempdir())
    folder = base / "reprogrid-sandbox"
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise SandboxUnavailable(
            f"{folder} must be a folder owned by uid {os.geteuid()}, mode 0700"
        )
    return folder


# ---------------------------------------------------------------------------------------------
# Killing


def _kill_run(proc: subprocess.Popen, slot: _Slot | None, plan: _ChildPlan, forced: bool) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    # After a normal exit in a pid namespace nothing is left: its pid 1 exits only once the
    # kernel has killed and reaped the rest. After a kill, that happens asynchronously, and
    # the uid sweep waits for it; without a pid namespace the sweep is what finds strays.
    if slot and (forced or not plan.unshare_flags & _CLONE_NEWPID):
        _kill_uid(slot.uid)


def _kill_uid(uid: int, patience_s: float = 5.0, zombie_grace_s: float = 1.0) -> None:
    """SIGKILL every live process whose real uid is `uid` until none is left, then give init a
    moment to reap the orphaned zombies (they still count against the slot's RLIMIT_NPROC)."""
    start = time.monotonic()
    while procs := _procs_of_uid(uid):
        live = [pid for pid, zombie in procs if not zombie]
        waited = time.monotonic() - start
        if live and waited > patience_s:
            logger.warning("processes of sandbox uid %d survive SIGKILL: %s", uid, live)
            return
        if not live and waited > zombie_grace_s:
            logger.warning("%d zombies of sandbox uid %d are not reaped by init", len(procs), uid)
            return
        for pid in live:
            _kill_if_uid(pid, uid)
        time.sleep(0.002)


def _kill_if_uid(pid: int, uid: int) -> None:
    # Through a pidfd, re-checking the uid after opening it, so a recycled pid is never hit.
    try:
        fd = _pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        if (info := _uid_state(pid)) and info[0] == uid:
            if fd is None:
                os.kill(pid, signal.SIGKILL)
            else:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
    except (ProcessLookupError, FileNotFoundError):
        pass
    finally:
        if fd is not None:
            os.close(fd)


def _procs_of_uid(uid: int) -> list[tuple[int, bool]]:
    """(pid, is_zombie) of the processes whose real uid is `uid`, from /proc."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and (info := _uid_state(int(name))) and info[0] == uid:
            found.append((int(name), info[1] in b"ZX"))
    return found


def _uid_state(pid: int) -> tuple[int, bytes] | None:
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            status = fh.read()
    except OSError:
        return None
    uid_at, state_at = status.find(b"\nUid:"), status.find(b"\nState:")
    if uid_at < 0 or state_at < 0:
        return None
    return int(status[uid_at + 5 :].split(None, 1)[0]), status[state_at + 7 :].split(None, 1)[0]


def _pidfd_open(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, NotImplementedError):
        return None
    except OSError as e:
        if e.errno == errno.ENOSYS:  # a kernel older than 5.3
            return None
        raise


# ---------------------------------------------------------------------------------------------
# What a run needs to reach


def _python_paths(python: str) -> list[str]:
    exe = shutil.which(python) or python
    real = os.path.realpath(exe)
    paths = {os.path.abspath(exe), real, os.path.dirname(os.path.dirname(real))}
    if real == os.path.realpath(sys.executable):
        paths |= {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    return sorted(paths)


def _command_paths(argv: Sequence[str], env: Mapping[str, str] | None) -> list[str]:
    if not argv:
        raise ValueError("argv is empty")
    search = (env or {}).get("PATH", os.environ.get("PATH", os.defpath))
    exe = shutil.which(argv[0], path=search)
    if exe is None:  # raised here: in the child, a PATH folder it may not search says EACCES
        raise FileNotFoundError(errno.ENOENT, f"not found on PATH {search!r}", argv[0])
    exe = os.path.abspath(exe)
    return sorted({exe, os.path.realpath(exe)})
