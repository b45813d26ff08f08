"""The plan: grid cells minus what the store already holds, grouped by engine. Pure."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from orchestrator.analysis.cost import CostParams, bytes_per_weight, quant_factor
from orchestrator.run.prepare.grid import Cell
from orchestrator.run.prepare.prepared import ExecutionIdentity
from storage.index import SettingState
from storage.schema import SettingStatus
from workers.backends.registry import get_backend
from workers.keys import engine_key, execution_changes
from workers.spec import EngineSpec, SettingSpec

COST = CostParams()  # the cost model's published constants (the ordering needs no config)


class Action(StrEnum):
    DONE = "done"  # complete in the store: never recomputed
    GENERATE = "generate"  # generate, then execute
    EXECUTE = "execute"  # generations stored, execution/score missing: execute only
    SKIP = "skip"  # cannot run (reason)
    FAILED = "failed"  # failed before; re-run with --retry-failed


# Failures of the machinery, not of the setting: a worker process or node that died, an object
# lost with it. A plain re-run retries these; a setting that raised, timed out or cannot be
# placed needs --retry-failed (it would most likely fail the same way again).
INFRASTRUCTURE_ERRORS = frozenset(
    {
        "ActorDiedError",
        "RayActorError",
        "ActorUnavailableError",
        "WorkerCrashedError",
        "NodeDiedError",
        "OwnerDiedError",
        "ObjectLostError",
        "ObjectReconstructionFailedError",
        "LocalRayletDiedError",
        "RaySystemError",
    }
)


def execution_change(stored_json: str | None, expected: ExecutionIdentity | None) -> str:
    """Why stored executions are not reused: which fields changed (the reason in `plan`)."""
    if stored_json is None or expected is None:
        return "executions predate execution identities: executed again"
    changed = execution_changes(json.loads(stored_json), json.loads(expected.fields_json))
    return "execution identity changed (" + ("; ".join(changed) or "version") + "): executed again"


@dataclass(frozen=True)
class PlannedSetting:
    key: str
    setting: SettingSpec
    action: Action
    reason: str | None = None


@dataclass(frozen=True)
class EngineUnit:
    """Settings that share one engine load; one Ray actor serves them in order."""

    engine_key: str
    engine: EngineSpec
    settings: tuple[PlannedSetting, ...]


@dataclass(frozen=True)
class Plan:
    settings: tuple[PlannedSetting, ...]  # every cell, grid order
    units: tuple[EngineUnit, ...]  # GENERATE settings grouped by engine

    def by_action(self, action: Action) -> list[PlannedSetting]:
        return [s for s in self.settings if s.action is action]

    @property
    def n_engine_loads(self) -> int:
        return len(self.units)

    def n_generations(self, n_problems: int) -> int:
        """Samples to generate (problems x n_samples over the GENERATE settings)."""
        return sum(
            s.setting.n_samples * s.setting.benchmark.n_selected(n_problems)
            for s in self.by_action(Action.GENERATE)
        )


def plan_settings(
    cells: Sequence[Cell],
    index: Mapping[str, SettingState],
    retry_failed: bool = False,
    execution: Mapping[str, ExecutionIdentity] | None = None,
) -> Plan:
    """What to do with each cell. `execution`: the execution identity this run would give each
    setting; a complete setting whose stored executions have another one (or none: an older
    store) is executed again from its stored generations. None: not checked (tests of the
    rest of the plan). A cell the store holds only under an alias (its key before local
    folders were keyed by content) is planned under that key and spec: its stored results are
    done or resumed as they are, never generated again."""
    planned = []
    for cell in cells:
        cell = cell.stored_as(index)  # a store written before content keys: its own key
        state = index.get(cell.key)
        expected = execution.get(cell.key) if execution is not None else None
        if cell.skipped:
            planned.append(PlannedSetting(cell.key, cell.setting, Action.SKIP, cell.skip_reason))
        elif (
            state is not None
            and state.complete
            and execution is not None
            and (expected is None or state.execution_key != expected.key)
        ):
            why = execution_change(state.execution_json, expected)
            planned.append(PlannedSetting(cell.key, cell.setting, Action.EXECUTE, why))
        elif state is not None and state.complete:
            planned.append(PlannedSetting(cell.key, cell.setting, Action.DONE))
        elif (
            state is not None
            and state.status is SettingStatus.FAILED
            and not retry_failed
            and state.error_type not in INFRASTRUCTURE_ERRORS
        ):
            planned.append(PlannedSetting(cell.key, cell.setting, Action.FAILED, state.reason))
        elif state is not None and state.has_generations:
            planned.append(
                PlannedSetting(cell.key, cell.setting, Action.EXECUTE, damage_reason(state))
            )
        else:
            reason = damage_reason(state) if state is not None else None
            planned.append(PlannedSetting(cell.key, cell.setting, Action.GENERATE, reason))
    return Plan(tuple(planned), group_units(planned))


def damage_reason(state: SettingState) -> str | None:
    """Why a setting with a damaged file is redone, and how (None when nothing is damaged)."""
    if not state.damage:
        return None
    more = f" and {len(state.damage) - 1} more" if len(state.damage) > 1 else ""
    return (
        f"damaged: {state.damage[0]}{more}; `run` quarantines it first and redoes what it "
        "held (`reprogrid verify --fix` quarantines it now)"
    )


def unit_weight(unit: EngineUnit) -> float:
    """How long a unit runs, relatively: the samples it generates times the bytes one decode
    step reads and bitsandbytes' slow-down (the cost model's step without its fixed parts;
    analysis/cost.py). Every setting of a grid has the same problems."""
    e = unit.engine
    per_token = e.model.size_b * bytes_per_weight(e.dtype, e.quant) * quant_factor(e.quant, COST)
    return per_token * sum(i.setting.n_samples for i in unit.settings)


def group_units(planned: Sequence[PlannedSetting]) -> tuple[EngineUnit, ...]:
    """GENERATE settings grouped by engine, settings in grid order, units the longest first
    (`unit_weight`; ties in first-seen grid order). The dispatcher asks Ray for them in this
    order and Ray starts them in it as GPUs free up: the longest first leaves short units to
    fill the end, which on many GPUs ends near max(work / GPUs, the longest unit); grid order
    put a 13B 8-bit unit last (analysis/schedule.py replays both; docs/cost.md)."""
    groups: dict[str, list[PlannedSetting]] = {}
    engines: dict[str, EngineSpec] = {}
    for item in planned:
        if item.action is not Action.GENERATE:
            continue
        key = engine_key(item.setting.engine)
        groups.setdefault(key, []).append(item)
        engines.setdefault(key, item.setting.engine)
    units = [
        EngineUnit(k, unit_engine(engines[k], [i.setting for i in v]), tuple(v))
        for k, v in groups.items()
    ]
    return tuple(sorted(units, key=unit_weight, reverse=True))


def unit_engine(engine: EngineSpec, settings: Sequence[SettingSpec]) -> EngineSpec:
    """The engine as the unit's worker loads it: its backend's definition decides (vLLM sizes
    its context to the unit's settings). Not part of any key."""
    return get_backend(engine.backend).unit_engine(engine, settings)
