"""Ray dispatch: each engine unit as engine instances of R replica actors fed chunks,
executions as tasks.

What starts when is analysis/schedule.py's rule (units.StartQueue asks it whenever GPUs are
free; the plan replays it). An instance's replicas are asked of Ray only when its GPUs are
free, so Ray places them at once. A unit's settings are cut into chunks (execute/chunks.py); an
idle replica takes the next, and the driver commits every chunk as it comes back; an instance
left with nothing gives its GPUs back. A replica whose process dies (alone, or with its node)
puts its chunks back in the queue: Ray restarts it, or the unit's other replicas or a new
instance take them (execute/faults.py, recorded in the run's row). A setting whose chunks are
all stored goes to an execution task, holding `cluster.exec_resource` so engines never starve
it. The only module besides `workers/tasks.py` and raycluster.py that talks to Ray.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ray
from ray.exceptions import RayActorError, RayError

from orchestrator.errors import ClusterError
from orchestrator.run.execute import actors
from orchestrator.run.execute.faults import DEATH_FAULT, Death, Fault, FaultLog, after_death
from orchestrator.run.execute.progress import Progress
from orchestrator.run.execute.raycluster import actor_fate, alive_nodes, describe_error
from orchestrator.run.execute.rows import output_tokens
from orchestrator.run.execute.signals import StopRequest
from orchestrator.run.execute.units import (
    DispatchOptions,
    DispatchSummary,
    QueuedMarks,
    Replica,
    RunningUnit,
    StartQueue,
    Waiting,
    engine_label,
    label,
    start_queue,
    unit_queue,
)
from orchestrator.run.execute.writer import StoreWriter, utc_now
from orchestrator.run.plan.planner import Action, Plan, PlannedSetting
from workers.spec import SettingFailure
from workers.tasks import EngineWorker, execute_samples

logger = logging.getLogger(__name__)

PROGRESS_POLL_S = 2.0  # how often a replica is asked what it is doing
MARK_PER_TICK = 50  # waiting settings recorded as queued per pass of the loop
CAPACITY_POLL_S = 10.0  # how often the cluster's GPUs are counted again
# after an engine died, its node may follow: counted every pass (GCS's health checks take ~15 s)
NODE_WATCH_S = 60.0


class Dispatcher:
    def __init__(
        self,
        plan: Plan,
        benchmarks: Mapping[str, Any],
        writer: StoreWriter,
        options: DispatchOptions,
        progress: Progress,
        stop: StopRequest | None = None,
        on_fault: Callable[[Fault], None] | None = None,
    ):
        self.plan = plan
        # a stop signal is acted on here, between Ray calls (run/execute/signals.py)
        self.stop_request = stop or StopRequest()
        self.benchmarks = dict(benchmarks)
        self.writer = writer
        self.options = options
        self.progress = progress
        self.summary = DispatchSummary()
        self._units: list[RunningUnit] = []
        self._gen: dict[Any, tuple[RunningUnit, Replica]] = {}
        self._polls: dict[Any, tuple[RunningUnit, Replica]] = {}
        self._exec: dict[Any, PlannedSetting] = {}
        self._exec_queue: deque[tuple[PlannedSetting, Any]] = deque()
        self._bench_refs: dict[str, Any] = {}
        self._placement: dict[str, Any] = {}
        self._starts = StartQueue(0)
        self._capacity_at = self._watch_until = 0.0  # GPUs last counted; nodes watched until
        self._queued = QueuedMarks(writer)
        self._stopping = False  # an interrupt: commit what is back, submit nothing new
        self._faults = FaultLog(on_fault or (lambda fault: None), utc_now)

    # -- setup -------------------------------------------------------------------------------

    def _plan_starts(self) -> None:
        """Every unit waits for its GPUs (units.StartQueue); one that no GPU count of this
        cluster can hold fails now."""
        self._starts, unfit = start_queue(
            self.plan.units, ray.cluster_resources(), self.options.cluster
        )
        for unit, error in unfit:
            for item in unit.settings:
                self._queued.mark(item)
                self._fail(item, "ClusterError", str(error), generating=False)
        self._queued.todo.extend(i for w in self._starts.waiting for i in w.unit.settings)

    def _start_due(self) -> None:
        now = time.monotonic()
        if now - self._capacity_at >= CAPACITY_POLL_S or now < self._watch_until:
            self._capacity_at = now  # nodes join and leave
            self._faults.count_nodes(alive_nodes())
            if self._starts.capacity:
                self._starts.capacity = math.floor(ray.cluster_resources().get("GPU", 0))
        if self._stopping:
            return
        for due in self._starts.due(self._units):
            self.stop_request.check()
            running = self._start(due) if isinstance(due, Waiting) else due
            if running.queue.finished:  # every chunk stored by an earlier run: no load
                self._unit_done(running)
            else:
                self._add_instance(running)

    def _start(self, waiting: Waiting) -> RunningUnit:
        """The unit's queue, continuing from the store (its first instance comes next)."""
        unit = waiting.unit
        running = unit_queue(waiting, self.benchmarks, self.writer, self.options.checkpoint)
        for item in unit.settings:
            self._queued.mark(item)
        self._units.append(running)
        total = sum(len(w.remaining) * w.setting.n_samples for w in running.queue.settings)
        self.progress.engine(unit.engine_key, engine_label(unit), total, waiting.replicas)
        for work in running.queue.settings:
            if work.finished and not work.failed:  # every chunk stored by an earlier run
                self._generated(running, running.items[work.key])
        return running

    def _add_instance(self, running: RunningUnit) -> None:
        """Ask Ray for one more instance of the unit (its GPUs are free) and feed it."""
        shape, engine = running.shape, running.unit.engine
        instance, running.instances = running.instances, running.instances + 1
        self._starts.hold(running.unit.engine_key, instance, shape.gpus)
        options = actors.engine_options(shape.replica_gpus, self.options.cluster)
        for _ in range(shape.replicas):
            actor = EngineWorker.options(**options).remote(  # type: ignore[attr-defined]
                engine, *actors.engine_backend(engine.backend)
            )
            running.add(instance, actor, time.monotonic())
            self.summary.engine_loads += 1
        self.progress.instances(*running.counts())
        self._feed(running)

    def _unit_done(self, running: RunningUnit) -> None:
        """Its GPUs go back to the start queue; the driver keeps nothing of it."""
        self.progress.engine_done(running.unit.engine_key)
        for replica in running.replicas:
            self._close(running, replica)
        if running in self._units:
            self._units.remove(running)

    # -- generation --------------------------------------------------------------------------

    def _feed(self, running: RunningUnit) -> None:
        """Give idle replicas their next chunks; an instance left with nothing gives its GPUs
        back, and a unit with nothing left is done."""
        if self._stopping:
            return
        for replica in running.feed_order():
            chunks = running.queue.next_chunks()
            if not chunks:
                break
            for chunk in chunks:
                item = running.items[chunk.setting_key]
                self.writer.in_progress(item.key, item.setting)
            running.hand(replica, chunks, time.monotonic())
            replica.in_flight = replica.actor.run.remote(list(chunks), self._bench_refs)
            self._gen[replica.in_flight] = (running, replica)
        if running.queue.finished:
            self._unit_done(running)
            return
        for instance in running.open_instances():
            replicas = running.live(instance)
            if all(r.in_flight is None and not r.restarting for r in replicas):
                for replica in replicas:
                    self._close(running, replica)

    def _close(self, running: RunningUnit, replica: Replica) -> None:
        """Kill the replica (a fresh process for the next engine); the last of its instance
        gives the instance's GPUs back."""
        if not replica.closed:
            replica.closed = True
            ray.kill(replica.actor, no_restart=True)
            if not running.live(replica.instance):
                self._starts.release(running.unit.engine_key, replica.instance)

    def _fail(
        self, item: PlannedSetting, error_type: str, message: str, *, generating: bool = True
    ) -> None:
        self.writer.failed(
            item.key, item.setting, error_type, message, generation_attempt=generating
        )
        self.summary.failed += 1
        self.progress.fail(label(item), f"{error_type}: {message[:200]}")

    def _on_generated(self, ref: Any) -> None:
        running, replica = self._gen.pop(ref)
        chunks, replica.in_flight, replica.chunks = replica.chunks, None, ()
        replica.last_progress = replica.idle_since = time.monotonic()
        try:
            results = ray.get(ref)
        except RayActorError as e:
            self._actor_lost(running, replica, chunks, e)
            return
        except RayError as e:
            self._unit_failed(running, replica, e)
            return
        for chunk, result in zip(chunks, results, strict=True):
            item = running.items[chunk.setting_key]
            if isinstance(result, SettingFailure):
                running.queue.failed(chunk.setting_key)
                self._fail(item, result.error_type, result.error_message)
                continue
            self.writer.chunk_generated(item.key, item.setting, result)
            running.queue.returned(chunk.setting_key, result.stream_state)
            running.queue.measured(len(result.samples), result.generation_s or 0.0)
            running.load_s = max(running.load_s or 0.0, result.engine_load_s or 0.0)
            tokens = output_tokens(result.samples) or 0
            self.progress.chunk(running.unit.engine_key, replica.index, len(result.samples), tokens)
            if running.queue.work(chunk.setting_key).finished:
                self._generated(running, item)
        self._feed(running)

    def _actor_lost(
        self, running: RunningUnit, replica: Replica, chunks: Sequence[Any], error: RayActorError
    ) -> None:
        """Its process died (alone or with its node): its chunks go back to the queue for it
        once Ray restarts it, or for others (faults.after_death); the run's row says so."""
        others = len([r for r in running.live() if r is not replica])
        retries = self.options.cluster.max_retries
        death = after_death(actor_fate(error), replica.gave_up, others, running.restarts, retries)
        if death is Death.UNIT_FAILED:
            self._unit_failed(running, replica, error)
            return
        if replica.restarting and death is Death.RESTARTING:
            return  # still coming back: recorded when it died
        running.queue.requeue(chunks)
        self._watch_until = time.monotonic() + NODE_WATCH_S  # its node may be gone
        what = f"{engine_label(running.unit)} replica {replica.index} died"
        self._faults.add(DEATH_FAULT[death], what, describe_error(error)[0], chunks)
        replica.restarting = death is Death.RESTARTING
        if not replica.restarting:
            running.died += 1
            running.restarts += death is Death.NEW_INSTANCE
            self._close(running, replica)
        self._feed(running)

    def _generated(self, running: RunningUnit, item: PlannedSetting) -> None:
        """Every chunk of the setting is stored: execute it."""
        self.writer.setting_generated()
        self.summary.generated += 1
        self.progress.generated(label(item))
        samples = self.writer.stored_samples(item.key, running.order)
        self._exec_queue.append((item, samples))

    def _unit_failed(self, running: RunningUnit, replica: Replica, error: RayError) -> None:
        """The engine itself failed (it could not load, or its process died beyond its
        restarts): every unfinished setting of the unit fails with that error, once."""
        error_type, message = describe_error(error)
        if replica.gave_up:
            error_type, message = actors.gave_up(replica, self.options.cluster, message)
        for key in running.queue.fail_unfinished():
            self._fail(running.items[key], error_type, message)
        for ref in running.drop_in_flight():
            self._gen.pop(ref, None)
        self._unit_done(running)

    # -- execution ---------------------------------------------------------------------------

    def _on_executed(self, ref: Any) -> None:
        item = self._exec.pop(ref)
        try:
            batch = ray.get(ref)
        except RayError as e:
            error_type, message = describe_error(e)
            self._fail(item, error_type, message, generating=False)
            return
        score = self.writer.executed(item.key, item.setting, batch)
        self.summary.executed += 1
        self.summary.scores[item.key] = score["value"]
        self.progress.finished(label(item), score["value"])

    def _submit_exec(self) -> None:
        opts = self.options
        placement, limits = self._placement, (opts.limits, opts.exec_workers)
        while self._exec_queue and len(self._exec) < opts.cluster.max_pending_exec:
            item, samples = self._exec_queue.popleft()
            self.writer.in_progress(item.key, item.setting)
            ref = execute_samples.options(
                **placement,
                max_retries=opts.cluster.exec_max_retries,  # worker or node death
                retry_exceptions=False,  # a sandbox error is a result, not a reason to rerun
            ).remote(self._bench_refs[item.setting.benchmark.name], samples, *limits)
            self._exec[ref] = item

    # -- liveness and progress ---------------------------------------------------------------

    def _poll(self) -> None:
        """Ask busy replicas what they do (their own thread answers while they generate)."""
        for running, replica in actors.due_polls(self._units, time.monotonic(), PROGRESS_POLL_S):
            replica.progress_ref = replica.actor.progress.remote()
            self._polls[replica.progress_ref] = (running, replica)

    def _on_polled(self, ref: Any) -> None:
        running, replica = self._polls.pop(ref)
        replica.progress_ref = None
        try:
            snapshot = ray.get(ref)
        except RayError as e:  # an actor's death that no call of it will report is handled
            if isinstance(e, RayActorError) and replica.in_flight is None and not replica.closed:
                self._actor_lost(running, replica, (), e)
            return  # else the next poll asks again
        replica.saw(snapshot, time.monotonic())
        self.progress.replica(running.unit.engine_key, replica.index, snapshot)
        if replica.restarting:  # Ray restarted it: it takes chunks again
            replica.restarting = False
            self._feed(running)

    def _watchdog(self) -> None:
        """Restart an engine that has made no progress for too long; fail its unit after
        max_retries restarts."""
        timeout = self.options.cluster.setting_timeout_s
        if not timeout:
            return
        now = time.monotonic()
        for _running, replica in list(self._gen.values()):
            if actors.stuck(replica, now, timeout, self.options.cluster.max_retries):
                ray.kill(replica.actor, no_restart=replica.gave_up)

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> DispatchSummary:
        self._bench_refs = {name: ray.put(b) for name, b in self.benchmarks.items()}
        resource = self.options.cluster.exec_resource
        declared = ray.cluster_resources().get(resource, 0) if resource else 0
        self._placement = actors.exec_placement(self.options.cluster, declared)
        for item in self.plan.by_action(Action.EXECUTE):
            self.writer.started(item.key, item.setting)
            order = self.benchmarks[item.setting.benchmark.name].problem_ids()
            self._exec_queue.append((item, self.writer.stored_samples(item.key, order)))
        self._plan_starts()
        self._faults.nodes = alive_nodes()
        while self._gen or self._exec or self._exec_queue or self._starts.waiting or self._units:
            self.stop_request.check()  # the safe point: no Ray call is running
            self._start_due()
            self._queued.some(MARK_PER_TICK)
            self._submit_exec()
            self._poll()
            pending = [*self._gen, *self._exec, *self._polls]
            if not pending:  # a waiting unit with nothing running to free its GPUs
                raise ClusterError(self._starts.never_starts())
            ready, _ = ray.wait(pending, num_returns=1, timeout=1.0)
            for ref in ready:
                self._handle(ref)
            self._watchdog()
            self.progress.tick()
        return self.summary

    def _handle(self, ref: Any) -> None:
        """A ref that is ready: a chunk call, an execution or a progress poll."""
        if ref in self._gen:
            self._on_generated(ref)
        elif ref in self._exec:
            self._on_executed(ref)
        elif ref in self._polls:
            self._on_polled(ref)

    def stop(self) -> None:
        """An interrupt: commit the chunks and executions that are back. The rest stops when
        the driver disconnects (its actors and tasks die with their owner), which the caller
        does next; killing them one by one would only make Ray announce retries."""
        self._stopping = True
        refs = [*self._gen, *self._exec]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0) if refs else ([], [])
        for ref in ready:
            self._handle(ref)
        self._gen.clear()
        self._exec.clear()

    def abort(self) -> None:
        """Stop every engine and execution now: committed chunks stay."""
        for running in self._units:
            for replica in running.replicas:
                self._close(running, replica)
        for ref in list(self._exec):
            ray.cancel(ref, force=True)
        self._gen.clear()
        self._exec.clear()


__all__: Sequence[str] = ("Dispatcher", "DispatchOptions", "DispatchSummary")
