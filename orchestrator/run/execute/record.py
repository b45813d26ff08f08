"""The runs table: one row per run, written by the run's record and nothing else.

`with RunRecord(...) as run:` writes the row `running` on entry and closes it on exit:
`finished`, `interrupted` (a stop signal: Interrupted or KeyboardInterrupt) or `failed` (any
other exception), with the counts of the run's StoreWriter (`run.writer`), the one writer of
the store's other tables. A run that dies without closing its row (a SIGKILL) is marked
`interrupted` by the next writer (`close_stale_runs`). Callers hold the writer lock.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any

from orchestrator.errors import Interrupted
from orchestrator.run.execute.faults import Fault, faults_json
from orchestrator.run.execute.writer import StoreWriter, utc_now
from orchestrator.run.prepare.provenance import git_revision, hostname, library_versions_json
from storage.schema import RunStatus
from storage.store import Store
from workers.benchmarks.base import Benchmark
from workers.execspec import SandboxLimits

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunFacts:
    """What a runs row says about where a run came from, besides its counts and status."""

    command: str  # "run", "import-generations", "repeat-check", ...
    overrides: tuple[str, ...]  # as the user typed them
    # What the run read, by name: {"source": where from, "sha256": its content hash}.
    data_sources: Mapping[str, Mapping[str, str]]
    cluster_address: str = "local"


def run_id_at(now: datetime) -> str:
    """A run id that sorts by start time: `<UTC timestamp>-<8 random hex>`."""
    return f"{now:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"


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


class RunRecord:
    """A run's row in the runs table and the StoreWriter of its results (`writer`)."""

    def __init__(
        self,
        store: Store,
        facts: RunFacts,
        setting_keys: Sequence[str],
        benchmarks: Mapping[str, Benchmark] | None = None,
        limits: SandboxLimits | None = None,
        clock: Callable[[], datetime] = utc_now,
        planned_environment: Mapping[str, str] | None = None,
    ):
        self.store = store
        self.facts = facts
        self.setting_keys = list(setting_keys)  # the keys the plan uses (aliases included)
        self.clock = clock
        self.started_at = clock()
        self.run_id = run_id_at(self.started_at)
        self.library_versions = library_versions_json()
        # A run that executes nothing (a repeat-check record) needs no benchmarks or limits.
        self.writer = StoreWriter(
            store,
            self.run_id,
            self.library_versions,
            benchmarks or {},
            limits or SandboxLimits(),
            clock=clock,
            planned_environment=planned_environment,
        )
        self.status: RunStatus | None = None  # once closed
        self.faults: list[Fault] = []  # what the cluster did to the run, as it happened

    def fault(self, fault: Fault) -> None:
        """A node lost or an engine restarted, its chunks requeued: the row says so at once,
        so `status` shows it while the run goes on."""
        self.faults.append(fault)
        if self.status is None:
            self._write(RunStatus.RUNNING, finished_at=None)

    def __enter__(self) -> RunRecord:
        self._write(RunStatus.RUNNING, finished_at=None)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            status = RunStatus.FINISHED
        elif issubclass(exc_type, Interrupted | KeyboardInterrupt):
            status = RunStatus.INTERRUPTED
        else:
            status = RunStatus.FAILED
        self._write(status, finished_at=self.clock())
        self.status = status  # an exception goes on to the caller

    def _write(self, status: RunStatus, finished_at: datetime | None) -> None:
        self.store.write_rows("runs", self.run_id, [self._row(status, finished_at)])

    def _row(self, status: RunStatus, finished_at: datetime | None) -> dict[str, Any]:
        facts = self.facts
        closed = finished_at is not None
        return {
            "run_id": self.run_id,
            "started_at": self.started_at,
            "finished_at": finished_at,
            "command": facts.command,
            "overrides_json": json.dumps(list(facts.overrides)),
            "setting_keys": self.setting_keys,
            "n_generated": self.writer.n_generated if closed else None,
            "n_executed": self.writer.n_executed if closed else None,
            "git_revision": git_revision(),
            "hostname": hostname(),
            "library_versions_json": self.library_versions,
            "data_sources_json": json.dumps(
                {name: dict(source) for name, source in facts.data_sources.items()}
            ),
            "cluster_address": facts.cluster_address,
            "status": status.value,
            "faults_json": faults_json(self.faults),
        }
