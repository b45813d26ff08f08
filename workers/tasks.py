"""Ray entry points on the worker side: the engine actor and the execution task.

Thin wrappers: the work is in `workers/session.py` and the benchmark adapters. Options
(num_gpus, retries, max_restarts) are set explicitly by `orchestrator/dispatch.py` with
`.options(...)`; the defaults below are only what Ray would otherwise assume.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence

import ray

from workers.session import BenchmarkAdapter, EngineSession
from workers.spec import (
    EngineSpec,
    ExecutionRecord,
    SampleRecord,
    SandboxLimits,
    SettingFailure,
    SettingGenerations,
    SettingSpec,
)


@ray.remote(max_restarts=0, max_task_retries=0)
class EngineWorker:
    """Holds one engine for the life of its unit; killed by the driver when the unit is done,
    so the next engine starts in a fresh process (vLLM does not reliably free memory)."""

    def __init__(self, engine: EngineSpec, benchmarks: Mapping[str, BenchmarkAdapter]):
        logging.basicConfig(level=logging.INFO)
        node_id = ray.get_runtime_context().get_node_id()
        # Nested ObjectRefs are not resolved by Ray: the driver puts each benchmark once.
        resolved = {
            name: ray.get(b) if isinstance(b, ray.ObjectRef) else b
            for name, b in benchmarks.items()
        }
        self.session = EngineSession(engine, resolved, node_id=node_id)

    def run(
        self, items: Sequence[tuple[str, SettingSpec]]
    ) -> list[SettingGenerations | SettingFailure]:
        return self.session.run(items)

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        self.session.close()


@ray.remote(num_cpus=1, max_retries=2)
def execute_samples(
    benchmark: BenchmarkAdapter,
    samples: Sequence[SampleRecord],
    limits: SandboxLimits,
    workers: int | None,
) -> list[ExecutionRecord]:
    """Run a setting's programs in the sandbox on a CPU worker."""
    return benchmark.execute(samples, limits, workers=workers)
