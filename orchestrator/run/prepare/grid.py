"""Grid expansion: a RunConfig and the loaded benchmark -> settings and explicit skips. Pure."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.run.config.specs import RunConfig
from workers.backends.base import BackendDefinition
from workers.backends.registry import backend_definitions, get_backend
from workers.benchmarks.base import BenchmarkDefinition
from workers.benchmarks.registry import get_benchmark
from workers.keys import path_keyed, setting_key
from workers.spec import (
    PRECISIONS,
    BenchmarkSpec,
    Bnb4bitType,
    Dtype,
    EngineSpec,
    LengthSemantics,
    ModelSpec,
    Quant,
    SeedPolicy,
    SettingSpec,
)

GREEDY_MULTI_REASON = (
    "greedy decoding with samples_per_call > 1 (transformers refuses num_return_sequences > 1 "
    "for greedy search; the harness requires --batch_size 1)"
)
AUTO = "auto"  # the `backend` value that picks a registered backend per cell


@dataclass(frozen=True)
class Environment:
    """Facts about where the grid will run that planning needs (gathered at the CLI edge)."""

    # The backends whose library is installed here (backend=auto picks among them).
    installed: frozenset[str] = frozenset()
    # Files the backends' cells read (a replay file) -> their sha256: keyed by content.
    file_hashes: Mapping[str, str] = field(default_factory=dict)
    # repo_id -> what a local folder holds (prepare/modelid.py): the model's identity in the
    # key. A repo_id without an entry is keyed as itself (a Hub id).
    model_identities: Mapping[str, str] = field(default_factory=dict)
    # backend -> the optional features its library as installed here lacks -> why
    # (BackendDefinition.missing_here): a setting that needs one is a skip on that backend.
    missing: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


def backend_files(config: RunConfig) -> list[str]:
    """Every file the grid's cells read (a replay file per model, variant and template), in
    grid order; each is hashed into its cells' keys."""
    base = config.defaults.as_dict()
    files = []
    for model in config.models:
        for assignment in axis_assignments(config):
            values = {**base, **assignment}
            if values["backend"] == AUTO:
                continue
            options = config.backend_options(values["backend"])
            files += get_backend(values["backend"]).files(options, model, values)
    return list(dict.fromkeys(files))


@dataclass(frozen=True)
class Cell:
    """One expanded grid cell: a runnable setting or a skip, with its key either way."""

    key: str
    setting: SettingSpec
    skip_reason: str | None = None
    # The same cell as keyed by an earlier derivation (a local folder by its path): a store
    # written then holds it under that key, which the plan then keeps using.
    aliases: tuple[Cell, ...] = ()
    # backend=auto: the higher-ranked backends it passed over, each with why it could not run
    # the setting (`plan` says where settings went and why).
    passed_over: tuple[tuple[str, str], ...] = ()

    @property
    def skipped(self) -> bool:
        return self.skip_reason is not None

    def stored_as(self, stored: Container[str]) -> Cell:
        """This cell, or the alias the store holds it under when it holds only that."""
        if self.key in stored:
            return self
        return next((a for a in self.aliases if a.key in stored), self)


def axis_assignments(config: RunConfig) -> list[dict[str, Any]]:
    """The cartesian product of the axes, in axis order (the last axis varies fastest)."""
    names = [name for name, _ in config.axes]
    values = [vals for _, vals in config.axes]
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]


def _engine(
    backend: str, model: ModelSpec, values: Mapping[str, Any], config: RunConfig, env: Environment
) -> EngineSpec:
    """The cell's engine on `backend`, its options bound to the cell."""
    if values.get("precision"):
        dtype, quant = PRECISIONS[values["precision"]]
    else:
        dtype, quant = Dtype(values["dtype"]), Quant(values["quant"])
    definition = get_backend(backend)
    options = definition.bind(config.backend_options(backend), model, values, env.file_hashes)
    bnb = Bnb4bitType(values["bnb_4bit_quant_type"])
    return EngineSpec(model, backend, dtype, quant, bnb, options=options)


def _auto(
    setting: SettingSpec,
    model: ModelSpec,
    values: Mapping[str, Any],
    config: RunConfig,
    env: Environment,
) -> tuple[SettingSpec, tuple[tuple[str, str], ...]]:
    """backend=auto: the installed backend of highest rank that can run the setting, its
    engine as the definition's `auto_engine` makes it for the setting; when none can, the
    lowest-ranked one (its skip row then says why). With the backends passed over and why."""
    ranked = _ranked()
    passed: list[tuple[str, str]] = []
    for definition in ranked:
        engine = _engine(definition.name, model, values, config, env)
        candidate = dataclasses.replace(setting, engine=engine)
        candidate = dataclasses.replace(candidate, engine=definition.auto_engine(engine, candidate))
        if definition.name not in env.installed:
            passed.append((definition.name, "not installed here"))
            continue
        reason = backend_skip_reason(candidate, env)
        if reason is None:
            return candidate, tuple(passed)
        passed.append((definition.name, reason))
    fallback = _engine(ranked[-1].name, model, values, config, env)
    return dataclasses.replace(setting, engine=fallback), ()


def _ranked() -> list[BackendDefinition]:
    """The backends backend=auto may choose, highest rank first."""
    eligible = [d for d in backend_definitions() if d.auto_rank is not None]
    return sorted(eligible, key=lambda d: d.auto_rank or 0, reverse=True)


def make_cell(
    model: ModelSpec,
    values: Mapping[str, Any],
    config: RunConfig,
    data_sha256: str,
    env: Environment,
) -> Cell:
    """Build one setting from top-level values overridden by one axis assignment."""
    benchmark = get_benchmark(config.benchmark.name)
    identity = env.model_identities.get(model.repo_id)
    if identity is not None:
        model = dataclasses.replace(model, identity=identity)
    requested = str(values["backend"])
    backend = _ranked()[0].name if requested == AUTO else requested
    setting = SettingSpec(
        engine=_engine(backend, model, values, config, env),
        benchmark=BenchmarkSpec(
            name=config.benchmark.name,
            variant=str(values["variant"]),
            data_sha256=data_sha256,
            limit=config.benchmark.limit,
            problems=config.benchmark.problems,
        ),
        template=benchmark.resolve_template(values["template"], model),
        decoding=config.decoding_map()[values["decoding"]],
        max_length=int(values["max_length"]),
        length_semantics=LengthSemantics(values["length_semantics"]),
        n_samples=int(values["n_samples"]),
        samples_per_call=int(values["samples_per_call"]),
        seed=int(values["seed"]),
        seed_policy=SeedPolicy(values["seed_policy"]),
    )
    passed: tuple[tuple[str, str], ...] = ()
    if requested == AUTO:
        setting, passed = _auto(setting, model, values, config, env)
    skip = skip_reason(setting, benchmark, env)
    legacy = path_keyed(setting)
    aliases = (Cell(setting_key(legacy), legacy, skip),) if legacy is not None else ()
    return Cell(setting_key(setting), setting, skip, aliases, passed)


def skip_reason(
    setting: SettingSpec, benchmark: BenchmarkDefinition, env: Environment | None = None
) -> str | None:
    """Why a setting cannot run, known before anything is loaded (None: it can run): the
    benchmark's own rules first, then the harness's, then the backend's (its definition, and
    what its library as installed here lacks)."""
    reason = benchmark.skip_reason(setting)
    if reason is not None:
        return reason
    if not setting.decoding.do_sample and setting.samples_per_call > 1:
        return GREEDY_MULTI_REASON
    return backend_skip_reason(setting, env or Environment())


def backend_skip_reason(setting: SettingSpec, env: Environment) -> str | None:
    """The backend's skip rule for the setting, then a feature it needs that its library as
    installed here lacks."""
    definition = get_backend(setting.engine.backend)
    reason = definition.skip_reason(setting)
    if reason is not None:
        return reason
    missing = env.missing.get(definition.name, {})
    for feature in definition.needs(setting):
        if feature in missing:
            return f"{definition.name} here cannot run it: {missing[feature]}"
    return None


def placement_notes(cells: Sequence[Cell]) -> list[dict[str, Any]]:
    """Where backend=auto placed settings that a higher-ranked backend could not run, and
    why: one entry per (backend and its options, backend passed over, reason), in grid order,
    with the count of settings."""
    counts: dict[tuple[str, str, str], int] = {}
    for cell in cells:
        if cell.skipped:
            continue
        engine = cell.setting.engine
        batch = get_backend(engine.backend).prompts_per_call(engine)
        placed = engine.backend + (f" (generation.batch_size={batch})" if batch > 1 else "")
        for name, reason in cell.passed_over:
            key = (placed, name, reason)
            counts[key] = counts.get(key, 0) + 1
    return [
        {"placed_on": p, "instead_of": n, "reason": r, "n_settings": c}
        for (p, n, r), c in counts.items()
    ]


def expand_grid(config: RunConfig, data_sha256: str, env: Environment) -> list[Cell]:
    """Every cell of the grid for every model, in a stable order; duplicates (two axis values
    that resolve to the same setting, e.g. `own` = `instruct`) appear once."""
    base = config.defaults.as_dict()
    cells: dict[str, Cell] = {}
    for model in config.models:
        for assignment in axis_assignments(config):
            cell = make_cell(model, {**base, **assignment}, config, data_sha256, env)
            cells.setdefault(cell.key, cell)
    return list(cells.values())
