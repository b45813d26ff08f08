"""What the dispatcher asks of Ray for its actors and tasks, decided without Ray: what an
engine actor needs of its backend, where executions run, which replicas to ask for progress,
and the watchdog's rule for a replica that makes none."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from orchestrator.run.config.specs import ClusterSpec
from orchestrator.run.execute.units import Replica, RunningUnit
from workers.backends.registry import get_backend

logger = logging.getLogger(__name__)


def due_polls(
    units: Sequence[RunningUnit], now: float, every_s: float
) -> list[tuple[RunningUnit, Replica]]:
    """The live replicas to ask what they do (not asked for `every_s`, or restarting: its
    answer says Ray has restarted it; no answer pending); each counted as asked now."""
    due = []
    for running in units:
        for replica in running.live():
            waited = replica.restarting or now - replica.polled_at >= every_s
            if replica.progress_ref is None and waited:
                replica.polled_at = now
                due.append((running, replica))
    return due


def engine_backend(name: str) -> tuple[str, bool]:
    """What an engine actor needs of its backend's definition: its engine class's path, and
    whether it generates a unit's settings in one call (the definition's `batched`, the one
    place that fact is stated)."""
    definition = get_backend(name)
    return definition.engine, definition.batched


def engine_options(replica_gpus: float, cluster: ClusterSpec) -> dict[str, Any]:
    """Ray's options for an engine actor. Ray restarts a process that died (`max_retries`
    times; on a live node where its own is gone), but a call the process died in fails rather
    than being retried: the driver puts its chunks back in the queue itself, so it knows, and
    records, what was requeued (execute/faults.py)."""
    return {
        "num_gpus": replica_gpus,
        "num_cpus": cluster.engine_cpus,
        "max_restarts": cluster.max_retries,
        "max_task_retries": 0,
    }


def exec_placement(cluster: ClusterSpec, declared: float) -> dict[str, Any]:
    """Executions hold the execution resource where the cluster declares it (`declared` of
    it; engines then never starve them), else `exec_cpus` CPUs (said once)."""
    resource = cluster.exec_resource
    if resource and declared > 0:
        return {"num_cpus": 0, "resources": {resource: 1}}
    if resource:
        logger.warning(
            "the cluster declares no %r resource: executions take %g CPU(s) each and can "
            "wait for engines that hold every CPU (ray start --resources='{\"%s\": N}')",
            resource,
            cluster.exec_cpus,
            resource,
        )
    return {"num_cpus": cluster.exec_cpus}


def stuck(replica: Replica, now: float, timeout: float, max_retries: int) -> bool:
    """The watchdog's rule: a replica without progress for `timeout` seconds is restarted,
    past `max_retries` restarts killed for good (`gave_up`)."""
    if now - replica.last_progress < timeout:
        return False
    replica.timeouts += 1
    replica.last_progress = now
    replica.gave_up = replica.timeouts > max_retries
    logger.warning(
        "engine replica %d stuck for %.0fs: %s",
        replica.index,
        timeout,
        "giving up" if replica.gave_up else "restarting",
    )
    return True


def gave_up(replica: Replica, cluster: ClusterSpec, message: str) -> tuple[str, str]:
    """The error of a unit whose replica the watchdog gave up on."""
    return "Timeout", (
        f"no progress for {cluster.setting_timeout_s:g}s, "
        f"{replica.timeouts - 1} restart(s) of its engine did not help ({message})"
    )
