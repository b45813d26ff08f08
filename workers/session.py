"""An engine session: one engine loaded once, serving the settings of its unit.

No Ray here: `workers/tasks.py` wraps a session in a Ray actor, and tests drive it directly.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Sequence

from workers.backends.base import Backend, make_backend
from workers.benchmarks.base import Benchmark
from workers.spec import (
    EngineSpec,
    SeedPolicy,
    SettingFailure,
    SettingGenerations,
    SettingSpec,
    WorkerInfo,
)

logger = logging.getLogger(__name__)


def worker_info(node_id: str = "") -> WorkerInfo:
    return WorkerInfo(hostname=socket.gethostname(), node_id=node_id, pid=os.getpid())


class EngineSession:
    def __init__(
        self,
        engine: EngineSpec,
        benchmarks: dict[str, Benchmark],
        node_id: str = "",
        backend: Backend | None = None,
    ):
        started = time.perf_counter()
        self.engine = engine
        self.benchmarks = benchmarks
        self.backend = backend if backend is not None else make_backend(engine.backend)
        self.info = self.backend.load(engine)
        self.load_s = time.perf_counter() - started
        self.worker = worker_info(node_id)
        logger.info(
            "engine %s/%s/%s/%s loaded in %.1fs on %s",
            engine.model.name, engine.backend, engine.dtype, engine.quant, self.load_s,
            self.info.device,
        )  # fmt: skip

    def _chat(self, setting: SettingSpec):
        return self.backend.render_chat if setting.template == "chat" else None

    def run(
        self, items: Sequence[tuple[str, SettingSpec]]
    ) -> list[SettingGenerations | SettingFailure]:
        """Generate each (key, setting). A setting that raises becomes a SettingFailure and the
        others go on; only the death of the process stops the unit (and Ray retries it)."""
        if getattr(self.backend, "multi_setting", False) and len(items) > 1:
            return self._run_batched(items)
        return [self._run_one(key, setting) for key, setting in items]

    def _run_one(self, key: str, setting: SettingSpec) -> SettingGenerations | SettingFailure:
        started, wall_start = time.perf_counter(), time.time()
        try:
            bench = self.benchmarks[setting.benchmark.name]
            requests = bench.requests(setting, key, self._chat(setting))
            seed = setting.seed if setting.seed_policy is SeedPolicy.HARNESS else None
            generations = self.backend.generate(requests, global_seed=seed)
            samples = bench.samples(setting, requests, generations, self.backend.eos_token)
        except Exception as e:  # noqa: BLE001 - one failing setting must not stop its unit
            logger.warning("setting %s failed: %s: %s", key[:12], type(e).__name__, e)
            return SettingFailure(key, type(e).__name__, str(e)[:2000])
        return SettingGenerations(
            setting_key=key,
            samples=samples,
            engine_info=self.info,
            worker=self.worker,
            generation_s=time.perf_counter() - started,
            engine_load_s=self.load_s,
            started_at=wall_start,
            finished_at=time.time(),
        )

    def _run_batched(self, items: Sequence[tuple[str, SettingSpec]]):
        """All settings' requests in one backend call (vLLM: each request has its own sampling
        parameters and seed, so batching does not change what a request produces)."""
        started, wall_start = time.perf_counter(), time.time()
        prepared = []
        results: dict[str, SettingGenerations | SettingFailure] = {}
        for key, setting in items:
            try:
                bench = self.benchmarks[setting.benchmark.name]
                prepared.append(
                    (key, setting, bench, bench.requests(setting, key, self._chat(setting)))
                )
            except Exception as e:  # noqa: BLE001 - as in _run_one
                results[key] = SettingFailure(key, type(e).__name__, str(e)[:2000])
        flat = [r for *_, reqs in prepared for r in reqs]
        try:
            generations = self.backend.generate(flat) if flat else []
        except Exception as e:  # noqa: BLE001 - the whole batch failed: every setting in it
            for key, *_ in prepared:
                results[key] = SettingFailure(key, type(e).__name__, str(e)[:2000])
            return [results[key] for key, _ in items]
        elapsed = time.perf_counter() - started
        cursor = 0
        for key, setting, bench, reqs in prepared:
            n = sum(r.n_samples for r in reqs)
            mine = generations[cursor : cursor + n]
            cursor += n
            try:
                samples = bench.samples(setting, reqs, mine, self.backend.eos_token)
            except Exception as e:  # noqa: BLE001 - as in _run_one
                results[key] = SettingFailure(key, type(e).__name__, str(e)[:2000])
                continue
            share = elapsed * n / max(1, len(generations))
            results[key] = SettingGenerations(
                key, samples, self.info, self.worker, share, self.load_s, wall_start, time.time()
            )
        return [results[key] for key, _ in items]

    def close(self) -> None:
        self.backend.close()
