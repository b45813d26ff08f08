"""Runs many ExecJobs in the sandbox in parallel, running each distinct program once.

Results come back in the order of the jobs, one per job, always: a failure of the sandbox
itself becomes an Outcome.ERROR result with error_type "SandboxError" instead of an exception.
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import replace

from workers.execspec import ExecJob, ExecResult, Outcome, SandboxLimits
from workers.sandbox import check_isolation, run_python_program

logger = logging.getLogger(__name__)

SANDBOX_ERROR = "SandboxError"
_MESSAGE_CHARS = 4000


def python_identity() -> str:
    """ "CPython 3.11.7": the interpreter the sandbox runs programs in (this process's)."""
    return f"{platform.python_implementation()} {platform.python_version()}"


def dedup_key(job: ExecJob) -> str:
    """sha256 of program + "\\0" + timeout: jobs with equal keys have the same result.

    The timeout is written as a float repr, so 10 and 10.0 give the same key.
    """
    text = job.program + "\0" + repr(float(job.timeout_s))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def execute_jobs(
    jobs: Sequence[ExecJob],
    limits: SandboxLimits,
    *,
    workers: int | None = None,
    dedup: bool = True,
    on_result: Callable[[ExecResult], None] | None = None,
) -> list[ExecResult]:
    """Run every job with `run_python_program` on a pool of `workers` threads.

    workers: concurrent sandboxes (default os.cpu_count()); each leases one fork server.
    dedup: jobs with the same `dedup_key` run once; the others get a copy of that result
        under their own job_id (and the same duration_s).
    on_result: called in the calling thread with each job's result as soon as it is known
        (completion order). If it raises, jobs not yet started are cancelled and the exception
        propagates.
    Returns the results in the order of `jobs`, each with the IsolationLevel it ran at.
    Raises ValueError on duplicate job ids, and IsolationBelowRequired (before running any)
    when the host's level is below `limits.require`.
    """
    ids = [job.job_id for job in jobs]
    if len(set(ids)) != len(ids):
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"job ids must be unique; repeated: {dupes[:5]}")
    if jobs:
        check_isolation(limits)  # a batch below limits.require fails as a whole, up front
    groups: dict[str, list[ExecJob]] = {}
    for job in jobs:
        groups.setdefault(dedup_key(job) if dedup else job.job_id, []).append(job)
    results: dict[str, ExecResult] = {}
    pool = ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1)
    try:
        pending: dict[Future, list[ExecJob]] = {
            pool.submit(_run_one, group[0], limits): group for group in groups.values()
        }
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                result = future.result()  # _run_one never raises
                for job in pending.pop(future):
                    copy = (
                        result
                        if job.job_id == result.job_id
                        else replace(result, job_id=job.job_id)
                    )
                    results[job.job_id] = copy
                    if on_result is not None:
                        on_result(copy)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return [results[job_id] for job_id in ids]


def _run_one(job: ExecJob, limits: SandboxLimits) -> ExecResult:
    start = time.monotonic()
    try:
        return run_python_program(job, limits)
    except Exception as e:
        # The sandbox boundary: whatever broke (setup, a full disk, a bug of ours), the job
        # still gets a result row, marked as the sandbox's fault rather than the program's.
        logger.exception("sandbox failed on job %s", job.job_id)
        message = f"{type(e).__name__}: {e}"[:_MESSAGE_CHARS]
        return ExecResult(
            job.job_id, Outcome.ERROR, SANDBOX_ERROR, message, time.monotonic() - start
        )
