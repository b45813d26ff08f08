"""The driver's shell around the pure core: a prepared grid -> plan -> dispatch -> store.

`run_grid` is what `reprogrid run` calls; nothing but the command line imports it.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TextIO

from orchestrator.errors import Interrupted
from orchestrator.run.execute.progress import Progress
from orchestrator.run.execute.record import RunFacts, RunRecord, close_stale_runs
from orchestrator.run.execute.signals import StopRequest, recording_signals
from orchestrator.run.execute.units import DispatchSummary
from orchestrator.run.plan.planner import Action, Plan
from orchestrator.run.plan.state import GridState, grid_state, make_plan
from orchestrator.run.preflight.checks import preflight, raise_if_blocking
from orchestrator.run.prepare.prepared import PreparedGrid
from storage.store import Store, StoreLocked
from storage.upgrade import upgrade_shards

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    plan: Plan
    generated: int
    executed: int
    failed: int  # settings that failed in this run
    engine_loads: int
    scores: dict[str, float | None]
    grid: GridState


def run_grid(
    prepared: PreparedGrid,
    *,
    retry_failed: bool = False,
    wait_lock_s: float = 0.0,
    stream: TextIO | None = None,
    command: str = "run",
    stop: StopRequest | None = None,
) -> RunOutcome:
    """Run every setting of the grid that the store does not hold yet. What would stop it
    anyway (weights that cannot be had, no GPU where one is needed, an unreachable cluster)
    is an error before the lock is taken, Ray starts, or a run row is written. A SIGTERM or
    SIGINT from here on (from the caller's first line when it passes the `stop` it records)
    is recorded and acted on at the next safe point (execute/signals.py): Interrupted, with
    the run row `interrupted` once one is written. The row stays `running` until the run's
    last write, compaction included, so a stop at any moment of the run marks it."""
    store = Store(prepared.config.store, lease_s=prepared.config.store_lock_lease_s)
    with recording_signals(stop or StopRequest()) as stop:
        stop.check()
        raise_if_blocking(preflight(prepared, make_plan(store, prepared, retry_failed)), command)
        with _writer_lock(store, wait_lock_s, stop):
            stop.check()
            plan = _open_store(store, prepared, retry_failed)
            with _record(store, prepared, plan, command) as run:
                with _progress(plan, prepared, stream) as progress:
                    stop.check()
                    summary = _dispatch(prepared, plan, run, progress, stop)
                _compact(store, prepared.config.compact_after_run, stop)
                stop.check()  # a stop during compaction, or after the last setting
    return _outcome(run.run_id, plan, summary, grid_state(store, prepared.cells))


# How often a run waiting for the writer lock (`--wait-lock`) looks for a stop signal.
LOCK_STEP_S = 1.0


@contextmanager
def _writer_lock(store: Store, wait_s: float, stop: StopRequest) -> Iterator[None]:
    """The store's writer lock, waited for up to `wait_s` seconds in steps of LOCK_STEP_S, so
    that a stop signal ends the wait (the lock's own wait knows nothing of signals)."""
    deadline = time.monotonic() + wait_s
    with ExitStack() as held:
        while True:
            stop.check()
            step = min(LOCK_STEP_S, max(0.0, deadline - time.monotonic()))
            try:
                held.enter_context(store.writer_lock(wait_s=step))
                break
            except StoreLocked:
                if time.monotonic() >= deadline:
                    raise
        yield


def _open_store(store: Store, prepared: PreparedGrid, retry_failed: bool) -> Plan:
    """Under the writer lock: leftovers of an interrupted write removed, runs that died marked,
    damaged files quarantined (their settings planned again), old shards upgraded."""
    removed = store.clean_temp()
    if removed:
        logger.info("removed %d temporary file(s) of an interrupted write", removed)
    close_stale_runs(store)
    plan = make_plan(store, prepared, retry_failed, quarantine=True)
    upgrade_shards(store)  # shards of an older schema: same columns as every other shard
    _log_plan(plan)
    return plan


def _compact(store: Store, min_loose: int | None, stop: StopRequest) -> None:
    """A run that ended (an interrupted one raised before this) packs its finished shards once
    there are enough of them, still under the writer lock; docs/store.md, "Compaction". A stop
    signal that came after the last setting skips it: the work is stored, and the next run or
    `reprogrid compact` packs it."""
    if min_loose is None:
        return
    if stop.requested:
        logger.warning("stop requested: compaction left to the next run or `reprogrid compact`")
        return
    from storage.compact import compact_if_due

    report = compact_if_due(store, min_loose)
    if report is not None:
        packed = sum(t.shards_packed for t in report.tables)
        logger.info("compaction: %d shard(s) packed, %d loose recorded", packed, report.recorded)


def _record(store: Store, prepared: PreparedGrid, plan: Plan, command: str) -> RunRecord:
    config = prepared.config
    benchmark = prepared.benchmark
    facts = RunFacts(
        command=command,
        overrides=config.overrides,
        data_sources={
            config.benchmark.name: {"source": benchmark.source, "sha256": benchmark.data_sha256}
        },
        cluster_address=config.cluster.address or "local",
    )
    keys = [item.key for item in plan.settings]
    return RunRecord(
        store,
        facts,
        keys,
        {config.benchmark.name: benchmark},
        config.limits,
        planned_environment=prepared.execution_environment(),
    )


@contextmanager
def _progress(plan: Plan, prepared: PreparedGrid, stream: TextIO | None) -> Iterator[Progress]:
    work = len(plan.by_action(Action.GENERATE)) + len(plan.by_action(Action.EXECUTE))
    progress = Progress(
        total=work, stream=stream or sys.stderr, every_s=prepared.config.progress_every_s
    )
    try:
        yield progress
    finally:
        progress.close()


def _outcome(
    run_id: str, plan: Plan, summary: DispatchSummary | None, grid: GridState
) -> RunOutcome:
    if summary is None:  # nothing to generate or execute
        return RunOutcome(run_id, plan, 0, 0, 0, 0, {}, grid)
    return RunOutcome(
        run_id=run_id,
        plan=plan,
        generated=summary.generated,
        executed=summary.executed,
        failed=summary.failed,
        engine_loads=summary.engine_loads,
        scores=summary.scores,
        grid=grid,
    )


def _log_plan(plan: Plan) -> None:
    logger.info(
        "plan: %d settings, %d done, %d to generate (%d engine loads), %d to execute, "
        "%d skipped, %d failed earlier",
        len(plan.settings),
        len(plan.by_action(Action.DONE)),
        len(plan.by_action(Action.GENERATE)),
        plan.n_engine_loads,
        len(plan.by_action(Action.EXECUTE)),
        len(plan.by_action(Action.SKIP)),
        len(plan.by_action(Action.FAILED)),
    )


def _dispatch(
    prepared: PreparedGrid, plan: Plan, run: RunRecord, progress: Progress, stop: StopRequest
) -> DispatchSummary | None:
    """Record the skips, then (when there is work) start or connect to Ray and drain the plan.
    A stop signal stops it cleanly: the chunks that are back are committed, the engines and
    the executions are stopped, and so is a local Ray instance this run started."""
    for item in plan.by_action(Action.SKIP):
        run.writer.skipped(item.key, item.setting, item.reason or "")
    if not (plan.by_action(Action.GENERATE) or plan.by_action(Action.EXECUTE)):
        return None
    from orchestrator.run.execute.raycluster import start_ray, stop_ray  # imports Ray

    # Ray's start keeps SIGTERM and SIGINT recorded (raycluster.stop_signals_kept)
    ray_info = start_ray(prepared.config.cluster)
    try:
        stop.check()  # a stop while Ray started: the instance it started stops below
        return _drain(prepared, plan, run, progress, stop)
    finally:
        if ray_info["started"]:
            # A local instance this run started ends with the run, also in a library call:
            # the next run in this process starts its own with its own cluster options.
            stop_ray()


def _drain(
    prepared: PreparedGrid, plan: Plan, run: RunRecord, progress: Progress, stop: StopRequest
) -> DispatchSummary:
    from orchestrator.run.execute.dispatch import Dispatcher
    from orchestrator.run.execute.raycluster import stop_ray
    from orchestrator.run.execute.units import DispatchOptions

    config = prepared.config
    options = DispatchOptions(
        config.cluster, config.limits, config.exec_workers, checkpoint=config.checkpoint
    )
    benchmarks = {config.benchmark.name: prepared.benchmark}
    dispatcher = Dispatcher(plan, benchmarks, run.writer, options, progress, stop, run.fault)
    try:
        return dispatcher.run()
    except (Interrupted, KeyboardInterrupt) as e:
        logger.warning("%s: committing the chunks that are back, stopping the engines", e)
        # further signals are only recorded (logged): nothing cuts the clean stop short
        dispatcher.stop()
        # a local instance this run started stops with it; on a cluster the engines and
        # executions die with their owner, this driver
        stop_ray()
        raise
    except BaseException:
        dispatcher.abort()
        raise
