"""Grid expansion: a RunConfig and the loaded benchmark -> settings and explicit skips. Pure."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Container, Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.run.config.specs import RunConfig
from workers.benchmarks.base import BenchmarkDefinition
from workers.benchmarks.registry import get_benchmark
from workers.keys import path_keyed, setting_key
from workers.spec import (
    PRECISIONS,
    BackendName,
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

VLLM_INT8_REASON = (
    "vLLM quantizes with bitsandbytes only to 4-bit in flight; 8-bit needs a pre-quantized "
    "checkpoint (use backend=hf, or backend=auto to route 8-bit to transformers)"
)
VLLM_FP4_REASON = (
    "vLLM's in-flight bitsandbytes 4-bit is nf4 with double quantization; the harness's fp4 "
    "runs on transformers only (use backend=hf, or backend=auto to route it there)"
)
VLLM_HARNESS_SEED_REASON = (
    "vLLM has no global sampling stream: sampled settings need seed_policy=per_sample"
)
GREEDY_MULTI_REASON = (
    "greedy decoding with samples_per_call > 1 (transformers refuses num_return_sequences > 1 "
    "for greedy search; the harness requires --batch_size 1)"
)
REPLAY_REASON = "backend=replay needs replay_path (a JSONL of raw continuations)"


@dataclass(frozen=True)
class Environment:
    """Facts about where the grid will run that planning needs (gathered at the CLI edge)."""

    vllm_installed: bool = False
    replay_files: Mapping[str, str] = field(default_factory=dict)  # replay file -> its sha256
    # repo_id -> what a local folder holds (prepare/modelid.py): the model's identity in the
    # key. A repo_id without an entry is keyed as itself (a Hub id).
    model_identities: Mapping[str, str] = field(default_factory=dict)


def replay_file(pattern: str, model: ModelSpec, values: Mapping[str, Any]) -> str:
    """The replay file of one cell: `replay_path` with its placeholders filled."""
    return pattern.format(model=model.name, variant=values["variant"], template=values["template"])


def replay_files(config: RunConfig) -> list[str]:
    """Every replay file the grid names, in grid order (one, unless `replay_path` is a
    pattern)."""
    if config.replay_path is None:
        return []
    base = config.defaults.as_dict()
    files = [
        replay_file(config.replay_path, model, {**base, **assignment})
        for model in config.models
        for assignment in axis_assignments(config)
    ]
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


def _resolve_backend(
    requested: str,
    quant: Quant,
    do_sample: bool,
    policy: SeedPolicy,
    env: Environment,
    bnb: Bnb4bitType = Bnb4bitType.FP4,
) -> BackendName:
    if requested != "auto":
        return BackendName(requested)
    vllm_ok = env.vllm_installed and quant is not Quant.INT8
    if quant is Quant.INT4 and bnb is Bnb4bitType.FP4:
        vllm_ok = False
    if vllm_ok and do_sample and policy is SeedPolicy.HARNESS:
        vllm_ok = False
    return BackendName.VLLM if vllm_ok else BackendName.HF


def make_cell(
    model: ModelSpec,
    values: Mapping[str, Any],
    config: RunConfig,
    data_sha256: str,
    env: Environment,
) -> Cell:
    """Build one setting from top-level values overridden by one axis assignment."""
    decodings = config.decoding_map()
    decoding = decodings[values["decoding"]]
    if values.get("precision"):
        dtype, quant = PRECISIONS[values["precision"]]
    else:
        dtype, quant = Dtype(values["dtype"]), Quant(values["quant"])
    policy = SeedPolicy(values["seed_policy"])
    bnb = Bnb4bitType(values["bnb_4bit_quant_type"])
    backend = _resolve_backend(values["backend"], quant, decoding.do_sample, policy, env, bnb)
    benchmark = get_benchmark(config.benchmark.name)
    identity = env.model_identities.get(model.repo_id)
    if identity is not None:
        model = dataclasses.replace(model, identity=identity)
    template = benchmark.resolve_template(values["template"], model)
    replay = None
    if backend is BackendName.REPLAY and config.replay_path is not None:
        replay = replay_file(config.replay_path, model, values)
    engine = EngineSpec(
        model=model,
        backend=backend,
        dtype=dtype,
        quant=quant,
        bnb_4bit_quant_type=bnb,
        hf=config.hf,
        vllm=config.vllm,
        replay_path=replay,
        replay_sha256=env.replay_files.get(replay) if replay is not None else None,
    )
    setting = SettingSpec(
        engine=engine,
        benchmark=BenchmarkSpec(
            name=config.benchmark.name,
            variant=str(values["variant"]),
            data_sha256=data_sha256,
            limit=config.benchmark.limit,
            problems=config.benchmark.problems,
        ),
        template=template,
        decoding=decoding,
        max_length=int(values["max_length"]),
        length_semantics=LengthSemantics(values["length_semantics"]),
        n_samples=int(values["n_samples"]),
        samples_per_call=int(values["samples_per_call"]),
        seed=int(values["seed"]),
        seed_policy=policy,
    )
    skip = skip_reason(setting, benchmark)
    legacy = path_keyed(setting)
    aliases = (Cell(setting_key(legacy), legacy, skip),) if legacy is not None else ()
    return Cell(setting_key(setting), setting, skip, aliases)


def skip_reason(setting: SettingSpec, benchmark: BenchmarkDefinition) -> str | None:
    """Why a setting cannot run, known before anything is loaded (None: it can run): the
    benchmark's own rules first, then the backends'."""
    engine = setting.engine
    reason = benchmark.skip_reason(setting)
    if reason is not None:
        return reason
    if not setting.decoding.do_sample and setting.samples_per_call > 1:
        return GREEDY_MULTI_REASON
    if engine.backend is BackendName.VLLM:
        if engine.quant is Quant.INT8:
            return VLLM_INT8_REASON
        if engine.quant is Quant.INT4 and engine.bnb_4bit_quant_type is Bnb4bitType.FP4:
            return VLLM_FP4_REASON
        if setting.decoding.do_sample and setting.seed_policy is SeedPolicy.HARNESS:
            return VLLM_HARNESS_SEED_REASON
    if engine.backend is BackendName.REPLAY and not engine.replay_path:
        return REPLAY_REASON
    return None


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
