"""Per-language executors for unit tests, all run through the project sandbox.

Each executor mirrors one `*_unsafe_executor` of the official `execution_utils.py`: the same
file name, the same command line (shell commands joined with `;`, so the LAST command's exit
status decides) and the same timeout, but inside `workers.sandbox.run_command` (a fresh empty
work folder, a filesystem view of only the system's /usr plus the recipe's toolchain and its
configuration, scrubbed environment, cgroup limits, no network) instead of the grader's own
process or working directory. See docs/infibench.md for the limits and why.

| lang | file | command | passes when |
| --- | --- | --- | --- |
| python | main.py | runner: `exec(program, {})` under SIGALRM(timeout) | runner reports "passed" |
| javascript | test.js | `node test.js` (NODE_PATH reaches a global jsdom) | exit 0 |
| typescript | test.ts | `tsc test.ts --outfile test.js; node test.js` | exit 0 of node |
| cpp | main.cpp | `g++ main.cpp -o main; ./main` | exit 0 |
| java | Main.java | `javac Main.java; java Main` | exit 0 |
| go | main.go | `go run main.go` | exit 0 |
| r | main.r | `Rscript main.r` | exit 0 |
| c# | main.cs | `mcs -out:main.exe main.cs; mono main.exe` | exit 0 |
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache

from workers.benchmarks.infibench.programs import PYTHON_HELPER_MODULES, Program
from workers.execspec import SandboxLimits

EXECUTOR_LANGS = ("python", "javascript", "typescript", "cpp", "java", "go", "r", "c#")
# CRAN packages the R tests load (assert is in every program's header).
R_PACKAGES = ("assert", "dplyr", "data.table", "stringr", "tidyverse")

# The python runner's own exit statuses (0 is left to programs that call os._exit(0), which
# the official grader would never have reported as passed: its parent waits for a queue item).
PY_PASSED, PY_FAILED, PY_TIMED_OUT = 86, 87, 88
# Extra seconds on top of the official timeout for work the official grader did before its
# clock started (python: interpreter start and helper imports happen in the parent before the
# fork) or that is pure sandbox overhead. The official timeout itself is enforced in-process
# by SIGALRM for python and by the sandbox for the other languages.
PYTHON_STARTUP_SLACK_S = 20.0

PYTHON_RUNNER = f"""\
import os, signal, sys
for _name in {PYTHON_HELPER_MODULES!r}:
    try:
        __import__(_name)  # warm, like the grader's process the official executor forks
    except BaseException:
        pass
with open("main.py", encoding="utf-8") as _fh:
    _program = _fh.read()
class TimeoutException(Exception):
    pass
def _on_alarm(signum, frame):
    raise TimeoutException("Timed out!")
_status, _message = {PY_FAILED}, ""
signal.setitimer(signal.ITIMER_REAL, float(sys.argv[1]))
signal.signal(signal.SIGALRM, _on_alarm)
try:
    exec(_program, {{}})
    _status = {PY_PASSED}
except TimeoutException:
    _status, _message = {PY_TIMED_OUT}, "timed out"
except BaseException as _e:
    _message = "failed: " + str(_e)
finally:
    signal.setitimer(signal.ITIMER_REAL, 0)
try:
    sys.__stderr__.write("\\n[infibench] " + (_message or "passed") + "\\n")
    sys.__stderr__.flush()
except BaseException:
    pass
os._exit(_status)
"""


@dataclass(frozen=True)
class ExecutorConfig:
    """Where the toolchains are. Values, not environment-variable names (STYLE rule 9)."""

    python: str = field(default_factory=lambda: sys.executable)  # needs the helper modules
    node_path: str | None = None  # NODE_PATH for jsdom; None: <node prefix>/lib/node_modules
    network: bool = False  # official runs had network; some python tests need it (docs)


@dataclass(frozen=True)
class ExecOutcome:
    passed: bool
    result: str  # "passed", "failed: ...", "time out", in the spirit of the official detail
    duration_s: float
    timed_out: bool = False
    isolation: str | None = None  # the sandbox's IsolationLevel for the run


@dataclass(frozen=True)
class _Recipe:
    filename: str
    argv: tuple[str, ...]
    memory_mb: int  # the run's memory cgroup (or, without one, each process's address space)
    max_processes: int
    # What the sandbox's view must add to the system's /usr: the executables the command runs
    # (resolved on PATH, with their symlinks, e.g. /etc/alternatives/java) and their
    # configuration folders outside /usr (globs; absent ones are skipped).
    tools: tuple[str, ...] = ()
    config: tuple[str, ...] = ()


def _shell(command: str) -> tuple[str, ...]:
    return ("/bin/sh", "-c", command)


_RECIPES = {
    "javascript": _Recipe("test.js", ("node", "test.js"), 16384, 256, ("node",)),
    "typescript": _Recipe(
        "test.ts",
        _shell("tsc test.ts --outfile test.js; node test.js"),
        16384,
        256,
        ("tsc", "node"),
    ),
    "cpp": _Recipe("main.cpp", _shell("g++ main.cpp -o main; ./main"), 8192, 256, ("g++",)),
    "java": _Recipe(
        "Main.java",
        _shell("javac Main.java; java Main"),
        16384,
        512,
        ("javac", "java"),
        ("/etc/java-*",),
    ),
    "go": _Recipe("main.go", ("go", "run", "main.go"), 16384, 512, ("go",)),
    "r": _Recipe("main.r", ("Rscript", "main.r"), 8192, 256, ("Rscript",), ("/etc/R",)),
    "c#": _Recipe(
        "main.cs",
        _shell("mcs -out:main.exe main.cs; mono main.exe"),
        16384,
        256,
        ("mcs", "mono"),
        ("/etc/mono",),
    ),
}
PYTHON_MEMORY_MB = 16384  # torch (1-3-213/217/231) maps a lot of address space
PYTHON_MAX_PROCESSES = 256
# The work folder's tmpfs: room for compiler output and Go's build cache (HOME/.cache).
DISK_MB = 1024


def limits_for(lang: str, timeout_s: float, network: bool = False) -> SandboxLimits:
    """The sandbox limits of one run (documented in docs/infibench.md)."""
    if lang == "python":
        return SandboxLimits(
            timeout_s=timeout_s + PYTHON_STARTUP_SLACK_S,
            memory_mb=PYTHON_MEMORY_MB,
            max_processes=PYTHON_MAX_PROCESSES,
            network=network,
            disk_mb=DISK_MB,
        )
    recipe = _RECIPES[lang]
    return SandboxLimits(
        timeout_s=timeout_s,
        memory_mb=recipe.memory_mb,
        max_processes=recipe.max_processes,
        network=network,
        disk_mb=DISK_MB,
    )


def toolchain_paths(lang: str, config: ExecutorConfig) -> list[str]:
    """The host paths an executor's runs see besides the system's /usr (read-only): the
    interpreter's prefixes for python; the recipe's tools, their configuration folders and
    NODE_PATH otherwise. Tools that are not installed are left out (the run then fails)."""
    from workers.sandbox.api import command_paths, python_paths

    if lang == "python":
        return python_paths(config.python)
    recipe = _RECIPES[lang]
    paths = [p for pattern in recipe.config for p in glob.glob(pattern)]
    for tool in recipe.tools:
        exe = shutil.which(tool)
        if exe is not None:
            paths += command_paths(os.path.abspath(exe))
    modules = node_modules_dir(config) if lang in ("javascript", "typescript") else None
    return paths + ([modules] if modules else [])


def node_modules_dir(config: ExecutorConfig) -> str | None:
    """NODE_PATH: the configured one, or the global node_modules next to `node`."""
    if config.node_path:
        return config.node_path
    node = shutil.which("node")
    if node is None:
        return None
    prefix = os.path.dirname(os.path.dirname(os.path.realpath(node)))
    return os.path.join(prefix, "lib", "node_modules")


def _env(lang: str, config: ExecutorConfig) -> dict[str, str]:
    if lang in ("javascript", "typescript"):
        modules = node_modules_dir(config)
        return {"NODE_PATH": modules} if modules else {}
    return {}


def run_program(program: Program, config: ExecutorConfig | None = None) -> ExecOutcome:
    """Run one unit-test program in the sandbox and say whether it passed (and at which
    IsolationLevel: ExecOutcome.isolation)."""
    from workers.sandbox import run_command  # the only place generated code is run

    config = config or ExecutorConfig()
    limits = limits_for(program.lang, program.timeout_s, config.network)
    argv: tuple[str, ...]
    if program.lang == "python":
        argv = (config.python, "_infibench_runner.py", repr(program.timeout_s))
        files = {"main.py": program.code, "_infibench_runner.py": PYTHON_RUNNER}
        env: dict[str, str] = {}
    else:
        recipe = _RECIPES[program.lang]
        argv, files, env = recipe.argv, {recipe.filename: program.code}, _env(program.lang, config)
    result = run_command(argv, files, limits, env=env, paths=toolchain_paths(program.lang, config))
    return replace(_outcome(program.lang, result), isolation=result.isolation)


def _outcome(lang: str, result) -> ExecOutcome:
    if result.timed_out:
        return ExecOutcome(False, "time out", result.duration_s, timed_out=True)
    if lang != "python":
        if result.exit_code == 0:
            return ExecOutcome(True, "passed", result.duration_s)
        return ExecOutcome(False, _failure(result), result.duration_s)
    if result.exit_code == PY_PASSED:
        return ExecOutcome(True, "passed", result.duration_s)
    if result.exit_code == PY_TIMED_OUT:
        return ExecOutcome(False, "timed out", result.duration_s, timed_out=True)
    if result.exit_code == PY_FAILED:
        return ExecOutcome(False, _runner_message(result.stderr), result.duration_s)
    return ExecOutcome(False, _failure(result), result.duration_s)


def _runner_message(stderr: str) -> str:
    """The runner's own "failed: <exception>" line (the official result text)."""
    for line in reversed(stderr.splitlines()):
        if line.startswith("[infibench] "):
            return line[len("[infibench] ") :][:500]
    return "failed: "


def _failure(result) -> str:
    tail = (result.stderr or result.stdout or "").strip()[-500:]
    how = f"signal {result.signal}" if result.signal else f"returncode: {result.exit_code}"
    return f"failed: {how} {tail}".rstrip()


# ---------------------------------------------------------------------------------------------
# Which executors are installed


_PROBES: Mapping[str, tuple[tuple[str, ...], Mapping[str, str]]] = {
    "javascript": (("node", "-e", "require('jsdom')"), {}),
    "typescript": (_shell("tsc --version && node --version"), {}),
    "cpp": (_shell("g++ -fsyntax-only probe.cpp"), {"probe.cpp": "#include <boost/any.hpp>\n"}),
    "java": (_shell("javac -version && java -version"), {}),
    "go": (("go", "version"), {}),
    "r": (
        (
            "Rscript",
            "-e",
            f"for (p in c({', '.join(repr(p) for p in R_PACKAGES)})) "
            "library(p, character.only = TRUE)",
        ),
        {},
    ),
    "c#": (_shell("mcs --version && mono --version"), {}),
}
PROBE_LIMITS = SandboxLimits(timeout_s=60.0, memory_mb=16384, max_processes=512, disk_mb=DISK_MB)


def executor_availability(config: ExecutorConfig | None = None) -> dict[str, bool]:
    """Which unit-test executors work on this machine (probed once, through the sandbox).

    python: the configured interpreter imports every helper module (numpy, pandas, requests,
    openpyxl, xlsxwriter, yolk, ...); javascript: node with a global jsdom; typescript: tsc and
    node; cpp: g++ with boost headers; java: javac and java; go; r: Rscript with the CRAN
    packages the tests load; c#: mcs and mono.
    """
    return dict(_probe_executors(config or ExecutorConfig()))


@lru_cache(maxsize=8)
def _probe_executors(config: ExecutorConfig) -> tuple[tuple[str, bool], ...]:
    from workers.sandbox import run_command

    available = {}
    python_probe = "import " + ", ".join(PYTHON_HELPER_MODULES)
    argv: tuple[str, ...]
    files: Mapping[str, str]
    for lang in EXECUTOR_LANGS:
        if lang == "python":
            argv, files, env = (config.python, "-c", python_probe), {}, {}
        else:
            (argv, files), env = _PROBES[lang], _env(lang, config)
        try:
            result = run_command(
                argv, files, PROBE_LIMITS, env=env, paths=toolchain_paths(lang, config)
            )
        except (FileNotFoundError, PermissionError, OSError):
            available[lang] = False
            continue
        available[lang] = not result.timed_out and result.exit_code == 0
    return tuple(available.items())
