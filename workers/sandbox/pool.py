"""Fork servers (server.py) on the driver's side: starting one per slot, reusing idle ones,
closing them when idle or at exit, and the start-of-process sweep of what killed drivers left.

A server is keyed by what it was built for (interpreter, preloaded modules, the paths of its
view); a caller leases one for a run and gives it back. Each holds a slot (uid, cgroups) for
its lifetime, as root. A driver that is killed leaves nothing running: each server ends when
its socket reaches EOF, and each run dies with its server (child.py). What it does leave -
cgroup folders, the slot lock files, process-mode work folders - is removed by the next
driver's sweep (`sweep_stale_state`).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from workers.sandbox import protocol
from workers.sandbox.capabilities import package_dirs
from workers.sandbox.cgroups import SlotCgroup, cgroup_host, sweep_stale
from workers.sandbox.results import SandboxUnavailable
from workers.sandbox.slots import (
    Slot,
    acquire_slot,
    kill_uid,
    release_slot,
    sweep_stale_uids,
    try_slot,
)
from workers.sandbox.workdir import sweep_stale_workdirs

SERVER_START_S = 120.0  # interpreter start and the header imports, on a loaded machine
IDLE_S = 30.0  # an idle server is closed (and its slot freed) after this long
_REAP_EVERY_S = 5.0


@dataclass(frozen=True)
class ServerKey:
    python: str  # the interpreter the server (and every program it forks) runs
    preload: tuple[str, ...]  # modules imported before forking (the harness header)
    paths: tuple[str, ...]  # host paths its view makes reachable, read-only


class ForkServer:
    """One running fork server and what it holds (slot, cgroups, socket)."""

    def __init__(self, key: ServerKey, facts: dict) -> None:
        self.key, self.mode, self.root = key, facts["mode"], facts["root"]
        self.slot: Slot | None = None
        self.cgroup: SlotCgroup | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self.broken = False  # a run went wrong in a way that leaves its state unknown
        self.last_used = time.monotonic()

    @classmethod
    def start(cls, key: ServerKey, facts: dict, env: dict[str, str]) -> ForkServer:
        server = cls(key, facts)
        try:
            server._start(facts, env)
        except BaseException:
            server.close()
            raise
        return server

    def _start(self, facts: dict, env: dict[str, str]) -> None:
        if self.root:
            self.slot = acquire_slot()
        if facts["memory_cgroup"] and self.slot is not None:
            self.cgroup = SlotCgroup(cgroup_host(), self.slot.uid)
        cgroup_fds = self.cgroup.open_procs() if self.cgroup else []
        driver_end, server_end = protocol.socket_pair()
        config = {
            "package_dirs": package_dirs(),
            "sock_fd": server_end.fileno(),
            "mode": self.mode,
            "uid": self.slot.uid if self.slot else None,
            "cgroup_fds": cgroup_fds,
            "paths": list(self.key.paths),
            "preload": list(self.key.preload),
            "tempdir": tempfile.gettempdir(),
            "owner": os.getpid(),  # names the driver in `ps` (the server does not use it)
        }
        try:
            self.proc = subprocess.Popen(
                [
                    self.key.python,
                    "-I",
                    "-B",
                    "-c",
                    protocol.bootstrap("workers.sandbox.server"),
                    json.dumps(config),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=(server_end.fileno(), *cgroup_fds),
                env=env,
                start_new_session=True,
            )
        finally:
            server_end.close()
            for fd in cgroup_fds:
                os.close(fd)
        self.sock = driver_end
        assert self.proc.stderr is not None  # stderr=subprocess.PIPE above
        os.set_blocking(self.proc.stderr.fileno(), False)
        message = self.expect("ready", SERVER_START_S)
        self.server_pid = message["pid"]

    def connection(self) -> socket.socket:
        """The socket to the server, between start() and close()."""
        # _start() sets it before the first message, and only close() and forget() clear it:
        # a server is not used after either.
        assert self.sock is not None, "fork server not started, or already closed"
        return self.sock

    def expect(self, op: str, timeout_s: float) -> dict:
        """The server's next message, which must be `op`; else SandboxUnavailable."""
        sock = self.connection()
        if not select.select([sock], [], [], timeout_s)[0]:
            self.broken = True
            raise SandboxUnavailable(f"the fork server sent no {op!r} within {timeout_s:g} s")
        try:
            message, fds = protocol.receive(sock)
        except (OSError, protocol.ProtocolError) as e:
            message, fds = {"op": "failed", "error": str(e)}, []
        for fd in fds:
            os.close(fd)
        if message is None or message.get("op") != op:
            self.broken = True
            error = "it exited" if message is None else message.get("error", message)
            raise SandboxUnavailable(f"fork server failed ({error}){self._stderr_note()}")
        return message

    def send(self, message: dict, fds: list[int] | tuple[int, ...] = ()) -> None:
        try:
            protocol.send(self.connection(), message, fds)
        except OSError as e:
            self.broken = True
            raise SandboxUnavailable(f"fork server gone ({e}){self._stderr_note()}") from e

    def _stderr_note(self) -> str:
        try:
            data = self.proc.stderr.read(65536) if self.proc and self.proc.stderr else b""
        except (OSError, ValueError):
            data = b""
        text = (data or b"").decode("utf-8", "replace").strip()  # None: nothing yet (non-blocking)
        return f"; its stderr: {text[-2000:]}" if text else ""

    def close(self) -> None:
        """End the server (EOF on its socket), wait for it, free its cgroups and slot."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            if self.proc.stderr is not None:  # always (stderr=PIPE); as in forget()
                self.proc.stderr.close()
            self.proc = None
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        if self.slot is not None:
            kill_uid(self.slot.uid)
            release_slot(self.slot)
            self.slot = None

    def forget(self) -> None:
        """In a forked copy of the driver: drop our copies of the server's fds, touch nothing."""
        for closable in (self.sock, self.proc.stderr if self.proc else None):
            if closable is not None:
                closable.close()
        if self.slot is not None:
            os.close(self.slot.lock_fd)  # the parent's copy keeps holding the lock
        self.sock = self.proc = self.slot = self.cgroup = None


class _Pool:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: dict[ServerKey, list[ForkServer]] = {}
        self.servers: set[ForkServer] = set()
        self.reaper: threading.Thread | None = None
        self.swept = False

    def take(self, key: ServerKey, facts: dict, env: dict[str, str]) -> ForkServer:
        dead: list[ForkServer] = []
        try:
            return self._take(key, facts, env, dead)
        finally:
            for server in dead:
                server.close()

    def _take(self, key, facts, env, dead: list[ForkServer]) -> ForkServer:
        with self.lock:
            while self.idle.get(key):
                server = self.idle[key].pop()
                if server.proc is not None and server.proc.poll() is None:
                    return server
                self.servers.discard(server)
                dead.append(server)  # killed while idle (closed below, outside the lock)
            if not self.swept:
                self.swept = True
                sweep_stale_state(facts)
            if self.reaper is None:
                self.reaper = threading.Thread(
                    target=self._reap_forever, daemon=True, name="sandbox-reaper"
                )
                self.reaper.start()
        server = ForkServer.start(key, facts, env)
        with self.lock:
            self.servers.add(server)
        return server

    def give_back(self, server: ForkServer) -> None:
        if server.broken:
            self._discard(server)
            return
        server.last_used = time.monotonic()
        with self.lock:
            self.idle.setdefault(server.key, []).append(server)

    def _discard(self, server: ForkServer) -> None:
        with self.lock:
            self.servers.discard(server)
        server.close()

    def _reap_forever(self) -> None:
        while True:
            time.sleep(_REAP_EVERY_S)
            self.close_idle(IDLE_S)

    def close_idle(self, older_than_s: float) -> None:
        now, done = time.monotonic(), []
        with self.lock:
            for servers in self.idle.values():
                done += [s for s in servers if now - s.last_used >= older_than_s]
                servers[:] = [s for s in servers if now - s.last_used < older_than_s]
        for server in done:
            self._discard(server)

    def forget_after_fork(self) -> None:
        for server in self.servers:
            server.forget()
        self.lock = threading.Lock()
        self.idle, self.servers, self.reaper = {}, set(), None


_POOL = _Pool()
atexit.register(_POOL.close_idle, 0.0)
os.register_at_fork(after_in_child=_POOL.forget_after_fork)


@contextlib.contextmanager
def lease(key: ServerKey, facts: dict, env: dict[str, str]) -> Iterator[ForkServer]:
    """A fork server for `key` for the duration of one run (started if none is idle)."""
    server = _POOL.take(key, facts, env)
    try:
        yield server
    except BaseException:
        server.broken = True
        raise
    finally:
        _POOL.give_back(server)


def close_idle_servers() -> None:
    """Close every idle fork server now (tests; a driver about to exit need not call it)."""
    _POOL.close_idle(0.0)


def sweep_stale_state(facts: dict) -> None:
    """Remove what killed drivers left: the processes and cgroups of slots nobody holds, and
    process-mode work folders of servers that are gone (done once per process, at the first
    server start; `facts`: sandbox_isolation().facts)."""
    if facts["root"]:
        sweep_stale_uids()
        host = cgroup_host()
        if host.version is not None:
            sweep_stale(host, _try_slot)
    sweep_stale_workdirs(tempfile.gettempdir())


def _try_slot(uid: int):
    slot = try_slot(uid)
    return None if slot is None else (lambda: release_slot(slot))
