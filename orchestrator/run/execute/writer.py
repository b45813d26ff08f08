"""The driver's writer: turns dispatch events into store shards, in a crash-safe order.

Order per setting: generations shard -> (execution) executions shard -> scores shard -> the
settings row marked complete. The settings row is the commit record; anything written before it
is either reused on resume (generations) or rewritten (executions, scores).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from orchestrator.run.execute.chunks import Stored
from orchestrator.run.execute.rows import (
    SettingFacts,
    execution_rows,
    generation_rows,
    kept_provenance,
    merged_provenance,
    provenance_of,
    samples_from_rows,
    score_row,
    setting_row,
)
from storage.errors import NotLockHolder
from storage.integrity import CHUNK_SEPARATOR, is_shard_key, setting_key_of
from storage.schema import SettingStatus
from storage.store import Store
from workers.benchmarks.base import Benchmark
from workers.benchmarks.registry import get_benchmark
from workers.execspec import ExecutionBatch, SandboxLimits
from workers.keys import canonical_json, execution_changes, execution_fields, execution_key
from workers.spec import SampleRecord, SettingGenerations, SettingSpec

logger = logging.getLogger(__name__)

# Provenance an execution-only resume keeps from the row an earlier run wrote.
PROVENANCE_FIELDS = (
    "hostname",
    "node_id",
    "device",
    "backend_version",
    "effective_dtype",
    "backend_versions_json",
    "hostnames",
    "node_ids",
    "devices",
    "effective_dtypes",
    "tokenizer_sha256",
    "chat_template_sha256",
    "engine_options_json",
    "library_versions_json",
    "generation_s",
    "generation_started_at",
    "generation_finished_at",
    "engine_load_s",
    "n_generated_tokens",
)


def utc_now() -> datetime:
    return datetime.now(UTC)


class StoreWriter:
    def __init__(
        self,
        store: Store,
        run_id: str,
        library_versions: str,
        benchmarks: Mapping[str, Benchmark],
        limits: SandboxLimits,
        clock: Callable[[], datetime] = utc_now,
        planned_environment: Mapping[str, str] | None = None,
    ):
        self.store = store
        self.limits = limits  # the run's sandbox limits (part of each execution identity)
        # The environment the run's plan expects executions to run in (the driver's); None:
        # not compared (a writer outside `run`, e.g. harness-import executes in this process).
        self.planned_environment = (
            None if planned_environment is None else dict(planned_environment)
        )
        # Loaded benchmarks by name: the facts of every settings row (problems, template kind)
        # and `summarize`, which may replace the pass@1 headline.
        self.benchmarks = dict(benchmarks)
        self.run_id = run_id
        self.library_versions = library_versions
        self.clock = clock
        self._attempts: dict[str, int] = {}
        self._provenance: dict[str, dict[str, Any]] = {}
        self._execution: dict[str, dict[str, Any]] = {}  # execution identity, once executed
        self._other_environments: set[str] = set()  # differences from the driver's, each told once
        self._counted: set[str] = set()  # settings whose generation attempt this run counted
        self._in_progress: set[str] = set()  # settings whose work this run has handed out
        # Each setting's generations shards: one listing of the table when first needed (what
        # earlier runs stored), then every shard this writer writes or sets aside. Listing the
        # table per setting would cost O(settings x shards) over a grid (the driver at scale).
        self._shards: dict[str, set[str]] | None = None
        self.n_generated = 0
        self.n_executed = 0

    def _shards_of(self, key: str) -> set[str]:
        if self._shards is None:
            self._shards = {}
            for name in self.store.shards("generations"):
                self._shards.setdefault(setting_key_of(name), set()).add(name)
        return self._shards.setdefault(key, set())

    def _generations(self, key: str) -> list[dict[str, Any]]:
        """The rows of the setting's generations shards, in shard order (its whole shard, then
        its chunks in order); a shard gone or damaged since is left out (as read_table does)."""
        names = sorted(self._shards_of(key))
        tables = self.store.map_items(lambda n: self.store.read_shard("generations", n), names)
        return [row for t in tables if t is not None for row in t.to_pylist()]

    def _forget(self, key: str) -> None:
        """A setting is complete: nothing of it is needed again (memory flat over a grid)."""
        for state in (self._attempts, self._provenance, self._execution):
            state.pop(key, None)
        self._counted.discard(key)
        self._in_progress.discard(key)
        if self._shards is not None:
            self._shards.pop(key, None)

    def _previous(self, key: str) -> dict[str, Any] | None:
        table = self.store.read_shard("settings", key)
        rows = table.to_pylist() if table is not None else []
        return rows[0] if rows else None

    def _write(
        self,
        key: str,
        setting: SettingSpec,
        status: SettingStatus,
        reason: str | None = None,
        error_type: str | None = None,
    ) -> None:
        row = setting_row(
            key,
            setting,
            status,
            now=self.clock(),
            run_id=self.run_id,
            facts=self._facts(setting),
            reason=reason,
            error_type=error_type,
            attempts=self._attempts.get(key, 0),
            provenance={**self._provenance.get(key, {}), **self._execution.get(key, {})},
        )
        self.store.write_rows("settings", key, [row])

    def _facts(self, setting: SettingSpec) -> SettingFacts | None:
        """Run-time facts of a setting: its problems (of the benchmark's), template kind and
        the benchmark's card."""
        benchmark = self.benchmarks.get(setting.benchmark.name)
        if benchmark is None:
            return None
        ids = benchmark.problem_ids()
        definition = get_benchmark(setting.benchmark.name)
        kind = definition.template_kind(setting.template, setting.engine.model)
        selected = len(setting.benchmark.select(ids))
        return SettingFacts(kind, selected, len(ids), definition.card.to_json())

    def skipped(self, key: str, setting: SettingSpec, reason: str) -> None:
        self._write(key, setting, SettingStatus.SKIPPED, reason=reason)

    def _known_attempts(self, key: str) -> int:
        if key not in self._attempts:
            self._attempts[key] = int((self._previous(key) or {}).get("attempts") or 0)
        return self._attempts[key]

    def started(self, key: str, setting: SettingSpec) -> None:
        """The setting is submitted (to generate, or only to execute its stored generations):
        `queued` until its work is handed out. Not an attempt yet: `attempts` counts
        generation attempts that came back."""
        previous = self._previous(key)
        self._attempts[key] = int((previous or {}).get("attempts") or 0)
        if previous:  # keep what an earlier run learnt (execution-only resumes need it)
            self._provenance.setdefault(key, kept_provenance(previous, PROVENANCE_FIELDS))
        self._write(key, setting, SettingStatus.QUEUED)

    def in_progress(self, key: str, setting: SettingSpec) -> None:
        """Its first chunk went to an engine, or its programs to an execution task: `running`
        from now on (once per run: `status` counts these, not the queued ones)."""
        if key not in self._in_progress:
            self._in_progress.add(key)
            self._write(key, setting, SettingStatus.RUNNING)

    def generated(
        self, key: str, setting: SettingSpec, result: SettingGenerations, counted: bool = True
    ) -> None:
        """Commit a setting's generations as one shard. `counted` False: they were made
        elsewhere (an imported harness file), so this run did not generate them."""
        self.store.write_rows("generations", key, generation_rows(key, result.samples))
        self._shards_of(key).add(key)
        self._attempts[key] = self._known_attempts(key) + 1
        self._provenance[key] = provenance_of(result, self.library_versions)
        self._write(key, setting, SettingStatus.RUNNING)
        self.n_generated += int(counted)

    def chunk_generated(self, key: str, setting: SettingSpec, result: SettingGenerations) -> None:
        """Commit one chunk of a setting's generations (its own atomic shard), and the
        setting's progress and provenance so far; the setting stays `running` until executed.
        The first chunk back in this run counts a generation attempt."""
        assert result.chunk is not None, "a chunk result names its chunk"
        shard = f"{key}{CHUNK_SEPARATOR}{result.chunk:05d}"
        rows = generation_rows(key, result.samples, result.stream_state)
        self.store.write_rows("generations", shard, rows)
        self._shards_of(key).add(shard)
        if key not in self._counted:
            self._counted.add(key)
            self._attempts[key] = self._known_attempts(key) + 1
        self._provenance[key] = merged_provenance(
            self._provenance.get(key), result, self.library_versions
        )
        self._write(key, setting, SettingStatus.RUNNING)

    def setting_generated(self) -> None:
        """All chunks of a setting are stored (it goes to execution next)."""
        self.n_generated += 1

    def stored(self, key: str, n_samples: int) -> Stored:
        """What the store holds of a setting's generations: the problems with all their
        samples, the next chunk index, and the stream state after the highest chunk."""
        shards = sorted(self._shards_of(key))
        if not shards:
            return Stored()
        counts: dict[str, int] = {}
        for row in self._generations(key):
            counts[row["task_id"]] = counts.get(row["task_id"], 0) + 1
        chunks = [int(k.partition(CHUNK_SEPARATOR)[2]) for k in shards if CHUNK_SEPARATOR in k]
        last = self.store.read_shard("generations", shards[-1])
        tail = last.select(["task_id", "stream_state"]).to_pylist()[-1] if last else {}
        return Stored(
            task_ids=frozenset(t for t, n in counts.items() if n >= n_samples),
            next_chunk=max(chunks) + 1 if chunks else 0,
            stream_state=tail.get("stream_state"),
            last_task=tail.get("task_id"),
        )

    def set_aside_generations(self, key: str, reason: str) -> int:
        """Move a setting's stored generations to the quarantine (never deleted), so it
        starts again: chunks of a sequential stream that cannot be continued exactly."""
        moved = 0
        for file in self.store.files("generations"):
            name = file.name.removesuffix(".parquet")
            if is_shard_key(name) and setting_key_of(name) == key:
                self.store.quarantine(file, {"reason": reason, "setting_key": key})
                self._shards_of(key).discard(name)
                moved += 1
        logger.warning(
            "setting %s starts again (%s): %d chunk(s) set aside", key[:12], reason, moved
        )
        return moved

    def stored_samples(self, key: str, order: Sequence[str] = ()) -> list[SampleRecord]:
        """Every stored sample of the setting (whole shard or chunks), in problem order
        (`order`: the benchmark's task ids) and sample order."""
        rows = self._generations(key)
        if not rows:
            raise FileNotFoundError(f"generations of setting {key} are missing")
        position = {t: i for i, t in enumerate(order)}
        rows.sort(
            key=lambda r: (
                position.get(r["task_id"], len(position)),
                r["task_id"],
                r["sample_index"],
            )
        )
        return samples_from_rows(rows)

    def executed(self, key: str, setting: SettingSpec, batch: ExecutionBatch) -> dict[str, Any]:
        """Write executions and the score; mark complete with the execution identity of the
        environment they ran in. Returns the score row."""
        exec_rows = execution_rows(key, batch.records)
        fields = execution_fields(key, self.limits, batch.environment)
        self._tell_other_environment(key, fields)
        self._execution[key] = {
            "execution_key": execution_key(key, self.limits, batch.environment),
            "execution_json": canonical_json(fields),
        }
        self.store.write_rows("executions", key, exec_rows)
        gen_rows = self._generations(key)
        benchmark = self.benchmarks.get(setting.benchmark.name)
        summary = benchmark.summarize(exec_rows) if benchmark is not None else None
        score = score_row(key, setting, gen_rows, exec_rows, summary)
        self.store.write_rows("scores", key, [score])
        self._write(key, setting, SettingStatus.COMPLETE)
        self._forget(key)
        self.n_executed += 1
        return score

    def _tell_other_environment(self, key: str, fields: Mapping[str, Any]) -> None:
        """Warn (once per difference) when a worker executed in another environment than the
        one this run planned with (the driver's: a weaker sandbox on a worker, another
        interpreter on a remote node). Its executions are stored as they ran, and the next
        run's plan executes them again: this says why before that run does."""
        if self.planned_environment is None:
            return
        planned = execution_fields(key, self.limits, self.planned_environment)
        changes = execution_changes(planned, fields)
        text = "; ".join(changes)
        if not changes or text in self._other_environments:
            return
        self._other_environments.add(text)
        logger.warning(
            "setting %s executed in another environment than this run planned (%s): stored "
            "as it ran, so the next run executes such settings again",
            key[:12],
            text,
        )

    def repeat_checked(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Record a `repeat-check`: its rows, one per checked setting, as the `repeat_checks`
        shard of this run (the run's record is its commit record)."""
        if not self.store.holds_writer_lock:
            raise NotLockHolder(
                f"recording a repeat-check in store {self.store.uri} needs its writer lock"
            )
        if any(r["run_id"] != self.run_id for r in rows):
            raise ValueError(f"every repeat-check row must carry the run id {self.run_id}")
        self.store.write_rows("repeat_checks", self.run_id, list(rows))

    def failed(
        self,
        key: str,
        setting: SettingSpec,
        error_type: str,
        message: str,
        *,
        generation_attempt: bool = True,
    ) -> None:
        """Record a failure. `generation_attempt` False: the setting never got to generate
        (it could not be placed) or only its execution failed: `attempts` stays."""
        logger.warning("setting %s failed: %s: %s", key[:12], error_type, message)
        if generation_attempt:
            self._attempts[key] = self._known_attempts(key) + 1
        self._write(key, setting, SettingStatus.FAILED, reason=message, error_type=error_type)
