"""A grid ready to plan: the config, the loaded benchmark and every expanded cell.

`prepare(config)` is the one way from a RunConfig to the cells that planning, preflight, the
estimate and the tools read: it loads the benchmark (its data hash is part of every key),
checks `benchmark.problems` against it, hashes the replay files and gathers local model
folders' identities, then expands the grid (prepare/grid.py, pure).
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import ConfigError
from orchestrator.run.config.compose import ENV_DATA_DIR, available
from orchestrator.run.config.specs import BenchmarkConf, RunConfig
from orchestrator.run.prepare.grid import Cell, Environment, backend_files, expand_grid
from orchestrator.run.prepare.modelid import model_identities
from workers.backends.registry import backend_definitions
from workers.benchmarks.base import Benchmark, BenchmarkDataError
from workers.benchmarks.registry import get_benchmark
from workers.keys import canonical_json, execution_fields, execution_key


@dataclass(frozen=True)
class ExecutionIdentity:
    """The execution identity a run would give a setting (workers/keys.py execution_key)."""

    key: str
    fields_json: str  # canonical JSON of execution_fields


@dataclass(frozen=True)
class PreparedGrid:
    """A grid ready to plan: the config, the loaded benchmark and every expanded cell."""

    config: RunConfig
    benchmark: Benchmark
    cells: tuple[Cell, ...]
    environment: Environment

    @property
    def n_problems(self) -> int:
        """Problems each setting covers (the benchmark's, cut by `benchmark.limit`)."""
        return len(self.config.benchmark.select(self.benchmark.problem_ids()))

    def execution_environment(self) -> dict[str, str]:
        """This host's environment for the run's limits (isolation level, interpreter,
        toolchains): what `plan` expects every execution to have run in."""
        return self.benchmark.execution_environment(self.config.limits)

    def execution_identities(self) -> dict[str, ExecutionIdentity]:
        """The execution identity this run gives each runnable cell: the run's sandbox limits
        and this host's environment (`execution_environment`). On a remote cluster the workers
        report their own environment; a different one is recorded as such and the next run
        executes again (a stale outcome is never reused)."""
        limits = self.config.limits
        environment = self.execution_environment()
        return {
            c.key: ExecutionIdentity(
                execution_key(c.key, limits, environment),
                canonical_json(execution_fields(c.key, limits, environment)),
            )
            for cell in self.cells
            for c in (cell, *cell.aliases)
            if not c.skipped
        }


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_benchmark(conf: BenchmarkConf, cache_dir: str | None = None) -> Benchmark:
    """The configured benchmark's problems, through its registry entry."""
    try:
        return get_benchmark(conf.name).load(conf.source_spec(cache_dir))
    except BenchmarkDataError as e:
        hint = (
            f" (set {ENV_DATA_DIR} or paths.data_dir, or benchmark.source=hub)"
            if conf.source == "local" and not conf.data_dir
            else ""
        )
        raise ConfigError(f"{e}{hint}") from e


def prepare(config: RunConfig, loaded: Benchmark | None = None) -> PreparedGrid:
    """Load the benchmark data (its hash is part of every key) and expand the grid. A grid
    needs a model: there is no default one to run by accident. `loaded`: the benchmark when
    the caller has loaded it already (it must be the one `config.benchmark` names)."""
    if not config.models:
        raise ConfigError(
            "no model: pass model=NAME (or model=a,b, or an experiment that sets one). "
            f"Models: {', '.join(available('model'))}"
        )
    benchmark = loaded or load_benchmark(config.benchmark, cache_dir=config.cache_dir)
    config = with_selection(config, benchmark.problem_ids())
    files = backend_files(config)
    missing = [f for f in files if not Path(f).is_file()]
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        raise ConfigError(f"no file {shown} (a file a backend reads, such as replay_path)")
    installed = [d for d in backend_definitions() if d.installed()]
    env = Environment(
        installed=frozenset(d.name for d in installed),
        file_hashes={f: file_sha256(f) for f in files},
        model_identities=model_identities(config.models, config.cache_dir),
        missing={d.name: d.missing_here() for d in installed},
    )
    cells = tuple(expand_grid(config, benchmark.data_sha256, env))
    return PreparedGrid(config, benchmark, cells, env)


def with_selection(config: RunConfig, ids: Sequence[str]) -> RunConfig:
    """`benchmark.problems` checked against the benchmark's task ids (an unknown id is an
    error naming the nearest one) and put in benchmark order, so that the same selection
    typed in another order is the same setting."""
    wanted = config.benchmark.problems
    if wanted is None:
        return config
    known = set(ids)
    for task_id in wanted:
        if task_id not in known:
            close = difflib.get_close_matches(task_id, list(ids), n=1)
            hint = f" Did you mean: {close[0]}?" if close else ""
            raise ConfigError(
                f"Unknown task id {task_id!r} in benchmark.problems.{hint} The "
                f"{config.benchmark.name} data holds {len(ids)} problems: {ids[0]} ... {ids[-1]}"
            )
    chosen = set(wanted)
    ordered = tuple(i for i in ids if i in chosen)
    return dataclasses.replace(
        config, benchmark=dataclasses.replace(config.benchmark, problems=ordered)
    )
