"""The driver's shell around the pure core: config -> grid -> plan -> dispatch -> store."""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import logging
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from orchestrator.errors import ConfigError, Interrupted
from orchestrator.run.config.load import ENV_DATA_DIR, BenchmarkConf, RunConfig, available
from orchestrator.run.prepare.grid import Cell, Environment, expand_grid, replay_files
from orchestrator.run.prepare.modelid import model_identities
from orchestrator.run.plan.planner import Action, ExecutionIdentity, Plan, plan_settings
from orchestrator.run.execute.progress import Progress
from orchestrator.run.prepare.provenance import (
    git_revision,
    hostname,
    library_versions_json,
    vllm_installed,
)
from orchestrator.run.execute.signals import StopRequest, recording_signals, reinstall
from orchestrator.run.execute.writer import StoreWriter, utc_now
from storage.index import build_index
from storage.schema import RunStatus, SettingStatus
from storage.store import Store
from storage.upgrade import upgrade_shards
from workers.benchmarks.base import Benchmark, BenchmarkDataError
from workers.benchmarks.registry import get_benchmark
from workers.keys import canonical_json, execution_fields, execution_key

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PreparedGrid:
    """A grid ready to plan: the config, the loaded benchmark and every expanded cell."""

    config: RunConfig
    benchmark: Benchmark
    cells: tuple[Cell, ...]
    environment: Environment

    @property
    def n_problems(self) -> int:
        """Problems each setting covers (the benchmark's, cut by `benchmark.limit`)."""
        return len(self.config.benchmark.select(self.benchmark.problem_ids()))

    def execution_identities(self) -> dict[str, ExecutionIdentity]:
        """The execution identity this run gives each runnable cell: the run's sandbox limits
        and this host's environment (isolation level, interpreter, toolchains). On a remote
        cluster the workers report their own environment; a different one is recorded as such
        and the next run executes again (a stale outcome is never reused)."""
        limits = self.config.limits
        environment = self.benchmark.execution_environment(limits)
        return {
            c.key: ExecutionIdentity(
                execution_key(c.key, limits, environment),
                canonical_json(execution_fields(c.key, limits, environment)),
            )
            for cell in self.cells
            for c in (cell, *cell.aliases)
            if not c.skipped
        }


@dataclass(frozen=True)
class GridState:
    """Where the grid a run was asked for stands when the run ends (read from the store)."""

    complete: int
    skipped: int  # cannot run (reasons stored): reported, not a failure
    failed: int  # failed, in this run or an earlier one
    pending: int  # neither done nor failed (not reached, or its results are damaged)

    @property
    def done(self) -> bool:
        return self.failed == 0 and self.pending == 0

    def summary(self) -> str:
        return (
            f"grid {'complete' if self.done else 'INCOMPLETE'}: {self.complete} complete, "
            f"{self.skipped} skipped, {self.failed} failed, {self.pending} pending"
        )


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


def grid_state(store: Store, cells: Sequence[Cell]) -> GridState:
    index = build_index(store)
    counts = {"complete": 0, "skipped": 0, "failed": 0, "pending": 0}
    for cell in cells:
        cell = cell.stored_as(index)
        state = index.get(cell.key)
        if cell.skipped:
            counts["skipped"] += 1
        elif state is not None and state.complete:
            counts["complete"] += 1
        elif state is not None and state.status is SettingStatus.FAILED:
            counts["failed"] += 1
        else:
            counts["pending"] += 1
    return GridState(**counts)


def close_stale_runs(store: Store) -> int:
    """Mark runs still `running` as `interrupted`. Call holding the writer lock: whoever wrote
    them no longer holds it, so they died without closing their row (a SIGKILL)."""
    stale = [
        r
        for r in store.read_table("runs").to_pylist()
        if r.get("status") == RunStatus.RUNNING.value
    ]
    for row in stale:
        logger.info("run %s ended without closing its record: marked interrupted", row["run_id"])
        store.write_rows("runs", row["run_id"], [{**row, "status": RunStatus.INTERRUPTED.value}])
    return len(stale)


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_benchmark(conf: BenchmarkConf, cache_dir: str | None = None) -> Benchmark:
    """The configured benchmark's problems, through its registry entry."""
    try:
        return get_benchmark(conf.name).load(conf.source_spec(cache_dir))
    except BenchmarkDataError as e:
        hint = (
            f" (set {ENV_DATA_DIR} or paths.data_dir, or benchmark.source=hub)"
            if conf.source == "local" and not conf.data_dir
            else ""
        )
        raise ConfigError(f"{e}{hint}") from e


def prepare(config: RunConfig) -> PreparedGrid:
    """Load the benchmark data (its hash is part of every key) and expand the grid. A grid
    needs a model: there is no default one to run by accident."""
    if not config.models:
        raise ConfigError(
            "no model: pass model=NAME (or model=a,b, or an experiment that sets one). "
            f"Models: {', '.join(available('model'))}"
        )
    benchmark = load_benchmark(config.benchmark, cache_dir=config.cache_dir)
    config = with_selection(config, benchmark.problem_ids())
    files = replay_files(config)
    missing = [f for f in files if not Path(f).is_file()]
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        raise ConfigError(f"replay_path {config.replay_path!r}: no file {shown}")
    env = Environment(
        vllm_installed=vllm_installed(),
        replay_files={f: file_sha256(f) for f in files},
        model_identities=model_identities(config.models, config.cache_dir),
    )
    cells = tuple(expand_grid(config, benchmark.data_sha256, env))
    return PreparedGrid(config, benchmark, cells, env)


def with_selection(config: RunConfig, ids: Sequence[str]) -> RunConfig:
    """`benchmark.problems` checked against the benchmark's task ids (an unknown id is an
    error naming the nearest one) and put in benchmark order, so that the same selection
    typed in another order is the same setting."""
    wanted = config.benchmark.problems
    if wanted is None:
        return config
    known = set(ids)
    for task_id in wanted:
        if task_id not in known:
            close = difflib.get_close_matches(task_id, list(ids), n=1)
            hint = f" Did you mean: {close[0]}?" if close else ""
            raise ConfigError(
                f"Unknown task id {task_id!r} in benchmark.problems.{hint} The "
                f"{config.benchmark.name} data holds {len(ids)} problems: {ids[0]} ... {ids[-1]}"
            )
    chosen = set(wanted)
    ordered = tuple(i for i in ids if i in chosen)
    return dataclasses.replace(
        config, benchmark=dataclasses.replace(config.benchmark, problems=ordered)
    )


def make_plan(
    store: Store, prepared: PreparedGrid, retry_failed: bool = False, quarantine: bool = False
) -> Plan:
    """The grid minus what the store holds. `quarantine` (the writer, holding the lock) first
    moves damaged or foreign files aside, so their settings are redone and every table reads."""
    index = build_index(store, quarantine=quarantine)
    identities = prepared.execution_identities()
    return plan_settings(prepared.cells, index, retry_failed=retry_failed, execution=identities)


def _run_row(run_id: str, prepared: PreparedGrid, command: str, status: RunStatus, **extra) -> dict:
    cfg = prepared.config
    return {
        "run_id": run_id,
        "started_at": extra.pop("started_at"),
        "finished_at": extra.pop("finished_at", None),
        "command": command,
        "overrides_json": json.dumps(list(cfg.overrides)),
        # the keys the plan uses (an alias where the store holds a setting under its old key)
        "setting_keys": extra.pop("setting_keys"),
        "git_revision": git_revision(),
        "hostname": hostname(),
        "library_versions_json": library_versions_json(),
        "data_sources_json": json.dumps(
            {
                cfg.benchmark.name: {
                    "source": prepared.benchmark.source,
                    "sha256": prepared.benchmark.data_sha256,
                }
            }
        ),
        "cluster_address": cfg.cluster.address or "local",
        "status": status.value,
        **extra,
    }


def run_grid(
    prepared: PreparedGrid,
    *,
    retry_failed: bool = False,
    wait_lock_s: float = 0.0,
    stream: TextIO | None = None,
    command: str = "run",
) -> RunOutcome:
    """Run every setting of the grid that the store does not hold yet. What would stop it
    anyway (weights that cannot be had, no GPU where one is needed, an unreachable cluster)
    is an error before the lock is taken, Ray starts, or a run row is written. A SIGTERM or
    SIGINT from here on is recorded and acted on at the next safe point (run/execute/signals.py):
    Interrupted, with the run row `interrupted` once one is written."""
    with recording_signals(StopRequest()) as stop:
        return _run_grid(prepared, stop, retry_failed, wait_lock_s, stream, command)


def _run_grid(
    prepared: PreparedGrid,
    stop: StopRequest,
    retry_failed: bool,
    wait_lock_s: float,
    stream: TextIO | None,
    command: str,
) -> RunOutcome:
    from orchestrator.run.preflight.checks import preflight, raise_if_blocking

    config = prepared.config
    store = Store(config.store)
    raise_if_blocking(preflight(prepared, make_plan(store, prepared, retry_failed)), command)
    stop.check()
    run_id = f"{utc_now():%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
    with store.writer_lock(wait_s=wait_lock_s):
        stop.check()
        removed = store.clean_temp()
        if removed:
            logger.info("removed %d temporary file(s) of an interrupted write", removed)
        close_stale_runs(store)
        plan = make_plan(store, prepared, retry_failed, quarantine=True)
        upgrade_shards(store)  # shards of an older schema: same columns as every other shard
        started_at = utc_now()
        keys = [item.key for item in plan.settings]
        store.write_rows(
            "runs",
            run_id,
            [
                _run_row(
                    run_id,
                    prepared,
                    command,
                    RunStatus.RUNNING,
                    started_at=started_at,
                    setting_keys=keys,
                )
            ],
        )
        writer = StoreWriter(
            store,
            run_id,
            library_versions_json(),
            benchmarks={config.benchmark.name: prepared.benchmark},
            limits=config.limits,
        )
        for item in plan.by_action(Action.SKIP):
            writer.skipped(item.key, item.setting, item.reason or "")
        _log_plan(plan)
        work = len(plan.by_action(Action.GENERATE)) + len(plan.by_action(Action.EXECUTE))
        progress = Progress(
            total=work, stream=stream or sys.stderr, every_s=config.progress_every_s
        )
        status = RunStatus.FINISHED
        summary = None
        try:
            stop.check()
            if work:
                summary = _dispatch(prepared, plan, writer, progress, stop)
        except (Interrupted, KeyboardInterrupt):
            status = RunStatus.INTERRUPTED
            raise
        except BaseException:
            status = RunStatus.FAILED
            raise
        finally:
            progress.close()
            store.write_rows(
                "runs",
                run_id,
                [
                    _run_row(
                        run_id,
                        prepared,
                        command,
                        status,
                        started_at=started_at,
                        setting_keys=keys,
                        finished_at=utc_now(),
                        n_generated=writer.n_generated,
                        n_executed=writer.n_executed,
                    )
                ],
            )
    return RunOutcome(
        run_id=run_id,
        plan=plan,
        generated=summary.generated if summary else 0,
        executed=summary.executed if summary else 0,
        failed=summary.failed if summary else 0,
        engine_loads=summary.engine_loads if summary else 0,
        scores=summary.scores if summary else {},
        grid=grid_state(store, prepared.cells),
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
    prepared: PreparedGrid, plan: Plan, writer: StoreWriter, progress: Progress, stop: StopRequest
):
    """Start (or connect to) Ray and drain the plan; the dispatcher's summary. A stop signal
    stops it cleanly: the chunks that are back are committed, the engines and the executions
    are stopped, and so is a local Ray instance this run started."""
    from orchestrator.run.execute.dispatch import start_ray, stop_ray

    config = prepared.config
    ray_info = start_ray(config.cluster)
    try:
        # ray.init installs its own SIGTERM handler (a stack dump and exit 134): take it back
        reinstall(stop)
        return _drain(prepared, plan, writer, progress, stop)
    finally:
        if ray_info["started"]:
            # A local instance this run started ends with the run, also in a library call:
            # the next run in this process starts its own with its own cluster options.
            stop_ray()


def _drain(
    prepared: PreparedGrid, plan: Plan, writer: StoreWriter, progress: Progress, stop: StopRequest
):
    from orchestrator.run.execute.dispatch import Dispatcher, DispatchOptions, stop_ray

    config = prepared.config
    options = DispatchOptions(
        config.cluster, config.limits, config.exec_workers, checkpoint=config.checkpoint
    )
    dispatcher = Dispatcher(
        plan, {config.benchmark.name: prepared.benchmark}, writer, options, progress, stop
    )
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
