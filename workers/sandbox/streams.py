"""The driver's side of a run's pipes: the request and stdin fed, stdout/stderr capped, the
runner's report (Marker), all pumped by one selector together with the server's socket."""

from __future__ import annotations

import json
import os
import secrets
import selectors
import time

_CHUNK = 65536
_MARKER_CAP = 1 << 20


class Marker:
    """The runner's private pipe: 'ready <nonce>' before it compiles, then 'done <nonce> <json>'.

    The nonce travels in the run's request (never in the environment or argv) and lives only in
    the runner's memory, so a program cannot forge a report by writing to the pipe (short of
    introspecting the runner's frames, which is out of scope: docs/sandbox.md).
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
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.read_fd = self.write_fd = -1


class Tail:
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


class Streams:
    """The pipes of one run. `child_fds` maps names ("out", "err", "report", and one per
    `feed`) to the ends the run gets; the driver keeps the other ends here."""

    def __init__(self, cap: int, marker: Marker | None) -> None:
        self.out, self.err, self.marker = Tail(cap), Tail(cap), marker
        self.sel = selectors.DefaultSelector()
        self.child_fds: dict[str, int] = {}
        self.pending: dict[int, bytes] = {}
        for name, sink in (("out", self.out.add), ("err", self.err.add)):
            read_end, self.child_fds[name] = os.pipe()
            self.sel.register(read_end, selectors.EVENT_READ, sink)
        if marker:
            self.sel.register(marker.read_fd, selectors.EVENT_READ, self._feed_marker)
            self.child_fds["report"] = marker.write_fd

    def feed(self, name: str, data: bytes) -> None:
        """A pipe the run reads as `name`, filled with `data` and then closed."""
        self.child_fds[name], write_end = os.pipe()
        os.set_blocking(write_end, False)
        self.pending[write_end] = data
        self.sel.register(write_end, selectors.EVENT_WRITE, None)

    def _feed_marker(self, chunk: bytes) -> None:
        assert self.marker is not None  # registered in __init__ only when there is a marker
        self.marker.feed(chunk, time.monotonic())

    def watch_exit(self, fd: int) -> None:
        self.sel.register(fd, selectors.EVENT_READ, "exit")

    def unwatch(self, fd: int) -> None:
        if fd in self.sel.get_map():
            self.sel.unregister(fd)

    def pump(self, timeout: float) -> bool:
        """Move data for up to `timeout` s; True once the watched fd is readable."""
        exited = False
        for key, _ in self.sel.select(max(timeout, 0)):
            if key.data == "exit":
                exited = True
            elif key.data is None:
                self._write_pending(key.fd)
            else:
                chunk = os.read(key.fd, _CHUNK)
                if chunk:
                    key.data(chunk)
                else:
                    self._forget(key.fd)
        return exited

    def _write_pending(self, fd: int) -> None:
        data = self.pending[fd]
        try:
            self.pending[fd] = data[os.write(fd, data[:_CHUNK]) :]
        except BlockingIOError:
            return  # full after all: the selector calls again
        except BrokenPipeError:
            self.pending[fd] = b""  # the reader is gone; what it did not read is dropped
        if not self.pending[fd]:
            del self.pending[fd]
            self._forget(fd)

    def drain(self, grace_s: float) -> None:
        """Read what is left; EOF comes once the run's processes are gone (bounded wait)."""
        end = time.monotonic() + grace_s
        while any(k.data != "exit" for k in self.sel.get_map().values()):
            left = end - time.monotonic()
            if left <= 0:
                break
            self.pump(left)

    def _forget(self, fd: int) -> None:
        self.sel.unregister(fd)
        if self.marker is None or fd != self.marker.read_fd:  # the marker closes its own fds
            os.close(fd)

    def close_child_ends(self) -> None:
        for name, fd in self.child_fds.items():
            if name == "report":
                assert self.marker is not None  # "report" is the marker's write end
                self.marker.write_fd = -1
            os.close(fd)
        self.child_fds = {}

    def close(self) -> None:
        self.close_child_ends()
        for key in list(self.sel.get_map().values()):
            if key.data != "exit":
                self._forget(key.fd)
        self.sel.close()
