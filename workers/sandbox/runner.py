"""The runner: trusted code that runs first in the child, then exec()s the program the way the
harness's execution metric does, and reports through a private pipe.

The metric (code_eval_octopack's execute.py, adapted from OpenAI human-eval) forks each
program's child from a process that has already imported the header modules and its own, then
applies `reliability_guard()` and exec()s the program with empty globals. The runner does the
same in a fresh interpreter, in that order: imports first (NumPy calls os.putenv on import, which
the guard disables; spec §10), then the guard, then exec.
"""

from __future__ import annotations

import json
import os
import secrets

# What the harness process has imported when it forks a program (IMPORT_HELPER in
# workers/benchmarks/humanevalfix/postprocess.py; a test keeps the two in step).
HARNESS_PRELOADED_MODULES = (
    "math", "re", "sys", "copy", "datetime", "itertools", "collections", "heapq",
    "statistics", "functools", "hashlib", "numpy", "string", "typing",
)  # fmt: skip
# What the metric's execute.py itself imports, so every harness child holds them too. Imported
# before the guard only when it is applied: `import multiprocessing` calls os.getcwd, which the
# guard disables, so a program importing it would fail here but pass in the harness.
HARNESS_METRIC_MODULES = (
    "contextlib", "faulthandler", "io", "multiprocessing", "platform", "signal", "tempfile",
)  # fmt: skip

_MARKER_CAP = 1 << 20

# Run with `python -I -B -c RUNNER_SOURCE <report fd> guard|noguard <module>...`.
# The guard replicates human-eval's reliability_guard(maximum_memory_bytes=None), as the metric
# calls it, except that os attributes this platform lacks (lchflags, lchmod on Linux) are not
# created. It is not a security measure (a program can undo it); the OS-level isolation is.
RUNNER_SOURCE = r"""
import json, os, sys
def _harness_guard():
    import builtins, faulthandler, shutil, subprocess
    faulthandler.disable()
    builtins.exit = None
    builtins.quit = None
    os.environ["OMP_NUM_THREADS"] = "1"
    for name in (
        "kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork",
        "forkpty", "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod",
        "fchown", "chmod", "chown", "chroot", "lchflags", "lchmod", "lchown", "getcwd", "chdir",
    ):
        if hasattr(os, name):
            setattr(os, name, None)
    shutil.rmtree = None
    shutil.move = None
    shutil.chown = None
    subprocess.Popen = None
    builtins.help = None
    for name in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        sys.modules[name] = None
def _runner():
    fd, guard, modules = int(sys.argv[1]), sys.argv[2] == "guard", sys.argv[3:]
    del sys.argv[1:]
    os.set_inheritable(fd, False)
    # Kept: the program may rebind them. Nothing used after the guard is one it disables.
    write, exit_, dumps = os.write, os._exit, json.dumps
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
    if guard:
        # human-eval's swallow_io: prints go to a write-only buffer, reading stdin raises.
        import io
        class WriteOnlyStringIO(io.StringIO):
            def read(self, *args, **kwargs):
                raise OSError
            def readline(self, *args, **kwargs):
                raise OSError
            def readlines(self, *args, **kwargs):
                raise OSError
            def readable(self, *args, **kwargs):
                return False
        sys.stdout = sys.stderr = sys.stdin = WriteOnlyStringIO()
        _harness_guard()
    try:
        exec(code, {})
    except BaseException as e:
        finish(1, status="raised", type=type(e).__name__, message=describe(e))
    finish(0, status="passed")
_runner()
"""


def runner_argv(python: str, report_fd: int, harness_guard: bool) -> list[str]:
    """The command line that runs the runner on ./program.py, reporting on `report_fd`."""
    modules = HARNESS_PRELOADED_MODULES + (HARNESS_METRIC_MODULES if harness_guard else ())
    mode = "guard" if harness_guard else "noguard"
    return [python, "-I", "-B", "-c", RUNNER_SOURCE, str(report_fd), mode, *modules]


class Marker:
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
