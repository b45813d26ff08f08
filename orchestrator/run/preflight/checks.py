"""Fail early: what would stop a grid, found before Ray starts or a GPU is held.

`preflight(prepared, plan)` checks, for the engines that still have settings to generate,
whether each model's weights can be had (preflight/weights.py) and whether the target cluster
can place each engine (preflight/hardware.py). The report is typed and converts to JSON-native
data (`plan --json`); a problem is blocking when the run would certainly fail.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Any

from orchestrator.errors import ClusterError, ConfigError
from orchestrator.run.config.specs import ClusterSpec
from orchestrator.run.plan.planner import Plan
from orchestrator.run.preflight.address import probe_cluster
from orchestrator.run.preflight.hardware import (
    GpuInventory,
    HardwareCheck,
    Placement,
    engine_label,
    local_gpus,
    place,
)
from orchestrator.run.preflight.weights import WeightsCheck, WeightsStatus, check_all
from orchestrator.run.prepare.prepared import PreparedGrid
from workers.backends.registry import get_backend
from workers.keys import engine_key
from workers.spec import EngineSpec


class Severity(StrEnum):
    BLOCKING = "blocking"  # the run would fail: plan and run exit 2
    WARNING = "warning"  # shown; the run goes ahead


class ProblemKind(StrEnum):
    WEIGHTS = "weights"
    HARDWARE = "hardware"
    CLUSTER = "cluster"
    MEMORY = "memory"  # weights over the GPUs' memory (plan's estimate: estimate/fit.py)


@dataclass(frozen=True)
class ClusterCheck:
    """The TCP probe of `cluster.address` (orchestrator/run/preflight/address.py)."""

    address: str | None  # as configured; None: a private local instance (nothing to probe)
    endpoint: str | None  # what was reached ("127.0.0.1:6379"); None: not probed or failed
    error: str | None  # ClusterError's message when unreachable

    @property
    def reachable(self) -> bool | None:
        """True: answered; False: unreachable; None: not probed (local, or `auto` found
        nothing to probe)."""
        if self.error is not None:
            return False
        return None if self.endpoint is None else True


@dataclass(frozen=True)
class Problem:
    kind: ProblemKind
    severity: Severity
    subject: str  # the model (weights) or the engine (hardware) it concerns
    message: str  # names the repo id and revision, or the GPUs needed and available


@dataclass(frozen=True)
class PreflightReport:
    cluster: ClusterCheck
    gpus: GpuInventory
    weights: tuple[WeightsCheck, ...]  # one per distinct model still to generate
    hardware: tuple[HardwareCheck, ...]  # one per engine still to generate
    problems: tuple[Problem, ...]
    weights_checked: bool = True  # False: `plan --estimate-only` asked no Hub (weights empty)

    @property
    def blocking(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity is Severity.BLOCKING)

    def placement(self, engine: EngineSpec) -> HardwareCheck | None:
        """The hardware check of an engine (by its label), or None if it was not checked."""
        label = engine_label(engine)
        return next((h for h in self.hardware if h.engine == label), None)

    def to_json(self) -> dict[str, Any]:
        """JSON-native data (enums as their values)."""
        data = _json(asdict(self))
        data["cluster"]["reachable"] = self.cluster.reachable
        return data | {"blocking": len(self.blocking)}

    def with_problems(self, found: Sequence[Problem]) -> PreflightReport:
        """The report with `found` added; one of the same kind and subject replaces its own
        (plan's estimate says more about an engine than the hardware check does)."""
        seen = {(p.kind, p.subject) for p in found}
        kept = tuple(p for p in self.problems if (p.kind, p.subject) not in seen)
        return replace(self, problems=kept + tuple(found))

    def summary(self) -> str:
        """One line per blocking problem (what PreflightFailed says)."""
        return "\n".join(f"  {p.kind.value}: {p.message}" for p in self.blocking)


def _json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    if isinstance(value, StrEnum):
        return value.value
    return value


class PreflightFailed(ConfigError):
    """A grid that cannot run here; the message lists every blocking problem (exit 2)."""


def engines_to_check(prepared: PreparedGrid, plan: Plan | None) -> list[EngineSpec]:
    """The engines that will load a model: the plan's units, or (without a plan) every engine
    of a cell that is not skipped; one per engine key, grid order."""
    if plan is not None:
        engines = [unit.engine for unit in plan.units]
    else:
        engines = [c.setting.engine for c in prepared.cells if not c.skipped]
    return list({engine_key(e): e for e in engines}.values())


def weights_problems(checks: Sequence[WeightsCheck], remote: bool) -> list[Problem]:
    """Missing weights block; no network only warns for a remote cluster, whose workers
    download the weights themselves."""
    problems = []
    for check in checks:
        if check.available:
            continue
        severity = Severity.BLOCKING
        if check.status is WeightsStatus.NO_NETWORK and remote:
            severity = Severity.WARNING
        problems.append(Problem(ProblemKind.WEIGHTS, severity, check.model, check.detail))
    return problems


def preflight(
    prepared: PreparedGrid, plan: Plan | None = None, *, weights: bool = True
) -> PreflightReport:
    """Check weights and hardware for what `plan` (or, without one, the whole grid) still has
    to generate. Never starts Ray, never imports torch; at most one Hub timeout
    (`preflight.hub_timeout_s`) for all models together. `weights=False` asks no Hub and
    says so (`weights_checked`): a question about cost only (`plan --estimate-only`)."""
    config = prepared.config
    cluster = check_cluster(config.cluster)
    engines = engines_to_check(prepared, plan)
    gpus = local_gpus(config.cluster)
    hardware = tuple(place(e, gpus, config.cluster) for e in engines)
    problems = [
        Problem(ProblemKind.HARDWARE, Severity.BLOCKING, h.engine, f"{h.engine}: {h.reason}")
        for h in hardware
        if h.placement is Placement.IMPOSSIBLE
    ]
    models = [e.model for e in engines if get_backend(e.backend).loads_weights]
    checked = check_all(models, config.preflight.hub_timeout_s) if weights else ()
    problems += weights_problems(checked, remote=config.cluster.address is not None)
    if cluster.error is not None:
        address = cluster.address or ""
        problems.insert(0, Problem(ProblemKind.CLUSTER, Severity.BLOCKING, address, cluster.error))
    return PreflightReport(cluster, gpus, checked, hardware, tuple(problems), weights)


def check_cluster(spec: ClusterSpec) -> ClusterCheck:
    """Probe `cluster.address` within `cluster.connect_timeout_s`; never raises."""
    try:
        endpoint = probe_cluster(spec)
    except ClusterError as e:
        return ClusterCheck(spec.address, None, str(e))
    return ClusterCheck(spec.address, None if endpoint is None else str(endpoint), None)


def raise_if_blocking(report: PreflightReport, command: str = "run") -> None:
    """PreflightFailed listing every blocking problem; nothing when there is none."""
    if report.blocking:
        raise PreflightFailed(
            f"{command} cannot start ({len(report.blocking)} blocking problem(s)):\n"
            f"{report.summary()}"
        )
