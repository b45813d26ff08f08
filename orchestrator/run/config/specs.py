"""The typed, frozen result of loading a config: what every other part of the driver reads.

Nothing here parses or validates; orchestrator/run/config/load.py builds these once, at the
CLI edge, from values already checked (config/options.py, config/values.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from workers.benchmarks.base import BenchmarkSource
from workers.execspec import SandboxLimits
from workers.spec import BackendOptions, DecodingSpec, ModelSpec, select_problems


@dataclass(frozen=True)
class BenchmarkConf:
    name: str  # a registry name (workers/benchmarks/registry.py)
    variant: str
    source: str  # "local" | "hub" | a path
    hub_revision: str
    limit: int | None  # first N problems only (None: all)
    data_dir: str | None
    problems: tuple[str, ...] | None = None  # task ids (None: all); checked against the data

    def select(self, ids: Sequence[str]) -> tuple[str, ...]:
        """The task ids each setting covers (`workers.spec.select_problems`)."""
        return select_problems(ids, self.problems, self.limit)

    def source_spec(self, cache_dir: str | None) -> BenchmarkSource:
        """What the benchmark's loader needs (the workers' view of this config)."""
        return BenchmarkSource(
            self.name, self.variant, self.source, self.hub_revision, self.data_dir, cache_dir
        )


@dataclass(frozen=True)
class ClusterSpec:
    address: str | None  # None: a private local Ray instance
    num_cpus: int | None
    num_gpus: int | None
    engine_cpus: float
    exec_cpus: float
    max_retries: int
    exec_max_retries: int
    setting_timeout_s: float | None
    cpu_if_no_gpus: bool
    max_pending_exec: int
    replicas: int = 1  # engine replicas per unit (sharing the model's GPUs)
    exec_resource: str | None = None  # the Ray resource executions hold (None: exec_cpus CPUs)
    connect_timeout_s: float = 10.0  # an address that does not answer is an error after this
    env_address: str | None = None  # RAY_ADDRESS, which Ray prefers over `auto`
    ray_temp_dir: str | None = None  # RAY_TMPDIR (None: <system temp>/ray, Ray's default)
    visible_gpus: str | None = None  # CUDA_VISIBLE_DEVICES (None: unset)
    gpus: int | None = None  # the cluster `plan` sizes the estimate for (None: the target's)


@dataclass(frozen=True)
class ChunkPolicy:
    """How a setting's generation is cut into committed chunks (execute/chunks.py)."""

    every_s: float = 60.0  # target seconds of generation per chunk (time-sized backends)
    every_samples: int | None = None  # fixed samples per chunk, every backend (None: by time)
    first_samples: int = 4  # a unit's first chunk, before its throughput is measured
    batched_samples: int = 256  # samples per setting in a batched backend's chunk


@dataclass(frozen=True)
class EstimateSpec:
    """The cost model's inputs that are the user's to set; the defaults are config.yaml's."""

    gpu: str = "auto"  # "auto" (the local GPU, else cost.REFERENCE_GPU) or a key of cost.GPUS
    bandwidth_gbps: float | None = None  # that GPU's memory bandwidth, GB/s; None: the table's
    output_tokens: int = 200  # prior: output tokens per sample, capped by the length limit
    chars_per_token: float = 3.5  # prompt tokens from characters when no tokenizer is at hand
    # An engine on CPU, one thread (measured on this project's 2-core machine, docs/cost.md).
    cpu_bandwidth_gbps: float = 20.0
    cpu_gflops: float = 90.0


@dataclass(frozen=True)
class PreflightSpec:
    """Checks made before Ray starts or a GPU is held; the defaults are config.yaml's."""

    hub_timeout_s: float = 10.0  # per Hub request of the weights check


@dataclass(frozen=True)
class CellDefaults:
    """The top-level setting values; grid axes override them cell by cell (raw, validated)."""

    values: tuple[tuple[str, Any], ...]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.values)


@dataclass(frozen=True)
class RunConfig:
    store: str
    models: tuple[ModelSpec, ...]
    benchmark: BenchmarkConf
    defaults: CellDefaults
    axes: tuple[tuple[str, tuple[Any, ...]], ...]  # ordered: the grid's product order
    decodings: tuple[tuple[str, DecodingSpec], ...]
    # Every registered backend's typed options, from its config block (its definition's
    # `options`), in registry order; a cell's engine gets its backend's, bound to the cell.
    backends: tuple[tuple[str, BackendOptions], ...]
    limits: SandboxLimits
    exec_workers: int | None
    cluster: ClusterSpec
    cache_dir: str
    overrides: tuple[str, ...] = field(default=())
    checkpoint: ChunkPolicy = field(default_factory=ChunkPolicy)
    progress_every_s: float = 30.0  # off a terminal: a progress line per engine this often
    # A run that ends packs a table's finished shards once it has this many loose ones (None:
    # never). Packing pays per file read at thousands of settings; a few dozen read fast loose.
    compact_after_run: int | None = 200
    # An object store's writer lock is a lease renewed every third of this (storage/lock.py); a
    # driver killed outright holds the store for up to this long before the next run takes it.
    store_lock_lease_s: float = 60.0
    estimate: EstimateSpec = field(default_factory=EstimateSpec)
    preflight: PreflightSpec = field(default_factory=PreflightSpec)

    def decoding_map(self) -> dict[str, DecodingSpec]:
        return dict(self.decodings)

    def backend_options(self, name: str) -> BackendOptions:
        """The configured options of the backend registered as `name`."""
        return dict(self.backends)[name]

    def with_backend_options(self, name: str, options: BackendOptions) -> RunConfig:
        """This config with `name`'s options replaced (an import names its file this way)."""
        backends = tuple((n, options if n == name else o) for n, o in self.backends)
        return dataclasses.replace(self, backends=backends)
