"""What `report` checks of its options before it reads more of the store than its settings: each
baseline value the user chose against the values the store's settings take, by check_report's
rule (`check_baseline_in_store`), so that a misspelt value (`--baseline template=instrct`) is
refused at once rather than after the grid and its intervals are computed. check_report checks
again, over the grid itself.

The values are those of the grid's rows: the complete settings that have a score, each with the
backend it claims when it was imported, and the template as the kind its row stores. An axis
this cannot tell from the settings alone (a row without its template kind, from an older store,
whose kind its model's config decides) is left to check_report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.analysis.baseline import AXES, check_baseline_in_store
from storage.damage import StoreDamage
from storage.integrity import setting_key_of
from storage.store import Store

COLUMNS = (
    "setting_key",
    "status",
    "template_kind",
    "decoding",
    "max_length",
    "precision",
    "backend",
    "claimed_backend",
)


def grid_values(settings: Sequence[Mapping[str, Any]], scored: set[str]) -> dict[str, set[Any]]:
    """Axis -> the values the grid's rows take (complete settings in `scored`); an axis some
    such row cannot tell is not given."""
    values: dict[str, set[Any]] = {axis: set() for axis in AXES}
    untold: set[str] = set()
    for row in settings:
        if row["status"] != "complete" or row["setting_key"] not in scored:
            continue
        claimed = row.get("claimed_backend")
        told = {
            "template": row.get("template_kind"),
            "decoding": row.get("decoding"),
            "max_length": row.get("max_length"),
            "precision": row.get("precision"),
            "backend": claimed if claimed is not None else row.get("backend"),
        }
        for axis, value in told.items():
            if value is None:
                untold.add(axis)
            else:
                values[axis].add(value)
    return {axis: v for axis, v in values.items() if axis not in untold}


def check_baseline_early(
    store: Store, baseline: Mapping[str, Any], damage: StoreDamage | None
) -> None:
    """Raise BaselineError for a baseline value no setting of the grid has (the settings left
    out for `damage` aside), from the settings table and the scores' listing alone."""
    skipped = damage.settings if damage is not None else frozenset()
    rows = store.read_table("settings", columns=COLUMNS).to_pylist()
    kept = [r for r in rows if r["setting_key"] not in skipped]
    scored = {setting_key_of(key) for key in store.view("scores").shards()}
    check_baseline_in_store(baseline, grid_values(kept, scored))
