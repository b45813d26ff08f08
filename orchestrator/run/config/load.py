"""Hydra config -> typed, frozen specs. The only place that reads environment variables and the
only place that sees a `DictConfig`.

Overrides use Hydra's syntax. A comma list (`template=own,instruct`, `grid.precision=bf16,fp16`)
is a sweep: it becomes a grid axis instead of a value. `model=a,b` sweeps models.
"""

from __future__ import annotations

import os
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from orchestrator.errors import ConfigError
from orchestrator.run.config.values import (
    CELL_FIELDS,
    benchmark_definition,
    decoding_spec,
    validate_cell_value,
)
from orchestrator.run.execute.chunks import ChunkPolicy
from orchestrator.run.config.costspec import EstimateSpec, PreflightSpec, estimate_spec, preflight_spec
from orchestrator.run.config.options import (
    choice_error,
    option,
    parse_choice,
)
from orchestrator.run.config.overrides import (
    GRID_AXES,
    check_group_options,
    check_keys,
    parse_overrides,
)
from workers.benchmarks.base import BenchmarkSource
from workers.spec import (
    DecodingSpec,
    HfOptions,
    IsolationLevel,
    ModelSpec,
    SandboxLimits,
    Tuning,
    VllmOptions,
    select_problems,
)

ENV_DATA_DIR = "REPROGRID_DATA_DIR"
ENV_CACHE_DIR = "REPROGRID_CACHE_DIR"
ENV_SWEEPS_DIR = "REPROGRID_SWEEPS_DIR"
ENV_RAY_ADDRESS = "RAY_ADDRESS"
ENV_RAY_TMPDIR = "RAY_TMPDIR"  # Ray's session files (where `auto` finds a cluster's address)
ENV_CUDA_VISIBLE = "CUDA_VISIBLE_DEVICES"  # the GPUs a local Ray instance counts

HF_DEVICES = ("auto", "cpu", "cuda")


# ---------------------------------------------------------------------------------------------
# The typed result


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
    hf: HfOptions
    vllm: VllmOptions
    limits: SandboxLimits
    exec_workers: int | None
    cluster: ClusterSpec
    replay_path: str | None
    cache_dir: str
    overrides: tuple[str, ...] = field(default=())
    checkpoint: ChunkPolicy = field(default_factory=ChunkPolicy)
    progress_every_s: float = 30.0  # off a terminal: a progress line per engine this often
    estimate: EstimateSpec = field(default_factory=EstimateSpec)
    preflight: PreflightSpec = field(default_factory=PreflightSpec)

    def decoding_map(self) -> dict[str, DecodingSpec]:
        return dict(self.decodings)


# ---------------------------------------------------------------------------------------------
# Locating and composing


def sweeps_dir() -> Path:
    configured = os.environ.get(ENV_SWEEPS_DIR)
    if configured:
        return Path(configured).resolve()
    # sweeps/ sits next to the orchestrator package (editable install or source checkout).
    here = Path(__file__).resolve().parents[3] / "sweeps"
    if (here / "config.yaml").is_file():
        return here
    import importlib.util

    spec = importlib.util.find_spec("sweeps")
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    raise ConfigError(f"sweeps/ config folder not found; set {ENV_SWEEPS_DIR}")


def default_cache_dir() -> str:
    return os.environ.get(ENV_CACHE_DIR) or str(Path.home() / ".cache" / "reprogrid")


def compose_config(overrides: Sequence[str]) -> DictConfig:
    GlobalHydra.instance().clear()
    cache = default_cache_dir()
    data = os.environ.get(ENV_DATA_DIR)
    env_overrides = [f"paths.cache_dir={cache}"]
    if data:
        env_overrides.append(f"paths.data_dir={data}")
    try:
        with initialize_config_dir(config_dir=str(sweeps_dir()), version_base="1.3"):
            return compose("config", overrides=env_overrides + list(overrides))
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError(str(e).strip()) from e


def available(group: str) -> list[str]:
    return sorted(p.stem for p in (sweeps_dir() / group).glob("*.yaml"))


# ---------------------------------------------------------------------------------------------
# DictConfig -> specs


def model_spec(node: Mapping[str, Any]) -> ModelSpec:
    try:
        return ModelSpec(
            name=str(node["name"]),
            repo_id=str(node["repo_id"]),
            revision=str(node["revision"]),
            family=str(node["family"]),
            size_b=float(node["size_b"]),
            tuning=parse_choice(Tuning, "tuning", node["tuning"]),
            own_template=str(node["own_template"]),
            num_gpus=int(node.get("num_gpus", 1)),
            trust_remote_code=bool(node.get("trust_remote_code", False)),
            builder=node.get("builder"),
        )
    except KeyError as e:
        raise ConfigError(f"model config {node.get('name', '?')!r} lacks field {e}") from e


def load_run_config(overrides: Sequence[str]) -> RunConfig:
    """Parse overrides (sweeps become axes), check them, compose, validate, and freeze.
    Raises ConfigError, naming the bad key or value, before anything is loaded."""
    parsed = parse_overrides(overrides)
    check_group_options(parsed, available)
    check_keys(parsed, compose_config(parsed.groups))
    sweeps = dict(parsed.sweeps)
    model_names = sweeps.pop("model", None)
    plain = parsed.plain
    cfg = compose_config(plain)
    definition = benchmark_definition(str(cfg.benchmark.name))
    presets = _mapping(OmegaConf.to_container(cfg.decodings, resolve=True), "decodings")
    grid_models, axes_raw = _grid_axes(cfg, sweeps)
    axes = tuple(
        (name, tuple(validate_cell_value(name, v, presets, definition) for v in values))
        for name, values in axes_raw.items()
    )
    defaults = {
        name: validate_cell_value(name, cfg[name], presets, definition) for name in CELL_FIELDS
    }
    defaults["variant"] = validate_cell_value("variant", cfg.benchmark.variant, presets, definition)
    decodings = {str(v) for name, vs in axes if name == "decoding" for v in vs}
    decodings.add(defaults["decoding"])
    return RunConfig(
        store=str(cfg.store),
        models=_models(cfg, plain, model_names or grid_models),
        benchmark=_benchmark_conf(cfg),
        defaults=CellDefaults(tuple(sorted(defaults.items()))),
        axes=axes,
        decodings=tuple(sorted((d, decoding_spec(d, presets)) for d in decodings)),
        hf=HfOptions(device=_choice(cfg, "hf.device", HF_DEVICES)),
        vllm=_vllm_options(cfg),
        limits=SandboxLimits(
            timeout_s=option(cfg, "execution.timeout_s"),
            memory_mb=option(cfg, "execution.memory_mb"),
            max_processes=option(cfg, "execution.max_processes"),
            disk_mb=option(cfg, "execution.disk_mb"),
            require=_isolation(cfg.execution.require),
        ),
        exec_workers=option(cfg, "execution.workers"),
        cluster=_cluster_spec(cfg),
        replay_path=_replay_pattern(cfg.replay_path),
        cache_dir=str(cfg.paths.cache_dir),
        overrides=tuple(overrides),
        checkpoint=ChunkPolicy(
            every_s=option(cfg, "checkpoint.every_s"),
            every_samples=option(cfg, "checkpoint.every_samples"),
            first_samples=option(cfg, "checkpoint.first_samples"),
            batched_samples=option(cfg, "checkpoint.batched_samples"),
        ),
        progress_every_s=option(cfg, "progress.every_s"),
        estimate=estimate_spec(_mapping(OmegaConf.to_container(cfg.estimate), "estimate")),
        preflight=preflight_spec(_mapping(OmegaConf.to_container(cfg.preflight), "preflight")),
    )


def _mapping(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{what} must be a mapping, got {type(value).__name__}")
    return {str(k): v for k, v in value.items()}


def _grid_axes(cfg: DictConfig, sweeps: dict[str, list[str]]):
    """(models named by the grid config, {axis: raw values}); command-line sweeps override or
    add axes."""
    grid = OmegaConf.to_container(cfg.grid, resolve=True) or {}
    if not isinstance(grid, dict):
        raise ConfigError("a grid config must be a mapping of axis -> list of values")
    grid_models = grid.pop("model", None)
    axes_raw: dict[str, list[Any]] = {}
    for name, values in grid.items():
        if name not in GRID_AXES:
            raise choice_error("grid axis", name, GRID_AXES)
        axes_raw[str(name)] = list(values) if isinstance(values, list) else [values]
    axes_raw.update(sweeps)
    return ([str(m) for m in grid_models] if grid_models else None), axes_raw


def _models(cfg: DictConfig, plain: Sequence[str], names: Sequence[str] | None):
    """The models of the grid: `model=a,b`, the grid's `model` axis, or the selected model
    config; none at all is allowed here (`run` and `plan` refuse it: no silent default)."""
    if names:
        known = available("model")
        for name in names:
            if name not in known:
                raise choice_error("model", name, known)
        return tuple(model_spec(compose_config([*plain, f"model={n}"]).model) for n in names)
    if "model" not in cfg or cfg.model is None:
        return ()
    return (model_spec(cfg.model),)


def _isolation(value: Any) -> IsolationLevel | None:
    return None if value is None else parse_choice(IsolationLevel, "execution.require", value)


def _choice(cfg: DictConfig, key: str, choices: Sequence[str]) -> str:
    value = OmegaConf.select(cfg, key)
    if str(value) not in choices:
        raise choice_error(key, value, choices)
    return str(value)


def _benchmark_conf(cfg: DictConfig) -> BenchmarkConf:
    bench = cfg.benchmark
    return BenchmarkConf(
        name=str(bench.name),
        variant=str(bench.variant),
        source=str(bench.source),
        hub_revision=str(bench.hub_revision),
        limit=option(cfg, "benchmark.limit"),
        data_dir=cfg.paths.data_dir,
        problems=_problems(OmegaConf.select(cfg, "benchmark.problems")),
    )


# What a `replay_path` pattern may name: one file per model, variant and template of a sweep.
REPLAY_FIELDS = ("model", "variant", "template")


def _replay_pattern(value: Any) -> str | None:
    """`replay_path`: a file, or a pattern naming `{model}`, `{variant}` and `{template}` (the
    axis values of each cell); any other placeholder is an error."""
    if value is None:
        return None
    text = str(value)
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as e:
        raise ConfigError(f"replay_path {text!r}: {e} (write {{{{ and }}}} for braces)") from e
    for name in fields:
        if name not in REPLAY_FIELDS:
            raise choice_error("replay_path placeholder", name, REPLAY_FIELDS)
    return text


def _problems(value: Any) -> tuple[str, ...] | None:
    """`benchmark.problems`: task ids as a list or one comma-separated string; null = all.
    Whether each id exists is checked when the benchmark is loaded (`select_problems`)."""
    if value is None:
        return None
    items = list(value) if isinstance(value, ListConfig | list | tuple) else str(value).split(",")
    ids = [str(i).strip() for i in items]
    if not ids or any(not i for i in ids):
        raise ConfigError(f"benchmark.problems={value!r}: expected task ids like Python/0,Python/7")
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ConfigError(f"benchmark.problems names {', '.join(repeated)} more than once")
    return tuple(ids)


def _vllm_options(cfg: DictConfig) -> VllmOptions:
    return VllmOptions(
        max_model_len=option(cfg, "vllm.max_model_len"),
        gpu_memory_utilization=option(cfg, "vllm.gpu_memory_utilization"),
        cpu_kv_cache_gib=option(cfg, "vllm.cpu_kv_cache_gib"),
        tensor_parallel_size=option(cfg, "vllm.tensor_parallel_size"),
        enforce_eager=option(cfg, "vllm.enforce_eager"),
        batch_invariant=option(cfg, "vllm.batch_invariant"),
    )


def _cluster_spec(cfg: DictConfig) -> ClusterSpec:
    return ClusterSpec(
        address=cfg.cluster.address or os.environ.get(ENV_RAY_ADDRESS) or None,
        num_cpus=option(cfg, "cluster.num_cpus"),
        num_gpus=option(cfg, "cluster.num_gpus"),
        engine_cpus=option(cfg, "cluster.engine_cpus"),
        exec_cpus=option(cfg, "cluster.exec_cpus"),
        max_retries=option(cfg, "cluster.max_retries"),
        exec_max_retries=option(cfg, "cluster.exec_max_retries"),
        setting_timeout_s=option(cfg, "cluster.setting_timeout_s"),
        cpu_if_no_gpus=option(cfg, "cluster.cpu_if_no_gpus"),
        max_pending_exec=option(cfg, "cluster.max_pending_exec"),
        replicas=option(cfg, "cluster.replicas"),
        exec_resource=_optional_name(cfg.cluster.exec_resource, "cluster.exec_resource"),
        connect_timeout_s=option(cfg, "cluster.connect_timeout_s"),
        env_address=os.environ.get(ENV_RAY_ADDRESS) or None,
        ray_temp_dir=os.environ.get(ENV_RAY_TMPDIR) or None,
        visible_gpus=os.environ.get(ENV_CUDA_VISIBLE),
    )


def _optional_name(value: Any, key: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{key} must be a Ray resource name or null, got {value!r}")
    return value
