"""The plan as data (`plan --json`): every setting with its key, action and sample counts,
grouped by engine, and a run-time and GPU-hour estimate per engine: measured throughput where
the store has it for that engine, else the cost model (orchestrator/analysis/cost.py, derived
with its sources in docs/cost.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Any

from orchestrator.analysis.cost import (
    GPUS,
    REFERENCE_GPU,
    CostParams,
    DeviceSpec,
    EngineCost,
    EngineKind,
    EngineWork,
    SettingWork,
    estimate_engine,
    gpu_kind,
    throughput,
)
from orchestrator.analysis.schedule import Schedule
from orchestrator.run.config.specs import EstimateSpec
from orchestrator.run.estimate.fit import fit_json, fit_problems, units_of
from orchestrator.run.estimate.prompttokens import TokenCounter, token_counter
from orchestrator.run.estimate.sizing import (
    UnitSizing,
    cluster_json,
    cluster_schedule,
    cluster_target,
    engine_json,
    replica_warning,
    size_unit,
)
from orchestrator.run.plan.planner import Action, EngineUnit, Plan, PlannedSetting
from orchestrator.run.plan.samples import stored_sample_counts
from orchestrator.run.preflight.checks import PreflightReport, Severity
from orchestrator.run.preflight.hardware import (
    GpuInventory,
    HardwareCheck,
    Placement,
    local_gpus,
    place,
)
from orchestrator.run.prepare.grid import placement_notes
from orchestrator.run.prepare.prepared import PreparedGrid
from storage.store import Store
from workers.backends.registry import get_backend
from workers.keys import engine_key
from workers.spec import SettingSpec, precision_label


class Basis(StrEnum):
    MEASURED = "measured"  # the store's throughput for this engine (model, backend, precision)
    MODEL = "model"  # the cost model: nothing measured yet


def measured_throughput(store: Store) -> dict[EngineKind, dict[str, float]]:
    """Samples/s and engine load time per (model repo id, backend, dtype, quant, device class),
    from completed settings."""
    settings = store.read_table("settings").to_pylist()
    scores = {r["setting_key"]: r for r in store.read_table("scores").to_pylist()}
    return throughput(settings, scores)


@dataclass(frozen=True)
class Devices:
    """Where the model estimates: the GPU (named, configured or assumed) and this CPU."""

    gpu: DeviceSpec
    gpu_source: str  # how the GPU was chosen
    cpu: DeviceSpec
    gpu_named: bool = True  # by estimate.gpu or nvidia-smi; False: assumed (estimate/fit.py)


def resolve_devices(spec: EstimateSpec, gpus: GpuInventory) -> Devices:
    """`estimate.gpu`, or (auto) the first GPU nvidia-smi names that the table knows, else the
    reference GPU (an assumption, said so); `estimate.bandwidth_gbps` overrides its bandwidth."""
    assumed = False
    if spec.gpu != "auto":
        gpu, source = GPUS[spec.gpu], f"estimate.gpu={spec.gpu}"
    else:
        known = [(n, gpu_kind(n)) for n in gpus.names]
        named = next(((n, k) for n, k in known if k is not None), None)
        if named is not None:
            gpu, source = GPUS[named[1]], f"detected: {named[0]}"
        else:
            why = f"{gpus.names[0]} is not in the table" if gpus.names else "no GPU named here"
            gpu, assumed = GPUS[REFERENCE_GPU], True
            source = f"assumed ({why}; set estimate.gpu or estimate.bandwidth_gbps)"
    if spec.bandwidth_gbps is not None:
        gpu = DeviceSpec(gpu.name, spec.bandwidth_gbps, gpu.tflops_16, gpu.tflops_32, gpu.memory_gb)
        source += f", estimate.bandwidth_gbps={spec.bandwidth_gbps:g}"
    teraflops = spec.cpu_gflops / 1000.0
    cpu = DeviceSpec("cpu", spec.cpu_bandwidth_gbps, teraflops, teraflops, None, is_gpu=False)
    return Devices(gpu, source, cpu, not assumed)


def _plain_chat(messages: Sequence[Mapping[str, str]]) -> str:
    """Stand-in for a tokenizer's chat template: the messages' text (its few special tokens
    are not counted)."""
    return "\n".join(m["content"] for m in messages)


def setting_work(
    prepared: PreparedGrid, item: PlannedSetting, counter: TokenCounter
) -> SettingWork:
    """The prompts the setting sends (rendered by its benchmark) as token counts, one per call."""
    s: SettingSpec = item.setting
    try:
        requests = prepared.benchmark.requests(s, item.key, chat=_plain_chat)
    except ValueError:  # a template the estimate cannot render: prompts count as empty
        requests = []
    counts = counter.count_all([r.prompt for r in requests])
    prompts: list[int] = []
    for request, n in zip(requests, counts, strict=True):
        prompts += [n] * math.ceil(request.n_samples / request.samples_per_call)
    return SettingWork(tuple(prompts), s.samples_per_call, s.max_length, s.length_semantics)


@dataclass(frozen=True)
class EngineEstimate:
    basis: Basis
    device: str  # where it runs here: a cost.GPUS key or "cpu"
    estimated_s: float
    gpu_hours: float  # GPU-hours it holds on the GPU (also when it runs on CPU here)
    model: EngineCost  # the cost model's view on that device (also when measured)
    fits_gpu: bool | None  # its weights fit the GPU's memory x num_gpus (None: model-free)
    # One replica on the GPU (measured there, else the model): (load_s, load + generation)
    on_gpu: tuple[float, float] = (0.0, 0.0)
    cluster: UnitSizing | None = None  # on the cluster's GPU with its replicas


def unit_samples(unit: EngineUnit, n_problems: int) -> int:
    """Samples the unit generates (problems x n_samples over its settings)."""
    return sum(
        i.setting.n_samples * i.setting.benchmark.n_selected(n_problems) for i in unit.settings
    )


def estimate_unit(
    unit: EngineUnit,
    work: EngineWork,
    check: HardwareCheck,
    rates: Mapping[EngineKind, Mapping[str, float]],
    devices: Devices,
    n_problems: int,
    params: CostParams,
) -> EngineEstimate:
    """Measured where the store has this engine on this kind of device, else the model. The
    GPU-hours are on the GPU even when the engine runs on CPU here (what to book)."""
    e = unit.engine
    on_cpu = check.placement is Placement.CPU
    run_device = devices.cpu if on_cpu else devices.gpu
    kind = (e.model.repo_id, e.backend, e.dtype.value, e.quant.value)

    def measured(device_class: str) -> tuple[float, float] | None:
        rate = rates.get((*kind, device_class))
        if rate is None:
            return None
        samples = unit_samples(unit, n_problems)
        return rate["load_s"], rate["load_s"] + samples / rate["samples_per_s"]

    model_here = estimate_engine(work, run_device, params)
    model_gpu = estimate_engine(work, devices.gpu, params) if on_cpu else model_here
    here = measured("cpu" if on_cpu else "gpu")
    on_gpu = measured("gpu") or (model_gpu.load_s, model_gpu.total_s)
    return EngineEstimate(
        basis=Basis.MODEL if here is None else Basis.MEASURED,
        device=run_device.name,
        estimated_s=model_here.total_s if here is None else here[1],
        gpu_hours=on_gpu[1] * check.gpus_needed / 3600,
        model=model_here,
        fits_gpu=model_gpu.fits,
        on_gpu=on_gpu,
    )


def cost_params(spec: EstimateSpec) -> CostParams:
    return CostParams(output_tokens=spec.output_tokens)


def _setting_row(
    item: PlannedSetting, n_problems: int, generated: int, replicas: int = 1
) -> dict[str, Any]:
    s = item.setting
    e = s.engine
    note = (
        "one sequential random stream: one chunk at a time, on any replica"
        if replicas > 1 and s.sequential_stream
        else None
    )
    return {
        "setting_key": item.key,
        "action": item.action.value,
        "reason": item.reason,
        "template": s.template,
        "decoding": s.decoding.name,
        "max_length": s.max_length,
        "precision": precision_label(e.dtype, e.quant),
        "variant": s.benchmark.variant,
        "n_samples": s.n_samples,
        "seed": s.seed,
        "seed_policy": s.seed_policy.value,
        "generated_samples": generated,
        "total_samples": s.n_samples * s.benchmark.n_selected(n_problems),
        "note": note,
    }


def _engine_row(item: PlannedSetting, check: HardwareCheck | None) -> dict[str, Any]:
    e = item.setting.engine
    return {
        "engine_key": engine_key(e),
        "model": e.model.name,
        "backend": e.backend,
        "dtype": e.dtype.value,
        "quant": e.quant.value,
        "num_gpus": e.model.num_gpus,
        "backend_options": asdict(e.options),
        "placement": check.placement.value if check else None,
        "placement_reason": check.reason if check else None,
        "settings": [],
        "estimated_s": None,
        "estimated_gpu_hours": None,
        "basis": None,
        "device": None,
        "model_estimate": None,
    }


def _placements(
    plan: Plan, prepared: PreparedGrid, report: PreflightReport | None, gpus: GpuInventory
) -> dict[str, HardwareCheck]:
    cluster = prepared.config.cluster
    out = {}
    for unit in plan.units:
        check = report.placement(unit.engine) if report is not None else None
        out[unit.engine_key] = check or place(unit.engine, gpus, cluster)
    return out


def _estimate_units(
    plan: Plan,
    prepared: PreparedGrid,
    store: Store,
    placements: Mapping[str, HardwareCheck],
    devices: Devices,
) -> dict[str, EngineEstimate]:
    config = prepared.config
    params = cost_params(config.estimate)
    rates = measured_throughput(store)
    counters: dict[str, TokenCounter] = {}
    out = {}
    for unit in plan.units:
        model = unit.engine.model
        counter = counters.get(model.repo_id)
        if counter is None:
            counter = counters[model.repo_id] = token_counter(
                model, config.estimate.chars_per_token
            )
        definition = get_backend(unit.engine.backend)
        work = EngineWork(
            model.size_b,
            unit.engine.dtype,
            unit.engine.quant,
            definition.batched,
            definition.model_free,
            model.num_gpus,
            tuple(setting_work(prepared, i, counter) for i in unit.settings),
            definition.prompts_per_call(unit.engine),
        )
        estimate = estimate_unit(
            unit, work, placements[unit.engine_key], rates, devices, prepared.n_problems, params
        )
        sizing = size_unit(unit, work, estimate.on_gpu, devices.gpu, params, config.cluster)
        out[unit.engine_key] = replace(estimate, cluster=sizing)
    return out


def _overall_basis(estimates: Sequence[EngineEstimate]) -> str | None:
    kinds = {e.basis for e in estimates}
    if not kinds:
        return None
    return next(iter(kinds)).value if len(kinds) == 1 else "mixed"


def _apply_estimates(
    engines: dict[str, dict[str, Any]],
    estimates: Mapping[str, EngineEstimate],
    devices: Devices,
    schedule: Schedule | None,
) -> list[str]:
    """Each engine's estimate and its place on the cluster into its row; the warnings."""
    placed = {p.key: p for p in schedule.placed} if schedule else {}
    warnings = []
    for index, (ekey, est) in enumerate(estimates.items()):
        row = engines[ekey]
        row.update(
            unit_index=index,  # its place in the order the dispatcher starts units
            estimated_s=est.estimated_s,
            estimated_gpu_hours=est.gpu_hours,
            basis=est.basis.value,
            device=est.device,
            model_estimate=asdict(est.model),
            start_s=placed[ekey].start_s if ekey in placed else None,
            end_s=placed[ekey].end_s if ekey in placed else None,
            # engine instances the schedule runs it on, and the GPU-hours they hold
            instances=placed[ekey].instances if ekey in placed else None,
            cluster_gpu_hours=placed[ekey].gpu_seconds / 3600 if ekey in placed else None,
        )
        label = f"{row['model']} {row['dtype']}/{row['quant']}"
        if est.cluster is not None:
            row.update(engine_json(est.cluster))
            warning = replica_warning(label, est.cluster, devices.gpu)
            warnings += [warning] if warning else []
    return warnings


def _engine_rows(
    plan: Plan, prepared: PreparedGrid, store: Store, placements: Mapping[str, HardwareCheck]
) -> dict[str, dict[str, Any]]:
    """Each engine's row with its settings' rows, by engine key, in plan order."""
    generated = stored_sample_counts(store, {i.key for i in plan.settings})
    engines: dict[str, dict[str, Any]] = {}
    for item in plan.settings:
        ekey = engine_key(item.setting.engine)
        group = engines.setdefault(ekey, _engine_row(item, placements.get(ekey)))
        one_gpu = item.setting.engine.model.num_gpus == 1
        replicas = prepared.config.cluster.replicas if one_gpu else 1
        group["replicas"] = replicas
        group["settings"].append(
            _setting_row(item, prepared.n_problems, generated.get(item.key, 0), replicas)
        )
    return engines


def plan_json(
    plan: Plan, prepared: PreparedGrid, store: Store, report: PreflightReport | None = None
) -> dict[str, Any]:
    """The plan with its estimate and (when given) the preflight report, with what cannot
    run on the cluster the plan is sized for among its blocking problems; JSON-native."""
    n_problems = prepared.n_problems
    config = prepared.config
    gpus = report.gpus if report is not None else local_gpus(config.cluster)
    devices = resolve_devices(config.estimate, gpus)
    placements = _placements(plan, prepared, report, gpus)
    engines = _engine_rows(plan, prepared, store, placements)
    estimates = _estimate_units(plan, prepared, store, placements, devices)
    sizes = {k: e.cluster for k, e in estimates.items() if e.cluster is not None}
    target = cluster_target(config.cluster, gpus)
    schedule = cluster_schedule(sizes, target)
    found = fit_problems(
        units_of(plan.units, sizes), devices.gpu, devices.gpu_source, devices.gpu_named, target
    )
    warnings = _apply_estimates(engines, estimates, devices, schedule)
    warnings += [p.message for p in found if p.severity is Severity.WARNING]
    if report is not None:
        report = report.with_problems([p for p in found if p.severity is Severity.BLOCKING])
    values = list(estimates.values())
    return {
        "store": config.store,
        "problems": list(config.benchmark.problems) if config.benchmark.problems else None,
        "limit": config.benchmark.limit,
        "n_settings": len(plan.settings),
        "n_keys": len({i.key for i in plan.settings}),
        "counts": {a.value: len(plan.by_action(a)) for a in Action},
        "engine_loads": plan.n_engine_loads,
        "generations": plan.n_generations(n_problems),
        "n_problems": n_problems,
        "estimated_s": sum(e.estimated_s for e in values),
        # what the cluster's schedule holds where it is sized, else every unit on one instance
        "estimated_gpu_hours": (
            schedule.gpu_hours if schedule else sum(s.gpu_hours for s in sizes.values())
        ),
        "estimate_basis": _overall_basis(values),
        "estimate": {
            "gpu": devices.gpu.name,
            "gpu_source": devices.gpu_source,
            "gpu_bandwidth_gbps": devices.gpu.bandwidth_gbps,
            "cpu_bandwidth_gbps": devices.cpu.bandwidth_gbps,
            "output_tokens_prior": config.estimate.output_tokens,
        },
        "cluster": cluster_json(
            sizes, target, schedule, devices.gpu, cost_params(config.estimate), config.cluster
        ),
        "fit_problems": fit_json(found),
        "warnings": warnings,
        # backend=auto: where settings a higher-ranked backend cannot run went, and why
        "placement": placement_notes(prepared.cells),
        "preflight": report.to_json() if report is not None else None,
        "engines": list(engines.values()),
    }
