"""Ray entry points on the worker side: the engine actor and the execution task.

Thin wrappers: the work is in `workers/session.py` and the benchmark adapters. Options
(num_gpus, retries, max_restarts) are set explicitly by the driver's dispatcher with
`.options(...)`; the defaults below are only what Ray would otherwise assume.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import ray

from workers.backends.base import backend_at
from workers.benchmarks.base import Benchmark
from workers.execspec import ExecutionBatch, SandboxLimits
from workers.session import EngineSession, SessionProgress
from workers.spec import ChunkRequest, EngineSpec, SampleRecord, SettingFailure, SettingGenerations


@ray.remote(max_restarts=0, max_task_retries=0, concurrency_groups={"progress": 1})
class EngineWorker:
    """Holds one engine for the life of its unit; killed by the driver when the unit is done,
    so the next engine starts in a fresh process (vLLM does not reliably free memory).

    The constructor takes the engine spec and its backend's class path, no object refs: on a
    restart Ray re-runs `__init__` with the same arguments but does not keep object refs among
    them alive (ray#53727), so the benchmark refs travel with every `run` call and the engine
    loads on the first one.

    `progress` runs in its own concurrency group (its own thread), so the driver can ask what
    the engine is doing while a chunk generates."""

    def __init__(self, engine: EngineSpec, backend_path: str, batched: bool):
        logging.basicConfig(level=logging.INFO)
        self.engine = engine
        # "module:Class" of the engine's backend and its definition's `batched`, resolved by
        # the driver's registry (a backend registered only on the driver runs here too)
        self.backend_path = backend_path
        self.batched = batched
        self.session: EngineSession | None = None
        self.load_error: Exception | None = None
        self.progress_state = SessionProgress()

    def _session(self, benchmarks: Mapping[str, Benchmark]) -> EngineSession:
        # A load that failed fails every later call of the unit the same way, without
        # loading again (a model that does not fit would otherwise be tried per setting).
        if self.load_error is not None:
            raise self.load_error
        if self.session is None:
            # Nested ObjectRefs are not resolved by Ray: the driver puts each benchmark once.
            resolved = {
                name: ray.get(b) if isinstance(b, ray.ObjectRef) else b
                for name, b in benchmarks.items()
            }
            node_id = ray.get_runtime_context().get_node_id()
            try:
                backend = backend_at(self.backend_path, self.engine.backend)
                self.session = EngineSession(
                    self.engine,
                    resolved,
                    node_id=node_id,
                    backend=backend,
                    progress=self.progress_state,
                    batched=self.batched,
                )
            except Exception as e:
                self.load_error = e
                raise
        return self.session

    def run(
        self,
        chunks: Sequence[ChunkRequest],
        benchmarks: Mapping[str, Benchmark],
    ) -> list[SettingGenerations | SettingFailure]:
        return self._session(benchmarks).run(chunks)

    @ray.method(concurrency_group="progress")
    def progress(self) -> dict[str, Any]:
        """What the engine is doing now (phase, the chunk's samples done, tokens so far)."""
        return self.progress_state.snapshot()

    def close(self) -> None:
        if self.session is not None:
            self.session.close()


@ray.remote(num_cpus=1, max_retries=2)
def execute_samples(
    benchmark: Benchmark,
    samples: Sequence[SampleRecord],
    limits: SandboxLimits,
    workers: int | None,
) -> ExecutionBatch:
    """Run a setting's programs in the sandbox on a CPU worker; with the environment of this
    host they ran in (part of the execution identity)."""
    records = benchmark.execute(samples, limits, workers=workers)
    return ExecutionBatch(tuple(records), benchmark.execution_environment(limits))
