"""Loading a benchmark's data at the CLI edge: the adapter the workers get, and its hash."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.config import ENV_DATA_DIR, BenchmarkConf, ConfigError
from workers.benchmarks.humanevalfix.adapter import HumanEvalFix
from workers.benchmarks.humanevalfix.data import DatasetError, load_hub, load_jsonl

HUMANEVALPACK_FILE = "humanevalpack-python.jsonl"


@dataclass(frozen=True)
class LoadedBenchmark:
    adapter: Any  # a workers BenchmarkAdapter (picklable, shipped to workers once)
    sha256: str
    source: str
    n_problems: int


def _data_dir(conf: BenchmarkConf) -> Path:
    if not conf.data_dir:
        raise ConfigError(
            f"no data folder: set {ENV_DATA_DIR} or paths.data_dir (or benchmark.source=hub)"
        )
    return Path(conf.data_dir)


def load_benchmark(conf: BenchmarkConf, cache_dir: str | None = None) -> LoadedBenchmark:
    if conf.name == "humanevalfix":
        try:
            if conf.source == "hub":
                problems = load_hub(conf.hub_revision, cache_dir=cache_dir)
            elif conf.source == "local":
                problems = load_jsonl(_data_dir(conf) / HUMANEVALPACK_FILE)
            else:
                problems = load_jsonl(conf.source)
        except DatasetError as e:
            raise ConfigError(str(e)) from e
        n = (
            len(problems.problems)
            if conf.limit is None
            else min(conf.limit, len(problems.problems))
        )
        return LoadedBenchmark(HumanEvalFix(problems), problems.sha256, problems.source, n)
    if conf.name == "infibench":
        from orchestrator.infibench_loader import load_infibench

        return load_infibench(conf)
    raise ConfigError(f"Unknown benchmark {conf.name!r}. Valid: humanevalfix, infibench")
