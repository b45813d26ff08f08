"""A prepared grid against a store: what to do with each cell (the plan) and, once a run has
ended, where the grid stands. Both read the store's completeness index (storage/index.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.run.plan.planner import Plan, plan_settings
from orchestrator.run.prepare.grid import Cell
from orchestrator.run.prepare.prepared import PreparedGrid
from storage.index import build_index
from storage.schema import SettingStatus
from storage.store import Store


def make_plan(
    store: Store, prepared: PreparedGrid, retry_failed: bool = False, quarantine: bool = False
) -> Plan:
    """The grid minus what the store holds. `quarantine` (the writer, holding the lock) first
    moves damaged or foreign files aside, so their settings are redone and every table reads."""
    index = build_index(store, quarantine=quarantine)
    identities = prepared.execution_identities()
    return plan_settings(prepared.cells, index, retry_failed=retry_failed, execution=identities)


@dataclass(frozen=True)
class GridState:
    """Where the grid a run was asked for stands when the run ends (read from the store)."""

    complete: int
    skipped: int  # cannot run (reasons stored): reported, not a failure
    failed: int  # failed, in this run or an earlier one
    pending: int  # neither done nor failed (not reached, or its results are damaged)

    @property
    def done(self) -> bool:
        return self.failed == 0 and self.pending == 0

    def summary(self) -> str:
        return (
            f"grid {'complete' if self.done else 'INCOMPLETE'}: {self.complete} complete, "
            f"{self.skipped} skipped, {self.failed} failed, {self.pending} pending"
        )


def grid_state(store: Store, cells: Sequence[Cell]) -> GridState:
    index = build_index(store)
    counts = {"complete": 0, "skipped": 0, "failed": 0, "pending": 0}
    for cell in cells:
        cell = cell.stored_as(index)
        state = index.get(cell.key)
        if cell.skipped:
            counts["skipped"] += 1
        elif state is not None and state.complete:
            counts["complete"] += 1
        elif state is not None and state.status is SettingStatus.FAILED:
            counts["failed"] += 1
        else:
            counts["pending"] += 1
    return GridState(**counts)
