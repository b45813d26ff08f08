"""The runner: trusted code that runs in the program's own process, after the sandbox setup, and
exec()s the program the way the harness's execution metric does, reporting on a private pipe.

The metric (code_eval_octopack's execute.py, adapted from OpenAI human-eval) forks each
program's child from a process that has already imported the header modules and its own, then
applies `reliability_guard()`, swallows I/O and exec()s the program with empty globals. Here the
fork server is that process: it imports the modules once (`preload_modules`), and every run is
a fork of it in which `run_program` applies the guard and exec()s, in that order (NumPy calls
os.putenv on import, which the guard disables; spec §10).

Standard library only (imported by the fork server, see server.py).
"""

from __future__ import annotations

import io
import json
import os
import sys
from typing import NoReturn

# What the harness process has imported when it forks a program (IMPORT_HELPER in
# workers/benchmarks/humanevalfix/postprocess.py; a test keeps the two in step).
HARNESS_PRELOADED_MODULES = (
    "math",
    "re",
    "sys",
    "copy",
    "datetime",
    "itertools",
    "collections",
    "heapq",
    "statistics",
    "functools",
    "hashlib",
    "numpy",
    "string",
    "typing",
)
# What the metric's execute.py itself imports, so every harness child holds them too. Imported
# before the guard only when it is applied: `import multiprocessing` calls os.getcwd, which the
# guard disables, so a program importing it would fail here but pass in the harness.
HARNESS_METRIC_MODULES = (
    "contextlib",
    "faulthandler",
    "io",
    "multiprocessing",
    "platform",
    "signal",
    "tempfile",
)
# human-eval's reliability_guard(maximum_memory_bytes=None), as the metric calls it; os
# attributes this platform lacks (lchflags, lchmod on Linux) are not created.
_GUARDED_OS = (
    "kill",
    "system",
    "putenv",
    "remove",
    "removedirs",
    "rmdir",
    "fchdir",
    "setuid",
    "fork",
    "forkpty",
    "killpg",
    "rename",
    "renames",
    "truncate",
    "replace",
    "unlink",
    "fchmod",
    "fchown",
    "chmod",
    "chown",
    "chroot",
    "lchflags",
    "lchmod",
    "lchown",
    "getcwd",
    "chdir",
)
_BLOCKED_MODULES = ("ipdb", "joblib", "resource", "psutil", "tkinter")


def preload_modules(harness_guard: bool) -> tuple[str, ...]:
    """The modules a HumanEvalFix fork server imports before it forks any program."""
    return HARNESS_PRELOADED_MODULES + (HARNESS_METRIC_MODULES if harness_guard else ())


def import_all(modules: tuple[str, ...]) -> None:
    for name in modules:
        try:
            __import__(name)
        except Exception:  # noqa: S110 - a missing module fails the programs that need it
            pass


def harness_guard() -> None:
    """The metric's reliability_guard(): not a security measure (a program can undo it); the
    isolation around the process is."""
    import builtins
    import faulthandler
    import shutil
    import subprocess

    def disable(owner: object, *names: str) -> None:
        # setattr, not assignment: replacing these with None is the guard's point, and their
        # declared types rightly do not allow it.
        for name in names:
            setattr(owner, name, None)

    faulthandler.disable()
    disable(builtins, "exit", "quit")
    os.environ["OMP_NUM_THREADS"] = "1"
    for name in _GUARDED_OS:
        if hasattr(os, name):
            disable(os, name)
    disable(shutil, "rmtree", "move", "chown")
    disable(subprocess, "Popen")
    disable(builtins, "help")
    for name in _BLOCKED_MODULES:
        # None in sys.modules makes `import name` raise ImportError (documented in the import
        # system reference); typeshed types the dict's values as ModuleType only.
        sys.modules[name] = None  # type: ignore[assignment]


class WriteOnlyStringIO(io.StringIO):
    """human-eval's swallow_io buffer: prints go nowhere, reading raises."""

    def read(self, *args, **kwargs):
        raise OSError

    def readline(self, *args, **kwargs):
        raise OSError

    def readlines(self, *args, **kwargs):
        raise OSError

    def readable(self, *args, **kwargs):
        return False


def run_program(source: str, nonce: str, report_fd: int, guard: bool) -> NoReturn:
    """Compile and exec `source` like the metric; report 'ready <nonce>' before compiling and
    'done <nonce> <json>' at the end on `report_fd`, then exit. Never returns."""
    os.set_inheritable(report_fd, False)
    # Kept: the program may rebind them. Nothing used after the guard is one it disables.
    write, exit_, dumps = os.write, os._exit, json.dumps
    flush = (sys.stdout.flush, sys.stderr.flush)

    def send(line: str) -> None:
        data = (line + "\n").encode()
        while data:
            data = data[write(report_fd, data) :]

    def finish(code: int, **report) -> NoReturn:
        for f in flush:
            try:
                f()
            except BaseException:  # noqa: S110 - the program may have broken its streams
                pass
        send("done " + nonce + " " + dumps(report))
        exit_(code)

    def describe(e: BaseException) -> str:
        try:
            return str(e)[:4000]
        except BaseException:
            return f"<unprintable {type(e).__name__}>"

    send("ready " + nonce)
    try:
        code = compile(source, "<program>", "exec")
    except (SyntaxError, ValueError) as e:
        finish(1, status="compile_error", type=type(e).__name__, message=describe(e))
    if guard:
        sys.stdout = sys.stderr = sys.stdin = WriteOnlyStringIO()
        harness_guard()
    try:
        exec(code, {})
    except BaseException as e:
        finish(1, status="raised", type=type(e).__name__, message=describe(e))
    finish(0, status="passed")
