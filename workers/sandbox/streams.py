"""The parent's side of a run's pipes: stdin fed, stdout/stderr capped, the runner's report."""

from __future__ import annotations

import os
import selectors
import subprocess
import time

from workers.sandbox.runner import Marker

_CHUNK = 65536


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
    """The parent's ends of stdin/stdout/stderr (and the marker), pumped by one selector."""

    def __init__(self, cap: int, marker: Marker | None, stdin_data: bytes | None) -> None:
        self.out, self.err, self.marker = Tail(cap), Tail(cap), marker
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
