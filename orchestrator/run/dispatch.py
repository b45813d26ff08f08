"""Ray dispatch: engine units as actors on GPU workers, executions as CPU tasks.

Submit everything, then drain with `ray.wait(num_returns=1)`: each finished setting is persisted
by the driver at once (a crash loses at most the settings in flight), and its programs go to a
CPU task that overlaps with the generation of later settings. The only module besides
`workers/tasks.py` that talks to Ray.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import RayError, RayTaskError

from orchestrator.errors import ClusterError
from orchestrator.run.config import ClusterSpec
from orchestrator.run.plan import Action, EngineUnit, Plan, PlannedSetting
from orchestrator.run.progress import Progress
from orchestrator.run.rows import output_tokens
from orchestrator.run.writer import StoreWriter
from workers.spec import BackendName, SandboxLimits, SettingFailure, SettingGenerations
from workers.tasks import EngineWorker, execute_samples

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DispatchOptions:
    cluster: ClusterSpec
    limits: SandboxLimits
    exec_workers: int | None


@dataclass
class DispatchSummary:
    generated: int = 0
    executed: int = 0
    failed: int = 0
    engine_loads: int = 0
    scores: dict[str, float | None] = field(default_factory=dict)


def start_ray(cluster: ClusterSpec) -> dict[str, Any]:
    """Connect to `cluster.address`, or start a private local instance (never attach to a
    machine-wide one by accident: address="local")."""
    if ray.is_initialized():
        return {"address": "already-initialized"}
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Workers must not inherit a 1-thread cap meant for the sandbox; torch picks its own.
    if cluster.address:
        ctx = _connect(cluster.address)
    else:
        ctx = ray.init(
            address="local",
            num_cpus=cluster.num_cpus,
            num_gpus=cluster.num_gpus,
            include_dashboard=False,
            log_to_driver=False,
        )
    return {"address": getattr(ctx, "address_info", {}).get("address", cluster.address or "local")}


CONNECT_ATTEMPTS = 3


def _connect(address: str):
    """Connect to an existing cluster. A `ray://` client connection is retried: the head starts
    a client server per connection, which can time out on a loaded head."""
    for attempt in range(1, CONNECT_ATTEMPTS + 1):
        try:
            return ray.init(address=address, log_to_driver=False)
        except ConnectionError as e:
            if not address.startswith("ray://") or attempt == CONNECT_ATTEMPTS:
                raise ClusterError(f"cannot connect to the Ray cluster at {address}: {e}") from e
            logger.warning(
                "connecting to %s failed (%s); retrying", address, str(e).splitlines()[0]
            )
            time.sleep(2.0 * attempt)
    raise AssertionError("unreachable")


def label(item: PlannedSetting) -> str:
    s = item.setting
    e = s.engine
    return (
        f"{e.model.name}/{e.backend}/{e.dtype}/{e.quant} {s.template} {s.decoding.name} "
        f"L{s.max_length}"
    )


@dataclass
class RunningUnit:
    """An engine unit whose actor is live: what the drain loop and the watchdog track."""

    unit: EngineUnit
    actor: Any
    remaining: int
    last_progress: float
    timeouts: int = 0
    gave_up: bool = False  # the watchdog killed it for good: its settings failed by timeout


class Dispatcher:
    def __init__(
        self,
        plan: Plan,
        benchmarks: Mapping[str, Any],
        writer: StoreWriter,
        options: DispatchOptions,
        progress: Progress,
    ):
        self.plan = plan
        self.benchmarks = dict(benchmarks)
        self.writer = writer
        self.options = options
        self.progress = progress
        self.summary = DispatchSummary()
        self._gen: dict[Any, tuple[RunningUnit, tuple[PlannedSetting, ...]]] = {}
        self._exec: dict[Any, PlannedSetting] = {}
        self._exec_queue: deque[tuple[PlannedSetting, Any]] = deque()

    # -- setup -------------------------------------------------------------------------------

    def _gpus_for(self, unit: EngineUnit, cluster_gpus: float) -> float:
        wanted = unit.engine.model.num_gpus
        if unit.engine.backend is BackendName.REPLAY:
            return 0  # no model to place
        if cluster_gpus <= 0:
            if not self.options.cluster.cpu_if_no_gpus:
                raise ClusterError(
                    f"{unit.engine.model.name} needs {wanted} GPU(s) and the cluster has none "
                    "(set cluster.cpu_if_no_gpus=true to run on CPU)"
                )
            return 0
        if wanted > cluster_gpus:
            raise ClusterError(
                f"{unit.engine.model.name} needs {wanted} GPUs; the cluster has {cluster_gpus:g}"
            )
        return wanted

    def _chunks(self, unit: EngineUnit) -> list[tuple[PlannedSetting, ...]]:
        # vLLM serves all settings of its unit in one generate call; HF one setting per call so
        # each is persisted as soon as it is done.
        if unit.engine.backend is BackendName.VLLM:
            return [unit.settings]
        return [(s,) for s in unit.settings]

    def _submit_units(self, bench_refs: Mapping[str, Any]) -> None:
        cluster_gpus = float(ray.cluster_resources().get("GPU", 0))
        if cluster_gpus <= 0 and self.plan.units:
            logger.info("the cluster has no GPUs: engines run on CPU")
        opts = self.options.cluster
        for unit in self.plan.units:
            try:
                gpus = self._gpus_for(unit, cluster_gpus)
            except ClusterError as e:
                for item in unit.settings:
                    self._fail(item, "ClusterError", str(e), generating=False)
                continue
            actor = EngineWorker.options(  # type: ignore[attr-defined]  # added by @ray.remote
                num_gpus=gpus,
                num_cpus=opts.engine_cpus,
                max_restarts=opts.max_retries,
                max_task_retries=opts.max_retries,
            ).remote(unit.engine)
            state = RunningUnit(unit, actor, len(unit.settings), time.monotonic())
            self.summary.engine_loads += 1
            for chunk in self._chunks(unit):
                for item in chunk:
                    self.writer.started(item.key, item.setting)
                ref = actor.run.remote([(item.key, item.setting) for item in chunk], bench_refs)
                self._gen[ref] = (state, chunk)

    # -- events ------------------------------------------------------------------------------

    def _fail(
        self, item: PlannedSetting, error_type: str, message: str, *, generating: bool = True
    ) -> None:
        self.writer.failed(
            item.key, item.setting, error_type, message, generation_attempt=generating
        )
        self.summary.failed += 1
        self.progress.fail(label(item), f"{error_type}: {message[:200]}")

    def _on_generated(self, ref: Any) -> None:
        state, chunk = self._gen.pop(ref)
        state.last_progress = time.monotonic()
        state.remaining -= len(chunk)
        try:
            results = ray.get(ref)
        except RayError as e:
            error_type, message = _describe(e)
            if state.gave_up:
                error_type = "Timeout"
                message = (
                    f"no progress for {self.options.cluster.setting_timeout_s:g}s, "
                    f"{state.timeouts - 1} restart(s) of its engine did not help ({message})"
                )
            for item in chunk:
                self._fail(item, error_type, message)
            results = []
        by_key = {item.key: item for item in chunk}
        for result in results:
            item = by_key[result.setting_key]
            if isinstance(result, SettingFailure):
                self._fail(item, result.error_type, result.error_message)
                continue
            assert isinstance(result, SettingGenerations)
            self.writer.generated(item.key, item.setting, result)
            self.summary.generated += 1
            tokens = output_tokens(result.samples) or 0
            self.progress.generated(label(item), len(result.samples), tokens)
            self._exec_queue.append((item, result.samples))
        if state.remaining <= 0:
            ray.kill(state.actor, no_restart=True)  # a fresh process for the next engine

    def _on_executed(self, ref: Any) -> None:
        item = self._exec.pop(ref)
        try:
            batch = ray.get(ref)
        except RayError as e:
            error_type, message = _describe(e)
            self._fail(item, error_type, message, generating=False)
            return
        score = self.writer.executed(item.key, item.setting, batch)
        self.summary.executed += 1
        self.summary.scores[item.key] = score["value"]
        self.progress.finished(label(item), score["value"])

    def _submit_exec(self, bench_refs: Mapping[str, Any]) -> None:
        opts = self.options
        while self._exec_queue and len(self._exec) < opts.cluster.max_pending_exec:
            item, samples = self._exec_queue.popleft()
            ref = execute_samples.options(
                num_cpus=opts.cluster.exec_cpus,
                max_retries=opts.cluster.exec_max_retries,  # worker or node death
                retry_exceptions=False,  # a sandbox error is a result, not a reason to rerun
            ).remote(
                bench_refs[item.setting.benchmark.name], samples, opts.limits, opts.exec_workers
            )
            self._exec[ref] = item

    def _watchdog(self) -> None:
        """Restart an engine whose current setting has made no progress for too long; fail its
        remaining settings after max_retries restarts."""
        timeout = self.options.cluster.setting_timeout_s
        if not timeout:
            return
        now = time.monotonic()
        for state in {id(s): s for s, _ in self._gen.values()}.values():
            if now - state.last_progress < timeout:
                continue
            state.timeouts += 1
            state.last_progress = now
            give_up = state.timeouts > self.options.cluster.max_retries
            state.gave_up = give_up
            logger.warning(
                "engine %s stuck for %.0fs: %s",
                state.unit.engine.model.name, timeout, "giving up" if give_up else "restarting",
            )  # fmt: skip
            ray.kill(state.actor, no_restart=give_up)

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> DispatchSummary:
        bench_refs = {name: ray.put(b) for name, b in self.benchmarks.items()}
        for item in self.plan.by_action(Action.EXECUTE):
            self.writer.started(item.key, item.setting)
            self._exec_queue.append((item, self.writer.stored_samples(item.key)))
        self._submit_units(bench_refs)
        while self._gen or self._exec or self._exec_queue:
            self._submit_exec(bench_refs)
            pending = list(self._gen) + list(self._exec)
            ready, _ = ray.wait(pending, num_returns=1, timeout=1.0)
            for ref in ready:
                if ref in self._gen:
                    self._on_generated(ref)
                else:
                    self._on_executed(ref)
            self._watchdog()
            self.progress.draw()
        return self.summary

    def abort(self) -> None:
        for state, _ in list(self._gen.values()):
            ray.kill(state.actor, no_restart=True)
        for ref in list(self._exec):
            ray.cancel(ref, force=True)


def _describe(error: RayError) -> tuple[str, str]:
    """Error type and message of a Ray failure, unwrapping application exceptions."""
    if isinstance(error, RayTaskError):
        cause = error.cause if getattr(error, "cause", None) is not None else error
        return type(cause).__name__, str(cause).strip().splitlines()[-1][:2000]
    text = str(error).strip()
    return type(error).__name__, (text.splitlines()[0] if text else type(error).__name__)[:2000]
