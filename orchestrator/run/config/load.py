"""Hydra config -> typed, frozen specs (config/specs.py), in one pass that runs one way:

    overrides (parse, check groups and keys) -> compose (Hydra, once) -> plain data ->
    options (every numeric, boolean and choice option checked) -> setting values (axes,
    defaults, decodings) -> models -> RunConfig

Overrides use Hydra's syntax. A comma list (`template=own,instruct`, `grid.precision=bf16,fp16`)
is a sweep: it becomes a grid axis instead of a value. `model=a,b` sweeps models. No stage calls
back into an earlier one, and nothing past this module sees a `DictConfig`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from omegaconf import OmegaConf

from orchestrator.errors import ConfigError
from orchestrator.run.config.compose import (
    ENV_CUDA_VISIBLE,
    ENV_RAY_ADDRESS,
    ENV_RAY_TMPDIR,
    available,
    compose_config,
    environment,
)
from orchestrator.run.config.options import choice_error, parse_choice, read_options
from orchestrator.run.config.overrides import (
    ParsedOverrides,
    check_group_options,
    check_keys,
    parse_overrides,
)
from orchestrator.run.config.specs import (
    BenchmarkConf,
    CellDefaults,
    ChunkPolicy,
    ClusterSpec,
    EstimateSpec,
    PreflightSpec,
    RunConfig,
)
from orchestrator.run.config.values import CellValues, read_cells
from workers.backends.base import BackendOptionError
from workers.backends.registry import backend_definitions
from workers.execspec import IsolationLevel, SandboxLimits
from workers.spec import BackendOptions, ModelSpec, Tuning


def load_run_config(overrides: Sequence[str]) -> RunConfig:
    """Parse overrides (sweeps become axes), check them, compose, validate, and freeze.
    Raises ConfigError, naming the bad key or value, before anything is loaded."""
    parsed = parse_overrides(overrides)
    check_group_options(parsed, available)
    check_keys(parsed, compose_config(parsed.groups))
    cfg = _plain(OmegaConf.to_container(compose_config(parsed.plain), resolve=True))
    options = read_options(cfg)
    cells = read_cells(cfg, parsed.sweeps)
    models = _models(parsed, cfg, cells)
    return _run_config(cfg, options, cells, models, tuple(overrides))


def _plain(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"the composed config must be a mapping, got {type(value).__name__}")
    return {str(k): v for k, v in value.items()}


def _run_config(
    cfg: Mapping[str, Any],
    options: Mapping[str, Any],
    cells: CellValues,
    models: tuple[ModelSpec, ...],
    overrides: tuple[str, ...],
) -> RunConfig:
    """The frozen RunConfig from values already checked; nothing here validates again."""
    o = options
    return RunConfig(
        store=str(cfg["store"]),
        models=models,
        benchmark=_benchmark_conf(cfg, o["benchmark.limit"]),
        defaults=CellDefaults(cells.defaults),
        axes=cells.axes,
        decodings=cells.decodings,
        backends=_backends(cfg, o),
        limits=SandboxLimits(
            timeout_s=o["execution.timeout_s"],
            memory_mb=o["execution.memory_mb"],
            max_processes=o["execution.max_processes"],
            disk_mb=o["execution.disk_mb"],
            require=_isolation(cfg["execution"]["require"]),
        ),
        exec_workers=o["execution.workers"],
        cluster=_cluster_spec(cfg, o),
        cache_dir=str(cfg["paths"]["cache_dir"]),
        overrides=overrides,
        checkpoint=ChunkPolicy(**_block(o, "checkpoint")),
        progress_every_s=o["progress.every_s"],
        compact_after_run=o["compaction.after_run"],
        store_lock_lease_s=o["store_lock.lease_s"],
        estimate=EstimateSpec(**_block(o, "estimate")),
        preflight=PreflightSpec(**_block(o, "preflight")),
    )


def _block(options: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """The checked options under `prefix.` as keyword arguments of its spec."""
    start = prefix + "."
    return {k.removeprefix(start): v for k, v in options.items() if k.startswith(start)}


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


def _models(
    parsed: ParsedOverrides, cfg: Mapping[str, Any], cells: CellValues
) -> tuple[ModelSpec, ...]:
    """The models of the grid: `model=a,b`, the grid's `model` axis, or the selected model
    config; none at all is allowed here (`run` and `plan` refuse it: no silent default)."""
    names = parsed.sweeps.get("model") or cells.grid_models
    if names:
        known = available("model")
        for name in names:
            if name not in known:
                raise choice_error("model", name, known)
        composed = [compose_config([*parsed.plain, f"model={n}"]).model for n in names]
        return tuple(model_spec(_plain(OmegaConf.to_container(m, resolve=True))) for m in composed)
    node = cfg.get("model")
    return () if node is None else (model_spec(node),)


def _isolation(value: Any) -> IsolationLevel | None:
    return None if value is None else parse_choice(IsolationLevel, "execution.require", value)


def _benchmark_conf(cfg: Mapping[str, Any], limit: int | None) -> BenchmarkConf:
    bench = cfg["benchmark"]
    return BenchmarkConf(
        name=str(bench["name"]),
        variant=str(bench["variant"]),
        source=str(bench["source"]),
        hub_revision=str(bench["hub_revision"]),
        limit=limit,
        data_dir=cfg["paths"]["data_dir"],
        problems=_problems(bench.get("problems")),
    )


def _backends(
    cfg: Mapping[str, Any], options: Mapping[str, Any]
) -> tuple[tuple[str, BackendOptions], ...]:
    """Each registered backend's typed options, from its block's checked values."""
    out = []
    for definition in backend_definitions():
        block = definition.config_block
        values = _block(options, block) if block and block in cfg else {}
        try:
            out.append((definition.name, definition.options(values, cfg)))
        except BackendOptionError as e:
            raise ConfigError(str(e)) from None
    return tuple(out)


def _problems(value: Any) -> tuple[str, ...] | None:
    """`benchmark.problems`: task ids as a list or one comma-separated string; null = all.
    Whether each id exists is checked when the benchmark is loaded (`select_problems`)."""
    if value is None:
        return None
    items = list(value) if isinstance(value, list | tuple) else str(value).split(",")
    ids = [str(i).strip() for i in items]
    if not ids or any(not i for i in ids):
        raise ConfigError(f"benchmark.problems={value!r}: expected task ids like Python/0,Python/7")
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ConfigError(f"benchmark.problems names {', '.join(repeated)} more than once")
    return tuple(ids)


def _cluster_spec(cfg: Mapping[str, Any], options: Mapping[str, Any]) -> ClusterSpec:
    env = environment()
    block = _block(options, "cluster")
    return ClusterSpec(
        address=cfg["cluster"]["address"] or env[ENV_RAY_ADDRESS],
        exec_resource=_optional_name(cfg["cluster"]["exec_resource"], "cluster.exec_resource"),
        env_address=env[ENV_RAY_ADDRESS],
        ray_temp_dir=env[ENV_RAY_TMPDIR],
        visible_gpus=env[ENV_CUDA_VISIBLE],
        **block,
    )


def _optional_name(value: Any, key: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{key} must be a Ray resource name or null, got {value!r}")
    return value
