"""The driver's writer: turns dispatch events into store shards, in a crash-safe order.

Order per setting: generations shard -> (execution) executions shard -> scores shard -> the
settings row marked complete. The settings row is the commit record; anything written before it
is either reused on resume (generations) or rewritten (executions, scores).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from orchestrator.run.rows import (
    SettingFacts,
    execution_rows,
    generation_rows,
    provenance_of,
    samples_from_rows,
    score_row,
    setting_row,
)
from storage.schema import SettingStatus
from storage.store import Store
from workers.benchmarks.base import Benchmark
from workers.benchmarks.registry import get_benchmark
from workers.keys import canonical_json, execution_fields, execution_key
from workers.spec import (
    ExecutionBatch,
    SampleRecord,
    SandboxLimits,
    SettingGenerations,
    SettingSpec,
)

logger = logging.getLogger(__name__)

# Provenance an execution-only resume keeps from the row an earlier run wrote.
PROVENANCE_FIELDS = (
    "hostname", "node_id", "device", "backend_version", "effective_dtype", "tokenizer_sha256",
    "chat_template_sha256", "engine_options_json", "library_versions_json", "generation_s",
    "generation_started_at", "generation_finished_at", "engine_load_s", "n_generated_tokens",
)  # fmt: skip


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
    ):
        self.store = store
        self.limits = limits  # the run's sandbox limits (part of each execution identity)
        # Loaded benchmarks by name: the facts of every settings row (problems, template kind)
        # and `summarize`, which may replace the pass@1 headline.
        self.benchmarks = dict(benchmarks)
        self.run_id = run_id
        self.library_versions = library_versions
        self.clock = clock
        self._attempts: dict[str, int] = {}
        self._provenance: dict[str, dict[str, Any]] = {}
        self._execution: dict[str, dict[str, Any]] = {}  # execution identity, once executed
        self.n_generated = 0
        self.n_executed = 0

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
            key, setting, status,
            now=self.clock(), run_id=self.run_id, facts=self._facts(setting), reason=reason,
            error_type=error_type, attempts=self._attempts.get(key, 0),
            provenance={**self._provenance.get(key, {}), **self._execution.get(key, {})},
        )  # fmt: skip
        self.store.write_rows("settings", key, [row])

    def _facts(self, setting: SettingSpec) -> SettingFacts | None:
        """Run-time facts of a setting: its problems (of the benchmark's) and template kind."""
        benchmark = self.benchmarks.get(setting.benchmark.name)
        if benchmark is None:
            return None
        ids = benchmark.problem_ids()
        kind = get_benchmark(setting.benchmark.name).template_kind(
            setting.template, setting.engine.model
        )
        return SettingFacts(kind, len(ids[: setting.benchmark.limit]), len(ids))

    def skipped(self, key: str, setting: SettingSpec, reason: str) -> None:
        self._write(key, setting, SettingStatus.SKIPPED, reason=reason)

    def _known_attempts(self, key: str) -> int:
        if key not in self._attempts:
            self._attempts[key] = int((self._previous(key) or {}).get("attempts") or 0)
        return self._attempts[key]

    def started(self, key: str, setting: SettingSpec) -> None:
        """The setting is submitted (to generate, or only to execute its stored generations).
        Not an attempt yet: `attempts` counts generation attempts that came back."""
        previous = self._previous(key)
        self._attempts[key] = int((previous or {}).get("attempts") or 0)
        if previous:  # keep what an earlier run learnt (execution-only resumes need it)
            kept = {c: previous.get(c) for c in PROVENANCE_FIELDS if previous.get(c) is not None}
            self._provenance.setdefault(key, kept)
        self._write(key, setting, SettingStatus.RUNNING)

    def generated(self, key: str, setting: SettingSpec, result: SettingGenerations) -> None:
        self.store.write_rows("generations", key, generation_rows(key, result.samples))
        self._attempts[key] = self._known_attempts(key) + 1
        self._provenance[key] = provenance_of(result, self.library_versions)
        self._write(key, setting, SettingStatus.RUNNING)
        self.n_generated += 1

    def stored_samples(self, key: str) -> list[SampleRecord]:
        table = self.store.read_shard("generations", key)
        if table is None:
            raise FileNotFoundError(f"generations of setting {key} are missing")
        return samples_from_rows(table.to_pylist())

    def executed(self, key: str, setting: SettingSpec, batch: ExecutionBatch) -> dict[str, Any]:
        """Write executions and the score; mark complete with the execution identity of the
        environment they ran in. Returns the score row."""
        exec_rows = execution_rows(key, batch.records)
        fields = execution_fields(key, self.limits, batch.environment)
        self._execution[key] = {
            "execution_key": execution_key(key, self.limits, batch.environment),
            "execution_json": canonical_json(fields),
        }
        self.store.write_rows("executions", key, exec_rows)
        generations = self.store.read_shard("generations", key)
        gen_rows = generations.to_pylist() if generations is not None else []
        benchmark = self.benchmarks.get(setting.benchmark.name)
        summary = benchmark.summarize(exec_rows) if benchmark is not None else None
        score = score_row(key, setting, gen_rows, exec_rows, summary)
        self.store.write_rows("scores", key, [score])
        self._write(key, setting, SettingStatus.COMPLETE)
        self.n_executed += 1
        return score

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
